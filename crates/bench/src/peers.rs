//! Corral side by side with the gateways users would pick instead (issue 8): the same
//! fixture server behind each of them, the same workloads, one run, one table.
//!
//! - **direct**: the bare client on a fixture child (the physical floor);
//! - **Corral**: `corral mcp --standalone` (stdio), `corral mcp` (the bridge to the
//!   daemon), `corral up` (Streamable HTTP);
//! - **mcp-proxy** (PyPI) and **supergateway** (npm, stateful and its default stateless
//!   mode): stdio → Streamable HTTP;
//! - **1MCP** (npm `@1mcp/agent`) if `scripts/install-bench-peers.sh` could install it.
//!
//! Workloads: sequential `echo` calls, 1/8/32 in flight (HTTP: sessions), a 1 MiB
//! argument echoed back, `tools/list` with 500 tools, start → first successful call, RSS,
//! and the gateway's CPU per forwarded call. Loopback only; bounded by a watchdog; every
//! process is started in its own process group and killed with it.

use crate::account::{Acc, Fig, Memory, Pids};
use crate::mcp::{
    Endpoint, HttpGateway, LineClient, Session, concurrent_sessions, count_tools, fixture_child,
    write_config_args,
};
use crate::procs::{self, Proc};
use crate::util::{self, TempDir, us};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Calls (HTTP: sessions) in flight in the throughput runs.
const LEVELS: [usize; 3] = [1, 8, 32];
/// Rounds of each throughput point, interleaved with the other gateways.
const ROUNDS: usize = 2;
/// Sequential rounds; each gateway's block in a round is bounded by [`SEQ_BLOCK_TIME`].
const SEQ_ROUNDS: usize = 8;
const SEQ_BLOCK_TIME: Duration = Duration::from_millis(400);
/// Warm-up per gateway.
const WARMUP: usize = 1_000;
const WARMUP_MAX: Duration = Duration::from_secs(1);
/// The 1 MiB echo: calls per gateway, in rounds, each round bounded in time.
const BIG_CALLS: usize = 50;
const BIG_ROUNDS: usize = 5;
const BIG_ROUND_MAX: Duration = Duration::from_secs(4);
const BIG_TEXT: usize = 1 << 20;
/// `tools/list` requests per scenario.
const LIST_CALLS: usize = 20;
/// Cold starts per scenario (median reported).
const START_REPEATS: usize = 3;
/// Idle time before the idle RSS is read.
const IDLE: Duration = Duration::from_secs(2);
/// Servers and tools for the many-servers scenarios.
const SERVERS: usize = 10;
const TOOLS_PER_SERVER: usize = 50;
const TOOLS_ONE_SERVER: usize = 500;
/// The whole run normally takes about two minutes.
const WATCHDOG: Duration = Duration::from_secs(330);
/// How long a peer may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Issue 8's target for the gateway's CPU per forwarded call.
const CPU_TARGET: Duration = Duration::from_micros(15);

/// Settings of the `peers` benchmark.
pub struct PeersOpts {
    /// Sequential calls per gateway at most (fewer if the gateway is slow: every block
    /// is bounded in time).
    pub calls: usize,
    /// One round of one throughput point.
    pub point: Duration,
}

// ---------------------------------------------------------------------------------------
// The gateways

const N: usize = 7;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gw {
    Direct,
    Stdio,
    Bridge,
    Http,
    McpProxy,
    SgStateful,
    SgStateless,
}

impl Gw {
    const ALL: [Gw; N] = [
        Gw::Direct,
        Gw::Stdio,
        Gw::Bridge,
        Gw::Http,
        Gw::McpProxy,
        Gw::SgStateful,
        Gw::SgStateless,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The column heading.
    fn short(self) -> &'static str {
        match self {
            Gw::Direct => "direct",
            Gw::Stdio => "Corral stdio",
            Gw::Bridge => "Corral bridge",
            Gw::Http => "Corral HTTP",
            Gw::McpProxy => "mcp-proxy",
            Gw::SgStateful => "supergateway --stateful",
            Gw::SgStateless => "supergateway (stateless)",
        }
    }

    fn corral(self) -> bool {
        matches!(self, Gw::Stdio | Gw::Bridge | Gw::Http)
    }

    fn peer(self) -> bool {
        matches!(self, Gw::McpProxy | Gw::SgStateful | Gw::SgStateless)
    }

    /// The tool name the gateway exposes for the fixture's `echo`.
    fn tool(self) -> &'static str {
        if self.corral() { "fx__echo" } else { "echo" }
    }
}

/// The installed peers, found under `.peers/bench/` (`scripts/install-bench-peers.sh`).
struct PeerBins {
    mcp_proxy: Result<(PathBuf, String), String>,
    supergateway: Result<(PathBuf, String), String>,
    onemcp: Result<(PathBuf, String), String>,
}

impl PeerBins {
    fn find(root: &Path) -> PeerBins {
        let bench = root.join(".peers/bench");
        let missing =
            |what: &str| format!("{what} is not installed: run scripts/install-bench-peers.sh");
        let mcp_proxy = {
            let bin = bench.join("venv/bin/mcp-proxy");
            if bin.is_file() {
                Ok((bin, python_dist_version(&bench.join("venv"), "mcp_proxy")))
            } else {
                Err(missing("mcp-proxy"))
            }
        };
        let supergateway = {
            let bin = bench.join("node/node_modules/.bin/supergateway");
            if bin.exists() {
                Ok((
                    bin,
                    npm_version(&bench.join("node/node_modules/supergateway/package.json")),
                ))
            } else {
                Err(missing("supergateway"))
            }
        };
        let onemcp = {
            let bin = bench.join("1mcp/node_modules/.bin/1mcp");
            let why = std::fs::read_to_string(bench.join("1mcp/NOT-INSTALLED"));
            if bin.exists() {
                Ok((
                    bin,
                    npm_version(&bench.join("1mcp/node_modules/@1mcp/agent/package.json")),
                ))
            } else if let Ok(why) = why {
                Err(why.trim().to_owned())
            } else {
                Err(missing("1MCP (@1mcp/agent)"))
            }
        };
        PeerBins {
            mcp_proxy,
            supergateway,
            onemcp,
        }
    }

    fn for_gw(&self, gw: Gw) -> Result<&Path, String> {
        let r = match gw {
            Gw::McpProxy => &self.mcp_proxy,
            Gw::SgStateful | Gw::SgStateless => &self.supergateway,
            _ => unreachable!("not a peer"),
        };
        r.as_ref().map(|(p, _)| p.as_path()).map_err(Clone::clone)
    }
}

/// The version in `<venv>/lib/python*/site-packages/<dist>-<version>.dist-info`.
fn python_dist_version(venv: &Path, dist: &str) -> String {
    let Ok(libs) = std::fs::read_dir(venv.join("lib")) else {
        return "?".into();
    };
    for lib in libs.flatten() {
        let Ok(pkgs) = std::fs::read_dir(lib.path().join("site-packages")) else {
            continue;
        };
        for e in pkgs.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(v) = name
                .strip_prefix(&format!("{dist}-"))
                .and_then(|r| r.strip_suffix(".dist-info"))
            {
                return v.to_owned();
            }
        }
    }
    "?".into()
}

fn npm_version(package_json: &Path) -> String {
    std::fs::read_to_string(package_json)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding a port: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local address: {e}"))
}

