//! Parallel start-up: N servers started by one `Supervisor` should be ready after about
//! the time of the slowest one, not the sum.

use crate::util::{self, TempDir, cpu_children, median, ms};
use corral_config::ServerConfig;
use corral_supervisor::Supervisor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const REPEATS: usize = 3;
const SERVERS: usize = 10;

/// Builds the configs (fresh each run) for a run whose cwd is the given directory.
type MakeConfigs = Box<dyn Fn(&Path) -> Vec<ServerConfig>>;

struct Scenario {
    label: String,
    /// The `alone` scenario this one is compared with, by index.
    compare_with: Option<usize>,
    make: MakeConfigs,
}

fn fixtures(fixture: &Path, delays: Vec<u64>) -> MakeConfigs {
    let fixture = fixture.to_path_buf();
    Box::new(move |dir| {
        delays
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let args = ["--startup-delay".to_owned(), d.to_string()];
                util::server_config(&format!("fixture{i}"), &fixture, &args, dir)
            })
            .collect()
    })
}

fn pythons(python: PathBuf, script: PathBuf, root: PathBuf, n: usize) -> Scenario {
    Scenario {
        label: if n == 1 {
            "1 Python SDK server (`tests/peers/py_server.py`) alone".to_owned()
        } else {
            format!("{n} Python SDK servers in parallel")
        },
        compare_with: None,
        make: Box::new(move |_| {
            (0..n)
                .map(|i| {
                    let args = [script.to_string_lossy().into_owned()];
                    util::server_config(&format!("py{i}"), &python, &args, &root)
                })
                .collect()
        }),
    }
}

/// Runs every scenario [`REPEATS`] times (interleaved, so drift hits all alike).
pub fn run(fixture: &Path) -> Result<String, String> {
    let delays: Vec<u64> = (0..SERVERS as u64).map(|i| 100 + 50 * i).collect();
    let slowest = *delays.last().expect("non-empty");
    let mut scenarios = vec![
        Scenario {
            label: "1 fixture, no start-up delay (spawn + handshake floor)".to_owned(),
            compare_with: None,
            make: fixtures(fixture, vec![0]),
        },
        Scenario {
            label: format!("1 fixture, `--startup-delay {slowest}` alone"),
            compare_with: None,
            make: fixtures(fixture, vec![slowest]),
        },
        Scenario {
            label: format!(
                "{SERVERS} fixtures in parallel, `--startup-delay` {}, {} … {slowest}",
                delays[0], delays[1]
            ),
            compare_with: Some(1),
            make: fixtures(fixture, delays.clone()),
        },
    ];
    let root = util::repo_root();
    let python = root.join(".peers/venv/bin/python");
    let script = root.join("tests/peers/py_server.py");
    let have_python = python.exists() && script.exists();
    if have_python {
        let alone = scenarios.len();
        scenarios.push(pythons(python.clone(), script.clone(), root.clone(), 1));
        let mut many = pythons(python, script, root, SERVERS);
        many.compare_with = Some(alone);
        scenarios.push(many);
    }

    let rt = util::runtime();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); scenarios.len()];
    let mut cpus: Vec<Vec<Duration>> = vec![Vec::new(); scenarios.len()];
    for rep in 0..REPEATS {
        for (i, s) in scenarios.iter().enumerate() {
            eprintln!("startup: run {}/{REPEATS}: {}", rep + 1, s.label);
            let (time, cpu) = time_until_ready(&rt, &*s.make)?;
            times[i].push(time);
            cpus[i].push(cpu);
        }
    }

    let mut out = format!(
        "## Parallel start-up\n\n\
         Time from `Supervisor::start` until every server is ready (initialize answered, \
         tool list read); each scenario run {REPEATS} times, interleaved; ms. Server CPU: \
         user + sys of all the scenario's server processes from spawn to exit (median of \
         the runs; `RUSAGE_CHILDREN`, clock-tick resolution).\n\n\
         | scenario | run 1 | run 2 | run 3 | median | median ÷ alone | server CPU ms |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    let medians: Vec<Duration> = times.iter().map(|t| median(t.clone())).collect();
    for (i, s) in scenarios.iter().enumerate() {
        let runs: Vec<String> = times[i].iter().map(|&d| ms(d)).collect();
        let ratio = s.compare_with.map_or_else(
            || "—".to_owned(),
            |j| {
                format!(
                    "{:.2}×",
                    medians[i].as_secs_f64() / medians[j].as_secs_f64()
                )
            },
        );
        out += &format!(
            "| {} | {} | {} | {ratio} | {} |\n",
            s.label,
            runs.join(" | "),
            ms(medians[i]),
            ms(median(cpus[i].clone())),
        );
    }
    if !have_python {
        out += "\n_Python peer not installed (`scripts/install-peers.sh`): Python rows skipped._\n";
    }
    Ok(out)
}

/// Time until all servers are ready, and the CPU the servers used (spawn to exit).
fn time_until_ready(
    rt: &tokio::runtime::Runtime,
    make: &dyn Fn(&Path) -> Vec<ServerConfig>,
) -> Result<(Duration, Duration), String> {
    let dir = TempDir::new("startup");
    let cfgs = make(dir.path());
    let opts = util::supervisor_options(dir.path());
    let cpu0 = cpu_children();
    let elapsed = rt.block_on(async move {
        tokio::spawn(async move {
            let t0 = Instant::now();
            let sup = Supervisor::start(cfgs, &opts);
            let handles: Vec<_> = sup.servers().cloned().collect();
            let mut result = Ok(());
            for h in &handles {
                if let Err(e) = h.wait_ready(Duration::from_secs(120)).await {
                    result = Err(format!("{e}\n{}", h.failure_report()));
                    break;
                }
            }
            let elapsed = t0.elapsed();
            sup.shutdown(Duration::from_secs(10)).await;
            result.map(|()| elapsed)
        })
        .await
        .map_err(|e| format!("startup task: {e}"))?
    })?;
    // Every server has been reaped by the shutdown, so its CPU is in RUSAGE_CHILDREN.
    Ok((elapsed, cpu_children() - cpu0))
}
