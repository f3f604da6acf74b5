//! `corral call TOOL [JSON]` / `corral call SERVER TOOL [JSON]`: call one tool, print
//! its result. Through the daemon when one runs, else with the servers started
//! in-process for the one command. TOOL is resolved by the gateway's own routes
//! ([`corral_gateway::catalog::resolve`]), so every name `corral tools` lists works,
//! however it was prefixed or shortened.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure};
use corral_config::{Config, ToolPrefix};
use corral_events::EventBus;
use corral_gateway::catalog::{self, Catalog, Lookup, Route};
use corral_supervisor::{CallError, RpcError, ServerState, with_tail};
use serde_json::Value;
use serde_json::value::RawValue;
use std::path::Path;
use std::time::Duration;

/// The positionals as (server, tool, arguments): `TOOL [JSON]` when the second word is
/// JSON (or absent), else `SERVER TOOL [JSON]`.
pub fn forms(
    target: String,
    second: Option<String>,
    third: Option<String>,
) -> Result<(Option<String>, String, String), Failure> {
    let json_like = |s: &str| s.trim_start().starts_with('{');
    match (second, third) {
        (None, _) => Ok((None, target, "{}".to_owned())),
        (Some(j), None) if json_like(&j) => Ok((None, target, j)),
        (Some(j), Some(extra)) if json_like(&j) => Err(Failure::Usage(format!(
            "unexpected '{extra}' after the JSON arguments; \
             the forms are `corral call TOOL [JSON]` and `corral call SERVER TOOL [JSON]`"
        ))),
        (Some(tool), third) => Ok((Some(target), tool, third.unwrap_or_else(|| "{}".into()))),
    }
}

pub async fn run(
    config: Option<&Path>,
    server: Option<&str>,
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
    let what = match server {
        Some(s) => format!("tool '{tool}' of server '{s}'"),
        None => format!("tool '{tool}'"),
    };
    let cfg = project::load(config)?;
    if let Some(s) = server {
        project::select(&cfg, Some(s))?;
    }
    if !standalone && project::daemon_running(&cfg).await {
        let req = corral_daemon::Request::Call {
            server: server.map(str::to_owned),
            tool: tool.to_owned(),
            arguments: serde_json::from_str(args.get()).unwrap_or(Value::Null),
        };
        let reply = corral_daemon::client::request(&project::paths(&cfg), &req)
            .await
            .map_err(|e| Failure::Op(e.to_string()))?;
        let message = || {
            reply
                .error
                .clone()
                .unwrap_or_else(|| "the daemon refused".into())
        };
        return match (reply.ok, reply.is_usage()) {
            (true, _) => print_result(&what, &reply.data.to_string(), json),
            (false, true) => Err(Failure::Usage(message())),
            (false, false) => Err(Failure::Op(message())),
        };
    }
    let run = Standalone::start(
        &cfg,
        candidates(&cfg, server, tool),
        EventBus::default(),
        None,
    );
    let handles = run.supervisor.handles();
    let work = async {
        // Every started server gets its chance to be ready, so its tools can be named.
        let waits: Vec<_> = handles
            .values()
            .map(|h| {
                let h = h.clone();
                tokio::spawn(async move {
                    let limit = h.config().startup_timeout + Duration::from_secs(1);
                    let _ = h.wait_ready(limit).await;
                })
            })
            .collect();
        for w in waits {
            let _ = w.await;
        }
        let catalog = Catalog::build(
            handles.values(),
            cfg.gateway.tool_prefix,
            cfg.gateway.builtin_tools,
        );
        let (server, tool) = match catalog::resolve(&catalog, &handles, server, tool) {
            Lookup::Found(Route::Server { server, tool }) => (server, tool),
            Lookup::Found(Route::Builtin(b)) => {
                let args: Value = serde_json::from_str(args.get()).unwrap_or(Value::Null);
                let ctx = corral_gateway::tools::Ctx {
                    names: &catalog.builtins,
                    ..corral_gateway::tools::Ctx::servers(&handles)
                };
                let answer = corral_gateway::tools::call(b, &ctx, &args).await;
                return Ok(corral_gateway::jsonrpc::raw(answer));
            }
            Lookup::Down(server) => {
                let report = handles
                    .get(&server)
                    .map_or_else(String::new, |h| h.failure_report());
                return Err(Failure::Op(format!(
                    "server '{server}' failed to start: {report}"
                )));
            }
            Lookup::Miss(message) => return Err(Failure::Usage(message)),
        };
        let handle = &handles[&server];
        match handle.call_tool(&tool, Some(&args)).await {
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
                let settled = watch.wait_for(|s| s.state() != ServerState::Ready);
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
    print_result(&what, result.get(), json)
}

/// The servers to start for a standalone call: the one named; else, with the default
/// `tool_prefix = "always"`, those whose `<server>__` prefix the tool name has; else all
/// (bare names, shortened names and Corral's own tools can belong to any of them).
fn candidates(cfg: &Config, server: Option<&str>, tool: &str) -> Vec<corral_config::ServerConfig> {
    let all = cfg.servers.values();
    let picked: Vec<_> = match (server, cfg.gateway.tool_prefix) {
        (Some(s), _) => all.filter(|c| c.name == s).cloned().collect(),
        (None, ToolPrefix::Always) => all
            .filter(|c| {
                tool.strip_prefix(c.name.as_str())
                    .is_some_and(|rest| rest.starts_with(corral_gateway::naming::SEP))
            })
            .cloned()
            .collect(),
        (None, ToolPrefix::Never) => Vec::new(),
    };
    if picked.is_empty() {
        cfg.servers.values().cloned().collect()
    } else {
        picked
    }
}

/// `what` names the tool in the error line: "tool 'x'" or "tool 'x' of server 'y'".
fn print_result(what: &str, raw: &str, json: bool) -> CmdResult {
    let v: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    // Tool results come from the servers: escaped on a terminal, as they are elsewhere.
    let style = crate::output::Style::stdout();
    if json {
        println!("{raw}");
    } else {
        for item in v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            println!("{}", style.shown(&render_content(item)));
        }
        if let Some(sc) = v
            .get("structuredContent")
            .filter(|_| v.get("content").is_none())
        {
            println!("{}", style.shown(&sc.to_string()));
        }
    }
    if is_error {
        Err(Failure::Op(format!("{what} returned an error")))
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
