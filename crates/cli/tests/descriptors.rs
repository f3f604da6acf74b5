//! When descriptors run short: a flood of idle HTTP connections must not take the
//! daemon's control socket, its servers' restarts or a CPU core with it.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
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

/// `corral up` in the foreground with 64 descriptors at most; the child and the MCP
/// endpoint's `host:port`.
fn up_at_64_descriptors(p: &Project) -> (std::process::Child, String) {
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
    (child, addr)
}

#[test]
fn a_flood_of_idle_connections_at_a_low_descriptor_limit_costs_neither_control_nor_restarts() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let (mut child, addr) = up_at_64_descriptors(&p);

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

/// A WebSocket-capable target stand-in: answers every request `101` and holds the
/// connection until the other side closes it.
fn upgrading_target() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match s.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\
                      Upgrade: websocket\r\n\r\n",
                );
                while s.read(&mut [0u8; 256]).is_ok_and(|n| n > 0) {}
            });
        }
    });
    addr
}

#[test]
fn a_flood_of_websocket_upgrades_at_a_low_descriptor_limit_costs_neither_control_nor_restarts() {
    let target = upgrading_target();
    let p = Project::new(&format!(
        "{CFG}\n[proxies.web]\ntarget = \"http://{target}\"\n"
    ));
    let _down = Down(&p);
    let (mut child, _) = up_at_64_descriptors(&p);
    let ps: Value = serde_json::from_str(&p.run(&["ps", "--json"]).stdout()).unwrap();
    let proxy = ps["proxies"][0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no proxy in {ps}"))
        .trim_start_matches("http://")
        .to_owned();

    // Far more upgrades than the daemon has descriptors, each held open once it is
    // answered (101, or 503 past the cap); a daemon that stops answering ends the flood.
    let mut upgraded = 0;
    let mut held = Vec::new();
    for _ in 0..200 {
        let Ok(mut s) = std::net::TcpStream::connect(&proxy) else {
            break;
        };
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let req = format!(
            "GET /hmr HTTP/1.1\r\nHost: {proxy}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        );
        let _ = s.write_all(req.as_bytes());
        let mut head = [0u8; 12];
        if s.read_exact(&mut head).is_err() {
            break;
        }
        if head.ends_with(b"101") {
            upgraded += 1;
        }
        held.push(s);
    }
    assert!(upgraded > 0, "no upgrade went through");
    assert!(
        upgraded <= 8,
        "{upgraded} upgrades past a cap of 16 descriptors"
    );

    // The control socket still answers, and a server still restarts.
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let ps: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(ps["servers"][0]["state"], "ready", "{ps}");
    let r = p.run(&["restart", "fx"]);
    assert_eq!(r.code(), 0, "a restart at the descriptor limit: {r:?}");
    drop(held);
    let _ = child.kill();
    let _ = child.wait();
}
