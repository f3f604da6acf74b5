//! The daemon: one per project, holding the servers every agent shares.

use crate::journal;
use crate::lock::FileLock;
use crate::paths::Paths;
use crate::protocol::{Reply, Request};
use corral_config::{Config, HttpAuth, Listen, ServerConfig, Transport};
use corral_events::rows::{DaemonStatus, PsReply};
use corral_events::{Event, EventBus, Kind, Source};
use corral_gateway::builtin::server_row;
use corral_gateway::catalog::{Lookup, Route};
use corral_gateway::http::{HttpGateway, HttpOptions};
use corral_gateway::{GatewayOptions, Hub};
use corral_supervisor::lines::{LineRead, read_line_bounded};
use corral_supervisor::{Console, NotificationHook, ServerHandle, Supervisor, SupervisorOptions};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::{broadcast, watch};

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "a daemon already runs for this project (pid {pid}); `corral ps` shows it, `corral down` stops it"
    )]
    AlreadyRunning { pid: u32 },
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DaemonError + 'a {
    move |source| DaemonError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// What a started daemon tells its caller.
#[derive(Debug, Clone)]
pub struct DaemonInfo {
    pub pid: u32,
    /// `http://ADDR/mcp`, or `None` when the HTTP endpoint could not listen.
    pub endpoint: Option<String>,
    /// Why there is no HTTP endpoint. Agents on stdio (`corral mcp`) are unaffected.
    pub http_error: Option<String>,
    /// What is not as it should be for as long as the daemon runs (the guard or the
    /// subreaper could not be set up).
    pub warnings: Vec<String>,
    pub token: Option<String>,
    pub socket: PathBuf,
}

/// A callback that sees every event; the flag says whether the event's server writes
/// its stderr to the live console (`DaemonOptions::console`, and the server not `quiet`),
/// so a crash's stderr tail was shown there already.
pub type EventSink = Box<dyn Fn(&Event, bool) + Send + Sync>;

/// Whether `ev` is a server's whose stderr lines go to the console (it is not `quiet`).
fn on_console(hub: &std::sync::Weak<Hub>, ev: &Event) -> bool {
    let Some(name) = ev.server() else {
        return false;
    };
    hub.upgrade()
        .and_then(|hub| hub.servers().get(name).map(|h| !h.config().quiet))
        .unwrap_or(false)
}

/// How the daemon reports.
#[derive(Default)]
pub struct DaemonOptions {
    /// Live `[server:name]` stderr lines (foreground `corral up`, the daemon log).
    pub console: Option<Console>,
    /// Called for every event (the foreground console prints them).
    pub on_event: Option<EventSink>,
    /// The program to re-run as the guard process (`corral __guard`).
    pub guard_exe: Option<PathBuf>,
}

/// Shared by every control connection.
struct State {
    /// The config in force (replaced by a reload).
    config: std::sync::RwLock<Config>,
    paths: Paths,
    info: DaemonInfo,
    hub: Arc<Hub>,
    /// `None` when the HTTP endpoint could not listen (`info.http_error` says why).
    http: Option<Arc<HttpGateway>>,
    /// Taken out at shutdown.
    supervisor: tokio::sync::Mutex<Option<Supervisor>>,
    bus: EventBus,
    shutdown: watch::Sender<bool>,
    /// Cloned by every `events -f` stream while it runs; taken out at the end of
    /// shutdown, so the daemon knows when the last follower has its `daemon.stopped`.
    followers: std::sync::Mutex<Option<tokio::sync::mpsc::Sender<()>>>,
}

impl State {
    fn servers(&self) -> Arc<BTreeMap<String, ServerHandle>> {
        self.hub.servers()
    }

    fn server(&self, name: &str) -> Option<ServerHandle> {
        self.servers().get(name).cloned()
    }
}

