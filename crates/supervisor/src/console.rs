//! The live console: children's stderr lines, dimmed and prefixed, on our own stderr.
//!
//! Writes go through a bounded queue to one writer thread. When the terminal (or whatever
//! our stderr is) cannot keep up, lines are dropped and counted instead of blocking the
//! drain, because a blocked drain would block the child on its full stderr pipe. The
//! queue is bounded in bytes as well as in lines: 4096 lines of up to 8 KiB could hold
//! 32 MiB (seen as a detached daemon's memory growing by 10 MiB under a stderr flood on
//! a loaded machine, its `daemon.log` writer scheduled too rarely to keep up).
//!
//! Text from servers is untrusted: on a terminal it is passed through
//! [`escape_for_terminal`] first, here and wherever the CLI prints it.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};

const QUEUE: usize = 4096;
/// The most text queued at once; a line beyond it is dropped (and counted).
const QUEUE_BYTES: usize = 1024 * 1024;

/// A cloneable handle to the console writer.
#[derive(Clone, Debug)]
pub struct Console {
    tx: SyncSender<String>,
    dropped: Arc<AtomicU64>,
    /// Bytes of text queued and not yet written.
    queued: Arc<AtomicUsize>,
    color: bool,
}

impl Console {
    /// A console writing to this process's stderr; colored when stderr is a terminal.
    pub fn stderr() -> Console {
        Self::to_writer(std::io::stderr(), std::io::stderr().is_terminal())
    }

