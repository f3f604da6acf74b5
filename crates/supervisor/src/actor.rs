//! The lifecycle every supervised unit shares — an MCP server or a dev process:
//! spawn → get ready → serve → die or stop → restart with backoff, or give up.
//!
//! One actor task per unit owns its [`Instance`] and is the only code that starts, stops
//! or reaps it. What differs between a server and a process is a [`Role`]: how to spawn
//! it, what "ready" means (the MCP handshake; a log line, an open port, a 2xx), what to
//! watch while it serves (wedged calls; nothing). The actor does the rest the same way
//! for both: the restart policy, the backoff, the crash-loop breaker, the graceful stop,
//! and exactly one event per death.
//!
//! Exactly-once falls out of the structure: only the actor observes the child's exit, it
//! does so once per instance, and it knows whether it asked for the exit (stop, restart,
//! shutdown: no death event) or not (`*.start_failed` before ready, `*.crashed` or
//! `process.exited` after).
//!
//! The unit's state is a [`Phase`] that carries its data (the pid of the run, the
//! backoff's attempt), published with the unit's [`Life`] on a watch channel: there is
//! no pid to forget to clear.

use crate::instance::{Containment, Instance};
use crate::rpc::humanize;
use crate::spawn::SpawnError;
use crate::stderr::SharedLog;
use crate::{Console, exit};
use corral_config::{CrashLoop, RestartPolicy};
use corral_events::{Event, EventBus, Kind, Source};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// First and largest restart delay.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Output lines carried by death events.
pub const EVENT_TAIL_LINES: usize = 20;

/// Where a unit is in its lifecycle, with the data that belongs there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Being spawned (`pid: None`), or spawned and getting ready.
    Starting { pid: Option<u32> },
    /// Ready: serving calls (a server), or up and past its readiness check (a process).
    Ready { pid: u32 },
    /// Died; the next start is due at `until`.
    Backoff { attempt: u32, until: SystemTime },
    /// Stopped on request, exited cleanly and not restarted, or never started.
    Stopped,
    /// Failed and not restarted (the restart policy, or a permanent error).
    Failed,
    /// The crash-loop breaker tripped after `crashes` deaths.
    GaveUp { crashes: u32 },
    /// A remote server that needs `corral auth NAME`: not restarted until started again
    /// (which `corral auth` does).
    NeedsAuth,
}

/// A [`Phase`] without its data: what listings show and callers match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Starting,
    Ready,
    Backoff,
    Stopped,
    Failed,
    GaveUp,
    NeedsAuth,
}

impl State {
    /// The state as written in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready => "ready",
            State::Backoff => "backoff",
            State::Stopped => "stopped",
            State::Failed => "failed",
            State::GaveUp => "gave_up",
            State::NeedsAuth => "needs_auth",
        }
    }
}

impl Phase {
    pub fn state(self) -> State {
        match self {
            Phase::Starting { .. } => State::Starting,
            Phase::Ready { .. } => State::Ready,
            Phase::Backoff { .. } => State::Backoff,
            Phase::Stopped => State::Stopped,
            Phase::Failed => State::Failed,
            Phase::GaveUp { .. } => State::GaveUp,
            Phase::NeedsAuth => State::NeedsAuth,
        }
    }

    /// The pid of the current run, while there is one.
    pub fn pid(self) -> Option<u32> {
        match self {
            Phase::Starting { pid } => pid,
            Phase::Ready { pid } => Some(pid),
            _ => None,
        }
    }
}

/// How a run ended, when it ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal, when one killed it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    fn of(status: ExitStatus) -> ExitInfo {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// A unit's published lifecycle: its phase and what the last runs left behind.
#[derive(Debug, Clone)]
pub struct Life {
    pub name: String,
    pub phase: Phase,
    /// When `phase` was entered.
    pub since: SystemTime,
    /// Restarts so far (automatic and requested).
    pub restarts: u32,
    /// Runs spawned so far: the current run's number.
    pub runs: u32,
    /// When the current (or last) run was spawned: what came before it is history
    /// (`get_errors` starts each source's window here).
    pub run_started: Option<SystemTime>,
    /// Why the last run died or failed to start (short; no output lines).
    pub last_error: Option<String>,
    /// The output tail of that run.
    pub last_tail: Vec<String>,
    /// How the last run that ended on its own exited.
    pub last_exit: Option<ExitInfo>,
    /// The last death that was followed by an automatic restart, kept while the unit
    /// runs again (`last_error` is cleared once it is ready): `get_errors` lists it until
    /// the unit has run past its crash-loop window. Cleared by a requested start or
    /// restart.
    pub last_crash: Option<Crash>,
    /// When the first run after a requested start or restart was spawned: what the unit
    /// printed before it was fixed by the user's hand (`get_errors` calls it resolved,
    /// "restarted"). An automatic restart after a crash does not set it.
    pub fixed_at: Option<SystemTime>,
}

