//! One MCP endpoint over every server.
//!
//! # Theory of operation
//!
//! The [`Hub`] holds what all agent sessions share: the supervisor's server handles, the
//! tool [`catalog`] (every ready server's tools, filtered and renamed `<server>__<tool>`,
//! plus Corral's own [`tools`], pre-serialized), and the routing tables that send
//! messages back to the right session. A [`Session`] is one agent: transports
//! ([`stdio`], HTTP) hand it messages, and it answers each request on its own task.
//!
//! Forwarding is lean on purpose (ARCHITECTURE.md, "Performance facts"): a `tools/call`
//! parses only the envelope and the tool name, carries the arguments as raw JSON, and
//! rewrites only the name (and a progress token, when there is one).
//!
//! What flows back: a server's progress notifications are matched to the session by a
//! gateway-unique token; its log messages go to every session (logger = server name),
//! attached to that session's call on that server when there is one; its sampling and
//! elicitation requests go to the session whose call it is serving; its list changes
//! become one `list_changed` to every session. A 2026-07-28 server cannot send requests:
//! it answers a call with `input_required`, which a 2026 agent gets as it is and a 2025
//! agent gets as ordinary requests on its session while Corral retries the call
//! (`drive.rs`). When servers come and go (ready, crash, stop), the catalog is rebuilt
//! and sessions are told only if the tool list changed.
//!
//! Degradation: a server that is down simply has no tools in the list; a call to one of
//! its tools is answered at once with a short actionable tool error, and everything else
//! keeps working.

/// A hash map with a fast hasher, for the maps every forwarded call touches (keys are
/// request ids, session ids, tool and server names; SipHash was ≈ 3% of a call).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

mod agent;
pub mod catalog;
mod drive;
pub mod fdio;
pub mod http;
pub use corral_httpd as httpd;
mod hub;
pub mod jsonrpc;
mod listen;
pub mod modern;
pub mod naming;
mod park;
pub mod push;
mod session;
pub mod stdio;
pub mod tools;

pub use agent::Outbound;
pub use hub::{GatewayOptions, Hub};
pub use modern::PROTOCOL_VERSIONS;
pub use session::{Reply, Session};
