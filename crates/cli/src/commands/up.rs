//! `corral up [-d]`, `corral down`, and the hidden `__daemon` the detached form runs.

use crate::project::{self, paths};
use crate::{CmdResult, Failure, output};
use corral_daemon::{DaemonError, DaemonOptions, Request};
use corral_events::rows::DaemonStatus;
use std::path::Path;

/// A line on stdout / stderr that never panics: a daemon must not die because whoever
/// started it stopped reading (`corral up | head -1`) or closed its stderr.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
use std::time::{Duration, Instant};

/// Foreground daemon with a live console.
/// With `allow_widened_access` (`--allow-widened-access`), the config's `auth = "none"`
/// and listen addresses beyond loopback apply (see [`corral_config::trust`]; the daemon
/// makes the decision and says what it did).
pub async fn run(config: Option<&Path>, detach: bool, allow_widened_access: bool) -> CmdResult {
    let cfg = project::load(config)?;
    if detach {
        return detached(&cfg, allow_widened_access).await;
    }
    serve(cfg, allow_widened_access).await
}

/// The detached daemon itself (`corral -c FILE __daemon`): its stdout and stderr are
/// `.corral/daemon.log`, which holds only the daemon's own lines (its start, warnings,
/// a panic): events are in the journal and each server's stderr in its own log, so
/// neither is copied there. The file is rotated like every other log.
pub async fn daemon(config: Option<&Path>, allow_widened_access: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let log = paths(&cfg).daemon_log;
    rotate_if_big(&log);
    tokio::spawn(keep_small(log));
    let opts = DaemonOptions {
        console: None,
        on_event: None,
        guard_exe: std::env::current_exe().ok(),
        allow_widened_access,
    };
    corral_daemon::run(cfg, opts, |i| announce(i, true), project::signalled())
        .await
        .map_err(|e: DaemonError| Failure::Op(e.to_string()))
}

/// Rotates `log`, which is this process's stdout and stderr, at the size every log
/// rotates at (one old file kept, `.1`), every minute; [`daemon`] checks once first,
/// before it writes a line, so a rotated file is exactly what earlier daemons left.
async fn keep_small(log: std::path::PathBuf) {
    let every = Duration::from_secs(60);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tick.tick().await;
        rotate_if_big(&log);
    }
}

fn rotate_if_big(log: &Path) {
    if std::fs::metadata(log).is_ok_and(|m| m.len() >= corral_supervisor::stderr::LOG_ROTATE_BYTES)
        && let Err(e) = rotate_own_output(log)
    {
        tell!("corral: cannot rotate {}: {e}", log.display());
    }
}