/// A death followed by an automatic restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    pub at: SystemTime,
    pub reason: String,
    /// Deaths within the crash-loop window, this one included.
    pub recent: u32,
}

impl Life {
    pub fn state(&self) -> State {
        self.phase.state()
    }

    pub fn pid(&self) -> Option<u32> {
        self.phase.pid()
    }

    /// When the current run became ready, if it is ready.
    pub fn ready_at(&self) -> Option<SystemTime> {
        matches!(self.phase, Phase::Ready { .. }).then_some(self.since)
    }
}

/// The two kinds of unit; the first word of their events and sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Server,
    Process,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Server => "server",
            Family::Process => "process",
        }
    }
}

/// A lifecycle event, named per family by [`Unit::event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Happened {
    Starting,
    Ready,
    StartFailed,
    Crashed,
    Exited,
    Stopped,
    Restarting,
    GaveUp,
}

impl Happened {
    fn kind(self, family: Family) -> Kind {
        use Family::*;
        use Happened::*;
        match (family, self) {
            (Server, Starting) => Kind::ServerStarting,
            (Server, Ready) => Kind::ServerReady,
            (Server, StartFailed) => Kind::ServerStartFailed,
            // A server has no clean way to end on its own: it serves until told to stop.
            (Server, Crashed | Exited) => Kind::ServerCrashed,
            (Server, Stopped) => Kind::ServerStopped,
            (Server, Restarting) => Kind::ServerRestarting,
            (Server, GaveUp) => Kind::ServerGaveUp,
            (Process, Starting) => Kind::ProcessStarting,
            (Process, Ready) => Kind::ProcessReady,
            (Process, StartFailed) => Kind::ProcessStartFailed,
            (Process, Crashed) => Kind::ProcessCrashed,
            (Process, Exited) => Kind::ProcessExited,
            (Process, Stopped) => Kind::ProcessStopped,
            (Process, Restarting) => Kind::ProcessRestarting,
            (Process, GaveUp) => Kind::ProcessGaveUp,
        }
    }
}

/// The restart rules of a unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub restart: RestartPolicy,
    pub crash_loop: CrashLoop,
    pub stop_grace: Duration,
}

/// What every unit shares with its handles: its name, its published life, its log, and
/// where its events go.
pub(crate) struct Unit {
    pub name: String,
    pub family: Family,
    pub bus: EventBus,
    pub life: watch::Sender<Life>,
    pub log: SharedLog,
    pub log_path: PathBuf,
    /// `None` when the unit is `quiet` or there is no console.
    pub console: Option<Console>,
    pub contain: Containment,
    pub alerts: Option<Arc<crate::alerts::Alerts>>,
}

impl Unit {
    pub(crate) fn new(
        name: &str,
        family: Family,
        opts: &crate::SupervisorOptions,
        quiet: bool,
        autostart: bool,
    ) -> Unit {
        let log_path = crate::stderr::log_path(&opts.log_dir, name);
        let log = match crate::stderr::LogFile::open(&log_path, opts.log_rotate_bytes) {
            Ok(l) => Some(l),
            Err(e) => {
                crate::warn(&format!(
                    "{} '{name}': cannot open log file {}: {e}",
                    family.as_str(),
                    log_path.display()
                ));
                None
            }
        };
        let life = Life {
            name: name.to_owned(),
            phase: if autostart {
                Phase::Starting { pid: None }
            } else {
                Phase::Stopped
            },
            since: SystemTime::now(),
            restarts: 0,
            runs: 0,
            run_started: None,
            last_error: None,
            last_tail: Vec::new(),
            last_exit: None,
            last_crash: None,
            fixed_at: None,
        };
        Unit {
            name: name.to_owned(),
            family,
            bus: opts.bus.clone(),
            life: watch::channel(life).0,
            log: Arc::new(std::sync::Mutex::new(log)),
            log_path,
            console: if quiet { None } else { opts.console.clone() },
            contain: Containment {
                guard: opts.guard.clone(),
                reaper: opts.reaper.clone(),
            },
            alerts: opts.alerts.clone(),
        }
    }

