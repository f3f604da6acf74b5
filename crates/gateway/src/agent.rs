//! One connected agent as the rest of the gateway sees it: how to reach it
//! ([`Outbound`]), what it declared (capabilities, revision, log level), and its
//! subscriptions. The hub keeps these for routing what servers send back; the
//! [`Session`](crate::Session) that answers the agent's requests owns one. Kept apart
//! from both so that the hub (shared state) does not depend on the session (request
//! handling), which depends on the hub.

use corral_events::{Event, Kind, Source};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Sends messages to one agent. `related` is the agent's request a message belongs to
/// (progress, a server's sampling request during a tool call), so a transport that has
/// per-request streams (Streamable HTTP) can put it on the right one.
pub trait Outbound: Send + Sync + 'static {
    fn send(&self, message: Vec<u8>, related: Option<&RawValue>);
}

/// What other parts of the gateway need of a session.
pub struct SessionShared {
    pub(crate) id: u64,
    pub(crate) out: Arc<dyn Outbound>,
    /// How the agent is connected (`stdio`, `http`), for its events.
    pub(crate) transport: &'static str,
    /// The profile it connected with: what it may see and call (`None`: everything).
    pub(crate) profile: Option<Arc<str>>,
    pub(crate) opened: std::time::Instant,
    /// `clientInfo` of its `initialize` ("name version"), once it said hello.
    pub(crate) client: Mutex<Option<String>>,
    pub(crate) initialized: AtomicBool,
    pub(crate) log_level: AtomicU8,
    /// The agent set `log_level` (`logging/setLevel`): a modern server, which has no
    /// setLevel, gets it in each call's `_meta` instead.
    pub(crate) level_asked: AtomicBool,
    pub(crate) caps: Mutex<Value>,
    pub(crate) protocol: Mutex<Option<String>>,
    pub(crate) subscriptions: Mutex<HashSet<String>>,
    /// [`ERA_UNKNOWN`] until the first request decides: [`ERA_LEGACY`] (an `initialize`
    /// session) or [`ERA_MODERN`] (stateless 2026-07-28 requests).
    pub(crate) era: AtomicU8,
}

/// A session's era (ARCHITECTURE.md, "MCP revisions on the agent hop").
pub(crate) const ERA_UNKNOWN: u8 = 0;
pub(crate) const ERA_LEGACY: u8 = 1;
pub(crate) const ERA_MODERN: u8 = 2;

impl SessionShared {
    pub(crate) fn new(
        id: u64,
        out: Arc<dyn Outbound>,
        transport: &'static str,
        profile: Option<&str>,
    ) -> SessionShared {
        SessionShared {
            id,
            out,
            transport,
            profile: profile.map(Arc::from),
            opened: std::time::Instant::now(),
            client: Mutex::new(None),
            initialized: AtomicBool::new(false),
            log_level: AtomicU8::new(level_rank("info")),
            level_asked: AtomicBool::new(false),
            caps: Mutex::new(Value::Null),
            protocol: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            era: AtomicU8::new(ERA_UNKNOWN),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn send(&self, msg: Vec<u8>, related: Option<&RawValue>) {
        self.out.send(msg, related);
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// Whether this session serves stateless 2026-07-28 requests: it has no client
    /// capabilities of its own (each request brings its own) and nothing is sent to it
    /// outside a request.
    pub fn is_modern(&self) -> bool {
        self.era.load(Ordering::Acquire) == ERA_MODERN
    }

    /// Pins a session whose era is not decided yet; the era it has afterwards.
    pub(crate) fn pin(&self, era: u8) -> u8 {
        match self
            .era
            .compare_exchange(ERA_UNKNOWN, era, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => era,
            Err(current) => current,
        }
    }

    /// How the agent is connected (`stdio`, `http`).
    pub(crate) fn transport(&self) -> &'static str {
        self.transport
    }

    /// The resources this (2025) session subscribed to, now let go of (it closed).
    pub(crate) fn take_subscriptions(&self) -> Vec<String> {
        self.subscriptions.lock().unwrap().drain().collect()
    }

    /// Whether the agent declared client capability `cap` (`sampling`, …).
    pub fn supports(&self, cap: &str) -> bool {
        cap.is_empty() || self.caps.lock().unwrap().get(cap).is_some()
    }

    /// The client capabilities the agent declared at `initialize` (`null` before).
    pub(crate) fn client_capabilities(&self) -> Value {
        self.caps.lock().unwrap().clone()
    }

    pub fn log_level(&self) -> u8 {
        self.log_level.load(Ordering::Relaxed)
    }

    /// The level the agent asked for with `logging/setLevel`, if it did.
    pub(crate) fn asked_log_level(&self) -> Option<u8> {
        self.level_asked
            .load(Ordering::Relaxed)
            .then(|| self.log_level())
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().unwrap().contains(uri)
    }

    /// The protocol version agreed at initialize.
    pub fn protocol(&self) -> Option<String> {
        self.protocol.lock().unwrap().clone()
    }

    /// `agent.disconnected`, for a session that had said hello (`agent.connected`).
    pub(crate) fn disconnected_event(&self, reason: &str) -> Option<Event> {
        let client = self.client.lock().unwrap().clone()?;
        Some(
            Event::new(Kind::AgentDisconnected, Source::Corral)
                .with("session", self.id)
                .with("transport", self.transport)
                .with("client", client)
                .with("reason", reason)
                .with("connected_s", self.opened.elapsed().as_secs()),
        )
    }
}

/// MCP's names of the RFC 5424 severities, lowest first.
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A severity's rank in [`LEVELS`] (an unknown name ranks lowest).
pub fn level_rank(level: &str) -> u8 {
    LEVELS.iter().position(|l| *l == level).unwrap_or(0) as u8
}
