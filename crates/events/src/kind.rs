//! The event kinds, as one closed list: a misspelled kind is a compile error where an
//! event is made ([`crate::Event::new`]) or matched ([`crate::Event::kind`]).
//!
//! The dotted strings are the public contract (ARCHITECTURE.md, "Contracts: Events"):
//! scripts match on them, so a variant's string never changes; kinds are only added.
//! On the wire and in the journal `Event::kind` stays a string, because a journal may
//! hold kinds this version does not know (written by a newer one): those parse to
//! `None`, never to an error that would hide the rest of the line.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// What happened: one variant per dotted kind string of the event contract.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Kind {
            $($(#[$doc])* $variant,)*
        }

        impl Kind {
            /// Every kind, in the order of the contract.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// The dotted string, e.g. `server.crashed`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Kind::$variant => $text,)*
                }
            }

            /// The kind a dotted string names; `None` for a kind this version does not
            /// know.
            pub fn parse(text: &str) -> Option<Kind> {
                match text {
                    $($text => Some(Kind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

kinds! {
    /// A server is being spawned (command, args).
    ServerStarting => "server.starting",
    /// A server answered `initialize` (tools, protocol version, start-up ms).
    ServerReady => "server.ready",
    /// A server died or failed before it was ready (reason, exit status, `stderr_tail`).
    ServerStartFailed => "server.start_failed",
    /// A ready server died (exit code or signal, uptime, `stderr_tail`).
    ServerCrashed => "server.crashed",
    /// A server is restarted after a delay (attempt, delay).
    ServerRestarting => "server.restarting",
    /// The crash-loop breaker gave up on a server.
    ServerGaveUp => "server.gave_up",
    /// A server stopped on request.
    ServerStopped => "server.stopped",
    /// A non-JSON line on a server's stdout, or an answer tied to no call.
    ServerNoise => "server.noise",
    /// A server's tool list changed.
    ServerToolsChanged => "server.tools_changed",
    /// A call to a server passed its deadline.
    ServerCallTimeout => "server.call_timeout",
    /// A process left its server's process group; found and contained.
    ServerEscaped => "server.escaped",
    /// An agent session began (session, transport, client, protocol).
    AgentConnected => "agent.connected",
    /// An agent session ended (session, transport, client, reason, `connected_s`).
    AgentDisconnected => "agent.disconnected",
    /// An agent that stopped reading was dropped at its byte limit.
    AgentDropped => "agent.dropped",
    /// The HTTP endpoint could not listen; the daemon runs without it.
    GatewayListenFailed => "gateway.listen_failed",
    /// Two servers offer a tool under the same exposed name.
    GatewayToolCollision => "gateway.tool_collision",
    /// The daemon runs.
    DaemonStarted => "daemon.started",
    /// The daemon's last event.
    DaemonStopped => "daemon.stopped",
    /// A reload applied a config.
    DaemonReloaded => "daemon.reloaded",
    /// A reload found problems in the config and changed nothing.
    DaemonReloadFailed => "daemon.reload_failed",
    /// The guard or the subreaper could not be set up.
    DaemonContainmentFailed => "daemon.containment_failed",
    /// A setting of the project's config that widens access (`auth = "none"`, a listen
    /// address beyond loopback): not applied without the user's opt-in, or applied with
    /// it (file, line, column, key, applied, reason).
    ConfigAccess => "config.access",
    /// The journal writer fell behind and lost events.
    JournalLagged => "journal.lagged",
    /// A dev process is being spawned.
    ProcessStarting => "process.starting",
    /// A dev process passed its readiness check.
    ProcessReady => "process.ready",
    /// A dev process exited on its own with success.
    ProcessExited => "process.exited",
    /// A dev process died.
    ProcessCrashed => "process.crashed",
    /// A dev process could not be started.
    ProcessStartFailed => "process.start_failed",
    /// A dev process stopped on request.
    ProcessStopped => "process.stopped",
    /// A dev process is restarted after a delay.
    ProcessRestarting => "process.restarting",
    /// The crash-loop breaker gave up on a dev process.
    ProcessGaveUp => "process.gave_up",
    /// A scanned error line in a process's output or a server's stderr.
    Alert => "alert",
    /// A dev proxy listens (listen address, target, url).
    ProxyStarted => "proxy.started",
    /// A dev proxy stopped on request.
    ProxyStopped => "proxy.stopped",
    /// A dev proxy could not reach its target (what happened, method, url); the client
    /// got a 502 page.
    ProxyError => "proxy.error",
    /// The target answered a request with a 5xx (method, url, status, message).
    ProxyRequestFailed => "proxy.request_failed",
    /// A page behind a dev proxy reported an error (kind, message, location, page).
    BrowserError => "browser.error",
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind string this version does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown event kind '{}'", self.0)
    }
}

impl std::error::Error for UnknownKind {}

impl FromStr for Kind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Kind::parse(s).ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_string() {
        for &k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert_eq!(k.as_str().parse::<Kind>(), Ok(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<Kind>(&json).unwrap(), k);
        }
        let unique: std::collections::BTreeSet<_> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(unique.len(), Kind::ALL.len(), "two kinds share a string");
    }

    #[test]
    fn unknown_kinds_are_none_or_errors() {
        assert_eq!(Kind::parse("server.exploded"), None);
        assert_eq!(
            "server.exploded".parse::<Kind>(),
            Err(UnknownKind("server.exploded".into()))
        );
        assert!(serde_json::from_str::<Kind>("\"server.exploded\"").is_err());
    }

    /// The strings are a public contract: this list is what ARCHITECTURE.md documents.
    #[test]
    fn the_documented_strings_stay() {
        let documented = [
            "server.starting",
            "server.ready",
            "server.start_failed",
            "server.crashed",
            "server.restarting",
            "server.gave_up",
            "server.stopped",
            "server.noise",
            "server.tools_changed",
            "server.call_timeout",
            "server.escaped",
            "agent.connected",
            "agent.disconnected",
            "agent.dropped",
            "gateway.listen_failed",
            "gateway.tool_collision",
            "daemon.started",
            "daemon.stopped",
            "daemon.reloaded",
            "daemon.reload_failed",
            "daemon.containment_failed",
            "journal.lagged",
        ];
        for s in documented {
            assert!(Kind::parse(s).is_some(), "{s} is gone");
        }
    }
}
