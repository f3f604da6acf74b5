//! `corral-bench`: how much the supervisor costs compared with talking to a stdio MCP
//! server directly. Loopback pipes only, bounded in time; prints Markdown.
//!
//! ```text
//! cargo build --release --workspace --bins && cargo run --release -p corral-bench -- all
//! ```
//!
//! See BENCHMARKS.md at the repository root for what each figure means.

mod drain;
mod latency;
mod startup;
mod util;

use std::process::ExitCode;
use std::sync::atomic::Ordering;

const USAGE: &str = "\
corral-bench: benchmarks of Corral's stdio supervisor (loopback pipes only)

USAGE:
    corral-bench [all|latency|drain|startup] [OPTIONS]

BENCHMARKS:
    latency     echo round trips: bare client vs. through the supervisor, sequential
                and with 32 calls in flight, interleaved
    drain       stderr drain rate (1 GiB flood) and peak RSS, each run in a fresh process
    startup     10 servers started in parallel vs. the slowest one alone
    all         all three (the default)

OPTIONS:
    --calls N       sequential calls per path (default 20000; warm-up is 1000)
    --flood-mib N   size of the stderr flood in MiB (default 1024)
    --workers N     tokio worker threads for the supervisor (default 2)
    -h, --help      print this help

The fixture server (corral-fixture) must sit next to this binary: build both with
`cargo build --release --workspace --bins`.";

/// What to run, from the command line.
#[derive(Debug, Clone)]
pub struct Opts {
    pub calls: usize,
    pub flood_mib: u64,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(drain::CHILD_COMMAND) {
        return drain::child_main(&args[1..]);
    }
    let mut which = None;
    let mut opts = Opts {
        calls: 20_000,
        flood_mib: 1024,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--calls" | "--flood-mib" | "--workers" => {
                let Some(n) = it.next().and_then(|v| v.parse::<u64>().ok()) else {
                    eprintln!("corral-bench: {arg} needs a whole number\n\n{USAGE}");
                    return ExitCode::from(2);
                };
                match arg.as_str() {
                    "--calls" => opts.calls = (n as usize).max(1),
                    "--flood-mib" => opts.flood_mib = n,
                    _ => util::WORKERS.store((n as usize).max(1), Ordering::Relaxed),
                }
            }
            "all" | "latency" | "drain" | "startup" if which.is_none() => which = Some(arg.clone()),
            other => {
                eprintln!("corral-bench: unexpected argument '{other}'\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let which = which.unwrap_or_else(|| "all".to_owned());
    let fixture = match util::fixture_path() {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("corral-bench: {msg}");
            return ExitCode::FAILURE;
        }
    };

    println!("{}", util::machine_header());
    println!(
        "Settings: `{which}`, {} sequential calls per path, {} MiB flood, {} tokio worker \
         thread(s) for the supervisor.\n",
        opts.calls,
        opts.flood_mib,
        util::WORKERS.load(Ordering::Relaxed)
    );
    let run = |name: &str| which == "all" || which == name;
    let result = (|| -> Result<(), String> {
        if run("latency") {
            println!("{}", latency::run(&fixture, &opts)?);
        }
        if run("drain") {
            println!("{}", drain::run(&opts)?);
        }
        if run("startup") {
            println!("{}", startup::run(&fixture)?);
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            println!(
                "_Load average after the run: {}_",
                util::loadavg().unwrap_or_else(|| "?".into())
            );
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("corral-bench: {msg}");
            ExitCode::FAILURE
        }
    }
}
