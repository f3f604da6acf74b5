//! The control socket: one connection, one request line, parsed once into a
//! [`Request`] and dispatched once ([`dispatch`]) to the module of its family:
//!
//! - [`servers`]: `ps`, `tools`, `call`, `start` / `stop` / `restart` (of a server, or
//!   through [`processes`] of a dev process);
//! - [`processes`]: dev processes: their `ps` rows, `run` (an ad-hoc process), and
//!   `start` / `stop` / `restart` of one;
//! - [`proxies`]: dev proxies: their `ps` rows, `proxy_start`, `proxy_stop`,
//!   `proxy_log`;
//! - [`daemon`]: `status`, `shutdown`;
//! - [`config`]: `reload` (also SIGHUP);
//! - [`logs`]: `logs`, with `follow` a stream;
//! - [`events`]: `events`, with `follow` a stream that sees the daemon out;
//! - [`session`]: `mcp` (this connection becomes an MCP session) and `mcp_handoff` (the
//!   bridge passes the agent's own pipes).
//!
//! A request of a family answers with one [`Reply`] line, or keeps the connection as a
//! stream; either way the connection ends with the request.

pub(crate) mod config;
pub(crate) mod daemon;
pub(crate) mod events;
pub(crate) mod logs;
pub(crate) mod processes;
pub(crate) mod proxies;
pub(crate) mod servers;
pub(crate) mod session;

use crate::lifecycle::DaemonInfo;
use crate::paths::Paths;
use crate::protocol::{Reply, Request};
use corral_config::Config;
use corral_events::EventBus;
use corral_gateway::Hub;
use corral_gateway::http::HttpGateway;
use corral_supervisor::lines::{LineRead, read_line_bounded};
use corral_supervisor::{Processes, ServerHandle, Supervisor};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Shared by every control connection.
pub(crate) struct State {
    /// The config in force (replaced by a reload).
    pub(crate) config: std::sync::RwLock<Config>,
    pub(crate) paths: Paths,
    pub(crate) info: DaemonInfo,
    pub(crate) hub: Arc<Hub>,
    /// `None` when the HTTP endpoint could not listen (`info.http_error` says why).
    pub(crate) http: Option<Arc<HttpGateway>>,
    /// Taken out at shutdown.
    pub(crate) supervisor: tokio::sync::Mutex<Option<Supervisor>>,
    /// The dev processes (the supervisor's registry, shared: usable without its lock).
    pub(crate) processes: Processes,
    /// The dev proxies, configured and running.
    pub(crate) proxies: corral_proxy::Proxies,
    pub(crate) bus: EventBus,
    /// Cancelled when the daemon stops.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// Cloned by every `events -f` stream while it runs; taken out at the end of
    /// shutdown, so the daemon knows when the last follower has its `daemon.stopped`.
    pub(crate) followers: std::sync::Mutex<Option<tokio::sync::mpsc::Sender<()>>>,
    /// `--allow-widened-access` of the daemon's start, for reloads' trust gate.
    pub(crate) allow_widened_access: bool,
    /// The dashboard's logins and sessions.
    pub(crate) dashboard: crate::dashboard::access::Access,
}

impl State {
    pub(crate) fn servers(&self) -> Arc<BTreeMap<String, ServerHandle>> {
        self.hub.servers()
    }

    pub(crate) fn server(&self, name: &str) -> Option<ServerHandle> {
        self.servers().get(name).cloned()
    }
}

