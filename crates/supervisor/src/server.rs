//! An MCP server as a supervised unit: the [`Role`] that spawns it, handshakes with it
//! and watches it serve, and the [`ServerHandle`] everyone else holds.
//!
//! The lifecycle — restarts, backoff, the breaker, stops, the one event per death — is
//! the shared actor's ([`crate::actor`]). What is a server's own: the MCP handshake as
//! its readiness, calls that go straight to the current [`Connection`] (no hop through
//! the actor, so the call path stays one lock and one channel send), notifications (a
//! changed tool list is re-read), and call timeouts (a server that then fails a liveness
//! ping is killed and restarted).

use crate::SupervisorOptions;
use crate::actor::{
    self, Control, Family, Life, Phase, Policy, Role, Run, SpawnFailure, StartError, State, Unit,
};
use crate::instance::Instance;
use crate::rpc::{Connection, Notification, RpcError, ServerRequest, StdoutSink, humanize};
use crate::spawn::SpawnSpec;
use crate::stderr::{self, StderrRing, StderrSinks};
use corral_config::{ServerConfig, Transport};
use corral_events::{Event, Kind};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Stderr lines quoted in a start-failure error message.
pub const ERROR_TAIL_LINES: usize = 8;
/// How long a liveness ping may take after a call timed out before the server is
/// declared unresponsive and restarted.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// The legacy protocol version Corral offers in `initialize` (the newest revision that
/// has a handshake); servers may answer with an older one.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The stateless revision Corral probes for with `server/discover`.
pub const MODERN_PROTOCOL_VERSION: &str = "2026-07-28";
/// The legacy revisions Corral speaks to a server, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// How long the `server/discover` probe waits before Corral takes the server for a
/// legacy one (at most a third of `startup_timeout`, so `initialize` keeps the rest).
pub const DISCOVER_TIMEOUT: Duration = Duration::from_secs(3);

/// Which generation of MCP a server instance speaks, as the probe found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// 2026-07-28 and later: stateless, no `initialize`, `_meta` on every request.
    Modern,
    /// 2024-11-05 … 2025-11-25: the `initialize` handshake.
    Legacy,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }
}

/// A server's state: the shared lifecycle's.
pub type ServerState = State;

/// A snapshot of a server, for `ps` and the `servers` tool.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    pub pid: Option<u32>,
    /// When the current state was entered.
    #[serde(skip)]
    pub since: SystemTime,
    /// When the current instance became ready.
    #[serde(skip)]
    pub ready_at: Option<SystemTime>,
    /// When the current (or last) instance was spawned.
    #[serde(skip)]
    pub run_started: Option<SystemTime>,
    pub restarts: u32,
    /// Why the last instance died or failed to start (short; no stderr).
    pub last_error: Option<String>,
    /// The stderr tail of that instance.
    pub last_stderr_tail: Vec<String>,
    /// The last crash followed by an automatic restart ([`crate::Life::last_crash`]).
    #[serde(skip)]
    pub last_crash: Option<crate::Crash>,
    /// The first spawn after a requested start or restart ([`crate::Life::fixed_at`]).
    #[serde(skip)]
    pub fixed_at: Option<SystemTime>,
    pub tool_count: usize,
    pub protocol_version: Option<String>,
    /// Modern (2026-07-28, stateless) or legacy (`initialize`), for the current or last
    /// ready instance.
    pub era: Option<Era>,
}

impl ServerStatus {
    /// Seconds since the instance became ready, if it is ready.
    pub fn uptime(&self) -> Option<Duration> {
        self.ready_at
            .and_then(|t| SystemTime::now().duration_since(t).ok())
    }
}

/// One tool as the server declared it.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The full tool object as the server sent it.
    pub raw: Box<RawValue>,
}

/// Why a call could not be answered by the server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The server is not serving. The message says which, since when and why; where to
    /// look next depends on who reads it (an agent has tools, a human the CLI), so the
    /// caller adds that ([`CallError::stopped`] tells whether it stays down until started).
    #[error("server '{server}' is {state} since {since} ({detail})")]
    Down {
        server: String,
        state: &'static str,
        since: String,
        detail: String,
        /// Stopped (on request, or after a clean exit it is not restarted from): it
        /// stays down until it is started again.
        stopped: bool,
    },
    #[error("{}", rpc_message(server, source))]
    Rpc {
        server: String,
        #[source]
        source: RpcError,
    },
}

/// A closed connection's reason already names the server ("server 'x' exited with code
/// 3"); other errors get the name prefixed.
impl CallError {
    /// The server the error is about.
    pub fn server(&self) -> &str {
        match self {
            CallError::Down { server, .. } | CallError::Rpc { server, .. } => server,
        }
    }

    /// Whether the server is down because it was stopped (`corral stop`, or a clean exit
    /// with no restart): it stays down until started, so the fix is to start it.
    pub fn stopped(&self) -> bool {
        matches!(self, CallError::Down { stopped: true, .. })
    }
}

fn rpc_message(server: &str, e: &RpcError) -> String {
    match e {
        RpcError::Closed(reason) => reason.to_string(),
        RpcError::Unreadable(what) => format!("server '{server}' {what}"),
        other => format!("server '{server}': {other}"),
    }
}

