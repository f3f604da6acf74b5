//! The server family: `ps`, `tools`, `call`, `start` / `stop` / `restart`.

use super::{State, daemon, processes, unknown, unknown_unit};
use crate::protocol::Reply;
use corral_events::rows::PsReply;
use corral_gateway::catalog::{Lookup, Route};
use corral_gateway::tools::server_row;
use corral_supervisor::ServerHandle;
use serde_json::{Value, json};

/// `ps`: the daemon and every server's row.
pub(crate) fn ps(state: &State) -> Reply {
    Reply::ok_of(&PsReply {
        daemon: daemon::status_of(state),
        servers: state.servers().values().map(server_row).collect(),
        processes: processes::rows(state),
        proxies: super::proxies::rows(state),
    })
}

/// `tools`: the tool list by the names agents see, of every server or one, waiting for
/// servers still starting; the servers that are not ready are listed with why.
pub(crate) async fn tools(state: &State, server: Option<String>) -> Reply {
    let servers = state.servers();
    let mut failed = Vec::new();
    let mut ready = Vec::new();
    for h in servers.values() {
        if server.as_deref().is_some_and(|s| s != h.name()) {
            continue;
        }
        let _ = h.wait_ready(h.config().startup_timeout).await;
        if h.state() == corral_supervisor::ServerState::Ready {
            ready.push(h);
        } else {
            failed.push(json!({"server": h.name(), "error": h.failure_report()}));
        }
    }
    let catalog = state.hub.fresh_catalog();
    let mut tools: Vec<Value> = ready
        .into_iter()
        .flat_map(|h| corral_gateway::catalog::listing(h, &catalog))
        .collect();
    if server.is_none() {
        // What `corral call` can also call (and suggests): Corral's own tools.
        tools.extend(corral_gateway::catalog::builtin_listing(&catalog));
    }
    if let Some(s) = &server
        && !servers.contains_key(s)
    {
        return unknown(state, s);
    }
    Reply::ok(json!({ "tools": tools, "failed": failed }))
}

/// `call`: one tool, by its exposed name or (with `server`) also the server's own.
pub(crate) async fn call(
    state: &State,
    server: Option<String>,
    tool: String,
    arguments: Value,
) -> Reply {
    if let Some(s) = &server
        && state.server(s).is_none()
    {
        let mut reply = unknown(state, s);
        reply.data = json!({ "usage": true });
        return reply;
    }
    let route = match state.hub.resolve_tool(server.as_deref(), &tool).await {
        Lookup::Found(route) => route,
        Lookup::Down(s) => {
            let Some(h) = state.server(&s) else {
                return unknown(state, &s);
            };
            return Reply::err(cli_message(&h.unavailable(), &h));
        }
        Lookup::Miss(message) => return Reply::usage(message),
    };
    let (server, tool) = match route {
        Route::Server { server, tool } => (server, tool),
        Route::Builtin(b) => {
            let r = state.hub.call_builtin(b, &arguments, "corral call").await;
            return Reply::ok(serde_json::from_str(&r).unwrap_or(Value::Null));
        }
    };
    let Some(h) = state.server(&server) else {
        return unknown(state, &server);
    };
    let args = corral_gateway::jsonrpc::raw(arguments.to_string());
    match h.call_tool(&tool, Some(&args)).await {
        Ok(r) => Reply::ok(serde_json::from_str(r.get()).unwrap_or(Value::Null)),
        Err(e) => Reply::err(cli_message(&e, &h)),
    }
}

/// `start`: starts a stopped (or given-up) server and waits until it is ready (or a dev
/// process: [`processes::start`]).
pub(crate) async fn start(state: &State, name: &str) -> Reply {
    let Some(h) = state.server(name) else {
        return match state.processes.get(name) {
            Some(p) => processes::start(state, &p).await,
            None => match state.proxies.get(name) {
                Some(p) => Reply::ok_of(&p.row()),
                None if state.proxies.configured(name).is_some() => {
                    super::proxies::start(
                        state,
                        super::proxies::StartRequest {
                            name: name.to_owned(),
                            ..Default::default()
                        },
                    )
                    .await
                }
                None => unknown_unit(state, name),
            },
        };
    };
    h.start().await;
    settle(&h).await
}

/// `restart`: stops and starts a server and waits until it is ready (or a dev process).
pub(crate) async fn restart(state: &State, name: &str) -> Reply {
    let Some(h) = state.server(name) else {
        return match state.processes.get(name) {
            Some(p) => processes::restart(state, &p).await,
            None => match super::proxies::restart(state, name).await {
                Some(reply) => reply,
                None => unknown_unit(state, name),
            },
        };
    };
    h.restart().await;
    settle(&h).await
}

/// `stop`: stops a server (or a dev process) gracefully; answers with its row.
pub(crate) async fn stop(state: &State, name: &str) -> Reply {
    let Some(h) = state.server(name) else {
        return match state.processes.get(name) {
            Some(p) => processes::stop(state, &p).await,
            None if state.proxies.get(name).is_some() => super::proxies::stop(state, name).await,
            None => unknown_unit(state, name),
        };
    };
    h.stop().await;
    Reply::ok_of(&server_row(&h))
}

/// A failed call worded for the person at the terminal: the reason, what to run next
/// (`corral start` for a server stopped on purpose; else `corral logs`, with the stderr
/// lines that explain it).
fn cli_message(e: &corral_supervisor::CallError, h: &ServerHandle) -> String {
    let name = h.name();
    if e.stopped() {
        // Stopped on purpose: the old stderr explains nothing.
        return format!("{e}; run `corral start {name}` to start it");
    }
    let next = format!("`corral logs {name}` shows its stderr");
    corral_supervisor::with_tail(&format!("{e}; {next}"), &h.status().last_stderr_tail)
}

/// Waits (bounded by the startup timeout) for a (re)started server to be ready, and
/// reports its row — or why it is not ready.
async fn settle(h: &ServerHandle) -> Reply {
    match h.wait_ready(h.config().startup_timeout).await {
        Ok(()) => Reply::ok_of(&server_row(h)),
        Err(_) => Reply::err(format!(
            "server '{}' did not become ready: {}",
            h.name(),
            h.failure_report()
        )),
    }
}
