//! `corral tools [SERVER]`: start the servers, list their tools, stop them.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_events::EventBus;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub async fn run(
    config: Option<&Path>,
    server: Option<&str>,
    json: bool,
    standalone: bool,
) -> CmdResult {
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, server)?;
    if !standalone && project::daemon_running(&cfg).await {
        return via_daemon(&cfg, server, json).await;
    }
    let run = Standalone::start(&cfg, servers, EventBus::default(), None);
    let handles: Vec<_> = run.supervisor.servers().cloned().collect();
    let mut waits = tokio::task::JoinSet::new();
    for (i, h) in handles.iter().enumerate() {
        let h = h.clone();
        let limit = h.config().startup_timeout + Duration::from_secs(1);
        waits.spawn(async move { (i, h.wait_ready(limit).await.is_ok()) });
    }
    let mut ready = vec![false; handles.len()];
    let all = async {
        while let Some(Ok((i, ok))) = waits.join_next().await {
            ready[i] = ok;
        }
    };
    tokio::select! {
        _ = all => {}
        _ = project::interrupted() => {
            run.stop().await;
            return Err(Failure::Op("interrupted".into()));
        }
    }

    // The names the gateway routes (collisions under tool_prefix = "never" included).
    let catalog = corral_gateway::catalog::Catalog::build(
        handles.iter(),
        cfg.gateway.tool_prefix,
        cfg.gateway.builtin_tools,
    );
    let mut rows = Vec::new();
    let mut listing = Vec::new();
    let mut failures = Vec::new();
    for (h, ok) in handles.iter().zip(&ready) {
        if !ok {
            failures.push(format!(
                "server '{}' failed to start: {}",
                h.name(),
                h.failure_report()
            ));
            continue;
        }
        for tool in corral_gateway::catalog::listing(h, &catalog) {
            if json {
                listing.push(tool);
            } else {
                rows.push(row(&tool));
            }
        }
    }
    run.stop().await;
    if server.is_none() {
        // What `corral call` can also call (and suggests): Corral's own tools.
        for tool in corral_gateway::catalog::builtin_listing(&catalog) {
            if json {
                listing.push(tool);
            } else {
                rows.push(row(&tool));
            }
        }
    }

    if json {
        println!("{}", Value::Array(listing));
    } else {
        print!("{}", output::table(&rows));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::Op(failures.join("\n")))
    }
}

fn row(tool: &Value) -> Vec<String> {
    let desc = tool["description"]
        .as_str()
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("");
    // Names and descriptions come from the servers.
    let style = output::Style::stdout();
    vec![
        style
            .shown(tool["name"].as_str().unwrap_or(""))
            .into_owned(),
        style.shown(desc).into_owned(),
    ]
}

async fn via_daemon(cfg: &corral_config::Config, server: Option<&str>, json: bool) -> CmdResult {
    let data = project::daemon_request(
        cfg,
        &corral_daemon::Request::Tools {
            server: server.map(str::to_owned),
        },
    )
    .await?;
    let tools = data["tools"].as_array().cloned().unwrap_or_default();
    if json {
        println!("{}", Value::Array(tools));
    } else {
        let rows: Vec<Vec<String>> = tools.iter().map(row).collect();
        print!("{}", output::table(&rows));
    }
    let failures: Vec<String> = data["failed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "server '{}' failed to start: {}",
                f["server"].as_str().unwrap_or(""),
                f["error"].as_str().unwrap_or("")
            )
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::Op(failures.join("\n")))
    }
}
