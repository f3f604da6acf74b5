//! The server tools: every MCP server behind the endpoint with its state, one server's
//! stderr log, and a restart that waits until it is ready again.

use super::Builtin;
use crate::jsonrpc;
use corral_events::rows::ServerRow;
use corral_supervisor::ServerHandle;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

/// Most log lines `server_logs` returns.
const MAX_LINES: usize = 1000;
/// How much of the end of a log file `server_logs` reads.
const LOG_WINDOW: u64 = 4 * 1024 * 1024;

/// The tool object of server tool `b` for `tools/list` (without its name).
pub fn definition(b: Builtin) -> Value {
    let server = json!({"type": "string"});
    match b {
        Builtin::Servers => json!({
            "description": "Corral: the MCP servers behind this endpoint: state, pid, uptime, \
                restarts, last error, tool count. Dev processes: `{processes}`.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
        }),
        Builtin::ServerLogs => json!({
            "description": "Corral: an MCP server's stderr, newest last.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "server": server,
                    "lines": {"type": "integer", "minimum": 1, "maximum": MAX_LINES, "description": "default 50"},
                    "grep": {"type": "string", "description": "only lines containing this (any case)"}
                },
                "required": ["server"]
            },
            "annotations": {"readOnlyHint": true},
        }),
        Builtin::RestartServer => json!({
            "description": "Corral: restart an MCP server (or start a stopped one) and wait \
                until it is ready.",
            "inputSchema": {
                "type": "object",
                "properties": {"server": server},
                "required": ["server"]
            },
            "annotations": {"destructiveHint": false, "idempotentHint": true},
        }),
        _ => json!({}),
    }
}

/// Runs server tool `b`; a `tools/call` result.
pub async fn call(b: Builtin, servers: &BTreeMap<String, ServerHandle>, args: &Value) -> String {
    match b {
        Builtin::Servers => servers_table(servers),
        Builtin::ServerLogs => match pick(servers, args) {
            Ok(h) => logs(h, args),
            Err(e) => jsonrpc::tool_error_result(&e),
        },
        Builtin::RestartServer => match pick(servers, args) {
            Ok(h) => restart(h).await,
            Err(e) => jsonrpc::tool_error_result(&e),
        },
        _ => jsonrpc::tool_error_result(&format!("'{}' is not a server tool", b.name())),
    }
}

fn pick<'a>(
    servers: &'a BTreeMap<String, ServerHandle>,
    args: &Value,
) -> Result<&'a ServerHandle, String> {
    let name = args
        .get("server")
        .and_then(Value::as_str)
        .ok_or("missing argument `server`")?;
    servers.get(name).ok_or_else(|| {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        format!("no server named '{name}'; servers: {}", known.join(", "))
    })
}

/// One server as `corral ps --json` and the `servers` tool show it.
pub fn server_row(h: &ServerHandle) -> ServerRow {
    server_row_of(h, &h.status())
}

fn server_row_of(h: &ServerHandle, s: &corral_supervisor::ServerStatus) -> ServerRow {
    ServerRow {
        name: s.name.clone(),
        state: s.state.as_str().to_owned(),
        pid: s.pid,
        uptime_s: s.uptime().map(|d| d.as_secs()),
        restarts: s.restarts,
        tools: s.tool_count,
        in_flight: h.in_flight(),
        last_error: s.last_error.clone(),
        protocol_version: s.protocol_version.clone(),
        era: s.era.map(|e| e.as_str().to_owned()),
    }
}

fn servers_table(servers: &BTreeMap<String, ServerHandle>) -> String {
    let mut rows = Vec::new();
    let mut text = String::new();
    for h in servers.values() {
        let s = h.status();
        let uptime = s.uptime().map(|d| d.as_secs());
        let row = server_row_of(h, &s);
        text.push_str(&format!(
            "{}: {}{}{}{}, {} tools, {} restarts{}\n",
            s.name,
            s.state.as_str(),
            s.pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
            uptime.map(|u| format!(", up {u}s")).unwrap_or_default(),
            s.protocol_version
                .as_deref()
                .map(|v| format!(", MCP {v}"))
                .unwrap_or_default(),
            s.tool_count,
            s.restarts,
            s.last_error
                .as_deref()
                .map(|e| format!(", last error: {e}"))
                .unwrap_or_default(),
        ));
        rows.push(row);
    }
    if text.is_empty() {
        text.push_str("no servers are configured\n");
    }
    jsonrpc::tool_text_result(text.trim_end(), Some(&json!({ "servers": rows })))
}

fn logs(h: &ServerHandle, args: &Value) -> String {
    let n = args
        .get("lines")
        .and_then(Value::as_u64)
        .map_or(50, |n| n.clamp(1, MAX_LINES as u64) as usize);
    let grep = args
        .get("grep")
        .and_then(Value::as_str)
        .map(str::to_lowercase);
    let keep = |l: &str| grep.as_ref().is_none_or(|g| l.to_lowercase().contains(g));
    let mut lines: Vec<String> = match tail_of_file(h.log_path()) {
        Some(all) => all.lines().filter(|l| keep(l)).map(str::to_owned).collect(),
        None => h
            .stderr_tail(usize::MAX)
            .into_iter()
            .filter(|l| keep(l))
            .collect(),
    };
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    let s = h.status();
    let header = format!(
        "server '{}' is {}; last {} stderr line(s){} from {}:",
        h.name(),
        s.state.as_str(),
        lines.len(),
        grep.as_ref()
            .map(|g| format!(" matching '{g}'"))
            .unwrap_or_default(),
        h.log_path().display()
    );
    let mut text = header;
    for l in &lines {
        text.push('\n');
        text.push_str(l);
    }
    jsonrpc::tool_text_result(&text, None)
}

/// The last 4 MiB of a log file, starting at a line boundary.
pub fn tail_of_file(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(LOG_WINDOW);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    Some(match (start > 0, text.find('\n')) {
        (true, Some(i)) => text[i + 1..].to_owned(),
        _ => text,
    })
}

async fn restart(h: &ServerHandle) -> String {
    // Always a restart: a server still starting is started again too. (`start` would be
    // a no-op on a running instance, and the first `ready` would then be reported as a
    // restart that never happened.)
    h.restart().await;
    let limit = h.config().startup_timeout + Duration::from_secs(1);
    match h.wait_ready(limit).await {
        Ok(()) => {
            let s = h.status();
            jsonrpc::tool_text_result(
                &format!(
                    "server '{}' restarted: ready, pid {}, {} tools",
                    h.name(),
                    s.pid.unwrap_or(0),
                    s.tool_count
                ),
                None,
            )
        }
        Err(_) => jsonrpc::tool_error_result(&format!(
            "server '{}' did not come back: {}",
            h.name(),
            h.failure_report()
        )),
    }
}
