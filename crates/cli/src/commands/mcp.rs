//! `corral mcp`: the stdio MCP endpoint an agent's config launches.
//!
//! Until the project daemon exists (issue 3), every `corral mcp` runs its servers
//! in-process (`--standalone`). stdout carries only MCP messages; servers' stderr and
//! Corral's own events go to stderr, where agents keep MCP server logs.

use crate::project::{self, Standalone};
use crate::{CmdResult, output};
use corral_events::EventBus;
use corral_gateway::{GatewayOptions, Hub};
use std::path::Path;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(config: Option<&Path>, _standalone: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, None)?;
    let bus = EventBus::default();
    let mut events = bus.subscribe();
    let (req_tx, req_rx) = tokio::sync::mpsc::unbounded_channel();
    let hook = corral_supervisor::NotificationHook::default();
    let run = Standalone::start_with_requests(
        &cfg,
        servers,
        bus.clone(),
        Some(corral_supervisor::Console::stderr()),
        req_tx,
        hook.clone(),
    );
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) if ev.kind != "server.noise" => {
                    eprintln!("{}", output::render_event(&ev, false))
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    let handles = run
        .supervisor
        .servers()
        .map(|h| (h.name().to_owned(), h.clone()))
        .collect();
    let opts = GatewayOptions {
        tool_prefix: cfg.gateway.tool_prefix,
        builtin_tools: cfg.gateway.builtin_tools,
    };
    let hub = Hub::start(handles, opts, bus, Some(req_rx), Some(hook));
    tokio::select! {
        _ = corral_gateway::stdio::serve(hub, tokio::io::stdin(), tokio::io::stdout()) => {}
        _ = project::interrupted() => {}
    }
    run.stop().await;
    Ok(())
}
