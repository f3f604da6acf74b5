//! The rows the daemon reports and the CLI reads: `corral ps` / `ps --json` (the control
//! socket's `ps` reply), the answer to `start` / `stop` / `restart`, the `status` reply,
//! and the structured content of the built-in `servers` tool.
//!
//! They live here, beside the events, because this crate is already the contract both
//! sides depend on and is light (serde, the bus): the gateway and the daemon write these
//! types, the CLI deserializes them, and a field renamed on one side is renamed on the
//! other or fails to compile. The field names are the public JSON contract of `corral ps
//! --json` (ARCHITECTURE.md): never renamed, only added, and every field added later is
//! `#[serde(default)]` so that a newer CLI reads an older daemon's rows. Absent values
//! are `null`, as they always were, not left out.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One MCP server as `corral ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerRow {
    /// Its name in the config.
    pub name: String,
    /// `starting`, `ready`, `backoff`, `failed`, `stopped`, `gave_up` (a string, so a
    /// state added later reads as itself in an older CLI).
    pub state: String,
    /// The child's pid while one runs.
    pub pid: Option<u32>,
    /// Seconds since it became ready, while it is.
    pub uptime_s: Option<u64>,
    pub restarts: u32,
    /// How many tools it offers.
    pub tools: usize,
    /// Calls waiting for its answer.
    pub in_flight: usize,
    pub last_error: Option<String>,
    /// The MCP revision the current (or last) ready instance negotiated: `2026-07-28`
    /// for a modern server, else what it answered to `initialize`.
    pub protocol_version: Option<String>,
    /// `modern` (2026-07-28, stateless) or `legacy` (`initialize`).
    pub era: Option<String>,
}

/// How a dev process last ended: an exit code, or the signal that killed it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LastExit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

impl std::fmt::Display for LastExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (_, Some(sig)) => write!(f, "signal {sig}"),
            (Some(code), None) => write!(f, "code {code}"),
            (None, None) => f.write_str("-"),
        }
    }
}

/// One dev process (`[processes.NAME]`) as `corral ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessRow {
    pub name: String,
    /// `starting`, `ready`, `backoff`, `stopped`, `failed`, `gave_up` (a string, as
    /// for servers).
    pub state: String,
    pub pid: Option<u32>,
    pub uptime_s: Option<u64>,
    pub restarts: u32,
    /// Whether its readiness check passed.
    pub ready: bool,
    pub last_exit: Option<LastExit>,
    /// The last alert line its output scanner raised (redacted).
    pub last_alert: Option<String>,
    /// Its command line, redacted.
    pub command: String,
    /// The ports it listens on, when known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u16>,
    /// What it waits for before it can start (`server 'db'`), while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Why its last run died or failed to start.
    pub last_error: Option<String>,
}

/// One dev proxy as `corral ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProxyRow {
    pub name: String,
    /// `http://ADDR`, where the browser goes.
    pub url: String,
    pub target: String,
    pub uptime_s: u64,
    pub started_at: String,
    /// Requests proxied since start.
    pub requests: u64,
    /// Responses ≥ 400 and transport errors since start.
    pub errors: u64,
    /// Errors the pages reported since start.
    pub browser_errors: u64,
}

/// The daemon itself: the `status` reply, and `daemon` in the `ps` reply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DaemonStatus {
    pub pid: u32,
    /// `http://ADDR/mcp`, or `null` when the HTTP endpoint could not listen.
    pub endpoint: Option<String>,
    /// The config file in force.
    pub config: PathBuf,
    /// The control socket.
    pub socket: PathBuf,
    /// Corral's version.
    pub version: String,
    /// Agent sessions, every transport.
    pub agents: usize,
    /// Why there is no HTTP endpoint.
    pub http_error: Option<String>,
    /// What is not as it should be for as long as the daemon runs.
    pub warnings: Vec<String>,
    /// Agent sessions over HTTP.
    pub http_sessions: usize,
}

/// The `ps` reply: the daemon, its servers, its dev processes and its dev proxies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PsReply {
    pub daemon: DaemonStatus,
    pub servers: Vec<ServerRow>,
    /// Left out when the daemon runs no dev processes (older daemons never send it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<Vec<ProcessRow>>,
    /// Left out when the daemon runs no dev proxies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxies: Option<Vec<ProxyRow>>,
}

/// A connected agent, as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentRow {
    /// The session's number in the daemon (its `agent.*` events carry it).
    pub id: u64,
    /// `stdio` or `http`.
    pub transport: String,
    /// `clientInfo` as "name version", once the agent sent it.
    pub client: Option<String>,
    /// The MCP revision it speaks, once known.
    pub protocol: Option<String>,
    /// Seconds since it connected.
    pub connected_s: u64,
    /// The profile it connected with (`corral mcp --profile NAME`, `/mcp/NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `ps --json` contract: these names, nulls kept.
    #[test]
    fn server_row_fields_are_the_contract() {
        let row = ServerRow {
            name: "files".into(),
            state: "failed".into(),
            restarts: 2,
            last_error: Some("exited with code 3".into()),
            ..ServerRow::default()
        };
        assert_eq!(
            serde_json::to_value(&row).unwrap(),
            json!({
                "name": "files", "state": "failed", "pid": null, "uptime_s": null,
                "restarts": 2, "tools": 0, "in_flight": 0, "last_error": "exited with code 3",
                "protocol_version": null, "era": null,
            })
        );
        let back: ServerRow = serde_json::from_value(serde_json::to_value(&row).unwrap()).unwrap();
        assert_eq!(back, row);
    }

    #[test]
    fn rows_read_additively() {
        let old: PsReply = serde_json::from_value(json!({
            "daemon": {"pid": 7, "endpoint": null, "agents": 0},
            "servers": [{"name": "a", "state": "ready", "pid": 9, "restarts": 0, "tools": 1,
                         "something_new": true}],
        }))
        .unwrap();
        assert_eq!(old.daemon.pid, 7);
        assert_eq!(old.servers[0].pid, Some(9));
        assert_eq!(old.processes, None);
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("processes"), "{line}");
    }

    #[test]
    fn process_row_round_trips() {
        let row = ProcessRow {
            name: "web".into(),
            state: "crashed".into(),
            last_exit: Some(LastExit {
                code: None,
                signal: Some(9),
            }),
            command: "npm run dev".into(),
            ..ProcessRow::default()
        };
        let v = serde_json::to_value(&row).unwrap();
        assert_eq!(v["last_exit"], json!({"signal": 9}));
        assert_eq!(serde_json::from_value::<ProcessRow>(v).unwrap(), row);
        assert_eq!(row.last_exit.unwrap().to_string(), "signal 9");
    }
}
