//! A dev process (`npm run dev`, a watcher, a test runner) as a supervised unit: the
//! [`Role`] that spawns it and tells when it is ready, and the [`ProcessHandle`] the
//! daemon, the gateway and the CLI hold.
//!
//! The lifecycle is the shared actor's ([`crate::actor`]): the same process group,
//! death signal, guard, stop escalation, backoff, breaker and one event per death as an
//! MCP server. What is a process's own:
//!
//! - **Output.** Stdout and stderr (or the one pseudo-terminal, with `pty = true`) are
//!   drained into one byte-bounded [`OutputRing`], interleaved in arrival order, each
//!   line with its stream, time and run; into `.corral/logs/<name>.log` (a header
//!   starts each run); to the console, dimmed, as `[process:name]`; and through the
//!   alert scanner. Piped processes get the usual unbuffered variables
//!   ([`pty::unbuffered_env`]) so they print line by line.
//! - **Readiness.** Ready when spawned, or when its `ready` check passes: a line of this
//!   run matching a regex, a TCP port accepting, or an HTTP GET answering 2xx. A check
//!   that does not pass within its timeout is a start failure, restarted by policy.
//! - **Dependencies.** Before each run it waits until everything in `depends_on` (other
//!   processes, servers) is ready; the wait shows in its status.
//! - **Stdin** stays open and empty, as in a terminal nobody types into: some dev
//!   servers exit at EOF on stdin. A stop goes straight to SIGTERM.
//! - **A clean exit** after ready is `process.exited` (a test run that finished), not a
//!   crash; the restart policy still decides what follows.

use crate::actor::{
    self, Control, Family, Life, Phase, Policy, Role, Run, SpawnFailure, StartError, State, Unit,
};
use crate::instance::Instance;
use crate::lines::LineSink;
use crate::output::{Limit, OutputLine, OutputRing, Query, Stream};
use crate::pty::{self, PtyOutput};
use crate::spawn::SpawnSpec;
use crate::{Console, SupervisorOptions, ready};
use corral_config::redact::Redactor;
use corral_config::{ProcessConfig, ReadyCheck};
use corral_events::Event;
use corral_events::rows::{LastExit, ProcessRow};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Something a process waits for before each run: a server or a process, ready.
#[derive(Clone)]
pub struct Dependency {
    /// `server 'db'`, `process 'api'`.
    pub label: String,
    pub life: watch::Receiver<Life>,
}

struct Shared {
    unit: Unit,
    cfg: ProcessConfig,
    ring: OutputRing,
    /// The ring's sequence number when the current run was spawned: its lines follow.
    run_start: AtomicU64,
    /// A pseudo-terminal spawned with the run, until the run is attached to it.
    pty: Mutex<Option<PtyOutput>>,
    deps: Vec<Dependency>,
    /// What the process is waiting for before it can start, while it waits.
    waiting_for: Mutex<Option<String>>,
}

impl Shared {
    fn redactor(&self) -> Redactor {
        Redactor::new(&self.cfg.secrets)
    }

    /// The command as events and listings show it: as typed, redacted.
    fn command_shown(&self) -> String {
        self.redactor().text(&self.cfg.command.to_string())
    }

    /// The lines of the current run, last `n`.
    fn run_tail(&self, n: usize) -> Vec<String> {
        let query = Query {
            after_seq: Some(self.run_start.load(Ordering::Relaxed)),
            limit: Limit::Last(n),
            ..Query::default()
        };
        self.ring
            .query(&query)
            .into_iter()
            .map(|l| l.text)
            .collect()
    }
}

impl Role for Shared {
    type Run = ProcessRun;
    const DURING_START: &'static str = "before it was ready";

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

    async fn prerequisites(&self) {
        for dep in &self.deps {
            let mut life = dep.life.clone();
            if life.borrow().state() == State::Ready {
                continue;
            }
            *self.waiting_for.lock().unwrap() = Some(dep.label.clone());
            let _ = life.wait_for(|l| l.state() == State::Ready).await;
        }
        *self.waiting_for.lock().unwrap() = None;
    }

    fn spawn(&self) -> Result<Instance, SpawnFailure> {
        self.run_start
            .store(self.ring.latest_seq(), Ordering::Relaxed);
        let (program, args) = self.cfg.command.program_and_args();
        let env = effective_env(&self.cfg);
        let spec = SpawnSpec {
            command: program,
            args: &args,
            env: &env,
            cwd: &self.cfg.cwd,
        };
        let tag = self.unit.source().to_string();
        if self.cfg.pty {
            let (child, out) = pty::spawn(&spec, &tag).map_err(SpawnFailure::Spawn)?;
            *self.pty.lock().unwrap() = Some(out);
            Ok(Instance::adopt(child, &tag, &self.unit.contain))
        } else {
            Instance::spawn(&spec, &tag, &self.unit.contain).map_err(SpawnFailure::Spawn)
        }
    }