/// A command line for a shell (supergateway runs `--stdio` through one).
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a peer fronts: one server (its default endpoint `/mcp`), or named servers (one
/// endpoint each; mcp-proxy's `--named-server`).
enum Fronts<'a> {
    One(&'a [String]),
    Named(&'a [(String, Vec<String>)]),
}

/// A running HTTP peer.
struct Peer {
    proc: Proc,
    endpoints: Vec<Endpoint>,
    log: PathBuf,
}

impl Peer {
    /// Spawns the peer (its output to `<dir>/<name>.log`) and waits until it accepts
    /// connections on its port.
    fn start(
        gw: Gw,
        bins: &PeerBins,
        fixture: &Path,
        fronts: Fronts,
        dir: &Path,
    ) -> Result<Peer, String> {
        let bin = bins.for_gw(gw)?;
        let port = free_port()?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let server = |args: &[String]| {
            let mut w = vec![fixture.to_string_lossy().into_owned()];
            w.extend(args.iter().cloned());
            w
        };
        let mut cmd = Command::new(bin);
        let mut paths = Vec::new();
        match gw {
            Gw::McpProxy => {
                cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
                cmd.args(["--log-level", "WARNING"]);
                match fronts {
                    Fronts::One(args) => {
                        cmd.arg("--").args(server(args));
                        paths.push("/mcp".to_owned());
                    }
                    Fronts::Named(servers) => {
                        for (name, args) in servers {
                            cmd.arg("--named-server")
                                .arg(name)
                                .arg(shell_words(&server(args)));
                            paths.push(format!("/servers/{name}/mcp"));
                        }
                    }
                }
            }
            Gw::SgStateful | Gw::SgStateless => {
                let Fronts::One(args) = fronts else {
                    return Err("supergateway fronts one server".into());
                };
                cmd.arg("--stdio").arg(shell_words(&server(args)));
                cmd.args(["--outputTransport", "streamableHttp"]);
                cmd.args(["--port", &port.to_string(), "--logLevel", "none"]);
                if gw == Gw::SgStateful {
                    cmd.arg("--stateful");
                }
                paths.push("/mcp".to_owned());
            }
            _ => unreachable!("not a peer"),
        }
        let log = dir.join(format!("{}-{port}.log", gw.short().replace(' ', "_")));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let mut proc = Proc::spawn(&mut cmd, Duration::ZERO)?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if let Some(status) = proc.exited() {
                return Err(format!(
                    "{} exited ({status}) before listening: {}",
                    gw.short(),
                    log_tail(&log)
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not listen on {addr} within {START_TIMEOUT:?}: {}",
                    gw.short(),
                    log_tail(&log)
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let endpoints = paths
            .into_iter()
            .map(|path| Endpoint {
                addr,
                path,
                token: None,
            })
            .collect();
        Ok(Peer {
            proc,
            endpoints,
            log,
        })
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    fn stop(mut self) {
        self.proc.stop();
    }
}

/// The last lines of a log file, on one line.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail.chars().take(400).collect()
    }
}

/// How the bench talks to one gateway.
enum Client {
    Line(LineClient),
    Http(Vec<Session>),
}

impl Client {
    fn sequential_for(&mut self, calls: usize, max: Duration) -> Result<Vec<u64>, String> {
        match self {
            Client::Line(c) => c.sequential_for(calls, max),
            Client::Http(s) => s[0].sequential_for(calls, max),
        }
    }

    fn load(&mut self, level: usize, dur: Duration) -> Result<Vec<u64>, String> {
        match self {
            Client::Line(c) => c.pipelined(level, dur),
            Client::Http(s) => concurrent_sessions(&mut s[..level], dur),
        }
    }

    /// One call with `args`; its latency and the size of the answer.
    fn call_args(&mut self, args: &str) -> Result<(u64, usize), String> {
        match self {
            Client::Line(c) => {
                let ns = c.call_args(args)?;
                Ok((ns, c.line.len()))
            }
            Client::Http(s) => {
                let ns = s[0].call_args(args)?;
                Ok((ns, s[0].last.len()))
            }
        }
    }
}

/// One gateway in the main phase.
struct Runner {
    gw: Gw,
    client: Option<Client>,
    /// The peer's process (Corral's `up` is held apart: the bridge shares it).
    peer: Option<Peer>,
    /// For HTTP: where to open more sessions.
    endpoint: Option<Endpoint>,
    pids: Pids,
    /// The process whose memory is reported.
    main_pid: u32,
    failed: Option<String>,
}

impl Runner {
    fn failed(gw: Gw, why: String) -> Runner {
        eprintln!("peers: {}: {why}", gw.short());
        Runner {
            gw,
            client: None,
            peer: None,
            endpoint: None,
            pids: Pids::gateway(&[]),
            main_pid: 0,
            failed: Some(why),
        }
    }

    fn ok(&self) -> bool {
        self.failed.is_none() && self.client.is_some()
    }

    /// Runs `f` on the client; a failure takes the gateway out of the rest of the run.
    fn run<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T, String>) -> Option<T> {
        let client = self.client.as_mut()?;
        if self.failed.is_some() {
            return None;
        }
        match f(client) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("peers: {} failed: {e}", self.gw.short());
                self.failed = Some(e);
                None
            }
        }
    }

    /// Opens HTTP sessions until there are `n`.
    fn sessions(&mut self, n: usize) -> Result<(), String> {
        let (Some(Client::Http(s)), Some(ep)) = (&mut self.client, &self.endpoint) else {
            return Ok(());
        };
        while s.len() < n {
            s.push(ep.session(self.gw.tool())?);
        }
        Ok(())
    }

    fn memory(&self) -> Option<Memory> {
        if self.main_pid == 0 || self.failed.is_some() {
            return None;
        }
        Memory::of(self.main_pid).ok()
    }
}

// ---------------------------------------------------------------------------------------
// Results

/// Figures of one gateway in the main phase.
#[derive(Default)]
struct MainFigs {
    seq: Option<Fig>,
    tput: [Option<Fig>; 3],
    /// The same loads with the client and every process of the path on one vCPU.
    one_cpu: [Option<Fig>; 3],
    big: Option<Result<BigFig, String>>,
    idle: Option<Memory>,
    loaded: Option<Memory>,
    end: Option<Memory>,
}

struct BigFig {
    stats: util::Stats,
    answer_bytes: usize,
}

/// One cold-start scenario.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scn {
    Direct500,
    Stdio10,
    Bridge10,
    Http10,
    Http500,
    McpProxy10,
    McpProxy500,
    SgStateful500,
    SgStateless500,
}

impl Scn {
    const ALL: [Scn; 9] = [
        Scn::Direct500,
        Scn::Stdio10,
        Scn::Bridge10,
        Scn::Http10,
        Scn::Http500,
        Scn::McpProxy10,
        Scn::McpProxy500,
        Scn::SgStateful500,
        Scn::SgStateless500,
    ];

    fn gw(self) -> Gw {
        match self {
            Scn::Direct500 => Gw::Direct,
            Scn::Stdio10 => Gw::Stdio,
            Scn::Bridge10 => Gw::Bridge,
            Scn::Http10 | Scn::Http500 => Gw::Http,
            Scn::McpProxy10 | Scn::McpProxy500 => Gw::McpProxy,
            Scn::SgStateful500 => Gw::SgStateful,
            Scn::SgStateless500 => Gw::SgStateless,
        }
    }

    fn ten(self) -> bool {
        matches!(
            self,
            Scn::Stdio10 | Scn::Bridge10 | Scn::Http10 | Scn::McpProxy10
        )
    }

    fn label(self) -> String {
        let what = if self.ten() {
            format!("{SERVERS} servers × `--tools {TOOLS_PER_SERVER}`")
        } else {
            format!("1 server × `--tools {TOOLS_ONE_SERVER}`")
        };
        let how = match self {
            Scn::Direct500 => "fixture spawned by the bench",
            Scn::Stdio10 => "`corral mcp --standalone`",
            Scn::Bridge10 => "`corral mcp`, no daemon running (it starts one)",
            Scn::Http10 | Scn::Http500 => "`corral up`",
            Scn::McpProxy10 => "`mcp-proxy --named-server` × 10 (one endpoint each)",
            Scn::McpProxy500 => "`mcp-proxy -- fixture`",
            Scn::SgStateful500 => "`supergateway --stateful`",
            Scn::SgStateless500 => "`supergateway` (stateless, its default)",
        };
        format!("{} | {how} | {what}", self.gw().short())
    }
}

/// One cold start: the times to the first successful call and to one call answered by
/// every server.
struct StartRun {
    first: Duration,
    all: Option<Duration>,
}

/// `tools/list` figures of a scenario (last repetition).
struct ListFig {
    stats: util::Stats,
    /// Requests per full list (one per endpoint).
    requests: usize,
    tools: usize,
    bytes: usize,
}

#[derive(Default)]
struct ScnFigs {
    starts: Vec<StartRun>,
    list: Option<ListFig>,
    memory: Option<Memory>,
    failed: Option<String>,
}

