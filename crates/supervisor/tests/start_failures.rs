//! Servers that never become ready: each yields exactly one `server.start_failed` with
//! the reason and the stderr lines that explain it; permanent problems do not loop.

mod common;
use common::*;
use corral_config::{RestartPolicy, Transport};
use corral_supervisor::ServerState;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

#[tokio::test]
async fn missing_command_is_permanent_and_names_command_and_path() {
    let mut cfg = fixture_server("ghost", &[]);
    if let Transport::Stdio { command, .. } = &mut cfg.transport {
        *command = "corral-no-such-command".into();
    }
    let mut h = Harness::start(vec![cfg]);
    let ev = h.wait_event("server.start_failed", "ghost").await;
    let reason = ev.str("reason").unwrap();
    assert!(
        reason.starts_with("command 'corral-no-such-command' not found in PATH (searched: "),
        "{reason}"
    );
    assert_eq!(ev.data["permanent"], true);
    let s = h.server("ghost");
    wait_until("failed state", || s.status().state == ServerState::Failed).await;
    let err = s
        .wait_ready(Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not found in PATH"), "{err}");
    assert_eq!(
        h.count("server.restarting"),
        0,
        "a permanent failure must not restart"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn non_executable_command_is_permanent() {
    let dir = TempDir::new("noexec");
    let script = dir.path().join("server.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut cfg = fixture_server("noexec", &[]);
    if let Transport::Stdio { command, .. } = &mut cfg.transport {
        *command = script.to_string_lossy().into_owned();
    }
    let mut h = Harness::start(vec![cfg]);
    let ev = h.wait_event("server.start_failed", "noexec").await;
    assert!(
        ev.str("reason")
            .unwrap()
            .contains("is not executable (mode 644)"),
        "{ev:?}"
    );
    assert_eq!(ev.data["permanent"], true);
    h.shutdown().await;
}

#[tokio::test]
async fn exit_during_initialize_carries_the_traceback() {
    let mut cfg = fixture_server("py", &["--exit-on-init"]);
    cfg.restart = RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    let ev = h.wait_event("server.start_failed", "py").await;
    assert_eq!(
        ev.str("reason"),
        Some("exited with code 1 during initialize")
    );
    assert_eq!(ev.data["exit_code"], 1);
    let tail: Vec<&str> = ev.data["stderr_tail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        tail.first(),
        Some(&"Traceback (most recent call last):"),
        "{tail:?}"
    );
    assert_eq!(
        tail.last(),
        Some(&"ModuleNotFoundError: No module named 'fixture_missing_dep'")
    );
    let s = h.server("py");
    wait_until("failed state", || s.status().state == ServerState::Failed).await;
    let report = s.failure_report();
    assert!(
        report.starts_with("exited with code 1 during initialize; last stderr lines:"),
        "{report}"
    );
    assert!(
        report.ends_with("ModuleNotFoundError: No module named 'fixture_missing_dep'"),
        "{report}"
    );
    assert_eq!(h.count("server.start_failed"), 1);
    assert_eq!(h.count("server.crashed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn exit_at_start_before_reading_stdin_is_a_start_failure() {
    let mut cfg = fixture_server("early", &["--exit-at-start=4"]);
    cfg.restart = RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    let ev = h.wait_event("server.start_failed", "early").await;
    assert_eq!(ev.data["exit_code"], 4);
    assert!(
        ev.data["stderr_tail"]
            .to_string()
            .contains("ModuleNotFoundError")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn handshake_deadline_kills_a_server_that_never_answers() {
    let mut cfg = fixture_server("mute", &["--hang-init", "--pid-file", "mute.pid"]);
    let dir = TempDir::new("mute");
    if let Transport::Stdio { cwd, .. } = &mut cfg.transport {
        *cwd = dir.path().to_owned();
    }
    cfg.startup_timeout = Duration::from_millis(400);
    cfg.restart = RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    let pid = read_pid(&dir.path().join("mute.pid")).await;
    let ev = h.wait_event("server.start_failed", "mute").await;
    assert_eq!(
        ev.str("reason"),
        Some("no answer to initialize within 400ms (startup_timeout)")
    );
    assert_eq!(ev.data["signal_name"], "SIGKILL");
    assert!(!exists(pid), "the hung child must be killed and reaped");
    h.shutdown().await;
}

#[tokio::test]
async fn crash_loop_breaker_gives_up() {
    let mut cfg = fixture_server("loop", &["--exit-on-init"]);
    cfg.crash_loop.max = 2;
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.start_failed", "loop").await;
    let r = h.wait_event("server.restarting", "loop").await;
    assert_eq!(r.data["attempt"], 1);
    assert_eq!(r.data["delay_ms"], 1000);
    h.wait_event("server.start_failed", "loop").await;
    let g = h.wait_event("server.gave_up", "loop").await;
    assert!(
        g.str("reason").unwrap().contains("corral start loop"),
        "{g:?}"
    );
    let s = h.server("loop");
    wait_until("gave_up state", || s.status().state == ServerState::GaveUp).await;
    assert_eq!(h.count("server.start_failed"), 2);
    assert_eq!(h.count("server.restarting"), 1);

    // `start` re-arms it cleanly (it fails again, but it is tried again).
    s.start().await;
    h.wait_event("server.start_failed", "loop").await;
    h.shutdown().await;
}
