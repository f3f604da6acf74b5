//! Runs stdio MCP servers and dev processes so that nothing they do can hang, blind or
//! leak the host.
//!
//! # Theory of operation
//!
//! Every supervised unit — an MCP server or a dev process — gets one actor task
//! (`actor.rs`) that owns its current run, an instance (`instance.rs`): the child
//! (spawned by [`spawn`]: own process group, `PR_SET_PDEATHSIG`, a command lookup that
//! turns "not found" into a permanent, well-named error; or on a pseudo-terminal,
//! [`pty`]), the tasks draining its output, and its registration with the guard and the
//! reaper. Dropping the instance, however the run ended, kills its group.
//!
//! The actor runs the same lifecycle for both kinds: wait for what the unit depends on,
//! spawn, get ready — racing the child's exit, its mailbox and shutdown — serve, and on
//! an exit it did not ask for report exactly one death (`*.start_failed` before ready,
//! `*.crashed` or `process.exited` after, each with the output tail), then apply the
//! restart policy: backoff (1 s doubling to 60 s) or giving up, with a crash-loop
//! breaker. A requested stop closes stdin (servers), signals the group with SIGTERM,
//! waits out the grace period, SIGKILLs the group and reaps — and emits only
//! `*.stopped`. The state is a [`Phase`] that carries its data (the run's pid), so no
//! listing can show a pid that is gone.
//!
//! What differs is the unit's `Role`:
//! - a server ([`ServerHandle`]) is ready when the MCP handshake is done; callers then
//!   use its [`rpc::Connection`] directly, and while it serves the role watches
//!   notifications (a changed tool list is re-read) and call timeouts (a server that then
//!   fails a liveness ping is killed and restarted);
//! - a dev process ([`ProcessHandle`]) is ready when spawned or when its readiness check
//!   passes ([`ready`]: a log line, a TCP port, an HTTP 2xx); both its streams go into
//!   one byte-bounded [`output::OutputRing`].
//!
//! Output is drained always ([`stderr`], [`output`]): lines are cut at 8 KiB, redacted,
//! written to the ring, the rotated log file and the console. Each read is also handed to
//! the stream's alert scanner ([`alerts`]), which runs in its own task so that scanning
//! never slows the drain.
//!
//! The [`Supervisor`] is the set of actors: the servers, and the shareable
//! [`Processes`] registry (which the gateway and the daemon also add ad-hoc processes
//! to); its shutdown stops the processes, then the servers, each set concurrently.

mod actor;
pub mod alerts;
mod console;
mod exit;
pub mod guard;
mod instance;
pub mod lines;
mod listen;
pub mod output;
pub mod patience;
pub mod platform;
pub mod ports;
pub mod process;
pub mod pty;
pub mod ready;
pub mod reaper;
pub mod rpc;
mod server;
pub mod spawn;
pub mod stderr;

pub use actor::{Crash, EVENT_TAIL_LINES, ExitInfo, Family, Life, Phase, State};
pub use console::{Console, escape_for_terminal};
pub use process::{Dependency, ProcessHandle, ProcessStatus};
pub use rpc::{Notification, RpcError};
pub use server::{
    CallError, DISCOVER_TIMEOUT, Era, FRAMING_MESSAGE, LEGACY_VERSIONS, MODERN_PROTOCOL_VERSION,
    PING_TIMEOUT, PROTOCOL_VERSION, ServerHandle, ServerState, ServerStatus, Tool, with_tail,
};

/// A warning printed where no event can carry it (before the unit exists).
pub(crate) fn warn(msg: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "corral: warning: {msg}");
}