/// Serves one control connection: reads its request line (bounded), parses it, and
/// dispatches it.
pub(crate) async fn serve_client(state: Arc<State>, stream: UnixStream) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    match read_line_bounded(&mut reader, &mut line, crate::protocol::MAX_REQUEST).await {
        Ok(LineRead::Line) => {}
        Ok(LineRead::TooLong { len }) => {
            let msg = format!(
                "bad request: a control request of {len} bytes is over the {} KiB limit \
                 (one JSON request per line; larger tool arguments go through `corral mcp` or \
                 `corral call --standalone`)",
                crate::protocol::MAX_REQUEST >> 10
            );
            let _ = write.write_all(Reply::err(msg).line().as_bytes()).await;
            return;
        }
        Ok(LineRead::Eof) | Err(_) => return,
    }
    let request = match crate::protocol::parse_request(line.trim_ascii()) {
        Ok(r) => r,
        Err(e) => {
            let _ = write
                .write_all(Reply::err(format!("bad request: {e}")).line().as_bytes())
                .await;
            return;
        }
    };
    dispatch(&state, request, reader, write).await;
}

/// The one place a request meets its handler. A streaming request writes its own
/// lines; every other one answers with one reply line.
async fn dispatch(
    state: &State,
    request: Request,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
    let reply = match request {
        Request::Mcp { profile } => return session::mcp(state, profile, reader, write).await,
        Request::McpHandoff { profile } => {
            return session::handoff(state, profile, reader, write).await;
        }
        Request::Events { lines, follow } => {
            return events::stream(state, lines, follow, &mut write).await;
        }
        Request::Logs {
            name,
            lines,
            follow,
        } => return logs::stream(state, &name, lines, follow, &mut write).await,
        Request::Status => daemon::status(state),
        Request::Shutdown => daemon::shutdown(state),
        Request::Dashboard => match crate::dashboard::open(state) {
            Ok(answer) => Reply::ok(answer),
            Err(e) => Reply::err(e),
        },
        Request::Ps => servers::ps(state),
        Request::Tools { server } => servers::tools(state, server).await,
        Request::Call {
            server,
            tool,
            arguments,
        } => servers::call(state, server, tool, arguments).await,
        Request::Start { name } => servers::start(state, &name).await,
        Request::Stop { name } => servers::stop(state, &name).await,
        Request::Restart { name } => servers::restart(state, &name).await,
        Request::Run { name, command, cwd } => processes::run(state, &name, command, cwd).await,
        Request::Reload => config::reload(state).await,
        Request::ProxyStart {
            name,
            target,
            listen,
            inject,
        } => {
            let req = proxies::StartRequest {
                name,
                target,
                listen,
                inject,
            };
            proxies::start(state, req).await
        }
        Request::ProxyStop { name } => proxies::stop(state, &name).await,
        Request::Errors { args } => daemon::errors(state, &args).await,
        Request::ProxyLog {
            name,
            limit,
            errors,
        } => proxies::log(state, &name, limit, errors),
    };
    let _ = write.write_all(reply.line().as_bytes()).await;
}

pub(crate) async fn send_line(
    w: &mut (impl AsyncWriteExt + Unpin),
    line: &str,
) -> std::io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.write_all(b"\n").await
}

/// The refusal of a request naming a server the daemon does not run.
pub(crate) fn unknown(state: &State, name: &str) -> Reply {
    let servers = state.servers();
    let known: Vec<&str> = servers.keys().map(String::as_str).collect();
    Reply::err_code(
        crate::protocol::UNKNOWN_SERVER,
        format!(
            "no server named '{name}'; servers: {}",
            if known.is_empty() {
                "(none)".to_owned()
            } else {
                known.join(", ")
            }
        ),
    )
}

/// The refusal of a request naming neither a server nor a dev process of the daemon.
pub(crate) fn unknown_unit(state: &State, name: &str) -> Reply {
    let servers = state.servers();
    let list = |names: Vec<&str>| {
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    };
    let processes = state.processes.list();
    let mut proxies = state.proxies.names();
    proxies.extend(state.proxies.configured_names());
    proxies.sort();
    proxies.dedup();
    Reply::err_code(
        crate::protocol::UNKNOWN_SERVER,
        format!(
            "no server, process or proxy named '{name}'; servers: {}; processes: {}; proxies: {}",
            list(servers.keys().map(String::as_str).collect()),
            list(processes.iter().map(|p| p.name()).collect()),
            list(proxies.iter().map(String::as_str).collect()),
        ),
    )
}
