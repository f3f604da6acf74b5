//! When corral dies, even by SIGKILL, its children die too.

mod common;
use common::*;

#[test]
fn sigkill_of_corral_kills_its_servers_and_their_children() {
    let p = Project::new(
        "[servers.a]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"a.pid\", \"--grandchild\"]\n\
         [servers.b]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"b.pid\", \"--ignore-sigterm\"]\n",
    );
    let (mut child, mut lines) = p.follow_events();
    let mut ready = 0;
    while ready < 2 {
        let line = lines.next().expect("event stream open").unwrap();
        let ev: serde_json::Value = serde_json::from_str(&line).unwrap();
        if ev["kind"] == "server.ready" {
            ready += 1;
        }
    }
    // Server a's own child (think `npx` → `node`) must die too: that is the guard's job.
    let pids = [
        read_pid(&p.dir.join("a.pid")),
        read_pid(&p.dir.join("a.pid.grandchild")),
        read_pid(&p.dir.join("b.pid")),
    ];
    assert!(pids.iter().all(|&pid| alive(pid)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for pid in pids {
        wait_until(&format!("process {pid} to die with corral"), || !alive(pid));
    }
    // The guard itself exits once its work is done.
    wait_until("guard gone", || guard_pids(&p).is_empty());
}

#[test]
fn a_killed_guard_is_replaced_and_the_new_one_still_kills_everything() {
    let p = Project::new(
        "[servers.a]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"a.pid\", \"--grandchild\"]\n",
    );
    let (mut child, mut lines) = p.follow_events();
    loop {
        let line = lines.next().expect("event stream open").unwrap();
        if line.contains("\"server.ready\"") {
            break;
        }
    }
    let pids = [
        read_pid(&p.dir.join("a.pid")),
        read_pid(&p.dir.join("a.pid.grandchild")),
    ];
    wait_until("one guard", || guard_pids(&p).len() == 1);
    let first = guard_pids(&p)[0];
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(first as i32, libc::SIGKILL);
    }
    wait_until("another guard", || {
        let now = guard_pids(&p);
        now.len() == 1 && now[0] != first
    });
    assert!(pids.iter().all(|&pid| alive(pid)), "the servers live on");
    // Then Corral is killed too: the new guard knows the server's group.
    child.kill().unwrap();
    child.wait().unwrap();
    for pid in pids {
        wait_until(&format!("process {pid} to die with corral"), || !alive(pid));
    }
    wait_until("guard gone", || guard_pids(&p).is_empty());
}

/// Live `corral __guard` processes started from this project's directory.
fn guard_pids(p: &Project) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
        if cmdline.ends_with(b"__guard\0") && cwd == p.dir && alive(pid) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn sigterm_of_corral_stops_servers_gracefully() {
    let p =
        Project::new("[servers.a]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"a.pid\"]\n");
    let (mut child, mut lines) = p.follow_events();
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

const ESCAPING: &str = r#"
[servers.fx]
command = "{fixture}"
args = ["--escape", "--pid-file", "fx.pid"]
"#;

#[test]
fn a_process_that_escapes_its_servers_group_is_stopped_with_the_server_and_the_daemon() {
    let p = Project::new(ESCAPING);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let escaped_file = p.dir.join("fx.pid.escaped");
    let escaped = read_pid(&escaped_file);
    let daemon = read_pid(&p.dir.join(".corral/daemon.pid"));
    assert!(alive(escaped));
    wait_until("the escaped process is reparented to the daemon", || {
        ppid_of(escaped) == Some(daemon)
    });

    // Stopping its server ends it too.
    assert_eq!(p.run(&["stop", "fx"]).code(), 0);
    wait_until("the escaped process ends with its server", || {
        !alive(escaped)
    });

    // A new run escapes again; `down` ends that one.
    std::fs::remove_file(&escaped_file).unwrap();
    assert_eq!(p.run(&["start", "fx"]).code(), 0);
    let again = read_pid(&escaped_file);
    assert!(alive(again));
    assert_eq!(p.run(&["down"]).code(), 0);
    wait_until("down ends the escaped process", || !alive(again));
}

#[test]
fn a_process_that_escapes_its_servers_group_dies_with_a_sigkilled_daemon() {
    let p = Project::new(ESCAPING);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let escaped = read_pid(&p.dir.join("fx.pid.escaped"));
    let daemon = read_pid(&p.dir.join(".corral/daemon.pid"));
    // Known to the guard once the daemon found it.
    wait_until("the escaped process is reparented to the daemon", || {
        ppid_of(escaped) == Some(daemon)
    });
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    wait_until("the daemon has scanned", || {
        std::fs::read_to_string(p.dir.join(".corral/events.jsonl"))
            .is_ok_and(|j| j.contains("\"server.escaped\""))
    });
    unsafe {
        libc::kill(daemon as i32, libc::SIGKILL);
    }
    wait_until("the guard kills the escaped process", || !alive(escaped));
}

#[test]
fn a_one_shot_command_leaves_no_escaped_process_behind() {
    let p = Project::new(ESCAPING);
    let r = p.run(&["call", "fx", "echo", r#"{"text":"hi"}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    let escaped = read_pid(&p.dir.join("fx.pid.escaped"));
    wait_until("the escaped process ends with the command", || {
        !alive(escaped)
    });
}

/// A dev process whose child outlives its parent but stays in the group (a reloader's
/// worker, a shell's background job) has escaped nothing: no `server.escaped` for it,
/// while one that left the group (`setsid`) is reported — in words for a process.
#[test]
fn an_orphan_still_in_its_group_is_not_reported_as_escaped() {
    let p = Project::new(
        "[processes.dev]\ncommand = \"(sleep 1000 &); (setsid sleep 1001 &); exec sleep 1002\"\n",
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let journal =
        || std::fs::read_to_string(p.dir.join(".corral/events.jsonl")).unwrap_or_default();
    wait_until("the setsid process reported", || {
        journal().contains("\"server.escaped\"")
    });
    let escapes: Vec<serde_json::Value> = journal()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["kind"] == "server.escaped")
        .collect();
    assert_eq!(
        escapes.len(),
        1,
        "only the one that left the group: {escapes:#?}"
    );
    let reason = escapes[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("process's process group"),
        "{:#}",
        escapes[0]
    );
}
