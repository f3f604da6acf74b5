//! The protocol revision each server instance is spoken to in: the `server/discover` probe
//! and its fallback to `initialize` (MCP 2026-07-28, basic/transports/stdio.mdx §backward
//! compatibility), against the fixture in each of its era modes.

mod common;
use common::*;
use corral_supervisor::{Era, ServerState};
use std::time::Duration;

#[tokio::test]
async fn a_server_that_speaks_only_2026_is_served_statelessly() {
    // `--legacy reject`: initialize is refused, and any request without the modern
    // `_meta` is an error: tools listed and called prove every request carried it.
    let mut h = Harness::start(vec![fixture_server("modern", &["--legacy", "reject"])]);
    let ready = h.wait_event("server.ready", "modern").await;
    assert_eq!(ready.data["protocol_version"], "2026-07-28", "{ready:?}");
    assert_eq!(ready.data["era"], "modern", "{ready:?}");
    assert_eq!(ready.data["server_info"]["name"], "corral-fixture");
    assert_eq!(ready.data["tools"], 11, "{ready:?}");
    let s = h.server("modern");
    assert_eq!(s.era(), Some(Era::Modern));
    assert_eq!(s.status().protocol_version.as_deref(), Some("2026-07-28"));
    let init = s.initialize_result().unwrap();
    assert_eq!(init["instructions"], "corral-fixture in 2026-07-28 mode");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");

    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"stateless"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "stateless");
    assert!(
        r.get().contains(r#""resultType":"complete""#),
        "{}",
        r.get()
    );
    // A call that already has a `_meta` (an agent's progress token) keeps it and gets ours.
    let r = s
        .request_json(
            "tools/call",
            Some(r#"{"name":"add","arguments":{"a":1,"b":2},"_meta":{"progressToken":"p"}}"#),
        )
        .await
        .unwrap();
    assert_eq!(result_text(&r), "3");
    let r = s.request_json("resources/list", None).await.unwrap();
    assert!(r.get().contains("resources"), "{}", r.get());

    // Removed in 2026-07-28: refused by name, never sent.
    for method in ["ping", "logging/setLevel", "resources/subscribe"] {
        let e = s.request_json(method, Some("{}")).await.unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("server 'modern'")
                && text.contains("2026-07-28")
                && text.contains(method),
            "{text}"
        );
    }
    assert_eq!(s.status().state, ServerState::Ready);
    h.shutdown().await;
}

#[tokio::test]
async fn a_dual_era_server_is_spoken_to_in_2026() {
    let mut h = Harness::start(vec![fixture_server("dual", &["--modern"])]);
    let ready = h.wait_event("server.ready", "dual").await;
    assert_eq!(ready.data["protocol_version"], "2026-07-28", "{ready:?}");
    assert_eq!(ready.data["era"], "modern");
    h.shutdown().await;
}

#[tokio::test]
async fn a_legacy_server_gets_initialize_offering_2025_11_25() {
    let mut h = Harness::start(vec![fixture_server("old", &[])]);
    let ready = h.wait_event("server.ready", "old").await;
    // The fixture answers with the version offered when it knows it.
    assert_eq!(ready.data["protocol_version"], "2025-11-25", "{ready:?}");
    assert_eq!(ready.data["era"], "legacy");
    let probe = ready.str("probe").unwrap();
    assert!(probe.contains("-32601"), "{probe}");
    let s = h.server("old");
    assert_eq!(s.era(), Some(Era::Legacy));
    // Legacy servers still get ping and friends.
    s.request_json("ping", None).await.unwrap();
    h.shutdown().await;
}

#[tokio::test]
async fn a_server_silent_on_discover_falls_back_within_the_probe_timeout() {
    let mut cfg = fixture_server("mute", &["--hang-discover"]);
    // The probe waits a third of startup_timeout at most (3 s by default).
    cfg.startup_timeout = Duration::from_millis(1500);
    let mut h = Harness::start(vec![cfg]);
    let ready = h.wait_event("server.ready", "mute").await;
    assert_eq!(ready.data["era"], "legacy", "{ready:?}");
    assert_eq!(ready.data["protocol_version"], "2025-11-25");
    assert_eq!(
        ready.str("probe"),
        Some("no answer to server/discover within 500ms")
    );
    let ms = ready.data["startup_ms"].as_u64().unwrap();
    assert!((500..1500).contains(&ms), "startup took {ms} ms");
    h.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_on_discover_is_respawned_and_initialized() {
    let mut cfg = fixture_server("fragile", &["--exit-on-discover"]);
    cfg.restart = corral_config::RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    let ready = h.wait_event("server.ready", "fragile").await;
    assert_eq!(ready.data["era"], "legacy", "{ready:?}");
    assert_eq!(ready.data["protocol_version"], "2025-11-25");
    assert_eq!(
        ready.str("probe"),
        Some("the last instance exited on server/discover: not probed")
    );
    assert_eq!(h.count("server.starting"), 2);
    assert_eq!(h.count("server.start_failed"), 0);
    assert_eq!(h.server("fragile").status().restarts, 0);
    let r = h
        .server("fragile")
        .call_tool("echo", Some(&args(r#"{"text":"ok"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "ok");
    // Its next start probes again (the verdict is per process), and is respawned again.
    h.server("fragile").restart().await;
    let ready = h.wait_event("server.ready", "fragile").await;
    assert_eq!(
        ready.str("probe"),
        Some("the last instance exited on server/discover: not probed")
    );
    assert_eq!(h.count("server.starting"), 4);
    h.shutdown().await;
}

#[tokio::test]
async fn a_2026_only_server_that_does_not_answer_discover_fails_naming_what_it_speaks() {
    let mut cfg = fixture_server("odd", &["--legacy", "reject", "--hang-discover"]);
    cfg.startup_timeout = Duration::from_millis(900);
    cfg.restart = corral_config::RestartPolicy::Never;
    let mut h = Harness::start(vec![cfg]);
    let ev = h.wait_event("server.start_failed", "odd").await;
    let reason = ev.str("reason").unwrap();
    assert!(
        reason.starts_with("speaks only MCP 2026-07-28 and refused initialize at 2025-11-25")
            && reason.contains("no answer to server/discover within 300ms")
            && reason.contains("it must answer server/discover"),
        "{reason}"
    );
    h.shutdown().await;
}
