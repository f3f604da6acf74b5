//! The `corral` command line: argument parsing, and one module per command.
//!
//! Commands that need servers (`tools`, `call`, `events --standalone`) start them
//! in-process through the supervisor, do their work, and stop them cleanly before
//! exiting, on success, on failure and on Ctrl-C alike.
//!
//! Exit codes (ARCHITECTURE.md, "Contracts: CLI"): 0 ok; 1 the operation failed (message on stderr); 2 usage or
//! config error.

mod args;
mod commands;
mod output;
mod project;

use std::process::ExitCode;

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// Exit 1: the operation failed.
    Op(String),
    /// Exit 2: bad usage or config.
    Usage(String),
    /// This exit code, nothing printed: the exit code of a process run in the foreground
    /// (`corral run --standalone`).
    Exit(u8),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Op(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Exit(code) => *code,
        }
    }
}

/// Result of a command.
pub type CmdResult = Result<(), Failure>;

/// Tokio worker threads: `CORRAL_WORKER_THREADS`, else 1. Forwarding a call costs a few
/// µs of CPU, so one worker carries any agent load (≈ 150k calls/s measured); a second
/// one only adds cross-thread wake-ups: with 2, CPU per call was 10 µs instead of 6 and
/// throughput 20% lower (BENCHMARKS.md, "Worker threads").
fn worker_threads() -> usize {
    std::env::var("CORRAL_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| (1..=64).contains(n))
        .unwrap_or(1)
}

/// Parses the arguments, runs the command, and maps failures to exit codes.
pub fn run() -> ExitCode {
    let cli = <args::Cli as clap::Parser>::parse();
    if matches!(cli.command, args::Command::Guard) {
        corral_supervisor::guard::run_guard();
        return ExitCode::SUCCESS;
    }
    // Before any thread starts: descriptors for every child, agent and connection.
    let _ = corral_supervisor::spawn::raise_nofile_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
        .expect("start the tokio runtime");
    match runtime.block_on(commands::dispatch(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            let msg = match &f {
                Failure::Op(m) | Failure::Usage(m) => m.as_str(),
                Failure::Exit(_) => "",
            };
            if !msg.is_empty() {
                // Messages can quote servers (their stderr tail, their errors).
                eprintln!("corral: {}", output::Style::stderr().shown(msg));
            }
            ExitCode::from(f.code())
        }
    }
}