    /// `server:NAME` or `process:NAME`.
    pub(crate) fn source(&self) -> Source {
        match self.family {
            Family::Server => Source::Server(self.name.clone()),
            Family::Process => Source::Process(self.name.clone()),
        }
    }

    pub(crate) fn event(&self, what: Happened) -> Event {
        Event::new(what.kind(self.family), self.source())
    }

    /// A tap to the alert scanner for one of this run's output streams, when alerts
    /// are on.
    pub(crate) fn alert_tap(
        &self,
        stream: corral_alerts::Stream,
        redactor: corral_config::redact::Redactor,
    ) -> Option<crate::alerts::Tap> {
        let alerts = self.alerts.as_ref()?;
        Some(alerts.tap(&self.source(), stream, redactor, crate::stderr::MAX_LINE))
    }

    pub(crate) fn emit(&self, ev: Event) {
        self.bus.emit(ev);
    }

    /// Enters `phase` (and records what `f` sets). Whoever reacts to an event sees the
    /// phase it reports: callers set the phase first, then emit.
    pub(crate) fn set_phase(&self, phase: Phase, f: impl FnOnce(&mut Life)) {
        self.life.send_modify(|l| {
            if l.phase.state() != phase.state() {
                l.since = SystemTime::now();
            }
            l.phase = phase;
            f(l);
        });
    }

    /// Writes the line that starts a run in the log file, so runs are told apart:
    /// `──── 2026-11-23T13:45:01Z server 'x' started (pid 4242, run 3) ────`.
    fn log_run_header(&self, pid: u32, run: u32) {
        let ts = corral_events::now_rfc3339();
        let secs = ts.get(..19).map_or(ts.clone(), |s| format!("{s}Z"));
        let line = format!(
            "──── {secs} {} '{}' started (pid {pid}, run {run}) ────",
            self.family.as_str(),
            self.name
        );
        if let Some(log) = self.log.lock().unwrap().as_mut() {
            log.write_line("", &line);
            log.flush();
        }
    }
}

/// Why an instance did not get ready.
pub(crate) enum StartError {
    /// Our pipe to it broke: it is exiting, and its exit status is the reason.
    Closed,
    /// Not ready, for this reason: killed, and restarted as the policy says.
    Failed(String),
    /// It can never work with this config: killed, not restarted.
    Permanent(String),
}

/// What differs between a server and a process. See the module docs.
pub(crate) trait Role: Send + Sync + 'static {
    /// The state of one run (a connection, a readiness check).
    type Run: Run;

    fn unit(&self) -> &Unit;

    fn policy(&self) -> Policy;

    /// How the phase before ready is named in messages: "during initialize".
    const DURING_START: &'static str;

    /// Waits until what the unit depends on is ready (before every run).
    fn prerequisites(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Spawns a run, or says why this config can never run (permanent).
    fn spawn(&self) -> Result<Instance, SpawnFailure>;

    /// The fields of the `*.starting` event (the command, redacted).
    fn starting_fields(&self, ev: Event) -> Event;

    /// Takes the new instance's pipes and starts draining its output.
    fn attach(self: &Arc<Self>, inst: &mut Instance) -> Self::Run;

    /// The last `n` lines of the current run's output, for a death's event.
    fn tail(&self, n: usize) -> Vec<String>;

    /// Called after the phase changed (a server forgets its connection when it leaves
    /// `Ready`).
    fn phase_changed(&self, _phase: Phase) {}

    /// Asked when a run exited before it got ready: `true` to spawn the next one at
    /// once, with no death counted (a server that exited on the `server/discover`
    /// probe is started again and spoken to in the legacy way; see `server.rs`).
    fn respawn_at_once(&self) -> bool {
        false
    }

    /// Asked when a run ended: `Some(why)` when it ended because it needs authorization
    /// (a remote server's bridge exited saying so): held in `NeedsAuth`, not restarted.
    fn needs_auth(&self, _status: Option<ExitStatus>) -> Option<String> {
        None
    }
}

/// Why nothing was spawned.
pub(crate) enum SpawnFailure {
    /// Not runnable as configured (no such command, a remote server …): not restarted.
    Permanent(String),
    /// The spawn itself failed.
    Spawn(SpawnError),
}

