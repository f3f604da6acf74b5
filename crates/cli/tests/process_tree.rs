//! When corral dies, even by SIGKILL, its children die too.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

#[test]
fn sigkill_of_corral_kills_its_servers() {
    let p = Project::new(
        "[servers.a]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"a.pid\"]\n\
         [servers.b]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"b.pid\", \"--ignore-sigterm\"]\n",
    );
    let mut child = p
        .cmd(&["events", "--standalone", "-f", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ready = 0;
    while ready < 2 {
        let line = lines.next().expect("event stream open").unwrap();
        let ev: serde_json::Value = serde_json::from_str(&line).unwrap();
        if ev["kind"] == "server.ready" {
            ready += 1;
        }
    }
    let pids = [
        read_pid(&p.dir.join("a.pid")),
        read_pid(&p.dir.join("b.pid")),
    ];
    assert!(pids.iter().all(|&pid| alive(pid)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for pid in pids {
        wait_until(&format!("server {pid} to die with corral"), || !alive(pid));
    }
}

#[test]
fn sigterm_of_corral_stops_servers_gracefully() {
    let p =
        Project::new("[servers.a]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"a.pid\"]\n");
    let mut child = p
        .cmd(&["events", "--standalone", "-f", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("event stream open").unwrap();
        if line.contains("\"server.ready\"") {
            break;
        }
    }
    let pid = read_pid(&p.dir.join("a.pid"));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!alive(pid));
    assert!(
        rest.iter().any(|l| l.contains("\"server.stopped\"")),
        "{rest:?}"
    );
    assert!(
        !rest.iter().any(|l| l.contains("\"server.crashed\"")),
        "{rest:?}"
    );
}
