//! `corral tools [SERVER]`: the tool list by the names agents see (from the daemon, or
//! from servers started for this one command), optionally as one profile's agent sees
//! it, and what each definition costs an agent's context (`--tokens`).

use crate::project::{self, Standalone};
use crate::{CmdResult, Failure, output};
use corral_config::{Config, Profile};
use corral_events::EventBus;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// What to list and how.
pub struct View<'a> {
    /// Only this server's tools.
    pub server: Option<&'a str>,
    /// Only what an agent of this profile sees.
    pub profile: Option<&'a str>,
    /// The estimated context cost too.
    pub tokens: bool,
    pub json: bool,
}

pub async fn run(config: Option<&Path>, view: View<'_>, standalone: bool) -> CmdResult {
    let cfg = project::load(config)?;
    let servers = project::select(&cfg, view.server)?;
    let profile = project::check_profile(&cfg, view.profile)?;
    let (tools, failures) = if !standalone && project::daemon_running(&cfg).await {
        via_daemon(&cfg, view.server).await?
    } else {
        in_process(&cfg, servers, view.server, view.tokens).await?
    };
    let builtins = cfg.gateway.builtin_tools;
    let tools: Vec<Value> = tools
        .into_iter()
        .filter(|t| profile.is_none_or(|p| offered(p, t, builtins)))
        .collect();
    if view.tokens {
        // The agents to total: the one profile asked for, else every kind.
        let agents: Vec<Option<&Profile>> = match profile {
            Some(p) => vec![Some(p)],
            None => std::iter::once(None)
                .chain(cfg.profiles.values().map(Some))
                .collect(),
        };
        print!("{}", cost_report(&cfg, &tools, &agents, view.json));
    } else if view.json {
        println!("{}", Value::Array(tools));
    } else {
        let rows: Vec<Vec<String>> = tools.iter().map(row).collect();
        print!("{}", output::table(&rows));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failure::Op(failures.join("\n")))
    }
}

/// Every tool (as listed: `server`, or `builtin`) and the servers that failed to start,
/// from servers started here for this command; with `agent`, the built-in tools only the
/// daemon answers too.
async fn in_process(
    cfg: &Config,
    servers: Vec<corral_config::ServerConfig>,
    server: Option<&str>,
    agent: bool,
) -> Result<(Vec<Value>, Vec<String>), Failure> {
    let run = Standalone::start(cfg, servers, EventBus::default(), None);
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
    // The process and proxy tools need the daemon to be called, so they are listed only
    // for `--tokens` (`agent`): every gateway an agent reaches (the daemon's, `corral mcp
    // --standalone`) offers them, and the cost is what an agent pays.
    let catalog = corral_gateway::catalog::Catalog::build_with(
        handles.iter(),
        cfg.gateway.tool_prefix,
        cfg.gateway.builtin_tools,
        agent,
    );
    let mut tools = Vec::new();
    let mut failures = Vec::new();
    for (h, ok) in handles.iter().zip(&ready) {
        if *ok {
            tools.extend(corral_gateway::catalog::listing(h, &catalog));
        } else {
            failures.push(format!(
                "server '{}' failed to start: {}",
                h.name(),
                h.failure_report()
            ));
        }
    }
    run.stop().await;
    if server.is_none() {
        // What `corral call` can also call (and suggests): Corral's own tools.
        tools.extend(corral_gateway::catalog::builtin_listing(&catalog));
    }
    Ok((tools, failures))
}

