//! The drain rate of a dev process's output with alert scanning on vs. off: a process
//! `cat`s a realistic mixed log (ordinary lines, about 3% error lines, tracebacks and
//! stacks among them, taken from the alert scanner's real-tool fixtures) until N MiB
//! went through its stdout; the time from spawn to its `process.exited` event is the
//! time to drain it (the pipe holds at most 64 KiB, so the writer cannot finish far
//! ahead of the drain). Both variants write the same log file and ring; the runs
//! alternate (off, on, off, on …) and the best of each is reported, with the CPU time
//! of this process (the supervisor) per GiB.

use crate::util::{self, TempDir};
use corral_config::{ProcessCommand, ProcessConfig};
use corral_events::{EventBus, Kind};
use corral_supervisor::Supervisor;
use corral_supervisor::alerts::Alerts;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const FIXTURES: &[&str] = &[
    include_str!("../../alerts/tests/fixtures/python_traceback.txt"),
    include_str!("../../alerts/tests/fixtures/node_type_error.txt"),
    include_str!("../../alerts/tests/fixtures/rust_type_error.txt"),
    include_str!("../../alerts/tests/fixtures/java_exception.txt"),
    include_str!("../../alerts/tests/fixtures/go_panic.txt"),
    include_str!("../../alerts/tests/fixtures/tsc_error.txt"),
];

/// About 1 MiB of mixed log: ordinary lines of varied shapes, an `ERROR` log line every
/// 49 lines, and every 700 lines a whole real-tool fixture (a traceback, a stack, a
/// diagnostic): about 3% of the lines are errors.
fn chunk() -> String {
    let mut out = String::with_capacity(1 << 20);
    let mut i = 0u64;
    while out.len() < 1 << 20 {
        i += 1;
        let _ = match i % 7 {
            0 => writeln!(
                out,
                r#"127.0.0.1 - - [23/Nov/2026:13:{:02}:{:02} +0000] "GET /api/users/{i} HTTP/1.1" 200 {} "-" "Mozilla/5.0""#,
                i % 60,
                (i * 7) % 60,
                300 + i % 900
            ),
            1 => writeln!(
                out,
                "2026-11-23T13:45:{:02}.{:03}Z INFO  http: request completed method=GET path=/health status=200 duration_ms={}",
                i % 60,
                i % 1000,
                i % 40
            ),
            2 => writeln!(
                out,
                "\x1b[2m13:45:01\x1b[22m \x1b[36m[vite]\x1b[39m hmr update /src/components/List{}.tsx",
                i % 30
            ),
            3 => writeln!(
                out,
                r#"{{"level":"debug","ts":"2026-11-23T13:45:01Z","msg":"cache hit","key":"user:{i}","ms":{}}}"#,
                i % 9
            ),
            4 => writeln!(
                out,
                "webpack 5.90.0 compiled successfully in {} ms",
                100 + i % 400
            ),
            5 => writeln!(out, "[worker-{}] processed job {i} in {}ms", i % 4, i % 77),
            _ => {
                if i % 700 == 6 {
                    out.push_str(FIXTURES[(i / 700) as usize % FIXTURES.len()]);
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                    Ok(())
                } else if i % 49 == 13 {
                    writeln!(
                        out,
                        "ERROR db::pool: connection reset by peer (attempt {})",
                        i % 5
                    )
                } else {
                    writeln!(out, "DEBUG scheduler: tick {i}")
                }
            }
        };
    }
    out
}

struct Run {
    elapsed: Duration,
    cpu: Duration,
    alerts: usize,
}

fn one(dir: &std::path::Path, file: &std::path::Path, mib: u64, scan: bool) -> Result<Run, String> {
    let rt = util::runtime();
    rt.block_on(async {
        let bus = EventBus::new(1 << 16);
        let mut events = bus.subscribe();
        let mut opts = corral_supervisor::SupervisorOptions::new(bus.clone(), dir.join("logs"));
        if scan {
            opts.alerts = Some(Alerts::new(&Default::default(), bus.clone())?);
        }
        let mut sup = Supervisor::start(Vec::new(), &opts);
        let mut cfg = ProcessConfig::ad_hoc(
            "flood",
            ProcessCommand::Shell(format!(
                "i=0; while [ $i -lt {mib} ]; do cat '{}'; i=$((i+1)); done",
                file.display()
            )),
            dir.to_owned(),
        );
        cfg.quiet = true;
        let cpu0 = util::cpu_self();
        let start = Instant::now();
        sup.add_process(cfg)?;
        let mut alerts = 0;
        let elapsed = loop {
            let ev = tokio::time::timeout(Duration::from_secs(600), events.recv())
                .await
                .map_err(|_| "the flood did not end within 600 s".to_owned())?
                .map_err(|e| format!("event bus: {e}"))?;
            match ev.kind() {
                Some(Kind::Alert) => alerts += 1,
                Some(Kind::ProcessExited) => break start.elapsed(),
                Some(Kind::ProcessCrashed | Kind::ProcessStartFailed) => {
                    return Err(format!("the flood process failed: {ev:?}"));
                }
                _ => {}
            }
        };
        let cpu = util::cpu_self() - cpu0;
        sup.shutdown(Duration::from_secs(10)).await;
        Ok(Run {
            elapsed,
            cpu,
            alerts,
        })
    })
}

