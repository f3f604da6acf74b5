//! `corral mcp`: the stdio MCP endpoint an agent's config launches.
//!
//! By default a thin bridge: it connects to the project's daemon (starting it detached
//! when none runs) and hands it its stdin/stdout pipes, so the daemon speaks to the agent
//! directly and every agent shares one set of servers. When stdio is not a pipe or socket
//! (a terminal), it relays bytes instead.
//! `--standalone` runs the servers (and the config's dev processes) in this process
//! instead. stdout carries only MCP
//! messages; diagnostics go to stderr, where agents keep MCP server logs.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use corral_events::{EventBus, Kind};
use corral_gateway::{GatewayOptions, Hub, fdio};
use std::path::Path;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(config: Option<&Path>, standalone: bool, profile: Option<String>) -> CmdResult {
    // On a worker thread, not the `block_on` thread: every wake-up of a relay loop would
    // otherwise be a cross-thread hand-off (BENCHMARKS.md, "Where the time goes").
    let config = config.map(Path::to_owned);
    let work = tokio::spawn(async move {
        if standalone {
            standalone_gateway(config.as_deref(), profile).await
        } else {
            bridge(config.as_deref(), profile).await
        }
    });
    work.await
        .unwrap_or_else(|e| Err(Failure::Op(format!("internal error: {e}"))))
}

async fn bridge(config: Option<&Path>, profile: Option<String>) -> CmdResult {
    let cfg = project::load(config)?;
    project::check_profile(&cfg, profile.as_deref())?;
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Op(format!("cannot find my own binary: {e}")))?;
    let paths = project::paths(&cfg);
    refuse_own_daemon(&cfg, &paths)?;
    let mut stream = corral_daemon::client::connect_or_start(&paths, &exe, &cfg.path)
        .await
        .map_err(|e| Failure::Op(format!("cannot reach the project daemon: {e}")))?;
    use std::os::fd::AsFd;
    if fdio::is_pipe_or_socket(std::io::stdin().as_fd())
        && fdio::is_pipe_or_socket(std::io::stdout().as_fd())
    {
        return handoff(stream, &paths, profile).await;
    }
    corral_daemon::client::send(&mut stream, &Request::Mcp { profile })
        .await
        .map_err(|e| Failure::Op(format!("cannot talk to the daemon: {e}")))?;
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let (mut stdin, mut stdout) = corral_gateway::fdio::stdio();
    let upstream = async {
        let _ = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        // The agent closed our stdin: let the daemon finish what is in flight.
        let _ = to_daemon.shutdown().await;
    };
    let downstream = async {
        let r = tokio::io::copy(&mut from_daemon, &mut stdout).await;
        let _ = stdout.flush().await;
        r
    };
    tokio::pin!(upstream);
    tokio::pin!(downstream);
    let mut agent_done = false;
    loop {
        tokio::select! {
            _ = &mut upstream, if !agent_done => agent_done = true,
            _ = &mut downstream => {
                if agent_done {
                    return Ok(());
                }
                return Err(daemon_gone(&paths));
            }
        }
    }
}

/// A daemon sets its control socket in its servers' environment: a bridge that would
/// connect to that same socket is running as one of that daemon's servers, and would
/// only feed the daemon's tools back into itself, session after session.
fn refuse_own_daemon(cfg: &corral_config::Config, paths: &corral_daemon::Paths) -> CmdResult {
    let under = std::env::var_os(corral_daemon::DAEMON_SOCKET_ENV);
    if under.is_some_and(|s| std::path::Path::new(&s) == paths.socket) {
        let server = std::env::var(corral_supervisor::reaper::SERVER_ENV).unwrap_or_default();
        return Err(Failure::Op(format!(
            "`corral mcp` runs as server '{server}' of the project daemon it would connect \
             to, which would loop forever; remove server '{server}' from {} (agents start \
             `corral mcp` themselves, from their own MCP config)",
            cfg.path.display()
        )));
    }
    Ok(())
}

fn daemon_gone(paths: &corral_daemon::Paths) -> Failure {
    Failure::Op(format!(
        "the project daemon went away (see {}); restart the MCP connection to start a new one",
        paths.daemon_log.display()
    ))
}

