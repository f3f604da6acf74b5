//! Commands that talk to the running daemon: `ps`, `logs`, `restart`, `stop`, `start`,
//! `errors`.

use crate::project;
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use corral_daemon::client::ClientError;
use corral_events::rows::PsReply;
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
    let reply: PsReply = project::reply_as(data)?;
    let d = &reply.daemon;
    println!(
        "daemon pid {}  endpoint {}  agents {}",
        d.pid,
        d.endpoint.as_deref().unwrap_or("none"),
        d.agents
    );
    super::up::warn_of(d);
    print!("{}", ps_tables(&reply, output::color_stdout()));
    Ok(())
}

/// The tables `corral ps` prints under the daemon's line: the servers, and — when the
/// daemon runs dev processes or proxies — those after them.
fn ps_tables(reply: &PsReply, color: bool) -> String {
    let shown = |s: &Option<String>| {
        output::Style::stdout()
            .shown(s.as_deref().unwrap_or(""))
            .into_owned()
    };
    let mut rows = vec![vec![
        "NAME".into(),
        "STATE".into(),
        "PID".into(),
        "UPTIME".into(),
        "RESTARTS".into(),
        "TOOLS".into(),
        "LAST ERROR".into(),
    ]];
    for s in &reply.servers {
        rows.push(vec![
            s.name.clone(),
            painted(&s.state, color),
            s.pid.map_or("-".into(), |p| p.to_string()),
            s.uptime_s.map_or("-".into(), human_duration),
            s.restarts.to_string(),
            s.tools.to_string(),
            shown(&s.last_error),
        ]);
    }
    let processes = reply.processes.as_deref().unwrap_or_default();
    let proxies = reply.proxies.as_deref().unwrap_or_default();
    // The servers' table, unless there are none and something else to show.
    let mut tables = Vec::new();
    if !reply.servers.is_empty() || (processes.is_empty() && proxies.is_empty()) {
        tables.push(output::table(&rows));
    }
    if !processes.is_empty() {
        tables.push(process_table(processes, color, &shown));
    }
    if !proxies.is_empty() {
        let mut rows = vec![vec![
            "PROXY".into(),
            "URL".into(),
            "TARGET".into(),
            "UPTIME".into(),
            "REQUESTS".into(),
            "FAILED".into(),
            "BROWSER ERRORS".into(),
        ]];
        for p in proxies {
            rows.push(vec![
                p.name.clone(),
                p.url.clone(),
                p.target.clone(),
                human_duration(p.uptime_s),
                p.requests.to_string(),
                p.errors.to_string(),
                p.browser_errors.to_string(),
            ]);
        }
        tables.push(output::table(&rows));
    }
    tables.join("\n")
}

fn process_table(
    processes: &[corral_events::rows::ProcessRow],
    color: bool,
    shown: &dyn Fn(&Option<String>) -> String,
) -> String {
    let mut rows = vec![vec![
        "PROCESS".into(),
        "STATE".into(),
        "PID".into(),
        "UPTIME".into(),
        "RESTARTS".into(),
        "READY".into(),
        "LAST EXIT".into(),
        "LAST ALERT".into(),
    ]];
    for p in processes {
        // What it waits for belongs to its state: `starting (waiting for server 'db')`.
        let state = match &p.waiting_for {
            Some(w) => format!(
                "{} (waiting for {})",
                painted(&p.state, color),
                shown(&Some(w.clone()))
            ),
            None => painted(&p.state, color),
        };
        rows.push(vec![
            p.name.clone(),
            state,
            p.pid.map_or("-".into(), |p| p.to_string()),
            p.uptime_s.map_or("-".into(), human_duration),
            p.restarts.to_string(),
            if p.ready { "yes" } else { "no" }.into(),
            p.last_exit.as_ref().map_or("-".into(), ToString::to_string),
            shown(&p.last_alert),
        ]);
    }
    output::table(&rows)
}

