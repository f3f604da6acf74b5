//! This process's stdin/stdout as non-blocking async streams.
//!
//! `tokio::io::stdin()`/`stdout()` do every read and write as a blocking-pool job: two
//! thread hand-offs per message each way, which measured ≈ 100 µs of CPU per relayed call
//! (BENCHMARKS.md, "Where the time goes"). When our stdio is a pipe or a socket — as it is
//! when an agent launches `corral mcp` — it is registered with the reactor instead, in
//! non-blocking mode. A terminal or a file falls back to tokio's blocking wrappers.

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
    if let Some(fd) = dup(std::io::stdin().as_fd()) {
        match kind(&fd) {
            Kind::Pipe => {
                if let Ok(r) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
                    return Box::pin(r);
                }
            }
            Kind::Socket => {
                if let Some(s) = socket(fd) {
                    return Box::pin(s);
                }
            }
            Kind::Other => {}
        }
    }
    Box::pin(tokio::io::stdin())
}

fn output() -> Output {
    if let Some(fd) = dup(std::io::stdout().as_fd()) {
        match kind(&fd) {
            Kind::Pipe => {
                if let Ok(w) = tokio::net::unix::pipe::Sender::from_owned_fd(fd) {
                    return Box::pin(w);
                }
            }
            Kind::Socket => {
                if let Some(s) = socket(fd) {
                    return Box::pin(s);
                }
            }
            Kind::Other => {}
        }
    }
    Box::pin(tokio::io::stdout())
}

enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: &OwnedFd) -> Kind {
    match std::fs::File::from(fd.try_clone().expect("dup")).metadata() {
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
