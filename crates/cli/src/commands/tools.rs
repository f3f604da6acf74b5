//! `corral tools [SERVER]`: start the servers, list their tools, stop them.

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_config::ToolPrefix;
use corral_events::EventBus;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub async fn run(config: Option<&Path>, server: Option<&str>, json: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, server)?;
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
        for tool in h
            .tools()
            .iter()
            .filter(|t| h.config().tools.permits(&t.name))
        {
            let name = match cfg.gateway.tool_prefix {
                ToolPrefix::Always => format!("{}__{}", h.name(), tool.name),
                ToolPrefix::Never => tool.name.clone(),
            };
            if json {
                let mut v: Value = serde_json::from_str(tool.raw.get()).unwrap_or(Value::Null);
                if let Value::Object(m) = &mut v {
                    m.insert("name".into(), name.into());
                    m.insert("server".into(), h.name().into());
                    m.insert("tool".into(), tool.name.clone().into());
                }
                listing.push(v);
            } else {
                let desc = tool
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("");
                rows.push(vec![name, desc.to_owned()]);
            }
        }
    }
    run.stop().await;

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
