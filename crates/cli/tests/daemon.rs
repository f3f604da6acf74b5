//! The project daemon: shared by every bridge, controlled over its socket, and leaving
//! nothing behind — even when killed.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const CFG: &str = r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"
args = ["--grandchild", "--pid-file", "fx.pid"]

[servers.other]
command = "{fixture}"
"#;

fn server_pid(ps: &Value, name: &str) -> u32 {
    ps["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["pid"].as_u64())
        .unwrap() as u32
}

/// Every live process whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let mut f = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let state = f.next().unwrap_or("");
        if f.next() == Some(&pid.to_string()) && state != "Z" {
            out.push(p);
        }
    }
    out
}

/// A `corral mcp` bridge with a handshake done.
fn bridge(
    p: &Project,
) -> (
    Child,
    Box<dyn Iterator<Item = Value> + Send>,
    std::process::ChildStdin,
) {
    let mut child = p
        .cmd(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = Box::new(
        BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap()),
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"b","version":"1"}}}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    (child, lines, stdin)
}

#[test]
fn five_bridges_at_once_share_one_daemon_and_one_child_per_server() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    // Five agents start at the same moment; none finds a daemon.
    let bridges: Vec<_> = (0..5).map(|_| bridge(&p)).collect();
    let mut handles = Vec::new();
    for (i, (child, mut lines, mut stdin)) in bridges.into_iter().enumerate() {
        handles.push(std::thread::spawn(move || {
            let init = lines.next().unwrap();
            assert_eq!(init["id"], 1, "{init}");
            for n in 0..5 {
                let id = 10 + n;
                let text = format!("bridge {i} call {n}");
                writeln!(
                    stdin,
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fx__echo","arguments":{{"text":"{text}"}}}}}}"#
                )
                .unwrap();
                let reply = lines.find(|m| m["id"] == id).unwrap();
                assert_eq!(reply["result"]["content"][0]["text"], text, "{reply}");
            }
            drop(stdin);
            child
        }));
    }
    let children: Vec<Child> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let status = ps(&p);
    let daemon = status["daemon"]["pid"].as_u64().unwrap() as u32;
    // Exactly one daemon: one pid file, one process running `__daemon` for this project.
    let daemons: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            cmd.ends_with(b"__daemon\0") && cwd == p.dir && alive(*pid)
        })
        .collect();
    assert_eq!(daemons, vec![daemon]);
    // One child per server: the daemon's children are the two servers and the guard.
    let fx = server_pid(&status, "fx");
    let other = server_pid(&status, "other");
    let mut kids = children_of(daemon);
    kids.sort();
    assert_eq!(kids.len(), 3, "servers + guard: {kids:?}");
    assert!(kids.contains(&fx) && kids.contains(&other));
    // The bridges exit when their agent closes stdin.
    for mut c in children {
        let deadline = Instant::now() + DEADLINE;
        while c.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "bridge did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn sigkill_of_the_daemon_leaves_no_process_of_its_tree() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let status = ps(&p);
    let daemon = status["daemon"]["pid"].as_u64().unwrap() as u32;
    let grandchild = read_pid(&p.dir.join("fx.pid.grandchild"));
    let mut tree = children_of(daemon);
    tree.push(grandchild);
    assert_eq!(
        tree.len(),
        4,
        "two servers, the guard, fx's own child: {tree:?}"
    );
    unsafe {
        libc::kill(daemon as i32, libc::SIGKILL);
    }
    for pid in tree {
        wait_until(
            &format!("process {pid} of the daemon's tree to die"),
            || !alive(pid),
        );
    }
    // The stale socket and pid file are detected, not trusted: a new daemon starts.
    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains("daemon started"), "{r:?}");
    assert_ne!(ps(&p)["daemon"]["pid"].as_u64().unwrap() as u32, daemon);
}

