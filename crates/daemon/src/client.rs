//! The client side of the control socket, and starting a daemon when none runs.

use crate::lock::{FileLock, is_locked};
use crate::paths::Paths;
use crate::protocol::{Reply, Request};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long a client waits for a daemon it started to open its socket.
pub const START_WAIT: Duration = Duration::from_secs(20);

/// Why talking to the daemon failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no daemon runs for this project (start one with `corral up -d`)")]
    NotRunning,
    #[error("the daemon closed the connection without answering")]
    NoReply,
    #[error("the daemon answered something unreadable: {0}")]
    BadReply(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon did not start: {0}")]
    StartFailed(String),
}

/// Connects to the running daemon, if any. A socket file with no daemon behind it (the
/// daemon died) is removed — but only when the daemon's lock is free, so a daemon that
/// is still starting up is never mistaken for a dead one.
pub async fn connect(paths: &Paths) -> Result<UnixStream, ClientError> {
    match UnixStream::connect(&paths.socket).await {
        Ok(s) => Ok(s),
        Err(_) => {
            if paths.socket.exists() && !is_locked(&paths.pid) {
                let _ = std::fs::remove_file(&paths.socket);
            }
            Err(ClientError::NotRunning)
        }
    }
}

/// Sends one request and reads its one-line reply.
pub async fn request(paths: &Paths, req: &Request) -> Result<Reply, ClientError> {
    let stream = connect(paths).await?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_string(req).expect("requests serialize");
    line.push('\n');
    write.write_all(line.as_bytes()).await?;
    let mut reader = BufReader::new(read);
    let reply = read_reply(&mut reader).await?;
    serde_json::from_slice(reply.trim_ascii())
        .map_err(|_| ClientError::BadReply(String::from_utf8_lossy(&reply).into_owned()))
}

/// Reads one reply line from the daemon, at most [`MAX_REPLY`](crate::protocol::MAX_REPLY)
/// bytes of it (a longer one is discarded as it streams and is an error).
pub async fn read_reply(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> Result<Vec<u8>, ClientError> {
    use corral_supervisor::lines::{LineRead, read_line_bounded};
    let max = crate::protocol::MAX_REPLY;
    let mut line = Vec::new();
    match read_line_bounded(reader, &mut line, max).await? {
        LineRead::Line => Ok(line),
        LineRead::Eof => Err(ClientError::NoReply),
        LineRead::TooLong { len } => Err(ClientError::BadReply(format!(
            "a reply of {len} bytes, over the {} MiB limit",
            max >> 20
        ))),
    }
}

/// Opens a streaming request (events, logs, mcp): returns the connection after sending
/// the request line.
pub async fn open(paths: &Paths, req: &Request) -> Result<UnixStream, ClientError> {
    let mut stream = connect(paths).await?;
    send(&mut stream, req).await?;
    Ok(stream)
}

/// Writes one request line to a daemon connection.
pub async fn send(
    stream: &mut (impl tokio::io::AsyncWrite + Unpin),
    req: &Request,
) -> std::io::Result<()> {
    let mut line = serde_json::to_string(req).expect("requests serialize");
    line.push('\n');
    stream.write_all(line.as_bytes()).await
}

/// Connects to the project's daemon, starting it detached when none runs. Race-free:
/// clients that find no daemon take the spawn lock in turn, and each looks again before
/// starting one, so five agents starting at once make exactly one daemon.
pub async fn connect_or_start(
    paths: &Paths,
    exe: &Path,
    config: &Path,
) -> Result<UnixStream, ClientError> {
    connect_or_start_with(paths, exe, config, &[]).await
}

/// [`connect_or_start`], with `daemon_args` after `__daemon` when it starts one (`corral
/// up -d --allow-widened-access` passes its flag on).
pub async fn connect_or_start_with(
    paths: &Paths,
    exe: &Path,
    config: &Path,
    daemon_args: &[&str],
) -> Result<UnixStream, ClientError> {
    if let Ok(s) = connect(paths).await {
        return Ok(s);
    }
    paths.prepare()?;
    let _spawn = FileLock::lock(&paths.spawn_lock).await?;
    if let Ok(s) = connect(paths).await {
        return Ok(s);
    }
    if !is_locked(&paths.pid) {
        spawn_detached(paths, exe, config, daemon_args)?;
    }
    let deadline = Instant::now() + START_WAIT;
    loop {
        if let Ok(s) = connect(paths).await {
            return Ok(s);
        }
        if Instant::now() > deadline {
            return Err(ClientError::StartFailed(format!(
                "no control socket after {}s; see {}",
                START_WAIT.as_secs(),
                paths.daemon_log.display()
            )));
        }
        if !is_locked(&paths.pid) && started_and_died(paths) {
            return Err(ClientError::StartFailed(last_lines(&paths.daemon_log)));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Starts `exe -c config __daemon [daemon_args]` in its own session, output to the
/// daemon log. The process is reaped by a thread so it never lingers as a zombie of this
/// client.
pub fn spawn_detached(
    paths: &Paths,
    exe: &Path,
    config: &Path,
    daemon_args: &[&str],
) -> Result<(), ClientError> {
    // 0600: the daemon's console (servers' stderr, redacted, and events) goes there.
    let log = corral_supervisor::stderr::open_private(&paths.daemon_log)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("-c")
        .arg(config)
        .arg("__daemon")
        .args(daemon_args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .current_dir(config.parent().unwrap_or(Path::new("/")));
    // SAFETY: setsid is async-signal-safe; it detaches from our terminal and session.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let spawned = paths.state_dir.join("daemon.spawned");
    let _ = std::fs::remove_file(&spawned);
    corral_supervisor::stderr::open_private(&spawned)?
        .write_all(child.id().to_string().as_bytes())?;
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

fn started_and_died(paths: &Paths) -> bool {
    let Some(pid) = std::fs::read_to_string(paths.state_dir.join("daemon.spawned"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    else {
        return false;
    };
    // SAFETY: signal 0 checks existence only.
    unsafe { libc::kill(pid, 0) != 0 }
}

fn last_lines(path: &Path) -> String {
    let text = corral_gateway::tools::tail_of_file(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(5)..].join("\n");
    if tail.is_empty() {
        format!("it exited at once; see {}", path.display())
    } else {
        tail
    }
}
