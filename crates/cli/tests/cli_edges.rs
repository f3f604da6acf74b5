//! The rough edges a new user hits in the first hour, each pinned through the real binary.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const DAEMON: &str = r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"

[servers.other]
command = "{fixture}"
"#;

/// Waits (bounded) for `child` to exit; its exit code.
fn exit_code(child: &mut Child) -> i32 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {DEADLINE:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The next line from `rx` that satisfies `want`, bounded by the deadline; the lines
/// before it are appended to `seen`.
fn next_matching(rx: &Receiver<String>, seen: &mut Vec<String>, want: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = want(&line);
                seen.push(line);
                if done {
                    return;
                }
            }
            Err(_) => panic!(
                "no matching line within {DEADLINE:?}; saw:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn ready_pids(p: &Project) -> Option<Vec<u64>> {
    let r = p.run(&["ps", "--json"]);
    let v: Value = serde_json::from_str(&r.stdout()).ok()?;
    v["servers"]
        .as_array()?
        .iter()
        .map(|s| (s["state"] == "ready").then(|| s["pid"].as_u64()).flatten())
        .collect()
}

#[test]
fn events_follow_prints_the_daemons_last_events_and_exits_0_when_it_stops() {
    let p = Project::new(DAEMON);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let mut follower = p
        .cmd(&["events", "-f", "-n", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(follower.stdout.take().unwrap());
    // The one line of history: the follower is subscribed from here on.
    let mut seen = Vec::new();
    next_matching(&rx, &mut seen, |_| true);
    assert_eq!(p.run(&["down"]).code(), 0);
    assert_eq!(exit_code(&mut follower), 0, "the follower exits 0");
    let kinds: Vec<(String, String)> = rx
        .iter()
        .map(|l| {
            let e: Value = serde_json::from_str(&l).unwrap();
            (
                e["kind"].as_str().unwrap().into(),
                e["source"].as_str().unwrap().into(),
            )
        })
        .collect();
    for server in ["server:fx", "server:other"] {
        assert!(
            kinds.contains(&("server.stopped".into(), server.into())),
            "{server} stopped missing: {kinds:?}"
        );
    }
    assert_eq!(
        kinds.last().map(|k| k.0.as_str()),
        Some("daemon.stopped"),
        "{kinds:?}"
    );
}

#[test]
fn check_json_reports_the_problems_on_stdout_and_exits_2() {
    let p = Project::new(
        "[servers.a]\ncomand = \"x\"\n\n[servers.b]\ncommand = \"y\"\nrestart = \"sometimes\"\n",
    );
    let r = p.run(&["check", "--json"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert_eq!(r.stderr(), "", "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).expect("JSON on stdout");
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{v}");
    let first = &problems[0];
    assert!(
        first["file"].as_str().unwrap().ends_with("corral.toml"),
        "{v}"
    );
    assert_eq!(first["line"], 2);
    assert_eq!(first["key"], "servers.a.comand");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `command`")
    );
    assert_eq!(problems[1]["line"], 6);
    assert_eq!(problems[1]["key"], "servers.b.restart");

    // No config at all: still JSON, with nothing to point at.
    std::fs::remove_file(p.dir.join("corral.toml")).unwrap();
    let r = p.run(&["check", "--json"]);
    assert_eq!(r.code(), 2, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).expect("JSON on stdout");
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["file"], Value::Null);
    assert!(
        v["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("corral init")
    );
}

#[test]
fn check_warns_of_a_command_not_on_path_and_a_missing_script_but_passes() {
    let p = Project::new(
        r#"
[servers.uninstalled]
command = "corral-test-no-such-command"
env = { PATH = "/nonexistent-a:/nonexistent-b" }

[servers.script]
command = "sh"
args = ["-e", "missing.sh", "--flag"]

[servers.present]
command = "sh"
args = ["present.sh"]

[servers.inline]
command = "sh"
args = ["-c", "exec missing-too"]
"#,
    );
    p.write("present.sh", "exit 0\n");
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 0, "warnings do not fail the check: {r:?}");
    let err = r.stderr();
    assert!(
        err.contains(
            "warning: servers.uninstalled.command: command 'corral-test-no-such-command' not \
             found in PATH (searched: /nonexistent-a:/nonexistent-b)"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "warning: servers.script.args: 'sh' would run 'missing.sh', which does not exist in"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 2, "no false alarms: {err}");
    assert!(
        r.stdout()
            .contains("2 warnings above (warnings do not fail the check"),
        "{r:?}"
    );

    let r = p.run(&["check", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["ok"], true);
    let keys: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["servers.script.args", "servers.uninstalled.command"]);
}

#[test]
fn init_below_a_project_refuses_to_shadow_its_config() {
    let p = Project::new("[servers.fx]\ncommand = \"{fixture}\"\n");
    let sub = p.dir.join("sub/deeper");
    std::fs::create_dir_all(&sub).unwrap();
    let r = p.run_in(&sub, &["init"]);
    assert_eq!(r.code(), 1, "{r:?}");
    let parent = p.dir.join("corral.toml");
    assert!(r.stderr().contains(&parent.display().to_string()), "{r:?}");
    assert!(r.stderr().contains("--force"), "{r:?}");
    assert!(r.stderr().contains("corral -c PATH init"), "{r:?}");
    assert!(!sub.join("corral.toml").exists());

    // `-c` writes where it is told; `--force` makes the directory a project of its own.
    let r = p.run_in(&sub, &["-c", "elsewhere.toml", "init"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(sub.join("elsewhere.toml").is_file());
    let r = p.run_in(&sub, &["init", "--force"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(sub.join("corral.toml").is_file());

    // A parent's .mcp.json is a project's config too (discovery would pick it).
    let q = Project::new("");
    std::fs::remove_file(q.dir.join("corral.toml")).unwrap();
    q.write(".mcp.json", r#"{"mcpServers": {}}"#);
    std::fs::create_dir(q.dir.join("sub")).unwrap();
    let r = q.run_in(&q.dir.join("sub"), &["init"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(r.stderr().contains(".mcp.json"), "{r:?}");
}

#[test]
fn logs_without_a_daemon_read_the_log_file_and_say_what_is_missing() {
    let p = Project::new(
        "[servers.fx]\ncommand = \"{fixture}\"\n\n[servers.never]\ncommand = \"{fixture}\"\n",
    );
    let r = p.run(&[
        "call",
        "fx",
        "write_stderr",
        r#"{"text":"from a one-shot run"}"#,
    ]);
    assert_eq!(r.code(), 0, "{r:?}");

    let r = p.run(&["logs", "fx", "-n", "5"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains("from a one-shot run"), "{r:?}");
    assert!(r.stderr().contains("no daemon runs"), "{r:?}");
    let r = p.run(&["logs", "fx", "-n", "1", "--json"]);
    let line: Value = serde_json::from_str(r.stdout().trim()).unwrap();
    assert_eq!(line["line"], "from a one-shot run");

    let r = p.run(&["logs", "never"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(
        r.stderr().contains("server 'never' has no log yet"),
        "{r:?}"
    );
    let r = p.run(&["logs", "nosuch"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains("configured servers: fx, never"),
        "{r:?}"
    );

    // -f follows the file: a later one-shot run's lines appear.
    let mut follower = p
        .cmd(&["logs", "fx", "-f", "-n", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(follower.stdout.take().unwrap());
    let deadline = Instant::now() + DEADLINE;
    let mut seen = false;
    for i in 0.. {
        assert!(Instant::now() < deadline, "no followed line");
        let text = format!("later line {i}");
        p.run(&[
            "call",
            "fx",
            "write_stderr",
            &format!(r#"{{"text":"{text}"}}"#),
        ]);
        let until = Instant::now() + Duration::from_millis(500);
        while let Ok(l) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            seen |= l.starts_with("later line ");
        }
        if seen {
            break;
        }
    }
    unsafe {
        libc::kill(follower.id() as i32, libc::SIGTERM);
    }
    assert_eq!(exit_code(&mut follower), 0);
}

#[test]
fn each_run_of_a_server_starts_with_a_header_in_its_log() {
    let p = Project::new(DAEMON);
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let log = p.dir.join(".corral/logs/other.log");
    let headers = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("──── "))
            .map(str::to_owned)
            .collect()
    };
    wait_until("the first header", || headers().len() == 1);
    let _ = p.run(&["call", "other", "crash"]);
    wait_until("a second header after the restart", || headers().len() == 2);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let second = lines.iter().rposition(|l| l.starts_with("──── ")).unwrap();
    assert!(
        lines[..second].contains(&"fixture: crashing in the middle of a call"),
        "the crash belongs to the first run: {text}"
    );
    for (run, h) in headers().iter().enumerate() {
        // ──── 2026-11-23T13:45:01Z server 'other' started (pid N, run K) ────
        let rest = h.strip_prefix("──── ").unwrap();
        let (ts, rest) = rest.split_once(' ').unwrap();
        assert_eq!(ts.len(), "2026-11-23T13:45:01Z".len(), "{h}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{h}");
        let pid = rest
            .strip_prefix("server 'other' started (pid ")
            .and_then(|r| r.strip_suffix(&format!(", run {}) ────", run + 1)))
            .unwrap_or_else(|| panic!("{h}"));
        pid.parse::<u32>().unwrap();
    }
    // `corral logs` shows them: a run is told from the next.
    let r = p.run(&["logs", "other", "-n", "100"]);
    assert_eq!(
        r.stdout()
            .lines()
            .filter(|l| l.starts_with("──── "))
            .count(),
        2,
        "{r:?}"
    );
}

#[test]
fn up_console_shows_a_crashs_stderr_once() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[servers.loud]
command = "{fixture}"
restart = "never"

[servers.hush]
command = "{fixture}"
restart = "never"
quiet = true
"#,
    );
    let _down = Down(&p);
    let mut up = p
        .cmd(&["up"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(up.stdout.take().unwrap());
    let err = lines_of(up.stderr.take().unwrap());
    let mut seen = Vec::new();
    next_matching(&out, &mut seen, |l| l.contains("control socket"));
    wait_until("both servers ready", || {
        ready_pids(&p).is_some_and(|pids| pids.len() == 2)
    });
    for server in ["loud", "hush"] {
        let r = p.run(&["call", server, "crash"]);
        assert_eq!(r.code(), 1, "{r:?}");
    }
    let mut console = Vec::new();
    for server in ["loud", "hush"] {
        next_matching(&err, &mut console, |l| {
            l.contains("server.crashed") && l.contains(&format!("server:{server}"))
        });
    }
    // Everything of the crash is printed before its event, except the hush tail, which
    // follows its event line.
    next_matching(&err, &mut console, |l| l.contains("crashing in the middle"));
    let text = console.join("\n");
    let crash_line = "fixture: crashing in the middle of a call";
    assert_eq!(
        text.matches(crash_line).count(),
        2,
        "once for each server: {text}"
    );
    assert!(
        text.contains(&format!("[server:loud] {crash_line}")),
        "{text}"
    );
    let loud = console
        .iter()
        .find(|l| l.contains("server.crashed") && l.contains("server:loud"))
        .unwrap();
    assert!(loud.ends_with("(stderr above)"), "{text}");
    let hush = console
        .iter()
        .position(|l| l.contains("server.crashed") && l.contains("server:hush"))
        .unwrap();
    assert!(
        console[hush + 1..]
            .iter()
            .any(|l| l == &format!("    {crash_line}")),
        "a quiet server's tail is shown under its event: {text}"
    );
    assert!(!text.contains("[server:hush]"), "{text}");
    unsafe {
        libc::kill(up.id() as i32, libc::SIGTERM);
    }
    assert_eq!(exit_code(&mut up), 0);
}

#[test]
fn an_unknown_server_name_is_a_usage_error_everywhere() {
    let p = Project::new(DAEMON);
    // Without a daemon: the config says which names exist.
    for args in [
        &["restart", "nosuch"][..],
        &["stop", "nosuch"],
        &["start", "nosuch"],
        &["logs", "nosuch"],
        &["tools", "nosuch"],
        &["call", "nosuch", "echo"],
    ] {
        let r = p.run(args);
        assert_eq!(r.code(), 2, "{args:?}: {r:?}");
        assert!(r.stderr().contains("fx, other"), "{args:?}: {r:?}");
    }
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    for args in [
        &["restart", "nosuch"][..],
        &["stop", "nosuch"],
        &["start", "nosuch"],
        &["logs", "nosuch"],
        &["tools", "nosuch"],
        &["call", "nosuch", "echo"],
    ] {
        let r = p.run(args);
        assert_eq!(r.code(), 2, "{args:?}: {r:?}");
        assert!(r.stderr().contains("fx, other"), "{args:?}: {r:?}");
    }
    // A server added to the file but not reloaded: the daemon does not know it, and
    // says so with its error code (the CLI does not match its text).
    let mut cfg = std::fs::read_to_string(p.dir.join("corral.toml")).unwrap();
    cfg.push_str("\n[servers.later]\ncommand = \"sh\"\n");
    std::fs::write(p.dir.join("corral.toml"), cfg).unwrap();
    for args in [&["tools", "later"][..], &["call", "later", "echo"]] {
        let r = p.run(args);
        assert_eq!(r.code(), 2, "{args:?}: {r:?}");
        assert!(
            r.stderr()
                .contains("no server named 'later'; servers: fx, other"),
            "{args:?}: {r:?}"
        );
    }
}

#[test]
fn every_argument_has_help_text() {
    let p = Project::new("");
    let mut subcommands = vec![None];
    let top = p.run(&["--help"]);
    let mut in_commands = false;
    for line in top.stdout().lines() {
        if line == "Commands:" {
            in_commands = true;
        } else if line.is_empty() {
            in_commands = false;
        } else if in_commands {
            let name = line.split_whitespace().next().unwrap();
            if name != "help" {
                subcommands.push(Some(name.to_owned()));
            }
        }
    }
    assert!(subcommands.len() > 10, "{top:?}");
    for sub in subcommands {
        let args: Vec<&str> = sub.iter().map(String::as_str).chain(["--help"]).collect();
        let r = p.run(&args);
        assert_eq!(r.code(), 0, "{args:?}: {r:?}");
        let mut section = "";
        for line in r.stdout().lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                section = line;
                continue;
            }
            if !matches!(section, "Arguments:" | "Options:") || line.trim().is_empty() {
                continue;
            }
            // An entry is `  <NAME> / -x, --flag <V>`, two or more spaces, its help.
            let entry = line.trim(); // clap pads an entry without help with spaces
            assert!(
                entry.contains("  "),
                "`corral {}` has an argument without help: {line:?}\n{}",
                args.join(" "),
                r.stdout()
            );
        }
    }
}
