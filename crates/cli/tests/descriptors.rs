//! When descriptors run short: a flood of idle HTTP connections must not take the
//! daemon's control socket, its servers' restarts or a CPU core with it.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

const CFG: &str = r#"
[servers.fx]
command = "{fixture}"
"#;

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After the command: state is field 0, utime 11, stime 12.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn a_flood_of_idle_connections_at_a_low_descriptor_limit_costs_neither_control_nor_restarts() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let mut up = p.cmd(&["up"]);
    up.stdout(Stdio::piped()).stderr(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        up.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            Ok(())
        });
    }
    let mut child = up.spawn().unwrap();
    let first = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .next()
        .unwrap()
        .unwrap();
    let addr = first
        .strip_prefix("corral: MCP endpoint http://")
        .and_then(|a| a.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    // Far more connections than the daemon has descriptors; all held open.
    let held: Vec<_> = (0..200)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert!(held.len() > 64, "only {} connections made", held.len());

    // The control socket still answers, and a server still restarts.
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let ps: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(ps["servers"][0]["state"], "ready", "{ps}");
    let r = p.run(&["restart", "fx"]);
    assert_eq!(r.code(), 0, "a restart at the descriptor limit: {r:?}");

    // No busy loop on a listener that stays readable: the daemon idles.
    let (ticks, start) = (cpu_ticks(child.id()), Instant::now());
    wait_until("a second passes", || {
        start.elapsed() >= Duration::from_secs(1)
    });
    let used = cpu_ticks(child.id()) - ticks;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let elapsed = start.elapsed().as_secs_f64();
    assert!(
        (used as f64) < 0.3 * elapsed * hz as f64,
        "the daemon used {used} ticks of CPU in {elapsed:.1}s while idle connections were held"
    );
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
}