/// A state, green when all is well, yellow on the way, red otherwise.
fn painted(state: &str, color: bool) -> String {
    match (color, state) {
        (false, _) => state.to_owned(),
        (true, "ready" | "running") => format!("\x1b[32m{state}\x1b[0m"),
        (true, "starting" | "backoff") => format!("\x1b[33m{state}\x1b[0m"),
        (true, _) => format!("\x1b[31m{state}\x1b[0m"),
    }
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
    let stream = match corral_daemon::client::open(&project::paths(&cfg), &req).await {
        Ok(s) => s,
        Err(ClientError::NotRunning) => {
            return logs_from_file(&cfg, name, follow, lines, json).await;
        }
        Err(e) => return Err(Failure::Op(e.to_string())),
    };
    let mut reader = tokio::io::BufReader::new(stream).lines();
    let style = output::Style::stdout();
    let work = async {
        while let Ok(Some(line)) = reader.next_line().await {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if v.get("ok") == Some(&Value::Bool(false)) {
                let msg = v["error"].as_str().unwrap_or("failed").to_owned();
                return Err(if v["code"] == corral_daemon::protocol::UNKNOWN_SERVER {
                    Failure::Usage(msg)
                } else {
                    Failure::Op(msg)
                });
            }
            if json {
                println!("{line}");
            } else {
                println!("{}", style.shown(v["line"].as_str().unwrap_or("")));
            }
        }
        Ok(())
    };
    tokio::select! {
        r = work => r,
        _ = project::interrupted() => Ok(()),
    }
}

/// `corral logs` with no daemon: the log file the last run left (of a server, a
/// configured process, or an ad-hoc one), followed with `-f` (new lines come when a
/// daemon or a one-shot command runs it).
async fn logs_from_file(
    cfg: &corral_config::Config,
    name: &str,
    follow: bool,
    lines: usize,
    json: bool,
) -> CmdResult {
    let path = corral_supervisor::stderr::log_path(&cfg.state_dir.join("logs"), name);
    if name.contains('/') || !path.is_file() {
        project::check_unit(cfg, name)?;
        let kind = if cfg.servers.contains_key(name) {
            "server"
        } else {
            "process"
        };
        return Err(Failure::Op(format!(
            "no daemon runs, and {kind} '{name}' has no log yet ({} does not exist): it has not been started; `corral up -d` starts the servers and processes",
            path.display()
        )));
    }
    eprintln!(
        "corral: no daemon runs; {} {}",
        if follow { "following" } else { "from" },
        path.display()
    );
    let style = output::Style::stdout();
    let print = |line: &str| {
        if json {
            println!("{}", serde_json::json!({ "line": line }));
        } else {
            println!("{}", style.shown(line));
        }
    };
    // Taken before reading the tail, so no line falls between the two.
    let mut follower = corral_supervisor::stderr::LogFollower::new(&path);
    let text = corral_gateway::tools::tail_of_file(&path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for l in &all[all.len().saturating_sub(lines)..] {
        print(l);
    }
    if !follow {
        return Ok(());
    }
    let work = async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
        loop {
            tick.tick().await;
            for l in follower.poll() {
                print(&l);
            }
        }
    };
    tokio::select! {
        () = work => Ok(()),
        _ = project::interrupted() => Ok(()),
    }
}

