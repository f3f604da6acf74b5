//! The dev process family: their rows in `ps`, `run` (an ad-hoc process), and `start` /
//! `stop` / `restart` of one (the `servers` family hands a name over when it is not a
//! server's).

use super::State;
use crate::protocol::{INVALID, NAME_TAKEN, Reply};
use corral_config::{ProcessCommand, ProcessConfig};
use corral_events::Source;
use corral_events::rows::ProcessRow;
use corral_supervisor::{Life, ProcessHandle, State as Unit};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Every process's row for `ps`; `None` when there is none (the field is left out).
pub(crate) fn rows(state: &State) -> Option<Vec<ProcessRow>> {
    let list = state.processes.list();
    (!list.is_empty()).then(|| list.iter().map(|h| row(state, h)).collect())
}

/// A process's row, with the message of its newest alert of the current run (a restart
/// begins with none: the old run's are history, in `corral errors --since`).
pub(crate) fn row(state: &State, h: &ProcessHandle) -> ProcessRow {
    let source = Source::Process(h.name().to_owned()).to_string();
    let run_started = h.watch().borrow().run_started;
    let last = state
        .processes
        .alerts()
        .and_then(|a| a.latest(&source))
        .filter(|a| run_started.is_none_or(|t| a.last_seen >= t));
    let root = state.config.read().unwrap().root.clone();
    h.row(last.map(|a| alert_text(&a, &root)))
}

/// An alert as one line: `ValueError: bad (app.py:12)`, its file relative to the
/// project as `corral errors` shows it.
pub(crate) fn alert_text(a: &corral_alerts::Alert, root: &std::path::Path) -> String {
    match corral_gateway::tools::errors::alert_location(a, Some(root)) {
        Some(loc) => format!("{} ({loc})", a.message),
        None => a.message.clone(),
    }
}

/// `start`: starts a stopped, failed or given-up process; answers once it is ready (or
/// ended, or still waiting at the deadline).
pub(crate) async fn start(state: &State, h: &ProcessHandle) -> Reply {
    if h.state() == Unit::Ready {
        return Reply::ok_of(&row(state, h));
    }
    let since = SystemTime::now();
    h.start().await;
    settle(state, h, since).await
}

/// `restart`: stops the process gracefully and starts it again.
pub(crate) async fn restart(state: &State, h: &ProcessHandle) -> Reply {
    let since = SystemTime::now();
    h.restart().await;
    settle(state, h, since).await
}

/// `stop`: stops the process gracefully; answers with its row.
pub(crate) async fn stop(state: &State, h: &ProcessHandle) -> Reply {
    h.stop().await;
    Reply::ok_of(&row(state, h))
}

/// Whether `life` is a settled outcome of a command sent at `since`: ready, or ended.
fn settled(life: &Life, since: SystemTime) -> bool {
    life.since >= since
        && matches!(
            life.state(),
            Unit::Ready | Unit::Stopped | Unit::Failed | Unit::GaveUp | Unit::Backoff
        )
}

/// Waits (bounded by the readiness timeout) for a (re)started process to settle, and
/// reports its row, or why it did not start. A process still waiting for a dependency
/// at the deadline is reported as it is (its row says what it waits for).
async fn settle(state: &State, h: &ProcessHandle, since: SystemTime) -> Reply {
    let timeout = h
        .config()
        .ready
        .as_ref()
        .map_or(corral_config::DEFAULT_READY_TIMEOUT, |r| r.timeout)
        + Duration::from_secs(2);
    let mut watch = h.watch();
    let _ = tokio::time::timeout(timeout, watch.wait_for(|l| settled(l, since))).await;
    let life = h.watch().borrow().clone();
    match life.state() {
        Unit::Failed | Unit::GaveUp | Unit::Backoff if life.since >= since => Reply::err(format!(
            "process '{}' did not start: {}; `corral logs {}` shows its output",
            h.name(),
            life.last_error.as_deref().unwrap_or("it ended"),
            h.name()
        )),
        _ => Reply::ok_of(&row(state, h)),
    }
}

/// Whether `name` can name a process or a proxy (`what`): it becomes a file name and an
/// event source, so the rule is the config's.
pub(crate) fn name_problem(what: &str, name: &str) -> Option<String> {
    corral_config::name_problem(what, name)
}

/// `run`: starts an ad-hoc process (restart `never`, no readiness check, the daemon's
/// environment) and answers once it has a pid (or ended already) with its row and
/// `log`, the path of its log file. One argument is a shell line (`sh -c`), more are a
/// program and its arguments. A name in use is refused; a process that cannot be
/// spawned is forgotten again, so the name stays free.
pub(crate) async fn run(state: &State, name: &str, command: Vec<String>, cwd: PathBuf) -> Reply {
    if let Some(problem) = name_problem("process", name) {
        return Reply::err_code(INVALID, problem);
    }
    if state.server(name).is_some() {
        return Reply::err_code(
            NAME_TAKEN,
            format!("'{name}' is a server of this project; give the process another name"),
        );
    }
    let command = match command.len() {
        0 => return Reply::err_code(INVALID, "no command: `corral run NAME -- CMD…`"),
        1 => ProcessCommand::Shell(command.into_iter().next().expect("one")),
        _ => ProcessCommand::Argv(command),
    };
    let cfg = ProcessConfig::ad_hoc(name, command, cwd);
    let h = match state.processes.add(cfg, Vec::new()) {
        Ok(h) => h,
        Err(e) => return Reply::err_code(NAME_TAKEN, e),
    };
    let mut watch = h.watch();
    let spawned =
        |l: &Life| l.runs > 0 || matches!(l.state(), Unit::Failed | Unit::GaveUp | Unit::Backoff);
    let _ = tokio::time::timeout(Duration::from_secs(10), watch.wait_for(spawned)).await;
    let life = h.watch().borrow().clone();
    if life.runs == 0 {
        let why = life
            .last_error
            .clone()
            .unwrap_or_else(|| "it did not start".into());
        state.processes.remove(name).await;
        return Reply::err(format!("cannot run process '{name}': {why}"));
    }
    let mut data = serde_json::to_value(row(state, &h)).expect("rows serialize");
    if let Value::Object(m) = &mut data {
        m.insert("log".into(), h.log_path().display().to_string().into());
    }
    Reply::ok(data)
}
