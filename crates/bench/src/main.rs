//! `corral-bench`: how much the supervisor costs compared with talking to a stdio MCP
//! server directly. Loopback pipes only, bounded in time; prints Markdown.
//!
//! ```text
//! cargo build --release --workspace --bins && cargo run --release -p corral-bench -- all
//! ```
//!
//! See BENCHMARKS.md at the repository root for what each figure means.

mod account;
mod bombs;
mod dashboard;
mod drain;
mod errors;
mod faults;
mod gateway;
mod http;
mod latency;
mod mcp;
mod peers;
mod procs;
mod proxy;
mod remote;
mod revisions;
mod scan_drain;
mod startup;
mod util;

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

const USAGE: &str = "\
corral-bench: benchmarks of Corral's stdio supervisor and gateway (loopback only)

USAGE:
    corral-bench [all|latency|drain|startup|gateway] [OPTIONS]
    corral-bench peers [OPTIONS]
    corral-bench faults [--sessions N] [--calls N]
    corral-bench scan-drain [--mib N] [--rounds N]
    corral-bench errors [--calls N]
    corral-bench proxy [--seconds N] [--connections C] [--rounds N]
    corral-bench bombs
    corral-bench revisions [--point-ms N]
    corral-bench remote [--point-ms N]
    corral-bench dashboard [--loads N] [--seconds N] [--rounds N] [--rate N]
    corral-bench dashboard --screenshots DIR -c CONFIG [--min-incidents N] [--logs UNIT]

BENCHMARKS:
    latency     echo round trips: bare client vs. through the supervisor, sequential
                and with 32 calls in flight, interleaved
    drain       stderr drain rate (1 GiB flood) and peak RSS, each run in a fresh process
    startup     10 servers started in parallel vs. the slowest one alone
    gateway     one tools/call through `corral mcp` (stdio) and `corral up` (HTTP) vs.
                the fixture called directly: latency, calls/s at 1, 8 and 32 in flight,
                the gateway's CPU per call, its idle RSS with 1 and 10 servers
    all         all four (the default)
    peers       Corral (stdio, bridge, HTTP) side by side with mcp-proxy and
                supergateway (and 1MCP if installed) in front of the same fixture:
                latency, calls/s at 1/8/32, a 1 MiB echo, tools/list with 500 tools,
                start → first call, RSS, CPU per call. Not part of `all`: install the
                peers first with scripts/install-bench-peers.sh (about 2 minutes)

    faults      load with faults: N HTTP sessions and N `corral mcp` bridges (default
                32 + 32) × calls (default 2000) against one daemon whose server is
                SIGKILLed every 2 s; every answer checked against its request (wrong
                or lost answers fail the run). Not part of `all`

    scan-drain  a dev process printing N MiB (default 1024) of mixed log through its
                stdout, alert scanning off vs. on, alternating rounds (default 2):
                drain time, MiB/s, lines/s, supervisor CPU per GiB. Not part of `all`

    errors      one get_errors with every ring full (200 alerts, 1000 failed requests,
                500 browser errors, all distinct), in-process: p50/p99 of N calls
                (default 300). Not part of `all`

    proxy       the dev proxy (`corral proxy --standalone`) vs. the same target direct and
                through nginx (Debian's /usr/sbin/nginx) as a reverse proxy: req/s, p50/p99
                and proxy CPU per request with C keep-alive connections (default 16), N s
                per round (default 5), rounds interleaved (default 3); time to last byte of
                a 1 MiB HTML page (injection). Not part of `all`

    bombs       the dev proxy's peak RSS (VmHWM), each in a fresh process, against a
                gzip-bombed script to source-map, 64 reports naming bm.js?v=N with one
                4 MB map, an 815 KB gzip HTML bomb and a 100 KB gzip 500 page. Not part
                of `all`

    revisions   one `corral up`: the same tools/call from a 2025 session client and a
                stateless 2026-07-28 client over HTTP, interleaved: p50/p99 and gateway
                CPU per call with 1 client, calls/s with 8 of each kind (4 rounds of
                --point-ms, default 2000). Not part of `all`

    remote      a remote (url) server's tool (the TypeScript SDK 2.x over HTTP) from the
                same client, directly and through `corral up`: p50/p99 with 1 client,
                calls/s with 8, Corral's CPU per call (4 rounds of --point-ms, default
                2000). Needs the test peers (./scripts/install-peers.sh). Not part of `all`

    dashboard   the dashboard in headless Chromium (Debian's `chromium`, over the
                DevTools protocol), against `corral up -d` of a generated project: time
                from the login link and from the app's navigation start to the first
                overview row, and to first contentful paint, over N cold loads (default 7;
                new tab, no cache, no cookies, a fresh login each); the bytes of a first
                visit per request; the daemon's CPU while a unit prints --rate lines/s
                (default 1000) with and without a dashboard on its logs view (--rounds
                windows of each, default 2, of --seconds s, default 20), and the
                renderer's. With --screenshots DIR: PNGs of every view of the running
                project CONFIG instead (scripts/dashboard-screenshots.sh). Not part of
                `all`