/// One run of a [`Role`].
pub(crate) trait Run: Send + Sync {
    /// Gets the run ready. `Ok` holds the fields of the `*.ready` event.
    fn start(&mut self) -> impl Future<Output = Result<Map<String, Value>, StartError>> + Send;

    /// Watches the ready run; returns only when it must be killed, with why (it
    /// otherwise serves until it exits or is stopped).
    fn serve(&mut self) -> impl Future<Output = String> + Send;

    /// The run is ending for `reason`: fail whatever waits on it.
    fn close(&self, reason: &str);

    /// Asks the program politely to exit (closes its stdin); `false` if it has no stdin
    /// to close, so the stop goes straight to SIGTERM.
    fn close_stdin(&self) -> bool;
}

/// A lifecycle command, acknowledged once the actor took it.
pub(crate) enum Control {
    Start(oneshot::Sender<()>),
    Stop(oneshot::Sender<()>),
    Restart(oneshot::Sender<()>),
}

/// How one run ended.
enum Ended {
    /// Stopped on request; the sender is acked once the actor settled.
    Stopped(oneshot::Sender<()>),
    Restart(oneshot::Sender<()>),
    Shutdown,
    /// Died without being asked to.
    Died(Death),
}

/// An unrequested death, reported once by [`Actor::after_death`].
struct Death {
    /// The event, with its kind-specific fields, still without reason and tail.
    event: Event,
    reason: String,
    status: Option<ExitStatus>,
    /// How long it was ready (zero for a start failure).
    uptime: Duration,
    /// Cannot run with this config: no restart.
    permanent: bool,
}

/// Why the wait before ready or the serving ended.
enum Interrupted<T> {
    Done(T),
    Exited(Option<ExitStatus>),
    Control(Option<Control>),
}

struct Actor<R: Role> {
    role: Arc<R>,
    ctl: mpsc::UnboundedReceiver<Control>,
    cancel: CancellationToken,
    /// Times of recent unrequested deaths, for the crash-loop breaker.
    crashes: VecDeque<Instant>,
    /// A start or restart was requested: the next run's spawn is [`Life::fixed_at`].
    requested: bool,
    /// Consecutive automatic restarts, for the backoff.
    attempt: u32,
}

impl<R: Role> Actor<R> {
    fn new(role: Arc<R>, ctl: mpsc::UnboundedReceiver<Control>, cancel: CancellationToken) -> Self {
        Actor {
            role,
            ctl,
            cancel,
            crashes: VecDeque::new(),
            requested: false,
            attempt: 0,
        }
    }

    fn unit(&self) -> &Unit {
        self.role.unit()
    }

    fn set_phase(&self, phase: Phase, f: impl FnOnce(&mut Life)) {
        self.unit().set_phase(phase, f);
        self.role.phase_changed(phase);
    }

    async fn run(mut self, autostart: bool) {
        let mut want = autostart;
        loop {
            if !want && !self.idle().await {
                return;
            }
            want = match self.run_once().await {
                Ended::Shutdown => return,
                Ended::Stopped(ack) => {
                    let _ = ack.send(());
                    false
                }
                Ended::Restart(ack) => {
                    self.reset_breaker();
                    self.unit().life.send_modify(|l| l.restarts += 1);
                    let _ = ack.send(());
                    true
                }
                Ended::Died(death) => match self.after_death(death).await {
                    Some(again) => again,
                    None => return,
                },
            };
        }
    }

    /// Stopped: waits for a start. `false` means shut down.
    async fn idle(&mut self) -> bool {
        loop {
            tokio::select! {
                msg = self.ctl.recv() => match msg {
                    Some(Control::Start(ack) | Control::Restart(ack)) => {
                        self.reset_breaker();
                        let _ = ack.send(());
                        return true;
                    }
                    Some(Control::Stop(ack)) => { let _ = ack.send(()); }
                    None => return false,
                },
                _ = self.cancel.cancelled() => return false,
            }
        }
    }

    fn reset_breaker(&mut self) {
        self.crashes.clear();
        self.attempt = 0;
        self.requested = true;
        // Started on request: the user's answer to the last crash.
        self.unit().life.send_modify(|l| l.last_crash = None);
    }