    fn starting_fields(&self, ev: Event) -> Event {
        ev.with("command", self.command_shown())
            .with("pty", self.cfg.pty)
    }

    fn attach(self: &Arc<Self>, inst: &mut Instance) -> ProcessRun {
        let run = self.unit.life.borrow().runs;
        let prefix = format!("[process:{}] ", self.unit.name);
        let sink = |stream| {
            let scanned = match stream {
                Stream::Stderr => corral_alerts::Stream::Stderr,
                Stream::Stdout | Stream::Pty => corral_alerts::Stream::Stdout,
            };
            OutputSink {
                shared: self.clone(),
                run,
                stream,
                redactor: self.redactor(),
                console: self.unit.console.clone(),
                prefix: prefix.clone(),
                alerts: self.unit.alert_tap(scanned, self.redactor()),
                batch: Vec::new(),
            }
        };
        match self.pty.lock().unwrap().take() {
            Some(out) => {
                let sink = sink(Stream::Pty);
                inst.drain(drain(out, sink));
            }
            None => {
                let stdout = inst.take_stdout().expect("stdout piped");
                let stderr = inst.take_stderr().expect("stderr piped");
                let out_sink = sink(Stream::Stdout);
                inst.drain(drain(stdout, out_sink));
                let err_sink = sink(Stream::Stderr);
                inst.drain(drain(stderr, err_sink));
            }
        }
        ProcessRun {
            shared: self.clone(),
            _stdin: inst.take_stdin(),
            cancel: CancellationToken::new(),
        }
    }

    fn tail(&self, n: usize) -> Vec<String> {
        self.run_tail(n)
    }
}

async fn drain(reader: impl tokio::io::AsyncRead + Unpin, mut sink: OutputSink) {
    crate::lines::pump(reader, crate::output::MAX_LINE, &mut sink).await;
}

/// Where one stream of a process goes: the ring, the log, the console, the scanner.
struct OutputSink {
    shared: Arc<Shared>,
    run: u32,
    stream: Stream,
    redactor: Redactor,
    console: Option<Console>,
    prefix: String,
    alerts: Option<crate::alerts::Tap>,
    /// The lines of the current read, for the ring.
    batch: Vec<String>,
}

impl LineSink for OutputSink {
    fn line(&mut self, line: String) {
        let line = match self.redactor.line(&line) {
            std::borrow::Cow::Borrowed(_) => line,
            std::borrow::Cow::Owned(redacted) => redacted,
        };
        if let Some(log) = self.shared.unit.log.lock().unwrap().as_mut() {
            log.write_line("", &line);
        }
        if let Some(console) = &self.console {
            console.dim_line(&self.prefix, &line);
        }
        self.batch.push(line);
    }

    fn chunk(&mut self, bytes: &[u8]) {
        if let Some(tap) = &mut self.alerts {
            tap.chunk(bytes);
        }
    }

    /// The read's lines go into the ring together, and the log is flushed once.
    fn read_done(&mut self) {
        let now = SystemTime::now();
        self.shared
            .ring
            .push_batch(self.run, self.stream, &mut self.batch, now);
        if let Some(log) = self.shared.unit.log.lock().unwrap().as_mut() {
            log.flush();
        }
    }

    fn end(&mut self) {
        self.read_done();
    }
}

/// One run of a process.
pub(crate) struct ProcessRun {
    shared: Arc<Shared>,
    /// Held open, never written: EOF on stdin ends some dev servers.
    _stdin: Option<ChildStdin>,
    /// Ends the readiness check with the run.
    cancel: CancellationToken,
}

impl Run for ProcessRun {
    async fn start(&mut self) -> Result<Map<String, Value>, StartError> {
        let mut fields = Map::new();
        let Some(check) = &self.shared.cfg.ready else {
            fields.insert("check".into(), "none".into());
            return Ok(fields);
        };
        let kind = match &check.check {
            ReadyCheck::Log(_) => "log",
            ReadyCheck::Tcp(_) => "tcp",
            ReadyCheck::Http(_) => "http",
        };
        fields.insert("check".into(), kind.into());
        let after_seq = self.shared.run_start.load(Ordering::Relaxed);
        let outcome = ready::wait_ready(check, &self.shared.ring, after_seq, &self.cancel).await;
        match outcome {
            ready::Outcome::Ready { after } => {
                fields.insert("ready_ms".into(), (after.as_millis() as u64).into());
                Ok(fields)
            }
            ready::Outcome::Invalid { .. } => Err(StartError::Permanent(outcome.to_string())),
            ready::Outcome::TimedOut { .. } | ready::Outcome::Cancelled => {
                Err(StartError::Failed(outcome.to_string()))
            }
        }
    }

    async fn serve(&mut self) -> String {
        // Nothing to watch but its exit, which the actor does.
        std::future::pending().await
    }

    fn close(&self, _reason: &str) {
        self.cancel.cancel();
    }

