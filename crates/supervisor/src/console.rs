//! The live console: children's stderr lines, dimmed and prefixed, on our own stderr.
//!
//! Writes go through a bounded queue to one writer thread. When the terminal (or whatever
//! our stderr is) cannot keep up, lines are dropped and counted instead of blocking the
//! drain, because a blocked drain would block the child on its full stderr pipe.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};

const QUEUE: usize = 4096;

/// A cloneable handle to the console writer.
#[derive(Clone, Debug)]
pub struct Console {
    tx: SyncSender<String>,
    dropped: Arc<AtomicU64>,
    color: bool,
}

impl Console {
    /// A console writing to this process's stderr; colored when stderr is a terminal.
    pub fn stderr() -> Console {
        Self::to_writer(std::io::stderr(), std::io::stderr().is_terminal())
    }

    /// A console writing to any writer (tests).
    pub fn to_writer(mut out: impl Write + Send + 'static, color: bool) -> Console {
        let (tx, rx) = mpsc::sync_channel::<String>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let lost = dropped.clone();
        std::thread::Builder::new()
            .name("corral-console".into())
            .spawn(move || {
                while let Ok(line) = rx.recv() {
                    let n = lost.swap(0, Ordering::Relaxed);
                    if n > 0 {
                        let _ =
                            writeln!(out, "[corral] {n} console lines dropped (output too fast)");
                    }
                    let _ = out.write_all(line.as_bytes());
                }
            })
            .expect("spawn console thread");
        Console { tx, dropped, color }
    }

    /// Queues a dimmed `prefix line` (plain when not a terminal). Never blocks.
    pub fn dim_line(&self, prefix: &str, line: &str) {
        let text = if self.color {
            format!("\x1b[2m{prefix}{line}\x1b[0m\n")
        } else {
            format!("{prefix}{line}\n")
        };
        self.send(text);
    }

    fn send(&self, text: String) {
        match self.tx.try_send(text) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}