/// A server's part of the state its handles and its actor share.
struct Shared {
    unit: Unit,
    cfg: ServerConfig,
    /// The current instance's connection, while it is ready.
    conn: RwLock<Option<Arc<Connection>>>,
    tools: RwLock<Arc<Vec<Tool>>>,
    ring: RwLock<StderrRing>,
    notes: broadcast::Sender<Notification>,
    requests: Option<mpsc::UnboundedSender<crate::IncomingRequest>>,
    hook: Option<crate::NotificationHook>,
    /// The `initialize` result of the current (or last) ready instance (for a modern
    /// server: the same shape, built from its `server/discover` result).
    init: RwLock<Option<Arc<Value>>>,
    /// The era of the current (or last) ready instance.
    era: RwLock<Option<Era>>,
    /// The `server/discover` probe of the current instance is waiting for its answer: an
    /// exit now is the server's answer to the probe.
    in_probe: AtomicBool,
    /// The last instance exited on the probe: the next one is spoken to in the legacy
    /// way, without probing (then probes resume).
    skip_probe: AtomicBool,
    /// A second handle on the current instance's stdin pipe, held while the probe is
    /// out: if the instance exits then, the bytes still in the pipe tell whether it read
    /// the probe (and died of it) or died before reading anything (a start failure like
    /// any other). Dropped as soon as the probe is answered, so closing stdin still
    /// means EOF to the server.
    probe_pipe: Mutex<Option<ProbeWatch>>,
    /// The resource URIs agents subscribed to on this server, for the `subscriptions/listen`
    /// Corral keeps open to a modern instance ([`crate::listen`]).
    listen_uris: watch::Sender<crate::listen::Uris>,
    /// See [`SupervisorOptions::remote_program`](crate::SupervisorOptions).
    remote_program: Option<std::path::PathBuf>,
    /// See [`SupervisorOptions::project_root`](crate::SupervisorOptions).
    project_root: Option<std::path::PathBuf>,
}

/// What tells whether an instance that exited during the probe had read it.
struct ProbeWatch {
    /// A duplicate of our end of its stdin pipe.
    pipe: std::os::fd::OwnedFd,
    conn: std::sync::Weak<Connection>,
}

impl ProbeWatch {
    /// The probe went into the pipe (the write succeeded, so the child was alive to read
    /// it) and nothing is left there: the child read it.
    fn probe_was_read(&self) -> bool {
        let written = self.conn.upgrade().is_some_and(|c| c.first_written());
        written && unread_bytes(&self.pipe) == Some(0)
    }
}

/// Bytes written to a pipe and not read yet.
fn unread_bytes(fd: &std::os::fd::OwnedFd) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which lives for the call;
    // the descriptor is open (owned).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) };
    (r == 0).then_some(n.max(0) as usize)
}

impl Shared {
    fn event(&self, kind: Kind) -> Event {
        Event::new(kind, self.unit.source())
    }

    fn emit(&self, ev: Event) {
        self.unit.emit(ev);
    }

    fn tail(&self, n: usize) -> Vec<String> {
        self.ring.read().unwrap().tail(n)
    }
}

impl Role for Shared {
    type Run = ServerRun;
    const DURING_START: &'static str = "during initialize";

    fn unit(&self) -> &Unit {
        &self.unit
    }

    fn policy(&self) -> Policy {
        Policy {
            restart: self.cfg.restart,
            crash_loop: self.cfg.crash_loop,
            stop_grace: self.cfg.stop_grace,
        }
    }

    fn spawn(&self) -> Result<Instance, SpawnFailure> {
        // A new run, a new ring: a failed spawn's event must not carry the last run's lines.
        *self.ring.write().unwrap() = StderrRing::default();
        match &self.cfg.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let spec = SpawnSpec {
                    command,
                    args,
                    env,
                    cwd,
                };
                Instance::spawn(&spec, &self.unit.name, &self.unit.contain)
                    .map_err(SpawnFailure::Spawn)
            }
            // A remote server's traffic is carried by `corral __remote`, a child like any
            // other (see `corral_remote`); what it needs comes in its environment, which
            // other users cannot read (a header may hold a secret; argv is public).
            Transport::Http {
                url,
                headers,
                transport,
                ..
            } => {
                let Some(program) = self.remote_program.as_deref().and_then(|p| p.to_str()) else {
                    return Err(SpawnFailure::Permanent(
                        "remote (url) servers run only under the corral binary".into(),
                    ));
                };
                let mut env = BTreeMap::from([
                    ("CORRAL_REMOTE_URL".to_owned(), url.clone()),
                    (
                        "CORRAL_REMOTE_HEADERS".to_owned(),
                        serde_json::to_string(headers).expect("strings serialize"),
                    ),
                    ("CORRAL_REMOTE_NAME".to_owned(), self.unit.name.clone()),
                    (
                        "CORRAL_REMOTE_TRANSPORT".to_owned(),
                        transport.as_str().to_owned(),
                    ),
                ]);
                if let Some(root) = self.project_root.as_deref().and_then(|p| p.to_str()) {
                    env.insert("CORRAL_REMOTE_PROJECT".to_owned(), root.to_owned());
                }
                let spec = SpawnSpec {
                    command: program,
                    args: &["__remote".to_owned()],
                    env: &env,
                    cwd: std::path::Path::new("/"),
                };
                Instance::spawn(&spec, &self.unit.name, &self.unit.contain)
                    .map_err(SpawnFailure::Spawn)
            }
        }
    }

    fn starting_fields(&self, ev: Event) -> Event {
        match &self.cfg.transport {
            Transport::Stdio { command, args, .. } => {
                ev.with("command", self.cfg.redact(command)).with(
                    "args",
                    args.iter().map(|a| self.cfg.redact(a)).collect::<Vec<_>>(),
                )
            }
            Transport::Http { url, .. } => ev.with("url", self.cfg.redact(url)),
        }
    }

    fn attach(self: &Arc<Self>, inst: &mut Instance) -> ServerRun {
        let shared = self.clone();
        let ring = self.ring.read().unwrap().clone();
        let stderr = inst.take_stderr().expect("stderr piped");
        let alerts = self
            .unit
            .alert_tap(corral_alerts::Stream::Stderr, self.cfg.redactor());
        inst.drain(stderr::drain(
            stderr,
            StderrSinks {
                name: self.unit.name.clone(),
                ring,
                log: self.unit.log.clone(),
                console: self.unit.console.clone(),
                redactor: self.cfg.redactor(),
                alerts,
            },
        ));
        let (framing_tx, framing) = mpsc::unbounded_channel();
        let (notes_tx, notes) = mpsc::unbounded_channel();
        let sink = Arc::new(InstanceSink {
            shared: shared.clone(),
            framing: framing_tx,
            notes: notes_tx,
            noise_count: AtomicU64::new(0),
            redactor: Mutex::new(self.cfg.redactor()),
        });
        let stdin = inst.take_stdin().expect("stdin piped");
        self.in_probe.store(false, Ordering::Release);
        let pipe = {
            use std::os::fd::AsFd;
            stdin.as_fd().try_clone_to_owned().ok()
        };
        let (conn, writer, reader) = Connection::new(
            stdin,
            inst.take_stdout().expect("stdout piped"),
            self.cfg.max_concurrency.map(|n| n.get() as usize),
            sink,
        );
        *self.probe_pipe.lock().unwrap() = pipe.map(|pipe| ProbeWatch {
            pipe,
            conn: Arc::downgrade(&conn),
        });
        inst.task(writer);
        inst.drain(reader);
        let (wedged_tx, wedged) = mpsc::unbounded_channel();
        ServerRun {
            shared,
            conn,
            framing,
            notes,
            tasks: JoinSet::new(),
            probing: Arc::new(AtomicBool::new(false)),
            wedged_tx,
            wedged,
        }
    }

    fn tail(&self, n: usize) -> Vec<String> {
        Shared::tail(self, n)
    }

    /// Leaving `Ready` forgets the connection — after the phase changed, so a caller
    /// never sees "ready" without a connection: until then it gets the closed
    /// connection's reason ("exited with code 3"), after it waits for the next instance
    /// or gets the down error.
    fn phase_changed(&self, phase: Phase) {
        if !matches!(phase, Phase::Ready { .. }) {
            *self.conn.write().unwrap() = None;
        }
    }

    /// A remote server's bridge that exited with [`REMOTE_NEEDS_AUTH_EXIT`]: its last
    /// word on stderr says why and which command to run.
    fn needs_auth(&self, status: Option<std::process::ExitStatus>) -> Option<String> {
        let remote = matches!(self.cfg.transport, corral_config::Transport::Http { .. });
        if !remote || status.and_then(|s| s.code()) != Some(REMOTE_NEEDS_AUTH_EXIT) {
            return None;
        }
        let said = self.tail(5).iter().rev().find_map(|l| {
            l.find("needs authorization")
                .map(|i| l[i..].trim().to_owned())
        });
        Some(said.unwrap_or_else(|| {
            format!("needs authorization: run `corral auth {}`", self.unit.name)
        }))
    }

    /// Some legacy servers exit on any request before `initialize`: one that exited
    /// while the `server/discover` probe waited is spawned again at once and
    /// initialized without the probe (once; its next spawn probes again).
    fn respawn_at_once(&self) -> bool {
        let pipe = self.probe_pipe.lock().unwrap().take();
        let in_probe = self.in_probe.swap(false, Ordering::AcqRel);
        // Read the probe, then exited: the server's answer to it. (A server that exited
        // before reading anything left the probe in the pipe: an ordinary start failure.)
        let read_it = pipe.as_ref().is_some_and(ProbeWatch::probe_was_read);
        if in_probe && read_it {
            self.skip_probe.store(true, Ordering::Release);
            return true;
        }
        false
    }
}

