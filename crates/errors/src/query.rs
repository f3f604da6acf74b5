//! What the caller asks: which source, since when, warnings or not, how many.

use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use crate::noise::NoiseFilter;

/// The kinds of source Corral sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceKind {
    Server,
    Process,
    Proxy,
    Browser,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Server => "server",
            SourceKind::Process => "process",
            SourceKind::Proxy => "proxy",
            SourceKind::Browser => "browser",
        }
    }
}

/// Which sources a query looks at: `server:NAME`, `process:NAME`, `proxy:NAME`,
/// `browser`, or a whole kind (`server`, `process`, `proxy`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceFilter {
    pub kind: SourceKind,
    /// `None`: every source of the kind.
    pub name: Option<String>,
}

const ACCEPTED: &str = "expected server:NAME, process:NAME, proxy:NAME or browser \
     (or server, process, proxy for every one of a kind)";

impl SourceFilter {
    /// Parses `server:files`, `process:web`, `proxy:web`, `browser`, `server`, …
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (kind, name) = match text.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (text, None),
        };
        let kind = match kind {
            "server" => SourceKind::Server,
            "process" => SourceKind::Process,
            "proxy" => SourceKind::Proxy,
            "browser" => SourceKind::Browser,
            _ => return Err(format!("unknown source {text:?}: {ACCEPTED}")),
        };
        match name {
            Some(_) if kind == SourceKind::Browser => Err(format!(
                "unknown source {text:?}: the browser has no name, use browser"
            )),
            Some("") => Err(format!(
                "unknown source {text:?}: the name after {}: is missing ({ACCEPTED})",
                kind.as_str()
            )),
            name => Ok(SourceFilter {
                kind,
                name: name.map(str::to_owned),
            }),
        }
    }

    /// Whether a source named like `server:files` is one of these.
    pub fn matches(&self, source: &str) -> bool {
        let (kind, name) = match source.split_once(':') {
            Some((kind, name)) => (kind, Some(name)),
            None => (source, None),
        };
        kind == self.kind.as_str()
            && match &self.name {
                Some(wanted) => name == Some(wanted.as_str()),
                None => true,
            }
    }
}

impl FromStr for SourceFilter {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        SourceFilter::parse(s)
    }
}

impl fmt::Display for SourceFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.as_str())?;
        if let Some(name) = &self.name {
            write!(f, ":{name}")?;
        }
        Ok(())
    }
}

/// Which incidents a query lists, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Status {
    /// Active and regressed: what is broken now (the default).
    #[default]
    Open,
    /// Resolved only.
    Resolved,
    /// Every state.
    All,
}

