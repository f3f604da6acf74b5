//! The proxy's connection limits over real sockets: the exact request-head limit, and
//! upgraded (WebSocket) connections counted against the cap and closed when idle.

mod common;

use common::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Reads until the end of a response head; the head.
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match within("a response head", s.read(&mut byte)).await {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn status(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_request_head_over_64_kib_gets_431_and_one_just_under_is_forwarded() {
    let target = Target::start(|_req| async { response(200, "text/plain", "ok") }).await;
    let (proxy, _bus) = proxy(&target.url()).await;
    for (pad, want) in [(65 * 1024, 431), (63 * 1024, 200)] {
        let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
        let req = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
            proxy.addr(),
            "p".repeat(pad)
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let head = read_head(&mut s).await;
        assert_eq!(status(&head), want, "a {pad}-byte header: {head}");
    }
    proxy.stop().await;
}

/// A WebSocket-capable target stand-in: answers any request `101` and then echoes
/// what comes until the other side closes.
async fn upgrading_target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match s.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = s
                    .write_all(
                        b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\
                          Upgrade: websocket\r\n\r\n",
                    )
                    .await;
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = s.read(&mut buf).await {
                    if s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Asks `proxy` for an upgrade on a new connection; the connection and the status.
async fn upgrade(proxy: SocketAddr) -> (TcpStream, u16) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let req = format!(
        "GET /hmr HTTP/1.1\r\nHost: {proxy}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
    );
    // A connection refused at accept may be closed before the request is written.
    let _ = s.write_all(req.as_bytes()).await;
    let head = read_head(&mut s).await;
    (s, status(&head))
}

#[tokio::test]
async fn upgraded_connections_count_against_the_cap_two_slots_each_until_they_close() {
    let target = upgrading_target().await;
    let (proxy, _bus) = proxy_with(&format!("http://{target}"), |spec| {
        spec.limits.max_connections = 5;
    })
    .await;
    let addr = proxy.addr();
    let (mut first, st) = upgrade(addr).await;
    assert_eq!(st, 101);
    let (_second, st) = upgrade(addr).await;
    assert_eq!(st, 101);
    // Four slots are held by two upgraded connections, though hyper is done with
    // them: a third upgrade (one slot for itself, none for its target) is refused,
    // and so is anything more.
    let (_third, st) = upgrade(addr).await;
    assert_eq!(st, 503, "an upgrade past the cap");
    // The spliced connections still carry bytes.
    first.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    within("the echo", first.read_exact(&mut back))
        .await
        .unwrap();
    assert_eq!(&back, b"ping");
    // Closing one frees its two slots.
    drop(first);
    within("a slot to be freed", async {
        loop {
            let (_s, st) = upgrade(addr).await;
            if st == 101 {
                break;
            }
            assert_eq!(st, 503);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    proxy.stop().await;
}

#[tokio::test]
async fn an_upgraded_connection_silent_both_ways_is_closed_after_the_idle_timeout() {
    let target = upgrading_target().await;
    let idle = Duration::from_millis(500);
    let (proxy, _bus) = proxy_with(&format!("http://{target}"), |spec| {
        spec.limits.upgraded_idle_timeout = idle;
    })
    .await;
    let (mut ws, st) = upgrade(proxy.addr()).await;
    assert_eq!(st, 101);
    ws.write_all(b"hello").await.unwrap();
    let mut back = [0u8; 5];
    within("the echo", ws.read_exact(&mut back)).await.unwrap();
    let last_byte = Instant::now();
    // Then silence: the proxy closes the connection.
    let mut rest = Vec::new();
    let read = within(
        "the idle connection to be closed",
        ws.read_to_end(&mut rest),
    )
    .await;
    assert!(matches!(read, Ok(0)) || read.is_err(), "{read:?} {rest:?}");
    assert!(last_byte.elapsed() >= idle - Duration::from_millis(50));
    // And with it the slots: the proxy still serves upgrades.
    let (_ws, st) = upgrade(proxy.addr()).await;
    assert_eq!(st, 101);
    proxy.stop().await;
}

/// Regression (issue "14. Hardening", item 3): each listener had a cap of its own, so the
/// MCP endpoint and a few dev proxies together could still take every descriptor. The
/// budget is shared: connections held on one proxy leave none for another.
#[tokio::test]
async fn listeners_sharing_a_budget_cannot_together_pass_it() {
    let target = Target::start(|_req| async { response(200, "text/plain", "ok") }).await;
    let budget = corral_httpd::Budget::new(3);
    let shared = |spec: &mut corral_proxy::ProxySpec| {
        spec.limits.max_connections = 100;
        spec.limits.budget = Some(budget.clone());
    };
    let (a, _bus_a) = proxy_with(&target.url(), shared).await;
    let (b, _bus_b) = proxy_with(&target.url(), shared).await;
    let get = |addr: SocketAddr| async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let _ = s.write_all(req.as_bytes()).await;
        let head = read_head(&mut s).await;
        (s, status(&head))
    };
    // Three keep-alive connections on the first proxy hold the whole budget.
    let mut held = Vec::new();
    for _ in 0..3 {
        let (s, st) = get(a.addr()).await;
        assert_eq!(st, 200);
        held.push(s);
    }
    let (_s, st) = get(b.addr()).await;
    assert_eq!(st, 503, "the second proxy past the shared budget");
    // A closed connection gives its slot back, to any listener.
    held.pop();
    within("a slot to come back", async {
        loop {
            let (_s, st) = get(b.addr()).await;
            if st == 200 {
                break;
            }
            assert_eq!(st, 503);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    a.stop().await;
    b.stop().await;
}
