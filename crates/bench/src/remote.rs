//! `remote`: a `tools/call` to a remote (url) MCP server from the same Streamable HTTP
//! client, directly and through Corral (`corral up` with the server as `url`: the agent's
//! POST to Corral, Corral's `corral __remote` child, its POST to the server). The server
//! is the TypeScript SDK 2.x over HTTP in 2025-session mode
//! (`crates/cli/tests/peers/ts_http_server.mjs`, `echo`), on loopback.
//!
//! Both paths run in interleaved blocks (sequential) and rounds (8 clients), so drift in
//! the machine's state hits them alike.

use crate::account::{Acc, Fig, Pids};
use crate::mcp::{Endpoint, HttpGateway, Session, concurrent_sessions};
use crate::procs::Proc;
use crate::util::{self, TempDir, us};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const BLOCK: usize = 500;
const BLOCKS: usize = 10;
const CLIENTS: usize = 8;
const ROUNDS: usize = 4;
const WATCHDOG: Duration = Duration::from_secs(300);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Starts the TypeScript server; its pid and its endpoint.
fn server() -> Result<(Proc, String), String> {
    let sdk = repo().join(".peers/ts-server");
    if !sdk
        .join("node_modules/@modelcontextprotocol/server")
        .exists()
    {
        return Err(format!(
            "remote: the TypeScript server SDK is not installed in {}: run ./scripts/install-peers.sh",
            sdk.display()
        ));
    }
    let mut proc = Proc::spawn(
        Command::new("node")
            .arg(repo().join("crates/cli/tests/peers/ts_http_server.mjs"))
            .arg(&sdk)
            .arg("session")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
        Duration::ZERO,
    )?;
    let mut line = String::new();
    std::io::BufReader::new(proc.child.stdout.take().expect("piped"))
        .read_line(&mut line)
        .map_err(|e| format!("remote: reading the server's url: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&line)
        .map_err(|e| format!("remote: the server printed {line:?}: {e}"))?;
    let url = v["url"].as_str().unwrap_or_default().to_owned();
    Ok((proc, url))
}

pub fn run(corral: &Path, point: Duration) -> Result<String, String> {
    crate::procs::install_cleanup(WATCHDOG, "remote");
    let (mut node, url) = server()?;
    let addr = url
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix("/mcp"))
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("remote: unexpected url {url:?}"))?;
    let direct = Endpoint {
        addr,
        path: "/mcp".to_owned(),
        token: None,
    };
    let dir = TempDir::new("remote");
    let config = dir.path().join("corral.toml");
    std::fs::write(&config, format!("[servers.r]\nurl = \"{url}\"\n"))
        .map_err(|e| format!("remote: writing {}: {e}", config.display()))?;
    let gw = HttpGateway::start(corral, &config)?;
    let mut paths: [Vec<Session>; 2] = [
        (0..CLIENTS)
            .map(|_| direct.session("echo"))
            .collect::<Result<_, _>>()?,
        (0..CLIENTS)
            .map(|_| gw.session("r__echo"))
            .collect::<Result<_, _>>()?,
    ];
    for s in paths.iter_mut().flatten() {
        s.sequential(100)?;
    }
    let bridge = util::descendants_of(gw.pid())
        .into_iter()
        .find(|(_, comm)| comm == "corral")
        .map(|(pid, _)| pid)
        .ok_or("remote: no `corral __remote` child under the daemon")?;
    let pids = [
        Pids {
            gateway: Vec::new(),
            server: Some(node.pid()),
        },
        Pids {
            gateway: vec![gw.pid(), bridge],
            server: Some(node.pid()),
        },
    ];

    eprintln!("remote: sequential, {BLOCKS} blocks of {BLOCK} calls per path, interleaved");
    let mut seq = [Acc::default(), Acc::default()];
    for b in 0..BLOCKS {
        for k in util::alternate(b) {
            let client = &mut paths[k][0];
            seq[k].measure(&pids[k], || client.sequential(BLOCK))?;
        }
    }
    eprintln!("remote: {CLIENTS} clients per path, {ROUNDS} × {point:?}, interleaved");
    let mut tput = [Acc::default(), Acc::default()];
    for r in 0..ROUNDS {
        for k in util::alternate(r) {
            tput[k].measure(&pids[k], || concurrent_sessions(&mut paths[k], point))?;
        }
    }
    drop(paths);
    gw.stop();
    node.stop();
    Ok(render(&seq.map(Acc::finish), &tput.map(Acc::finish), point))
}

fn render(seq: &[Fig; 2], tput: &[Fig; 2], point: Duration) -> String {
    let mut out = format!(
        "## A remote server's tool, direct and through Corral\n\n\
         `echo` of the TypeScript SDK 2.x server over Streamable HTTP (2025 session, SSE \
         answers), from one client: directly, and through `corral up` (the server as \
         `url`). One keep-alive connection per client. Sequential: {BLOCKS} × {BLOCK} \
         calls per path in alternating blocks. Throughput: {CLIENTS} clients, {ROUNDS} \
         alternating rounds of {:.1} s. Times in µs; Corral's CPU is the daemon's and its \
         `corral __remote` child's, the server's is node's.\n\n\
         | path | p50 | p99 | calls/s (1 client) | p50 ({CLIENTS} clients) | calls/s ({CLIENTS} clients) | Corral CPU/call ({CLIENTS}) | server CPU/call ({CLIENTS}) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        point.as_secs_f64()
    );
    for (k, label) in ["direct", "through Corral"].iter().enumerate() {
        let (s, t) = (&seq[k], &tput[k]);
        out += &format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |\n",
            us(s.stats.p50),
            us(s.stats.p99),
            util::thousands(s.calls_per_sec),
            us(t.stats.p50),
            util::thousands(t.calls_per_sec),
            if k == 0 {
                "-".to_owned()
            } else {
                us(t.gateway_cpu)
            },
            us(t.fixture_cpu),
        );
    }
    out
}
