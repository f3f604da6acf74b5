//! What an alert is, as the daemon protocol carries it.

use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// How bad an alert is. Ordered: `Warning < Error`, so "at least a warning" is `>=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<corral_config::AlertSeverity> for Severity {
    fn from(s: corral_config::AlertSeverity) -> Self {
        match s {
            corral_config::AlertSeverity::Error => Severity::Error,
            corral_config::AlertSeverity::Warning => Severity::Warning,
        }
    }
}

/// Which pipe a line came from, as the caller says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Where the error is: `file:line[:col]`, the file as the tool printed it (relative or
/// absolute; for Java only the file name, which is all a JVM prints).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub col: Option<u32>,
}

impl Location {
    pub fn new(file: impl Into<String>, line: u32, col: Option<u32>) -> Self {
        Location {
            file: file.into(),
            line,
            col,
        }
    }

    /// From the text pieces a regex captured; `None` unless `line` is a number.
    pub(crate) fn parse(file: &str, line: &str, col: Option<&str>) -> Option<Self> {
        let file = file.trim();
        let file = file.strip_prefix("file://").unwrap_or(file);
        if file.is_empty() {
            return None;
        }
        Some(Location {
            file: file.to_owned(),
            line: line.trim().parse().ok()?,
            col: col.and_then(|c| c.trim().parse().ok()),
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(col) = self.col {
            write!(f, ":{col}")?;
        }
        Ok(())
    }
}

/// One recognised error (or warning): a single line, or a whole traceback / stack /
/// diagnostic folded into one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// 8 hex digits, a stable hash of source, rule, message and location: the same
    /// error from the same source always has the same id (see [`alert_id`]).
    pub id: String,
    /// Who printed it, as the caller named the scanner: `process:web`, `server:files`.
    pub source: String,
    /// The rule that recognised it, e.g. `python.traceback`.
    pub rule: String,
    /// The rule's category, e.g. `python` (see the crate docs for the list).
    pub category: String,
    pub severity: Severity,
    /// The decisive line, without ANSI escapes, at most
    /// [`Limits::max_message`](crate::Limits) bytes.
    pub message: String,
    /// Where to look: the first frame in the user's code, or the tool's location line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// The function of the frame at `location`, as the runtime printed it (`get_stats`,
    /// `UserStore.find`, `com.acme.Api.load`, `main.handler`, `boom::parse_port`).
    /// Not part of the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The source line of that frame when the output printed it (Python prints it under
    /// the `File` line; Node prints the throwing line above a `^` for an uncaught error),
    /// trimmed, at most 200 bytes. Not part of the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// For a chained exception, the root cause's exception line when it differs from
    /// `message` (Python: the first exception of the chain; Java: the last `Caused by:`;
    /// Node: the innermost `[cause]:`; .NET: the innermost ` ---> `; Ruby 3.1+: the last
    /// cause printed after the frames). Not part of the id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The reduced stack of the root cause: its frames in user code only (library frames
    /// skipped as for `location`), innermost first, each `file:line[:col] in function`
    /// (or `file:line[:col]` when the runtime printed no name), at most 10. Not part
    /// of the id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// The lines that make up the alert (a traceback's frames, a diagnostic's code
    /// frame), cleaned and capped; unrelated lines printed in between are not included.
    pub lines: Vec<String>,
    pub stream: Stream,
    /// How often it was seen within the dedup window (1 when new).
    pub count: u64,
    /// RFC 3339 with milliseconds on the wire, like event timestamps.
    #[serde(with = "rfc3339")]
    pub first_seen: SystemTime,
    #[serde(with = "rfc3339")]
    pub last_seen: SystemTime,
}

/// At most this many entries in [`Alert::frames`].
pub(crate) const MAX_FRAMES: usize = 10;

/// At most this many bytes in [`Alert::code`] (and in a function name).
pub(crate) const MAX_CODE_BYTES: usize = 200;

/// The stable id of an alert: [`stable_id`] of its source, rule, message and location.
pub fn alert_id(source: &str, rule: &str, message: &str, location: Option<&Location>) -> String {
    let location = location.map(ToString::to_string);
    let mut parts = vec![source, rule, message];
    parts.extend(location.as_deref());
    stable_id(&parts)
}

/// 8 hex digits of FNV-1a (64 bits, folded to 32) over `parts`, each followed by a
/// `0xff` separator (a byte UTF-8 never contains, so ("ab","c") and ("a","bc") differ).
/// FNV rather than std's hasher, whose output may change between Rust releases: these
/// ids are shown to users and agents (alerts, `get_errors` entries) and must not.
pub fn stable_id(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.as_bytes().iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:08x}", (h ^ (h >> 32)) as u32)
}