    /// A console writing to any writer (tests); `color` says it is a terminal: lines are
    /// dimmed and their control characters escaped.
    pub fn to_writer(mut out: impl Write + Send + 'static, color: bool) -> Console {
        let (tx, rx) = mpsc::sync_channel::<String>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicUsize::new(0));
        let (lost, pending) = (dropped.clone(), queued.clone());
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
                    pending.fetch_sub(line.len(), Ordering::Relaxed);
                }
            })
            .expect("spawn console thread");
        Console {
            tx,
            dropped,
            queued,
            color,
        }
    }

    /// Queues a dimmed `prefix line` (plain when not a terminal). Never blocks. On a
    /// terminal the line's control characters are shown escaped (see
    /// [`escape_for_terminal`]); elsewhere (`daemon.log`) it is written as it is.
    pub fn dim_line(&self, prefix: &str, line: &str) {
        let text = if self.color {
            let line = escape_for_terminal(line);
            format!("\x1b[2m{prefix}{line}\x1b[0m\n")
        } else {
            format!("{prefix}{line}\n")
        };
        self.send(text);
    }

    fn send(&self, text: String) {
        let len = text.len();
        if self.queued.fetch_add(len, Ordering::Relaxed) + len > QUEUE_BYTES {
            self.queued.fetch_sub(len, Ordering::Relaxed);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self.tx.try_send(text) {
            Ok(()) => {}
            Err(e) => {
                self.queued.fetch_sub(len, Ordering::Relaxed);
                if let TrySendError::Full(_) = e {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// `text` made safe to print on a terminal: a server's output can carry escape sequences
/// that retitle the window (`ESC ] 0 ; … BEL`), clear the screen (`ESC [ 2 J`), move the
/// cursor over earlier lines or worse. Every control character is shown instead of
/// obeyed: C0 controls and DEL in caret notation (`ESC` as `^[`, `BEL` as `^G`, a lone
/// `CR` as `^M`, DEL as `^?`), C1 controls (U+0080–U+009F, which some terminals obey
/// too) as `\u{9b}`. Tab and newline (and `CR` before a newline) stay. Borrows `text`
/// when there is nothing to escape.
///
/// The one function for untrusted text that meets a terminal: the live console, `corral
/// logs`, `corral call`, `corral events`, `ps`, `tools` and error messages. Escape the
/// text first, then add Corral's own colors around it. Files and `--json` output keep
/// the bytes as they are.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    let needs = |c: char| is_control(c) && c != '\t' && c != '\n';
    let Some(first) = text.find(needs) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    let mut chars = text[first..].chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' | '\n' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            '\u{7f}' => out.push_str("^?"),
            '\u{80}'..='\u{9f}' => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_from_a_server_are_shown_escaped_on_a_terminal() {
        let cases = [
            ("\x1b]0;pwned\x07title", "^[]0;pwned^Gtitle"),
            ("\x1b[2J\x1b[1;1Hclear", "^[[2J^[[1;1Hclear"),
            ("over\rwrite", "over^Mwrite"),
            ("nul\0 del\x7f bs\x08", "nul^@ del^? bs^H"),
            ("c1 csi \u{9b}31m", "c1 csi \\u{9b}31m"),
            ("tab\tand\nlines\r\nkept", "tab\tand\nlines\r\nkept"),
            ("ünïcödé 🦀 stays", "ünïcödé 🦀 stays"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape_for_terminal(raw), shown, "raw: {raw:?}");
        }
        assert!(matches!(
            escape_for_terminal("plain line"),
            Cow::Borrowed(_)
        ));
    }

    /// A writer that blocks until the gate opens, then counts the lines it got.
    struct Gated {
        gate: std::sync::mpsc::Receiver<()>,
        open: bool,
        lines: std::sync::mpsc::Sender<Vec<u8>>,
    }
    impl Write for Gated {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if !self.open {
                let _ = self.gate.recv();
                self.open = true;
            }
            let _ = self.lines.send(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_console_that_cannot_keep_up_queues_at_most_its_byte_budget() {
        let (open, gate) = std::sync::mpsc::channel();
        let (lines, got) = std::sync::mpsc::channel();
        let console = Console::to_writer(
            Gated {
                gate,
                open: false,
                lines,
            },
            false,
        );
        // 4000 lines of 8 KiB (≈ 31 MiB) while the writer is stuck: fewer lines than
        // the queue holds, far more bytes than it may.
        let line = "x".repeat(8 * 1024);
        for _ in 0..4000 {
            console.dim_line("[server:flood] ", &line);
        }
        let queued = console.queued.load(Ordering::Relaxed);
        assert!(queued <= QUEUE_BYTES, "{queued} bytes queued");
        open.send(()).unwrap();
        // The queued lines, then (with the next line) the count of those dropped.
        console.dim_line("[server:flood] ", "after");
        let mut written = String::new();
        while !written.ends_with("after\n") {
            let b = got
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("the queued lines are written once the writer can");
            written.push_str(&String::from_utf8(b).unwrap());
        }
        let kept = written.lines().filter(|l| l.ends_with(&line)).count();
        assert!(
            kept > 0 && kept <= QUEUE_BYTES / line.len(),
            "{kept} lines kept"
        );
        // One note, or more when the writer took a line before the queue filled (on a
        // loaded machine): each counts the lines dropped since the one before.
        let notes: Vec<&str> = written
            .lines()
            .filter(|l| l.contains("console lines dropped"))
            .collect();
        let dropped: usize = notes
            .iter()
            .map(|n| {
                n.split_whitespace()
                    .nth(1)
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        assert!(!notes.is_empty());
        assert_eq!(kept + dropped, 4000, "{notes:?}");
    }

    #[test]
    fn the_console_escapes_a_servers_line_but_keeps_its_own_dimming() {
        let (tx, rx) = std::sync::mpsc::channel();
        struct Pipe(std::sync::mpsc::Sender<Vec<u8>>);
        impl Write for Pipe {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                let _ = self.0.send(b.to_vec());
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let terminal = Console::to_writer(Pipe(tx.clone()), true);
        terminal.dim_line("[server:a] ", "\x1b]0;pwned\x07hi");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "\x1b[2m[server:a] ^[]0;pwned^Ghi\x1b[0m\n"
        );
        let file = Console::to_writer(Pipe(tx), false);
        file.dim_line("[server:a] ", "\x1b]0;pwned\x07hi");
        let got = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            "[server:a] \x1b]0;pwned\x07hi\n"
        );
    }
}