/// A cloneable handle to one server's actor.
#[derive(Clone)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    ctl: mpsc::UnboundedSender<Control>,
}

impl ServerHandle {
    /// Starts the actor for `cfg`; the server is started at once when `autostart`.
    pub(crate) fn spawn(
        cfg: ServerConfig,
        opts: &SupervisorOptions,
        cancel: CancellationToken,
        autostart: bool,
    ) -> (ServerHandle, tokio::task::JoinHandle<()>) {
        let unit = Unit::new(&cfg.name, Family::Server, opts, cfg.quiet, autostart);
        let shared = Arc::new(Shared {
            unit,
            cfg,
            conn: RwLock::new(None),
            tools: RwLock::new(Arc::new(Vec::new())),
            ring: RwLock::new(StderrRing::default()),
            notes: broadcast::channel(1024).0,
            requests: opts.requests.clone(),
            hook: opts.on_notification.clone(),
            init: RwLock::new(None),
            era: RwLock::new(None),
            in_probe: AtomicBool::new(false),
            skip_probe: AtomicBool::new(false),
            probe_pipe: Mutex::new(None),
            listen_uris: watch::channel(Arc::new(Vec::new())).0,
            remote_program: opts.remote_program.clone(),
            project_root: opts.project_root.clone(),
        });
        let (ctl, task) = actor::start(shared.clone(), cancel, autostart);
        (ServerHandle { shared, ctl }, task)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.shared.unit.name
    }