pub(crate) mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_millis(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_displays_file_line_and_optional_column() {
        assert_eq!(
            Location::new("src/main.rs", 3, Some(18)).to_string(),
            "src/main.rs:3:18"
        );
        assert_eq!(
            Location::new("Main.java", 12, None).to_string(),
            "Main.java:12"
        );
        let parsed = Location::parse("file:///app/x.mjs", "4", Some("9")).unwrap();
        assert_eq!(parsed, Location::new("/app/x.mjs", 4, Some(9)));
        assert_eq!(Location::parse("x.py", "many", None), None);
    }

    #[test]
    fn alert_id_is_stable_and_depends_on_every_part() {
        let loc = Location::new("a.py", 1, None);
        let id = alert_id(
            "process:web",
            "python.traceback",
            "ValueError: x",
            Some(&loc),
        );
        // Pinned: ids are shown to users, so the hash must never change.
        assert_eq!(
            id,
            alert_id(
                "process:web",
                "python.traceback",
                "ValueError: x",
                Some(&loc)
            )
        );
        assert_eq!(id.len(), 8);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(
            id,
            alert_id(
                "process:api",
                "python.traceback",
                "ValueError: x",
                Some(&loc)
            )
        );
        assert_ne!(
            id,
            alert_id(
                "process:web",
                "python.traceback",
                "ValueError: y",
                Some(&loc)
            )
        );
        assert_ne!(
            id,
            alert_id("process:web", "python.traceback", "ValueError: x", None)
        );
        assert_ne!(alert_id("ab", "c", "", None), alert_id("a", "bc", "", None));
    }

    #[test]
    fn alert_round_trips_through_json_with_rfc3339_times() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let alert = Alert {
            id: "0123abcd".into(),
            source: "process:web".into(),
            rule: "node.error".into(),
            category: "node".into(),
            severity: Severity::Error,
            message: "TypeError: x".into(),
            location: Some(Location::new("/app/a.js", 3, Some(16))),
            function: Some("render".into()),
            code: Some("return user.name;".into()),
            cause: Some("TypeError: y".into()),
            frames: vec!["/app/a.js:3:16 in render".into(), "/app/b.js:9:2".into()],
            lines: vec!["TypeError: x".into()],
            stream: Stream::Stderr,
            count: 2,
            first_seen: t,
            last_seen: t,
        };
        let json = serde_json::to_string(&alert).unwrap();
        assert!(
            json.contains(r#""first_seen":"2023-11-14T22:13:20.123Z""#),
            "{json}"
        );
        assert!(json.contains(r#""severity":"error""#), "{json}");
        assert!(json.contains(r#""stream":"stderr""#), "{json}");
        let back: Alert = serde_json::from_str(&json).unwrap();
        assert_eq!(back, alert);

        // The context is left out when there is none, and JSON from before it parses.
        let bare = Alert {
            function: None,
            code: None,
            cause: None,
            frames: Vec::new(),
            ..alert
        };
        let json = serde_json::to_string(&bare).unwrap();
        for key in ["function", "code", "cause", "frames"] {
            assert!(!json.contains(&format!("\"{key}\"")), "{json}");
        }
        let back: Alert = serde_json::from_str(&json).unwrap();
        assert_eq!(back, bare);
    }
}