#[test]
fn control_commands_work_in_text_and_json() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    // A second `up` reports the running one.
    let again = p.run(&["up", "-d"]);
    assert_eq!(again.code(), 0);
    assert!(again.stdout().contains("already running"), "{again:?}");

    let text = p.run(&["ps"]);
    assert!(text.stdout().contains("NAME"), "{text:?}");
    // `up -d` returns once the daemon listens, not once its servers are ready.
    wait_until("fx ready in `corral ps`", || {
        p.run(&["ps"])
            .stdout()
            .lines()
            .any(|l| l.starts_with("fx ") && l.contains("ready"))
    });

    let call = p.run(&["call", "other", "echo", r#"{"text":"through the daemon"}"#]);
    assert_eq!(call.stdout(), "through the daemon\n", "{call:?}");
    let tools = p.run(&["tools", "--json"]);
    let list: Value = serde_json::from_str(&tools.stdout()).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "other__echo")
    );

    p.run(&[
        "call",
        "fx",
        "write_stderr",
        r#"{"text":"a line for logs"}"#,
    ]);
    let logs = p.run(&["logs", "fx", "-n", "5"]);
    assert!(logs.stdout().contains("a line for logs"), "{logs:?}");
    let logs_json = p.run(&["logs", "fx", "-n", "1", "--json"]);
    let line: Value = serde_json::from_str(logs_json.stdout().lines().last().unwrap()).unwrap();
    assert_eq!(line["line"], "a line for logs");

    let before = server_pid(&ps(&p), "other");
    let r = p.run(&["restart", "other", "--json"]);
    let row: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(row["state"], "ready", "{r:?}");
    assert_ne!(row["pid"].as_u64().unwrap() as u32, before);

    // The rows are one type: what the daemon writes, `ps --json` carries and the CLI's
    // `ps` table shows agree field by field.
    let r = p.run(&["ps", "--json"]);
    let typed: corral_events::rows::PsReply = serde_json::from_str(&r.stdout()).unwrap();
    let other = typed.servers.iter().find(|s| s.name == "other").unwrap();
    assert_eq!(
        (other.state.as_str(), other.pid),
        ("ready", row["pid"].as_u64().map(|p| p as u32))
    );
    assert_eq!(
        typed.daemon.pid,
        ps(&p)["daemon"]["pid"].as_u64().unwrap() as u32
    );
    let text = p.run(&["ps"]).stdout();
    let cols: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("other "))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        (cols[1], cols[2], cols[4], cols[5]),
        (
            "ready",
            other.pid.unwrap().to_string().as_str(),
            other.restarts.to_string().as_str(),
            other.tools.to_string().as_str()
        ),
        "{text}"
    );
    assert!(
        !text.contains("PROCESS"),
        "no processes, no second table: {text}"
    );

    let r = p.run(&["stop", "other"]);
    assert_eq!(r.stdout(), "other: stopped\n", "{r:?}");
    let r = p.run(&["start", "other"]);
    assert!(r.stdout().starts_with("other: ready (pid "), "{r:?}");
    assert_eq!(p.run(&["restart", "nope"]).code(), 2);

    let events = p.run(&["events", "-n", "100", "--json"]);
    let kinds: Vec<String> = events
        .stdout()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for k in ["daemon.started", "server.ready", "server.stopped"] {
        assert!(kinds.iter().any(|x| x == k), "{k} missing in {kinds:?}");
    }
    let text = p.run(&["events", "-n", "3"]);
    assert_eq!(text.stdout().lines().count(), 3, "{text:?}");
}

#[test]
fn the_journal_keeps_a_crash_across_daemon_restarts_and_down_stops_everything() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let status = ps(&p);
    let fx = server_pid(&status, "fx");
    let grandchild = read_pid(&p.dir.join("fx.pid.grandchild"));
    let _ = p.run(&["call", "other", "crash"]);
    let down = p.run(&["down"]);
    assert_eq!(down.code(), 0, "{down:?}");
    assert!(!alive(fx));
    wait_until("fx's child gone", || !alive(grandchild));
    // The daemon is gone; its journal is still readable, with the crash and its tail.
    let events = p.run(&["events", "-n", "200", "--json"]);
    let crash = events
        .stdout()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "server.crashed")
        .expect("crash in journal");
    assert!(
        crash["stderr_tail"]
            .to_string()
            .contains("crashing in the middle of a call")
    );
    assert!(p.run(&["down"]).stdout().contains("no daemon running"));
}