    /// The server's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.cfg
    }

    /// The current status: the lifecycle's, with what the last ready instance declared.
    pub fn status(&self) -> ServerStatus {
        let life = self.shared.unit.life.borrow();
        let init = self.shared.init.read().unwrap();
        ServerStatus {
            name: life.name.clone(),
            state: life.state(),
            pid: life.pid(),
            since: life.since,
            ready_at: life.ready_at(),
            run_started: life.run_started,
            restarts: life.restarts,
            last_error: life.last_error.clone(),
            last_stderr_tail: life.last_tail.clone(),
            last_crash: life.last_crash.clone(),
            fixed_at: life.fixed_at,
            tool_count: self.shared.tools.read().unwrap().len(),
            protocol_version: init
                .as_ref()
                .and_then(|i| i.get("protocolVersion"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            era: *self.shared.era.read().unwrap(),
        }
    }

    /// The era of the current (or last) ready instance.
    pub fn era(&self) -> Option<Era> {
        *self.shared.era.read().unwrap()
    }

    /// Just the state, without copying the rest of the status (its stderr tail).
    pub fn state(&self) -> ServerState {
        self.shared.unit.life.borrow().state()
    }

    /// A receiver that sees every lifecycle change.
    pub fn watch(&self) -> watch::Receiver<Life> {
        self.shared.unit.life.subscribe()
    }

    /// The tools of the current (or last) ready instance.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.shared.tools.read().unwrap().clone()
    }

    /// The last `n` stderr lines of the current instance.
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        self.shared.tail(n)
    }

    /// The log file of this server.
    pub fn log_path(&self) -> &std::path::Path {
        &self.shared.unit.log_path
    }

    /// The `initialize` result (capabilities, serverInfo, instructions) of the current or
    /// last ready instance.
    pub fn initialize_result(&self) -> Option<Arc<Value>> {
        self.shared.init.read().unwrap().clone()
    }

    /// The resource URIs agents want `notifications/resources/updated` for (the
    /// refcounted union the gateway keeps). A modern server has no
    /// `resources/subscribe`: the set is the filter of Corral's `subscriptions/listen`
    /// to it, reopened when the set changes. Ignored by a legacy server (the gateway
    /// sends it `resources/subscribe` instead).
    pub fn set_resource_subscriptions(&self, uris: Vec<String>) {
        self.shared.listen_uris.send_if_modified(|current| {
            let changed = **current != uris;
            if changed {
                *current = Arc::new(uris);
            }
            changed
        });
    }

    /// Notifications the server sends (other than those the supervisor handles itself).
    pub fn notifications(&self) -> broadcast::Receiver<Notification> {
        self.shared.notes.subscribe()
    }

    /// Waits until the server is ready, or fails with why it is not. A server in backoff
    /// or starting is waited for, at most `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), CallError> {
        let mut rx = self.watch();
        let outcome = tokio::time::timeout(timeout, async {
            let mut seen_start = false;
            loop {
                let state = rx.borrow_and_update().state();
                match state {
                    ServerState::Ready => return Ok(()),
                    ServerState::Starting => seen_start = true,
                    ServerState::Backoff if !seen_start => {}
                    _ => return Err(self.down_error()),
                }
                if rx.changed().await.is_err() {
                    return Err(self.down_error());
                }
            }
        })
        .await;
        outcome.unwrap_or_else(|_| Err(self.down_error()))
    }

    /// Calls a tool. `arguments` is the raw JSON object of arguments.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<&RawValue>,
    ) -> Result<Box<RawValue>, CallError> {
        let mut params = String::with_capacity(32 + arguments.map_or(2, |a| a.get().len()));
        params.push_str(r#"{"name":"#);
        crate::rpc::push_json_str(&mut params, tool);
        if let Some(args) = arguments {
            params.push_str(r#","arguments":"#);
            params.push_str(args.get());
        }
        params.push('}');
        // A tool name and a `RawValue`: valid JSON as built, no need to parse it again.
        self.request_json("tools/call", Some(&params)).await
    }

    /// Sends any request to the server under its call timeout.
    pub async fn request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Box<RawValue>, CallError> {
        self.request_json(method, params.map(RawValue::get)).await
    }

    /// [`request`](Self::request) with params as JSON text the caller built or already
    /// parsed: it goes to the server as it is, without another validating parse.
    pub async fn request_json(
        &self,
        method: &str,
        params: Option<&str>,
    ) -> Result<Box<RawValue>, CallError> {
        let result = self.request_relayed(method, params).await?;
        self.complete_result(method, result)
    }

    /// [`request_json`](Self::request_json) for a caller that drives multi round-trip
    /// requests itself (the gateway): a modern server's `input_required` result comes
    /// back as it is, for the caller to pass on or answer.
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Option<&str>,
    ) -> Result<Box<RawValue>, CallError> {
        let tool = || {
            params
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|v| v.get("name").and_then(Value::as_str).map(String::from))
        };
        let conn = self.ready_connection().await?;
        if conn.is_stamped() {
            self.modern_allows(method)?;
        }
        let timeout = self.shared.cfg.call_timeout;
        conn.request(method, params, timeout)
            .await
            .map_err(|e| self.call_failed(method, tool, e))
    }

    /// [`request_relayed`](Self::request_relayed) with the params written straight into
    /// the request line by `write_params` (see [`Connection::request_with`]); `tool`
    /// names the tool called, for a timeout's event. The gateway's forwarding path: an
    /// `input_required` result is returned as it is.
    pub async fn request_with(
        &self,
        method: &str,
        tool: Option<&str>,
        len: usize,
        write_params: impl FnOnce(&mut String),
    ) -> Result<Box<RawValue>, CallError> {
        let conn = self.ready_connection().await?;
        if conn.is_stamped() {
            self.modern_allows(method)?;
        }
        let timeout = self.shared.cfg.call_timeout;
        conn.request_with(method, len, timeout, write_params)
            .await
            .map_err(|e| self.call_failed(method, || tool.map(str::to_owned), e))
    }

    /// A modern (2026-07-28) server has no `ping`, `logging/setLevel`,
    /// `resources/subscribe`/`unsubscribe` or `initialize`: they are refused here, by
    /// name, rather than sent (the agent side decides what to tell an agent).
    fn modern_allows(&self, method: &str) -> Result<(), CallError> {
        if !REMOVED_IN_MODERN.contains(&method) {
            return Ok(());
        }
        Err(CallError::Rpc {
            server: self.shared.unit.name.clone(),
            source: RpcError::Server {
                code: -32601,
                message: format!(
                    "speaks MCP {MODERN_PROTOCOL_VERSION}, which has no {method}; corral does not send it to this server"
                ),
                data: None,
            },
        })
    }

    /// For callers that cannot answer a modern server's `input_required` result (a multi
    /// round-trip request: `corral call`, the control socket): a `tools/call` gets an
    /// `isError` result naming the limitation, other methods an error. Every other result
    /// passes as it came (`resultType`, `ttlMs`, `cacheScope` included; the agent side
    /// stamps or strips them per agent). The gateway uses
    /// [`request_relayed`](Self::request_relayed) and drives the rounds itself.
    fn complete_result(
        &self,
        method: &str,
        result: Box<RawValue>,
    ) -> Result<Box<RawValue>, CallError> {
        if !result.get().contains("input_required") {
            return Ok(result);
        }
        let asks = serde_json::from_str::<Value>(result.get())
            .ok()
            .is_some_and(|v| v.get("resultType").and_then(Value::as_str) == Some("input_required"));
        if !asks {
            return Ok(result);
        }
        let name = &self.shared.unit.name;
        let message = format!(
            "asked for input to answer {method} (an MCP {MODERN_PROTOCOL_VERSION} \
             input_required result), which only an MCP client can answer: call it \
             through Corral's MCP endpoint (corral mcp), from an agent that can answer it"
        );
        if method == "tools/call" {
            let text = format!("server '{name}' {message}");
            let text = json!({"content": [{"type": "text", "text": text}], "isError": true});
            return Ok(RawValue::from_string(text.to_string()).expect("valid JSON"));
        }
        Err(CallError::Rpc {
            server: name.clone(),
            source: RpcError::Server {
                code: -32603,
                message,
                data: None,
            },
        })
    }

    /// The current instance's connection, waiting (up to `call_timeout`) for one that
    /// is starting.
    async fn ready_connection(&self) -> Result<Arc<Connection>, CallError> {
        match self.connection() {
            Some(c) => Ok(c),
            None => {
                self.wait_ready(self.shared.cfg.call_timeout).await?;
                self.connection().ok_or_else(|| self.down_error())
            }
        }
    }

    fn call_failed(
        &self,
        method: &str,
        tool: impl FnOnce() -> Option<String>,
        e: RpcError,
    ) -> CallError {
        if let RpcError::Timeout { after, .. } = &e {
            self.shared.emit(
                self.shared
                    .event(Kind::ServerCallTimeout)
                    .with("method", method)
                    .with("tool", tool())
                    .with("after_ms", after.as_millis() as u64),
            );
        }
        CallError::Rpc {
            server: self.shared.unit.name.clone(),
            source: e,
        }
    }

    /// Requests sent to the current instance and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.connection().map_or(0, |c| c.in_flight())
    }

    fn connection(&self) -> Option<Arc<Connection>> {
        self.shared.conn.read().unwrap().clone()
    }

    /// Tells a ready legacy server that the client's roots changed
    /// (`notifications/roots/list_changed`), so it asks `roots/list` again. A modern
    /// (2026-07-28) server has no such notification (it is given roots per request), and
    /// a server that is not ready will ask when it is.
    pub fn roots_changed(&self) {
        if self.state() != ServerState::Ready || self.era() != Some(Era::Legacy) {
            return;
        }
        if let Some(conn) = self.connection() {
            conn.notify("notifications/roots/list_changed", None);
        }
    }

    /// Why the server is not serving, with the stderr lines that explain it: for humans
    /// at a terminal (`corral call`), not for agents (whose errors stay short).
    pub fn failure_report(&self) -> String {
        let s = self.status();
        let reason = s.last_error.as_deref().unwrap_or("not started");
        with_tail(reason, &s.last_stderr_tail)
    }

    /// Why the server cannot take a call now, worded for an agent (short; no stderr).
    pub fn unavailable(&self) -> CallError {
        self.down_error()
    }

    fn down_error(&self) -> CallError {
        let s = self.status();
        CallError::Down {
            server: s.name.clone(),
            state: match s.state {
                ServerState::Starting => "still starting",
                ServerState::Ready => "ready",
                ServerState::Backoff => "down (restarting)",
                ServerState::Stopped => "stopped",
                ServerState::Failed => "down",
                ServerState::GaveUp => "down (gave up after repeated crashes)",
                ServerState::NeedsAuth => "waiting for authorization",
            },
            since: humantime::format_rfc3339_seconds(s.since).to_string(),
            detail: s.last_error.clone().unwrap_or_else(|| {
                match s.state {
                    ServerState::Stopped => "not running",
                    _ => "not started",
                }
                .to_owned()
            }),
            stopped: s.state == ServerState::Stopped,
        }
    }

    /// Starts a stopped, failed or given-up server; returns once the actor took it.
    pub async fn start(&self) {
        self.send(Control::Start).await
    }

    /// Stops the server gracefully; returns once the child is gone.
    pub async fn stop(&self) {
        self.send(Control::Stop).await
    }

    /// Stops (gracefully) and starts the server again; returns once the new instance
    /// is spawned.
    pub async fn restart(&self) {
        self.send(Control::Restart).await
    }

    async fn send(&self, make: fn(tokio::sync::oneshot::Sender<()>) -> Control) {
        actor::send(&self.ctl, make).await
    }
}