// ---------------------------------------------------------------------------------------
// The benchmark

/// Runs everything and renders the tables.
pub fn run(fixture: &Path, corral: &Path, opts: &PeersOpts) -> Result<String, String> {
    let started = Instant::now();
    procs::install_cleanup(WATCHDOG, "peers");
    let bins = PeerBins::find(&util::repo_root());
    let dir = TempDir::new("peers");

    let main = main_phase(fixture, corral, &bins, opts, dir.path())?;
    let scns = start_phase(fixture, corral, &bins, dir.path());
    eprintln!("peers: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(render(&bins, opts, &main, &scns))
}

/// The main phase: every gateway fronting one plain fixture, measured side by side.
fn main_phase(
    fixture: &Path,
    corral: &Path,
    bins: &PeerBins,
    opts: &PeersOpts,
    dir: &Path,
) -> Result<Vec<MainFigs>, String> {
    let cdir = dir.join("corral");
    std::fs::create_dir_all(&cdir).map_err(|e| format!("{}: {e}", cdir.display()))?;
    let config = write_config_args(&cdir, fixture, &[("fx".to_owned(), Vec::new())])?;
    let cfg = config.to_string_lossy().into_owned();

    eprintln!("peers: starting every gateway in front of one fixture");
    let direct = LineClient::start(fixture, &[], "echo")?;
    let direct_pid = direct.pid();
    let stdio = LineClient::start(corral, &["-c", &cfg, "mcp", "--standalone"], "fx__echo")?;
    let stdio_pid = stdio.pid();
    fixture_child(stdio_pid)?;
    // The daemon first, so that the bridge connects to it instead of starting its own.
    let up = HttpGateway::start(corral, &config)?;
    let up_pid = up.pid();
    let bridge = LineClient::start(corral, &["-c", &cfg, "mcp"], "fx__echo")?;
    let bridge_pid = bridge.pid();
    let http_session = up.session("fx__echo")?;
    fixture_child(up_pid)?;

    let mut runners: Vec<Runner> = vec![
        Runner {
            gw: Gw::Direct,
            client: Some(Client::Line(direct)),
            peer: None,
            endpoint: None,
            pids: Pids::direct(direct_pid),
            main_pid: direct_pid,
            failed: None,
        },
        Runner {
            gw: Gw::Stdio,
            client: Some(Client::Line(stdio)),
            peer: None,
            endpoint: None,
            pids: Pids::gateway(&[stdio_pid]),
            main_pid: stdio_pid,
            failed: None,
        },
        Runner {
            gw: Gw::Bridge,
            client: Some(Client::Line(bridge)),
            peer: None,
            endpoint: None,
            pids: Pids::gateway(&[bridge_pid, up_pid]),
            main_pid: bridge_pid,
            failed: None,
        },
        Runner {
            gw: Gw::Http,
            client: Some(Client::Http(vec![http_session])),
            peer: None,
            endpoint: Some(up.endpoint.clone()),
            pids: Pids::gateway(&[up_pid]),
            main_pid: up_pid,
            failed: None,
        },
    ];
    for gw in [Gw::McpProxy, Gw::SgStateful, Gw::SgStateless] {
        let r = Peer::start(gw, bins, fixture, Fronts::One(&[]), dir).and_then(|peer| {
            let ep = peer.endpoints[0].clone();
            let s = ep.session(gw.tool())?;
            Ok(Runner {
                gw,
                client: Some(Client::Http(vec![s])),
                endpoint: Some(ep),
                pids: Pids::gateway(&[peer.pid()]),
                main_pid: peer.pid(),
                peer: Some(peer),
                failed: None,
            })
        });
        runners.push(r.unwrap_or_else(|e| Runner::failed(gw, e)));
    }

    let mut figs: Vec<MainFigs> = (0..N).map(|_| MainFigs::default()).collect();

    // Idle: one session, a few calls, then IDLE.
    for r in runners.iter_mut() {
        r.run(|c| c.sequential_for(20, Duration::from_secs(5)));
    }
    eprintln!("peers: idle for {IDLE:?}, then RSS");
    std::thread::sleep(IDLE);
    for r in &runners {
        figs[r.gw.index()].idle = r.memory();
    }

    // The other sessions, then a warm-up.
    let top = LEVELS[LEVELS.len() - 1];
    for r in runners.iter_mut() {
        if r.ok()
            && let Err(e) = r.sessions(top)
        {
            eprintln!("peers: {}: opening {top} sessions: {e}", r.gw.short());
            r.failed = Some(e);
        }
    }
    eprintln!("peers: warm-up, up to {WARMUP} calls or {WARMUP_MAX:?} per gateway");
    for r in runners.iter_mut() {
        r.run(|c| c.sequential_for(WARMUP, WARMUP_MAX));
    }

    // Sequential latency: rounds whose order rotates; every block bounded in time.
    let per_block = opts.calls.div_ceil(SEQ_ROUNDS).max(1);
    eprintln!(
        "peers: sequential, {SEQ_ROUNDS} rounds of up to {per_block} calls or {SEQ_BLOCK_TIME:?} per gateway"
    );
    let mut seq: Vec<Acc> = (0..N).map(|_| Acc::default()).collect();
    for round in 0..SEQ_ROUNDS {
        for i in order(round) {
            let r = &mut runners[i];
            let pids = r.pids.clone();
            let acc = &mut seq[i];
            r.run(|c| acc.measure(&pids, || c.sequential_for(per_block, SEQ_BLOCK_TIME)));
        }
    }
    for (i, acc) in seq.into_iter().enumerate() {
        if runners[i].ok() && !acc.samples.is_empty() {
            figs[i].seq = Some(acc.finish());
        }
    }

    // Throughput at 1, 8 and 32 in flight (HTTP: sessions), left to the scheduler; then
    // the same loads with every process of each path on the client's vCPU. On this VM a
    // wake-up across vCPUs costs the waker several µs (the other vCPU halts when idle,
    // and waking it goes through the hypervisor), so CPU per call depends on where the
    // scheduler happened to put the processes; on one vCPU it does not.
    for pinned in [false, true] {
        eprintln!(
            "peers: throughput at {LEVELS:?} in flight / sessions, {ROUNDS} × {:?} per point{}",
            opts.point,
            if pinned {
                ", every process of each path on one vCPU"
            } else {
                ""
            }
        );
        for (li, &level) in LEVELS.iter().enumerate() {
            let mut accs: Vec<Acc> = (0..N).map(|_| Acc::default()).collect();
            for round in 0..ROUNDS {
                for i in order(round) {
                    let r = &mut runners[i];
                    let pids = r.pids.clone();
                    let acc = &mut accs[i];
                    let procs = pids.all();
                    let restore = pinned.then(|| util::pin_to_one_cpu(&procs)).flatten();
                    r.run(|c| acc.measure(&pids, || c.load(level, opts.point)));
                    if let Some(mask) = restore {
                        util::set_affinity(&procs, &mask);
                    }
                }
            }
            for (i, acc) in accs.into_iter().enumerate() {
                if runners[i].ok() && !acc.samples.is_empty() {
                    let slot = if pinned {
                        &mut figs[i].one_cpu
                    } else {
                        &mut figs[i].tput
                    };
                    slot[li] = Some(acc.finish());
                }
            }
        }
    }
    for r in &runners {
        figs[r.gw.index()].loaded = r.memory();
    }

    // The 1 MiB echo. A failure here is reported, not fatal for the gateway.
    eprintln!("peers: {BIG_CALLS} calls of echo with a 1 MiB text per gateway");
    let big_args = format!(
        r#"{{"text":"hello{}"}}"#,
        "x".repeat(BIG_TEXT - "hello".len())
    );
    let mut big: Vec<Result<(Vec<u64>, usize), String>> =
        (0..N).map(|_| Ok((Vec::new(), 0))).collect();
    for round in 0..BIG_ROUNDS {
        for i in order(round) {
            let r = &mut runners[i];
            if !r.ok() {
                continue;
            }
            let Ok((samples, bytes)) = &mut big[i] else {
                continue;
            };
            let t0 = Instant::now();
            let client = r.client.as_mut().expect("ok");
            let mut err = None;
            for _ in 0..BIG_CALLS / BIG_ROUNDS {
                if t0.elapsed() >= BIG_ROUND_MAX {
                    break;
                }
                match client.call_args(&big_args) {
                    Ok((ns, len)) if len >= BIG_TEXT => {
                        samples.push(ns);
                        *bytes = len;
                    }
                    Ok((_, len)) => {
                        err = Some(format!("the answer has {len} bytes"));
                        break;
                    }
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = err {
                eprintln!("peers: {}: 1 MiB echo failed: {e}", r.gw.short());
                big[i] = Err(e);
            }
        }
    }
    for (i, b) in big.into_iter().enumerate() {
        figs[i].big = match b {
            Ok((samples, _)) if samples.is_empty() => None,
            Ok((samples, bytes)) => Some(Ok(BigFig {
                stats: util::Stats::of(samples),
                answer_bytes: bytes,
            })),
            Err(e) => Some(Err(e)),
        };
    }
    for r in &runners {
        figs[r.gw.index()].end = r.memory();
    }
    for r in &runners {
        if let Some(f) = &r.failed {
            eprintln!("peers: {} was taken out of the run: {f}", r.gw.short());
        }
    }

    eprintln!("peers: stopping the main phase");
    for r in runners {
        let Runner { client, peer, .. } = r;
        match client {
            Some(Client::Line(c)) => c.stop(),
            Some(Client::Http(s)) => drop(s),
            None => {}
        }
        if let Some(p) = peer {
            p.stop();
        }
    }
    up.stop();
    Ok(figs)
}

/// The order of the gateways in round `round`: rotated, and reversed every other cycle.
fn order(round: usize) -> [usize; N] {
    let mut o: [usize; N] = std::array::from_fn(|i| i);
    o.rotate_left(round % N);
    if (round / N) % 2 == 1 {
        o.reverse();
    }
    o
}

/// The cold-start scenarios, [`START_REPEATS`] times each, interleaved; the last
/// repetition also measures `tools/list` and the gateway's memory.
fn start_phase(fixture: &Path, corral: &Path, bins: &PeerBins, dir: &Path) -> Vec<ScnFigs> {
    eprintln!(
        "peers: cold starts ({START_REPEATS} each) with {SERVERS} servers × {TOOLS_PER_SERVER} tools \
         or 1 server × {TOOLS_ONE_SERVER} tools; tools/list × {LIST_CALLS}"
    );
    let mut out: Vec<ScnFigs> = Scn::ALL.iter().map(|_| ScnFigs::default()).collect();
    for rep in 0..START_REPEATS {
        for (i, &scn) in Scn::ALL.iter().enumerate() {
            if out[i].failed.is_some() {
                continue;
            }
            let last = rep + 1 == START_REPEATS;
            let sdir = dir.join(format!("start-{i}-{rep}"));
            if let Err(e) = std::fs::create_dir_all(&sdir) {
                out[i].failed = Some(format!("{}: {e}", sdir.display()));
                continue;
            }
            match cold_start(scn, fixture, corral, bins, &sdir, last) {
                Ok((run, list, mem)) => {
                    out[i].starts.push(run);
                    if last {
                        out[i].list = list;
                        out[i].memory = mem;
                    }
                }
                Err(e) => {
                    eprintln!("peers: cold start of {}: {e}", scn.label());
                    out[i].failed = Some(e);
                }
            }
        }
    }
    out
}

fn ten_servers(args_per: usize) -> Vec<(String, Vec<String>)> {
    (0..SERVERS)
        .map(|i| {
            (
                format!("fx{i}"),
                vec!["--tools".to_owned(), args_per.to_string()],
            )
        })
        .collect()
}

fn tools_args(n: usize) -> Vec<String> {
    vec!["--tools".to_owned(), n.to_string()]
}

/// One cold start of `scn` in `dir`; with `list`, then [`LIST_CALLS`] × `tools/list` and
/// the gateway's memory.
fn cold_start(
    scn: Scn,
    fixture: &Path,
    corral: &Path,
    bins: &PeerBins,
    dir: &Path,
    list: bool,
) -> Result<(StartRun, Option<ListFig>, Option<Memory>), String> {
    let one_args = tools_args(TOOLS_ONE_SERVER);
    let ten = ten_servers(TOOLS_PER_SERVER);
    let list_line = |c: &mut LineClient| -> Result<ListFig, String> {
        let mut samples = Vec::with_capacity(LIST_CALLS);
        for _ in 0..LIST_CALLS {
            samples.push(c.list_tools()?);
        }
        Ok(ListFig {
            stats: util::Stats::of(samples),
            requests: 1,
            tools: count_tools(&c.line),
            bytes: c.line.len(),
        })
    };
    let list_http = |sessions: &mut [Session]| -> Result<ListFig, String> {
        let mut samples = Vec::with_capacity(LIST_CALLS);
        let (mut tools, mut bytes) = (0, 0);
        for _ in 0..LIST_CALLS {
            let (mut ns, mut t, mut b) = (0, 0, 0);
            for s in sessions.iter_mut() {
                let (one, msg) = s.list_tools()?;
                ns += one;
                t += count_tools(&msg);
                b += msg.len();
            }
            samples.push(ns);
            (tools, bytes) = (t, b);
        }
        Ok(ListFig {
            stats: util::Stats::of(samples),
            requests: sessions.len(),
            tools,
            bytes,
        })
    };
    match scn {
        Scn::Direct500 => {
            let t0 = Instant::now();
            let mut c = LineClient::start(fixture, &["--tools", "500"], "echo")?;
            c.call_args(crate::mcp::ARGS)?;
            let first = t0.elapsed();
            let lf = if list { Some(list_line(&mut c)?) } else { None };
            let mem = list.then(|| Memory::of(c.pid()).ok()).flatten();
            c.stop();
            Ok((StartRun { first, all: None }, lf, mem))
        }
        Scn::Stdio10 | Scn::Bridge10 => {
            let config = write_config_args(dir, fixture, &ten)?;
            let cfg = config.to_string_lossy().into_owned();
            let args: Vec<&str> = if scn == Scn::Stdio10 {
                vec!["-c", &cfg, "mcp", "--standalone"]
            } else {
                vec!["-c", &cfg, "mcp"]
            };
            let t0 = Instant::now();
            let mut c = LineClient::spawn(corral, &args, "fx0__echo")?;
            let mut daemon = None;
            let result = (|| {
                c.handshake()?;
                c.call_args(crate::mcp::ARGS)?;
                let first = t0.elapsed();
                if scn == Scn::Bridge10 {
                    daemon = Some(Daemon::found(corral, &config, dir)?);
                }
                for i in 1..SERVERS {
                    c.set_tool(&format!("fx{i}__echo"));
                    c.call_args(crate::mcp::ARGS)?;
                }
                let all = t0.elapsed();
                let lf = if list { Some(list_line(&mut c)?) } else { None };
                let mem = if !list {
                    None
                } else if let Some(d) = &daemon {
                    Memory::of(d.pid).ok()
                } else {
                    Memory::of(c.pid()).ok()
                };
                Ok((
                    StartRun {
                        first,
                        all: Some(all),
                    },
                    lf,
                    mem,
                ))
            })();
            c.stop();
            if scn == Scn::Bridge10 {
                // Found by its pid file even when the call above failed.
                let d = daemon.or_else(|| Daemon::found(corral, &config, dir).ok());
                if let Some(d) = d {
                    d.stop();
                }
            }
            result
        }
        Scn::Http10 | Scn::Http500 => {
            let servers = if scn == Scn::Http10 {
                ten
            } else {
                vec![("fx".to_owned(), one_args)]
            };
            let config = write_config_args(dir, fixture, &servers)?;
            let t0 = Instant::now();
            let gw = HttpGateway::start(corral, &config)?;
            let first_tool = format!("{}__echo", servers[0].0);
            let mut s = gw.session(&first_tool)?;
            s.call()?;
            let first = t0.elapsed();
            let mut all = None;
            if scn == Scn::Http10 {
                for (name, _) in &servers[1..] {
                    s.set_tool(&format!("{name}__echo"));
                    s.call()?;
                }
                all = Some(t0.elapsed());
            }
            let lf = if list {
                Some(list_http(std::slice::from_mut(&mut s))?)
            } else {
                None
            };
            let mem = list.then(|| Memory::of(gw.pid()).ok()).flatten();
            drop(s);
            gw.stop();
            Ok((StartRun { first, all }, lf, mem))
        }
        Scn::McpProxy10 | Scn::McpProxy500 | Scn::SgStateful500 | Scn::SgStateless500 => {
            let gwk = scn.gw();
            let fronts = if scn == Scn::McpProxy10 {
                Fronts::Named(&ten)
            } else {
                Fronts::One(&one_args)
            };
            let t0 = Instant::now();
            let peer = Peer::start(gwk, bins, fixture, fronts, dir)?;
            let result = (|| {
                let mut sessions = vec![peer.endpoints[0].session("echo")?];
                sessions[0].call()?;
                let first = t0.elapsed();
                let mut all = None;
                if peer.endpoints.len() > 1 {
                    for ep in &peer.endpoints[1..] {
                        let mut s = ep.session("echo")?;
                        s.call()?;
                        sessions.push(s);
                    }
                    all = Some(t0.elapsed());
                }
                let lf = if list {
                    Some(list_http(&mut sessions)?)
                } else {
                    None
                };
                let mem = list.then(|| Memory::of(peer.pid()).ok()).flatten();
                Ok((StartRun { first, all }, lf, mem))
            })();
            let result = result.map_err(|e: String| format!("{e} (log: {})", log_tail(&peer.log)));
            peer.stop();
            result
        }
    }
}

/// A daemon that `corral mcp` started on its own (detached, in its own session): found by
/// its pid file, registered for the bench's cleanup, stopped with `corral down`.
struct Daemon {
    pid: u32,
    corral: PathBuf,
    config: PathBuf,
}

impl Daemon {
    fn found(corral: &Path, config: &Path, dir: &Path) -> Result<Daemon, String> {
        let file = dir.join(".corral/daemon.pid");
        let pid: u32 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| format!("no daemon pid in {}", file.display()))?;
        // It leads its own session, hence its own process group.
        procs::register(pid as i32);
        Ok(Daemon {
            pid,
            corral: corral.to_owned(),
            config: config.to_owned(),
        })
    }

    fn stop(self) {
        let down = Proc::spawn(
            Command::new(&self.corral)
                .arg("-c")
                .arg(&self.config)
                .arg("down")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            Duration::from_secs(10),
        );
        drop(down); // waits up to 10 s for `corral down`, then signals it
        let deadline = Instant::now() + Duration::from_secs(5);
        while procs::alive(self.pid as i32) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if procs::alive(self.pid as i32) {
            eprintln!(
                "peers: the daemon (pid {}) outlived `corral down`; killing its group",
                self.pid
            );
            procs::signal_group(self.pid as i32, libc::SIGKILL);
        }
        procs::unregister(self.pid as i32);
    }
}

// ---------------------------------------------------------------------------------------
// Rendering

/// Whether a smaller or a larger figure is better.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
}

/// One cell: a value to compare (if any) and its text.
#[derive(Clone)]
struct Cell {
    value: Option<f64>,
    text: String,
}

impl Cell {
    fn num(value: f64, text: String) -> Cell {
        Cell {
            value: Some(value),
            text,
        }
    }

    fn text(text: impl Into<String>) -> Cell {
        Cell {
            value: None,
            text: text.into(),
        }
    }

    /// A peer that failed at this row: Corral counts as ahead of it.
    fn failed(text: impl Into<String>) -> Cell {
        Cell {
            value: None,
            text: text.into(),
        }
    }
}

struct Row {
    label: String,
    better: Option<Better>,
    cells: Vec<Cell>,
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The comparison cell of a row: Corral HTTP against the best peer.
fn versus(row: &Row) -> String {
    let Some(better) = row.better else {
        return String::new();
    };
    let corral = row.cells[Gw::Http.index()].value;
    let peers: Vec<f64> = Gw::ALL
        .iter()
        .filter(|g| g.peer())
        .filter_map(|g| row.cells[g.index()].value)
        .collect();
    let (Some(c), false) = (corral, peers.is_empty()) else {
        return "—".into();
    };
    let best = match better {
        Better::Lower => peers.iter().copied().fold(f64::INFINITY, f64::min),
        Better::Higher => peers.iter().copied().fold(0.0, f64::max),
    };
    let lead = match better {
        Better::Lower => best / c,
        Better::Higher => c / best,
    };
    if lead >= 1.0 {
        format!("ahead, {lead:.1}×")
    } else {
        format!("**behind**, {lead:.2}×")
    }
}

/// Rows where some Corral path is not ahead of the best peer that has a figure.
fn behind(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows {
        let Some(better) = row.better else { continue };
        let peers: Vec<(Gw, f64)> = Gw::ALL
            .iter()
            .filter(|g| g.peer())
            .filter_map(|&g| Some((g, row.cells[g.index()].value?)))
            .collect();
        for g in Gw::ALL.iter().filter(|g| g.corral()) {
            let Some(c) = row.cells[g.index()].value else {
                continue;
            };
            for &(p, v) in &peers {
                let worse = match better {
                    Better::Lower => c > v,
                    Better::Higher => c < v,
                };
                if worse {
                    out.push(format!(
                        "{}: {} {} vs. {} {}",
                        row.label,
                        g.short(),
                        row.cells[g.index()].text,
                        p.short(),
                        row.cells[p.index()].text
                    ));
                }
            }
        }
    }
    out
}

fn render(bins: &PeerBins, opts: &PeersOpts, main: &[MainFigs], scns: &[ScnFigs]) -> String {
    let version = |r: &Result<(PathBuf, String), String>| match r {
        Ok((_, v)) => v.clone(),
        Err(e) => format!("not measured: {e}"),
    };
    let onemcp = match &bins.onemcp {
        Ok((_, v)) => format!(
            "{v} is installed, but this bench does not drive it yet (its CLI and config could \
             not be checked on the machine the bench was written on)"
        ),
        Err(e) => format!("not measured: {e}"),
    };
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut out = format!(
        "## Side by side with other gateways\n\n\
         Every gateway fronts the same `corral-fixture` binary and is called with the same \
         `tools/call` of its `echo` tool (`{{\"text\":\"hello\"}}`; Corral names it \
         `fx__echo`, the peers `echo`):\n\n\
         - **direct**: the bare client on a fixture child's stdin/stdout (the floor);\n\
         - **Corral stdio**: `corral mcp --standalone`; **Corral bridge**: `corral mcp`, \
         relaying to the daemon of **Corral HTTP**, `corral up` (bearer token on);\n\
         - **mcp-proxy** {}: `mcp-proxy --host 127.0.0.1 --port P --log-level WARNING -- \
         corral-fixture` (stateful sessions, one fixture shared by every session);\n\
         - **supergateway** {}: `supergateway --stdio corral-fixture --outputTransport \
         streamableHttp --port P --logLevel none`, with `--stateful` (a fixture per \
         session) and without (its default: a fixture started for every request);\n\
         - **1MCP** (`@1mcp/agent`): {}.\n\n\
         Peers run with their logging turned down (a log line per request would cost them \
         CPU). HTTP clients: one keep-alive connection per session, `TCP_NODELAY`, \
         `Accept: application/json, text/event-stream`; SSE answers are read until the \
         event with the call's id (the latency stops there). Absolute µs on this VM swing \
         by up to 10× with CPU idle states; compare within one run, as ratios. {nproc} \
         vCPUs are shared by the client, the gateway and its servers.\n\n",
        version(&bins.mcp_proxy),
        version(&bins.supergateway),
        onemcp,
    );

    // The summary table: one row per figure, one column per gateway.
    let mut rows: Vec<Row> = Vec::new();
    let fig_row =
        |label: &str, better: Better, get: &dyn Fn(&MainFigs) -> Option<(f64, String)>| -> Row {
            Row {
                label: label.to_owned(),
                better: Some(better),
                cells: main
                    .iter()
                    .map(|f| match get(f) {
                        Some((v, t)) => Cell::num(v, t),
                        None => Cell::failed("failed"),
                    })
                    .collect(),
            }
        };
    let seq_p = |pick: fn(&util::Stats) -> Duration| {
        move |f: &MainFigs| {
            f.seq
                .as_ref()
                .map(|s| (micros(pick(&s.stats)), us(pick(&s.stats))))
        }
    };
    rows.push(fig_row(
        "sequential p50 (µs)",
        Better::Lower,
        &seq_p(|s| s.p50),
    ));
    rows.push(fig_row(
        "sequential p99 (µs)",
        Better::Lower,
        &seq_p(|s| s.p99),
    ));
    rows.push(fig_row(
        "sequential p99.9 (µs)",
        Better::Lower,
        &seq_p(|s| s.p999),
    ));
    rows.push(fig_row("sequential calls/s", Better::Higher, &|f| {
        f.seq
            .as_ref()
            .map(|s| (s.calls_per_sec, util::thousands(s.calls_per_sec)))
    }));
    rows.push(Row {
        label: "sequential calls measured".into(),
        better: None,
        cells: main
            .iter()
            .map(|f| Cell::text(f.seq.as_ref().map_or("—".into(), |s| s.calls.to_string())))
            .collect(),
    });
    for (li, level) in LEVELS.iter().enumerate() {
        rows.push(fig_row(
            &format!(
                "calls/s, {level} in flight (HTTP: {level} session{})",
                if *level == 1 { "" } else { "s" }
            ),
            Better::Higher,
            &|f| {
                f.tput[li]
                    .as_ref()
                    .map(|t| (t.calls_per_sec, util::thousands(t.calls_per_sec)))
            },
        ));
    }
    for (li, level) in LEVELS.iter().enumerate() {
        rows.push(fig_row(
            &format!("calls/s, {level} in flight / session(s), one vCPU"),
            Better::Higher,
            &|f| {
                f.one_cpu[li]
                    .as_ref()
                    .map(|t| (t.calls_per_sec, util::thousands(t.calls_per_sec)))
            },
        ));
    }
    rows.push(fig_row(
        "p50 (µs), 32 in flight / sessions",
        Better::Lower,
        &|f| {
            f.tput[2]
                .as_ref()
                .map(|t| (micros(t.stats.p50), us(t.stats.p50)))
        },
    ));
    rows.push(Row {
        label: "1 MiB echo p50 (ms)".into(),
        better: Some(Better::Lower),
        cells: main
            .iter()
            .map(|f| match &f.big {
                Some(Ok(b)) => {
                    Cell::num(millis(b.stats.p50), format!("{:.2}", millis(b.stats.p50)))
                }
                Some(Err(e)) => Cell::failed(format!("fails: {}", short_error(e))),
                None => Cell::failed("failed"),
            })
            .collect(),
    });
    // Start-up and tools/list rows, from the scenarios.
    let scn_cell = |gw: Gw, pick: &dyn Fn(Scn, &ScnFigs) -> Option<Cell>, ten: bool| -> Cell {
        let found = Scn::ALL
            .iter()
            .zip(scns)
            .find(|(s, _)| s.gw() == gw && s.ten() == ten);
        match found {
            None => Cell::text(if ten && gw.peer() {
                "— (one server per process)"
            } else {
                "—"
            }),
            Some((_, f)) if f.failed.is_some() => Cell::failed("failed"),
            Some((&s, f)) => pick(s, f).unwrap_or_else(|| Cell::text("—")),
        }
    };
    let list_cell = |s: Scn, f: &ScnFigs| {
        let l = f.list.as_ref()?;
        let ms = millis(l.stats.p50);
        let note = if l.requests > 1 {
            format!(" ({} requests)", l.requests)
        } else {
            String::new()
        };
        let _ = s;
        Some(Cell::num(ms, format!("{ms:.2}{note}")))
    };
    let first_cell = |_: Scn, f: &ScnFigs| {
        let d = util::median(f.starts.iter().map(|r| r.first).collect());
        Some(Cell::num(millis(d), format!("{:.1}", millis(d))))
    };
    let all_cell = |_: Scn, f: &ScnFigs| {
        let v: Vec<Duration> = f.starts.iter().filter_map(|r| r.all).collect();
        if v.is_empty() {
            return None;
        }
        let d = util::median(v);
        Some(Cell::num(millis(d), format!("{:.1}", millis(d))))
    };
    let scn_row = |label: String, pick: &dyn Fn(Scn, &ScnFigs) -> Option<Cell>, ten: bool| Row {
        label,
        better: Some(Better::Lower),
        cells: Gw::ALL.iter().map(|&g| scn_cell(g, pick, ten)).collect(),
    };
    rows.push(scn_row(
        format!("tools/list p50 (ms), {SERVERS} servers × {TOOLS_PER_SERVER} tools"),
        &list_cell,
        true,
    ));
    rows.push(scn_row(
        format!("tools/list p50 (ms), 1 server × {TOOLS_ONE_SERVER} tools"),
        &list_cell,
        false,
    ));
    rows.push(scn_row(
        format!("start → first call (ms), {SERVERS} servers"),
        &first_cell,
        true,
    ));
    rows.push(scn_row(
        format!("start → every server answered (ms), {SERVERS} servers"),
        &all_cell,
        true,
    ));
    rows.push(scn_row(
        "start → first call (ms), 1 server".to_owned(),
        &first_cell,
        false,
    ));
    let mem_row = |label: &str, pick: &dyn Fn(&MainFigs) -> Option<&Memory>, hwm: bool| Row {
        label: label.to_owned(),
        better: Some(Better::Lower),
        cells: main
            .iter()
            .map(|f| match pick(f) {
                Some(m) => {
                    let k = if hwm { m.hwm_kib } else { m.rss_kib };
                    Cell::num(k as f64, mib(k))
                }
                None => Cell::failed("—"),
            })
            .collect(),
    };
    rows.push(mem_row(
        "idle VmRSS (MiB), gateway process",
        &|f| f.idle.as_ref(),
        false,
    ));
    rows.push(mem_row(
        "loaded VmRSS (MiB), after 32 sessions / in flight",
        &|f| f.loaded.as_ref(),
        false,
    ));
    rows.push(mem_row(
        "VmHWM (MiB) at the end (after the 1 MiB calls)",
        &|f| f.end.as_ref(),
        true,
    ));
    rows.push(Row {
        label: "processes under the gateway when loaded: fixtures + others (their VmRSS MiB)"
            .into(),
        better: None,
        cells: main
            .iter()
            .enumerate()
            .map(|(i, f)| match (&f.loaded, Gw::ALL[i]) {
                (_, Gw::Direct) => Cell::text("—"),
                (Some(m), _) => Cell::text(format!(
                    "{} + {} ({})",
                    m.fixtures,
                    m.others,
                    mib(m.fixtures_rss_kib + m.other_children_rss_kib)
                )),
                (None, _) => Cell::text("—"),
            })
            .collect(),
    });
    let cpu_row = |label: &str, get: &dyn Fn(&MainFigs) -> Option<&Fig>| Row {
        label: label.to_owned(),
        better: Some(Better::Lower),
        cells: main
            .iter()
            .enumerate()
            .map(|(i, f)| match (get(f), Gw::ALL[i]) {
                (_, Gw::Direct) => Cell::text("—"),
                (Some(fig), _) => Cell::num(micros(fig.gateway_cpu), us(fig.gateway_cpu)),
                (None, _) => Cell::failed("failed"),
            })
            .collect(),
    };
    rows.push(cpu_row("gateway CPU per call (µs), sequential", &|f| {
        f.seq.as_ref()
    }));
    for (li, level) in LEVELS.iter().enumerate().skip(1) {
        rows.push(cpu_row(
            &format!("gateway CPU per call (µs), {level} in flight / sessions"),
            &|f| f.tput[li].as_ref(),
        ));
    }
    for (li, level) in LEVELS.iter().enumerate() {
        rows.push(cpu_row(
            &format!("gateway CPU per call (µs), {level} in flight / session(s), one vCPU"),
            &|f| f.one_cpu[li].as_ref(),
        ));
    }

    out += &format!(
        "### Summary\n\n\
         Sequential: up to {} calls per gateway in {SEQ_ROUNDS} interleaved rounds, each \
         gateway's block bounded by {:.1} s (so slow gateways have fewer calls: see \
         \"calls measured\"; a p99.9 over fewer than 1,000 calls is close to the maximum). \
         Throughput: {ROUNDS} × {:.1} s per point, interleaved. \"One vCPU\": the same \
         points again with this client and every process of the path pinned to one vCPU \
         (left to the scheduler, a wake-up that crosses to the other, halted vCPU costs the \
         waker several µs on this VM, so CPU per call depends on placement). The last \
         column compares Corral HTTP with the best peer on the row (like for like: every \
         peer is stdio → Streamable HTTP).\n\n",
        opts.calls,
        SEQ_BLOCK_TIME.as_secs_f64(),
        opts.point.as_secs_f64(),
    );
    out += "| figure |";
    for g in Gw::ALL {
        out += &format!(" {} |", g.short());
    }
    out += " Corral HTTP vs. best peer |\n|---|";
    out += &"---:|".repeat(N);
    out += "---|\n";
    for row in &rows {
        out += &format!("| {} |", row.label);
        for c in &row.cells {
            out += &format!(" {} |", c.text);
        }
        out += &format!(" {} |\n", versus(row));
    }

    // Details: CPU of the servers and the client, tails.
    out += "\n### Sequential and throughput, with the servers' and the client's CPU\n\n\
            Gateway CPU: all threads of the gateway's process(es) (the bridge: `corral mcp` \
            plus the daemon), from `/proc/<pid>/task/*/schedstat`. Server CPU: its \
            `corral-fixture` descendants, plus the children it reaped during the block \
            (stateless supergateway: a shell and a fixture per request; clock-tick \
            resolution). Client: this process, `getrusage`. Per call, µs.\n\n\
            | gateway | load | calls | calls/s | p50 | p99 | p99.9 | gateway CPU | server CPU | client CPU |\n\
            |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    let mut churn = 0;
    let loads = LEVELS.len();
    for (li, load) in std::iter::once("sequential".to_owned())
        .chain(LEVELS.iter().map(|l| format!("{l} in flight / sessions")))
        .chain(
            LEVELS
                .iter()
                .map(|l| format!("{l} in flight / sessions, one vCPU")),
        )
        .enumerate()
    {
        for g in Gw::ALL {
            let f = &main[g.index()];
            let fig = if li == 0 {
                f.seq.as_ref()
            } else if li <= loads {
                f.tput[li - 1].as_ref()
            } else {
                f.one_cpu[li - 1 - loads].as_ref()
            };
            let Some(fig) = fig else {
                out += &format!("| {} | {load} | failed | | | | | | | |\n", g.short());
                continue;
            };
            churn += fig.thread_churn;
            out += &format!(
                "| {} | {load} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                g.short(),
                fig.calls,
                util::thousands(fig.calls_per_sec),
                us(fig.stats.p50),
                us(fig.stats.p99),
                us(fig.stats.p999),
                if g == Gw::Direct {
                    "—".into()
                } else {
                    us(fig.gateway_cpu)
                },
                us(fig.fixture_cpu),
                us(fig.client_cpu),
            );
        }
    }
    if churn > 0 {
        out += &format!(
            "\n_A gateway's set of threads changed during {churn} measured block(s); for \
             those its CPU comes from `/proc/<pid>/stat` (clock ticks, but it counts exited \
             threads)._\n"
        );
    }

    out += &format!(
        "\n### 1 MiB echo\n\n\
         `echo` with a `text` of 1 MiB (the request and the answer are each ≈ 1 MiB), up to \
         {BIG_CALLS} calls per gateway in {BIG_ROUNDS} interleaved rounds.\n\n\
         | gateway | calls | p50 ms | p99 ms | answer bytes | error |\n|---|---:|---:|---:|---:|---|\n"
    );
    for g in Gw::ALL {
        match &main[g.index()].big {
            Some(Ok(b)) => {
                out += &format!(
                    "| {} | {} | {:.2} | {:.2} | {} | |\n",
                    g.short(),
                    b.stats.count,
                    millis(b.stats.p50),
                    millis(b.stats.p99),
                    util::thousands(b.answer_bytes as f64)
                )
            }
            Some(Err(e)) => out += &format!("| {} | | | | | {} |\n", g.short(), one_line(e)),
            None => out += &format!("| {} | | | | | not run |\n", g.short()),
        }
    }

    out += &format!(
        "\n### Start-up and `tools/list`\n\n\
         Each scenario started {START_REPEATS} times, interleaved with the others: the time \
         from spawning the gateway to the first successful `echo` (HTTP: including polling \
         the port until it accepts, `initialize` and `notifications/initialized`), and to \
         one answered `echo` from each of the {SERVERS} servers. Then {LIST_CALLS} × \
         `tools/list` (where a gateway has one endpoint per server, one request to each, \
         summed). A peer that fronts one stdio server cannot list {SERVERS} servers' tools \
         in one answer; mcp-proxy can run {SERVERS} named servers, each on its own \
         endpoint; supergateway only one per process, so it is measured with 1 server × \
         `--tools {TOOLS_ONE_SERVER}` (the fixture adds its own {} tools to each list). \
         RSS: the gateway process after the lists.\n\n\
         | gateway | how | servers | start → first call, ms (runs) | median | start → every server answered, median ms | tools/list p50 ms | requests | tools listed | bytes | VmRSS MiB | error |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
        base_tools(scns),
    );
    for (scn, f) in Scn::ALL.iter().zip(scns) {
        let runs: Vec<String> = f
            .starts
            .iter()
            .map(|r| format!("{:.1}", millis(r.first)))
            .collect();
        let med = if f.starts.is_empty() {
            String::new()
        } else {
            format!(
                "{:.1}",
                millis(util::median(f.starts.iter().map(|r| r.first).collect()))
            )
        };
        let all: Vec<Duration> = f.starts.iter().filter_map(|r| r.all).collect();
        let all = if all.is_empty() {
            "—".into()
        } else {
            format!("{:.1}", millis(util::median(all)))
        };
        let (lp, req, tools, bytes) = match &f.list {
            Some(l) => (
                format!("{:.2}", millis(l.stats.p50)),
                l.requests.to_string(),
                l.tools.to_string(),
                util::thousands(l.bytes as f64),
            ),
            None => Default::default(),
        };
        out += &format!(
            "| {} | {} | {med} | {all} | {lp} | {req} | {tools} | {bytes} | {} | {} |\n",
            scn.label(),
            runs.join(", "),
            f.memory.as_ref().map_or(String::new(), |m| mib(m.rss_kib)),
            f.failed.as_deref().map(one_line).unwrap_or_default(),
        );
    }

    out += &"\n### Memory\n\n\
            `VmRSS` / `VmHWM` of the gateway's main process (`/proc/<pid>/status`; the Node \
            and Python peers: the `node` / `python` process), and of every process under it \
            apart. Idle: after one session made 20 calls and {IDLE} of idle. Loaded: after \
            the throughput runs, with 32 sessions (stdio: one) open. End: after the 1 MiB \
            calls.\n\n\
            | gateway | state | VmRSS MiB | VmHWM MiB | threads | fixtures under it | their VmRSS MiB | other processes under it | their VmRSS MiB |\n\
            |---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        .replace("{IDLE}", &format!("{:.0} s", IDLE.as_secs_f64()));
    for g in Gw::ALL {
        let f = &main[g.index()];
        for (state, m) in [("idle", &f.idle), ("loaded", &f.loaded), ("end", &f.end)] {
            if let Some(m) = m {
                out += &format!(
                    "| {} | {state} | {} | {} | {} | {} | {} | {} | {} |\n",
                    g.short(),
                    mib(m.rss_kib),
                    mib(m.hwm_kib),
                    m.threads,
                    m.fixtures,
                    mib(m.fixtures_rss_kib),
                    m.others,
                    mib(m.other_children_rss_kib)
                );
            }
        }
    }
    out += "\n_Corral bridge: the `corral mcp` process; its daemon is the Corral HTTP \
            column's (the two share it). Direct: the fixture itself._\n";

    // Issue 8's targets, as ratios within this run.
    let d_seq = main[Gw::Direct.index()].seq.as_ref();
    let tp = |g: Gw, li: usize| main[g.index()].tput[li].as_ref();
    let one = |g: Gw, li: usize| main[g.index()].one_cpu[li].as_ref();
    let mut checks: Vec<(String, Option<bool>)> = Vec::new();
    let ratio_check =
        |label: &str, a: Option<f64>, b: Option<f64>, ok: &dyn Fn(f64) -> bool, pct: bool| match (
            a, b,
        ) {
            (Some(a), Some(b)) if b > 0.0 => {
                let r = a / b;
                let shown = if pct {
                    format!("{:.0}%", r * 100.0)
                } else {
                    format!("{r:.2}×")
                };
                (format!("{label}: {shown}"), Some(ok(r)))
            }
            _ => (format!("{label}: not measured"), None),
        };
    let p50 = |f: Option<&Fig>| f.map(|f| micros(f.stats.p50));
    let runs = format!("{:.1} s runs", opts.point.as_secs_f64());
    let cps = |f: Option<&Fig>| f.map(|f| f.calls_per_sec);
    let p50_within = |label: String, a: Option<&Fig>, b: Option<&Fig>, max: f64| {
        ratio_check(&label, p50(a), p50(b), &|r| r <= max, false)
    };
    let cps_at_least = |label: String, a: Option<&Fig>, b: Option<&Fig>, min: f64| {
        ratio_check(&label, cps(a), cps(b), &|r| r >= min, true)
    };
    let seq = |g: Gw| main[g.index()].seq.as_ref();
    checks.push(p50_within(
        "Corral stdio p50 ≤ 2× direct p50 (sequential)".into(),
        seq(Gw::Stdio),
        d_seq,
        2.0,
    ));
    checks.push(p50_within(
        "Corral HTTP p50 ≤ 3× direct stdio p50 (sequential)".into(),
        seq(Gw::Http),
        d_seq,
        3.0,
    ));
    // The same four ratios left to the scheduler and with every process on one vCPU.
    for (pinned, how) in [(false, runs.as_str()), (true, "one vCPU")] {
        let fig = |g: Gw, li: usize| if pinned { one(g, li) } else { tp(g, li) };
        checks.push(p50_within(
            format!("Corral stdio p50 ≤ 2× direct p50 (1 in flight, {how})"),
            fig(Gw::Stdio, 0),
            fig(Gw::Direct, 0),
            2.0,
        ));
        checks.push(p50_within(
            format!("Corral HTTP p50 ≤ 3× direct stdio p50 (1 session / 1 in flight, {how})"),
            fig(Gw::Http, 0),
            fig(Gw::Direct, 0),
            3.0,
        ));
        checks.push(cps_at_least(
            format!("Corral stdio calls/s with 32 in flight ≥ 70% of direct ({how})"),
            fig(Gw::Stdio, 2),
            fig(Gw::Direct, 2),
            0.7,
        ));
        checks.push(cps_at_least(
            format!("Corral HTTP calls/s with 8 sessions ≥ 50% of direct (8 in flight, {how})"),
            fig(Gw::Http, 1),
            fig(Gw::Direct, 1),
            0.5,
        ));
    }
    for (g, li, pinned, what) in [
        (Gw::Stdio, 2, false, "Corral stdio, 32 in flight"),
        (Gw::Http, 1, false, "Corral HTTP, 8 sessions"),
        (
            Gw::Bridge,
            2,
            false,
            "Corral bridge (+ daemon), 32 in flight",
        ),
        (Gw::Stdio, 2, true, "Corral stdio, 32 in flight, one vCPU"),
        (Gw::Http, 1, true, "Corral HTTP, 8 sessions, one vCPU"),
        (
            Gw::Bridge,
            2,
            true,
            "Corral bridge (+ daemon), 32 in flight, one vCPU",
        ),
    ] {
        let fig = if pinned { one(g, li) } else { tp(g, li) };
        let cpu = fig.map(|f| f.gateway_cpu);
        checks.push(match cpu {
            Some(c) => (
                format!(
                    "CPU per forwarded call ≤ {} µs, {what}: {} µs",
                    CPU_TARGET.as_micros(),
                    us(c)
                ),
                Some(c <= CPU_TARGET),
            ),
            None => (
                format!("CPU per forwarded call, {what}: not measured"),
                None,
            ),
        });
    }
    let behind = behind(&rows);
    checks.push((
        format!(
            "every Corral path ahead of every peer on every row: {}",
            if behind.is_empty() {
                "yes".to_owned()
            } else {
                format!("no, {} case(s) below", behind.len())
            }
        ),
        Some(behind.is_empty()),
    ));
    out += "\n### Issue 8's targets (ratios within this run)\n\n";
    for (text, ok) in checks {
        let mark = match ok {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "—",
        };
        out += &format!("- {mark}: {text}\n");
    }
    for b in behind {
        out += &format!("  - behind: {b}\n");
    }
    out
}

/// The fixture's own tools (listed besides `tool_0` … `tool_{N-1}`).
fn base_tools(scns: &[ScnFigs]) -> String {
    Scn::ALL
        .iter()
        .zip(scns)
        .find(|(s, _)| **s == Scn::Direct500)
        .and_then(|(_, f)| f.list.as_ref())
        .map_or("?".into(), |l| {
            l.tools.saturating_sub(TOOLS_ONE_SERVER).to_string()
        })
}

/// An error on one line for a table: HTML tags and entities dropped, whitespace
/// collapsed, at most 160 characters.
fn one_line(e: &str) -> String {
    let mut text = String::with_capacity(e.len());
    let mut in_tag = false;
    for c in e.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if in_tag => {}
            '|' => text.push('/'),
            c => text.push(c),
        }
    }
    let text = text.replace("&nbsp;", " ");
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // A stack trace's first frame ends the useful part.
    if let Some(e) = line.find("Error")
        && let Some(i) = line[e..].find(" at ")
    {
        line.truncate(e + i);
    }
    line.chars().take(160).collect()
}

