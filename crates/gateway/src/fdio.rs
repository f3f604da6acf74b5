//! File descriptors as non-blocking async streams: this process's stdin/stdout, or an
//! agent's pipes handed to the daemon by a bridge.
//!
//! `tokio::io::stdin()`/`stdout()` do every read and write as a blocking-pool job: two
//! thread hand-offs per message each way, which measured ≈ 100 µs of CPU per relayed call
//! (BENCHMARKS.md, "Where the time goes"). A pipe or a socket — what an agent gives
//! `corral mcp` — is registered with the reactor instead, in non-blocking mode. A terminal
//! or a file falls back to tokio's blocking wrappers (stdio only).

use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};

pub type Input = Pin<Box<dyn AsyncRead + Send>>;
pub type Output = Pin<Box<dyn AsyncWrite + Send>>;

/// Stdin and stdout for async use; must be called inside the runtime.
pub fn stdio() -> (Input, Output) {
    (input(), output())
}

fn input() -> Input {
    if let Some(fd) = dup(std::io::stdin().as_fd())
        && let Some(r) = reader(fd)
    {
        return r;
    }
    Box::pin(tokio::io::stdin())
}

fn output() -> Output {
    if let Some(fd) = dup(std::io::stdout().as_fd())
        && let Some(w) = writer(fd)
    {
        return w;
    }
    Box::pin(tokio::io::stdout())
}

/// Whether `fd` is a pipe or a socket (so [`reader`] / [`writer`] take it).
pub fn is_pipe_or_socket(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    dup(fd).is_some_and(|fd| !matches!(kind(&fd), Kind::Other))
}

/// A pipe's read end or a socket as an async reader; `None` for anything else.
pub fn reader(fd: OwnedFd) -> Option<Input> {
    match kind(&fd) {
        Kind::Pipe => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::pin(r) as Input),
        Kind::Socket => socket(fd).map(|s| Box::pin(s) as Input),
        Kind::Other => None,
    }
}

/// A pipe's write end or a socket as an async writer; `None` for anything else.
pub fn writer(fd: OwnedFd) -> Option<Output> {
    match kind(&fd) {
        Kind::Pipe => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::pin(w) as Output),
        Kind::Socket => socket(fd).map(|s| Box::pin(s) as Output),
        Kind::Other => None,
    }
}

enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: &OwnedFd) -> Kind {
    let Ok(copy) = fd.try_clone() else {
        return Kind::Other;
    };
    match std::fs::File::from(copy).metadata() {
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            if t.is_fifo() {
                Kind::Pipe
            } else if t.is_socket() {
                Kind::Socket
            } else {
                Kind::Other
            }
        }
        Err(_) => Kind::Other,
    }
}

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(std).ok()
}
