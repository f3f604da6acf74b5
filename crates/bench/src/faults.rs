//! `corral-bench faults`: the daemon under load while its server is SIGKILLed every 2 s.
//!
//! One daemon (`corral up -d`) runs one fixture server. Half the sessions are HTTP
//! sessions on the daemon's endpoint, half are `corral mcp` bridges; each makes its
//! calls one after another, every call an `echo` of a text unique to the session and the
//! call. Meanwhile the server is SIGKILLed every [`KILL_EVERY`], and restarts (backoff
//! 1 s; the crash-loop breaker set out of reach). Every answer is checked against its
//! request:
//!
//! * **ok**: the echo of exactly that call's text;
//! * **failed**: a tool error or JSON-RPC error (the server was down or died under the
//!   call) — expected, and the reason is tallied;
//! * **wrong**: anything else, e.g. another call's text — must be 0;
//! * **lost**: no answer within the call timeout plus slack — must be 0 (a watchdog ends
//!   the run with an error).
//!
//! Also reported: answers past the call deadline, the latency distribution, and the
//! daemon's peak RSS (VmHWM) at the end.

use crate::mcp::{Endpoint, LineClient};
use crate::procs;
use crate::util::{self, Stats, TempDir};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the server is killed.
pub const KILL_EVERY: Duration = Duration::from_secs(2);
/// The server's call timeout in the bench's config.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// An answer later than this after its request is lost.
const LOST_AFTER: Duration = Duration::from_secs(20);

/// What to run.
#[derive(Debug, Clone)]
pub struct FaultOpts {
    /// Sessions of each kind (HTTP and bridge).
    pub sessions: usize,
    /// Calls per session.
    pub calls: usize,
}