    fn close_stdin(&self) -> bool {
        false
    }
}

/// A snapshot of a process.
#[derive(Debug, Clone)]
pub struct ProcessStatus {
    pub life: Life,
    /// What it waits for before it can start, while it waits.
    pub waiting_for: Option<String>,
}

/// A cloneable handle to one process's actor.
#[derive(Clone)]
pub struct ProcessHandle {
    shared: Arc<Shared>,
    ctl: mpsc::UnboundedSender<Control>,
}

impl ProcessHandle {
    /// Starts the actor for `cfg`; the process starts at once when `autostart` (after
    /// its dependencies are ready).
    pub(crate) fn spawn(
        cfg: ProcessConfig,
        deps: Vec<Dependency>,
        opts: &SupervisorOptions,
        cancel: CancellationToken,
    ) -> (ProcessHandle, tokio::task::JoinHandle<()>) {
        let autostart = cfg.autostart;
        let unit = Unit::new(&cfg.name, Family::Process, opts, cfg.quiet, autostart);
        let shared = Arc::new(Shared {
            unit,
            ring: OutputRing::new(cfg.output_ring),
            cfg,
            run_start: AtomicU64::new(0),
            pty: Mutex::new(None),
            deps,
            waiting_for: Mutex::new(None),
        });
        let (ctl, task) = actor::start(shared.clone(), cancel, autostart);
        (ProcessHandle { shared, ctl }, task)
    }

    pub fn name(&self) -> &str {
        &self.shared.unit.name
    }

    pub fn config(&self) -> &ProcessConfig {
        &self.shared.cfg
    }

    /// What others wait on when they depend on this process.
    pub fn dependency(&self) -> Dependency {
        Dependency {
            label: format!("process '{}'", self.name()),
            life: self.watch(),
        }
    }

    pub fn status(&self) -> ProcessStatus {
        ProcessStatus {
            life: self.shared.unit.life.borrow().clone(),
            waiting_for: self.shared.waiting_for.lock().unwrap().clone(),
        }
    }

    pub fn state(&self) -> State {
        self.shared.unit.life.borrow().state()
    }

    /// A receiver that sees every lifecycle change.
    pub fn watch(&self) -> watch::Receiver<Life> {
        self.shared.unit.life.subscribe()
    }

    /// The process's row in `ps`. `last_alert` is the message of its newest alert.
    pub fn row(&self, last_alert: Option<String>) -> ProcessRow {
        let s = self.status();
        let life = &s.life;
        let uptime_s = match life.phase {
            Phase::Ready { .. } => SystemTime::now()
                .duration_since(life.since)
                .ok()
                .map(|d| d.as_secs()),
            _ => None,
        };
        ProcessRow {
            name: life.name.clone(),
            state: life.state().as_str().to_owned(),
            pid: life.pid(),
            uptime_s,
            restarts: life.restarts,
            ready: life.state() == State::Ready,
            last_exit: life.last_exit.map(|e| LastExit {
                code: e.code,
                signal: e.signal,
            }),
            last_alert,
            command: self
                .shared
                .redactor()
                .text(&self.shared.cfg.command.to_string()),
            waiting_for: s.waiting_for,
            last_error: life.last_error.clone(),
            ..ProcessRow::default()
        }
    }

    /// Lines of the output ring that `query` asks for.
    pub fn output(&self, query: &Query) -> Vec<OutputLine> {
        self.shared.ring.query(query)
    }

    /// The ring's newest sequence number: lines after it are new.
    pub fn latest_seq(&self) -> u64 {
        self.shared.ring.latest_seq()
    }

    /// Waits for a line after `after_seq` that `query` matches, at most `timeout`.
    pub async fn wait_output(
        &self,
        after_seq: u64,
        query: &Query,
        timeout: Duration,
    ) -> Option<OutputLine> {
        tokio::time::timeout(timeout, self.shared.ring.wait_for(after_seq, query))
            .await
            .ok()
    }

    /// The log file of this process.
    pub fn log_path(&self) -> &std::path::Path {
        &self.shared.unit.log_path
    }

    /// Starts a stopped, failed or given-up process; returns once the actor took it.
    pub async fn start(&self) {
        actor::send(&self.ctl, Control::Start).await
    }

    /// Stops the process gracefully; returns once it is gone.
    pub async fn stop(&self) {
        actor::send(&self.ctl, Control::Stop).await
    }

    /// Stops and starts the process again.
    pub async fn restart(&self) {
        actor::send(&self.ctl, Control::Restart).await
    }
}

/// The environment a process gets on top of the parent's: its `env`, and (on a pipe)
/// the unbuffered variables it does not set itself.
fn effective_env(cfg: &ProcessConfig) -> BTreeMap<String, String> {
    let mut env = cfg.env.clone();
    if !cfg.pty {
        for (k, v) in pty::unbuffered_env() {
            env.entry(k.to_owned()).or_insert_with(|| v.to_owned());
        }
    }
    env
}
