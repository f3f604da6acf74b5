//! A server that dies after it was ready: detected at once, pending callers failed,
//! exactly one `server.crashed` with the stderr tail, then restart with backoff.

mod common;
use common::*;
use corral_config::RestartPolicy;
use corral_supervisor::{CallError, RpcError, ServerState};
use std::time::{Duration, Instant};

#[tokio::test]
async fn crash_mid_call_fails_callers_at_once_and_restarts() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let pid = s.status().pid.unwrap();

    // A slow call is in flight when another call crashes the server.
    let slow = {
        let s = s.clone();
        tokio::spawn(async move { s.call_tool("sleep", Some(&args(r#"{"ms":8000}"#))).await })
    };
    let started = Instant::now();
    let err = s
        .call_tool("crash", Some(&args(r#"{"code":7}"#)))
        .await
        .unwrap_err();
    match &err {
        CallError::Rpc {
            server,
            source: RpcError::Closed(msg),
        } => {
            assert_eq!(server, "fx");
            assert_eq!(&**msg, "server 'fx' exited with code 7");
        }
        other => panic!("unexpected error: {other}"),
    }
    let slow_err = slow.await.unwrap().unwrap_err();
    assert!(
        slow_err.to_string().contains("exited with code 7"),
        "{slow_err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "pending callers must fail at once, not at their deadline"
    );

    let ev = h.wait_event("server.crashed", "fx").await;
    assert_eq!(ev.data["exit_code"], 7);
    assert_eq!(ev.data["pid"], pid);
    assert!(ev.data["uptime_ms"].as_u64().is_some());
    let tail = ev.data["stderr_tail"].to_string();
    assert!(
        tail.contains("fixture: crashing in the middle of a call"),
        "{tail}"
    );

    let r = h.wait_event("server.restarting", "fx").await;
    assert_eq!(r.data["delay_ms"], 1000);
    h.wait_event("server.ready", "fx").await;
    let new_pid = s.status().pid.unwrap();
    assert_ne!(new_pid, pid);
    assert!(!exists(pid));
    assert_eq!(s.status().restarts, 1);
    assert_eq!(
        s.status().tool_count,
        11,
        "a restarted server's tools come back"
    );
    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"back"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "back");
    assert_eq!(
        h.count("server.crashed"),
        1,
        "exactly one crash event per death"
    );
    assert_eq!(h.count("server.start_failed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn exit_is_detected_without_a_call() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.restart = RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let pid = h.server("fx").status().pid.unwrap();
    unsafe_kill(pid, libc::SIGABRT);
    let ev = h.wait_event("server.crashed", "fx").await;
    assert_eq!(ev.data["signal"], libc::SIGABRT);
    assert_eq!(ev.str("reason"), Some("killed by signal 6 (SIGABRT)"));
    let s = h.server("fx");
    wait_until("failed", || s.status().state == ServerState::Failed).await;
    let err = s
        .call_tool("echo", Some(&args("{}")))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("server 'fx' is down since "), "{err}");
    assert!(err.contains("(killed by signal 6 (SIGABRT))"), "{err}");
    assert!(
        !err.contains("stderr"),
        "agent-facing errors stay short: {err}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn clean_exit_with_on_failure_policy_is_not_restarted() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let _ = s.call_tool("crash", Some(&args(r#"{"code":0}"#))).await;
    let ev = h.wait_event("server.crashed", "fx").await;
    assert_eq!(ev.data["exit_code"], 0);
    wait_until("stopped", || s.status().state == ServerState::Stopped).await;
    assert_eq!(h.count("server.restarting"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn always_policy_restarts_a_clean_exit() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.restart = RestartPolicy::Always;
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let _ = s.call_tool("crash", Some(&args(r#"{"code":0}"#))).await;
    h.wait_event("server.restarting", "fx").await;
    h.wait_event("server.ready", "fx").await;
    h.shutdown().await;
}

#[tokio::test]
async fn stop_during_backoff_cancels_the_restart() {
    let mut h = Harness::start(vec![fixture_server("fx", &["--crash-after", "0"])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let _ = s.call_tool("echo", Some(&args(r#"{"text":"x"}"#))).await;
    h.wait_event("server.restarting", "fx").await;
    s.stop().await;
    assert_eq!(s.status().state, ServerState::Stopped);
    assert_eq!(s.status().pid, None);
    h.shutdown().await;
}

fn unsafe_kill(pid: u32, sig: i32) {
    // SAFETY: plain kill(2).
    unsafe {
        libc::kill(pid as i32, sig);
    }
}