impl Status {
    /// `open`, `resolved` or `all`.
    pub fn parse(text: &str) -> Result<Status, String> {
        match text.trim() {
            "open" | "active" => Ok(Status::Open),
            "resolved" => Ok(Status::Resolved),
            "all" => Ok(Status::All),
            other => Err(format!(
                "unknown status {other:?}: expected open (active and regressed, the \
                 default), resolved or all"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Resolved => "resolved",
            Status::All => "all",
        }
    }
}

/// What to report. `Query::default()`: every source, what is open (active and
/// regressed), warnings included, 25 incidents, the default noise rules.
#[derive(Debug, Clone)]
pub struct Query {
    pub source: Option<SourceFilter>,
    /// Only what was seen at or after this time (see [`parse_since`]).
    pub since: Option<SystemTime>,
    pub include_warnings: bool,
    /// At most this many incidents (down sources are always listed, on top if need be).
    pub limit: usize,
    pub noise: NoiseFilter,
    pub status: Status,
    /// When the same caller asked last: the report counts what was resolved since.
    pub last_call: Option<SystemTime>,
    /// The text lists each incident's reduced stack.
    pub verbose: bool,
}

impl Query {
    pub const DEFAULT_LIMIT: usize = 25;
}

impl Default for Query {
    fn default() -> Self {
        Query {
            source: None,
            since: None,
            include_warnings: true,
            limit: Query::DEFAULT_LIMIT,
            noise: NoiseFilter::default(),
            status: Status::Open,
            last_call: None,
            verbose: false,
        }
    }
}

/// `since` as a user writes it: an RFC 3339 time in UTC (`2026-11-23T18:00:00Z`; the
/// `Z`, the `T` and fractions of a second may be left out) or a duration ago (`90s`,
/// `5m`, `1h`, `2d`, `1h30m`; humantime's syntax). A time after `now` is an error
/// (nothing could be listed).
pub fn parse_since(text: &str, now: SystemTime) -> Result<SystemTime, String> {
    let text = text.trim();
    let expected = "expected an RFC 3339 time in UTC (2026-11-23T18:00:00Z) \
                    or a duration ago (90s, 5m, 1h, 2d)";
    if text.is_empty() {
        return Err(format!("empty since: {expected}"));
    }
    let looks_like_date = text.len() >= 10 && text.as_bytes()[4] == b'-';
    let at = if looks_like_date {
        humantime::parse_rfc3339_weak(text)
            .map_err(|e| format!("invalid since {text:?} ({e}): {expected}"))?
    } else {
        let ago = humantime::parse_duration(text)
            .map_err(|_| format!("invalid since {text:?}: {expected}"))?;
        now.checked_sub(ago)
            .ok_or_else(|| format!("invalid since {text:?}: too long ago"))?
    };
    if at > now {
        return Err(format!(
            "invalid since {text:?}: it is in the future (now is {})",
            humantime::format_rfc3339_seconds(now)
        ));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn now() -> SystemTime {
        humantime::parse_rfc3339("2026-11-23T18:30:00Z").unwrap()
    }

    #[test]
    fn parse_since_takes_rfc3339_and_durations_ago() {
        let now = now();
        assert_eq!(
            parse_since("2026-11-23T18:00:00Z", now).unwrap(),
            now - Duration::from_secs(1800)
        );
        assert_eq!(
            parse_since("2026-11-23T18:00:00.250Z", now).unwrap(),
            now - Duration::from_millis(1_799_750)
        );
        assert_eq!(
            parse_since("2026-11-23 18:00:00", now).unwrap(),
            now - Duration::from_secs(1800)
        );
        assert_eq!(
            parse_since("5m", now).unwrap(),
            now - Duration::from_secs(300)
        );
        assert_eq!(
            parse_since(" 90s ", now).unwrap(),
            now - Duration::from_secs(90)
        );
        assert_eq!(
            parse_since("1h", now).unwrap(),
            now - Duration::from_secs(3600)
        );
        assert_eq!(
            parse_since("1h30m", now).unwrap(),
            now - Duration::from_secs(5400)
        );
    }

    #[test]
    fn parse_since_explains_what_it_accepts() {
        let now = now();
        assert_eq!(
            parse_since("garbage", now).unwrap_err(),
            "invalid since \"garbage\": expected an RFC 3339 time in UTC \
             (2026-11-23T18:00:00Z) or a duration ago (90s, 5m, 1h, 2d)"
        );
        assert_eq!(
            parse_since("", now).unwrap_err(),
            "empty since: expected an RFC 3339 time in UTC \
             (2026-11-23T18:00:00Z) or a duration ago (90s, 5m, 1h, 2d)"
        );
        assert_eq!(
            parse_since("2026-13-45T00:00:00Z", now).unwrap_err(),
            "invalid since \"2026-13-45T00:00:00Z\" (numeric component is out of range): \
             expected an RFC 3339 time in UTC (2026-11-23T18:00:00Z) \
             or a duration ago (90s, 5m, 1h, 2d)"
        );
        assert_eq!(
            parse_since("2026-11-23T19:00:00Z", now).unwrap_err(),
            "invalid since \"2026-11-23T19:00:00Z\": it is in the future \
             (now is 2026-11-23T18:30:00Z)"
        );
    }

    #[test]
    fn source_filter_parses_the_four_forms_and_kinds() {
        let f = SourceFilter::parse("server:files").unwrap();
        assert_eq!(f.kind, SourceKind::Server);
        assert_eq!(f.name.as_deref(), Some("files"));
        assert!(f.matches("server:files"));
        assert!(!f.matches("server:filesystem"));
        assert!(!f.matches("process:files"));
        assert_eq!(f.to_string(), "server:files");

        let f: SourceFilter = "process:web".parse().unwrap();
        assert!(f.matches("process:web"));
        assert!(!f.matches("proxy:web"));

        let f = SourceFilter::parse("proxy:web").unwrap();
        assert!(f.matches("proxy:web"));

        let f = SourceFilter::parse("browser").unwrap();
        assert!(f.matches("browser"));
        assert!(!f.matches("server:browser"));

        let f = SourceFilter::parse("server").unwrap();
        assert!(f.matches("server:files") && f.matches("server:search"));
        assert!(!f.matches("process:web"));
    }

    #[test]
    fn source_filter_errors_name_the_accepted_forms() {
        assert_eq!(
            SourceFilter::parse("files").unwrap_err(),
            "unknown source \"files\": expected server:NAME, process:NAME, proxy:NAME \
             or browser (or server, process, proxy for every one of a kind)"
        );
        assert_eq!(
            SourceFilter::parse("srv:files").unwrap_err(),
            "unknown source \"srv:files\": expected server:NAME, process:NAME, proxy:NAME \
             or browser (or server, process, proxy for every one of a kind)"
        );
        assert_eq!(
            SourceFilter::parse("server:").unwrap_err(),
            "unknown source \"server:\": the name after server: is missing (expected \
             server:NAME, process:NAME, proxy:NAME or browser (or server, process, proxy \
             for every one of a kind))"
        );
        assert_eq!(
            SourceFilter::parse("browser:tab1").unwrap_err(),
            "unknown source \"browser:tab1\": the browser has no name, use browser"
        );
    }
}
