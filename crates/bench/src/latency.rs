//! Round trips of the fixture's `echo` tool: a bare blocking client on the child's pipes
//! vs. `ServerHandle::call_tool` through a running `Supervisor`.
//!
//! Both paths run at the same time, against two fixture children, and are measured in
//! interleaved blocks (bare, supervisor, supervisor, bare, …) so that drift in the
//! machine's state (CPU idle states, where the scheduler puts the threads) hits both
//! alike; each path's figures are computed over all its blocks.

use crate::Opts;
use crate::util::{self, Stats, TempDir, Usage, us};
use corral_supervisor::{ServerHandle, Supervisor};
use serde_json::value::RawValue;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WARMUP: usize = 1_000;
/// Sequential calls per block.
const BLOCK: usize = 1_000;
/// Calls kept outstanding in the throughput runs.
pub const IN_FLIGHT: usize = 32;
const ARGS: &str = r#"{"text":"hello"}"#;

/// Accumulated measurements of one path in one mode.
#[derive(Default)]
struct Acc {
    samples: Vec<u64>,
    wall: Duration,
    usage: Usage,
}

impl Acc {
    fn add(&mut self, samples: Vec<u64>, wall: Duration, usage: Usage) {
        self.samples.extend(samples);
        self.wall += wall;
        self.usage += usage;
    }

    fn finish(self) -> Run {
        Run {
            stats: Stats::of(self.samples),
            wall: self.wall,
            usage: self.usage,
        }
    }
}

/// One path's figures in one mode.
struct Run {
    stats: Stats,
    wall: Duration,
    usage: Usage,
}

impl Run {
    fn calls_per_sec(&self) -> f64 {
        self.stats.count as f64 / self.wall.as_secs_f64()
    }

    fn cpu_per_call(&self) -> Duration {
        self.usage.cpu / self.stats.count as u32
    }

    fn fixture_cpu_per_call(&self) -> Duration {
        self.usage.child_cpu / self.stats.count as u32
    }

    fn switches_per_call(&self) -> f64 {
        self.usage.switches as f64 / self.stats.count as f64
    }

    fn row(&self, path: &str, mode: &str) -> String {
        let s = &self.stats;
        format!(
            "| {path} | {mode} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
            us(s.p50),
            us(s.p99),
            us(s.p999),
            us(s.mean),
            util::thousands(self.calls_per_sec()),
            us(self.cpu_per_call()),
            self.switches_per_call(),
            us(self.fixture_cpu_per_call()),
        )
    }
}