    /// A lifecycle command while running: `Start` is acked (it runs already); anything
    /// else, or the end of the mailbox, interrupts the run.
    /// Runs `work` (getting ready, or serving) racing the child's exit, our control
    /// messages and cancellation; whichever comes first ends it.
    async fn race<T>(
        &mut self,
        inst: &mut Instance,
        work: impl std::future::Future<Output = T>,
    ) -> Interrupted<T> {
        tokio::pin!(work);
        loop {
            break tokio::select! {
                done = &mut work => Interrupted::Done(done),
                status = inst.exited() => Interrupted::Exited(status),
                msg = self.ctl.recv() => match Self::interrupts(msg) {
                    Some(msg) => Interrupted::Control(msg),
                    None => continue,
                },
                _ = self.cancel.cancelled() => Interrupted::Control(None),
            };
        }
    }

    fn interrupts(msg: Option<Control>) -> Option<Option<Control>> {
        match msg {
            Some(Control::Start(ack)) => {
                let _ = ack.send(());
                None
            }
            other => Some(other),
        }
    }

    /// One run: spawn, get ready, serve, until it dies or is stopped.
    async fn run_once(&mut self) -> Ended {
        let role = self.role.clone();
        let unit = role.unit();
        self.set_phase(Phase::Starting { pid: None }, |_| {});
        let interrupted = {
            let ready = role.prerequisites();
            tokio::pin!(ready);
            loop {
                break tokio::select! {
                    () = &mut ready => None,
                    msg = self.ctl.recv() => match Self::interrupts(msg) {
                        Some(msg) => Some(msg),
                        None => continue,
                    },
                    _ = self.cancel.cancelled() => Some(None),
                };
            }
        };
        if let Some(msg) = interrupted {
            return self.stopped(msg);
        }
        let (mut inst, mut run, pid, ready) = loop {
            unit.emit(role.starting_fields(unit.event(Happened::Starting)));
            let mut inst = match role.spawn() {
                Ok(inst) => inst,
                Err(failure) => return self.spawn_failed(failure),
            };
            let pid = inst.pid();
            let mut runs = 0;
            let requested = std::mem::take(&mut self.requested);
            self.set_phase(Phase::Starting { pid: Some(pid) }, |l| {
                let now = SystemTime::now();
                l.runs += 1;
                l.run_started = Some(now);
                if requested {
                    l.fixed_at = Some(now);
                }
                runs = l.runs;
            });
            unit.log_run_header(pid, runs);
            let mut run = role.attach(&mut inst);

            // Getting ready, racing the child's exit and our own control messages.
            let outcome = self.race(&mut inst, run.start()).await;
            match outcome {
                Interrupted::Done(Ok(fields)) => break (inst, run, pid, fields),
                Interrupted::Done(Err(StartError::Closed)) | Interrupted::Exited(_)
                    if role.respawn_at_once() =>
                {
                    run.close(&format!(
                        "{} '{}' exited on the protocol probe; starting it again",
                        unit.family.as_str(),
                        unit.name
                    ));
                    inst.kill_and_reap().await;
                    continue;
                }
                Interrupted::Done(Err(StartError::Closed)) => {
                    // Our pipe to the child broke: it is exiting. Its exit status says more
                    // than "connection closed".
                    let status = inst.exited_within(crate::instance::DRAIN_SETTLE).await;
                    let reason = match status {
                        Some(st) => format!("{} {}", exit::describe(st), R::DURING_START),
                        None => format!("closed its stdin {}", R::DURING_START),
                    };
                    return self.start_failed(inst, &run, reason, false).await;
                }
                Interrupted::Done(Err(StartError::Failed(reason))) => {
                    return self.start_failed(inst, &run, reason, false).await;
                }
                Interrupted::Done(Err(StartError::Permanent(reason))) => {
                    return self.start_failed(inst, &run, reason, true).await;
                }
                Interrupted::Exited(status) => {
                    let reason = match status {
                        Some(st) => format!("{} {}", exit::describe(st), R::DURING_START),
                        None => format!("exited {}", R::DURING_START),
                    };
                    return self.start_failed(inst, &run, reason, false).await;
                }
                Interrupted::Control(msg) => return self.stop(inst, &run, msg).await,
            }
        };

        let startup_ms = inst.age().as_millis() as u64;
        self.set_phase(Phase::Ready { pid }, |l| l.last_error = None);
        let mut ev = unit.event(Happened::Ready).with("pid", pid);
        ev.data.extend(ready);
        unit.emit(ev.with("startup_ms", startup_ms));

        // Serving, until it dies, must be killed, or is stopped.
        let ready_at = Instant::now();
        let outcome = self.race(&mut inst, run.serve()).await;
        let (reason, status) = match outcome {
            Interrupted::Done(reason) => {
                run.close(&format!(
                    "{} '{}' {reason}",
                    unit.family.as_str(),
                    unit.name
                ));
                let status = inst.kill_and_reap().await;
                (reason, status)
            }
            Interrupted::Exited(status) => {
                let reason = status.map_or_else(|| "exited".to_owned(), exit::describe);
                (reason, status)
            }
            Interrupted::Control(msg) => return self.stop(inst, &run, msg).await,
        };
        self.died_after_ready(inst, &run, reason, status, ready_at.elapsed())
            .await
    }

