//! Human output: aligned columns, colors only on a terminal, and event lines. Text that
//! comes from servers (their stderr, tool results, descriptions, error reasons) goes
//! through [`Style::shown`] so that its escape sequences are shown on a terminal, not
//! obeyed; files and `--json` get it as it is.

use corral_events::{Event, Kind};
use serde_json::Value;
use std::borrow::Cow;
use std::io::IsTerminal;

/// Whether stdout gets ANSI colors.
pub fn color_stdout() -> bool {
    Style::stdout().color
}

/// How human output goes to one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// ANSI colors: a terminal, and `NO_COLOR` unset.
    pub color: bool,
    /// Untrusted text is escaped: a terminal.
    pub escape: bool,
}

impl Style {
    /// For stdout.
    pub fn stdout() -> Style {
        Self::for_terminal(std::io::stdout().is_terminal())
    }

    /// For stderr.
    pub fn stderr() -> Style {
        Self::for_terminal(std::io::stderr().is_terminal())
    }

    fn for_terminal(terminal: bool) -> Style {
        Style {
            color: terminal && std::env::var_os("NO_COLOR").is_none(),
            escape: terminal,
        }
    }

    /// Neither colored nor escaped (a file, a pipe).
    #[cfg(test)]
    pub const PLAIN: Style = Style {
        color: false,
        escape: false,
    };

    /// Untrusted `text` as it may be printed in this style: on a terminal with its
    /// control characters shown, not obeyed ([`corral_supervisor::escape_for_terminal`]).
    pub fn shown<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.escape {
            corral_supervisor::escape_for_terminal(text)
        } else {
            Cow::Borrowed(text)
        }
    }
}

/// Rows as left-aligned columns separated by two spaces; the last column is not padded.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One event as a human line, with the stderr tail indented below it.
pub fn render_event(ev: &Event, style: Style) -> String {
    render(ev, style, false)
}

/// [`render_event`] for a console that showed the unit's output live (`stderr_shown`):
/// the tail is not repeated, the line says "(stderr above)" (a server) or "(output
/// above)" (a dev process) instead. An `alert` is one line beside the output it was
/// found in: [`render_alert`].
pub fn render_console_event(ev: &Event, style: Style, stderr_shown: bool) -> String {
    if ev.is(Kind::Alert) {
        return render_alert(ev, style);
    }
    render(ev, style, stderr_shown)
}

/// An `alert` event as the console shows it, dimmed like the output around it and
/// marked: `[process:web] ⚠ python.traceback: ValueError: bad (app.py:12)` (on a color
/// terminal the mark is bold red for an error, yellow for a warning).
pub fn render_alert(ev: &Event, style: Style) -> String {
    let text = style.shown(&alert_summary(ev)).into_owned();
    let source = style.shown(&ev.source).into_owned();
    if !style.color {
        return format!("[{source}] ⚠ {text}");
    }
    let mark = match ev.str("severity") {
        Some("warning") => "\x1b[1;33m",
        _ => "\x1b[1;31m",
    };
    format!("\x1b[2m[{source}]\x1b[0m {mark}⚠\x1b[0m \x1b[2m{text}\x1b[0m")
}

/// `rule: message (location)` of an `alert` event.
fn alert_summary(ev: &Event) -> String {
    let s = |k: &str| ev.str(k).unwrap_or("");
    let mut text = format!("{}: {}", s("rule"), s("message"));
    if let Some(loc) = ev.str("location") {
        text.push_str(&format!(" ({loc})"));
    }
    text
}

fn render(ev: &Event, style: Style, stderr_shown: bool) -> String {
    let color = style.color;
    let time = ev.ts.get(11..19).unwrap_or(&ev.ts);
    let summary = summary(ev);
    let summary = style.shown(&summary);
    let (on, off) = match (color, severity(ev.kind())) {
        (false, _) => ("", ""),
        (true, 2) => ("\x1b[31m", "\x1b[0m"),
        (true, 1) => ("\x1b[33m", "\x1b[0m"),
        (true, _) => ("\x1b[32m", "\x1b[0m"),
    };
    let mut out = format!(
        "{time} {on}{:<20}{off} {:<16} {summary}",
        ev.kind, ev.source
    );
    match ev.data.get("stderr_tail") {
        Some(Value::Array(tail)) if stderr_shown && !tail.is_empty() => {
            out.push_str(if ev.source.starts_with("process:") {
                " (output above)"
            } else {
                " (stderr above)"
            });
            return out;
        }
        _ => {}
    }
    if let Some(Value::Array(tail)) = ev.data.get("stderr_tail") {
        let (dim, undim) = if color {
            ("\x1b[2m", "\x1b[0m")
        } else {
            ("", "")
        };
        for line in tail.iter().filter_map(Value::as_str) {
            let line = style.shown(line);
            out.push_str(&format!("\n    {dim}{line}{undim}"));
        }
    }
    out
}

fn severity(kind: Option<Kind>) -> u8 {
    match kind {
        Some(
            Kind::ServerCrashed
            | Kind::ServerStartFailed
            | Kind::ServerGaveUp
            | Kind::ProcessCrashed
            | Kind::ProcessStartFailed
            | Kind::ProcessGaveUp
            | Kind::Alert
            | Kind::ProxyError
            | Kind::BrowserError,
        ) => 2,
        Some(
            Kind::ProcessRestarting
            | Kind::ServerRestarting
            | Kind::ServerNoise
            | Kind::ServerCallTimeout
            | Kind::GatewayListenFailed
            | Kind::ConfigAccess,
        ) => 1,
        _ => 0,
    }
}