/// Runs both paths and renders the tables.
pub fn run(fixture: &Path, opts: &Opts) -> Result<String, String> {
    let n = opts.calls.div_ceil(BLOCK) * BLOCK;
    let pipelined = (n * 5).div_ceil(2 * IN_FLIGHT) * 2 * IN_FLIGHT;
    let rt = util::runtime();
    let dir = TempDir::new("latency");
    let mut bare = Bare::start(fixture)?;
    let sup = {
        let _in_runtime = rt.enter();
        let cfg = util::server_config("fixture", fixture, &[], dir.path());
        Supervisor::start([cfg], &util::supervisor_options(dir.path()))
    };
    let result = (|| {
        let h = sup.get("fixture").expect("configured").clone();
        let sup_pid = rt.block_on(async {
            h.wait_ready(Duration::from_secs(30))
                .await
                .map_err(|e| e.to_string())?;
            h.status()
                .pid
                .ok_or_else(|| "the ready server has no pid".to_owned())
        })?;
        let on_worker = |h: &ServerHandle, calls: usize, in_flight: usize| {
            let h = h.clone();
            rt.block_on(async move {
                tokio::spawn(async move { supervised_calls(h, calls, in_flight).await })
                    .await
                    .map_err(|e| format!("benchmark task: {e}"))?
            })
        };

        eprintln!("latency: warm-up, {WARMUP} calls per path");
        bare.sequential(WARMUP)?;
        on_worker(&h, WARMUP, 1)?;

        eprintln!("latency: sequential, {n} calls per path in blocks of {BLOCK}, interleaved");
        let (mut bare_seq, mut sup_seq) = (Acc::default(), Acc::default());
        for block in 0..n / BLOCK {
            for bare_turn in [block % 2 == 0, block % 2 == 1] {
                if bare_turn {
                    let before = Usage::now(bare.pid());
                    let t0 = Instant::now();
                    let samples = bare.sequential(BLOCK)?;
                    bare_seq.add(samples, t0.elapsed(), Usage::now(bare.pid()) - before);
                } else {
                    let before = Usage::now(sup_pid);
                    let t0 = Instant::now();
                    let samples = on_worker(&h, BLOCK, 1)?;
                    sup_seq.add(samples, t0.elapsed(), Usage::now(sup_pid) - before);
                }
            }
        }

        eprintln!(
            "latency: {IN_FLIGHT} in flight, {pipelined} calls per path in 2 rounds, interleaved"
        );
        let (mut bare_par, mut sup_par) = (Acc::default(), Acc::default());
        for bare_turn in [true, false, false, true] {
            if bare_turn {
                let before = Usage::now(bare.pid());
                let t0 = Instant::now();
                let samples = bare.pipelined(pipelined / 2)?;
                bare_par.add(samples, t0.elapsed(), Usage::now(bare.pid()) - before);
            } else {
                let before = Usage::now(sup_pid);
                let t0 = Instant::now();
                let samples = on_worker(&h, pipelined / 2, IN_FLIGHT)?;
                sup_par.add(samples, t0.elapsed(), Usage::now(sup_pid) - before);
            }
        }
        Ok::<_, String>([bare_seq, sup_seq, bare_par, sup_par].map(Acc::finish))
    })();
    rt.block_on(sup.shutdown(Duration::from_secs(10)));
    bare.stop();
    let [bare_seq, sup_seq, bare_par, sup_par] = result?;
    Ok(render(
        n, pipelined, &bare_seq, &sup_seq, &bare_par, &sup_par,
    ))
}

fn render(
    n: usize,
    pipelined: usize,
    bare_seq: &Run,
    sup_seq: &Run,
    bare_par: &Run,
    sup_par: &Run,
) -> String {
    let in_flight = format!("{IN_FLIGHT} in flight");
    let mut out = format!(
        "## Latency: `echo` round trip\n\n\
         Sequential: {n} calls per path, one at a time, in blocks of {BLOCK} interleaved \
         with the other path's, after {WARMUP} warm-up calls. {in_flight}: {pipelined} calls \
         per path, at most {IN_FLIGHT} outstanding, in 2 interleaved rounds. Times in µs. \
         CPU and context switches (voluntary + involuntary, all threads) are this process's \
         per call; the fixture child's CPU is listed apart.\n\n\
         | path | mode | p50 | p99 | p99.9 | mean | calls/s | CPU/call | ctx sw/call | fixture CPU/call |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    let rows = [
        (bare_seq, "bare client", "sequential"),
        (sup_seq, "supervisor", "sequential"),
        (bare_par, "bare client", in_flight.as_str()),
        (sup_par, "supervisor", in_flight.as_str()),
    ];
    for (run, path, mode) in rows {
        out += &run.row(path, mode);
        out += "\n";
    }

    let pairs = [(sup_seq, bare_seq), (sup_par, bare_par)];
    let line = |label: &str, f: &dyn Fn(&Run, &Run) -> String| {
        let cells: Vec<String> = pairs.iter().map(|(s, b)| f(s, b)).collect();
        format!("| {label} | {} |\n", cells.join(" | "))
    };
    let ratio = |a: f64, b: f64| format!("{:.2}×", a / b);
    let secs = |d: Duration| d.as_secs_f64();
    out += &format!("\n| supervisor vs. bare | sequential | {in_flight} |\n|---|---:|---:|\n");
    out += &line("p50 ratio", &|s, b| {
        ratio(secs(s.stats.p50), secs(b.stats.p50))
    });
    out += &line("p99 ratio", &|s, b| {
        ratio(secs(s.stats.p99), secs(b.stats.p99))
    });
    out += &line("calls/s ratio", &|s, b| {
        ratio(s.calls_per_sec(), b.calls_per_sec())
    });
    out += &line("p50 added (µs)", &|s, b| {
        format!("{:+.1}", (secs(s.stats.p50) - secs(b.stats.p50)) * 1e6)
    });
    out += &line("CPU/call added (µs)", &|s, b| {
        format!(
            "{:+.1}",
            (secs(s.cpu_per_call()) - secs(b.cpu_per_call())) * 1e6
        )
    });
    out
}

