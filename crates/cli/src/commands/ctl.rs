//! Commands that talk to the running daemon: `ps`, `logs`, `restart`, `stop`, `start`,
//! `errors`.

use crate::project;
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use serde_json::Value;
use std::path::Path;
use tokio::io::AsyncBufReadExt;

pub async fn ps(config: Option<&Path>, json: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let data = project::daemon_request(&cfg, &Request::Ps).await?;
    if json {
        println!("{data}");
        return Ok(());
    }
    let d = &data["daemon"];
    println!(
        "daemon pid {}  endpoint {}  agents {}",
        d["pid"],
        d["endpoint"].as_str().unwrap_or(""),
        d["agents"]
    );
    let mut rows = vec![vec![
        "NAME".into(),
        "STATE".into(),
        "PID".into(),
        "UPTIME".into(),
        "RESTARTS".into(),
        "TOOLS".into(),
        "LAST ERROR".into(),
    ]];
    let color = output::color_stdout();
    for s in data["servers"].as_array().into_iter().flatten() {
        let state = s["state"].as_str().unwrap_or("?");
        let painted = match (color, state) {
            (false, _) => state.to_owned(),
            (true, "ready") => format!("\x1b[32m{state}\x1b[0m"),
            (true, "starting" | "backoff") => format!("\x1b[33m{state}\x1b[0m"),
            (true, _) => format!("\x1b[31m{state}\x1b[0m"),
        };
        rows.push(vec![
            s["name"].as_str().unwrap_or("").to_owned(),
            painted,
            s["pid"].as_u64().map_or("-".into(), |p| p.to_string()),
            s["uptime_s"].as_u64().map_or("-".into(), human_duration),
            s["restarts"].to_string(),
            s["tools"].to_string(),
            s["last_error"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    print!("{}", output::table(&rows));
    Ok(())
}

fn human_duration(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

pub async fn logs(
    config: Option<&Path>,
    name: &str,
    follow: bool,
    lines: usize,
    json: bool,
) -> CmdResult {
    let cfg = project::load(config)?;
    let req = Request::Logs {
        name: name.to_owned(),
        lines,
        follow,
    };
    let stream = corral_daemon::client::open(&project::paths(&cfg), &req)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    let mut reader = tokio::io::BufReader::new(stream).lines();
    let work = async {
        while let Ok(Some(line)) = reader.next_line().await {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v.get("ok") == Some(&Value::Bool(false)) {
                return Err(Failure::Op(
                    v["error"].as_str().unwrap_or("failed").to_owned(),
                ));
            }
            if json {
                println!("{line}");
            } else {
                println!("{}", v["line"].as_str().unwrap_or(""));
            }
        }
        Ok(())
    };
    tokio::select! {
        r = work => r,
        _ = project::interrupted() => Ok(()),
    }
}

pub async fn lifecycle(config: Option<&Path>, verb: &str, name: &str, json: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let req = match verb {
        "restart" => Request::Restart {
            name: name.to_owned(),
        },
        "stop" => Request::Stop {
            name: name.to_owned(),
        },
        _ => Request::Start {
            name: name.to_owned(),
        },
    };
    let row = project::daemon_request(&cfg, &req).await?;
    if json {
        println!("{row}");
    } else {
        println!(
            "{name}: {}{}",
            row["state"].as_str().unwrap_or("?"),
            row["pid"]
                .as_u64()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

pub async fn reload(config: Option<&Path>, json: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let data = project::daemon_request(&cfg, &Request::Reload).await?;
    if json {
        println!("{data}");
        return Ok(());
    }
    let list = |k: &str| -> String {
        let names: Vec<&str> = data[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if names.is_empty() {
            "-".into()
        } else {
            names.join(", ")
        }
    };
    println!("started:   {}", list("added"));
    println!("restarted: {}", list("restarted"));
    println!("stopped:   {}", list("removed"));
    println!("unchanged: {}", list("unchanged"));
    for w in data["warnings"].as_array().into_iter().flatten() {
        eprintln!("corral: {}", w.as_str().unwrap_or(""));
    }
    Ok(())
}

pub async fn errors(_config: Option<&Path>, _json: bool) -> CmdResult {
    Err(Failure::Op(
        "`corral errors` (one deduplicated view of everything broken) is not in this version yet; \
         `corral events` shows crashes with their stderr tails, `corral logs NAME` the rest"
            .into(),
    ))
}