#[test]
fn reload_applies_only_the_difference_and_agents_hear_of_it() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"
[servers.keep]
command = "{fixture}"
[servers.change]
command = "{fixture}"
[servers.gone]
command = "{fixture}"
"#,
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let before = ps(&p);
    let (keep, change, gone) = (
        server_pid(&before, "keep"),
        server_pid(&before, "change"),
        server_pid(&before, "gone"),
    );
    // An agent is connected through a bridge.
    let (mut agent, mut lines, mut stdin) = bridge(&p);
    assert_eq!(lines.next().unwrap()["id"], 1);

    // A broken config changes nothing: `corral reload` reports its problems (exit 2),
    // and a SIGHUP to the daemon records why it did not reload.
    let good = std::fs::read_to_string(p.dir.join("corral.toml")).unwrap();
    p.write("corral.toml", "[servers.keep]\ncomand = \"x\"\n");
    let r = p.run(&["reload"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(r.stderr().contains("did you mean `command`"), "{r:?}");
    let daemon = before["daemon"]["pid"].as_u64().unwrap() as i32;
    unsafe {
        libc::kill(daemon, libc::SIGHUP);
    }
    wait_until("reload_failed in the journal", || {
        std::fs::read_to_string(p.dir.join(".corral/events.jsonl"))
            .unwrap_or_default()
            .contains("daemon.reload_failed")
    });
    std::fs::write(p.dir.join("corral.toml"), good).unwrap();
    assert_eq!(server_pid(&ps(&p), "gone"), gone);

    p.write(
        "corral.toml",
        r#"
[gateway]
listen = "127.0.0.1:0"
[servers.keep]
command = "{fixture}"
[servers.change]
command = "{fixture}"
args = ["--tools", "1"]
[servers.new]
command = "{fixture}"
"#,
    );
    let r = p.run(&["reload", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let d: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(d["added"], serde_json::json!(["new"]));
    assert_eq!(d["removed"], serde_json::json!(["gone"]));
    assert_eq!(d["restarted"], serde_json::json!(["change"]));
    assert_eq!(d["unchanged"], serde_json::json!(["keep"]));

    let after = ps(&p);
    assert_eq!(
        server_pid(&after, "keep"),
        keep,
        "an unchanged server keeps running"
    );
    wait_until("gone stopped", || !alive(gone));
    assert!(!alive(change));
    // The agent hears of the new tool list and sees the new server's tools.
    let note = lines.find(|m| m["method"] == "notifications/tools/list_changed");
    assert!(note.is_some());
    let deadline = Instant::now() + DEADLINE;
    loop {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":99,"method":"tools/list"}}"#
        )
        .unwrap();
        let list = lines.find(|m| m["id"] == 99).unwrap();
        let names = names(&list["result"]["tools"]);
        if names.contains(&"new__echo") && names.contains(&"change__tool_0") {
            assert!(!names.iter().any(|n| n.starts_with("gone__")), "{names:?}");
            break;
        }
        assert!(Instant::now() < deadline, "tools never updated: {names:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stdin);
    let _ = agent.wait();
}

#[test]
fn events_and_logs_follow_live() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let mut events = p
        .cmd(&["events", "-f", "-n", "0", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut logs = p
        .cmd(&["logs", "other", "-f", "-n", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let event_rx = lines_of(events.stdout.take().unwrap());
    let log_rx = lines_of(logs.stdout.take().unwrap());
    // The streams follow from the moment the daemon takes them: poke until each shows a
    // fresh line, bounded by the deadline.
    let deadline = Instant::now() + DEADLINE;
    let (mut saw_event, mut saw_log) = (false, false);
    for i in 0.. {
        assert!(
            Instant::now() < deadline,
            "live event {saw_event}, live log line {saw_log}"
        );
        let text = format!("live line {i}");
        p.run(&[
            "call",
            "other",
            "write_stderr",
            &format!(r#"{{"text":"{text}"}}"#),
        ]);
        p.run(&["restart", "other"]);
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until && !(saw_event && saw_log) {
            if let Ok(l) = event_rx.recv_timeout(Duration::from_millis(20)) {
                let e: Value = serde_json::from_str(&l).unwrap();
                saw_event |= e["kind"] == "server.ready" && e["source"] == "server:other";
            }
            while let Ok(l) = log_rx.try_recv() {
                saw_log |= l.starts_with("live line ");
            }
        }
        if saw_event && saw_log {
            break;
        }
    }
    let _ = events.kill();
    let _ = logs.kill();
    let _ = events.wait();
    let _ = logs.wait();
}

#[test]
fn call_accepts_the_listed_tool_name_alone_or_after_its_server_through_the_daemon() {
    let p = Project::new(
        "[gateway]\nlisten = \"127.0.0.1:0\"\n[servers.fx]\ncommand = \"{fixture}\"\n[servers.other]\ncommand = \"{fixture}\"\nargs = [\"--tools\", \"2\"]\ntools = { allow = [\"tool_*\"] }\n",
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    listed_names_round_trip(&p, &[]);
    let r = p.run(&["call", "other", "fx__echo"]);
    assert!(
        r.stderr().contains(
            "tool 'fx__echo' belongs to server 'fx', not 'other': `corral call fx__echo`"
        ),
        "{r:?}"
    );
    // The calls went to the daemon's servers, not to ones started for the command.
    let r = p.run(&["call", "fx__getpid"]);
    assert_eq!(
        r.stdout().trim(),
        server_pid(&ps(&p), "fx").to_string(),
        "{r:?}"
    );
}