use corral_config::{ProcessConfig, ServerConfig};
use corral_events::EventBus;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where and how servers report.
#[derive(Clone)]
pub struct SupervisorOptions {
    /// Receives every event.
    pub bus: EventBus,
    /// Directory of `<name>.log` files (`.corral/logs`).
    pub log_dir: PathBuf,
    /// Log rotation size.
    pub log_rotate_bytes: u64,
    /// Live `[server:name]` lines; `None` for no console (tests, `--json` output).
    pub console: Option<Console>,
    /// Kills the children's process groups if this process dies (see [`guard`]).
    pub guard: Option<std::sync::Arc<guard::Guard>>,
    /// Finds and ends processes that escape their server's group (see [`reaper`]).
    pub reaper: Option<std::sync::Arc<reaper::Reaper>>,
    /// Receives the servers' requests to the client (sampling, elicitation …); `None`
    /// answers them "method not found" and declares no such client capability.
    pub requests: Option<tokio::sync::mpsc::UnboundedSender<IncomingRequest>>,
    /// Called for every notification of every server, on the reader task, before any
    /// later message of that server is processed: so a progress notification is routed
    /// before the response that follows it. Set once, after start (the gateway is built
    /// on the handles).
    pub on_notification: Option<NotificationHook>,
    /// Scans every process's output and every server's stderr for errors; `None`: no
    /// alerts.
    pub alerts: Option<std::sync::Arc<alerts::Alerts>>,
    /// The program that carries a remote (url) server's traffic, run as `PROGRAM
    /// __remote` (Corral's own binary: `corral_remote`); `None`: remote servers cannot
    /// start, and say so.
    pub remote_program: Option<PathBuf>,
    /// The project's directory, which (with a remote server's name and URL) finds its
    /// OAuth credentials.
    pub project_root: Option<PathBuf>,
}

/// A notification callback, installable after the supervisor started.
pub type NotificationHook =
    std::sync::Arc<std::sync::OnceLock<Box<dyn Fn(&str, &Notification) + Send + Sync>>>;

/// A server→client request, tagged with the server it came from.
#[derive(Debug)]
pub struct IncomingRequest {
    pub server: String,
    pub request: rpc::ServerRequest,
}

impl SupervisorOptions {
    /// Options with the default rotation size and no console.
    pub fn new(bus: EventBus, log_dir: PathBuf) -> Self {
        SupervisorOptions {
            bus,
            log_dir,
            log_rotate_bytes: stderr::LOG_ROTATE_BYTES,
            console: None,
            guard: None,
            reaper: None,
            requests: None,
            on_notification: None,
            alerts: None,
            remote_program: None,
            project_root: None,
        }
    }
}

impl SupervisorOptions {
    /// Sets up what keeps the children contained however this process ends — the guard
    /// process (`guard_exe __guard`) and the subreaper ([`reaper`]) — the same way for the
    /// daemon and for one-shot commands. Returns what could not be set up, one message
    /// each: the caller must show it (a warning, an event, a status line), never drop it,
    /// since without it "no orphans, even on SIGKILL" no longer holds.
    pub fn contain(&mut self, guard_exe: Option<&std::path::Path>) -> Vec<String> {
        let mut problems = Vec::new();
        match guard_exe.map(|exe| guard::Guard::spawn(exe, &["__guard"])) {
            Some(Ok(g)) => self.guard = Some(std::sync::Arc::new(g)),
            Some(Err(e)) => problems.push(format!(
                "cannot start the guard process ({e}): servers' own children may outlive a killed corral"
            )),
            None => problems.push(
                "no guard process: servers' own children may outlive a killed corral".into(),
            ),
        }
        match platform::escape::prepare() {
            Ok(()) => {
                self.reaper = Some(reaper::Reaper::start(self.guard.clone(), self.bus.clone()))
            }
            Err(e) => problems.push(format!(
                "cannot become the subreaper ({e}): processes that leave their server's process group are not stopped with it"
            )),
        }
        problems
    }
}

/// One running actor.
struct Entry<H> {
    handle: H,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// All server and process actors of one project.
pub struct Supervisor {
    servers: BTreeMap<String, Entry<ServerHandle>>,
    processes: Processes,
    cancel: CancellationToken,
    opts: SupervisorOptions,
}

/// The dev processes of one project: a cloneable registry, so that whoever runs an
/// ad-hoc process (`corral run`, an agent's tool call) adds it to the same set the
/// supervisor stops at shutdown.
#[derive(Clone)]
pub struct Processes {
    inner: std::sync::Arc<ProcessesInner>,
}

struct ProcessesInner {
    entries: std::sync::Mutex<BTreeMap<String, Entry<ProcessHandle>>>,
    /// The parent of every process's token; cancelled first at shutdown.
    cancel: CancellationToken,
    opts: SupervisorOptions,
    ports: ports::PortOwners,
}

impl Processes {
    fn new(opts: &SupervisorOptions, cancel: CancellationToken) -> Processes {
        Processes {
            inner: std::sync::Arc::new(ProcessesInner {
                entries: Default::default(),
                cancel,
                opts: opts.clone(),
                ports: Default::default(),
            }),
        }
    }