/// Feeds stdout noise and notifications of one instance to the right places.
struct InstanceSink {
    shared: Arc<Shared>,
    framing: mpsc::UnboundedSender<()>,
    notes: mpsc::UnboundedSender<Notification>,
    noise_count: AtomicU64,
    /// Stdout's own redactor: noise lines are redacted before the log and the event.
    redactor: Mutex<corral_config::redact::Redactor>,
}

/// Noise events beyond this many per instance are sampled (1 in 1000).
const NOISE_EVENTS: u64 = 100;

impl StdoutSink for InstanceSink {
    fn noise(&self, line: &str) {
        let mut redactor = self.redactor.lock().unwrap();
        let line: &str = &redactor.line(line);
        if let Some(log) = self.shared.unit.log.lock().unwrap().as_mut() {
            log.write_line("[stdout noise] ", line);
            log.flush();
        }
        let n = self.noise_count.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= NOISE_EVENTS || n.is_multiple_of(1000) {
            let mut ev = self.shared.event(Kind::ServerNoise).with("line", line);
            if n > NOISE_EVENTS {
                ev = ev.with("count", n);
            }
            self.shared.emit(ev);
        }
    }

    fn framing_mismatch(&self) {
        let _ = self.framing.send(());
    }

    fn notification(&self, note: Notification) {
        let hook = self.shared.hook.as_ref().and_then(|h| h.get());
        if let Some(hook) = hook {
            hook(&self.shared.unit.name, &note);
        }
        let _ = self.notes.send(note);
    }

    fn request(&self, request: ServerRequest) -> Result<(), ServerRequest> {
        match &self.shared.requests {
            Some(tx) => tx
                .send(crate::IncomingRequest {
                    server: self.shared.unit.name.clone(),
                    request,
                })
                .map_err(|e| e.0.request),
            None => Err(request),
        }
    }
}

/// The exit code of a remote server's bridge (`corral __remote`) when the server needs
/// `corral auth NAME` (`corral_remote::oauth::EXIT_NEEDS_AUTH`; EX_NOPERM).
pub const REMOTE_NEEDS_AUTH_EXIT: i32 = 77;

/// The message for a server that answers with LSP-style framing.
pub const FRAMING_MESSAGE: &str =
    "server speaks Content-Length framing; MCP stdio is one JSON object per line";