/// The scanner alone over the same log, in this thread: lines/s (best of 3).
fn scanner_alone(text: &str) -> f64 {
    let rules = std::sync::Arc::new(corral_alerts::AlertRules::defaults());
    let lines: Vec<&str> = text.lines().collect();
    let mut best = f64::MAX;
    let mut out = Vec::new();
    for _ in 0..3 {
        let mut scanner = corral_alerts::Scanner::new(rules.clone(), "process:flood");
        let start = Instant::now();
        for _ in 0..16 {
            for line in &lines {
                scanner.feed(
                    line,
                    corral_alerts::Stream::Stdout,
                    std::time::SystemTime::now(),
                    &mut out,
                );
                out.clear();
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    (lines.len() * 16) as f64 / best
}

/// Runs `rounds` × (off, on) with `mib` MiB each; returns a Markdown table.
pub fn run(mib: u64, rounds: usize) -> Result<String, String> {
    let dir = TempDir::new("scan-drain");
    let file = dir.path().join("mixed.log");
    let text = chunk();
    std::fs::write(&file, &text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let lines_per_mib = text.lines().count() as f64 * (1 << 20) as f64 / text.len() as f64;
    let mut best: [Option<Run>; 2] = [None, None];
    // `CORRAL_BENCH_SCAN=off|on` runs one variant only (for a profiler).
    let variants: &[bool] = match std::env::var("CORRAL_BENCH_SCAN").as_deref() {
        Ok("off") => &[false],
        Ok("on") => &[true],
        _ => &[false, true],
    };
    for _ in 0..rounds.max(1) {
        for &scan in variants {
            let r = one(dir.path(), &file, mib, scan)?;
            let slot = &mut best[scan as usize];
            if slot.as_ref().is_none_or(|b| r.elapsed < b.elapsed) {
                *slot = Some(r);
            }
        }
    }
    let [Some(off), Some(on)] = best else {
        let r = best.into_iter().flatten().next().expect("one variant ran");
        return Ok(format!(
            "one variant: {:.2} s, {:.2} s CPU, {} alerts",
            r.elapsed.as_secs_f64(),
            r.cpu.as_secs_f64(),
            r.alerts
        ));
    };
    let rate = |r: &Run| mib as f64 / r.elapsed.as_secs_f64();
    let cpu_gib = |r: &Run| r.cpu.as_secs_f64() * 1024.0 / mib as f64;
    let alone = scanner_alone(&text);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Process drain, alert scanning off vs. on\n\n{mib} MiB of mixed log \
         (≈{:.0} lines/MiB, 1 MiB chunk `cat` in a loop) through one process's stdout; \
         best of {rounds} alternating runs each.\n",
        lines_per_mib
    );
    let _ = writeln!(
        out,
        "| scanning | drain time | MiB/s | lines/s | supervisor CPU per GiB | alerts raised |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for (name, r) in [("off", &off), ("on", &on)] {
        let _ = writeln!(
            out,
            "| {name} | {:.2} s | {:.0} | {} | {:.2} s | {} |",
            r.elapsed.as_secs_f64(),
            rate(r),
            util::thousands(rate(r) * lines_per_mib),
            cpu_gib(r),
            r.alerts
        );
    }
    let _ = writeln!(
        out,
        "\nThe scanner alone on the same log, one thread: {} lines/s.",
        util::thousands(alone)
    );
    let _ = writeln!(
        out,
        "\nScanning on costs {:+.1}% drain time and {:+.1}% CPU.",
        (on.elapsed.as_secs_f64() / off.elapsed.as_secs_f64() - 1.0) * 100.0,
        (on.cpu.as_secs_f64() / off.cpu.as_secs_f64() - 1.0) * 100.0
    );
    Ok(out)
}