/// Renames `log` to `log.1` and points stdout and stderr at a new, empty `log`.
fn rotate_own_output(log: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut old = log.as_os_str().to_owned();
    old.push(".1");
    std::fs::rename(log, &old)?;
    let file = corral_supervisor::stderr::open_private(log)?;
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 onto our own standard descriptors; `file` stays open meanwhile.
        if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

async fn serve(cfg: corral_config::Config, allow_widened_access: bool) -> CmdResult {
    let style = output::Style::stderr();
    let opts = DaemonOptions {
        console: Some(corral_supervisor::Console::stderr()),
        on_event: Some(Box::new(move |ev, stderr_shown| {
            tell!("{}", output::render_console_event(ev, style, stderr_shown))
        })),
        guard_exe: std::env::current_exe().ok(),
        allow_widened_access,
    };
    corral_daemon::run(cfg, opts, |i| announce(i, false), project::signalled())
        .await
        .map_err(|e: DaemonError| Failure::Op(e.to_string()))
}

fn announce(info: &corral_daemon::DaemonInfo, detached: bool) {
    // The first line is the one scripts read: where the endpoint is.
    match (&info.endpoint, &info.http_error) {
        (Some(endpoint), _) => say!("corral: MCP endpoint {endpoint}"),
        (None, why) => {
            say!("corral: no HTTP endpoint");
            tell!(
                "corral: warning: {}",
                why.as_deref().unwrap_or("not listening")
            );
        }
    }
    for w in &info.warnings {
        tell!("corral: warning: {w}");
    }
    // The foreground `up` prints the token for its user (scripts read this line); the
    // detached daemon's stdout is `.corral/daemon.log`, which never holds it.
    match &info.token {
        Some(_) if detached => say!("corral: bearer token in .corral/token"),
        Some(t) => say!("corral: bearer token {t} (stored in .corral/token)"),
        None => say!("corral: no token required (gateway.auth = \"none\")"),
    }
    say!(
        "corral: daemon pid {}, control socket {}",
        info.pid,
        info.socket.display()
    );
}

/// `up -d`: start the daemon in the background (or report the running one).
async fn detached(cfg: &corral_config::Config, allow_widened_access: bool) -> CmdResult {
    let p = paths(cfg);
    if let Ok(status) = project::daemon_request(cfg, &Request::Status).await {
        let status: DaemonStatus = project::reply_as(status)?;
        println!(
            "corral: daemon already running (pid {}), MCP endpoint {}",
            status.pid,
            status.endpoint.as_deref().unwrap_or("none")
        );
        warn_of(&status);
        return Ok(());
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Op(format!("cannot find my own binary: {e}")))?;
    let daemon_args: &[&str] = if allow_widened_access {
        &[corral_config::trust::ALLOW_FLAG]
    } else {
        &[]
    };
    corral_daemon::client::connect_or_start_with(&p, &exe, &cfg.path, daemon_args)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    let status: DaemonStatus =
        project::reply_as(project::daemon_request(cfg, &Request::Status).await?)?;
    match status.endpoint.as_deref() {
        Some(endpoint) => println!("corral: MCP endpoint {endpoint}"),
        None => println!("corral: no HTTP endpoint"),
    }
    warn_of(&status);
    println!(
        "corral: daemon started (pid {}); logs in {}; `corral down` stops it",
        status.pid,
        p.daemon_log.display()
    );
    Ok(())
}

/// Says why the daemon has no HTTP endpoint, if it has none, and whatever else it warns
/// of (a guard that could not start).
pub fn warn_of(status: &DaemonStatus) {
    if let Some(why) = &status.http_error {
        eprintln!("corral: warning: {why}");
    }
    for w in &status.warnings {
        eprintln!("corral: warning: {w}");
    }
}

/// Whether process `pid` still runs: it exists and is not a zombie (a zombie has
/// exited; only its parent's `wait` is missing, which is not ours to do).
fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    }
    !is_zombie(pid)
}

/// Whether process `pid` (which `kill(pid, 0)` found) has exited and waits to be reaped:
/// its state as the process table says ([`corral_supervisor::platform::procs`]: Linux's
/// `/proc/PID/stat`, macOS's libproc); a process gone meanwhile counts as exited.
fn is_zombie(pid: i32) -> bool {
    u32::try_from(pid)
        .ok()
        .and_then(corral_supervisor::platform::procs::info)
        .is_none_or(|p| p.zombie)
}

/// `corral down`: returns once the daemon's process is gone.
pub async fn down(config: Option<&Path>) -> CmdResult {
    let cfg = project::load(config)?;
    let p = paths(&cfg);
    let reply = match project::daemon_request(&cfg, &Request::Shutdown).await {
        Ok(r) => r,
        Err(_) => {
            println!("corral: no daemon running for {}", cfg.path.display());
            return Ok(());
        }
    };
    // Done when the daemon let go of its lock and its process is gone: it lets go of
    // the lock last thing, but exiting takes a moment more, and whoever runs `down`
    // (a script, then `up` again) must find no daemon left.
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = reply["pid"].as_u64().and_then(|p| i32::try_from(p).ok());
    while corral_daemon::lock::is_locked(&p.pid) || pid.is_some_and(process_exists) {
        if Instant::now() > deadline {
            return Err(Failure::Op(format!(
                "the daemon (pid {}) did not exit within 60s of being told to stop; \
                 `kill {}` ends it",
                reply["pid"], reply["pid"]
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("corral: daemon stopped (pid {})", reply["pid"]);
    match reply["agents"].as_u64().unwrap_or(0) {
        0 => {}
        n => println!(
            "corral: {n} agent session{} ended with it; an agent using `corral mcp` gets \
             its tools back when it restarts its MCP connection (that starts a new daemon)",
            if n == 1 {
                " was connected and"
            } else {
                "s were connected and"
            }
        ),
    }
    Ok(())
}