/// One instance of a server: its connection and what watches it.
pub(crate) struct ServerRun {
    shared: Arc<Shared>,
    conn: Arc<Connection>,
    /// The instance answered with LSP-style framing.
    framing: mpsc::UnboundedReceiver<()>,
    notes: mpsc::UnboundedReceiver<Notification>,
    /// Liveness probes and tool-list refreshes: they end with the instance.
    tasks: JoinSet<()>,
    probing: Arc<AtomicBool>,
    wedged_tx: mpsc::UnboundedSender<String>,
    wedged: mpsc::UnboundedReceiver<String>,
}

impl Run for ServerRun {
    /// The MCP handshake, under `startup_timeout`; on success the instance's tools,
    /// `initialize` result and connection are published before the actor says ready.
    async fn start(&mut self) -> Result<Map<String, Value>, StartError> {
        let shared = &self.shared;
        let cfg = &shared.cfg;
        let handshake = tokio::time::timeout(
            cfg.startup_timeout,
            handshake(&self.conn, shared, shared.requests.is_some()),
        );
        let ready = tokio::select! {
            r = handshake => match r {
                Ok(Ok(ready)) => ready,
                Ok(Err(HandshakeError::Refused(why))) => {
                    return Err(StartError::Failed(cfg.redact(&why)));
                }
                Ok(Err(HandshakeError::Rpc(RpcError::Closed(_)))) => return Err(StartError::Closed),
                // The error can quote the server (its JSON-RPC error message).
                Ok(Err(HandshakeError::Rpc(e))) if !matches!(e, RpcError::Timeout { .. }) => {
                    return Err(StartError::Failed(cfg.redact(&format!("initialize failed: {e}"))));
                }
                Ok(Err(_)) | Err(_) => {
                    return Err(StartError::Failed(format!(
                        "no answer to initialize within {} (startup_timeout)",
                        humanize(cfg.startup_timeout)
                    )));
                }
            },
            Some(()) = self.framing.recv() => {
                return Err(StartError::Permanent(FRAMING_MESSAGE.into()));
            }
        };
        let mut fields = Map::new();
        fields.insert("tools".into(), ready.tools.len().into());
        fields.insert("protocol_version".into(), ready.protocol_version.into());
        fields.insert("era".into(), ready.era.as_str().into());
        fields.insert("probe".into(), ready.probe.into());
        fields.insert("server_info".into(), ready.server_info);
        *shared.tools.write().unwrap() = Arc::new(ready.tools);
        *shared.init.write().unwrap() = Some(Arc::new(ready.init));
        *shared.era.write().unwrap() = Some(ready.era);
        *shared.conn.write().unwrap() = Some(self.conn.clone());
        Ok(fields)
    }

    async fn serve(&mut self) -> String {
        if self.conn.is_stamped() {
            // A modern server tells of changes only on a listen: keep one open.
            let shared = self.shared.clone();
            self.tasks.spawn(crate::listen::run(
                self.conn.clone(),
                self.shared.listen_uris.subscribe(),
                move |why| shared.emit(shared.event(Kind::ServerNoise).with("line", why)),
            ));
        }
        loop {
            tokio::select! {
                Some(note) = self.notes.recv() => self.on_notification(note),
                _ = self.conn.timed_out() => {
                    if !self.probing.swap(true, Ordering::AcqRel) {
                        let deadline = PING_TIMEOUT.min(self.shared.cfg.call_timeout);
                        self.tasks.spawn(probe_liveness(
                            self.conn.clone(),
                            deadline,
                            self.probing.clone(),
                            self.wedged_tx.clone(),
                        ));
                    }
                }
                Some(reason) = self.wedged.recv() => return reason,
                Some(()) = self.framing.recv() => return FRAMING_MESSAGE.into(),
                // Reap finished probes and refreshes, so the set stays small.
                Some(_) = self.tasks.join_next() => {}
            }
        }
    }

    fn close(&self, reason: &str) {
        self.conn.close(reason);
    }

    fn close_stdin(&self) -> bool {
        // Our duplicate of the pipe (held while a probe is out) would keep the EOF away.
        self.shared.probe_pipe.lock().unwrap().take();
        self.conn.close_stdin();
        true
    }
}

impl ServerRun {
    fn on_notification(&mut self, note: Notification) {
        if note.method == "notifications/tools/list_changed" {
            self.tasks
                .spawn(refresh_tools(self.shared.clone(), self.conn.clone()));
        }
        let _ = self.shared.notes.send(note);
    }
}

/// Appends the last stderr lines to a message, indented, when there are any.
pub fn with_tail(message: &str, tail: &[String]) -> String {
    let lines = &tail[tail.len().saturating_sub(ERROR_TAIL_LINES)..];
    if lines.is_empty() {
        return message.to_owned();
    }
    let mut out = format!("{message}; last stderr lines:");
    for l in lines {
        out.push_str("\n    ");
        out.push_str(l);
    }
    out
}

/// After a call timed out: is the server still answering at all? A server that cannot
/// answer `ping` within `deadline` ([`PING_TIMEOUT`] or the call timeout, whichever is
/// shorter) is wedged and gets restarted; one that answers keeps serving (the slow call
/// alone was abandoned and cancelled).
async fn probe_liveness(
    conn: Arc<Connection>,
    deadline: Duration,
    probing: Arc<AtomicBool>,
    wedged: mpsc::UnboundedSender<String>,
) {
    // A modern server has no `ping`: `server/discover` is its cheapest request.
    let method = if conn.is_stamped() {
        "server/discover"
    } else {
        "ping"
    };
    let r = conn.request(method, None, deadline).await;
    if let Err(RpcError::Timeout { .. }) = r {
        let _ = wedged.send(format!(
            "unresponsive: a call timed out and {method} got no answer within {}",
            humanize(deadline)
        ));
    }
    probing.store(false, Ordering::Release);
}

struct Ready {
    protocol_version: String,
    era: Era,
    /// How the era was found (for the ready event): the probe's outcome.
    probe: String,
    server_info: Value,
    tools: Vec<Tool>,
    init: Value,
}