OPTIONS:
    --calls N       sequential calls per path (default 20000; warm-up is 1000; `peers`:
                    at most, each block is also bounded in time)
    --flood-mib N   size of the stderr flood in MiB (default 1024)
    --workers N     tokio worker threads for the supervisor (default 2)
    --point-ms N    gateway, peers: length of one round of one throughput point in ms
                    (default 1500 for gateway, 1000 for peers; 2 rounds per point)
    -h, --help      print this help

PROFILING:
    corral-bench gateway-profile stdio|http|http-2026 N SECS
                    start one gateway, print its pid, wait 1 s (attach `perf record -p`),
                    keep N calls in flight (HTTP: N sessions; http-2026: N
                    stateless clients) for SECS s, print calls/s
                    and CPU per call

The fixture server (corral-fixture) and, for `gateway` and `peers`, the `corral` binary
must sit next to this binary: build them with `cargo build --release --workspace --bins`.";

/// What to run, from the command line.
#[derive(Debug, Clone)]
pub struct Opts {
    pub calls: usize,
    pub flood_mib: u64,
    pub point: Duration,
}

fn gateway_profile(args: &[String]) -> ExitCode {
    let (Some(route), Some(n), Some(secs)) = (
        args.first(),
        args.get(1).and_then(|v| v.parse::<usize>().ok()),
        args.get(2).and_then(|v| v.parse::<f64>().ok()),
    ) else {
        eprintln!("corral-bench: usage: gateway-profile stdio|http|http-2026 N SECS\n\n{USAGE}");
        return ExitCode::from(2);
    };
    let result = util::fixture_path().and_then(|fixture| {
        let corral = util::corral_path()?;
        gateway::profile(
            &fixture,
            &corral,
            route,
            n.max(1),
            Duration::from_secs_f64(secs.clamp(0.1, 600.0)),
        )
    });
    finish(result)
}