async fn via_daemon(
    cfg: &Config,
    server: Option<&str>,
) -> Result<(Vec<Value>, Vec<String>), Failure> {
    let data = project::daemon_request(
        cfg,
        &corral_daemon::Request::Tools {
            server: server.map(str::to_owned),
        },
    )
    .await?;
    let tools = data["tools"].as_array().cloned().unwrap_or_default();
    let failures = data["failed"]
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
    Ok((tools, failures))
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

/// Whether an agent of `profile` is offered the listed `tool` (the gateway decides the
/// same way: [`Profile::offers`]).
fn offered(profile: &Profile, tool: &Value, builtins: bool) -> bool {
    let name = tool["name"].as_str().unwrap_or("");
    profile.offers(tool["server"].as_str(), name, builtins)
}

/// Bytes of serialized tool definition per token. Measured on the definitions of
/// Corral's own tools, the fixture's and the official `server-everything`'s, they were
/// 4.1–4.5 under OpenAI's cl100k_base and o200k_base and 4.1–4.3 under Anthropic's
/// public tokenizer (`scripts/tool-tokens.mjs`; BENCHMARKS.md, "What tools cost an
/// agent"): 4 errs a little high, as a budget should.
pub const BYTES_PER_TOKEN: f64 = 4.0;

/// The estimated tokens of one tool as `tools/list` sends it: its definition as JSON,
/// without the fields listings add (`server`, `tool`, `builtin`).
pub fn tokens(tool: &Value) -> usize {
    let mut def = tool.clone();
    if let Value::Object(m) = &mut def {
        for extra in ["server", "tool", "builtin"] {
            m.remove(extra);
        }
    }
    let bytes = def.to_string().len();
    (bytes as f64 / BYTES_PER_TOKEN).ceil() as usize
}

/// `corral tools --tokens`: each tool's cost, each server's, and what an agent of each
/// of `agents` (a profile, or `None`: none) pays on every turn.
fn cost_report(cfg: &Config, tools: &[Value], agents: &[Option<&Profile>], json: bool) -> String {
    let costs: Vec<usize> = tools.iter().map(tokens).collect();
    let owner = |t: &Value| t["server"].as_str().unwrap_or("corral").to_owned();
    let mut servers: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (t, c) in tools.iter().zip(&costs) {
        let e = servers.entry(owner(t)).or_default();
        e.0 += 1;
        e.1 += c;
    }
    let builtins = cfg.gateway.builtin_tools;
    let total = |p: Option<&Profile>| {
        tools
            .iter()
            .zip(&costs)
            .filter(|(t, _)| p.is_none_or(|p| offered(p, t, builtins)))
            .fold((0, 0), |(n, sum), (_, c)| (n + 1, sum + c))
    };
    let profiles: Vec<(Option<&str>, (usize, usize))> = agents
        .iter()
        .map(|p| (p.map(|p| p.name.as_str()), total(*p)))
        .collect();
    if json {
        let tools: Vec<Value> = tools
            .iter()
            .zip(&costs)
            .map(|(t, c)| json!({"name": t["name"], "server": owner(t), "tokens": c}))
            .collect();
        let servers: Vec<Value> = servers
            .iter()
            .map(|(s, (n, c))| json!({"server": s, "tools": n, "tokens": c}))
            .collect();
        let profiles: Vec<Value> = profiles
            .iter()
            .map(|(p, (n, c))| json!({"profile": p, "tools": n, "tokens": c}))
            .collect();
        let report = json!({
            "tools": tools,
            "servers": servers,
            "profiles": profiles,
            "bytes_per_token": BYTES_PER_TOKEN,
        });
        return format!("{report}\n");
    }
    let style = output::Style::stdout();
    let mut rows = vec![vec!["TOOL".to_owned(), "TOKENS".to_owned()]];
    for (t, c) in tools.iter().zip(&costs) {
        let name = style.shown(t["name"].as_str().unwrap_or("")).into_owned();
        rows.push(vec![name, c.to_string()]);
    }
    let mut out = output::table(&rows);
    let mut rows = vec![vec!["SERVER".into(), "TOOLS".into(), "TOKENS".into()]];
    for (s, (n, c)) in &servers {
        let label = if tools.iter().any(|t| t["server"].as_str() == Some(s)) {
            s.clone()
        } else {
            format!("{s} (Corral's own tools)")
        };
        rows.push(vec![label, n.to_string(), c.to_string()]);
    }
    out.push('\n');
    out.push_str(&output::table(&rows));
    let mut rows = vec![vec!["AGENT".into(), "TOOLS".into(), "TOKENS".into()]];
    for (p, (n, c)) in &profiles {
        let label = match p {
            None => "corral mcp (every tool)".to_owned(),
            Some(p) => format!("corral mcp --profile {p}"),
        };
        rows.push(vec![label, n.to_string(), c.to_string()]);
    }
    out.push('\n');
    out.push_str(&output::table(&rows));
    out.push_str(&format!(
        "\nTokens are estimated from each definition's JSON as tools/list sends it \
         ({BYTES_PER_TOKEN} bytes per token); an agent pays them on every turn.\n"
    ));
    out
}
