//! One actor per server: spawn → handshake → ready → crash / stop / restart.
//!
//! The actor task owns the child process and is the only code that starts, stops or
//! reaps it. Everyone else holds a [`ServerHandle`]: calls go straight to the current
//! [`Connection`] (no hop through the actor, so the call path stays one lock and one
//! channel send), lifecycle verbs go through the actor's mailbox, and state is published
//! on a watch channel and as events.
//!
//! Exactly-once crash reporting falls out of the structure: only the actor observes the
//! child's exit, it does so once per instance, and it knows whether it asked for the exit
//! (stop, restart, shutdown: no crash event) or not (`server.crashed`, or
//! `server.start_failed` before ready).

use crate::exit;
use crate::rpc::{Connection, Notification, RpcError, ServerRequest, StdoutSink, humanize};
use crate::spawn::{self, SpawnError, SpawnSpec};
use crate::stderr::{self, LogFile, SharedLog, StderrRing, StderrSinks};
use crate::{Console, SupervisorOptions};
use corral_config::{RestartPolicy, ServerConfig, Transport};
use corral_events::{Event, EventBus};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::process::Child;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// Stderr lines carried by crash and start-failure events.
pub const EVENT_TAIL_LINES: usize = 20;
/// Stderr lines quoted in a start-failure error message.
pub const ERROR_TAIL_LINES: usize = 8;
/// How long a liveness ping may take after a call timed out before the server is
/// declared unresponsive and restarted.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// First and largest restart delay.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// The protocol version Corral asks for; servers may answer with an older one.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// How long, after stdin is closed, a server gets to exit by itself before SIGTERM.
const STDIN_GRACE: Duration = Duration::from_millis(1000);
/// How long to wait for the stderr drain to reach EOF after the child died, so the
/// crash event carries the last lines.
const DRAIN_SETTLE: Duration = Duration::from_millis(500);

/// Lifecycle state of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Spawned, handshake in progress.
    Starting,
    /// Handshake done; calls are served.
    Ready,
    /// Died; waiting before the next start.
    Backoff,
    /// Stopped on request (or never started).
    Stopped,
    /// Failed and will not be restarted (restart policy, or a permanent error).
    Failed,
    /// The crash-loop breaker tripped.
    GaveUp,
}

impl ServerState {
    /// The state as written in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Backoff => "backoff",
            ServerState::Stopped => "stopped",
            ServerState::Failed => "failed",
            ServerState::GaveUp => "gave_up",
        }
    }
}

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
    pub restarts: u32,
    /// Why the last instance died or failed to start (short; no stderr).
    pub last_error: Option<String>,
    /// The stderr tail of that instance.
    pub last_stderr_tail: Vec<String>,
    pub tool_count: usize,
    pub protocol_version: Option<String>,
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

enum Control {
    Start(oneshot::Sender<()>),
    Stop(oneshot::Sender<()>),
    Restart(oneshot::Sender<()>),
}

struct Shared {
    name: String,
    cfg: ServerConfig,
    bus: EventBus,
    status: watch::Sender<ServerStatus>,
    conn: RwLock<Option<Arc<Connection>>>,
    tools: RwLock<Arc<Vec<Tool>>>,
    ring: RwLock<StderrRing>,
    log: SharedLog,
    log_path: std::path::PathBuf,
    notes: broadcast::Sender<Notification>,
    console: Option<Console>,
    guard: Option<Arc<crate::guard::Guard>>,
    reaper: Option<Arc<crate::reaper::Reaper>>,
    requests: Option<mpsc::UnboundedSender<crate::IncomingRequest>>,
    hook: Option<crate::NotificationHook>,
    /// The `initialize` result of the current (or last) ready instance.
    init: RwLock<Option<Arc<Value>>>,
}

impl Shared {
    fn source(&self) -> String {
        format!("server:{}", self.name)
    }

    fn event(&self, kind: &str) -> Event {
        Event::new(kind, self.source())
    }

