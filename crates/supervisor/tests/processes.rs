//! Dev processes under the shared lifecycle: real programs over real pipes (and a real
//! pseudo-terminal), their output, readiness, dependencies, deaths and alerts.

mod common;

use common::{DEADLINE, Harness, wait_until};
use corral_supervisor::State;
use corral_supervisor::output::{Limit, Query, Stream};
use std::time::Duration;

fn lines(h: &Harness, name: &str) -> Vec<(Stream, String)> {
    h.process(name)
        .output(&Query::default())
        .into_iter()
        .map(|l| (l.stream, l.text))
        .collect()
}

#[tokio::test]
async fn both_streams_are_kept_in_arrival_order_with_their_stream_and_a_run_header_in_the_log() {
    let mut h = Harness::start_toml(
        r#"
[processes.talk]
command = ["python3", "-c", '''
import sys, time
print("out one", flush=True); time.sleep(0.05)
print("err one", file=sys.stderr, flush=True); time.sleep(0.05)
print("out two", flush=True)
time.sleep(60)
''']
"#,
    );
    let ready = h.wait_from("process.ready", "process:talk").await;
    assert_eq!(ready.data["check"], "none");
    wait_until("three lines", || lines(&h, "talk").len() == 3).await;
    assert_eq!(
        lines(&h, "talk"),
        [
            (Stream::Stdout, "out one".to_owned()),
            (Stream::Stderr, "err one".to_owned()),
            (Stream::Stdout, "out two".to_owned()),
        ]
    );
    let log = h.process("talk").log_path().to_owned();
    wait_until("the log holds the lines", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("out two"))
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("──── ")
            && first.contains("process 'talk' started (pid ")
            && first.contains(", run 1) ────"),
        "{text}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_log_readiness_check_holds_the_process_in_starting_until_its_line_appears() {
    // A port read back from the OS (reserved meanwhile) for the line it would print.
    let port = common::port::reserve_port();
    let mut h = Harness::start_toml(&format!(
        r#"
[processes.web]
command = ["python3", "-c", '''
import sys, time
print("compiling", flush=True)
sys.stdin.readline()
print("Local: http://127.0.0.1:{}/", flush=True)
time.sleep(60)
''']
ready = {{ log = 'Local: +http' }}
"#,
        port.port
    ));
    let web = h.process("web");
    wait_until("the first line", || !lines(&h, "web").is_empty()).await;
    // It waits on stdin, which Corral holds open and empty: it cannot be ready.
    assert_eq!(web.state(), State::Starting);
    assert_eq!(h.count("process.ready"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn a_log_line_makes_it_ready_and_a_readiness_timeout_is_a_start_failure() {
    let mut h = Harness::start_toml(
        r#"
[processes.web]
command = ["python3", "-c", '''
import time
time.sleep(0.3)
print("VITE ready in 300 ms", flush=True)
time.sleep(60)
''']
ready = { log = 'ready in \d+ ms' }

[processes.slow]
command = ["python3", "-c", "import time; print('never says it', flush=True); time.sleep(60)"]
ready = { log = "listening", timeout = "1s" }
restart = "never"
"#,
    );
    let ready = h.wait_from("process.ready", "process:web").await;
    assert_eq!(ready.data["check"], "log");
    assert_eq!(h.process("web").state(), State::Ready);
    let failed = h.wait_from("process.start_failed", "process:slow").await;
    let reason = failed.data["reason"].as_str().unwrap();
    assert!(reason.starts_with("not ready after 1s"), "{reason}");
    assert_eq!(failed.data["stderr_tail"][0], "never says it");
    wait_until("slow failed", || h.process("slow").state() == State::Failed).await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_tcp_readiness_check_waits_for_the_port_to_accept() {
    // Reserved (bound, not listening) for the test's life; the process binds it after a
    // while, with SO_REUSEPORT.
    let reserved = common::port::reserve_port();
    let port = reserved.port;
    let mut h = Harness::start_toml(&format!(
        r#"
[processes.api]
command = ["python3", "-c", '''
import socket, time
time.sleep(0.3)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", {port})); s.listen()
print("bound", flush=True)
time.sleep(60)
''']
ready = {{ port = {port} }}
"#
    ));
    let ready = h.wait_from("process.ready", "process:api").await;
    assert_eq!(ready.data["check"], "tcp");
    assert!(
        lines(&h, "api").iter().any(|(_, l)| l == "bound"),
        "ready before the port was bound: {:?}",
        lines(&h, "api")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_process_starts_only_after_what_it_depends_on_is_ready() {
    let mut h = Harness::start_toml(
        r#"
[processes.db]
command = ["python3", "-c", "import time; time.sleep(0.5); print('db up', flush=True); time.sleep(60)"]
ready = { log = "db up" }

[processes.api]
command = ["python3", "-c", "import time; print('api up', flush=True); time.sleep(60)"]
depends_on = ["db"]
"#,
    );
    let api = h.process("api");
    wait_until("api waits for db", || {
        api.status().waiting_for.as_deref() == Some("process 'db'")
    })
    .await;
    h.wait_from("process.ready", "process:api").await;
    let order: Vec<_> = h
        .seen
        .iter()
        .filter(|e| {
            matches!(
                (e.kind.as_str(), e.source.as_str()),
                ("process.ready", "process:db") | ("process.starting", "process:api")
            )
        })
        .map(|e| (e.kind.clone(), e.source.clone()))
        .collect();
    assert_eq!(
        order,
        [
            ("process.ready".to_owned(), "process:db".to_owned()),
            ("process.starting".to_owned(), "process:api".to_owned()),
        ]
    );
    assert_eq!(api.status().waiting_for, None);
    h.shutdown().await;
}

#[tokio::test]
async fn a_failing_exit_is_one_crash_event_with_the_output_tail_and_a_clean_exit_is_exited() {
    let mut h = Harness::start_toml(
        r#"
[processes.bad]
command = "echo about to fail; echo 'it broke' >&2; exit 3"
restart = "never"

[processes.done]
command = "echo all tests passed"
restart = "on-failure"
"#,
    );
    let crashed = h.wait_from("process.crashed", "process:bad").await;
    assert_eq!(crashed.data["exit_code"], 3);
    assert_eq!(crashed.data["reason"], "exited with code 3");
    let tail: Vec<&str> = crashed.data["stderr_tail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        tail.contains(&"about to fail") && tail.contains(&"it broke"),
        "{tail:?}"
    );
    let exited = h.wait_from("process.exited", "process:done").await;
    assert_eq!(exited.data["exit_code"], 0);
    wait_until("done is stopped, not restarted", || {
        h.process("done").state() == State::Stopped
    })
    .await;
    let row = h.process("done").row(None);
    assert_eq!(row.last_exit.map(|e| e.code), Some(Some(0)));
    assert_eq!(h.count("process.crashed"), 1);
    assert_eq!(h.count("process.exited"), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_crashing_process_is_restarted_with_a_new_run_in_its_output() {
    let mut h = Harness::start_toml(
        r#"
[processes.flaky]
command = "echo run; sleep 0.2; exit 1"
"#,
    );
    h.wait_from("process.crashed", "process:flaky").await;
    h.wait_from("process.restarting", "process:flaky").await;
    h.wait_from("process.ready", "process:flaky").await;
    let p = h.process("flaky");
    wait_until("two runs' lines", || p.output(&Query::default()).len() >= 2).await;
    let runs: Vec<u32> = p.output(&Query::default()).iter().map(|l| l.run).collect();
    assert_eq!(&runs[..2], [1, 2]);
    assert!(p.status().life.restarts >= 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_stop_is_graceful_escalates_to_sigkill_and_reports_no_death() {
    let mut h = Harness::start_toml(
        r#"
[processes.stubborn]
command = ["python3", "-c", '''
import signal, time
signal.signal(signal.SIGTERM, lambda *a: print("ignoring SIGTERM", flush=True))
print("up", flush=True)
while True: time.sleep(1)
''']
stop_grace = "300ms"
"#,
    );
    let p = h.process("stubborn");
    wait_until("up", || {
        lines(&h, "stubborn").iter().any(|(_, l)| l == "up")
    })
    .await;
    tokio::time::timeout(DEADLINE, p.stop()).await.unwrap();
    assert_eq!(p.state(), State::Stopped);
    assert!(
        lines(&h, "stubborn")
            .iter()
            .any(|(_, l)| l == "ignoring SIGTERM")
    );
    let stopped = h.wait_from("process.stopped", "process:stubborn").await;
    assert_eq!(stopped.data["reason"], "requested");
    assert_eq!(h.count("process.crashed") + h.count("process.exited"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn a_pty_process_sees_a_terminal_and_a_piped_one_is_unbuffered() {
    let mut h = Harness::start_toml(
        r#"
[processes.tty]
command = ["python3", "-c", "import sys, time; print('tty', sys.stdout.isatty()); time.sleep(60)"]
pty = true

[processes.pipe]
command = ["python3", "-c", "import sys, time; print('tty', sys.stdout.isatty()); time.sleep(60)"]
"#,
    );
    wait_until("both printed", || {
        !lines(&h, "tty").is_empty() && !lines(&h, "pipe").is_empty()
    })
    .await;
    // No flush in the script: the pipe's line arrives because of PYTHONUNBUFFERED.
    assert_eq!(lines(&h, "tty"), [(Stream::Pty, "tty True".to_owned())]);
    assert_eq!(
        lines(&h, "pipe"),
        [(Stream::Stdout, "tty False".to_owned())]
    );
    h.drain_events();
    h.shutdown().await;
}

#[tokio::test]
async fn a_traceback_in_the_processes_own_code_is_one_alert_naming_the_exception_and_the_file() {
    let mut h = Harness::start_toml(
        r#"
[processes.app]
command = ["python3", "-c", '''
import json, time
def load(text):
    return json.loads(text, object_hook=check)
def check(obj):
    raise ValueError("bad user record: " + str(obj))
print("starting", flush=True)
try:
    load('{"id": 1}')
except Exception:
    import traceback; traceback.print_exc()
print("GET /health 200", flush=True)
time.sleep(60)
''']
"#,
    );
    let alert = h.wait_from("alert", "process:app").await;
    assert_eq!(alert.data["rule"], "python.traceback");
    assert_eq!(alert.data["severity"], "error");
    assert_eq!(
        alert.data["message"],
        "ValueError: bad user record: {'id': 1}"
    );
    // The innermost frame in the user's code (here `-c`'s `<string>`), not json's.
    assert_eq!(alert.data["location"], "<string>:5");
    let p = h.process("app");
    let last = p.output(&Query {
        limit: Limit::Last(1),
        ..Query::default()
    });
    assert_eq!(last[0].text, "GET /health 200");
    assert_eq!(h.count("alert"), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn waiting_for_output_returns_the_matching_line_or_nothing_at_the_timeout() {
    let h = Harness::start_toml(
        r#"
[processes.w]
command = ["python3", "-c", "import time; time.sleep(0.3); print('Compiled successfully', flush=True); time.sleep(60)"]
"#,
    );
    let p = h.process("w");
    let query = Query {
        grep: Some(regex::Regex::new("Compiled").unwrap()),
        ..Query::default()
    };
    let line = p.wait_output(0, &query, DEADLINE).await.unwrap();
    assert_eq!(line.text, "Compiled successfully");
    let none = p
        .wait_output(p.latest_seq(), &query, Duration::from_millis(200))
        .await;
    assert!(none.is_none());
    h.shutdown().await;
}
