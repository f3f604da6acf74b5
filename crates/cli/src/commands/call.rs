//! `corral call SERVER TOOL [JSON]`: start one server, call one tool, print, stop.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure};
use corral_events::EventBus;
use corral_supervisor::{CallError, RpcError, ServerState, with_tail};
use serde_json::Value;
use serde_json::value::RawValue;
use std::path::Path;
use std::time::Duration;

pub async fn run(
    config: Option<&Path>,
    server: &str,
    tool: &str,
    arguments: &str,
    json: bool,
    standalone: bool,
) -> CmdResult {
    let args: Box<RawValue> = match serde_json::from_str::<Box<RawValue>>(arguments) {
        Ok(raw) if raw.get().trim_start().starts_with('{') => raw,
        _ => {
            return Err(Failure::Usage(format!(
                "arguments must be a JSON object, e.g. '{{\"text\": \"hi\"}}'; got: {arguments}"
            )));
        }
    };
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, Some(server))?;
    if !standalone && project::daemon_running(&cfg).await {
        let req = corral_daemon::Request::Call {
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments: serde_json::from_str(args.get()).unwrap_or(Value::Null),
        };
        let result = project::daemon_request(&cfg, &req).await?;
        return print_result(server, tool, &result.to_string(), json);
    }
    let run = Standalone::start(&cfg, servers, EventBus::default(), None);
    let handle = run
        .supervisor
        .get(server)
        .expect("selected server runs")
        .clone();
    let work = async {
        let limit = handle.config().startup_timeout + Duration::from_secs(1);
        if handle.wait_ready(limit).await.is_err() {
            return Err(Failure::Op(format!(
                "server '{server}' failed to start: {}",
                handle.failure_report()
            )));
        }
        if !handle.config().tools.permits(tool) {
            return Err(Failure::Op(format!(
                "tool '{tool}' of server '{server}' is excluded by its tools.allow / tools.deny config"
            )));
        }
        match handle.call_tool(tool, Some(&args)).await {
            Ok(r) => Ok(r),
            Err(
                e @ CallError::Rpc {
                    source: RpcError::Closed(_),
                    ..
                },
            ) => {
                // The server died under the call: wait (briefly) for the supervisor to
                // record the death, so the stderr lines that explain it can be shown.
                let mut watch = handle.watch();
                let settled = watch.wait_for(|s| s.state != ServerState::Ready);
                let _ = tokio::time::timeout(Duration::from_secs(2), settled).await;
                let tail = handle.status().last_stderr_tail;
                Err(Failure::Op(with_tail(&e.to_string(), &tail)))
            }
            Err(e) => Err(Failure::Op(e.to_string())),
        }
    };
    let result = tokio::select! {
        r = work => r,
        _ = project::interrupted() => Err(Failure::Op("interrupted".into())),
    };
    run.stop().await;
    let result = result?;
    print_result(server, tool, result.get(), json)
}

fn print_result(server: &str, tool: &str, raw: &str, json: bool) -> CmdResult {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    if json {
        println!("{raw}");
    } else {
        for item in v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            println!("{}", render_content(item));
        }
        if let Some(sc) = v
            .get("structuredContent")
            .filter(|_| v.get("content").is_none())
        {
            println!("{sc}");
        }
    }
    if is_error {
        Err(Failure::Op(format!(
            "tool '{tool}' of server '{server}' returned an error"
        )))
    } else {
        Ok(())
    }
}

/// One content block for a terminal: text as it is, everything else summarized.
fn render_content(item: &Value) -> String {
    let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
    match s("type") {
        "text" => s("text").to_owned(),
        "image" | "audio" => format!(
            "[{} {}, {} bytes base64]",
            s("type"),
            s("mimeType"),
            s("data").len()
        ),
        "resource_link" => format!("[resource link {}]", s("uri")),
        "resource" => {
            let r = item.get("resource").cloned().unwrap_or(Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => format!(
                    "[resource {}]",
                    r.get("uri").and_then(Value::as_str).unwrap_or("")
                ),
            }
        }
        _ => item.to_string(),
    }
}