/// Runs the daemon for `config` until `stop` resolves or a client asks it to shut down.
/// `ready` is called once everything listens (before the servers are ready).
pub async fn run(
    config: Config,
    opts: DaemonOptions,
    ready: impl FnOnce(&DaemonInfo),
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    let paths = Paths::new(&config.path, &config.state_dir);
    paths.prepare().map_err(io("create", &paths.state_dir))?;
    let lock = FileLock::try_lock(&paths.pid).map_err(io("lock", &paths.pid))?;
    let Some(lock) = lock else {
        let pid = std::fs::read_to_string(&paths.pid)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        return Err(DaemonError::AlreadyRunning { pid });
    };
    write_pid(&lock).map_err(io("write", &paths.pid))?;

    // We hold the lock, so any socket file left behind is stale.
    let _ = std::fs::remove_file(&paths.socket);
    let control = UnixListener::bind(&paths.socket).map_err(io("bind", &paths.socket))?;
    std::fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io("protect", &paths.socket))?;

    let token = match config.gateway.auth {
        HttpAuth::Token => Some(load_or_create_token(&paths.state_dir)?),
        HttpAuth::None => None,
    };
    let listener = bind_http(&config.gateway.listen, &paths.endpoint).await;
    let _ = std::fs::remove_file(&paths.endpoint);
    let local = match &listener {
        Ok(l) => {
            let local = l.local_addr().ok();
            if let Some(addr) = local {
                write_private(&paths.endpoint, &format!("http://{addr}/mcp\n"))
                    .map_err(io("write", &paths.endpoint))?;
            }
            local
        }
        Err(_) => None,
    };

    let bus = EventBus::default();
    let journal = journal::spawn_writer(&bus, paths.journal.clone());
    // Subscribed now, so the sink sees every event; it starts once the hub exists.
    let sink_rx = opts.on_event.as_ref().map(|_| bus.subscribe());
    let (req_tx, req_rx) = tokio::sync::mpsc::unbounded_channel();
    let hook = NotificationHook::default();
    let mut sopts = SupervisorOptions::new(bus.clone(), config.state_dir.join("logs"));
    sopts.console = opts.console.clone();
    sopts.requests = Some(req_tx);
    sopts.on_notification = Some(hook.clone());
    // Never dropped: each is an event, and a warning in `corral ps` for as long as the
    // daemon runs.
    let containment = sopts.contain(opts.guard_exe.as_deref());
    for problem in &containment {
        bus.emit(
            Event::new(Kind::DaemonContainmentFailed, Source::Corral)
                .with("reason", problem.clone()),
        );
    }
    let supervisor = Supervisor::start(
        config
            .servers
            .values()
            .map(|s| child_config(s, &paths.socket)),
        &sopts,
    );
    let servers = supervisor.handles();
    let hub = Hub::start(
        servers.clone(),
        GatewayOptions {
            tool_prefix: config.gateway.tool_prefix,
            builtin_tools: config.gateway.builtin_tools,
        },
        bus.clone(),
        Some(req_rx),
        Some(hook),
    );
    if let (Some(on_event), Some(mut rx)) = (opts.on_event, sink_rx) {
        let hub = Arc::downgrade(&hub);
        let console = opts.console.is_some();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => on_event(&ev, console && on_console(&hub, &ev)),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
    let (http, http_task) = match (listener, local) {
        (Ok(listener), Some(local_addr)) => {
            let http = HttpGateway::new(
                hub.clone(),
                HttpOptions {
                    token: token.clone(),
                    token_file: paths.state_dir.join("token"),
                    local_addr,
                    limits: corral_gateway::httpd::Limits::within_fd_limit(),
                },
            );
            let task = {
                let http = http.clone();
                let mut rx = shutdown_rx.clone();
                tokio::spawn(async move {
                    http.serve(listener, async move {
                        let _ = rx.wait_for(|s| *s).await;
                    })
                    .await
                })
            };
            (Ok(http), Some(task))
        }
        (Err(reason), _) => (Err(reason), None),
        (Ok(_), None) => (Err("cannot read the bound address".to_owned()), None),
    };
    let info = DaemonInfo {
        pid: std::process::id(),
        endpoint: local.map(|a| format!("http://{a}/mcp")),
        http_error: http.as_ref().err().cloned(),
        warnings: containment,
        token,
        socket: paths.socket.clone(),
    };
    if let Some(reason) = &info.http_error {
        bus.emit(
            Event::new(Kind::GatewayListenFailed, Source::Corral)
                .with("listen", config.gateway.listen.to_string())
                .with("reason", reason.clone()),
        );
    }
    bus.emit(
        Event::new(Kind::DaemonStarted, Source::Corral)
            .with("pid", info.pid)
            .with("endpoint", info.endpoint.clone())
            .with("servers", servers.len()),
    );
    ready(&info);
    drop(servers);
    let (followers_tx, mut followers_done) = tokio::sync::mpsc::channel::<()>(1);
    let state = Arc::new(State {
        config: std::sync::RwLock::new(config),
        paths,
        info,
        hub,
        http: http.ok(),
        supervisor: tokio::sync::Mutex::new(Some(supervisor)),
        bus: bus.clone(),
        shutdown: shutdown_tx,
        followers: std::sync::Mutex::new(Some(followers_tx)),
    });
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(io("handle SIGHUP for", &state.paths.pid))?;

    tokio::pin!(stop);
    let mut backoff = corral_gateway::httpd::AcceptBackoff::new("control socket");
    loop {
        tokio::select! {
            conn = control.accept() => match conn {
                Ok((stream, _)) => {
                    backoff.reset();
                    tokio::spawn(serve_client(state.clone(), stream));
                }
                Err(e) => backoff.wait(&e).await,
            },
            _ = hangup.recv() => {
                let state = state.clone();
                tokio::spawn(async move { reload(&state).await });
            }
            _ = shutdown_rx.wait_for(|s| *s) => break,
            _ = &mut stop => break,
        }
    }

    let _ = state.shutdown.send(true);
    drop(control);
    let _ = std::fs::remove_file(&state.paths.socket);
    if let Some(supervisor) = state.supervisor.lock().await.take() {
        let deadline = supervisor.shutdown_deadline();
        supervisor.shutdown(deadline).await;
    }
    if let Some(task) = http_task {
        let _ = task.await;
    }
    bus.emit(Event::new(Kind::DaemonStopped, Source::Corral).with("pid", state.info.pid));
    // Event followers end with that event; give them a moment to send it.
    let following = state.followers.lock().unwrap().take();
    drop(following);
    let _ = tokio::time::timeout(Duration::from_secs(2), followers_done.recv()).await;
    drop(state);
    drop(bus);
    let _ = tokio::time::timeout(Duration::from_secs(2), journal).await;
    drop(lock);
    Ok(())
}

