//! The happy path and requested stops: ready with tools, calls, and no crash event on stop.

mod common;
use common::*;
use corral_supervisor::ServerState;

#[tokio::test]
async fn starts_lists_tools_calls_and_stops_without_crash_event() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    let ready = h.wait_event("server.ready", "fx").await;
    assert_eq!(
        ready.data["tools"], 11,
        "fixture variant A has 11 tools: {ready:?}"
    );
    assert_eq!(ready.data["protocol_version"], "2025-11-25");
    assert_eq!(ready.data["era"], "legacy");
    let s = h.server("fx");
    let pid = s.status().pid.unwrap();
    assert!(alive(pid));
    assert!(s.tools().iter().any(|t| t.name == "echo"));

    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"hi there"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "hi there");
    let r = s
        .call_tool("add", Some(&args(r#"{"a":2,"b":40}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "42");
    let r = s
        .call_tool("fail", Some(&args(r#"{"message":"nope"}"#)))
        .await
        .unwrap();
    assert!(r.get().contains(r#""isError":true"#), "{}", r.get());

    s.stop().await;
    assert_eq!(s.status().state, ServerState::Stopped);
    assert!(!exists(pid), "stopped child must be reaped, not a zombie");
    h.wait_event("server.stopped", "fx").await;
    assert_eq!(h.count("server.crashed"), 0);
    assert_eq!(h.count("server.start_failed"), 0);

    // A call to a stopped server fails fast with an actionable message.
    let err = s
        .call_tool("echo", Some(&args(r#"{"text":"x"}"#)))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("server 'fx' is stopped since"), "{msg}");
    assert!(err.stopped(), "{err:?}: the caller's hint is to start it");
    assert_eq!(err.server(), "fx");

    // And it comes back on start, with its tools.
    s.start().await;
    h.wait_event("server.ready", "fx").await;
    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"again"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "again");
    h.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_every_child_and_emits_no_crash() {
    let mut h = Harness::start(vec![fixture_server("a", &[]), fixture_server("b", &[])]);
    h.wait_event("server.ready", "a").await;
    h.wait_event("server.ready", "b").await;
    let pids: Vec<u32> = ["a", "b"]
        .iter()
        .map(|n| h.server(n).status().pid.unwrap())
        .collect();
    let mut rx = std::mem::replace(&mut h.events, corral_events::EventBus::new(1).subscribe());
    h.shutdown().await;
    for pid in pids {
        assert!(!exists(pid), "child {pid} survived shutdown");
    }
    while let Ok(ev) = rx.try_recv() {
        assert!(
            ev.kind != "server.crashed" && ev.kind != "server.start_failed",
            "shutdown must not look like a crash: {ev:?}"
        );
    }
}

#[tokio::test]
async fn restart_replaces_the_instance_with_a_fresh_stderr_ring() {
    let mut h = Harness::start(vec![fixture_server(
        "fx",
        &["--banner", "hello from instance"],
    )]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let old = s.status().pid.unwrap();
    s.call_tool(
        "write_stderr",
        Some(&args(r#"{"text":"old instance line"}"#)),
    )
    .await
    .unwrap();
    wait_until("stderr line in ring", || {
        s.stderr_tail(50).iter().any(|l| l == "old instance line")
    })
    .await;

    s.restart().await;
    h.wait_event("server.ready", "fx").await;
    let new = s.status().pid.unwrap();
    assert_ne!(old, new);
    assert!(!exists(old));
    assert_eq!(s.status().restarts, 1);
    let tail = s.stderr_tail(50);
    assert!(
        !tail.iter().any(|l| l == "old instance line"),
        "ring must reset: {tail:?}"
    );
    wait_until("banner of new instance", || {
        s.stderr_tail(50).iter().any(|l| l == "hello from instance")
    })
    .await;
    assert_eq!(h.count("server.crashed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn env_and_cwd_are_applied() {
    let dir = TempDir::new("cwd");
    let mut cfg = fixture_server("fx", &["--pid-file", "fixture.pid"]);
    if let corral_config::Transport::Stdio { env, cwd, .. } = &mut cfg.transport {
        env.insert("CORRAL_FIXTURE_FLAGS".into(), "--banner from-env".into());
        *cwd = dir.path().to_owned();
    }
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    // Relative --pid-file lands in the configured cwd; the banner came through env.
    let pid = read_pid(&dir.path().join("fixture.pid")).await;
    assert_eq!(Some(pid), s.status().pid);
    wait_until("banner from env", || {
        s.stderr_tail(10).iter().any(|l| l == "from-env")
    })
    .await;
    // The parent's environment is inherited underneath.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(b"PATH="))
    );
    h.shutdown().await;
}
