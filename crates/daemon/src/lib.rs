//! The project daemon: one set of servers shared by every agent.
//!
//! # Theory of operation
//!
//! A project is identified by its config file. Its daemon holds an exclusive `flock` on
//! `.corral/daemon.pid` for its whole life: the kernel drops the lock when the process
//! dies, however it dies, so "is a daemon running?" is answered by the lock, never by a
//! pid file's content, and a stale socket or pid file is detected and replaced, never
//! trusted ([`lock`], [`paths`]).
//!
//! The daemon ([`run`], in `lifecycle.rs`) runs the supervisor, the gateway (HTTP at
//! `gateway.listen`) and a control socket (0600, in a 0700 directory) speaking
//! newline-delimited JSON ([`protocol`]): each connection's request is parsed once and
//! dispatched once, to the module of its family (`control/`). Every event is appended to
//! `.corral/events.jsonl` ([`journal`]). The HTTP bearer token is `token.rs`'s.
//!
//! `corral mcp` is a bridge: it connects to the socket (starting the daemon detached if
//! none runs, serialized by a second lock so that agents starting together make exactly
//! one daemon — [`client`]), sends `{"op":"mcp"}` (with `"profile"` for `--profile`), and relays bytes; the daemon serves
//! the connection as one MCP session. Ten agents, one set of children.
//!
//! Every server the daemon starts gets [`DAEMON_SOCKET_ENV`] (the daemon's control
//! socket) in its environment, beside the `CORRAL_SERVER` (its name) every server gets,
//! so a bridge started under a daemon — `corral mcp` listed as one of the project's own
//! servers, perhaps behind a wrapper script that the config
//! check cannot see through — recognises that it would connect to the daemon it runs
//! under, and refuses instead of recursing.

pub mod client;
mod control;
pub mod dashboard;
pub mod fdpass;
pub mod journal;
mod lifecycle;
pub mod lock;
pub mod paths;
pub mod protocol;
mod token;

/// Set by the daemon in its servers' environment: the path of its control socket.
pub const DAEMON_SOCKET_ENV: &str = "CORRAL_DAEMON_SOCKET";

pub use lifecycle::{DaemonError, DaemonInfo, DaemonOptions, EventSink, run};
pub use paths::Paths;
pub use protocol::{Reply, Request};
pub use token::load_or_create_token;
