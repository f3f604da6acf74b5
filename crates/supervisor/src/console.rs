//! The live console: children's stderr lines, dimmed and prefixed, on our own stderr.
//!
//! Writes go through a bounded queue to one writer thread. When the terminal (or whatever
//! our stderr is) cannot keep up, lines are dropped and counted instead of blocking the
//! drain, because a blocked drain would block the child on its full stderr pipe.
//!
//! Text from servers is untrusted: on a terminal it is passed through
//! [`escape_for_terminal`] first, here and wherever the CLI prints it.

use std::borrow::Cow;
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

    /// A console writing to any writer (tests); `color` says it is a terminal: lines are
    /// dimmed and their control characters escaped.
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
        match self.tx.try_send(text) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
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