/// Why the handshake failed.
enum HandshakeError {
    Rpc(RpcError),
    /// The server refused every revision Corral speaks; the message says which it
    /// speaks and what to do.
    Refused(String),
}

impl From<RpcError> for HandshakeError {
    fn from(e: RpcError) -> Self {
        HandshakeError::Rpc(e)
    }
}

/// What the `server/discover` probe found.
enum Verdict {
    /// A `DiscoverResult` listing 2026-07-28.
    Modern(Value),
    /// Initialize, offering `offer`; `why` is the probe's outcome.
    Legacy { offer: &'static str, why: String },
}

/// Methods a 2026-07-28 server does not have, never sent to one.
const REMOVED_IN_MODERN: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The `_meta` stamped on every request to a modern server, under what the request
/// itself carries: a request's own `clientCapabilities` (a 2026 agent's, or a 2025
/// agent's from its `initialize`, put there by the gateway) win, so this `{}` is what a
/// request says when no agent stands behind it (Corral's own listings, `corral call`),
/// and such a request must not claim it could answer an `input_required` round.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client_info(),
    })
}

/// Who Corral is, as a client of its servers (either revision).
fn client_info() -> Value {
    json!({"name": "corral", "version": env!("CARGO_PKG_VERSION")})
}

/// The versions a `-32022` error's `data.supported` lists.
fn supported_of(data: Option<&str>) -> Option<Vec<String>> {
    let data: Value = serde_json::from_str(data?).ok()?;
    let list = data.get("supported")?.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// The newest legacy revision both sides speak.
fn mutual_legacy(theirs: &[String]) -> Option<&'static str> {
    LEGACY_VERSIONS
        .iter()
        .find(|v| theirs.iter().any(|t| t == *v))
        .copied()
}

/// Probes with `server/discover`, as the specification asks of a client that speaks both
/// generations (basic/transports/stdio.mdx, backward compatibility): a `DiscoverResult`
/// listing 2026-07-28 → modern; `-32022` (unsupported version) listing a mutual
/// revision → that one; any other error, an answer that is not a `DiscoverResult`, or
/// silence within `within` → legacy. The fallback never hinges on one error code.
async fn probe(conn: &Connection, within: Duration) -> Result<Verdict, HandshakeError> {
    let legacy = |why: String| Verdict::Legacy {
        offer: PROTOCOL_VERSION,
        why,
    };
    let params = json!({ "_meta": modern_meta() }).to_string();
    match conn.probe("server/discover", &params, within).await {
        Ok(result) => {
            let v: Value = serde_json::from_str(result.get()).unwrap_or(Value::Null);
            let versions: Option<Vec<String>> = v
                .get("supportedVersions")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                });
            match versions {
                Some(vs) if vs.iter().any(|x| x == MODERN_PROTOCOL_VERSION) => {
                    Ok(Verdict::Modern(v))
                }
                Some(vs) => match mutual_legacy(&vs) {
                    Some(offer) => Ok(Verdict::Legacy {
                        offer,
                        why: format!("server/discover lists {}", vs.join(", ")),
                    }),
                    None => Err(HandshakeError::Refused(format!(
                        "speaks only MCP {}; corral speaks {MODERN_PROTOCOL_VERSION} and {}",
                        vs.join(", "),
                        LEGACY_VERSIONS.join(", ")
                    ))),
                },
                None => Ok(legacy(
                    "answered server/discover without supportedVersions".into(),
                )),
            }
        }
        Err(RpcError::Server {
            code: -32022,
            data,
            message,
        }) => {
            let theirs = supported_of(data.as_deref()).unwrap_or_default();
            if theirs.iter().any(|x| x == MODERN_PROTOCOL_VERSION) {
                // It lists the version it just refused: nothing to fall back to.
                return Err(HandshakeError::Refused(format!(
                    "refused server/discover at MCP {MODERN_PROTOCOL_VERSION} ({message}) although it lists it"
                )));
            }
            match mutual_legacy(&theirs) {
                Some(offer) => Ok(Verdict::Legacy {
                    offer,
                    why: format!("server/discover: -32022, supported {}", theirs.join(", ")),
                }),
                None => Err(HandshakeError::Refused(format!(
                    "speaks only MCP {} and refused {MODERN_PROTOCOL_VERSION} (-32022); corral speaks {MODERN_PROTOCOL_VERSION} and {}",
                    if theirs.is_empty() {
                        "versions it did not list".to_owned()
                    } else {
                        theirs.join(", ")
                    },
                    LEGACY_VERSIONS.join(", ")
                ))),
            }
        }
        Err(RpcError::Closed(reason)) => Err(HandshakeError::Rpc(RpcError::Closed(reason))),
        Err(RpcError::Timeout { .. }) => Ok(legacy(format!(
            "no answer to server/discover within {}",
            humanize(within)
        ))),
        Err(e) => Ok(legacy(format!("server/discover: {e}"))),
    }
}

/// `forwards_requests`: whether server→client requests reach a client that can answer
/// them (the gateway), so sampling, elicitation and roots may be declared to a legacy
/// server (the gateway answers `roots/list` with the calling agent's roots, or the
/// project root when no agent can).
async fn handshake(
    conn: &Connection,
    shared: &Shared,
    forwards_requests: bool,
) -> Result<Ready, HandshakeError> {
    let cfg = &shared.cfg;
    let verdict = if shared.skip_probe.swap(false, Ordering::AcqRel) {
        shared.probe_pipe.lock().unwrap().take();
        Verdict::Legacy {
            offer: PROTOCOL_VERSION,
            why: "the last instance exited on server/discover: not probed".into(),
        }
    } else {
        let within = DISCOVER_TIMEOUT.min(cfg.startup_timeout / 3);
        shared.in_probe.store(true, Ordering::Release);
        let verdict = probe(conn, within).await;
        // A closed pipe keeps the mark: the exit may be the server's answer to the probe.
        if !matches!(verdict, Err(HandshakeError::Rpc(RpcError::Closed(_)))) {
            shared.in_probe.store(false, Ordering::Release);
            shared.probe_pipe.lock().unwrap().take();
        }
        verdict?
    };
    match verdict {
        Verdict::Modern(discover) => modern_ready(conn, cfg, discover).await,
        Verdict::Legacy { offer, why } => {
            legacy_handshake(conn, cfg, forwards_requests, offer, why).await
        }
    }
}

