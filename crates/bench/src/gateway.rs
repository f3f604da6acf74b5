//! The gateway: one `tools/call` of the fixture's `echo` through `corral mcp
//! --standalone` (stdio), `corral up` (Streamable HTTP) and the default `corral mcp`
//! (a bridge to the daemon `corral up` runs), against the fixture called directly by a
//! bare client: sequential latency, throughput at 1, 8 and 32 calls in flight (HTTP:
//! sessions), the gateway's CPU per forwarded call, and its idle RSS with 1 and 10
//! servers.
//!
//! The paths run side by side (three fixture children: one bare, one under `mcp
//! --standalone`, one under the daemon, which serves both HTTP and the bridge) and are
//! measured in interleaved blocks, so that drift in the machine's state hits them alike.
//! Only ratios within one run are meaningful.

use crate::http::Conn;
use crate::util::{self, Stats, TempDir, us};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant};

const ARGS: &str = r#"{"text":"hello"}"#;
/// Warm-up calls per path (fewer if they take longer than [`WARMUP_MAX`]).
const WARMUP: usize = 1_000;
const WARMUP_MAX: Duration = Duration::from_secs(2);
/// Sequential calls per block.
const BLOCK: usize = 1_000;
/// Longest the sequential phase may take; fewer (or smaller) blocks if the warm-up says
/// the requested calls would take longer.
const SEQ_BUDGET: Duration = Duration::from_secs(30);
/// Calls in flight (stdio, direct) or concurrent sessions (HTTP) in the throughput runs.
pub const LEVELS: [usize; 3] = [1, 8, 32];
/// Rounds of each throughput point, interleaved with the other paths.
const ROUNDS: usize = 2;
/// Idle time before the RSS is read.
const IDLE: Duration = Duration::from_secs(2);
/// Servers configured for the idle-RSS figure.
const RSS_SERVERS: usize = 10;
/// The whole `gateway` run normally takes about a minute; past this, something hangs
/// and the bench exits (its children get SIGTERM through `PR_SET_PDEATHSIG`).
const WATCHDOG: Duration = Duration::from_secs(300);
/// Issue 8's target for the gateway's CPU per forwarded call.
const CPU_TARGET: Duration = Duration::from_micros(15);

/// Settings of the `gateway` benchmark.
pub struct GatewayOpts {
    /// Sequential calls per path.
    pub calls: usize,
    /// Duration of one round of one throughput point.
    pub point: Duration,
}

/// The paths measured.
const ROUTES: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    /// The bare client on a fixture child.
    Direct,
    /// `corral mcp --standalone`.
    Stdio,
    /// `corral up`, one session per connection.
    Http,
    /// `corral mcp` (the default): a bridge process relaying stdio to the daemon that
    /// `corral up` runs, over its control socket.
    Bridge,
}

impl Route {
    const ALL: [Route; ROUTES] = [Route::Direct, Route::Stdio, Route::Http, Route::Bridge];

