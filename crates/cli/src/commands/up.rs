//! `corral up`: run the project's servers behind the Streamable HTTP gateway, in the
//! foreground, with a live console of events and `[server:name]` stderr lines.
//!
//! The project daemon (control socket, `-d`, `corral down`, bridges) builds on this in
//! issue 3; today `up` is the foreground server that HTTP clients connect to.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_events::EventBus;
use corral_gateway::http::{HttpGateway, HttpOptions};
use corral_gateway::{GatewayOptions, Hub};
use std::io::IsTerminal;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(config: Option<&Path>) -> CmdResult {
    let cfg = project::load(config)?;
    let token = match cfg.gateway.auth {
        corral_config::HttpAuth::Token => Some(load_or_create_token(&cfg.state_dir)?),
        corral_config::HttpAuth::None => None,
    };
    let listener = tokio::net::TcpListener::bind(&cfg.gateway.listen)
        .await
        .map_err(|e| {
            Failure::Op(format!(
                "cannot listen on {} ({e}); change [gateway] listen in {} (port 0 picks a free port)",
                cfg.gateway.listen,
                cfg.path.display()
            ))
        })?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::Op(format!("cannot read the bound address: {e}")))?;

    let servers = project::select(&cfg, None)?;
    let bus = EventBus::default();
    let mut events = bus.subscribe();
    let (req_tx, req_rx) = tokio::sync::mpsc::unbounded_channel();
    let hook = corral_supervisor::NotificationHook::default();
    let console = corral_supervisor::Console::stderr();
    let run = Standalone::start_with_requests(
        &cfg,
        servers,
        bus.clone(),
        Some(console),
        req_tx,
        hook.clone(),
    );
    let color = std::io::stderr().is_terminal();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) => eprintln!("{}", output::render_event(&ev, color)),
                Err(RecvError::Lagged(n)) => {
                    eprintln!("corral: {n} events not shown (console too slow)")
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
    let handles = run
        .supervisor
        .servers()
        .map(|h| (h.name().to_owned(), h.clone()))
        .collect();
    let hub = Hub::start(
        handles,
        GatewayOptions {
            tool_prefix: cfg.gateway.tool_prefix,
            builtin_tools: cfg.gateway.builtin_tools,
        },
        bus,
        Some(req_rx),
        Some(hook),
    );
    let http = HttpGateway::new(
        hub,
        HttpOptions {
            token: token.clone(),
            local_addr: local,
        },
    );
    // The one line scripts read: where the endpoint is.
    println!("corral: MCP endpoint http://{local}/mcp");
    match &token {
        Some(t) => println!(
            "corral: bearer token {t} (stored in {})",
            cfg.state_dir.join("token").display()
        ),
        None => println!("corral: no token required (gateway.auth = \"none\")"),
    }
    http.serve(listener, project::interrupted()).await;
    run.stop().await;
    Ok(())
}

/// The project's bearer token: read from `.corral/token`, or created there (0600, in a
/// 0700 directory) on first start.
fn load_or_create_token(state_dir: &Path) -> Result<String, Failure> {
    let path = state_dir.join("token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_owned();
        if t.len() >= 32 {
            return Ok(t);
        }
    }
    let fail = |what: &str, e: std::io::Error| {
        Failure::Op(format!("cannot {what} {}: {e}", path.display()))
    };
    std::fs::create_dir_all(state_dir).map_err(|e| fail("create the directory of", e))?;
    let _ = std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700));
    let token = corral_gateway::http::new_token();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| fail("write", e))?;
    std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes())
        .map_err(|e| fail("write", e))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail("protect", e))?;
    Ok(token)
}