    fn emit(&self, ev: Event) {
        self.bus.emit(ev);
    }

    /// Publishes a state change. Leaving `Ready` also forgets the connection — after the
    /// state changed, so a caller never sees "ready" without a connection: until then it
    /// gets the closed connection's reason ("exited with code 3"), after it waits for the
    /// next instance or gets the down error.
    fn set_state(&self, state: ServerState, f: impl FnOnce(&mut ServerStatus)) {
        self.status.send_modify(|s| {
            if s.state != state {
                s.since = SystemTime::now();
            }
            s.state = state;
            f(s);
        });
        if state != ServerState::Ready {
            *self.conn.write().unwrap() = None;
        }
    }

    fn tail(&self, n: usize) -> Vec<String> {
        self.ring.read().unwrap().tail(n)
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
        let name = cfg.name.clone();
        let log_path = stderr::log_path(&opts.log_dir, &name);
        let log = match LogFile::open(&log_path, opts.log_rotate_bytes) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing_warn(&format!(
                    "server '{name}': cannot open log file {}: {e}",
                    log_path.display()
                ));
                None
            }
        };
        let status = ServerStatus {
            name: name.clone(),
            state: if autostart {
                ServerState::Starting
            } else {
                ServerState::Stopped
            },
            pid: None,
            since: SystemTime::now(),
            ready_at: None,
            restarts: 0,
            last_error: None,
            last_stderr_tail: Vec::new(),
            tool_count: 0,
            protocol_version: None,
        };
        let console = if cfg.quiet {
            None
        } else {
            opts.console.clone()
        };
        let shared = Arc::new(Shared {
            name,
            cfg,
            bus: opts.bus.clone(),
            status: watch::channel(status).0,
            conn: RwLock::new(None),
            tools: RwLock::new(Arc::new(Vec::new())),
            ring: RwLock::new(StderrRing::default()),
            log: Arc::new(Mutex::new(log)),
            log_path,
            notes: broadcast::channel(1024).0,
            console,
            guard: opts.guard.clone(),
            reaper: opts.reaper.clone(),
            requests: opts.requests.clone(),
            hook: opts.on_notification.clone(),
            init: RwLock::new(None),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let actor = Actor {
            shared: shared.clone(),
            ctl: rx,
            cancel,
            crashes: VecDeque::new(),
            attempt: 0,
        };
        let task = tokio::spawn(actor.run(autostart));
        (ServerHandle { shared, ctl: tx }, task)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The server's configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.cfg
    }

    /// The current status.
    pub fn status(&self) -> ServerStatus {
        self.shared.status.borrow().clone()
    }

    /// Just the state, without copying the rest of the status (its stderr tail).
    pub fn state(&self) -> ServerState {
        self.shared.status.borrow().state
    }

    /// A receiver that sees every status change.
    pub fn watch(&self) -> watch::Receiver<ServerStatus> {
        self.shared.status.subscribe()
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
        &self.shared.log_path
    }

    /// The `initialize` result (capabilities, serverInfo, instructions) of the current or
    /// last ready instance.
    pub fn initialize_result(&self) -> Option<Arc<Value>> {
        self.shared.init.read().unwrap().clone()
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
                let state = rx.borrow_and_update().state;
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
        let tool = || {
            params
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|v| v.get("name").and_then(Value::as_str).map(String::from))
        };
        let conn = self.ready_connection().await?;
        let timeout = self.shared.cfg.call_timeout;
        conn.request(method, params, timeout)
            .await
            .map_err(|e| self.call_failed(method, tool, e))
    }

    /// [`request_json`](Self::request_json) with the params written straight into the
    /// request line by `write_params` (see [`Connection::request_with`]); `tool` names
    /// the tool called, for a timeout's event.
    pub async fn request_with(
        &self,
        method: &str,
        tool: Option<&str>,
        len: usize,
        write_params: impl FnOnce(&mut String),
    ) -> Result<Box<RawValue>, CallError> {
        let conn = self.ready_connection().await?;
        let timeout = self.shared.cfg.call_timeout;
        conn.request_with(method, len, timeout, write_params)
            .await
            .map_err(|e| self.call_failed(method, || tool.map(str::to_owned), e))
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
                    .event("server.call_timeout")
                    .with("method", method)
                    .with("tool", tool())
                    .with("after_ms", after.as_millis() as u64),
            );
        }
        CallError::Rpc {
            server: self.shared.name.clone(),
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

    async fn send(&self, make: fn(oneshot::Sender<()>) -> Control) {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(make(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

fn tracing_warn(msg: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "corral: warning: {msg}");
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
        if let Some(log) = self.shared.log.lock().unwrap().as_mut() {
            log.write_line("[stdout noise] ", line);
            log.flush();
        }
        let n = self.noise_count.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= NOISE_EVENTS || n.is_multiple_of(1000) {
            let mut ev = self.shared.event("server.noise").with("line", line);
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
            hook(&self.shared.name, &note);
        }
        let _ = self.notes.send(note);
    }

    fn request(&self, request: ServerRequest) -> Result<(), ServerRequest> {
        match &self.shared.requests {
            Some(tx) => tx
                .send(crate::IncomingRequest {
                    server: self.shared.name.clone(),
                    request,
                })
                .map_err(|e| e.0.request),
            None => Err(request),
        }
    }
}

/// The message for a server that answers with LSP-style framing.
pub const FRAMING_MESSAGE: &str =
    "server speaks Content-Length framing; MCP stdio is one JSON object per line";

/// How one instance ended.
enum Ended {
    /// Stopped on request; the sender is acked once the actor settled.
    Stopped(oneshot::Sender<()>),
    Restart(oneshot::Sender<()>),
    Shutdown,
    /// Cannot start with this config; no restart.
    Permanent,
    /// Died (start failure or crash); `clean` when it exited 0 on its own.
    Died {
        clean: bool,
        uptime: Duration,
    },
}

struct Actor {
    shared: Arc<Shared>,
    ctl: mpsc::UnboundedReceiver<Control>,
    cancel: CancellationToken,
    /// Times of recent unrequested deaths, for the crash-loop breaker.
    crashes: VecDeque<Instant>,
    /// Consecutive automatic restarts, for the backoff.
    attempt: u32,
}

impl Actor {
    async fn run(mut self, autostart: bool) {
        let mut running = autostart;
        loop {
            if !running {
                tokio::select! {
                    msg = self.ctl.recv() => match msg {
                        Some(Control::Start(ack)) | Some(Control::Restart(ack)) => {
                            self.reset_breaker();
                            running = true;
                            let _ = ack.send(());
                        }
                        Some(Control::Stop(ack)) => { let _ = ack.send(()); }
                        None => return,
                    },
                    _ = self.cancel.cancelled() => return,
                }
                continue;
            }
            match self.run_instance().await {
                Ended::Shutdown => return,
                Ended::Stopped(ack) => {
                    self.shared
                        .set_state(ServerState::Stopped, |s| s.pid = None);
                    running = false;
                    let _ = ack.send(());
                }
                Ended::Restart(ack) => {
                    self.reset_breaker();
                    self.shared.status.send_modify(|s| s.restarts += 1);
                    let _ = ack.send(());
                }
                Ended::Permanent => {
                    self.shared.set_state(ServerState::Failed, |s| s.pid = None);
                    running = false;
                }
                Ended::Died { clean, uptime } => match self.after_death(clean, uptime).await {
                    Some(again) => running = again,
                    None => return,
                },
            }
        }
    }

    fn reset_breaker(&mut self) {
        self.crashes.clear();
        self.attempt = 0;
    }

    /// Applies the restart policy after an unrequested death. `None` means shut down.
    async fn after_death(&mut self, clean: bool, uptime: Duration) -> Option<bool> {
        let cfg = &self.shared.cfg;
        let restart = match cfg.restart {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => !clean,
            RestartPolicy::Always => true,
        };
        if !restart {
            let state = if clean {
                ServerState::Stopped
            } else {
                ServerState::Failed
            };
            self.shared.set_state(state, |s| s.pid = None);
            return Some(false);
        }
        let now = Instant::now();
        let window = cfg.crash_loop.window;
        if uptime >= window {
            // It ran fine for a while: this is a new incident, not a loop.
            self.attempt = 0;
        }
        self.crashes.push_back(now);
        while self
            .crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            self.crashes.pop_front();
        }
        if self.crashes.len() as u32 >= cfg.crash_loop.max {
            let n = self.crashes.len();
            self.shared.set_state(ServerState::GaveUp, |s| s.pid = None);
            self.shared.emit(
                self.shared
                    .event("server.gave_up")
                    .with("crashes", n)
                    .with("window_s", window.as_secs())
                    .with(
                        "reason",
                        format!(
                            "{n} crashes within {}; fix the server, then `corral start {}`",
                            humanize(window),
                            self.shared.name
                        ),
                    ),
            );
            return Some(false);
        }
        let delay = BACKOFF_MIN
            .saturating_mul(1u32 << self.attempt.min(6))
            .min(BACKOFF_MAX);
        self.attempt += 1;
        self.shared.emit(
            self.shared
                .event("server.restarting")
                .with("attempt", self.attempt)
                .with("delay_ms", delay.as_millis() as u64),
        );
        self.shared
            .set_state(ServerState::Backoff, |s| s.pid = None);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            msg = self.ctl.recv() => match msg {
                Some(Control::Stop(ack)) => {
                    self.shared.set_state(ServerState::Stopped, |_| {});
                    let _ = ack.send(());
                    return Some(false);
                }
                Some(Control::Start(ack)) | Some(Control::Restart(ack)) => {
                    self.reset_breaker();
                    let _ = ack.send(());
                }
                None => return None,
            },
            _ = self.cancel.cancelled() => return None,
        }
        self.shared.status.send_modify(|s| s.restarts += 1);
        Some(true)
    }

    async fn run_instance(&mut self) -> Ended {
        let shared = self.shared.clone();
        let cfg = &shared.cfg;
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &cfg.transport
        else {
            let msg = "remote (url) servers are not supported by this version of corral yet";
            shared.emit(
                shared
                    .event("server.start_failed")
                    .with("reason", msg)
                    .with("permanent", true),
            );
            shared.set_state(ServerState::Failed, |s| s.last_error = Some(msg.into()));
            return Ended::Permanent;
        };
        let ring = StderrRing::default();
        *shared.ring.write().unwrap() = ring.clone();
        shared.set_state(ServerState::Starting, |s| {
            s.pid = None;
            s.ready_at = None;
        });
        shared.emit(
            shared
                .event("server.starting")
                .with("command", cfg.redact(command))
                .with(
                    "args",
                    args.iter().map(|a| cfg.redact(a)).collect::<Vec<_>>(),
                ),
        );
        let spec = SpawnSpec {
            command,
            args,
            env,
            cwd,
        };
        let started = Instant::now();
        let mut child = match spawn::spawn(&spec, &shared.name) {
            Ok(c) => c,
            Err(e) => return self.spawn_failed(&e),
        };
        let pid = child.id().unwrap_or(0);
        if let Some(guard) = &shared.guard {
            guard.register(pid);
        }
        let _unregister = GroupRegistration {
            guard: shared.guard.clone(),
            reaper: shared.reaper.clone(),
            server: shared.name.clone(),
            pid,
        };
        shared.set_state(ServerState::Starting, |s| s.pid = Some(pid));
        if let Some(log) = shared.log.lock().unwrap().as_mut() {
            log.write_line("", &run_header(&shared.name, pid));
            log.flush();
        }
        let mut drain = tokio::spawn(stderr::drain(
            child.stderr.take().expect("stderr piped"),
            StderrSinks {
                name: shared.name.clone(),
                ring: ring.clone(),
                log: shared.log.clone(),
                console: shared.console.clone(),
                redactor: cfg.redactor(),
            },
        ));
        let (framing_tx, mut framing_rx) = mpsc::unbounded_channel();
        let (notes_tx, mut notes_rx) = mpsc::unbounded_channel();
        let sink = Arc::new(InstanceSink {
            shared: shared.clone(),
            framing: framing_tx,
            notes: notes_tx,
            noise_count: AtomicU64::new(0),
            redactor: Mutex::new(cfg.redactor()),
        });
        let conn = Connection::start(
            child.stdin.take().expect("stdin piped"),
            child.stdout.take().expect("stdout piped"),
            cfg.max_concurrency.map(|n| n.get() as usize),
            sink,
        );

        // Handshake, racing the child's exit and our own control messages.
        let handshake = tokio::time::timeout(
            cfg.startup_timeout,
            handshake(&conn, cfg, shared.requests.is_some()),
        );
        tokio::pin!(handshake);
        let ready = loop {
            break tokio::select! {
            r = &mut handshake => match r {
                Ok(Ok(ready)) => ready,
                Ok(Err(RpcError::Closed(_))) => {
                    // Our pipe to the child broke: it is exiting. Report its exit status,
                    // which says more than "connection closed".
                    let status = tokio::time::timeout(DRAIN_SETTLE, child.wait()).await.ok().and_then(Result::ok);
                    let reason = match status {
                        Some(st) => format!("{} during initialize", exit::describe(st)),
                        None => "closed its stdin during initialize".to_owned(),
                    };
                    return self.start_failed(&mut child, &conn, &mut drain, pid, reason, status).await;
                }
                Ok(Err(e)) if !matches!(e, RpcError::Timeout { .. }) => {
                    // The error can quote the server (its JSON-RPC error message).
                    let reason = cfg.redact(&format!("initialize failed: {e}"));
                    return self.start_failed(&mut child, &conn, &mut drain, pid, reason, None).await;
                }
                Ok(Err(_)) | Err(_) => {
                    let reason = format!(
                        "no answer to initialize within {} (startup_timeout)",
                        humanize(cfg.startup_timeout)
                    );
                    return self.start_failed(&mut child, &conn, &mut drain, pid, reason, None).await;
                }
            },
            status = child.wait() => {
                let status = status.ok();
                let reason = match status {
                    Some(st) => format!("{} during initialize", exit::describe(st)),
                    None => "exited during initialize".to_owned(),
                };
                return self.start_failed(&mut child, &conn, &mut drain, pid, reason, status).await;
            }
            Some(()) = framing_rx.recv() => {
                self.kill_now(&conn, pid, FRAMING_MESSAGE);
                let _ = child.wait().await;
                let _ = tokio::time::timeout(DRAIN_SETTLE, &mut drain).await;
                let tail = shared.tail(EVENT_TAIL_LINES);
                shared.emit(shared.event("server.start_failed")
                    .with("reason", FRAMING_MESSAGE)
                    .with("permanent", true)
                    .with("stderr_tail", tail.clone()));
                shared.set_state(ServerState::Failed, |s| {
                    s.last_error = Some(FRAMING_MESSAGE.into());
                    s.last_stderr_tail = tail;
                });
                return Ended::Permanent;
            }
            msg = self.ctl.recv() => {
                if let Some(Control::Start(ack)) = msg {
                    // Already starting: nothing to do.
                    let _ = ack.send(());
                    continue;
                }
                return self.stop_for(msg, &mut child, &conn, &mut drain, pid).await;
            }
            _ = self.cancel.cancelled() => {
                return self.stop_for(None, &mut child, &conn, &mut drain, pid).await;
            }
            };
        };

        let startup_ms = started.elapsed().as_millis() as u64;
        let tool_count = ready.tools.len();
        *shared.tools.write().unwrap() = Arc::new(ready.tools);
        *shared.init.write().unwrap() = Some(Arc::new(ready.init));
        *shared.conn.write().unwrap() = Some(conn.clone());
        let ready_at = Instant::now();
        shared.set_state(ServerState::Ready, |s| {
            s.ready_at = Some(SystemTime::now());
            s.tool_count = tool_count;
            s.protocol_version = Some(ready.protocol_version.clone());
            s.last_error = None;
        });
        shared.emit(
            shared
                .event("server.ready")
                .with("pid", pid)
                .with("tools", tool_count)
                .with("protocol_version", ready.protocol_version)
                .with("server_info", ready.server_info)
                .with("startup_ms", startup_ms),
        );

        let probing = Arc::new(AtomicBool::new(false));
        let (wedged_tx, mut wedged_rx) = mpsc::unbounded_channel::<String>();
        loop {
            tokio::select! {
                status = child.wait() => {
                    let status = status.ok();
                    let reason = status.map_or_else(|| "exited".to_owned(), exit::describe);
                    return self.crashed(&conn, &mut drain, pid, reason, status, ready_at).await;
                }
                Some(note) = notes_rx.recv() => self.on_notification(note, &conn),
                _ = conn.timed_out() => {
                    if !probing.swap(true, Ordering::AcqRel) {
                        let deadline = PING_TIMEOUT.min(cfg.call_timeout);
                        tokio::spawn(probe_liveness(conn.clone(), deadline, probing.clone(), wedged_tx.clone()));
                    }
                }
                Some(reason) = wedged_rx.recv() => {
                    self.kill_now(&conn, pid, &reason);
                    let status = child.wait().await.ok();
                    return self.crashed(&conn, &mut drain, pid, reason, status, ready_at).await;
                }
                Some(()) = framing_rx.recv() => {
                    self.kill_now(&conn, pid, FRAMING_MESSAGE);
                    let status = child.wait().await.ok();
                    return self.crashed(&conn, &mut drain, pid, FRAMING_MESSAGE.into(), status, ready_at).await;
                }
                msg = self.ctl.recv() => {
                    if let Some(Control::Start(ack)) = msg {
                        // Already running: nothing to do.
                        let _ = ack.send(());
                        continue;
                    }
                    return self.stop_for(msg, &mut child, &conn, &mut drain, pid).await;
                }
                _ = self.cancel.cancelled() => {
                    return self.stop_for(None, &mut child, &conn, &mut drain, pid).await;
                }
            }
        }
    }

    fn on_notification(&self, note: Notification, conn: &Arc<Connection>) {
        if note.method == "notifications/tools/list_changed" {
            let shared = self.shared.clone();
            let conn = conn.clone();
            tokio::spawn(async move { refresh_tools(shared, conn).await });
        }
        let _ = self.shared.notes.send(note);
    }

    /// A spawn that failed: for want of descriptors or memory a start failure like any
    /// other, restarted with backoff; otherwise permanent for this config (no loop).
    fn spawn_failed(&self, e: &SpawnError) -> Ended {
        let shared = &self.shared;
        let reason = e.to_string();
        let permanent = !e.is_temporary();
        shared.emit(
            shared
                .event("server.start_failed")
                .with("reason", reason.clone())
                .with("permanent", permanent)
                .with("stderr_tail", Vec::<String>::new()),
        );
        shared.set_state(ServerState::Failed, |s| {
            s.pid = None;
            s.last_error = Some(reason);
        });
        if permanent {
            return Ended::Permanent;
        }
        Ended::Died {
            clean: false,
            uptime: Duration::ZERO,
        }
    }

    async fn start_failed(
        &self,
        child: &mut Child,
        conn: &Connection,
        drain: &mut tokio::task::JoinHandle<()>,
        pid: u32,
        reason: String,
        status: Option<ExitStatus>,
    ) -> Ended {
        self.kill_now(conn, pid, &reason);
        let status = match status {
            Some(s) => Some(s),
            None => child.wait().await.ok(), // Still running: reap what was just killed.
        };
        let _ = tokio::time::timeout(DRAIN_SETTLE, &mut *drain).await;
        let ev = self
            .shared
            .event("server.start_failed")
            .with("permanent", false)
            .with("pid", pid);
        self.report_death(ev, reason, status);
        Ended::Died {
            clean: false,
            uptime: Duration::ZERO,
        }
    }

    async fn crashed(
        &self,
        conn: &Connection,
        drain: &mut tokio::task::JoinHandle<()>,
        pid: u32,
        reason: String,
        status: Option<ExitStatus>,
        ready_at: Instant,
    ) -> Ended {
        let shared = &self.shared;
        // The leader is gone; grandchildren in its group must not outlive it.
        self.kill_now(conn, pid, &reason);
        let _ = tokio::time::timeout(DRAIN_SETTLE, &mut *drain).await;
        let uptime = ready_at.elapsed();
        let ev = shared
            .event("server.crashed")
            .with("pid", pid)
            .with("uptime_ms", uptime.as_millis() as u64);
        self.report_death(ev, reason, status);
        Ended::Died {
            clean: status.is_some_and(|s| s.success()),
            uptime,
        }
    }

    /// Emits the one event of an unrequested death (with the reason, the exit status and
    /// the stderr tail) and records it in the status.
    fn report_death(&self, ev: Event, reason: String, status: Option<ExitStatus>) {
        let tail = self.shared.tail(EVENT_TAIL_LINES);
        let mut ev = ev.with("reason", reason.clone());
        if let Some(st) = status {
            ev.data.extend(exit::fields(st));
        }
        // State first, then the event: whoever reacts to the event sees the new state.
        self.shared.set_state(ServerState::Starting, |s| {
            s.last_error = Some(reason);
            s.last_stderr_tail = tail.clone();
        });
        self.shared.emit(ev.with("stderr_tail", tail));
    }

    async fn stop_for(
        &self,
        msg: Option<Control>,
        child: &mut Child,
        conn: &Connection,
        drain: &mut tokio::task::JoinHandle<()>,
        pid: u32,
    ) -> Ended {
        self.graceful_stop(child, conn, drain, pid).await;
        let (reason, state) = match &msg {
            Some(Control::Restart(_)) => ("restart", ServerState::Starting),
            _ if msg.is_none() => ("shutdown", ServerState::Stopped),
            _ => ("requested", ServerState::Stopped),
        };
        // State first, then the event: whoever reacts to the event sees the new state.
        self.shared.set_state(state, |s| s.pid = None);
        self.shared
            .emit(self.shared.event("server.stopped").with("reason", reason));
        match msg {
            Some(Control::Stop(ack)) => Ended::Stopped(ack),
            Some(Control::Restart(ack)) | Some(Control::Start(ack)) => Ended::Restart(ack),
            None => Ended::Shutdown,
        }
    }

    /// close stdin → SIGTERM to the group → grace → SIGKILL to the group → reap, then
    /// let the stderr drain catch up so the log holds the instance's last words.
    async fn graceful_stop(
        &self,
        child: &mut Child,
        conn: &Connection,
        drain: &mut tokio::task::JoinHandle<()>,
        pid: u32,
    ) {
        let shared = &self.shared;
        conn.close(&format!("server '{}' is stopping", shared.name));
        conn.close_stdin();
        let grace = shared.cfg.stop_grace;
        let exited = tokio::time::timeout(STDIN_GRACE.min(grace), child.wait()).await;
        if exited.is_err() {
            spawn::signal_group(pid, libc::SIGTERM);
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                spawn::signal_group(pid, libc::SIGKILL);
                let _ = child.wait().await;
            }
        }
        spawn::signal_group(pid, libc::SIGKILL);
        let _ = tokio::time::timeout(DRAIN_SETTLE, drain).await;
    }

    /// Fails pending calls with `reason`, then SIGKILLs the group at once (a broken,
    /// wedged or dead instance: the leader's grandchildren must not outlive it). The
    /// caller reaps the leader.
    fn kill_now(&self, conn: &Connection, pid: u32, reason: &str) {
        conn.close(&format!("server '{}' {reason}", self.shared.name));
        spawn::signal_group(pid, libc::SIGKILL);
    }
}

