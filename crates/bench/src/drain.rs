//! Stderr drain rate: a fixture floods stderr before it answers `initialize`, so the time
//! until the server is ready (and the drain has passed the flood's end marker) is the
//! time to drain the flood. Each variant runs in a fresh copy of this binary
//! (`corral-bench drain-one …`) so that peak RSS figures do not mix.

use crate::Opts;
use crate::util::{self, TempDir, cpu_self, peak_rss_kib, proc_cpu, ru_maxrss_kib};
use corral_supervisor::Supervisor;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The hidden subcommand that runs one variant and prints one JSON line.
pub const CHILD_COMMAND: &str = "drain-one";
/// The line the fixture writes to stderr after its flood.
const MARKER: &str = "fixture: flood done";
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Clone, Copy, PartialEq)]
enum Reader {
    Supervisor,
    Bare,
}

struct Variant {
    reader: Reader,
    mib: u64,
    no_newlines: bool,
}

impl Variant {
    fn args(&self) -> Vec<String> {
        let mut a = vec![
            CHILD_COMMAND.to_owned(),
            "--mib".into(),
            self.mib.to_string(),
        ];
        if self.no_newlines {
            a.push("--no-newlines".into());
        }
        if self.reader == Reader::Bare {
            a.push("--bare".into());
        }
        a.push("--workers".into());
        a.push(util::WORKERS.load(Ordering::Relaxed).to_string());
        a
    }

    fn describe(&self) -> String {
        let who = match self.reader {
            Reader::Supervisor => "supervisor",
            Reader::Bare => "bare read-and-discard",
        };
        let what = if self.mib == 0 {
            "no flood (baseline)".to_owned()
        } else if self.no_newlines {
            format!("{} MiB, one line, no newline", self.mib)
        } else {
            format!("{} MiB in 100-byte lines", self.mib)
        };
        format!("{who} | {what}")
    }
}

/// Runs every variant in its own process and renders the table.
pub fn run(opts: &Opts) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate own executable: {e}"))?;
    let m = opts.flood_mib;
    let variants = [
        Variant {
            reader: Reader::Supervisor,
            mib: 0,
            no_newlines: false,
        },
        Variant {
            reader: Reader::Supervisor,
            mib: m,
            no_newlines: false,
        },
        Variant {
            reader: Reader::Supervisor,
            mib: m,
            no_newlines: true,
        },
        Variant {
            reader: Reader::Bare,
            mib: m,
            no_newlines: false,
        },
        Variant {
            reader: Reader::Bare,
            mib: m,
            no_newlines: true,
        },
    ];
    let mut out = String::from(
        "## Stderr drain\n\n\
         Time from start until the server is ready and its stderr has been read past the \
         flood's end marker; the fixture writes the whole flood before it answers \
         `initialize`. CPU and peak RSS (`VmHWM`) are those of the fresh bench process \
         running the variant; the fixture's CPU is listed apart. \"Bare\" reads the pipe into a 64 KiB \
         buffer and discards it: the ceiling for the pipe and the fixture.\n\n\
         | reader | flood | seconds | MiB/s | bench CPU s | fixture CPU s | peak RSS MiB | RSS added MiB | log files MiB |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut baseline_rss = None;
    for v in &variants {
        eprintln!("drain: {}", v.describe().replace(" | ", ", "));
        let output = Command::new(&exe)
            .args(v.args())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {} {CHILD_COMMAND}: {e}", exe.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(format!(
                "{CHILD_COMMAND} {:?} failed ({}): {}",
                v.args(),
                output.status,
                stdout.trim()
            ));
        }
        let r: Value = stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| format!("{CHILD_COMMAND} printed no JSON result: {stdout}"))?;
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let secs = f("secs");
        let rss_mib = f("peak_rss_kib") / 1024.0;
        if v.reader == Reader::Supervisor && v.mib == 0 {
            baseline_rss = Some(rss_mib);
        }
        let added = match (v.reader, baseline_rss) {
            (Reader::Supervisor, Some(b)) if v.mib > 0 => format!("{:+.1}", rss_mib - b),
            _ => "—".to_owned(),
        };
        let rate = if v.mib == 0 {
            "—".to_owned()
        } else {
            util::thousands(v.mib as f64 / secs)
        };
        let logs = if v.reader == Reader::Supervisor {
            format!("{:.1}", f("log_bytes") / MIB)
        } else {
            "—".to_owned()
        };
        out += &format!(
            "| {} | {secs:.3} | {rate} | {:.2} | {:.2} | {rss_mib:.1} | {added} | {logs} |\n",
            v.describe(),
            f("cpu_secs"),
            f("fixture_cpu_secs"),
        );
    }
    Ok(out)
}

