//! What an event is about: the `source` string of the event contract, as a type.
//!
//! The strings are public (ARCHITECTURE.md, "Contracts: Events"): `server:NAME` for one
//! of the project's MCP servers; `corral` for Corral itself (the daemon, its agents, the
//! journal); `gateway` for the aggregation of the servers' tools; `process:NAME` (a dev
//! process), `proxy:NAME` (a dev proxy), `browser` (the pages behind a dev proxy).
//! [`Source`]'s `Display` is that
//! string and [`Source::parse`] reads it back; this module is the one place that knows
//! the format.

use std::fmt;
use std::str::FromStr;

const SERVER: &str = "server:";
const PROCESS: &str = "process:";
const PROXY: &str = "proxy:";

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Source {
    /// Corral itself: the daemon, agent sessions, the journal (`corral`).
    Corral,
    /// The gateway's view over every server, e.g. a tool name collision (`gateway`).
    Gateway,
    /// One MCP server, by its config name (`server:NAME`).
    Server(String),
    /// One dev process, by its config name (`process:NAME`).
    Process(String),
    /// One dev proxy, by its config name (`proxy:NAME`).
    Proxy(String),
    /// The browser pages behind a dev proxy (`browser`).
    Browser,
}

impl Source {
    /// A server's source.
    pub fn server(name: impl Into<String>) -> Source {
        Source::Server(name.into())
    }

    /// The server's name, when this is one.
    pub fn server_name(&self) -> Option<&str> {
        match self {
            Source::Server(name) => Some(name),
            _ => None,
        }
    }

    /// The dev process's name, when this is one.
    pub fn process_name(&self) -> Option<&str> {
        match self {
            Source::Process(name) => Some(name),
            _ => None,
        }
    }

    /// Reads a source string; `None` for a form this version does not know.
    pub fn parse(text: &str) -> Option<Source> {
        let named = |prefix: &str| {
            text.strip_prefix(prefix)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
        };
        Some(match text {
            "corral" => Source::Corral,
            "gateway" => Source::Gateway,
            "browser" => Source::Browser,
            _ => {
                if let Some(n) = named(SERVER) {
                    Source::Server(n)
                } else if let Some(n) = named(PROCESS) {
                    Source::Process(n)
                } else if let Some(n) = named(PROXY) {
                    Source::Proxy(n)
                } else {
                    return None;
                }
            }
        })
    }

    /// The server name in a source string, without allocating (`server:NAME` → `NAME`).
    pub fn server_of(text: &str) -> Option<&str> {
        text.strip_prefix(SERVER).filter(|n| !n.is_empty())
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Corral => f.write_str("corral"),
            Source::Gateway => f.write_str("gateway"),
            Source::Browser => f.write_str("browser"),
            Source::Server(n) => write!(f, "{SERVER}{n}"),
            Source::Process(n) => write!(f, "{PROCESS}{n}"),
            Source::Proxy(n) => write!(f, "{PROXY}{n}"),
        }
    }
}

/// A source string this version does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSource(pub String);

impl fmt::Display for UnknownSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown event source '{}'", self.0)
    }
}

impl std::error::Error for UnknownSource {}

impl FromStr for Source {
    type Err = UnknownSource;

    fn from_str(s: &str) -> Result<Source, UnknownSource> {
        Source::parse(s).ok_or_else(|| UnknownSource(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_todays_string_and_parses_back() {
        for (source, text) in [
            (Source::Corral, "corral"),
            (Source::Gateway, "gateway"),
            (Source::Browser, "browser"),
            (Source::server("files"), "server:files"),
            (Source::Process("web".into()), "process:web"),
            (Source::Proxy("web".into()), "proxy:web"),
        ] {
            assert_eq!(source.to_string(), text);
            assert_eq!(Source::parse(text), Some(source.clone()));
            assert_eq!(text.parse::<Source>(), Ok(source));
        }
    }

    #[test]
    fn names_and_unknown_forms() {
        assert_eq!(Source::server("a:b").server_name(), Some("a:b"));
        assert_eq!(Source::parse("server:a:b"), Some(Source::server("a:b")));
        assert_eq!(Source::Corral.server_name(), None);
        assert_eq!(Source::server_of("server:py"), Some("py"));
        assert_eq!(Source::server_of("corral"), None);
        for bad in ["", "server:", "daemon", "x:y"] {
            assert_eq!(Source::parse(bad), None, "{bad:?}");
        }
    }
}