/// Binds the HTTP endpoint: the configured address; unset, the port of the last run
/// (from `endpoint_file`) when it is still free, else any free loopback port. The error
/// is a message for `corral ps` and the `gateway.listen_failed` event: the daemon runs
/// on without HTTP, since stdio agents do not need it.
async fn bind_http(listen: &Listen, endpoint_file: &Path) -> Result<TcpListener, String> {
    let addr = match listen {
        Listen::Addr(a) => a.clone(),
        Listen::Auto => {
            let last_port = std::fs::read_to_string(endpoint_file)
                .ok()
                .and_then(|url| port_of(&url));
            if let Some(port) = last_port
                && let Ok(l) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await
            {
                return Ok(l);
            }
            "127.0.0.1:0".to_owned()
        }
    };
    TcpListener::bind(&addr).await.map_err(|e| {
        format!(
            "cannot listen on {addr} ({e}); HTTP clients cannot connect, agents using \
             `corral mcp` are unaffected; change or remove [gateway] listen (unset: a free port)"
        )
    })
}

/// The port of an `http://127.0.0.1:PORT/mcp` endpoint URL.
fn port_of(url: &str) -> Option<u16> {
    let authority = url.trim().strip_prefix("http://127.0.0.1:")?;
    authority
        .split('/')
        .next()?
        .parse()
        .ok()
        .filter(|p| *p != 0)
}

/// Replaces `path` with `text`, readable by the owner only (also a file left wider by an
/// older version).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(text.as_bytes())
}

/// A server as the daemon runs it: with [`crate::DAEMON_SOCKET_ENV`] set to the control
/// socket, so a `corral mcp` among the servers knows not to connect back to us.
fn child_config(server: &ServerConfig, socket: &Path) -> ServerConfig {
    let mut server = server.clone();
    if let Transport::Stdio { env, .. } = &mut server.transport {
        env.insert(
            crate::DAEMON_SOCKET_ENV.to_owned(),
            socket.display().to_string(),
        );
    }
    server
}

fn write_pid(lock: &FileLock) -> std::io::Result<()> {
    let mut f = lock.file();
    f.set_len(0)?;
    f.seek(SeekFrom::Start(0))?;
    writeln!(f, "{}", std::process::id())?;
    f.flush()
}

/// The project's bearer token: read from `.corral/token`, or created there (0600) on first
/// start.
pub fn load_or_create_token(state_dir: &Path) -> Result<String, DaemonError> {
    let path = state_dir.join("token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_owned();
        if t.len() >= 32 {
            return Ok(t);
        }
    }
    // The state directory is already 0700 (`Paths::prepare`).
    let token = corral_gateway::http::new_token();
    write_private(&path, &format!("{token}\n")).map_err(io("write", &path))?;
    Ok(token)
}

