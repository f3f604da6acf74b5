//! `corral errors`: the `get_errors` report for the person at the terminal, from the
//! daemon (every source); when none runs, from the journal the last one left (nothing
//! is started); with `--standalone`, from the servers started here for the one command
//! (dev processes and proxies run only in the daemon, and the answer says so).

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use corral_events::EventBus;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub async fn run(config: Option<&Path>, args: Value, json: bool, standalone: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let (text, colored, report) = if standalone {
        here(&cfg, &args).await?
    } else if project::daemon_running(&cfg).await {
        let mut data = project::daemon_request(&cfg, &Request::Errors { args }).await?;
        let s = |v: Value| v.as_str().unwrap_or_default().to_owned();
        (
            s(data["text"].take()),
            s(data["colored"].take()),
            data["report"].take(),
        )
    } else {
        journal(&cfg, &args).await?
    };
    if json {
        println!("{report}");
    } else if output::color_stdout() {
        print!("{colored}");
    } else {
        print!("{text}");
    }
    Ok(())
}

/// The report from the journal alone: no daemon runs, and nothing is started.
async fn journal(
    cfg: &corral_config::Config,
    args: &Value,
) -> Result<(String, String, Value), Failure> {
    let paths = project::paths(cfg);
    answer(cfg, &Default::default(), Some(&paths.journal), args).await
}

/// The report over `servers` (no processes or proxies: those run only in the daemon)
/// and the journal when given, as text, colored text and JSON.
async fn answer(
    cfg: &corral_config::Config,
    servers: &std::collections::BTreeMap<String, corral_supervisor::ServerHandle>,
    journal: Option<&Path>,
    args: &Value,
) -> Result<(String, String, Value), Failure> {
    let src = corral_gateway::tools::errors::Sources {
        servers,
        root: Some(&cfg.root),
        noise: &cfg.error_noise,
        processes: None,
        proxies: None,
        last_call: None,
        history: journal.map(|j| (j, None)),
    };
    let (report, raw) = corral_gateway::tools::errors::answer(&src, args)
        .await
        .map_err(Failure::Usage)?;
    Ok((report.text(), report.colored(), report.json(raw)))
}

/// Starts the servers, waits until each is ready or has failed, and reports.
async fn here(
    cfg: &corral_config::Config,
    args: &Value,
) -> Result<(String, String, Value), Failure> {
    let servers = project::select(cfg, None)?;
    let run = Standalone::start(cfg, servers, EventBus::default(), None);
    let handles: Vec<_> = run.supervisor.servers().cloned().collect();
    // They start in parallel; each wait is bounded by its server's start-up timeout.
    let settled = async {
        for h in &handles {
            let _ = h
                .wait_ready(h.config().startup_timeout + Duration::from_secs(1))
                .await;
        }
    };
    tokio::select! {
        _ = settled => {}
        _ = project::interrupted() => {
            run.stop().await;
            return Err(Failure::Op("interrupted".into()));
        }
    }
    let report = answer(cfg, &run.supervisor.handles(), None, args).await;
    run.stop().await;
    report
}