/// An error short enough for a table cell.
fn short_error(e: &str) -> String {
    if let Some(i) = e.find("status ") {
        let code: String = e[i + 7..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if !code.is_empty() {
            return format!("HTTP {code}");
        }
    }
    one_line(e).chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_put_every_gateway_in_every_position() {
        let mut count = [[0; N]; N];
        for r in 0..2 * N {
            for (pos, i) in order(r).iter().enumerate() {
                count[*i][pos] += 1;
            }
        }
        assert!(count.iter().flatten().all(|&c| c == 2), "{count:?}");
    }

    #[test]
    fn shell_words_quote_everything() {
        assert_eq!(
            shell_words(&["/a b/fx".into(), "it's".into()]),
            r"'/a b/fx' 'it'\''s'"
        );
    }

    #[test]
    fn versus_compares_corral_http_with_the_best_peer() {
        let mut cells = vec![Cell::text("—"); N];
        cells[Gw::Http.index()] = Cell::num(100.0, "100".into());
        cells[Gw::McpProxy.index()] = Cell::num(4000.0, "4000".into());
        cells[Gw::SgStateful.index()] = Cell::num(50.0, "50".into());
        let row = Row {
            label: "x".into(),
            better: Some(Better::Lower),
            cells,
        };
        assert_eq!(versus(&row), "**behind**, 0.50×");
        assert_eq!(behind(std::slice::from_ref(&row)).len(), 1);
        let mut row = Row {
            better: Some(Better::Higher),
            ..row
        };
        assert_eq!(versus(&row), "**behind**, 0.03×");
        row.cells[Gw::McpProxy.index()] = Cell::failed("fails");
        assert_eq!(versus(&row), "ahead, 2.0×");
        assert!(behind(std::slice::from_ref(&row)).is_empty());
    }

    #[test]
    fn errors_fit_on_one_line() {
        assert_eq!(
            one_line(
                "status 413: <!DOCTYPE html>\n<html><body><pre>PayloadTooLargeError: too large<br> &nbsp; at readStream (/x/y.js:1)</pre>"
            ),
            "status 413: PayloadTooLargeError: too large"
        );
    }

    #[test]
    fn short_errors_name_the_http_status() {
        assert_eq!(
            short_error("tools/call over HTTP: status 413: PayloadTooLargeError"),
            "HTTP 413"
        );
    }
}