async fn serve_client(state: Arc<State>, stream: UnixStream) {
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
    match request {
        Request::Mcp => {
            corral_gateway::stdio::serve(state.hub.clone(), reader, write).await;
        }
        Request::McpHandoff => handoff(&state, reader, write).await,
        Request::Events { lines, follow } => {
            // Subscribe before reading the journal, so nothing falls between the two.
            let mut rx = state.bus.subscribe();
            for ev in journal::tail(&state.paths.journal, lines) {
                if send_line(&mut write, &ev.to_json_line()).await.is_err() {
                    return;
                }
            }
            if !follow {
                return;
            }
            // A follower sees the daemon out: through shutdown (the servers' `stopped`
            // events) up to and including `daemon.stopped`; the daemon waits for it.
            let Some(_following) = state.followers.lock().unwrap().clone() else {
                return; // Already stopped.
            };
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        if send_line(&mut write, &ev.to_json_line()).await.is_err()
                            || ev.is(Kind::DaemonStopped)
                        {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
        Request::Logs {
            name,
            lines,
            follow,
        } => {
            let Some(h) = state.server(&name) else {
                let _ = write
                    .write_all(unknown(&state, &name).line().as_bytes())
                    .await;
                return;
            };
            follow_log(h.log_path().to_owned(), lines, follow, &mut write, &state).await;
        }
        other => {
            let reply = handle(&state, other).await;
            let _ = write.write_all(reply.line().as_bytes()).await;
        }
    }
}

/// Serves MCP on the agent's own pipes, handed over by the bridge: no byte goes through
/// the bridge. The session ends when the agent closes its pipes (then the bridge is told
/// and exits) or when the bridge goes away (then the session is dropped: calls in flight
/// are cancelled on the servers).
async fn handoff(
    state: &State,
    mut reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut write: tokio::net::unix::OwnedWriteHalf,
) {
    if write
        .write_all(Reply::ok(Value::Null).line().as_bytes())
        .await
        .is_err()
    {
        return;
    }
    let sock: &UnixStream = reader.get_ref().as_ref();
    let fds = loop {
        if sock.readable().await.is_err() {
            return;
        }
        match sock.try_io(tokio::io::Interest::READABLE, || {
            crate::fdpass::recv_fds(sock, 2)
        }) {
            Ok(fds) => break fds,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
    };
    let mut fds = fds.into_iter();
    let io = match (fds.next(), fds.next()) {
        (Some(i), Some(o)) => corral_gateway::fdio::reader(i).zip(corral_gateway::fdio::writer(o)),
        _ => None,
    };
    let Some((input, output)) = io else {
        let _ = write
            .write_all(
                Reply::err("expected two pipe or socket descriptors")
                    .line()
                    .as_bytes(),
            )
            .await;
        return;
    };
    let mut probe = [0u8; 1];
    tokio::select! {
        _ = corral_gateway::stdio::serve(state.hub.clone(), input, output) => {
            let _ = write.write_all(Reply::ok(Value::Null).line().as_bytes()).await;
        }
        // The bridge never writes after the handoff: a read returns only when it is gone.
        _ = tokio::io::AsyncReadExt::read(&mut reader, &mut probe) => {}
    }
}

async fn send_line(w: &mut (impl AsyncWriteExt + Unpin), line: &str) -> std::io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.write_all(b"\n").await
}

fn unknown(state: &State, name: &str) -> Reply {
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

/// Log lines as `{"line": …}` JSON lines: the last `n`, then (with `follow`) new ones as
/// the file grows, across rotations, until the client leaves or the daemon stops.
async fn follow_log(
    path: PathBuf,
    n: usize,
    follow: bool,
    write: &mut (impl AsyncWriteExt + Unpin),
    state: &State,
) {
    let text = corral_gateway::builtin::tail_of_file(&path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for l in &all[all.len().saturating_sub(n)..] {
        if send_line(write, &json!({ "line": l }).to_string())
            .await
            .is_err()
        {
            return;
        }
    }
    if !follow {
        return;
    }
    let mut follower = corral_supervisor::stderr::LogFollower::new(&path);
    let mut stopping = state.shutdown.subscribe();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
        for text in follower.poll() {
            if send_line(write, &json!({ "line": text }).to_string())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// Re-reads the config and applies the difference: servers whose definition changed are
/// restarted, removed ones stopped, new ones started, the rest left alone; agents get
/// `list_changed`. A config with problems changes nothing. Settings that need a restart
/// of the daemon (`gateway.*`) are reported, not applied.
async fn reload(state: &State) -> Reply {
    let path = state.config.read().unwrap().path.clone();
    let new = match corral_config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("config not reloaded, nothing changed:\n{e}");
            state.bus.emit(
                Event::new(Kind::DaemonReloadFailed, Source::Corral).with("reason", msg.clone()),
            );
            return Reply::err(msg);
        }
    };
    let old = state.config.read().unwrap().clone();
    let mut guard = state.supervisor.lock().await;
    let Some(sup) = guard.as_mut() else {
        return Reply::err("the daemon is shutting down");
    };
    let (mut added, mut removed, mut restarted, mut unchanged) = (vec![], vec![], vec![], vec![]);
    for (name, cfg) in &old.servers {
        match new.servers.get(name) {
            None => {
                sup.remove(name).await;
                removed.push(name.clone());
            }
            Some(n) if n != cfg => {
                sup.remove(name).await;
                sup.add(child_config(n, &state.paths.socket));
                restarted.push(name.clone());
            }
            Some(_) => unchanged.push(name.clone()),
        }
    }
    for (name, cfg) in &new.servers {
        if !old.servers.contains_key(name) {
            sup.add(child_config(cfg, &state.paths.socket));
            added.push(name.clone());
        }
    }
    let servers = sup.handles();
    drop(guard);
    state.hub.set_servers(servers);
    let mut warnings = Vec::new();
    if old.gateway != new.gateway {
        warnings.push(
            "[gateway] settings changed: they apply when the daemon restarts (`corral down`, `corral up -d`)"
                .to_owned(),
        );
    }
    *state.config.write().unwrap() = new;
    let data = json!({
        "added": added,
        "removed": removed,
        "restarted": restarted,
        "unchanged": unchanged,
        "warnings": warnings,
    });
    let mut ev = Event::new(Kind::DaemonReloaded, Source::Corral);
    if let Value::Object(m) = &data {
        ev.data.extend(m.clone());
    }
    state.bus.emit(ev);
    Reply::ok(data)
}

async fn handle(state: &State, request: Request) -> Reply {
    match request {
        Request::Status => Reply::ok_of(&status(state)),
        Request::Ps => Reply::ok_of(&PsReply {
            daemon: status(state),
            servers: state.servers().values().map(server_row).collect(),
            processes: None,
        }),
        Request::Tools { server } => {
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
            let tools: Vec<Value> = ready
                .into_iter()
                .flat_map(|h| corral_gateway::catalog::listing(h, &catalog))
                .collect();
            if let Some(s) = &server
                && !servers.contains_key(s)
            {
                return unknown(state, s);
            }
            Reply::ok(json!({ "tools": tools, "failed": failed }))
        }
        Request::Call {
            server,
            tool,
            arguments,
        } => {
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
                    let r = b.call(&state.servers(), &arguments).await;
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
        Request::Restart { ref name }
        | Request::Start { ref name }
        | Request::Stop { ref name } => {
            let Some(h) = state.server(name) else {
                return unknown(state, name);
            };
            match request {
                Request::Restart { .. } => h.restart().await,
                Request::Start { .. } => h.start().await,
                _ => {
                    h.stop().await;
                    return Reply::ok_of(&server_row(&h));
                }
            }
            settle(&h).await
        }
        Request::Shutdown => {
            let agents = state.hub.session_count();
            let _ = state.shutdown.send(true);
            Reply::ok(json!({ "pid": state.info.pid, "agents": agents }))
        }
        Request::Reload => reload(state).await,
        Request::Mcp | Request::McpHandoff | Request::Events { .. } | Request::Logs { .. } => {
            Reply::err("streaming request on the wrong path")
        }
    }
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

fn status(state: &State) -> DaemonStatus {
    DaemonStatus {
        pid: state.info.pid,
        endpoint: state.info.endpoint.clone(),
        config: state.config.read().unwrap().path.clone(),
        socket: state.info.socket.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        agents: state.hub.session_count(),
        http_error: state.info.http_error.clone(),
        warnings: state.info.warnings.clone(),
        http_sessions: state.http.as_ref().map_or(0, |h| h.session_count()),
    }
}
