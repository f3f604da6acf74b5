//! `corral run NAME -- CMD…`: an ad-hoc dev process, in the daemon (`run` request) or,
//! with `--standalone`, in the foreground of this command.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_config::{Config, ProcessCommand, ProcessConfig};
use corral_daemon::Request;
use corral_events::rows::ProcessRow;
use corral_events::{EventBus, Kind};
use corral_supervisor::{Life, State};
use std::path::Path;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

pub async fn run(
    config: Option<&Path>,
    name: &str,
    command: Vec<String>,
    follow: bool,
    standalone: bool,
    json: bool,
) -> CmdResult {
    let cfg = project::load(config)?;
    if command.is_empty() {
        return Err(Failure::Usage(
            "no command: `corral run NAME -- CMD…`".into(),
        ));
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    if standalone {
        return foreground(&cfg, name, command, cwd).await;
    }
    in_daemon(&cfg, name, command, cwd, follow, json).await
}

/// Starts the process in the daemon, says where it is, and with `follow` prints its log
/// as it grows until Ctrl-C.
async fn in_daemon(
    cfg: &Config,
    name: &str,
    command: Vec<String>,
    cwd: std::path::PathBuf,
    follow: bool,
    json: bool,
) -> CmdResult {
    let log = corral_supervisor::stderr::log_path(&cfg.state_dir.join("logs"), name);
    // From the log's end before the process starts: its first line is not missed.
    let mut follower = corral_supervisor::stderr::LogFollower::new(&log);
    let req = Request::Run {
        name: name.to_owned(),
        command,
        cwd,
    };
    let data = match project::daemon_request(cfg, &req).await {
        Ok(d) => d,
        Err(Failure::Op(msg)) if !project::daemon_running(cfg).await => {
            return Err(Failure::Op(format!(
                "{msg}; `corral up -d` starts the daemon, or `corral run --standalone {name} -- …` \
                 runs the process here"
            )));
        }
        Err(e) => return Err(e),
    };
    if json {
        println!("{data}");
    } else {
        let log_shown = data["log"].as_str().unwrap_or("").to_owned();
        let row: ProcessRow = project::reply_as(data)?;
        match (row.pid, &row.last_exit) {
            (Some(pid), _) => println!("{name}: started (pid {pid}); log {log_shown}"),
            (None, Some(exit)) => println!("{name}: exited already ({exit}); log {log_shown}"),
            (None, None) => println!("{name}: {}; log {log_shown}", row.state),
        }
    }
    if !follow {
        return Ok(());
    }
    let style = output::Style::stdout();
    let work = async {
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            for l in follower.poll() {
                println!("{}", style.shown(&l));
            }
        }
    };
    tokio::select! {
        () = work => {}
        _ = project::interrupted() => {
            eprintln!("corral: detached; '{name}' keeps running (`corral stop {name}` stops it)");
        }
    }
    Ok(())
}

/// Whether a run of the process is over: it ended (exited, crashed, or could not be
/// spawned), and it is not restarted (ad-hoc processes never are).
fn ended(l: &Life) -> bool {
    match l.state() {
        State::Failed | State::GaveUp => true,
        State::Stopped => l.runs > 0 || l.last_exit.is_some(),
        _ => false,
    }
}

/// `--standalone`: runs the process here, its output live on stderr (dimmed
/// `[process:NAME]` lines) with its alerts, until it ends (its exit code is ours) or
/// Ctrl-C / SIGTERM (it is stopped gracefully; exit 130).
async fn foreground(
    cfg: &Config,
    name: &str,
    command: Vec<String>,
    cwd: std::path::PathBuf,
) -> CmdResult {
    if cfg.servers.contains_key(name) {
        return Err(Failure::Usage(format!(
            "'{name}' is a server of {}; give the process another name",
            cfg.path.display()
        )));
    }
    let command = if command.len() == 1 {
        ProcessCommand::Shell(command.into_iter().next().expect("one"))
    } else {
        ProcessCommand::Argv(command)
    };
    let bus = EventBus::default();
    let mut events = bus.subscribe();
    let mut run = Standalone::start(
        cfg,
        Vec::new(),
        bus,
        Some(corral_supervisor::Console::stderr()),
    );
    let handle = match run
        .supervisor
        .add_process(ProcessConfig::ad_hoc(name, command, cwd))
    {
        Ok(h) => h,
        Err(e) => {
            run.stop().await;
            return Err(Failure::Usage(e));
        }
    };
    let style = output::Style::stderr();
    let printer = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) if ev.is(Kind::Alert) || ev.is(Kind::ProcessStartFailed) => {
                    eprintln!("{}", output::render_console_event(&ev, style, true));
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    let mut watch = handle.watch();
    let outcome = tokio::select! {
        r = watch.wait_for(ended) => r.map(|l| l.clone()).ok(),
        _ = project::interrupted() => None,
    };
    run.stop().await;
    // The last lines and alerts reach the console before we exit.
    tokio::time::sleep(Duration::from_millis(50)).await;
    printer.abort();
    let Some(life) = outcome else {
        return Err(Failure::Exit(130));
    };
    match life.last_exit {
        Some(e) => match (e.code, e.signal) {
            (Some(0), _) => Ok(()),
            (Some(code), _) => Err(Failure::Exit(u8::try_from(code).unwrap_or(1))),
            (None, Some(sig)) => Err(Failure::Exit(128u8.saturating_add(sig as u8))),
            (None, None) => Err(Failure::Exit(1)),
        },
        None => Err(Failure::Op(format!(
            "cannot run process '{name}': {}",
            life.last_error.as_deref().unwrap_or("it did not start")
        ))),
    }
}