    /// Nothing was spawned: a start failure, permanent unless the system was short of
    /// descriptors or memory (then restarted with backoff like any start failure).
    fn spawn_failed(&self, failure: SpawnFailure) -> Ended {
        let (reason, permanent) = match failure {
            SpawnFailure::Permanent(reason) => (reason, true),
            SpawnFailure::Spawn(e) => (e.to_string(), !e.is_temporary()),
        };
        Ended::Died(Death {
            event: self
                .unit()
                .event(Happened::StartFailed)
                .with("permanent", permanent),
            reason,
            status: None,
            uptime: Duration::ZERO,
            permanent,
        })
    }

    async fn start_failed(
        &self,
        mut inst: Instance,
        run: &R::Run,
        reason: String,
        permanent: bool,
    ) -> Ended {
        let unit = self.unit();
        run.close(&format!(
            "{} '{}' {reason}",
            unit.family.as_str(),
            unit.name
        ));
        let status = inst.kill_and_reap().await;
        Ended::Died(Death {
            event: unit
                .event(Happened::StartFailed)
                .with("permanent", permanent)
                .with("pid", inst.pid()),
            reason,
            status,
            uptime: Duration::ZERO,
            permanent,
        })
    }

    async fn died_after_ready(
        &self,
        mut inst: Instance,
        run: &R::Run,
        reason: String,
        status: Option<ExitStatus>,
        uptime: Duration,
    ) -> Ended {
        let unit = self.unit();
        run.close(&format!(
            "{} '{}' {reason}",
            unit.family.as_str(),
            unit.name
        ));
        // The leader is gone; what it left in its group must not outlive it.
        inst.kill_and_reap().await;
        let clean = status.is_some_and(|s| s.success());
        let what = if clean {
            Happened::Exited
        } else {
            Happened::Crashed
        };
        Ended::Died(Death {
            event: unit
                .event(what)
                .with("pid", inst.pid())
                .with("uptime_ms", uptime.as_millis() as u64),
            reason,
            status,
            uptime,
            permanent: false,
        })
    }

    /// A requested stop (or restart, or shutdown): graceful, and no death event.
    async fn stop(&self, mut inst: Instance, run: &R::Run, msg: Option<Control>) -> Ended {
        let unit = self.unit();
        run.close(&format!(
            "{} '{}' is stopping",
            unit.family.as_str(),
            unit.name
        ));
        let stdin_closed = run.close_stdin();
        inst.stop(self.role.policy().stop_grace, stdin_closed).await;
        drop(inst);
        self.stopped(msg)
    }

    /// Settles a requested stop: the phase, then the one `*.stopped` event.
    fn stopped(&self, msg: Option<Control>) -> Ended {
        let unit = self.unit();
        let (reason, phase) = match &msg {
            Some(Control::Restart(_)) => ("restart", Phase::Starting { pid: None }),
            None => ("shutdown", Phase::Stopped),
            _ => ("requested", Phase::Stopped),
        };
        self.set_phase(phase, |_| {});
        unit.emit(unit.event(Happened::Stopped).with("reason", reason));
        match msg {
            Some(Control::Stop(ack)) => Ended::Stopped(ack),
            Some(Control::Restart(ack) | Control::Start(ack)) => Ended::Restart(ack),
            None => Ended::Shutdown,
        }
    }