/// Hands our stdin/stdout to the daemon, which then serves the agent on them directly,
/// and waits until it says the session ended (or goes away).
async fn handoff(
    stream: tokio::net::UnixStream,
    paths: &corral_daemon::Paths,
    profile: Option<String>,
) -> CmdResult {
    use std::os::fd::AsRawFd;
    let gone = || daemon_gone(paths);
    let mut stream = tokio::io::BufReader::new(stream);
    corral_daemon::client::send(stream.get_mut(), &Request::McpHandoff { profile })
        .await
        .map_err(|e| Failure::Op(format!("cannot talk to the daemon: {e}")))?;
    let Ok(ready) = corral_daemon::client::read_reply(&mut stream).await else {
        return Err(gone());
    };
    if !String::from_utf8_lossy(&ready).contains("\"ok\":true") {
        return Err(refused(&ready));
    }
    let fds = [std::io::stdin().as_raw_fd(), std::io::stdout().as_raw_fd()];
    corral_daemon::fdpass::send_fds(stream.get_ref(), &fds)
        .map_err(|e| Failure::Op(format!("cannot hand the session to the daemon: {e}")))?;
    match corral_daemon::client::read_reply(&mut stream).await {
        Ok(reply) if String::from_utf8_lossy(&reply).contains("\"ok\":true") => Ok(()),
        Ok(reply) => Err(refused(&reply)),
        Err(_) => Err(gone()),
    }
}

/// The daemon's refusal line, as the bridge's error.
fn refused(reply: &[u8]) -> Failure {
    let reply = String::from_utf8_lossy(reply);
    let why = serde_json::from_str::<serde_json::Value>(&reply)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| reply.trim().to_owned());
    Failure::Op(format!("the daemon refused the session: {why}"))
}

async fn standalone_gateway(config: Option<&Path>, profile: Option<String>) -> CmdResult {
    let cfg = project::load(config)?;
    project::check_profile(&cfg, profile.as_deref())?;
    let servers = project::select(&cfg, None)?;
    let bus = EventBus::default();
    let mut events = bus.subscribe();
    let (req_tx, req_rx) = tokio::sync::mpsc::unbounded_channel();
    let hook = corral_supervisor::NotificationHook::default();
    let mut run = Standalone::start_with_requests(
        &cfg,
        servers,
        bus.clone(),
        Some(corral_supervisor::Console::stderr()),
        req_tx,
        hook.clone(),
    );
    // The dev processes too, as the daemon runs them.
    run.start_processes(&cfg);
    // The servers' stderr and the processes' output are on the console unless `quiet`:
    // crashes point up at it. By event source (`server:NAME`, `process:NAME`).
    let live: std::collections::BTreeSet<String> = cfg
        .servers
        .values()
        .filter(|s| !s.quiet)
        .map(|s| corral_events::Source::server(s.name.clone()).to_string())
        .chain(
            cfg.processes
                .values()
                .filter(|p| !p.quiet)
                .map(|p| corral_events::Source::Process(p.name.clone()).to_string()),
        )
        .collect();
    let style = output::Style {
        color: false,
        ..output::Style::stderr()
    };
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) if !ev.is(Kind::ServerNoise) => {
                    let shown = live.contains(&ev.source);
                    eprintln!("{}", output::render_console_event(&ev, style, shown))
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    let handles = run.supervisor.handles();
    let opts = GatewayOptions {
        tool_prefix: cfg.gateway.tool_prefix,
        builtin_tools: cfg.gateway.builtin_tools,
    };
    let hub = Hub::start(handles, opts, bus.clone(), Some(req_rx), Some(hook));
    // The agent sees and runs the dev processes here as through the daemon.
    hub.attach_processes(run.supervisor.processes().clone(), cfg.root.clone());
    // And the dev proxies.
    let proxies = corral_proxy::Proxies::new(bus);
    proxies.set_configured(cfg.proxies.values().map(corral_proxy::ProxySpec::from));
    for problem in proxies.start_all_configured().await {
        eprintln!("corral: warning: {problem}");
    }
    hub.attach_proxies(proxies.clone());
    hub.set_profiles(cfg.profiles.clone());
    hub.set_error_noise(cfg.error_noise.clone());
    let (input, output) = corral_gateway::fdio::stdio();
    let serve = corral_gateway::stdio::serve(hub.clone(), profile.as_deref(), input, output);
    tokio::pin!(serve);
    tokio::select! {
        _ = &mut serve => {}
        _ = project::interrupted() => {
            // An open subscriptions/listen is answered before the session goes: a
            // moment for those answers to be written.
            if hub.end_listens(None, "shutdown") > 0 {
                let _ = tokio::time::timeout(std::time::Duration::from_millis(200), &mut serve).await;
            }
        }
    }
    proxies.stop_all().await;
    run.stop().await;
    Ok(())
}