/// When the instance is over (every path out of `run_instance` has reaped the child and
/// SIGKILLed its group by then): unregisters its process group from the guard, and ends
/// what escaped the group during the run ([`crate::reaper`]).
struct GroupRegistration {
    guard: Option<Arc<crate::guard::Guard>>,
    reaper: Option<Arc<crate::reaper::Reaper>>,
    server: String,
    pid: u32,
}

impl Drop for GroupRegistration {
    fn drop(&mut self) {
        if let Some(guard) = &self.guard {
            guard.unregister(self.pid);
        }
        spawn::forget_spawned(self.pid);
        if let Some(reaper) = &self.reaper {
            reaper.server_ended(&self.server);
        }
    }
}

/// The line written to a server's log file before each instance's stderr, so runs are
/// told apart: `──── 2026-11-23T13:45:01Z server 'x' started (pid 4242) ────`.
fn run_header(name: &str, pid: u32) -> String {
    let ts = corral_events::now_rfc3339();
    let secs = ts.get(..19).map_or(ts.clone(), |s| format!("{s}Z"));
    format!("──── {secs} server '{name}' started (pid {pid}) ────")
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
    let r = conn.request("ping", None, deadline).await;
    if let Err(RpcError::Timeout { .. }) = r {
        let _ = wedged.send(format!(
            "unresponsive: a call timed out and ping got no answer within {}",
            humanize(deadline)
        ));
    }
    probing.store(false, Ordering::Release);
}