    /// The process (`process:NAME`) that serves TCP port `port` on this machine: the
    /// running one whose readiness check connects to that port, else the one holding a
    /// socket listening on it ([`ports`]).
    pub fn serving(&self, port: u16) -> Option<String> {
        let running: Vec<ProcessHandle> = self
            .list()
            .into_iter()
            .filter(|h| h.watch().borrow().pid().is_some())
            .collect();
        let by_check = running.iter().find(|h| {
            h.config().ready.as_ref().is_some_and(|r| match &r.check {
                corral_config::ReadyCheck::Tcp(addr) => {
                    addr.rsplit_once(':')
                        .and_then(|(_, p)| p.parse::<u16>().ok())
                        == Some(port)
                }
                corral_config::ReadyCheck::Http(url) => url_port(url) == Some(port),
                corral_config::ReadyCheck::Log(_) => false,
            })
        });
        if let Some(h) = by_check {
            return Some(format!("process:{}", h.name()));
        }
        let units: Vec<(String, u32)> = running
            .iter()
            .filter_map(|h| Some((format!("process:{}", h.name()), h.watch().borrow().pid()?)))
            .collect();
        self.inner.ports.owner(port, &units)
    }

    /// Starts a process with what it waits for (the name must be new).
    pub fn add(&self, cfg: ProcessConfig, deps: Vec<Dependency>) -> Result<ProcessHandle, String> {
        let mut entries = self.inner.entries.lock().unwrap();
        if entries.contains_key(&cfg.name) {
            return Err(format!(
                "a process named '{}' exists already; `corral restart {}` restarts it",
                cfg.name, cfg.name
            ));
        }
        let cancel = self.inner.cancel.child_token();
        let (handle, task) = ProcessHandle::spawn(cfg, deps, &self.inner.opts, cancel.clone());
        entries.insert(
            handle.name().to_owned(),
            Entry {
                handle: handle.clone(),
                cancel,
                task,
            },
        );
        Ok(handle)
    }

    /// Stops a process gracefully and forgets it; `false` if there is none by that name.
    pub async fn remove(&self, name: &str) -> bool {
        let Some(entry) = self.inner.entries.lock().unwrap().remove(name) else {
            return false;
        };
        entry.cancel.cancel();
        let _ = entry.task.await;
        true
    }

    /// The process called `name`.
    pub fn get(&self, name: &str) -> Option<ProcessHandle> {
        let entries = self.inner.entries.lock().unwrap();
        entries.get(name).map(|e| e.handle.clone())
    }

    /// Every process, by name.
    pub fn list(&self) -> Vec<ProcessHandle> {
        let entries = self.inner.entries.lock().unwrap();
        entries.values().map(|e| e.handle.clone()).collect()
    }

    /// Where alerts go, when they are on.
    pub fn alerts(&self) -> Option<&std::sync::Arc<alerts::Alerts>> {
        self.inner.opts.alerts.as_ref()
    }

    /// The longest stop grace of the processes.
    fn max_grace(&self) -> Duration {
        let entries = self.inner.entries.lock().unwrap();
        entries
            .values()
            .map(|e| e.handle.config().stop_grace)
            .max()
            .unwrap_or_default()
    }

    /// Stops every process (they are cancelled together) until `until`.
    async fn shutdown(&self, until: tokio::time::Instant) {
        self.inner.cancel.cancel();
        let tasks: Vec<_> = std::mem::take(&mut *self.inner.entries.lock().unwrap())
            .into_values()
            .map(|e| e.task)
            .collect();
        stop_all(tasks, until).await;
    }
}

impl Supervisor {
    /// Starts one actor per server; each server is spawned at once (eagerly).
    pub fn start(
        servers: impl IntoIterator<Item = ServerConfig>,
        opts: &SupervisorOptions,
    ) -> Self {
        let mut sup = Supervisor {
            servers: BTreeMap::new(),
            processes: Processes::new(opts, CancellationToken::new()),
            cancel: CancellationToken::new(),
            opts: opts.clone(),
        };
        for cfg in servers {
            sup.add(cfg);
        }
        sup
    }

    /// Starts a server (replacing nothing: the name must be new).
    pub fn add(&mut self, cfg: ServerConfig) -> ServerHandle {
        let cancel = self.cancel.child_token();
        let (handle, task) = ServerHandle::spawn(cfg, &self.opts, cancel.clone(), true);
        self.servers.insert(
            handle.name().to_owned(),
            Entry {
                handle: handle.clone(),
                cancel,
                task,
            },
        );
        handle
    }

