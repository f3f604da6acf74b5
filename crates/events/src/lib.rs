//! Corral's event model and in-process event bus.
//!
//! An [`Event`] is the unit of the public event contract (ARCHITECTURE.md, "Contracts: Events"): one JSON
//! object per line in the journal and the event stream, `{"ts", "kind", "source", ...}`.
//! The payload is an open JSON map rather than a closed enum so that the contract can grow
//! additively: scripts outside the code match on `kind` and read the fields they know.
//!
//! The [`EventBus`] is a broadcast channel. Publishing never blocks and never fails: a
//! slow subscriber loses the oldest events (and learns how many), the supervisor does not
//! wait for it. That is the right trade for a supervisor whose first duty is to keep
//! draining its children.
//!
//! Kinds and sources are typed ([`Kind`], [`Source`]): events are made only from them
//! ([`Event::new`]) and read back through them ([`Event::kind`], [`Event::server`]), so a
//! misspelled kind is a compile error, not an event nobody matches. On the wire both
//! stay the documented strings, and `Event`'s fields stay strings, because a journal may
//! hold kinds and sources this version does not know. The rows `corral ps` reads are in
//! [`rows`].

mod kind;
pub mod rows;
mod source;

pub use kind::{Kind, UnknownKind};
pub use source::{Source, UnknownSource};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::SystemTime;
use tokio::sync::broadcast;

/// One thing that happened, as scripts and the journal see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// RFC 3339 UTC timestamp with milliseconds.
    pub ts: String,
    /// Dotted kind, e.g. `server.crashed`.
    pub kind: String,
    /// What it is about, e.g. `server:files`.
    pub source: String,
    /// Kind-specific fields, flattened into the top-level object.
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

impl Event {
    /// A new event stamped with the current time: `Event::new(Kind::ServerCrashed,
    /// Source::server("files"))`. Only typed kinds and sources make events, so a
    /// misspelled kind does not compile.
    pub fn new(kind: Kind, source: Source) -> Self {
        Event {
            ts: now_rfc3339(),
            kind: kind.as_str().to_owned(),
            source: source.to_string(),
            data: Map::new(),
        }
    }

    /// The kind, or `None` for one this version does not know (a newer daemon's journal).
    pub fn kind(&self) -> Option<Kind> {
        Kind::parse(&self.kind)
    }

    /// Whether this is an event of `kind`.
    pub fn is(&self, kind: Kind) -> bool {
        self.kind == kind.as_str()
    }

    /// What it is about, or `None` for a source this version does not know.
    pub fn source(&self) -> Option<Source> {
        Source::parse(&self.source)
    }

    /// The server it is about, when it is about one (without allocating).
    pub fn server(&self) -> Option<&str> {
        Source::server_of(&self.source)
    }

    /// Adds one field; fields named like the envelope (`ts`, `kind`, `source`) are refused
    /// by a debug assertion because they would corrupt the flattened object.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        debug_assert!(!matches!(key, "ts" | "kind" | "source"));
        self.data.insert(key.to_owned(), value.into());
        self
    }

    /// [`Event::with`] when there is a value.
    pub fn with_opt(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.with(key, v),
            None => self,
        }
    }

    /// Reads a string field of the payload.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.data.get(key).and_then(Value::as_str)
    }

    /// The event as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("an Event always serializes")
    }
}

/// The current time as RFC 3339 with milliseconds, e.g. `2026-11-22T22:13:33.123Z`.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// A time as RFC 3339 with milliseconds, as event timestamps are written.
pub fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// Fan-out of events to every interested part (console, journal, API streams, tests).
#[derive(Debug, Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Event>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(4096)
    }
}

impl EventBus {
    /// A bus that buffers up to `capacity` events for its slowest subscriber.
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        EventBus { tx }
    }

    /// Publishes an event; with no subscriber it is simply dropped.
    pub fn emit(&self, event: Event) {
        let _ = self.tx.send(event);
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_flat_with_envelope_first() {
        let ev = Event::new(Kind::ServerCrashed, Source::server("files"))
            .with("exit_code", 3)
            .with("stderr_tail", vec!["boom"]);
        let line = ev.to_json_line();
        assert!(line.starts_with(r#"{"ts":""#), "{line}");
        assert!(line.contains(r#""kind":"server.crashed","source":"server:files""#));
        assert!(line.contains(r#""exit_code":3"#));
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, ev);
        assert_eq!(back.kind(), Some(Kind::ServerCrashed));
        assert_eq!(back.source(), Some(Source::server("files")));
        assert_eq!(back.server(), Some("files"));
    }

    /// A journal line from a newer version: read, kept as it is, its kind unknown.
    #[test]
    fn unknown_kinds_and_sources_still_deserialize() {
        let line = r#"{"ts":"2026-01-01T00:00:00.000Z","kind":"robot.arrived","source":"moon:base","x":1}"#;
        let ev: Event = serde_json::from_str(line).unwrap();
        assert_eq!((ev.kind(), ev.source(), ev.server()), (None, None, None));
        assert_eq!(ev.to_json_line(), line);
    }

    #[test]
    fn timestamp_is_rfc3339_utc_millis() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), "2026-11-22T22:13:33.123Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
    }

    #[tokio::test]
    async fn bus_fans_out_and_never_blocks_without_subscribers() {
        let bus = EventBus::new(4);
        bus.emit(Event::new(Kind::Alert, Source::Corral)); // no subscriber: dropped, no error
        let mut a = bus.subscribe();
        let mut b = bus.subscribe();
        bus.emit(Event::new(Kind::ServerReady, Source::server("a")));
        assert_eq!(a.recv().await.unwrap().kind, "server.ready");
        assert_eq!(b.recv().await.unwrap().kind, "server.ready");
    }
}