fn summary(ev: &Event) -> String {
    let d = &ev.data;
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
    let n = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
    let Some(kind) = ev.kind() else {
        return s("reason").to_owned();
    };
    match kind {
        Kind::ServerStarting => format!("{} {}", s("command"), join_args(d.get("args"))),
        Kind::ServerReady => format!(
            "{} tools, protocol {}, {} ms",
            n("tools"),
            s("protocol_version"),
            n("startup_ms")
        ),
        Kind::ServerRestarting => format!("attempt {} in {} ms", n("attempt"), n("delay_ms")),
        Kind::ServerNoise => format!("stdout: {}", s("line")),
        Kind::ServerCallTimeout => format!("{} timed out after {} ms", s("tool"), n("after_ms")),
        Kind::ServerToolsChanged => format!("{} tools", n("tools")),
        Kind::Alert => alert_summary(ev),
        Kind::ProcessStarting => s("command").to_owned(),
        Kind::AgentConnected => format!(
            "session {} ({}, {})",
            n("session"),
            s("client"),
            s("transport")
        ),
        Kind::AgentDisconnected => format!(
            "session {} ({}, {}): {} after {}s",
            n("session"),
            s("client"),
            s("transport"),
            s("reason"),
            n("connected_s")
        ),
        Kind::ProxyStarted => format!("{} → {}", s("url"), s("target")),
        Kind::ProxyError => match d.get("url").and_then(Value::as_str) {
            Some(url) => format!("{} {url}: {}", s("method"), s("error")),
            None => s("error").to_owned(),
        },
        Kind::BrowserError => {
            let mut text = format!("{}: {}", s("error_kind"), s("message"));
            if let Some(loc) = d.get("location").and_then(Value::as_str) {
                text.push_str(&format!(" ({loc})"));
            }
            text
        }
        Kind::DaemonStarted => match d.get("endpoint").and_then(Value::as_str) {
            Some(endpoint) => format!("pid {}, {endpoint}", n("pid")),
            None => format!("pid {}, no HTTP endpoint", n("pid")),
        },
        _ => s("reason").to_owned(),
    }
}

fn join_args(args: Option<&Value>) -> String {
    match args {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_events::Source;

    #[test]
    fn table_aligns_columns() {
        let t = table(&[
            vec!["a".into(), "bb".into(), "c".into()],
            vec!["long".into(), "x".into(), "".into()],
        ]);
        assert_eq!(t, "a     bb  c\nlong  x\n");
    }

    #[test]
    fn event_line_includes_tail() {
        let ev = Event::new(Kind::ServerCrashed, Source::server("py"))
            .with("reason", "exited with code 1")
            .with("stderr_tail", vec!["Traceback", "ModuleNotFoundError: x"]);
        let line = render_event(&ev, Style::PLAIN);
        assert!(line.contains("server.crashed"), "{line}");
        assert!(line.contains("exited with code 1"));
        assert!(line.ends_with("\n    Traceback\n    ModuleNotFoundError: x"));
        let console = render_console_event(&ev, Style::PLAIN, true);
        assert!(
            console.ends_with("exited with code 1 (stderr above)"),
            "{console}"
        );
        assert_eq!(render_console_event(&ev, Style::PLAIN, false), line);
    }

    #[test]
    fn an_alert_is_one_marked_line_on_the_console() {
        let ev = Event::new(Kind::Alert, Source::Process("web".into()))
            .with("rule", "python.traceback")
            .with("severity", "error")
            .with("message", "ValueError: bad user record")
            .with("location", "app.py:12");
        assert_eq!(
            render_console_event(&ev, Style::PLAIN, true),
            "[process:web] ⚠ python.traceback: ValueError: bad user record (app.py:12)"
        );
        let color = Style {
            color: true,
            escape: true,
        };
        assert_eq!(
            render_alert(&ev, color),
            "\x1b[2m[process:web]\x1b[0m \x1b[1;31m⚠\x1b[0m \x1b[2mpython.traceback: \
             ValueError: bad user record (app.py:12)\x1b[0m"
        );
        let line = render_event(&ev, Style::PLAIN);
        assert!(
            line.ends_with("python.traceback: ValueError: bad user record (app.py:12)"),
            "{line}"
        );
        let crash = Event::new(Kind::ProcessCrashed, Source::Process("web".into()))
            .with("reason", "exited with code 1")
            .with("stderr_tail", vec!["boom"]);
        assert!(
            render_console_event(&crash, Style::PLAIN, true)
                .ends_with("exited with code 1 (output above)")
        );
    }

    #[test]
    fn terminal_escapes_in_events_are_shown_escaped_on_a_terminal_and_kept_elsewhere() {
        let ev = Event::new(Kind::ServerCrashed, Source::server("py"))
            .with("reason", "exited \x1b]0;pwned\x07")
            .with("stderr_tail", vec!["\x1b[2Jcleared"]);
        let terminal = Style {
            color: true,
            escape: true,
        };
        let line = render_event(&ev, terminal);
        assert!(line.contains("exited ^[]0;pwned^G"), "{line:?}");
        assert!(
            line.ends_with("\n    \x1b[2m^[[2Jcleared\x1b[0m"),
            "{line:?}"
        );
        assert!(
            line.contains("\x1b[31mserver.crashed"),
            "Corral's own colors stay: {line:?}"
        );
        let plain = render_event(&ev, Style::PLAIN);
        assert!(plain.contains("exited \x1b]0;pwned\x07"), "{plain:?}");
        assert!(plain.ends_with("\n    \x1b[2Jcleared"), "{plain:?}");
        let noise = Event::new(Kind::ServerNoise, Source::server("py")).with("line", "\x1b[31mred");
        assert!(render_event(&noise, terminal).contains("stdout: ^[[31mred"));
    }
}
