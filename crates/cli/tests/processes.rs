//! Dev processes through the CLI and a real daemon: `ps`, `start`/`stop`/`restart`,
//! `logs`, `corral run` (in the daemon and standalone), alerts on the `up` console,
//! `check` and `reload`. Real programs: python3 and sh.

mod common;
use common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::Instant;

fn ready_pid(p: &Project, name: &str) -> u64 {
    let mut pid = 0;
    wait_until(&format!("process {name} ready"), || {
        let row = process(&ps(p), name);
        pid = row["pid"].as_u64().unwrap_or(0);
        row["state"] == "ready" && row["ready"] == true && pid > 0
    });
    pid
}

/// The run headers of a process log: `──── TIME process 'NAME' started (pid P, run N) ────`.
fn run_headers(log: &str, name: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.starts_with("──── ") && l.contains(&format!("process '{name}' started")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn ps_shows_a_process_waiting_for_a_slow_one_then_both_ready() {
    // `slow` is ready when it prints "up", which it does once the test creates `go`.
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[processes.slow]
command = "while [ ! -e go ]; do sleep 0.05; done; echo up; exec sleep 60"
ready = { log = "^up$" }

[processes.web]
command = ["python3", "-u", "-c", "import time; print('serving'); time.sleep(60)"]
depends_on = ["slow"]
"#,
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("slow running, web waiting for it", || {
        let ps = ps(&p);
        let (slow, web) = (process(&ps, "slow"), process(&ps, "web"));
        slow["pid"].as_u64().is_some()
            && slow["state"] == "starting"
            && web["state"] == "starting"
            && web["waiting_for"] == "process 'slow'"
            && web["pid"].is_null()
    });
    let text = p.run(&["ps"]).stdout();
    let web_line = text.lines().find(|l| l.starts_with("web ")).unwrap();
    assert!(
        web_line.contains("starting (waiting for process 'slow')"),
        "{text}"
    );
    assert!(text.contains("PROCESS"), "{text}");

    std::fs::write(p.dir.join("go"), "").unwrap();
    let slow = ready_pid(&p, "slow");
    let web = ready_pid(&p, "web");
    assert_ne!(slow, web);
    assert!(alive(slow as u32) && alive(web as u32));
    let ps = ps(&p);
    let row = process(&ps, "web");
    assert_eq!(row["waiting_for"], Value::Null, "{row}");
    assert_eq!(row["restarts"], 0);
    assert!(
        row["command"]
            .as_str()
            .unwrap()
            .starts_with("python3 -u -c")
    );
    let text = p.run(&["ps"]).stdout();
    let line = text.lines().find(|l| l.starts_with("web ")).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[..2], ["web", "ready"], "{text}");
    assert_eq!(cols[2], web.to_string(), "{text}");
    assert_eq!(cols[5], "yes", "{text}");
}

#[test]
fn stop_start_restart_and_logs_of_a_process_with_and_without_a_daemon() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"

[processes.tick]
command = ["sh", "-c", "echo tick $$$$; exec sleep 60"]  # `$$` is a `$` in corral.toml
"#,
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let first = ready_pid(&p, "tick");

    let r = p.run(&["stop", "tick"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout(), "tick: stopped\n", "{r:?}");
    let row = process(&ps(&p), "tick");
    assert_eq!(
        (row["state"].as_str(), row["pid"].as_u64()),
        (Some("stopped"), None)
    );
    wait_until("the first run gone", || !alive(first as u32));

    let r = p.run(&["start", "tick", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let row: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(row["state"], "ready", "{r:?}");
    let second = row["pid"].as_u64().unwrap();
    assert_ne!(second, first);

    let r = p.run(&["restart", "tick"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let third = ready_pid(&p, "tick");
    assert!(
        r.stdout()
            .starts_with(&format!("tick: ready (pid {third})")),
        "{r:?}"
    );
    assert_ne!(third, second);
    wait_until("the second run gone", || !alive(second as u32));

    // Each run is in the log under its own header, with what it printed.
    let mut log = String::new();
    wait_until("three runs in the log", || {
        let r = p.run(&["logs", "tick"]);
        log = r.stdout();
        r.code() == 0 && log.contains(&format!("tick {third}"))
    });
    let headers = run_headers(&log, "tick");
    assert_eq!(headers.len(), 3, "{log}");
    for (n, (header, pid)) in headers.iter().zip([first, second, third]).enumerate() {
        assert!(
            header.ends_with(&format!("(pid {pid}, run {}) ────", n + 1)),
            "{log}"
        );
        assert!(log.contains(&format!("tick {pid}\n")), "{log}");
    }

    // An unknown name lists both kinds, exit 2.
    for verb in ["stop", "start", "restart", "logs"] {
        let r = p.run(&[verb, "tock"]);
        assert_eq!(r.code(), 2, "{verb}: {r:?}");
        assert!(
            r.stderr().contains(
                "no server, process or proxy named 'tock'; servers: fx; processes: tick; proxies: (none)"
            ),
            "{verb}: {r:?}"
        );
    }

    // Without a daemon, the log is read from its file.
    assert_eq!(p.run(&["down"]).code(), 0);
    let r = p.run(&["logs", "tick"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stderr().contains("no daemon runs"), "{r:?}");
    assert_eq!(run_headers(&r.stdout(), "tick"), headers, "{r:?}");
    let r = p.run(&["logs", "tock"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr()
            .contains("configured servers: fx; processes: tick"),
        "{r:?}"
    );
}

#[test]
fn run_starts_an_ad_hoc_process_in_the_daemon_once() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"
"#,
    );
    // No daemon: says how to get one, or to run it here.
    let r = p.run(&["run", "hi", "--", "sh", "-c", "echo hi; sleep 30"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(r.stderr().contains("corral run --standalone hi"), "{r:?}");

    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let r = p.run(&["run", "hi", "--", "sh", "-c", "echo hi; sleep 30"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let row = process(&ps(&p), "hi");
    let pid = row["pid"].as_u64().expect("a pid");
    let log = p.dir.join(".corral/logs/hi.log");
    assert_eq!(
        r.stdout(),
        format!("hi: started (pid {pid}); log {}\n", log.display()),
        "{r:?}"
    );
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["command"], "sh -c echo hi; sleep 30", "{row}");
    wait_until("hi in its log", || {
        p.run(&["logs", "hi"]).stdout().lines().any(|l| l == "hi")
    });
    let text = p.run(&["ps"]).stdout();
    assert!(
        text.lines()
            .any(|l| l.starts_with("hi ") && l.contains(&pid.to_string())),
        "{text}"
    );

    // The same name again, or a server's: refused, exit 2, saying what to do.
    let r = p.run(&["run", "hi", "--", "true"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains("`corral restart hi` restarts it"),
        "{r:?}"
    );
    assert_eq!(process(&ps(&p), "hi")["pid"].as_u64(), Some(pid));
    let r = p.run(&["run", "fx", "--", "true"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(r.stderr().contains("'fx' is a server"), "{r:?}");

    // One argument is a shell line; a program that does not exist is not left behind.
    let r = p.run(&["run", "line", "--", "echo one && echo two"]);
    assert_eq!(r.code(), 0, "{r:?}");
    wait_until("the shell line ran", || {
        let log = p.run(&["logs", "line"]).stdout();
        log.contains("\none\ntwo\n")
    });
    let r = p.run(&["run", "nope", "--", "no-such-program-corral", "x"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(r.stderr().contains("cannot run process 'nope'"), "{r:?}");
    assert_eq!(process(&ps(&p), "nope"), Value::Null);

    // `stop` ends it; the row stays (`start` would run it again).
    assert_eq!(p.run(&["stop", "hi"]).code(), 0);
    wait_until("hi gone", || !alive(pid as u32));
}

#[test]
fn run_follow_streams_output_until_interrupted_and_the_process_keeps_running() {
    let p = Project::new("[gateway]\nlisten = \"127.0.0.1:0\"\n");
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let mut child = p
        .cmd(&[
            "run",
            "-f",
            "talk",
            "--",
            "sh",
            "-c",
            "echo first; while [ ! -e stop ]; do sleep 0.05; done; echo second; exec sleep 60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let next = |what: &str| {
        let start = Instant::now();
        loop {
            let left = DEADLINE.saturating_sub(start.elapsed());
            let line = out
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line {what}"));
            if line.contains(what) {
                return line;
            }
        }
    };
    assert!(next("talk: started").starts_with("talk: started (pid "));
    next("process 'talk' started");
    assert_eq!(next("first"), "first");
    std::fs::write(p.dir.join("stop"), "").unwrap();
    assert_eq!(next("second"), "second");
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let row = process(&ps(&p), "talk");
    assert_eq!(row["state"], "ready", "detached, still running: {row}");
}

#[test]
fn run_standalone_shows_the_output_and_exits_with_the_process_code() {
    let p = Project::new("");
    let r = p.run(&[
        "run",
        "--standalone",
        "x",
        "--",
        "sh",
        "-c",
        "echo hi; exit 3",
    ]);
    assert_eq!(r.code(), 3, "{r:?}");
    assert!(r.stderr().lines().any(|l| l == "[process:x] hi"), "{r:?}");
    let r = p.run(&["run", "--standalone", "ok", "--", "echo fine"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stderr().lines().any(|l| l == "[process:ok] fine"),
        "{r:?}"
    );
    // Both runs are in their logs.
    let log = std::fs::read_to_string(p.dir.join(".corral/logs/x.log")).unwrap();
    assert_eq!(run_headers(&log, "x").len(), 1, "{log}");
    assert!(log.ends_with("hi\n"), "{log}");
}

#[test]
fn run_standalone_stops_the_process_on_interrupt() {
    let p = Project::new("");
    let mut child = p
        .cmd(&[
            "run",
            "--standalone",
            "w",
            "--",
            "sh",
            "-c",
            "echo pid $$; exec sleep 60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let start = Instant::now();
    let pid: u32 = loop {
        let line = err
            .recv_timeout(DEADLINE.saturating_sub(start.elapsed()))
            .expect("the process's first line");
        if let Some(pid) = line.strip_prefix("[process:w] pid ") {
            break pid.parse().unwrap();
        }
    };
    assert!(alive(pid));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(!alive(pid), "stopped with corral");
}

#[test]
fn up_prints_an_alert_for_a_traceback_exactly_once() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[processes.web]
command = ["python3", "-u", "app.py"]
"#,
    );
    // The same traceback twice (the second a repeat of the first), then a marker.
    p.write(
        "app.py",
        r#"
import sys, time, traceback
def load(user):
    raise ValueError("bad user record")
for _ in range(2):
    try:
        load(1)
    except Exception:
        traceback.print_exc()
    sys.stderr.flush()
    time.sleep(0.3)
print("marker-done", flush=True)
time.sleep(60)
"#,
    );
    let _down = Down(&p);
    let mut child = p
        .cmd(&["up"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let start = Instant::now();
    while !seen
        .iter()
        .any(|l: &String| l == "[process:web] marker-done")
    {
        let line = err
            .recv_timeout(DEADLINE.saturating_sub(start.elapsed()))
            .unwrap_or_else(|_| panic!("no marker in {seen:#?}"));
        seen.push(line);
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    while let Ok(line) = err.recv_timeout(DEADLINE) {
        seen.push(line);
    }
    assert_eq!(child.wait().unwrap().code(), Some(0), "{seen:#?}");
    let alerts: Vec<&String> = seen.iter().filter(|l| l.contains('⚠')).collect();
    let expected = format!(
        "[process:web] ⚠ python.traceback: ValueError: bad user record ({}:4)",
        p.dir.join("app.py").display()
    );
    assert_eq!(alerts, [&expected], "{seen:#?}");
    // The traceback itself is on the console, dimmed output lines, twice.
    assert_eq!(
        seen.iter()
            .filter(|l| *l == "[process:web] ValueError: bad user record")
            .count(),
        2,
        "{seen:#?}"
    );
}

#[test]
fn check_reports_a_bad_disable_id_and_warns_of_a_process_that_cannot_start() {
    let p = Project::new(
        r#"
[processes.web]
command = ["no-such-program-corral", "serve"]

[processes.docs]
command = "mkdocs serve"
cwd = "docs"

[alerts]
disable = ["python.tracebak"]
"#,
    );
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains(
            "corral.toml:10:12: alerts.disable: \"python.tracebak\" is neither a built-in rule id nor a category; did you mean \"python.traceback\"?"
        ),
        "{r:?}"
    );
    let r = p.run(&["check", "--json"]);
    assert_eq!(r.code(), 2, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["problems"][0]["key"], "alerts.disable", "{v}");
    assert_eq!(v["problems"][0]["line"], 10, "{v}");

    p.write(
        "corral.toml",
        &std::fs::read_to_string(p.dir.join("corral.toml"))
            .unwrap()
            .replace("python.tracebak", "python.traceback"),
    );
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains("ok (0 servers, 2 processes"), "{r:?}");
    let err = r.stderr();
    assert!(err.contains("warning: processes.web.command:"), "{r:?}");
    assert!(err.contains("no-such-program-corral"), "{r:?}");
    assert!(err.contains("warning: processes.docs.cwd:"), "{r:?}");
    let r = p.run(&["check", "--json"]);
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let keys: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["processes.docs.cwd", "processes.web.command"], "{v}");
    assert_eq!(v["warnings"][1]["process"], "web", "{v}");
}

#[test]
fn reload_starts_stops_and_restarts_processes_and_leaves_ad_hoc_ones_alone() {
    let cfg = |extra: &str| {
        format!(
            r#"
[gateway]
listen = "127.0.0.1:0"

[processes.keep]
command = "exec sleep 60"

[processes.change]
command = "exec sleep 60"
{extra}"#
        )
    };
    let p = Project::new(&cfg(""));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let keep = ready_pid(&p, "keep");
    let change = ready_pid(&p, "change");
    assert_eq!(p.run(&["run", "adhoc", "--", "sleep", "60"]).code(), 0);
    let adhoc = ready_pid(&p, "adhoc");

    p.write(
        "corral.toml",
        &cfg("env = { NEW = \"1\" }\n\n[processes.fresh]\ncommand = \"exec sleep 60\"\n"),
    );
    let r = p.run(&["reload", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["processes"]["added"], serde_json::json!(["fresh"]), "{v}");
    assert_eq!(
        v["processes"]["restarted"],
        serde_json::json!(["change"]),
        "{v}"
    );
    assert_eq!(
        v["processes"]["unchanged"],
        serde_json::json!(["keep"]),
        "{v}"
    );
    ready_pid(&p, "fresh");
    assert_ne!(ready_pid(&p, "change"), change);
    assert_eq!(ready_pid(&p, "keep"), keep);
    assert_eq!(ready_pid(&p, "adhoc"), adhoc);
    wait_until("the changed process's old run gone", || {
        !alive(change as u32)
    });

    p.write("corral.toml", "[gateway]\nlisten = \"127.0.0.1:0\"\n");
    let r = p.run(&["reload"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stdout()
            .contains("processes stopped:   change, fresh, keep"),
        "{r:?}"
    );
    wait_until("the removed processes gone", || !alive(keep as u32));
    let ps = ps(&p);
    let names: Vec<&str> = ps["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["adhoc"], "{ps}");
}

/// A project whose process `app` runs `first` (shell), prints a Python traceback
/// (`ValueError: bad port` at the project's `app.py:3`) on its first run only, and stays.
fn bad_port_once(first: &str) -> String {
    format!(
        "[processes.app]\ncommand = \"{first}if [ ! -e printed ]; then touch printed; printf 'Traceback (most recent call last):\\\\n  File \\\"%s/app.py\\\", line 3, in <module>\\\\nValueError: bad port\\\\n' \\\"$PWD\\\" >&2; fi; exec sleep 1000\"\n"
    )
}

/// `ps`'s LAST ALERT is the current run's: a restart begins with none (the old run's
/// alert is history, not a problem of the process now).
#[test]
fn a_restart_clears_the_last_alert_in_ps() {
    let p = Project::new(&bad_port_once(""));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the alert in ps", || {
        process(&ps(&p), "app")["last_alert"]
            .as_str()
            .is_some_and(|a| a.contains("ValueError: bad port"))
    });
    // Its file relative to the project, as `corral errors` shows it.
    let row = process(&ps(&p), "app");
    assert_eq!(
        row["last_alert"], "ValueError: bad port (app.py:3)",
        "{row}"
    );
    let r = p.run(&["restart", "app"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let row = process(&ps(&p), "app");
    assert_eq!(row["state"], "ready", "{row}");
    assert!(row["last_alert"].is_null(), "{row}");
    // The alert is history: resolved by the restart.
    let errors = p.run(&["errors"]);
    assert!(!errors.stdout().contains("ValueError"), "{errors:?}");
    let errors = p.run(&["errors", "--status", "resolved"]);
    assert!(
        errors.stdout().contains("ValueError") && errors.stdout().contains("restarted"),
        "{errors:?}"
    );
}

/// No gap: an error printed before `corral errors` is in its answer, even while its
/// group (a Node stack, which only a quiet stream completes) is still open.
#[test]
fn an_error_printed_before_the_question_is_in_the_answer() {
    let p = Project::new(
        "[processes.api]\ncommand = \"sleep 0.3; printf 'TypeError: cannot read x\\\\n    at handler (/srv/api/app.js:12:5)\\\\n    at run (/srv/api/app.js:30:3)\\\\n' >&2; exec sleep 1000\"\n",
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the stack is in the log", || {
        p.run(&["logs", "api", "-n", "10"])
            .stdout()
            .contains("at run (/srv/api/app.js:30:3)")
    });
    let r = p.run(&["errors"]);
    assert!(
        r.stdout().contains("TypeError") && r.stdout().contains("cannot read x"),
        "printed before the question, so in the answer: {r:?}"
    );
}

/// A crash stays visible after its automatic restart: `corral errors` lists the worker
/// ("crashed, restarted, running since …", its traceback's exception as the message)
/// until the new run has lasted its crash-loop window; then it is history.
#[test]
fn a_crashed_and_restarted_process_stays_listed_until_it_runs_past_its_window() {
    let p = Project::new(
        "[processes.worker]\nrestart = \"on-failure\"\ncrash_loop_window = \"6s\"\ncommand = \"if [ ! -e crashed ]; then touch crashed; printf 'Traceback (most recent call last):\\\\n  File \\\"worker.py\\\", line 9, in <module>\\\\nValueError: lost job 42\\\\n' >&2; exit 1; fi; exec sleep 1000\"\n",
    );
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("restarted and running", || {
        let row = process(&ps(&p), "worker");
        row["state"] == "ready" && row["restarts"] == 1
    });
    let r = p.run(&["errors"]);
    let out = r.stdout();
    assert!(out.contains("[process:worker:crash] ValueError"), "{r:?}");
    assert!(out.contains("lost job 42"), "{r:?}");
    assert!(out.contains("crashed, restarted, running since"), "{r:?}");
    assert!(out.contains("worker.py:9"), "{r:?}");
    wait_until("history once it ran past its window", || {
        !p.run(&["errors"]).stdout().contains("lost job 42")
    });
    assert_eq!(process(&ps(&p), "worker")["state"], "ready");
}

/// History survives the daemon: with no daemon, `corral errors` reads the journal and
/// starts nothing; after `up -d` again, what the last daemon saw is resolved (restarted)
/// and `--since` reaches it through the journal.
#[test]
fn errors_reach_back_across_daemon_restarts_through_the_journal() {
    let p = Project::new(&bad_port_once("echo start >> starts; "));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the traceback in errors", || {
        p.run(&["errors"]).stdout().contains("bad port")
    });
    assert_eq!(p.run(&["down"]).code(), 0);

    // No daemon: the journal's record, and nothing started.
    let r = p.run(&["errors"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stdout().contains("bad port") && r.stdout().contains("app.py:3"),
        "{r:?}"
    );
    assert!(r.stdout().contains("no daemon runs"), "{r:?}");
    let starts = std::fs::read_to_string(p.dir.join("starts")).unwrap();
    assert_eq!(
        starts.lines().count(),
        1,
        "corral errors started the process"
    );
    assert!(!p.dir.join(".corral/daemon.pid").exists() || p.run(&["ps"]).code() != 0);

    // A new daemon: the old error was resolved by the restart, and is history.
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the second start", || {
        std::fs::read_to_string(p.dir.join("starts")).is_ok_and(|s| s.lines().count() == 2)
    });
    let now = p.run(&["errors"]);
    assert!(!now.stdout().contains("bad port"), "{now:?}");
    let past = p.run(&["errors", "--since", "10m", "--status", "resolved", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&past.stdout()).unwrap();
    let old = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["message"] == "ValueError: bad port")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(old["state"], "resolved");
    assert_eq!(old["fix"]["kind"], "restarted");
    assert_eq!(old["location"], "app.py:3");
}