    /// Stops a server gracefully and forgets it; `false` if there is none by that name.
    pub async fn remove(&mut self, name: &str) -> bool {
        let Some(entry) = self.servers.remove(name) else {
            return false;
        };
        entry.cancel.cancel();
        let _ = entry.task.await;
        true
    }

    /// Starts dev processes, given in dependency order
    /// ([`corral_config::Config::start_order`]); each starts once what it depends on is
    /// ready.
    pub fn start_processes<'a>(
        &mut self,
        processes: impl IntoIterator<Item = &'a ProcessConfig>,
    ) -> Result<(), String> {
        for cfg in processes {
            self.add_process(cfg.clone())?;
        }
        Ok(())
    }

    /// Starts a process (the name must be new). What it depends on must exist already:
    /// an error names what does not.
    pub fn add_process(&mut self, cfg: ProcessConfig) -> Result<ProcessHandle, String> {
        let mut deps = Vec::new();
        for name in &cfg.depends_on {
            let dep = match (self.processes.get(name), self.servers.get(name)) {
                (Some(p), _) => p.dependency(),
                (None, Some(s)) => Dependency {
                    label: format!("server '{name}'"),
                    life: s.handle.watch(),
                },
                (None, None) => {
                    return Err(format!(
                        "process '{}' depends on '{name}', which is neither a process nor a server here",
                        cfg.name
                    ));
                }
            };
            deps.push(dep);
        }
        self.processes.add(cfg, deps)
    }

    /// The dev processes, shareable: the gateway starts and stops them too.
    pub fn processes(&self) -> &Processes {
        &self.processes
    }

    /// The server called `name`.
    pub fn get(&self, name: &str) -> Option<&ServerHandle> {
        self.servers.get(name).map(|e| &e.handle)
    }

    /// Every server, by name.
    pub fn servers(&self) -> impl Iterator<Item = &ServerHandle> {
        self.servers.values().map(|e| &e.handle)
    }

    /// The servers' handles by name, as the gateway takes them.
    pub fn handles(&self) -> std::collections::BTreeMap<String, ServerHandle> {
        self.servers()
            .map(|h| (h.name().to_owned(), h.clone()))
            .collect()
    }

    /// How long [`Supervisor::shutdown`] may take at most for these servers: the
    /// longest stop grace twice (stdin close, then SIGTERM), plus slack.
    pub fn shutdown_deadline(&self) -> Duration {
        let grace = self
            .servers()
            .map(|h| h.config().stop_grace)
            .max()
            .unwrap_or_default();
        let process_grace = self.processes.max_grace();
        grace * 2 + process_grace + Duration::from_secs(3)
    }

    /// Stops every server gracefully and concurrently, then ends what escaped their
    /// process groups. Each stop is bounded by its own grace periods; `deadline` bounds
    /// the whole ([`Supervisor::shutdown_deadline`] for the usual one), after which the
    /// remaining actors are abandoned (their children still die: `kill_on_drop`, the
    /// death signal and the guard).
    pub async fn shutdown(self, deadline: Duration) {
        let reaper = self.opts.reaper.clone();
        let until = tokio::time::Instant::now() + deadline;
        // Processes first (a dev server may be using an MCP server), then the servers.
        self.processes.shutdown(until).await;
        self.cancel.cancel();
        stop_all(self.servers.into_values().map(|e| e.task).collect(), until).await;
        if let Some(reaper) = reaper {
            reaper.end_all();
        }
    }
}

/// Waits for the actors' tasks until `until`, then abandons the rest (their children
/// still die: `kill_on_drop`, the death signal and the guard).
async fn stop_all(tasks: Vec<tokio::task::JoinHandle<()>>, until: tokio::time::Instant) {
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let all = async {
        for t in tasks {
            let _ = t.await;
        }
    };
    if tokio::time::timeout_at(until, all).await.is_err() {
        for a in aborts {
            a.abort();
        }
    }
}

/// The port of an `http://HOST:PORT/…` URL (80 when none is written).
fn url_port(url: &str) -> Option<u16> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    match authority.rsplit_once(':') {
        Some((_, port)) if !port.ends_with(']') => port.parse().ok(),
        _ => Some(80),
    }
}