/// The tally of one kind of session.
#[derive(Default)]
struct Tally {
    ok: u64,
    failed: BTreeMap<String, u64>,
    wrong: Vec<String>,
    past_deadline: u64,
    latencies: Vec<u64>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.ok += other.ok;
        for (k, n) in other.failed {
            *self.failed.entry(k).or_default() += n;
        }
        self.wrong.extend(other.wrong);
        self.past_deadline += other.past_deadline;
        self.latencies.extend(other.latencies);
    }

    /// Classifies the answer `msg` to the echo of `text`, which took `ns`.
    fn record(&mut self, text: &str, msg: &str, ns: u64) {
        self.latencies.push(ns);
        if Duration::from_nanos(ns) > CALL_TIMEOUT + Duration::from_secs(1) {
            self.past_deadline += 1;
        }
        let v: serde_json::Value = match serde_json::from_str(msg) {
            Ok(v) => v,
            Err(_) => return self.wrong.push(format!("not JSON: {msg}")),
        };
        if let Some(e) = v.get("error") {
            return self.fail(e["message"].as_str().unwrap_or("JSON-RPC error"));
        }
        let result = &v["result"];
        let said = result["content"][0]["text"].as_str().unwrap_or("");
        if result["isError"] == true {
            return self.fail(said);
        }
        if said == text {
            self.ok += 1;
        } else {
            self.wrong
                .push(format!("asked to echo {text:?}, got {said:?}: {msg}"));
        }
    }

    /// Tallies a failure by its reason, with numbers and names made uniform.
    fn fail(&mut self, message: &str) {
        let first = message.lines().next().unwrap_or("");
        let kind: String = first
            .split_whitespace()
            .take(8)
            .map(|w| {
                if w.chars().any(|c| c.is_ascii_digit()) {
                    "N"
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        *self.failed.entry(kind).or_default() += 1;
    }
}

/// Per-session progress, for the watchdog: when the call in flight was sent (ms since
/// the start; 0 when none is).
struct Progress(Vec<AtomicU64>);

pub fn run(fixture: &Path, corral: &Path, opts: &FaultOpts) -> Result<String, String> {
    procs::install_cleanup(Duration::from_secs(900), "faults");
    let dir = TempDir::new("faults");
    let config = dir.path().join("corral.toml");
    std::fs::write(
        &config,
        format!(
            "[defaults]\ncall_timeout = \"{}s\"\ncrash_loop_max = 1000000\n\
             crash_loop_window = \"1s\"\n\n[servers.fx]\ncommand = {:?}\n\
             args = [\"--pid-file\", \"fx.pid\"]\n",
            CALL_TIMEOUT.as_secs(),
            fixture.display().to_string()
        ),
    )
    .map_err(|e| format!("writing {}: {e}", config.display()))?;
    let up = Command::new(corral)
        .arg("-c")
        .arg(&config)
        .args(["up", "-d"])
        .output()
        .map_err(|e| format!("corral up -d: {e}"))?;
    if !up.status.success() {
        return Err(format!(
            "corral up -d failed: {}",
            String::from_utf8_lossy(&up.stderr)
        ));
    }
    let result = load(dir.path(), &config, corral, opts);
    let _ = Command::new(corral)
        .arg("-c")
        .arg(&config)
        .arg("down")
        .output();
    result
}

fn load(dir: &Path, config: &Path, corral: &Path, opts: &FaultOpts) -> Result<String, String> {
    let state = dir.join(".corral");
    let read = |name: &str| {
        std::fs::read_to_string(state.join(name))
            .map(|s| s.trim().to_owned())
            .map_err(|e| format!("reading .corral/{name}: {e}"))
    };
    let addr: SocketAddr = read("endpoint")?
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .map_err(|e| format!(".corral/endpoint: {e}"))?;
    let endpoint = Arc::new(Endpoint {
        addr,
        path: "/mcp".into(),
        token: Some(read("token")?),
    });
    let daemon: u32 = read("daemon.pid")?
        .parse()
        .map_err(|e| format!("daemon.pid: {e}"))?;

    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let killer = {
        let (stop, kills, pid_file) = (stop.clone(), kills.clone(), dir.join("fx.pid"));
        std::thread::spawn(move || kill_every(&pid_file, &stop, &kills))
    };
    let n = opts.sessions;
    let progress = Arc::new(Progress((0..2 * n).map(|_| AtomicU64::new(0)).collect()));
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Result<Tally, String>)>();
    for s in 0..2 * n {
        let (tx, endpoint, progress) = (tx.clone(), endpoint.clone(), progress.clone());
        let (corral, config, calls) = (corral.to_owned(), config.to_owned(), opts.calls);
        std::thread::spawn(move || {
            let http = s < n;
            let r = if http {
                http_session(&endpoint, s, calls, &progress, start)
            } else {
                bridge_session(&corral, &config, s, calls, &progress, start)
            };
            let _ = tx.send((http, r));
        });
    }
    drop(tx);

    let (mut http, mut bridge) = (Tally::default(), Tally::default());
    let mut finished = 0;
    let mut errors = Vec::new();
    while finished < 2 * n {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok((is_http, r)) => {
                finished += 1;
                match r {
                    Ok(t) if is_http => http.add(t),
                    Ok(t) => bridge.add(t),
                    Err(e) => errors.push(e),
                }
            }
            Err(_) => {
                let now = start.elapsed().as_millis() as u64;
                if let Some((s, sent)) = progress.0.iter().enumerate().find_map(|(s, p)| {
                    let sent = p.load(Ordering::Relaxed);
                    (sent > 0 && now.saturating_sub(sent) > LOST_AFTER.as_millis() as u64)
                        .then_some((s, sent))
                }) {
                    stop.store(true, Ordering::Relaxed);
                    return Err(format!(
                        "session {s}: a call sent at {sent} ms got no answer within {LOST_AFTER:?} (lost)"
                    ));
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = killer.join();
    let elapsed = start.elapsed();
    let hwm = util::proc_status_field(daemon, "VmHWM");
    if !errors.is_empty() {
        return Err(format!("sessions failed: {}", errors.join("; ")));
    }
    let report = report(
        &http,
        &bridge,
        opts,
        elapsed,
        kills.load(Ordering::Relaxed),
        hwm,
    );
    let wrong: Vec<&String> = http.wrong.iter().chain(&bridge.wrong).collect();
    if !wrong.is_empty() {
        return Err(format!(
            "{report}\n{} wrong answers, e.g. {}",
            wrong.len(),
            wrong[0]
        ));
    }
    Ok(report)
}

/// SIGKILLs the server named in `pid_file` every [`KILL_EVERY`] until `stop`.
fn kill_every(pid_file: &PathBuf, stop: &AtomicBool, kills: &AtomicU64) {
    let mut next = Instant::now() + KILL_EVERY;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        next += KILL_EVERY;
        if let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            // SAFETY: kill has no memory preconditions.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                kills.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn text_for(s: usize, i: usize) -> String {
    format!("s{s}-c{i}")
}

fn http_session(
    endpoint: &Endpoint,
    s: usize,
    calls: usize,
    progress: &Progress,
    start: Instant,
) -> Result<Tally, String> {
    let mut session = endpoint.session("fx__echo")?;
    let mut tally = Tally::default();
    for i in 0..calls {
        let text = text_for(s, i);
        progress.0[s].store(start.elapsed().as_millis().max(1) as u64, Ordering::Relaxed);
        let ns = session.call_raw(&format!(r#"{{"text":"{text}"}}"#))?;
        progress.0[s].store(0, Ordering::Relaxed);
        tally.record(&text, &session.last, ns);
    }
    Ok(tally)
}

fn bridge_session(
    corral: &Path,
    config: &Path,
    s: usize,
    calls: usize,
    progress: &Progress,
    start: Instant,
) -> Result<Tally, String> {
    let cfg = config.to_string_lossy();
    let mut client = LineClient::start(corral, &["-c", &cfg, "mcp"], "fx__echo")?;
    let mut tally = Tally::default();
    for i in 0..calls {
        let text = text_for(s, i);
        progress.0[s].store(start.elapsed().as_millis().max(1) as u64, Ordering::Relaxed);
        let ns = client.call_raw(&format!(r#"{{"text":"{text}"}}"#))?;
        progress.0[s].store(0, Ordering::Relaxed);
        tally.record(&text, &client.line, ns);
    }
    client.stop();
    Ok(tally)
}

fn report(
    http: &Tally,
    bridge: &Tally,
    opts: &FaultOpts,
    elapsed: Duration,
    kills: u64,
    hwm_kib: Option<u64>,
) -> String {
    let mut out = format!(
        "## Load with faults\n\n{} HTTP sessions and {} bridges (`corral mcp`) × {} calls each, \
         one after another, against one daemon whose server was SIGKILLed every {} s \
         ({kills} kills in {:.1} s). Every answer checked against its request.\n\n\
         | path | calls | ok | failed (tool or JSON-RPC error) | wrong | lost | past deadline | p50 | p99 | max |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        opts.sessions,
        opts.sessions,
        opts.calls,
        KILL_EVERY.as_secs(),
        elapsed.as_secs_f64()
    );
    for (name, t) in [("HTTP", http), ("bridge", bridge)] {
        let failed: u64 = t.failed.values().sum();
        let total = t.ok + failed + t.wrong.len() as u64;
        let (p50, p99, max) = if t.latencies.is_empty() {
            ("-".into(), "-".into(), "-".into())
        } else {
            let max = Duration::from_nanos(*t.latencies.iter().max().unwrap_or(&0));
            let st = Stats::of(t.latencies.clone());
            (util::us(st.p50), util::us(st.p99), util::ms(max))
        };
        out.push_str(&format!(
            "| {name} | {total} | {} | {failed} | {} | 0 | {} | {p50} µs | {p99} µs | {max} ms |\n",
            t.ok,
            t.wrong.len(),
            t.past_deadline
        ));
    }
    out.push_str("\nWhy calls failed (both paths):\n\n");
    let mut reasons: BTreeMap<&str, u64> = BTreeMap::new();
    for t in [http, bridge] {
        for (k, n) in &t.failed {
            *reasons.entry(k).or_default() += n;
        }
    }
    for (k, n) in reasons {
        out.push_str(&format!("- {n} × \"{k} …\"\n"));
    }
    out.push_str(&format!(
        "\nDaemon peak RSS (VmHWM) at the end: {}\n",
        hwm_kib.map_or("?".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
    ));
    out
}
