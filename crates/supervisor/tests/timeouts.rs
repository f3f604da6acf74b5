//! Deadlines: calls are bounded, cancelled on timeout, limited by max_concurrency; a
//! server that stops answering even ping is restarted.

mod common;
use common::*;
use corral_supervisor::{CallError, RpcError};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_hung_call_times_out_and_the_server_keeps_serving() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.call_timeout = Duration::from_millis(300);
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let pid = s.status().pid;
    let err = s.call_tool("hang", Some(&args("{}"))).await.unwrap_err();
    assert!(
        matches!(&err, CallError::Rpc { source: RpcError::Timeout { after, .. }, .. } if *after == Duration::from_millis(300)),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "server 'fx': no answer to tools/call within 300ms"
    );
    let ev = h.wait_event("server.call_timeout", "fx").await;
    assert_eq!(ev.data["tool"], "hang");
    // The server was told to stop working on it.
    wait_until("notifications/cancelled reached the server", || {
        s.stderr_tail(50)
            .iter()
            .any(|l| l.starts_with("fixture: cancelled request "))
    })
    .await;
    // It still answers ping, so it is kept: same pid, further calls work.
    let r = s
        .call_tool("echo", Some(&args(r#"{"text":"still here"}"#)))
        .await
        .unwrap();
    assert_eq!(result_text(&r), "still here");
    assert_eq!(s.status().pid, pid);
    assert_eq!(h.count("server.crashed"), 0);
    h.shutdown().await;
}

#[tokio::test]
async fn a_wedged_server_is_killed_and_restarted() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.call_timeout = Duration::from_millis(300);
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let pid = s.status().pid.unwrap();
    // SIGSTOP: the process is alive but answers nothing, not even ping.
    unsafe {
        libc::kill(pid as i32, libc::SIGSTOP);
    }
    let err = s
        .call_tool("echo", Some(&args(r#"{"text":"x"}"#)))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no answer to tools/call within 300ms"),
        "{err}"
    );
    let ev = h.wait_event("server.crashed", "fx").await;
    assert_eq!(
        ev.str("reason"),
        Some("unresponsive: a call timed out and ping got no answer within 300ms")
    );
    assert_eq!(ev.data["signal_name"], "SIGKILL");
    h.wait_event("server.ready", "fx").await;
    assert_ne!(s.status().pid, Some(pid));
    assert!(!exists(pid));
    h.shutdown().await;
}

#[tokio::test]
async fn a_caller_that_goes_away_cancels_its_request() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let call = {
        let s = s.clone();
        tokio::spawn(async move { s.call_tool("sleep", Some(&args(r#"{"ms":20000}"#))).await })
    };
    // Abort the caller once its request is in flight.
    wait_until("request in flight", || s.in_flight() == 1).await;
    call.abort();
    wait_until("notifications/cancelled reached the server", || {
        s.stderr_tail(50)
            .iter()
            .any(|l| l.starts_with("fixture: cancelled request "))
    })
    .await;
    h.shutdown().await;
}

#[tokio::test]
async fn max_concurrency_one_serializes_calls() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.max_concurrency = NonZeroU32::new(1);
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let t = Instant::now();
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move { s.call_tool("sleep", Some(&args(r#"{"ms":250}"#))).await })
        })
        .collect();
    for c in calls {
        c.await.unwrap().unwrap();
    }
    assert!(
        t.elapsed() >= Duration::from_millis(750),
        "3 × 250 ms one at a time: {:?}",
        t.elapsed()
    );
    h.shutdown().await;
}

#[tokio::test]
async fn calls_run_concurrently_without_a_limit() {
    let mut h = Harness::start(vec![fixture_server("fx", &[])]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let t = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let r = s
                    .call_tool("sleep", Some(&args(r#"{"ms":1500}"#)))
                    .await
                    .unwrap();
                (i, result_text(&r))
            })
        })
        .collect();
    for c in calls {
        let (_, text) = c.await.unwrap();
        assert_eq!(text, "slept 1500 ms");
    }
    // Serially this would take 6 s; concurrently ~1.5 s. 5 s leaves room for a loaded box.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    h.shutdown().await;
}

#[tokio::test]
async fn concurrency_limit_wait_counts_against_the_deadline() {
    let mut cfg = fixture_server("fx", &[]);
    cfg.max_concurrency = NonZeroU32::new(1);
    cfg.call_timeout = Duration::from_millis(400);
    let mut h = Harness::start(vec![cfg]);
    h.wait_event("server.ready", "fx").await;
    let s = h.server("fx");
    let hog = {
        let s = s.clone();
        tokio::spawn(async move { s.call_tool("hang", Some(&args("{}"))).await })
    };
    // Let the hog take the only permit first.
    tokio::task::yield_now().await;
    let t = Instant::now();
    let err = s.call_tool("echo", Some(&args(r#"{"text":"x"}"#))).await;
    assert!(t.elapsed() < Duration::from_secs(3));
    let hog = hog.await.unwrap();
    assert!(hog.is_err());
    // Whichever got the permit first, nothing waits past its deadline.
    if let Err(e) = err {
        assert!(e.to_string().contains("within 400ms"), "{e}");
    }
    h.shutdown().await;
}