fn request(buf: &mut Vec<u8>, id: u64) {
    let _ = write!(
        buf,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{ARGS}}}}}"#
    );
    buf.push(b'\n');
}

/// The id of a response, without parsing the rest (the fixture writes ids as numbers).
fn response_id(line: &str) -> Option<u64> {
    let start = line.find(r#""id":"#)? + 5;
    let digits: &str = &line[start..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

fn check_echo(line: &str) -> Result<(), String> {
    if line.contains(r#""result""#) && line.contains("hello") {
        Ok(())
    } else {
        Err(format!(
            "unexpected answer to echo: {}",
            line.trim_end().chars().take(300).collect::<String>()
        ))
    }
}

fn read_line(r: &mut BufReader<ChildStdout>, line: &mut String) -> Result<(), String> {
    line.clear();
    match r.read_line(line) {
        Ok(0) => Err("the fixture closed its stdout".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("reading the fixture's stdout: {e}")),
    }
}

fn io_err(e: std::io::Error) -> String {
    format!("writing to the fixture: {e}")
}

/// The bare client: blocking std I/O on the child's pipes, nothing in between.
struct Bare {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The last request id used.
    id: u64,
}

impl Bare {
    /// Spawns the fixture and does the MCP handshake by hand.
    fn start(fixture: &Path) -> Result<Bare, String> {
        let mut child = Command::new(fixture)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", fixture.display()))?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped"));
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"corral-bench","version":"0"}}}}}}"#,
            corral_supervisor::PROTOCOL_VERSION
        );
        writeln!(stdin, "{init}").map_err(io_err)?;
        let mut line = String::new();
        read_line(&mut stdout, &mut line)?;
        if !line.contains(r#""result""#) {
            return Err(format!("initialize failed: {}", line.trim_end()));
        }
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .map_err(io_err)?;
        Ok(Bare {
            child,
            stdin,
            stdout,
            id: 1,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `calls` round trips, one at a time; the latency of each in ns.
    fn sequential(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        let mut buf = Vec::with_capacity(256);
        let mut line = String::with_capacity(256);
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            self.id += 1;
            let start = Instant::now();
            buf.clear();
            request(&mut buf, self.id);
            self.stdin.write_all(&buf).map_err(io_err)?;
            read_line(&mut self.stdout, &mut line)?;
            samples.push(start.elapsed().as_nanos() as u64);
        }
        check_echo(&line)?;
        Ok(samples)
    }

    /// `calls` calls with at most [`IN_FLIGHT`] outstanding: a writer thread sends as many
    /// requests as it has credits (one per answer), in one write; a reader thread matches
    /// answers to send times by id.
    fn pipelined(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        let base = self.id + 1;
        self.id += calls as u64;
        let sent_at: Vec<AtomicU64> = (0..calls).map(|_| AtomicU64::new(0)).collect();
        let (credit_tx, credit_rx) = mpsc::channel::<()>();
        for _ in 0..IN_FLIGHT {
            credit_tx.send(()).expect("receiver alive");
        }
        let t0 = Instant::now();
        let (stdin, stdout) = (&mut self.stdin, &mut self.stdout);
        std::thread::scope(|s| {
            let sent_at = &sent_at;
            let writer = s.spawn(move || -> Result<(), String> {
                let mut buf = Vec::with_capacity(IN_FLIGHT * 128);
                let mut sent = 0usize;
                while sent < calls {
                    if credit_rx.recv().is_err() {
                        return Err("the reader stopped".into());
                    }
                    let mut k = 1;
                    while k < calls - sent && credit_rx.try_recv().is_ok() {
                        k += 1;
                    }
                    buf.clear();
                    let now = t0.elapsed().as_nanos() as u64;
                    for (j, slot) in sent_at[sent..sent + k].iter().enumerate() {
                        slot.store(now, Ordering::Relaxed);
                        request(&mut buf, base + (sent + j) as u64);
                    }
                    stdin.write_all(&buf).map_err(io_err)?;
                    sent += k;
                }
                Ok(())
            });
            let reader = s.spawn(move || -> Result<Vec<u64>, String> {
                let mut line = String::new();
                let mut samples = Vec::with_capacity(calls);
                for _ in 0..calls {
                    read_line(stdout, &mut line)?;
                    let now = t0.elapsed().as_nanos() as u64;
                    let idx = response_id(&line)
                        .and_then(|id| id.checked_sub(base))
                        .filter(|&i| (i as usize) < calls)
                        .ok_or_else(|| format!("answer with an unknown id: {}", line.trim_end()))?;
                    samples.push(now.saturating_sub(sent_at[idx as usize].load(Ordering::Relaxed)));
                    let _ = credit_tx.send(());
                }
                check_echo(&line)?;
                Ok(samples)
            });
            let samples = reader.join().expect("reader thread");
            writer.join().expect("writer thread")?;
            samples
        })
    }

    /// Closes stdin (the fixture exits at EOF) and reaps the child.
    fn stop(self) {
        let Bare {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let _ = child.wait();
    }
}

/// `calls` calls through the supervisor from `in_flight` concurrent tasks; the latency
/// of each in ns.
async fn supervised_calls(
    h: ServerHandle,
    calls: usize,
    in_flight: usize,
) -> Result<Vec<u64>, String> {
    let args = RawValue::from_string(ARGS.to_owned()).expect("valid JSON");
    if in_flight <= 1 {
        return supervised_task(&h, &args, calls).await;
    }
    let per_task = calls / in_flight;
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let h = h.clone();
            let args = args.clone();
            tokio::spawn(async move { supervised_task(&h, &args, per_task).await })
        })
        .collect();
    let mut samples = Vec::with_capacity(calls);
    for t in tasks {
        samples.extend(t.await.map_err(|e| format!("call task: {e}"))??);
    }
    Ok(samples)
}

async fn supervised_task(
    h: &ServerHandle,
    args: &RawValue,
    calls: usize,
) -> Result<Vec<u64>, String> {
    let mut samples = Vec::with_capacity(calls);
    let mut last = None;
    for _ in 0..calls {
        let start = Instant::now();
        let r = h
            .call_tool("echo", Some(args))
            .await
            .map_err(|e| format!("echo through the supervisor: {e}"))?;
        samples.push(start.elapsed().as_nanos() as u64);
        last = Some(r);
    }
    if let Some(r) = last
        && !r.get().contains("hello")
    {
        return Err(format!("unexpected echo result: {}", r.get()));
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_id_finds_the_number() {
        assert_eq!(
            response_id(r#"{"id":42,"jsonrpc":"2.0","result":{}}"#),
            Some(42)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","result":{},"id":7}"#),
            Some(7)
        );
        assert_eq!(response_id(r#"{"jsonrpc":"2.0"}"#), None);
    }

    #[test]
    fn request_is_one_json_line() {
        let mut buf = Vec::new();
        request(&mut buf, 9);
        assert_eq!(buf.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["id"], 9);
        assert_eq!(v["params"]["arguments"]["text"], "hello");
    }
}