    /// Reports an unrequested death — its phase first, then its one event — and applies
    /// the restart policy. `Some(again)`: whether to run again; `None`: shut down.
    async fn after_death(&mut self, death: Death) -> Option<bool> {
        let policy = self.role.policy();
        let clean = death.status.is_some_and(|s| s.success());
        let restart = !death.permanent
            && match policy.restart {
                RestartPolicy::Never => false,
                RestartPolicy::OnFailure => !clean,
                RestartPolicy::Always => true,
            };
        let needs_auth = self.role.needs_auth(death.status);
        let next = if needs_auth.is_some() {
            Phase::NeedsAuth
        } else if !restart {
            if clean { Phase::Stopped } else { Phase::Failed }
        } else {
            self.next_attempt(death.uptime, policy.crash_loop)
        };
        let mut death = death;
        if let Some(why) = needs_auth {
            death.reason = why;
            death.event = death.event.with("needs_auth", true);
        }
        let tail = self.role.tail(EVENT_TAIL_LINES);
        let unit = self.unit();
        let mut ev = death.event.with("reason", death.reason.clone());
        if let Some(st) = death.status {
            ev.data.extend(exit::fields(st));
        }
        let recent = self.crashes.len() as u32;
        self.set_phase(next, |l| {
            if matches!(next, Phase::Backoff { .. }) {
                l.last_crash = Some(Crash {
                    at: SystemTime::now(),
                    reason: death.reason.clone(),
                    recent,
                });
            }
            l.last_error = Some(death.reason);
            l.last_tail = tail.clone();
            if let Some(st) = death.status {
                l.last_exit = Some(ExitInfo::of(st));
            }
        });
        unit.emit(ev.with("stderr_tail", tail));
        let delay = match next {
            Phase::GaveUp { crashes } => {
                let window = policy.crash_loop.window;
                unit.emit(
                    unit.event(Happened::GaveUp)
                        .with("crashes", crashes)
                        .with("window_s", window.as_secs())
                        .with(
                            "reason",
                            format!(
                                "{crashes} crashes within {}; fix the {}, then `corral start {}`",
                                humanize(window),
                                unit.family.as_str(),
                                unit.name
                            ),
                        ),
                );
                return Some(false);
            }
            Phase::Backoff { until, attempt } => {
                let delay = until
                    .duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO);
                unit.emit(
                    unit.event(Happened::Restarting)
                        .with("attempt", attempt)
                        .with("delay_ms", backoff(attempt - 1).as_millis() as u64),
                );
                delay
            }
            _ => return Some(false),
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            msg = self.ctl.recv() => match msg {
                Some(Control::Stop(ack)) => {
                    self.set_phase(Phase::Stopped, |_| {});
                    let _ = ack.send(());
                    return Some(false);
                }
                Some(Control::Start(ack) | Control::Restart(ack)) => {
                    self.reset_breaker();
                    let _ = ack.send(());
                }
                None => return None,
            },
            _ = self.cancel.cancelled() => return None,
        }
        self.unit().life.send_modify(|l| l.restarts += 1);
        Some(true)
    }

    /// The crash-loop breaker and the backoff: gives up after `max` deaths within
    /// `window`, else waits 1 s doubling to 60 s.
    fn next_attempt(&mut self, uptime: Duration, crash_loop: CrashLoop) -> Phase {
        let now = Instant::now();
        let window = crash_loop.window;
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
        if self.crashes.len() as u32 >= crash_loop.max {
            return Phase::GaveUp {
                crashes: self.crashes.len() as u32,
            };
        }
        let delay = backoff(self.attempt);
        self.attempt += 1;
        Phase::Backoff {
            attempt: self.attempt,
            until: SystemTime::now() + delay,
        }
    }
}

/// The delay before automatic restart number `attempt + 1`.
fn backoff(attempt: u32) -> Duration {
    BACKOFF_MIN
        .saturating_mul(1u32 << attempt.min(6))
        .min(BACKOFF_MAX)
}

/// Starts the actor of `role`: the mailbox its handle sends to, and the task the
/// supervisor keeps (and awaits at shutdown).
pub(crate) fn start<R: Role>(
    role: Arc<R>,
    cancel: CancellationToken,
    autostart: bool,
) -> (mpsc::UnboundedSender<Control>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        tx,
        tokio::spawn(Actor::new(role, rx, cancel).run(autostart)),
    )
}

/// A command to an actor, sent and acknowledged.
pub(crate) async fn send(
    ctl: &mpsc::UnboundedSender<Control>,
    make: fn(oneshot::Sender<()>) -> Control,
) {
    let (tx, rx) = oneshot::channel();
    if ctl.send(make(tx)).is_ok() {
        let _ = rx.await;
    }
}