struct Ready {
    protocol_version: String,
    server_info: Value,
    tools: Vec<Tool>,
    init: Value,
}

/// `forwards_requests`: whether server→client requests reach a client that can answer
/// them (the gateway), so sampling and elicitation may be declared.
async fn handshake(
    conn: &Connection,
    cfg: &ServerConfig,
    forwards_requests: bool,
) -> Result<Ready, RpcError> {
    let capabilities = if forwards_requests {
        json!({"sampling": {}, "elicitation": {}})
    } else {
        json!({})
    };
    let params = json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "corral", "version": env!("CARGO_PKG_VERSION")},
    });
    let result = conn
        .request("initialize", Some(&params.to_string()), cfg.startup_timeout)
        .await?;
    let init: Value = serde_json::from_str(result.get()).map_err(|e| RpcError::Invalid {
        method: "initialize".into(),
        detail: e.to_string(),
    })?;
    let Some(version) = init.get("protocolVersion").and_then(Value::as_str) else {
        return Err(RpcError::Invalid {
            method: "initialize".into(),
            detail: "result has no protocolVersion".into(),
        });
    };
    conn.notify("notifications/initialized", None);
    let has_tools = init
        .get("capabilities")
        .is_some_and(|c| c.get("tools").is_some());
    let tools = if has_tools {
        list_tools(conn, cfg.startup_timeout).await?
    } else {
        Vec::new()
    };
    Ok(Ready {
        protocol_version: version.to_owned(),
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
                shared.event("server.noise").with(
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
        .event("server.tools_changed")
        .with("tools", tools.len())
        .with("added", added)
        .with("removed", removed);
    let count = tools.len();
    *shared.tools.write().unwrap() = Arc::new(tools);
    shared.status.send_modify(|s| s.tool_count = count);
    shared.emit(ev);
}
