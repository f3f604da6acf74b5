//! The `corral` command line: argument parsing, and one module per command.
//!
//! Commands that need servers (`tools`, `call`, `events --standalone`) start them
//! in-process through the supervisor, do their work, and stop them cleanly before
//! exiting, on success, on failure and on Ctrl-C alike.
//!
//! Exit codes (ARCHITECTURE.md, "Contracts: CLI"): 0 ok; 1 the operation failed (message on stderr); 2 usage or
//! config error.
//!
//! A closed stdout (`corral ps | head -1`) ends a command quietly: `println!` and
//! `print!` in this crate are [`stdout`]'s, which never panic; the first write that finds
//! the pipe closed stops all further output and ends a command that follows or waits
//! (as Ctrl-C would: servers started in-process are stopped cleanly), and the exit code
//! is the command's own (0 when it did its work). SIGPIPE stays ignored, as Rust sets
//! it: a daemon or bridge must never die of a pipe to a child or an agent. Another
//! write error on stdout (a full disk) ends the command too, with exit 1 and a message.

/// `println!` through [`stdout::write`]: a closed stdout is not a panic.
macro_rules! println {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` through [`stdout::write`].
macro_rules! print {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

/// `eprintln!` that ignores a closed stderr.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod commands;
mod output;
mod project;

use std::process::ExitCode;

/// The command's stdout: written without panicking, and given up on at its first
/// failed write (see the crate docs).
pub(crate) mod stdout {
    use std::io::Write as _;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    static CLOSED: AtomicBool = AtomicBool::new(false);
    /// A write error other than a closed pipe, for the exit code and message.
    static FAILED: Mutex<Option<String>> = Mutex::new(None);
    static CLOSING: tokio::sync::Notify = tokio::sync::Notify::const_new();

    /// Writes `args` to stdout unless a write failed before.
    pub fn write(args: std::fmt::Arguments) {
        if CLOSED.load(Ordering::SeqCst) {
            return;
        }
        if let Err(e) = std::io::stdout().lock().write_fmt(args) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                *FAILED.lock().unwrap() = Some(e.to_string());
            }
            CLOSED.store(true, Ordering::SeqCst);
            CLOSING.notify_waiters();
        }
    }

    /// Resolves once a write to stdout failed.
    pub async fn closed() {
        let notified = CLOSING.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if CLOSED.load(Ordering::SeqCst) {
            return;
        }
        notified.await
    }

    /// The write error that was not a closed pipe, if one happened.
    pub fn failure() -> Option<String> {
        FAILED.lock().unwrap().clone()
    }
}

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
    if matches!(cli.command, args::Command::Remote) {
        return corral_remote::main();
    }
    // Before any thread starts: descriptors for every child, agent and connection.
    let _ = corral_supervisor::spawn::raise_nofile_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
        .expect("start the tokio runtime");
    let result = runtime.block_on(commands::dispatch(cli));
    let result = match (result, stdout::failure()) {
        (Ok(()), Some(e)) => Err(Failure::Op(format!("cannot write to stdout: {e}"))),
        (result, _) => result,
    };
    match result {
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