fn scan_drain_main(args: &[String]) -> ExitCode {
    let (mut mib, mut rounds) = (1024u64, 2usize);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let n = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|n| *n > 0);
        match (arg.as_str(), n) {
            ("--mib", Some(n)) => mib = n,
            ("--rounds", Some(n)) => rounds = n as usize,
            _ => {
                eprintln!("corral-bench: scan-drain takes --mib N and --rounds N\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    println!("{}", util::machine_header());
    finish(scan_drain::run(mib, rounds))
}

fn faults_main(args: &[String]) -> ExitCode {
    let mut opts = faults::FaultOpts {
        sessions: 32,
        calls: 2000,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let n = it
            .next()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0);
        match (arg.as_str(), n) {
            ("--sessions", Some(n)) => opts.sessions = n,
            ("--calls", Some(n)) => opts.calls = n,
            _ => {
                eprintln!("corral-bench: faults takes --sessions N and --calls N\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let result = util::fixture_path().and_then(|fixture| {
        let corral = util::corral_path()?;
        println!("{}", util::machine_header());
        faults::run(&fixture, &corral, &opts)
    });
    finish(result)
}

fn revisions_main(args: &[String]) -> ExitCode {
    let point = match args {
        [] => Duration::from_millis(2000),
        [flag, n] if flag == "--point-ms" => match n.parse::<u64>() {
            Ok(n) if n > 0 => Duration::from_millis(n),
            _ => return usage("revisions: --point-ms takes a positive number"),
        },
        _ => return usage("revisions takes --point-ms N"),
    };
    let result = util::fixture_path().and_then(|fixture| {
        let corral = util::corral_path()?;
        println!("{}", util::machine_header());
        revisions::run(&fixture, &corral, point)
    });
    finish(result)
}

fn remote_main(args: &[String]) -> ExitCode {
    let point = match args {
        [] => Duration::from_millis(2000),
        [flag, n] if flag == "--point-ms" => match n.parse::<u64>() {
            Ok(n) if n > 0 => Duration::from_millis(n),
            _ => return usage("remote: --point-ms takes a positive number"),
        },
        _ => return usage("remote takes --point-ms N"),
    };
    let result = util::corral_path().and_then(|corral| {
        println!("{}", util::machine_header());
        remote::run(&corral, point)
    });
    finish(result)
}

fn dashboard_main(args: &[String]) -> ExitCode {
    let mut bench = dashboard::BenchOpts {
        loads: 7,
        seconds: 20,
        rounds: 2,
        rate: 1000,
    };
    let (mut shots, mut config, mut min_incidents, mut logs) = (None, None, 1u64, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(value) = it.next() else {
            return usage(&format!("dashboard: {arg} needs a value"));
        };
        let n = value.parse::<u64>().ok().filter(|n| *n > 0);
        match (arg.as_str(), n) {
            ("--screenshots", _) => shots = Some(std::path::PathBuf::from(value)),
            ("-c" | "--config", _) => config = Some(std::path::PathBuf::from(value)),
            ("--min-incidents", Some(n)) => min_incidents = n,
            ("--logs", _) => logs = Some(value.clone()),
            ("--loads", Some(n)) => bench.loads = n as usize,
            ("--seconds", Some(n)) => bench.seconds = n,
            ("--rounds", Some(n)) => bench.rounds = n as usize,
            ("--rate", Some(n)) => bench.rate = n.min(1_000_000) as u32,
            _ => return usage(&format!("dashboard: unexpected {arg} {value}")),
        }
    }
    let corral = match util::corral_path() {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("corral-bench: {msg}");
            return ExitCode::FAILURE;
        }
    };
    match (shots, config) {
        (Some(out), Some(config)) => {
            let opts = dashboard::ShotOpts {
                config,
                out,
                min_incidents,
                logs,
            };
            finish(dashboard::screenshots(&corral, &opts))
        }
        (Some(_), None) => usage("dashboard --screenshots DIR needs -c CONFIG"),
        (None, _) => {
            let result = util::fixture_path().and_then(|fixture| {
                println!("{}", util::machine_header());
                dashboard::run(&corral, &fixture, &bench)
            });
            finish(result)
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("corral-bench: {msg}\n\n{USAGE}");
    ExitCode::from(2)
}

fn proxy_main(args: &[String]) -> ExitCode {
    let mut opts = proxy::ProxyOpts {
        seconds: Duration::from_secs(5),
        connections: 16,
        rounds: 3,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let n = it
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|n| *n > 0);
        match (arg.as_str(), n) {
            ("--seconds", Some(n)) => opts.seconds = Duration::from_secs(n),
            ("--connections", Some(n)) => opts.connections = n as usize,
            ("--rounds", Some(n)) => opts.rounds = n as usize,
            _ => {
                eprintln!(
                    "corral-bench: proxy takes --seconds N, --connections C and --rounds N\n\n{USAGE}"
                );
                return ExitCode::from(2);
            }
        }
    }
    println!("{}", util::machine_header());
    match proxy::run(util::corral_path(), &opts) {
        Ok(report) => {
            println!("{report}");
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

/// Prints a benchmark's tables, or its error; the exit code says which.
fn finish(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("corral-bench: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(proxy::TARGET_COMMAND) {
        return proxy::target_main();
    }
    if args.first().map(String::as_str) == Some(bombs::CHILD_COMMAND) {
        let name = args.get(1).map_or("", String::as_str);
        return finish(bombs::child_main(name));
    }
    if args.first().map(String::as_str) == Some(dashboard::PRINTER_COMMAND) {
        return dashboard::printer_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("dashboard") {
        return dashboard_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("bombs") {
        println!("{}", util::machine_header());
        return finish(bombs::run());
    }
    if args.first().map(String::as_str) == Some("proxy") {
        return proxy_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some(drain::CHILD_COMMAND) {
        return drain::child_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("gateway-profile") {
        return gateway_profile(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("revisions") {
        return revisions_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("remote") {
        return remote_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("faults") {
        return faults_main(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("errors") {
        let calls = match args.get(1..).unwrap_or_default() {
            [] => 300,
            [flag, n] if flag == "--calls" => match n.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("corral-bench: errors takes --calls N\n\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!("corral-bench: errors takes --calls N\n\n{USAGE}");
                return ExitCode::from(2);
            }
        };
        println!("{}", util::machine_header());
        return finish(errors::run(calls));
    }
    if args.first().map(String::as_str) == Some("scan-drain") {
        return scan_drain_main(&args[1..]);
    }
    let mut which = None;
    let mut opts = Opts {
        calls: 20_000,
        flood_mib: 1024,
        point: Duration::from_millis(1500),
    };
    let mut point_set = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--calls" | "--flood-mib" | "--workers" | "--point-ms" => {
                let Some(n) = it.next().and_then(|v| v.parse::<u64>().ok()) else {
                    eprintln!("corral-bench: {arg} needs a whole number\n\n{USAGE}");
                    return ExitCode::from(2);
                };
                match arg.as_str() {
                    "--calls" => opts.calls = (n as usize).max(1),
                    "--flood-mib" => opts.flood_mib = n,
                    "--point-ms" => {
                        opts.point = Duration::from_millis(n.max(10));
                        point_set = true;
                    }
                    _ => util::WORKERS.store((n as usize).max(1), Ordering::Relaxed),
                }
            }
            "all" | "latency" | "drain" | "startup" | "gateway" | "peers" if which.is_none() => {
                which = Some(arg.clone())
            }
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

    // Fail before any benchmark runs if the gateway binary is missing.
    let corral =
        match (which == "all" || which == "gateway" || which == "peers").then(util::corral_path) {
            Some(Err(msg)) => {
                eprintln!("corral-bench: {msg}");
                return ExitCode::FAILURE;
            }
            Some(Ok(p)) => Some(p),
            None => None,
        };

    println!("{}", util::machine_header());
    if which == "peers" {
        println!(
            "Settings: `peers`, at most {} sequential calls per gateway.\n",
            opts.calls
        );
    } else {
        println!(
            "Settings: `{which}`, {} sequential calls per path, {} MiB flood, {} tokio worker \
             thread(s) for the supervisor.\n",
            opts.calls,
            opts.flood_mib,
            util::WORKERS.load(Ordering::Relaxed)
        );
    }
    let run = |name: &str| which == "all" || which == name;
    let result = (|| -> Result<(), String> {
        if which == "peers" {
            let corral = corral.as_ref().expect("looked up for peers");
            let po = peers::PeersOpts {
                calls: opts.calls,
                point: if point_set {
                    opts.point
                } else {
                    Duration::from_millis(1000)
                },
            };
            println!("{}", peers::run(&fixture, corral, &po)?);
            return Ok(());
        }
        if run("latency") {
            println!("{}", latency::run(&fixture, &opts)?);
        }
        if run("drain") {
            println!("{}", drain::run(&opts)?);
        }
        if run("startup") {
            println!("{}", startup::run(&fixture)?);
        }
        if let Some(corral) = &corral {
            let gw = gateway::GatewayOpts {
                calls: opts.calls,
                point: opts.point,
            };
            println!("{}", gateway::run(&fixture, corral, &gw)?);
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