/// `drain-one [--mib N] [--no-newlines] [--bare] [--workers N]`: runs one variant, prints one JSON line.
pub fn child_main(args: &[String]) -> ExitCode {
    let mut v = Variant {
        reader: Reader::Supervisor,
        mib: 1024,
        no_newlines: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mib" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) => v.mib = n,
                None => {
                    eprintln!("corral-bench {CHILD_COMMAND}: --mib needs a whole number");
                    return ExitCode::from(2);
                }
            },
            "--workers" => match it.next().and_then(|n| n.parse::<usize>().ok()) {
                Some(n) => util::WORKERS.store(n.max(1), Ordering::Relaxed),
                None => {
                    eprintln!("corral-bench {CHILD_COMMAND}: --workers needs a whole number");
                    return ExitCode::from(2);
                }
            },
            "--no-newlines" => v.no_newlines = true,
            "--bare" => v.reader = Reader::Bare,
            other => {
                eprintln!("corral-bench {CHILD_COMMAND}: unexpected argument '{other}'");
                return ExitCode::from(2);
            }
        }
    }
    let fixture = match util::fixture_path() {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("corral-bench: {msg}");
            return ExitCode::FAILURE;
        }
    };
    let mut flags = vec!["--stderr-flood".to_owned(), v.mib.to_string()];
    if v.no_newlines {
        flags.push("--flood-no-newlines".into());
    }
    let result = match v.reader {
        Reader::Supervisor => supervised(&fixture, &flags),
        Reader::Bare => bare(&fixture, &flags),
    };
    match result {
        Ok(mut r) => {
            r["peak_rss_kib"] = json!(peak_rss_kib());
            r["ru_maxrss_kib"] = json!(ru_maxrss_kib());
            println!("{r}");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("corral-bench {CHILD_COMMAND}: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn supervised(fixture: &Path, flags: &[String]) -> Result<Value, String> {
    let rt = util::runtime();
    let fixture = fixture.to_path_buf();
    let flags = flags.to_vec();
    rt.block_on(async move {
        tokio::spawn(async move {
            let dir = TempDir::new("drain");
            let cfg = util::server_config("flood", &fixture, &flags, dir.path());
            let opts = util::supervisor_options(dir.path());
            let cpu0 = cpu_self();
            let t0 = Instant::now();
            let sup = Supervisor::start([cfg], &opts);
            let h = sup.get("flood").expect("configured").clone();
            let result = async {
                h.wait_ready(Duration::from_secs(300))
                    .await
                    .map_err(|e| e.to_string())?;
                let ready = t0.elapsed();
                // The drain may still hold the last pipe buffer when the answer arrives.
                while h.stderr_tail(1) != [MARKER] {
                    if t0.elapsed() > ready + Duration::from_secs(30) {
                        return Err(format!(
                            "the drain never reached the end marker; tail: {:?}",
                            h.stderr_tail(3)
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let secs = t0.elapsed().as_secs_f64();
                let cpu = cpu_self() - cpu0;
                let pid = h.status().pid.unwrap_or(0);
                Ok(json!({
                    "secs": secs,
                    "ready_secs": ready.as_secs_f64(),
                    "cpu_secs": cpu.as_secs_f64(),
                    "fixture_cpu_secs": proc_cpu(pid).map(|d| d.as_secs_f64()),
                    "log_bytes": util::dir_bytes(&dir.path().join("logs")),
                }))
            }
            .await;
            sup.shutdown(Duration::from_secs(10)).await;
            result
        })
        .await
        .map_err(|e| format!("drain task: {e}"))?
    })
}

fn bare(fixture: &Path, flags: &[String]) -> Result<Value, String> {
    let cpu0 = cpu_self();
    let t0 = Instant::now();
    let mut child = Command::new(fixture)
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", fixture.display()))?;
    let pid = child.id();
    let mut stderr = child.stderr.take().expect("piped");
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut tail: Vec<u8> = Vec::new();
        let marker = format!("{MARKER}\n");
        let mut total = 0u64;
        loop {
            let n = match stderr.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => n,
            };
            total += n as u64;
            tail.extend_from_slice(&buf[n.saturating_sub(64)..n]);
            if tail.len() > 64 {
                tail.drain(..tail.len() - 64);
            }
            if tail.ends_with(marker.as_bytes()) {
                let _ = seen_tx.send(t0.elapsed());
            }
        }
    });
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let init = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"corral-bench","version":"0"}}}}}}"#,
        corral_supervisor::PROTOCOL_VERSION
    );
    writeln!(stdin, "{init}").map_err(|e| format!("writing to the fixture: {e}"))?;
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("reading the fixture's stdout: {e}"))?;
    if !line.contains(r#""result""#) {
        return Err(format!("initialize failed: {}", line.trim_end()));
    }
    let ready = t0.elapsed();
    let seen = seen_rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| "the end marker never arrived on stderr".to_owned())?;
    let secs = ready.max(seen).as_secs_f64();
    let cpu = cpu_self() - cpu0;
    let fixture_cpu = proc_cpu(pid);
    drop(stdin);
    let _ = child.wait();
    let bytes = reader.join().unwrap_or(0);
    Ok(json!({
        "secs": secs,
        "ready_secs": ready.as_secs_f64(),
        "cpu_secs": cpu.as_secs_f64(),
        "fixture_cpu_secs": fixture_cpu.map(|d| d.as_secs_f64()),
        "stderr_bytes": bytes,
    }))
}
