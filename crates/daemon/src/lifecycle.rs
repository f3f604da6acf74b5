//! The daemon's life: the lock, the control socket and the HTTP endpoint bound, the
//! supervisor and the gateway started, `ready` announced; then the accept loop (control
//! connections go to [`crate::control`], SIGHUP reloads), and the orderly stop.

use crate::control::{self, State};
use crate::journal;
use crate::lock::FileLock;
use crate::paths::Paths;
use crate::token::load_or_create_token;
use corral_config::{Config, HttpAuth, Listen, ServerConfig, Transport};
use corral_events::{Event, EventBus, Kind, Source};
use corral_gateway::http::{HttpGateway, HttpOptions};
use corral_gateway::{GatewayOptions, Hub};
use corral_supervisor::alerts::Alerts;
use corral_supervisor::{Console, NotificationHook, Processes, Supervisor, SupervisorOptions};
use std::io::{Seek, SeekFrom, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

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

pub(crate) fn io<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> DaemonError + 'a {
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

/// A callback that sees every event; the flag says whether the event's server or dev
/// process writes its output to the live console (`DaemonOptions::console`, and the unit
/// not `quiet`), so a crash's output tail was shown there already.
pub type EventSink = Box<dyn Fn(&Event, bool) + Send + Sync>;

/// Whether `ev` is a server's whose stderr lines go to the console, or a dev process's
/// whose output does (it is not `quiet`).
fn on_console(hub: &std::sync::Weak<Hub>, processes: &Processes, ev: &Event) -> bool {
    if let Some(Source::Process(name)) = ev.source() {
        return processes.get(&name).is_some_and(|p| !p.config().quiet);
    }
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
    /// `--allow-widened-access`: the project's config may widen access (see
    /// [`corral_config::trust`]); also on reloads.
    pub allow_widened_access: bool,
}

/// Runs the daemon for `config` until `stop` resolves or a client asks it to shut down.
/// `ready` is called once everything listens (before the servers are ready).
pub async fn run(
    config: Config,
    opts: DaemonOptions,
    ready: impl FnOnce(&DaemonInfo),
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), DaemonError> {
    // Who may reach the daemon is the user's decision, never the repository's.
    let (config, access) = gate(&config, opts.allow_widened_access);
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
    // What the journal holds from before now is history to `get_errors`.
    let began = std::time::SystemTime::now();
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
    sopts.remote_program = opts.guard_exe.clone();
    sopts.project_root = Some(config.root.clone());
    let containment = sopts.contain(opts.guard_exe.as_deref());
    for problem in &containment {
        bus.emit(
            Event::new(Kind::DaemonContainmentFailed, Source::Corral)
                .with("reason", problem.clone()),
        );
    }
    // Alerts: the config's patterns were checked at load; ids in `disable` are checked
    // here (only the scanner knows the built-in ones), and a wrong one costs the
    // user's settings, not the alerts.
    let (alerts, alert_problem) = match Alerts::new(&config.alerts, bus.clone()) {
        Ok(a) => (a, None),
        Err(e) => (
            Alerts::new(&Default::default(), bus.clone()).expect("the default alert rules compile"),
            Some(format!("[alerts] is ignored: {e}")),
        ),
    };
    sopts.alerts = Some(alerts);
    let mut supervisor = Supervisor::start(
        config
            .servers
            .values()
            .map(|s| child_config(s, &paths.socket)),
        &sopts,
    );
    let mut containment = containment;
    // Said in `corral ps` for as long as the daemon runs, as an event and on the console.
    for notice in &access {
        bus.emit(access_event(notice));
    }
    containment.extend(access.iter().map(|n| n.message.clone()));
    if let Err(e) = supervisor.start_processes(config.start_order()) {
        containment.push(e);
    }
    containment.extend(alert_problem);
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
    hub.attach_processes(supervisor.processes().clone(), config.root.clone());
    let proxies = corral_proxy::Proxies::new(bus.clone());
    containment.extend(crate::control::proxies::start_configured(&proxies, &config).await);
    hub.attach_proxies(proxies.clone());
    hub.set_profiles(config.profiles.clone());
    hub.set_error_noise(config.error_noise.clone());
    hub.set_history(paths.journal.clone(), began);
    if let (Some(on_event), Some(mut rx)) = (opts.on_event, sink_rx) {
        let hub = Arc::downgrade(&hub);
        let processes = supervisor.processes().clone();
        let console = opts.console.is_some();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(ev) => on_event(&ev, console && on_console(&hub, &processes, &ev)),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
    // The daemon's one cancellation: the accept loop, the HTTP server and log followers
    // end on it.
    let shutdown = CancellationToken::new();
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
                let stop = shutdown.clone().cancelled_owned();
                tokio::spawn(async move { http.serve(listener, stop).await })
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
        processes: supervisor.processes().clone(),
        proxies,
        supervisor: tokio::sync::Mutex::new(Some(supervisor)),
        bus: bus.clone(),
        shutdown: shutdown.clone(),
        followers: std::sync::Mutex::new(Some(followers_tx)),
        allow_widened_access: opts.allow_widened_access,
        dashboard: Default::default(),
    });
    crate::dashboard::mount(&state);
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(io("handle SIGHUP for", &state.paths.pid))?;

    tokio::pin!(stop);
    let mut backoff = corral_gateway::httpd::AcceptBackoff::new("control socket");
    loop {
        tokio::select! {
            conn = control.accept() => match conn {
                Ok((stream, _)) => {
                    backoff.reset();
                    tokio::spawn(control::serve_client(state.clone(), stream));
                }
                Err(e) => backoff.wait(&e).await,
            },
            _ = hangup.recv() => {
                let state = state.clone();
                tokio::spawn(async move { control::config::reload(&state).await });
            }
            _ = shutdown.cancelled() => break,
            _ = &mut stop => break,
        }
    }

    state.shutdown.cancel();
    // Agents' open subscriptions/listen are answered now, while their connections are
    // still there to carry the answer.
    state.hub.end_listens(None, "shutdown");
    drop(control);
    let _ = std::fs::remove_file(&state.paths.socket);
    state.proxies.stop_all().await;
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

/// `config` as it may run: [`corral_config::trust::gate`] with the trust of the user
/// (`allow` is `--allow-widened-access`; the environment and the user config are read
/// now), and what to tell them. A user config that cannot be used is one more line.
pub(crate) fn gate(config: &Config, allow: bool) -> (Config, Vec<AccessNote>) {
    let trust = corral_config::trust::Trust::resolve(allow, &|name| std::env::var(name).ok());
    let (config, notices) = corral_config::trust::gate(config, &trust);
    let mut notes: Vec<AccessNote> = notices
        .into_iter()
        .map(|n| AccessNote {
            message: n.to_string(),
            notice: Some(n),
        })
        .collect();
    if notes.is_empty()
        && let Some(problem) = &trust.problem
    {
        notes.push(AccessNote {
            message: format!(
                "your user config is not used: {}",
                problem.to_string().replace('\n', "; ")
            ),
            notice: None,
        });
    }
    (config, notes)
}

/// One line of what [`gate`] says: a setting (not) applied, or the user config's problem.
pub(crate) struct AccessNote {
    pub message: String,
    pub notice: Option<corral_config::trust::Notice>,
}

/// The `config.access` event of `note`.
pub(crate) fn access_event(note: &AccessNote) -> Event {
    let mut ev =
        Event::new(Kind::ConfigAccess, Source::Corral).with("reason", note.message.clone());
    if let Some(n) = &note.notice {
        ev = ev
            .with("file", n.file.display().to_string())
            .with("line", n.line)
            .with("column", n.column)
            .with("key", n.key.clone())
            .with("applied", n.applied);
    }
    ev
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
pub(crate) fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
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
pub(crate) fn child_config(server: &ServerConfig, socket: &Path) -> ServerConfig {
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