/// A control request naming a server or a process. With no daemon, a name the config
/// does not know is a usage error (as the daemon would say); else "no daemon runs".
async fn named_request(
    cfg: &corral_config::Config,
    name: &str,
    req: &Request,
) -> Result<Value, Failure> {
    match project::daemon_request(cfg, req).await {
        Err(e) if !project::daemon_running(cfg).await => {
            project::check_unit(cfg, name)?;
            Err(e)
        }
        r => r,
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
    let data = named_request(&cfg, name, &req).await?;
    if json {
        println!("{data}");
    } else if let (Some(url), Some(target)) = (data["url"].as_str(), data["target"].as_str()) {
        // A proxy's row.
        let state = if verb == "stop" {
            "stopped"
        } else {
            "listening"
        };
        println!("{name}: {state} on {url} → {target}");
    } else {
        // A server's row or a process's: both have these fields.
        let state = data["state"].as_str().unwrap_or("?");
        let pid = data["pid"].as_u64().map(|p| format!(" (pid {p})"));
        let waiting = data["waiting_for"]
            .as_str()
            .map(|w| format!(" (waiting for {w})"));
        println!(
            "{name}: {state}{}{}",
            pid.unwrap_or_default(),
            waiting.unwrap_or_default()
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
    let processes = &data["processes"];
    let plist = |k: &str| -> Vec<&str> {
        processes[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    if ["added", "removed", "restarted", "unchanged"]
        .iter()
        .any(|k| !plist(k).is_empty())
    {
        let or_dash = |v: Vec<&str>| {
            if v.is_empty() {
                "-".to_owned()
            } else {
                v.join(", ")
            }
        };
        println!("processes started:   {}", or_dash(plist("added")));
        println!("processes restarted: {}", or_dash(plist("restarted")));
        println!("processes stopped:   {}", or_dash(plist("removed")));
        println!("processes unchanged: {}", or_dash(plist("unchanged")));
    }
    let proxies = &data["proxies"];
    let names = |k: &str| -> String {
        let v: Vec<&str> = proxies[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if v.is_empty() {
            "-".into()
        } else {
            v.join(", ")
        }
    };
    if ["added", "removed", "restarted"]
        .iter()
        .any(|k| names(k) != "-")
    {
        println!("proxies started:     {}", names("added"));
        println!("proxies restarted:   {}", names("restarted"));
        println!("proxies stopped:     {}", names("removed"));
    }
    for w in data["warnings"].as_array().into_iter().flatten() {
        eprintln!("corral: {}", w.as_str().unwrap_or(""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_events::rows::{LastExit, ProcessRow, ServerRow};

    fn reply(processes: Option<Vec<ProcessRow>>) -> PsReply {
        PsReply {
            servers: vec![ServerRow {
                name: "files".into(),
                state: "ready".into(),
                pid: Some(42),
                uptime_s: Some(75),
                restarts: 1,
                tools: 3,
                ..ServerRow::default()
            }],
            processes,
            ..PsReply::default()
        }
    }

    #[test]
    fn ps_shows_servers_and_processes_only_when_there_are_some() {
        let servers_only = ps_tables(&reply(None), false);
        assert_eq!(
            servers_only,
            "NAME   STATE  PID  UPTIME  RESTARTS  TOOLS  LAST ERROR\n\
             files  ready  42   1m15s   1         3      \n"
                .replace("      \n", "\n"),
            "{servers_only}"
        );
        assert_eq!(ps_tables(&reply(Some(vec![])), false), servers_only);
        let web = ProcessRow {
            name: "web".into(),
            state: "crashed".into(),
            restarts: 2,
            last_exit: Some(LastExit {
                code: Some(1),
                signal: None,
            }),
            last_alert: Some("Error: listen EADDRINUSE".into()),
            command: "npm run dev".into(),
            ..ProcessRow::default()
        };
        let both = ps_tables(&reply(Some(vec![web])), false);
        let (first, second) = both.split_once("\n\n").expect("two tables");
        assert_eq!(format!("{first}\n"), servers_only);
        let lines: Vec<&str> = second.lines().collect();
        assert!(lines[0].starts_with("PROCESS  STATE"), "{both}");
        let cols: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cols[..8],
            ["web", "crashed", "-", "-", "2", "no", "code", "1"],
            "{both}"
        );
        assert!(lines[1].ends_with("Error: listen EADDRINUSE"), "{both}");
        let waiting = ProcessRow {
            name: "api".into(),
            state: "starting".into(),
            waiting_for: Some("server 'db'".into()),
            ..ProcessRow::default()
        };
        let text = ps_tables(&reply(Some(vec![waiting])), false);
        let row = text.lines().last().unwrap();
        assert!(
            row.starts_with("api      starting (waiting for server 'db')  -"),
            "{text}"
        );
    }
}