    fn label(self) -> &'static str {
        match self {
            Route::Direct => "direct (bare client)",
            Route::Stdio => "gateway, stdio (`mcp --standalone`)",
            Route::Http => "gateway, HTTP (`up`)",
            Route::Bridge => "gateway, stdio via daemon (`mcp` bridge)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Route::Direct => "direct",
            Route::Stdio => "stdio",
            Route::Http => "HTTP",
            Route::Bridge => "bridge",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The order of the paths in sequential block `b`: rotated by `b`, and reversed every
/// other cycle, so that every path takes every position equally often.
fn block_order(b: usize) -> [Route; ROUTES] {
    let mut order = Route::ALL;
    order.rotate_left(b % ROUTES);
    if (b / ROUTES) % 2 == 1 {
        order.reverse();
    }
    order
}

// ---------------------------------------------------------------------------------------
// Processes

/// A child process that is always stopped: `stop` (or drop) waits `graceful` for it to
/// exit on its own, then sends SIGTERM and waits 5 s, then SIGKILL.
struct Proc {
    child: Child,
    graceful: Duration,
    done: bool,
}

impl Proc {
    fn spawn(cmd: &mut Command, graceful: Duration) -> Result<Proc, String> {
        // If the bench dies (or the watchdog ends it), the child gets SIGTERM.
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        Ok(Proc {
            child,
            graceful,
            done: false,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        if self.exits_within(self.graceful) {
            return;
        }
        self.signal(libc::SIGTERM);
        if self.exits_within(Duration::from_secs(5)) {
            return;
        }
        eprintln!(
            "gateway: pid {} ignored SIGTERM for 5 s; sending SIGKILL",
            self.pid()
        );
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
        unsafe {
            libc::kill(self.pid() as libc::pid_t, sig);
        }
    }

    fn exits_within(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return true,
                Ok(None) if Instant::now() >= deadline => return false,
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The fixture child of a running gateway.
fn fixture_child(gateway: u32) -> Result<u32, String> {
    let kids: Vec<u32> = util::children_of(gateway)
        .into_iter()
        .filter(|(_, comm)| comm == "corral-fixture")
        .map(|(pid, _)| pid)
        .collect();
    match kids[..] {
        [pid] => Ok(pid),
        _ => Err(format!(
            "expected one corral-fixture child of the gateway (pid {gateway}), found {kids:?}"
        )),
    }
}

/// Writes `<dir>/corral.toml` with the fixture as `servers` (token auth, the default).
fn write_config(dir: &Path, fixture: &Path, servers: &[String]) -> Result<PathBuf, String> {
    // A JSON string is a valid TOML basic string.
    let command = serde_json::to_string(&fixture.to_string_lossy()).expect("a string");
    let mut text = String::from(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nauth = \"token\"\nbuiltin_tools = true\n",
    );
    for name in servers {
        text += &format!("\n[servers.{name}]\ncommand = {command}\n");
    }
    let path = dir.join("corral.toml");
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------
// JSON-RPC lines

fn request(buf: &mut Vec<u8>, tool: &str, id: u64) {
    let _ = write!(
        buf,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{ARGS}}}}}"#
    );
}

fn initialize(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"corral-bench","version":"0"}}}}}}"#,
        corral_supervisor::PROTOCOL_VERSION
    )
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The numeric id of a response; `None` for notifications and requests from the server
/// (they carry a `method`).
fn response_id(msg: &str) -> Option<u64> {
    if msg.contains(r#""method":"#) {
        return None;
    }
    let start = msg.find(r#""id":"#)? + 5;
    let digits = msg[start..].trim_start();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

fn check_echo(msg: &str) -> Result<(), String> {
    if msg.contains(r#""result""#) && msg.contains("hello") && !msg.contains(r#""isError":true"#) {
        Ok(())
    } else {
        Err(format!(
            "unexpected answer to echo: {}",
            msg.trim_end().chars().take(300).collect::<String>()
        ))
    }
}

// ---------------------------------------------------------------------------------------
// Newline-delimited JSON-RPC client (the bare fixture, or `corral mcp`)

/// A blocking client on a child's stdin/stdout. Fields drop in order: stdin first (EOF
/// asks the child to exit), then the process (waited for, then signalled).
struct LineClient {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    tool: &'static str,
    id: u64,
    buf: Vec<u8>,
    line: String,
    proc: Proc,
}

impl LineClient {
    /// Spawns `program args` and does the MCP handshake.
    fn start(program: &Path, args: &[&str], tool: &'static str) -> Result<LineClient, String> {
        let mut proc = Proc::spawn(
            Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
            Duration::from_secs(5),
        )?;
        let stdin = proc.child.stdin.take();
        let stdout = BufReader::with_capacity(64 * 1024, proc.child.stdout.take().expect("piped"));
        let mut c = LineClient {
            stdin,
            stdout,
            tool,
            id: 1,
            buf: Vec::with_capacity(4096),
            line: String::with_capacity(256),
            proc,
        };
        c.send(initialize(1).as_bytes())?;
        c.read_response(1)?;
        if !c.line.contains(r#""result""#) {
            return Err(format!("initialize failed: {}", c.line.trim_end()));
        }
        c.send(INITIALIZED.as_bytes())?;
        Ok(c)
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().expect("open until stop");
        stdin
            .write_all(msg)
            .and_then(|()| stdin.write_all(b"\n"))
            .map_err(|e| format!("writing to pid {}: {e}", self.proc.pid()))
    }

    fn read_line(&mut self) -> Result<(), String> {
        read_line(&mut self.stdout, &mut self.line, self.proc.pid())
    }

    /// Reads lines until the response with `id` (skipping notifications).
    fn read_response(&mut self, id: u64) -> Result<(), String> {
        loop {
            self.read_line()?;
            if response_id(&self.line) == Some(id) {
                return Ok(());
            }
        }
    }

    /// `calls` round trips, one at a time; the latency of each in ns.
    fn sequential(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            self.id += 1;
            let id = self.id;
            self.buf.clear();
            request(&mut self.buf, self.tool, id);
            self.buf.push(b'\n');
            let start = Instant::now();
            let stdin = self.stdin.as_mut().expect("open until stop");
            stdin
                .write_all(&self.buf)
                .map_err(|e| format!("writing to pid {}: {e}", self.proc.pid()))?;
            self.read_response(id)?;
            samples.push(start.elapsed().as_nanos() as u64);
            check_echo(&self.line)?;
        }
        Ok(samples)
    }

    /// Keeps `in_flight` calls outstanding for `dur`, then collects the rest. One thread:
    /// it reads every answer already buffered, then sends as many new requests in one
    /// write. (With ≤ 32 small requests outstanding neither pipe can fill, so blocking on
    /// the read side cannot deadlock.) The latency of each call in ns.
    fn pipelined(&mut self, in_flight: usize, dur: Duration) -> Result<Vec<u64>, String> {
        const RING: usize = 1 << 16;
        let pid = self.proc.pid();
        let t0 = Instant::now();
        let deadline = t0 + dur;
        // (id, send time in ns since t0) by id % RING.
        let mut sent_at = vec![(0u64, 0u64); RING];
        let mut samples = Vec::with_capacity(400_000);
        let LineClient {
            stdin,
            stdout,
            tool,
            id,
            buf,
            line,
            ..
        } = self;
        let stdin = stdin.as_mut().expect("open until stop");
        let mut send = |k: usize, buf: &mut Vec<u8>, id: &mut u64, sent_at: &mut [(u64, u64)]| {
            buf.clear();
            let now = t0.elapsed().as_nanos() as u64;
            for _ in 0..k {
                *id += 1;
                sent_at[*id as usize % RING] = (*id, now);
                request(buf, tool, *id);
                buf.push(b'\n');
            }
            stdin
                .write_all(buf)
                .map_err(|e| format!("writing to pid {pid}: {e}"))
        };
        send(in_flight, buf, id, &mut sent_at)?;
        let mut outstanding = in_flight;
        let mut stopping = false;
        while outstanding > 0 {
            let mut answered = 0;
            loop {
                read_line(stdout, line, pid)?;
                if let Some(rid) = response_id(line) {
                    let now = t0.elapsed().as_nanos() as u64;
                    let (sid, at) = sent_at[rid as usize % RING];
                    if sid != rid {
                        return Err(format!("answer with an unknown id: {}", line.trim_end()));
                    }
                    check_echo(line)?;
                    samples.push(now.saturating_sub(at));
                    answered += 1;
                    outstanding -= 1;
                }
                if !stdout.buffer().contains(&b'\n') {
                    break;
                }
            }
            stopping = stopping || Instant::now() >= deadline;
            if !stopping && answered > 0 {
                send(answered, buf, id, &mut sent_at)?;
                outstanding += answered;
            }
        }
        Ok(samples)
    }

    /// Closes stdin (both the fixture and `corral mcp` exit at EOF) and waits.
    fn stop(mut self) {
        drop(self.stdin.take());
        self.proc.stop();
    }
}

fn read_line(r: &mut BufReader<ChildStdout>, line: &mut String, pid: u32) -> Result<(), String> {
    line.clear();
    match r.read_line(line) {
        Ok(0) => Err(format!("pid {pid} closed its stdout")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("reading the stdout of pid {pid}: {e}")),
    }
}

// ---------------------------------------------------------------------------------------
// HTTP: `corral up` and its sessions

/// A running `corral up`.
struct HttpGateway {
    addr: SocketAddr,
    token: Option<String>,
    proc: Proc,
}

impl HttpGateway {
    fn start(corral: &Path, config: &Path) -> Result<HttpGateway, String> {
        let mut proc = Proc::spawn(
            Command::new(corral)
                .arg("-c")
                .arg(config)
                .arg("up")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
            Duration::ZERO,
        )?;
        // A thread reads the two announcement lines, then drains stdout to EOF.
        let stdout = proc.child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        let next = || {
            rx.recv_timeout(Duration::from_secs(30))
                .map_err(|_| "`corral up` printed no endpoint within 30 s (or exited)".to_owned())
        };
        let endpoint = next()?;
        let addr = endpoint
            .strip_prefix("corral: MCP endpoint http://")
            .and_then(|r| r.strip_suffix("/mcp"))
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .ok_or_else(|| format!("unexpected first line from `corral up`: {endpoint:?}"))?;
        let token_line = next()?;
        let token = match token_line.strip_prefix("corral: bearer token ") {
            Some(rest) => Some(rest.split_whitespace().next().unwrap_or("").to_owned()),
            None if token_line.contains("no token") => None,
            None => {
                return Err(format!(
                    "unexpected second line from `corral up`: {token_line:?}"
                ));
            }
        };
        Ok(HttpGateway { addr, token, proc })
    }

    fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// A new MCP session on its own keep-alive connection.
    fn session(&self, tool: &'static str) -> Result<Session, String> {
        let mut conn = Conn::new(self.addr, "/mcp", self.token.clone());
        let r = conn.post(initialize(1).as_bytes())?;
        let msg = r.messages().into_iter().find(|m| response_id(m) == Some(1));
        let (Some(session), 200, Some(msg)) = (r.session_id, r.status, msg) else {
            return Err(format!(
                "initialize over HTTP failed: status {}, {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        };
        let v: serde_json::Value =
            serde_json::from_str(&msg).map_err(|e| format!("initialize result: {e}"))?;
        conn.session = Some(session);
        conn.protocol = v["result"]["protocolVersion"].as_str().map(str::to_owned);
        let r = conn.post(INITIALIZED.as_bytes())?;
        if r.status != 202 {
            return Err(format!(
                "notifications/initialized over HTTP: status {}",
                r.status
            ));
        }
        Ok(Session {
            conn,
            tool,
            id: 1,
            body: Vec::with_capacity(256),
        })
    }

    fn stop(mut self) {
        self.proc.stop();
    }
}

/// One MCP session over HTTP.
struct Session {
    conn: Conn,
    tool: &'static str,
    id: u64,
    body: Vec<u8>,
}

impl Session {
    /// One `tools/call` round trip, in ns.
    fn call(&mut self) -> Result<u64, String> {
        self.id += 1;
        let id = self.id;
        self.body.clear();
        request(&mut self.body, self.tool, id);
        let start = Instant::now();
        let r = self.conn.post(&self.body)?;
        let ns = start.elapsed().as_nanos() as u64;
        if r.status != 200 {
            return Err(format!(
                "tools/call over HTTP: status {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        let msgs = r.messages();
        let msg = msgs
            .iter()
            .find(|m| response_id(m) == Some(id))
            .ok_or_else(|| format!("no response with id {id} in {msgs:?}"))?;
        check_echo(msg)?;
        Ok(ns)
    }

    fn sequential(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        (0..calls).map(|_| self.call()).collect()
    }

    /// `POST tools/list`; the body of the answer.
    fn tools_list(&mut self) -> Result<String, String> {
        self.id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list","params":{{}}}}"#,
            self.id
        );
        let r = self.conn.post(body.as_bytes())?;
        Ok(String::from_utf8_lossy(&r.body).into_owned())
    }
}

/// Each session makes sequential calls on its own thread for `dur`; the latency of every
/// call in ns.
fn concurrent_sessions(sessions: &mut [Session], dur: Duration) -> Result<Vec<u64>, String> {
    let start = Barrier::new(sessions.len());
    let per_session: Vec<Result<Vec<u64>, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = sessions
            .iter_mut()
            .map(|session| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let deadline = Instant::now() + dur;
                    let mut samples = Vec::with_capacity(100_000);
                    while Instant::now() < deadline {
                        samples.push(session.call()?);
                    }
                    Ok(samples)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("session thread"))
            .collect()
    });
    let mut all = Vec::new();
    for r in per_session {
        all.extend(r?);
    }
    Ok(all)
}

// ---------------------------------------------------------------------------------------
// Accounting

/// The processes on one path, for CPU deltas.
#[derive(Clone, Copy)]
struct Pids {
    /// The gateway's processes: none (direct), one, or the bridge and the daemon.
    gateway: [Option<u32>; 2],
    fixture: u32,
}

impl Pids {
    fn direct(fixture: u32) -> Pids {
        Pids {
            gateway: [None, None],
            fixture,
        }
    }

    /// One gateway process and its fixture child.
    fn gateway(pid: u32) -> Result<Pids, String> {
        Ok(Pids {
            gateway: [Some(pid), None],
            fixture: fixture_child(pid)?,
        })
    }
}

struct Snapshot {
    gateway: Duration,
    gateway_ticks: Duration,
    gateway_tasks: Vec<u32>,
    fixture: Duration,
    client: Duration,
}

impl Snapshot {
    fn now(p: Pids) -> Snapshot {
        let pids = p.gateway.iter().flatten().copied();
        Snapshot {
            gateway: pids.clone().filter_map(util::proc_cpu).sum(),
            gateway_ticks: pids.clone().filter_map(util::proc_stat_cpu).sum(),
            gateway_tasks: pids.flat_map(util::task_ids).collect(),
            fixture: util::proc_cpu(p.fixture).unwrap_or_default(),
            client: util::cpu_self(),
        }
    }
}

/// Accumulated measurements of one path at one load.
#[derive(Default)]
struct Acc {
    samples: Vec<u64>,
    wall: Duration,
    gateway_cpu: Duration,
    fixture_cpu: Duration,
    client_cpu: Duration,
    /// Blocks during which the gateway's set of threads changed: the per-thread sums
    /// lose the CPU of a thread that exited, so those blocks use `/proc/<pid>/stat`.
    thread_churn: usize,
}

impl Acc {
    fn measure(
        &mut self,
        pids: Pids,
        f: impl FnOnce() -> Result<Vec<u64>, String>,
    ) -> Result<(), String> {
        let before = Snapshot::now(pids);
        let t0 = Instant::now();
        let samples = f()?;
        let wall = t0.elapsed();
        let after = Snapshot::now(pids);
        self.samples.extend(samples);
        self.wall += wall;
        if before.gateway_tasks == after.gateway_tasks {
            self.gateway_cpu += after.gateway.saturating_sub(before.gateway);
        } else {
            self.gateway_cpu += after.gateway_ticks.saturating_sub(before.gateway_ticks);
            self.thread_churn += 1;
        }
        self.fixture_cpu += after.fixture.saturating_sub(before.fixture);
        self.client_cpu += after.client.saturating_sub(before.client);
        Ok(())
    }

    fn finish(self) -> Fig {
        let calls = self.samples.len();
        Fig {
            stats: Stats::of(self.samples),
            calls_per_sec: calls as f64 / self.wall.as_secs_f64(),
            gateway_cpu: self.gateway_cpu / calls as u32,
            fixture_cpu: self.fixture_cpu / calls as u32,
            client_cpu: self.client_cpu / calls as u32,
            thread_churn: self.thread_churn,
        }
    }
}

/// One path's figures at one load.
struct Fig {
    stats: Stats,
    calls_per_sec: f64,
    /// Per call.
    gateway_cpu: Duration,
    fixture_cpu: Duration,
    client_cpu: Duration,
    thread_churn: usize,
}

/// Memory of a gateway process and its children.
struct Memory {
    rss_kib: u64,
    hwm_kib: u64,
    threads: u64,
    fixtures: usize,
    fixtures_rss_kib: u64,
    other_children_rss_kib: u64,
}

impl Memory {
    fn of(pid: u32) -> Result<Memory, String> {
        let field = |p: u32, f: &str| util::proc_status_field(p, f);
        let missing = || format!("cannot read /proc/{pid}/status");
        let mut m = Memory {
            rss_kib: field(pid, "VmRSS").ok_or_else(missing)?,
            hwm_kib: field(pid, "VmHWM").ok_or_else(missing)?,
            threads: field(pid, "Threads").ok_or_else(missing)?,
            fixtures: 0,
            fixtures_rss_kib: 0,
            other_children_rss_kib: 0,
        };
        for (child, comm) in util::children_of(pid) {
            let rss = field(child, "VmRSS").unwrap_or(0);
            if comm == "corral-fixture" {
                m.fixtures += 1;
                m.fixtures_rss_kib += rss;
            } else {
                m.other_children_rss_kib += rss;
            }
        }
        Ok(m)
    }
}

// ---------------------------------------------------------------------------------------
// The benchmark

/// Runs every part and renders the tables.
pub fn run(fixture: &Path, corral: &Path, opts: &GatewayOpts) -> Result<String, String> {
    let started = Instant::now();
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!(
            "corral-bench: the gateway benchmark did not finish within {WATCHDOG:?}; giving up"
        );
        std::process::exit(1);
    });
    let dir = TempDir::new("gateway");
    let config = write_config(dir.path(), fixture, &["fx".to_owned()])?;
    let cfg = config.to_string_lossy().into_owned();

    eprintln!(
        "gateway: starting the bare fixture, `corral mcp --standalone`, `corral up` and a `corral mcp` bridge"
    );
    let mut direct = LineClient::start(fixture, &[], "echo")?;
    let mut stdio = LineClient::start(corral, &["-c", &cfg, "mcp", "--standalone"], "fx__echo")?;
    // The daemon first, so that the bridge connects to it instead of starting its own.
    let http = HttpGateway::start(corral, &config)?;
    let mut bridge = LineClient::start(corral, &["-c", &cfg, "mcp"], "fx__echo")?;
    let mut sessions = (0..LEVELS[LEVELS.len() - 1])
        .map(|_| http.session("fx__echo"))
        .collect::<Result<Vec<_>, _>>()?;

    // Warm-up; its first calls also wait for the gateways' servers to be ready.
    eprintln!("gateway: warm-up, up to {WARMUP} calls or {WARMUP_MAX:?} per path");
    let mut per_call = [Duration::ZERO; ROUTES];
    for route in Route::ALL {
        let t0 = Instant::now();
        let mut done = 0;
        while done < WARMUP && t0.elapsed() < WARMUP_MAX {
            match route {
                Route::Direct => direct.sequential(10)?,
                Route::Stdio => stdio.sequential(10)?,
                Route::Http => sessions[0].sequential(10)?,
                Route::Bridge => bridge.sequential(10)?,
            };
            done += 10;
        }
        per_call[route.index()] = t0.elapsed() / done as u32;
    }
    let daemon = Pids::gateway(http.pid())?;
    let pids = [
        Pids::direct(direct.pid()),
        Pids::gateway(stdio.pid())?,
        daemon,
        Pids {
            gateway: [Some(bridge.pid()), Some(http.pid())],
            fixture: daemon.fixture,
        },
    ];

    // Sequential latency, in blocks that rotate the order of the paths.
    let round_trip: Duration = per_call.iter().sum();
    let wanted_blocks = opts.calls.div_ceil(BLOCK);
    let (blocks, block) = if round_trip * BLOCK as u32 * wanted_blocks as u32 <= SEQ_BUDGET {
        (wanted_blocks, BLOCK)
    } else if round_trip * BLOCK as u32 <= SEQ_BUDGET {
        (
            (SEQ_BUDGET.as_secs_f64() / (round_trip * BLOCK as u32).as_secs_f64()) as usize,
            BLOCK,
        )
    } else {
        let block = (SEQ_BUDGET.as_secs_f64() / round_trip.as_secs_f64()) as usize;
        (1, block.max(20))
    };
    let warm: Vec<String> = Route::ALL
        .iter()
        .map(|r| format!("{} {}", r.short(), us(per_call[r.index()])))
        .collect();
    eprintln!(
        "gateway: sequential, {blocks} blocks of {block} calls per path, interleaved \
         (warm-up µs per call: {})",
        warm.join(", ")
    );
    let mut seq: [Acc; ROUTES] = Default::default();
    for b in 0..blocks {
        for route in block_order(b) {
            let i = route.index();
            seq[i].measure(pids[i], || match route {
                Route::Direct => direct.sequential(block),
                Route::Stdio => stdio.sequential(block),
                Route::Http => sessions[0].sequential(block),
                Route::Bridge => bridge.sequential(block),
            })?;
        }
    }
    let seq = seq.map(Acc::finish);

    // Throughput: each load level in ROUNDS interleaved rounds.
    eprintln!(
        "gateway: throughput at {LEVELS:?} in flight / sessions, {ROUNDS} × {:?} per point",
        opts.point
    );
    let mut tput: Vec<[Fig; ROUTES]> = Vec::new();
    for level in LEVELS {
        let mut acc: [Acc; ROUTES] = Default::default();
        for round in 0..ROUNDS {
            let mut order = Route::ALL;
            if round % 2 == 1 {
                order.reverse();
            }
            for route in order {
                let i = route.index();
                acc[i].measure(pids[i], || match route {
                    Route::Direct => direct.pipelined(level, opts.point),
                    Route::Stdio => stdio.pipelined(level, opts.point),
                    Route::Http => concurrent_sessions(&mut sessions[..level], opts.point),
                    Route::Bridge => bridge.pipelined(level, opts.point),
                })?;
            }
        }
        tput.push(acc.map(Acc::finish));
    }

    // Memory of the loaded gateways, then stop everything before the idle runs.
    let loaded = Loaded {
        stdio: Memory::of(stdio.pid())?,
        daemon: Memory::of(http.pid())?,
        bridge: Memory::of(bridge.pid())?,
    };
    eprintln!("gateway: stopping; idle RSS with 1 and {RSS_SERVERS} servers");
    drop(sessions);
    bridge.stop();
    direct.stop();
    stdio.stop();
    http.stop();
    let idle1 = idle_memory(fixture, corral, 1)?;
    let idle10 = idle_memory(fixture, corral, RSS_SERVERS)?;
    eprintln!("gateway: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(render(
        blocks * block,
        block,
        opts.point,
        &seq,
        &tput,
        &loaded,
        &idle1,
        &idle10,
    ))
}

/// Memory of the gateway processes after the load runs.
struct Loaded {
    stdio: Memory,
    daemon: Memory,
    bridge: Memory,
}

/// `gateway-profile stdio|http N SECS`: starts one gateway, warms it up, prints its pid to
/// stderr, waits [`PROFILE_ATTACH`] (time to attach `perf record -p PID`), then keeps N
/// calls in flight (HTTP: N sessions) for SECS seconds and prints calls/s and the
/// gateway's CPU per call. A helper for profiling, not a benchmark.
pub fn profile(
    fixture: &Path,
    corral: &Path,
    route: &str,
    n: usize,
    secs: Duration,
) -> Result<String, String> {
    let dir = TempDir::new("gateway-profile");
    let config = write_config(dir.path(), fixture, &["fx".to_owned()])?;
    let cfg = config.to_string_lossy().into_owned();
    let mut acc = Acc::default();
    match route {
        "stdio" => {
            let mut c =
                LineClient::start(corral, &["-c", &cfg, "mcp", "--standalone"], "fx__echo")?;
            c.sequential(WARMUP)?;
            let pids = Pids::gateway(c.pid())?;
            eprintln!("gateway-profile: `corral mcp` pid {}", c.pid());
            std::thread::sleep(PROFILE_ATTACH);
            acc.measure(pids, || c.pipelined(n, secs))?;
            c.stop();
        }
        "http" => {
            let gw = HttpGateway::start(corral, &config)?;
            let mut sessions = (0..n)
                .map(|_| gw.session("fx__echo"))
                .collect::<Result<Vec<_>, _>>()?;
            for s in &mut sessions {
                s.sequential(WARMUP / n.max(1))?;
            }
            let pids = Pids::gateway(gw.pid())?;
            eprintln!("gateway-profile: `corral up` pid {}", gw.pid());
            std::thread::sleep(PROFILE_ATTACH);
            acc.measure(pids, || concurrent_sessions(&mut sessions, secs))?;
            drop(sessions);
            gw.stop();
        }
        other => return Err(format!("gateway-profile: unknown route {other:?}")),
    }
    let f = acc.finish();
    Ok(format!(
        "{route}, {n} in flight, {:.1} s: {} calls/s, p50 {} µs, gateway CPU/call {} µs, \
         fixture CPU/call {} µs, client CPU/call {} µs",
        secs.as_secs_f64(),
        util::thousands(f.calls_per_sec),
        us(f.stats.p50),
        us(f.gateway_cpu),
        us(f.fixture_cpu),
        us(f.client_cpu)
    ))
}

/// How long `gateway-profile` waits after printing the gateway's pid.
const PROFILE_ATTACH: Duration = Duration::from_secs(1);

/// `corral up` with `n` fixture servers: once every server's tools are listed (one
/// session, then ended with DELETE) and after [`IDLE`], the memory of the gateway.
fn idle_memory(fixture: &Path, corral: &Path, n: usize) -> Result<Memory, String> {
    let dir = TempDir::new("gateway-idle");
    let names: Vec<String> = (0..n).map(|i| format!("fx{i}")).collect();
    let config = write_config(dir.path(), fixture, &names)?;
    let gw = HttpGateway::start(corral, &config)?;
    let mut s = gw.session("fx0__echo")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = s.tools_list()?;
        if names
            .iter()
            .all(|n| list.contains(&format!(r#""{n}__echo""#)))
        {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not every server's tools were listed within 30 s: {}",
                list.chars().take(300).collect::<String>()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    s.call()?;
    let r = s.conn.delete()?;
    if !(200..300).contains(&r.status) {
        eprintln!("gateway: DELETE of the session answered {}", r.status);
    }
    drop(s);
    std::thread::sleep(IDLE);
    let m = Memory::of(gw.pid())?;
    if m.fixtures != n {
        eprintln!(
            "gateway: expected {n} fixture children, found {}",
            m.fixtures
        );
    }
    gw.stop();
    Ok(m)
}

#[allow(clippy::too_many_arguments)]
fn render(
    seq_calls: usize,
    block: usize,
    point: Duration,
    seq: &[Fig; ROUTES],
    tput: &[[Fig; ROUTES]],
    loaded: &Loaded,
    idle1: &Memory,
    idle10: &Memory,
) -> String {
    let secs = |d: Duration| d.as_secs_f64();
    let ratio = |a: f64, b: f64| format!("{:.2}×", a / b);
    let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
    let gw_cpu = |route: Route, f: &Fig| {
        if route == Route::Direct {
            "—".to_owned()
        } else {
            us(f.gateway_cpu)
        }
    };
    let churn: usize = seq
        .iter()
        .chain(tput.iter().flatten())
        .map(|f| f.thread_churn)
        .sum();
    let gateways = &Route::ALL[1..];

    let mut out = format!(
        "## Gateway: `tools/call` through `corral mcp` and `corral up`\n\n\
         The fixture's `echo` (`{{\"text\":\"hello\"}}`) called four ways, side by side:\n\n\
         - **direct**: a bare blocking client on a fixture child's pipes (the floor);\n\
         - **stdio**: `corral mcp --standalone` (tool `fx__echo`), newline-delimited \
         JSON-RPC on its stdin/stdout;\n\
         - **HTTP**: `corral up` (the daemon, bearer token on), one keep-alive TCP \
         connection per MCP session with `TCP_NODELAY`, each call a `POST /mcp` answered \
         with `application/json`;\n\
         - **bridge**: `corral mcp` without `--standalone` (what agents run by default), \
         which relays its stdio to that same daemon over the control socket; its CPU is the \
         bridge's plus the daemon's.\n\n\
         Absolute µs swing by up to 10× with CPU idle states on this VM; only ratios within \
         one run mean something.\n\n\
         ### Sequential latency\n\n\
         {seq_calls} calls per path, one at a time, in blocks of {block} whose order rotates \
         (every path in every position equally often), after a warm-up. Times in µs. CPU \
         per call: gateway and fixture from `/proc/<pid>/task/*/schedstat`, this client \
         from `getrusage`.\n\n\
         | path | p50 | p99 | p99.9 | mean | calls/s | gateway CPU/call | fixture CPU/call | client CPU/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for route in Route::ALL {
        let f = &seq[route.index()];
        let s = &f.stats;
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            route.label(),
            us(s.p50),
            us(s.p99),
            us(s.p999),
            us(s.mean),
            util::thousands(f.calls_per_sec),
            gw_cpu(route, f),
            us(f.fixture_cpu),
            us(f.client_cpu),
        );
    }
    let d = &seq[0];
    let header: Vec<&str> = gateways.iter().map(|r| r.short()).collect();
    out += &format!(
        "\n| vs. direct | {} |\n|---|{}\n",
        header.join(" | "),
        "---:|".repeat(gateways.len())
    );
    let line = |label: &str, f: &dyn Fn(&Fig) -> String| {
        let cells: Vec<String> = gateways.iter().map(|r| f(&seq[r.index()])).collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    out += &line("p50 ratio", &|g| {
        ratio(secs(g.stats.p50), secs(d.stats.p50))
    });
    out += &line("p99 ratio", &|g| {
        ratio(secs(g.stats.p99), secs(d.stats.p99))
    });
    out += &line("p50 added (µs)", &|g| {
        format!("{:+.1}", (secs(g.stats.p50) - secs(d.stats.p50)) * 1e6)
    });
    out += &line("calls/s ratio", &|g| {
        ratio(g.calls_per_sec, d.calls_per_sec)
    });

    out += &format!(
        "\n### Throughput\n\n\
         Direct, stdio and bridge: one client thread keeps N calls outstanding on one \
         connection (pipelined, answers matched by id). HTTP: N sessions, each on its own \
         connection and its own thread, each making sequential calls. Every point runs \
         {ROUNDS} × {:.1} s, interleaved with the other paths (order reversed in the second \
         round). p50/p99 include the wait behind the other calls in flight. The client, the \
         gateway and the fixture share the machine's {} vCPUs.\n\n\
         | path | N in flight (HTTP: sessions) | calls/s | vs. direct | p50 | p99 | gateway CPU/call | fixture CPU/call | client CPU/call |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        secs(point),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    for (level, figs) in LEVELS.iter().zip(tput) {
        for route in Route::ALL {
            let f = &figs[route.index()];
            out += &format!(
                "| {} | {level} | {} | {} | {} | {} | {} | {} | {} |\n",
                route.label(),
                util::thousands(f.calls_per_sec),
                ratio(f.calls_per_sec, figs[0].calls_per_sec),
                us(f.stats.p50),
                us(f.stats.p99),
                gw_cpu(route, f),
                us(f.fixture_cpu),
                us(f.client_cpu),
            );
        }
    }

    let level_of = |n: usize| LEVELS.iter().position(|&l| l == n).expect("a level");
    let at = |n: usize, r: Route| &tput[level_of(n)][r.index()];
    let stdio32 = at(32, Route::Stdio);
    let http8 = at(8, Route::Http);
    let verdict = |d: Duration| if d <= CPU_TARGET { "yes" } else { "**no**" };
    out += &format!(
        "\n### CPU per forwarded call\n\n\
         The gateway's CPU (all threads; for the bridge, the bridge process plus the daemon) \
         ÷ calls forwarded, excluding the fixture child. Issue 8's target: ≤ {} µs.\n\n\
         | gateway | load | CPU/call (µs) | ≤ {} µs |\n|---|---|---:|---|\n",
        CPU_TARGET.as_micros(),
        CPU_TARGET.as_micros(),
    );
    let rows: [(Route, &str, &Fig); 8] = [
        (Route::Stdio, "sequential", &seq[Route::Stdio.index()]),
        (Route::Stdio, "32 in flight", stdio32),
        (Route::Http, "sequential", &seq[Route::Http.index()]),
        (Route::Http, "8 sessions", http8),
        (Route::Http, "32 sessions", at(32, Route::Http)),
        (Route::Bridge, "sequential", &seq[Route::Bridge.index()]),
        (Route::Bridge, "8 in flight", at(8, Route::Bridge)),
        (Route::Bridge, "32 in flight", at(32, Route::Bridge)),
    ];
    for (route, load, f) in rows {
        out += &format!(
            "| {} | {load} | {} | {} |\n",
            route.short(),
            us(f.gateway_cpu),
            verdict(f.gateway_cpu)
        );
    }
    if churn > 0 {
        out += &format!(
            "\n_The gateway's set of threads changed during {churn} measured block(s) (tokio's \
             blocking pool starts and ends threads); for those blocks the gateway's CPU comes \
             from `/proc/<pid>/stat` (clock-tick resolution, but it counts exited threads)._\n"
        );
    }

    out += &format!(
        "\n### Memory\n\n\
         `VmRSS` / `VmHWM` of the gateway process from `/proc/<pid>/status`. Idle: `corral \
         up` with the servers configured, after one session listed every server's tools, \
         called `echo` once and ended (DELETE), then {:.0} s idle. Its children are listed \
         apart: the fixtures (sum of their `VmRSS`) and the other children (Corral's guard \
         process).\n\n\
         | gateway | state | VmRSS MiB | VmHWM MiB | threads | fixtures | fixtures' VmRSS MiB | other children's VmRSS MiB |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
        secs(IDLE)
    );
    let mem_row = |gw: &str, state: &str, m: &Memory| {
        format!(
            "| {gw} | {state} | {} | {} | {} | {} | {} | {} |\n",
            mib(m.rss_kib),
            mib(m.hwm_kib),
            m.threads,
            m.fixtures,
            mib(m.fixtures_rss_kib),
            mib(m.other_children_rss_kib),
        )
    };
    out += &mem_row("`corral up`", "idle, 1 server", idle1);
    out += &mem_row(
        "`corral up`",
        &format!("idle, {RSS_SERVERS} servers"),
        idle10,
    );
    out += &mem_row(
        "`corral up`",
        &format!(
            "after the runs above ({} HTTP sessions + 1 bridge open)",
            LEVELS[LEVELS.len() - 1]
        ),
        &loaded.daemon,
    );
    out += &mem_row(
        "`corral mcp --standalone`",
        "after the runs above",
        &loaded.stdio,
    );
    out += &mem_row(
        "`corral mcp` (bridge)",
        "after the runs above",
        &loaded.bridge,
    );
    out += &format!(
        "\nPer extra server, idle: {:+.2} MiB in the gateway.\n",
        (idle10.rss_kib as f64 - idle1.rss_kib as f64) / 1024.0 / (RSS_SERVERS - 1) as f64
    );

    let stdio_seq = &seq[Route::Stdio.index()];
    let http_seq = &seq[Route::Http.index()];
    let direct32 = at(32, Route::Direct);
    let checks = [
        (
            format!(
                "stdio p50 ≤ 2× direct: {}",
                ratio(secs(stdio_seq.stats.p50), secs(d.stats.p50))
            ),
            stdio_seq.stats.p50 <= d.stats.p50 * 2,
        ),
        (
            format!(
                "HTTP p50 ≤ 3× direct: {}",
                ratio(secs(http_seq.stats.p50), secs(d.stats.p50))
            ),
            http_seq.stats.p50 <= d.stats.p50 * 3,
        ),
        (
            format!(
                "stdio throughput at 32 in flight ≥ 70% of direct: {:.0}%",
                stdio32.calls_per_sec / direct32.calls_per_sec * 100.0
            ),
            stdio32.calls_per_sec >= 0.7 * direct32.calls_per_sec,
        ),
        (
            format!(
                "gateway CPU per call ≤ {} µs (stdio 32 in flight / HTTP 8 sessions): {} / {} µs",
                CPU_TARGET.as_micros(),
                us(stdio32.gateway_cpu),
                us(http8.gateway_cpu)
            ),
            stdio32.gateway_cpu <= CPU_TARGET && http8.gateway_cpu <= CPU_TARGET,
        ),
    ];
    out += "\n### Checks\n\n";
    for (text, ok) in checks {
        out += &format!("- {}: {text}\n", if ok { "ok" } else { "**over**" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_ids_skip_notifications_and_server_requests() {
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":42,"result":{}}"#),
            Some(42)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","result":{},"id": 7}"#),
            Some(7)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            None
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#),
            None
        );
    }

    #[test]
    fn echo_check_rejects_tool_errors() {
        assert!(check_echo(r#"{"id":2,"result":{"content":[{"text":"hello"}]}}"#).is_ok());
        assert!(
            check_echo(r#"{"id":2,"result":{"content":[{"text":"hello down"}],"isError":true}}"#)
                .is_err()
        );
        assert!(check_echo(r#"{"id":2,"error":{"message":"hello"}}"#).is_err());
    }

    #[test]
    fn block_orders_put_every_path_in_every_position_equally() {
        let mut count = [[0; ROUTES]; ROUTES];
        for b in 0..2 * ROUTES {
            for (pos, r) in block_order(b).iter().enumerate() {
                count[r.index()][pos] += 1;
            }
        }
        assert!(count.iter().flatten().all(|&c| c == 2), "{count:?}");
    }

    #[test]
    fn config_quotes_the_command() {
        let dir = TempDir::new("gateway-config");
        let p = write_config(
            dir.path(),
            Path::new("/a b/\"q\"/corral-fixture"),
            &["fx0".into(), "fx1".into()],
        )
        .unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.contains("[servers.fx1]\ncommand = \"/a b/\\\"q\\\"/corral-fixture\"\n"));
    }
}
