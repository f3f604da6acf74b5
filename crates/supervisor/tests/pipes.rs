//! What a child writes on its pipes never blocks or kills the session: stderr floods,
//! runaway lines, stdout noise; a Content-Length speaker gets one clear diagnostic.

mod common;
use common::*;
use corral_supervisor::{FRAMING_MESSAGE, ServerState};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_stderr_flood_before_serving_does_not_block_the_child() {
    // 32 MiB is far beyond the 64 KiB pipe buffer: without a drain, the child would block
    // before answering initialize.
    let mut h = Harness::start(vec![fixture_server("flood", &["--stderr-flood", "32"])]);
    h.wait_event("server.ready", "flood").await;
    let s = h.server("flood");
    wait_until("flood done", || {
        s.stderr_tail(5).iter().any(|l| l == "fixture: flood done")
    })
    .await;
    assert_eq!(s.stderr_tail(1000).len(), 50, "ring bounded at 50 lines");
    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"ok"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "ok");
    // The log rotated instead of growing without bound.
    let log_len = std::fs::metadata(s.log_path()).unwrap().len();
    assert!(log_len <= 11 * 1024 * 1024, "{log_len}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_giant_stderr_line_is_truncated_with_a_marker() {
    let mut h = Harness::start(vec![fixture_server(
        "line",
        &["--stderr-flood", "8", "--flood-no-newlines"],
    )]);
    h.wait_event("server.ready", "line").await;
    let s = h.server("line");
    wait_until("flood done", || {
        s.stderr_tail(5).iter().any(|l| l == "fixture: flood done")
    })
    .await;
    let tail = s.stderr_tail(5);
    let giant = tail
        .iter()
        .find(|l| l.starts_with("xxxx"))
        .expect("the giant line");
    assert!(giant.len() <= 8 * 1024 + 32, "{}", giant.len());
    assert!(giant.ends_with("…[truncated]"));
    h.shutdown().await;
}

#[tokio::test]
async fn a_stderr_flood_while_serving_does_not_slow_calls_to_a_halt() {
    let mut h = Harness::start(vec![fixture_server(
        "busy",
        &["--stderr-flood", "64", "--flood-when", "during"],
    )]);
    h.wait_event("server.ready", "busy").await;
    let s = h.server("busy");
    for i in 0..50 {
        let text = format!(r#"{{"text":"call {i}"}}"#);
        let r = s.call_tool("echo", Some(&args(&text))).await.unwrap();
        assert_eq!(result_text(&r), format!("call {i}"));
    }
    wait_until("flood done", || {
        s.stderr_tail(50).iter().any(|l| l == "fixture: flood done")
    })
    .await;
    h.shutdown().await;
}

#[tokio::test]
async fn stdout_noise_is_reported_and_the_session_survives() {
    let mut h = Harness::start(vec![fixture_server("noisy", &["--stdout-noise"])]);
    h.wait_event("server.ready", "noisy").await;
    let s = h.server("noisy");
    for _ in 0..3 {
        let r = s
            .call_tool("echo", Some(&args(r#"{"text":"through the noise"}"#)))
            .await
            .unwrap();
        assert_eq!(result_text(&r), "through the noise");
    }
    wait_until("noise events", || h.count("server.noise") >= 6).await;
    let first = h.seen.iter().find(|e| e.kind == "server.noise").unwrap();
    assert!(
        first
            .str("line")
            .unwrap()
            .starts_with("Starting fixture server"),
        "{first:?}"
    );
    let log = std::fs::read_to_string(s.log_path()).unwrap();
    assert!(
        log.contains("[stdout noise] debug: handling tools/call"),
        "{log}"
    );
    assert_eq!(h.count("server.crashed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn content_length_framing_fails_fast_with_one_clear_diagnostic() {
    let mut cfg = fixture_server("lsp", &["--content-length"]);
    cfg.startup_timeout = Duration::from_secs(30);
    let mut h = Harness::start(vec![cfg]);
    let t = Instant::now();
    let ev = h.wait_event("server.start_failed", "lsp").await;
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "no waiting for the 30 s startup timeout"
    );
    assert_eq!(ev.str("reason"), Some(FRAMING_MESSAGE));
    assert_eq!(ev.data["permanent"], true);
    let s = h.server("lsp");
    wait_until("failed", || s.status().state == ServerState::Failed).await;
    assert_eq!(h.count("server.start_failed"), 1);
    assert_eq!(h.count("server.restarting"), 0);
    let err = s
        .wait_ready(Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(FRAMING_MESSAGE), "{err}");
    h.shutdown().await;
}

#[tokio::test]
async fn tools_list_changed_refreshes_the_tool_set() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    assert!(s.tools().iter().any(|t| t.name == "add"));
    s.call_tool("change_tools", Some(&args("{}")))
        .await
        .unwrap();
    let ev = h.wait_event("server.tools_changed", "fx").await;
    assert_eq!(ev.data["added"], serde_json::json!(["extra"]));
    assert_eq!(ev.data["removed"], serde_json::json!(["add"]));
    let names: Vec<String> = s.tools().iter().map(|t| t.name.clone()).collect();
    assert!(
        names.contains(&"extra".to_owned()) && !names.contains(&"add".to_owned()),
        "{names:?}"
    );
    h.shutdown().await;
}