/// A modern server is ready once discovered: no `initialize`, no `initialized`; every
/// request from now on carries the modern `_meta`. Its `initialize`-shaped result is built
/// from the `DiscoverResult`, so what reads capabilities and instructions reads them
/// alike for both eras.
async fn modern_ready(
    conn: &Connection,
    cfg: &ServerConfig,
    discover: Value,
) -> Result<Ready, HandshakeError> {
    conn.stamp_requests(modern_meta().to_string());
    let server_info = discover
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
        .or_else(|| discover.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut init = json!({
        "protocolVersion": MODERN_PROTOCOL_VERSION,
        "capabilities": discover.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "serverInfo": server_info,
    });
    if let Some(i) = discover.get("instructions") {
        init["instructions"] = i.clone();
    }
    let mut ready = Ready {
        protocol_version: MODERN_PROTOCOL_VERSION.to_owned(),
        era: Era::Modern,
        probe: "server/discover answered".into(),
        server_info,
        tools: Vec::new(),
        init,
    };
    ready.tools = advertised_tools(conn, cfg, &ready.init).await?;
    Ok(ready)
}

/// The tools of a server whose handshake result (`initialize`'s, or discover's in its
/// shape) says it has tools; none otherwise.
async fn advertised_tools(
    conn: &Connection,
    cfg: &ServerConfig,
    init: &Value,
) -> Result<Vec<Tool>, RpcError> {
    match init
        .get("capabilities")
        .is_some_and(|c| c.get("tools").is_some())
    {
        true => list_tools(conn, cfg.startup_timeout).await,
        false => Ok(Vec::new()),
    }
}

async fn legacy_handshake(
    conn: &Connection,
    cfg: &ServerConfig,
    forwards_requests: bool,
    offer: &str,
    probe: String,
) -> Result<Ready, HandshakeError> {
    let capabilities = if forwards_requests {
        json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
    } else {
        json!({})
    };
    let params = json!({
        "protocolVersion": offer,
        "capabilities": capabilities,
        "clientInfo": client_info(),
    });
    let result = match conn
        .request("initialize", Some(&params.to_string()), cfg.startup_timeout)
        .await
    {
        Ok(r) => r,
        Err(RpcError::Server {
            code: -32022,
            data,
            message,
        }) => {
            let theirs = supported_of(data.as_deref()).unwrap_or_default();
            let speaks = if theirs.is_empty() {
                "another revision".to_owned()
            } else {
                theirs.join(", ")
            };
            return Err(HandshakeError::Refused(format!(
                "speaks only MCP {speaks} and refused initialize at {offer} ({message}); \
                 its answer to the server/discover probe was: {probe} \
                 (if it speaks {MODERN_PROTOCOL_VERSION}, it must answer server/discover)"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let init: Value = serde_json::from_str(result.get()).map_err(|e| RpcError::Invalid {
        method: "initialize".into(),
        detail: e.to_string(),
    })?;
    let Some(version) = init.get("protocolVersion").and_then(Value::as_str) else {
        return Err(RpcError::Invalid {
            method: "initialize".into(),
            detail: "result has no protocolVersion".into(),
        }
        .into());
    };
    conn.notify("notifications/initialized", None);
    let tools = advertised_tools(conn, cfg, &init).await?;
    Ok(Ready {
        protocol_version: version.to_owned(),
        era: Era::Legacy,
        probe,
        server_info: init.get("serverInfo").cloned().unwrap_or(Value::Null),
        tools,
        init,
    })
}

/// Upper bound on `tools/list` pages, so a server that always returns a cursor cannot
/// keep us paging forever.
const MAX_PAGES: usize = 100;

/// Lists every tool, following pagination cursors.
pub(crate) async fn list_tools(
    conn: &Connection,
    timeout: Duration,
) -> Result<Vec<Tool>, RpcError> {
    #[derive(serde::Deserialize)]
    struct Page {
        tools: Vec<Box<RawValue>>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Head {
        name: String,
        #[serde(default)]
        description: Option<String>,
    }
    let invalid = |detail: String| RpcError::Invalid {
        method: "tools/list".into(),
        detail,
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }).to_string());
        let result = conn
            .request("tools/list", params.as_deref(), timeout)
            .await?;
        let page: Page = serde_json::from_str(result.get()).map_err(|e| invalid(e.to_string()))?;
        for raw in page.tools {
            let head: Head = serde_json::from_str(raw.get())
                .map_err(|e| invalid(format!("a tool entry is malformed: {e}")))?;
            tools.push(Tool {
                name: head.name,
                description: head.description,
                raw,
            });
        }
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => return Ok(tools),
        }
    }
    Err(invalid(format!("more than {MAX_PAGES} pages of tools")))
}

async fn refresh_tools(shared: Arc<Shared>, conn: Arc<Connection>) {
    let tools = match list_tools(&conn, shared.cfg.call_timeout).await {
        Ok(t) => t,
        Err(e) => {
            shared.emit(
                shared.event(Kind::ServerNoise).with(
                    "line",
                    shared
                        .cfg
                        .redact(&format!("tools/list after list_changed failed: {e}")),
                ),
            );
            return;
        }
    };
    let old = shared.tools.read().unwrap().clone();
    let added: Vec<&str> = tools
        .iter()
        .filter(|t| !old.iter().any(|o| o.name == t.name))
        .map(|t| t.name.as_str())
        .collect();
    let removed: Vec<&str> = old
        .iter()
        .filter(|o| !tools.iter().any(|t| t.name == o.name))
        .map(|t| t.name.as_str())
        .collect();
    let ev = shared
        .event(Kind::ServerToolsChanged)
        .with("tools", tools.len())
        .with("added", added)
        .with("removed", removed);
    *shared.tools.write().unwrap() = Arc::new(tools);
    shared.emit(ev);
}
