//! Stopping: close stdin → SIGTERM to the group → grace → SIGKILL → reap; no orphans.

mod common;
use common::*;
use corral_config::Transport;
use corral_supervisor::ServerState;
use std::time::{Duration, Instant};

fn in_dir(mut cfg: corral_config::ServerConfig, dir: &TempDir) -> corral_config::ServerConfig {
    if let Transport::Stdio { cwd, .. } = &mut cfg.transport {
        *cwd = dir.path().to_owned();
    }
    cfg
}

#[tokio::test]
async fn a_server_ignoring_stdin_and_sigterm_is_killed_after_the_grace() {
    let dir = TempDir::new("stubborn");
    let mut cfg = in_dir(
        fixture_server(
            "stubborn",
            &["--ignore-sigterm", "--linger", "--pid-file", "p"],
        ),
        &dir,
    );
    cfg.stop_grace = Duration::from_millis(300);
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "stubborn").await;
    let pid = read_pid(&dir.path().join("p")).await;
    let s = h.server("stubborn");
    let t = Instant::now();
    s.stop().await;
    let took = t.elapsed();
    assert!(!exists(pid), "SIGKILL after the grace period, and reaped");
    // stdin grace (min(1s, grace)) + SIGTERM grace: 0.6 s; well under 5 s even loaded.
    assert!(
        took >= Duration::from_millis(550),
        "grace periods were honoured: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "stop is bounded: {took:?}");
    assert_eq!(s.status().state, ServerState::Stopped);
    assert_eq!(h.count("server.crashed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn grandchildren_holding_the_pipes_die_with_the_server_on_stop() {
    let dir = TempDir::new("gc");
    let cfg = in_dir(
        fixture_server("gc", &["--grandchild", "--pid-file", "p"]),
        &dir,
    );
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "gc").await;
    let pid = read_pid(&dir.path().join("p")).await;
    let grandchild = read_pid(&dir.path().join("p.grandchild")).await;
    assert!(alive(grandchild));
    h.server("gc").stop().await;
    assert!(!exists(pid));
    wait_until("grandchild gone", || !alive(grandchild)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn grandchildren_die_when_the_server_crashes() {
    let dir = TempDir::new("gc-crash");
    let mut cfg = in_dir(
        fixture_server("gc", &["--grandchild", "--pid-file", "p"]),
        &dir,
    );
    cfg.restart = corral_config::RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "gc").await;
    let grandchild = read_pid(&dir.path().join("p.grandchild")).await;
    let s = h.server("gc");
    let t = Instant::now();
    let _ = s.call_tool("crash", Some(&args("{}"))).await;
    // The grandchild keeps stdout and stderr open: the exit must still be seen at once.
    let ev = h.wait_event("server.crashed", "gc").await;
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(ev.data["exit_code"], 3);
    wait_until("grandchild gone", || !alive(grandchild)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn partial_last_stderr_line_is_flushed_at_exit_and_bad_bytes_survive() {
    let mut h = Harness::start(vec![fixture_server(
        "u8",
        &["--invalid-utf8", "--partial-line-at-exit"],
    )]);
    h.wait_event("server.ready", "u8").await;
    let s = h.server("u8");
    wait_until("crlf line", || {
        s.stderr_tail(50).iter().any(|l| l == "crlf line")
    })
    .await;
    let tail = s.stderr_tail(50);
    assert!(
        tail.iter()
            .any(|l| l.starts_with("bad utf8: \u{fffd}\u{fffd}")),
        "{tail:?}"
    );
    let log = s.log_path().to_owned();
    s.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.ends_with("partial tail\n"),
        "partial line flushed at EOF: {text:?}"
    );
    assert!(text.contains("crlf line\n"));
    h.shutdown().await;
}
