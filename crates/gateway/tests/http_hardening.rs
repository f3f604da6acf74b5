//! The HTTP endpoint against a hostile local process: each test pins one way it was (or
//! could be) attacked, over a real socket on 127.0.0.1.

use corral_config::ToolPrefix;
use corral_events::EventBus;
use corral_gateway::http::{HttpGateway, HttpOptions};
use corral_gateway::httpd::{self, Body, Limits};
use corral_gateway::{GatewayOptions, Hub};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";
const DEADLINE: Duration = Duration::from_secs(20);

/// A gateway (no servers) on its own runtime, torn down with the value.
struct Gateway {
    addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

fn gateway(limits: Limits) -> Gateway {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = GatewayOptions {
            tool_prefix: ToolPrefix::Always,
            builtin_tools: true,
        };
        let hub = Hub::start(Default::default(), opts, EventBus::default(), None, None);
        let http = HttpGateway::new(
            hub,
            HttpOptions {
                token: Some(TOKEN.into()),
                token_file: "/p/.corral/token".into(),
                local_addr: addr,
                limits,
            },
        );
        tokio::spawn(http.serve(listener, std::future::pending()));
        addr
    });
    Gateway { addr, _rt: rt }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s
}

/// Everything the server sends until it closes the connection (or the deadline).
fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The status line and headers of the first response on `s`.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn status(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;

fn post(extra_headers: &str, body: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{extra_headers}Content-Length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
}

fn auth() -> String {
    format!("Authorization: Bearer {TOKEN}\r\n")
}

#[test]
fn chunk_size_overflow_after_a_first_chunk_is_refused_without_a_panic() {
    let gw = gateway(Limits::default());
    // Without a token: refused on the head alone.
    let mut s = connect(gw.addr);
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\nFFFFFFFFFFFFFFFF\r\nabcdef",
    )
    .unwrap();
    assert_eq!(status(&read_head(&mut s)), 401);
    // With the token, the framing itself is refused.
    let mut s = connect(gw.addr);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Transfer-Encoding: chunked\r\n\r\n1\r\na\r\nFFFFFFFFFFFFFFFF\r\nabcdef",
        auth()
    );
    s.write_all(head.as_bytes()).unwrap();
    // A chunk of 2^64-1 bytes is only a very long chunk to hyper: it waits for it (the
    // body limit and deadline bound that); ending the body early breaks the framing.
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let r = read_all(&mut s);
    assert_eq!(status(&r), 400, "{r}");
    // And the endpoint still serves.
    let mut s = connect(gw.addr);
    s.write_all(post(&auth(), INIT).as_bytes()).unwrap();
    assert_eq!(status(&read_all(&mut s)), 200);
}

#[test]
fn token_and_host_are_checked_before_any_body_byte_is_read() {
    let gw = gateway(Limits::default());
    // A 50 MB body announced, none sent: the refusal comes at once.
    let mut s = connect(gw.addr);
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50000000\r\n\r\n")
        .unwrap();
    assert_eq!(status(&read_head(&mut s)), 401);

    let mut s = connect(gw.addr);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: evil.example\r\n{}Content-Length: 50000000\r\n\r\n",
        auth()
    );
    s.write_all(head.as_bytes()).unwrap();
    assert_eq!(status(&read_head(&mut s)), 403);

    // `Expect: 100-continue` without a token: no `100 Continue`, straight to 401.
    let mut s = connect(gw.addr);
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
    )
    .unwrap();
    let head = read_head(&mut s);
    assert_eq!(status(&head), 401, "{head}");
}

#[test]
fn a_declared_body_over_the_limit_is_refused_before_it_is_read() {
    let gw = gateway(Limits::default());
    let mut s = connect(gw.addr);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n",
        auth(),
        65 << 20
    );
    s.write_all(head.as_bytes()).unwrap();
    assert_eq!(status(&read_head(&mut s)), 413);
}

#[test]
fn lax_framing_and_duplicate_security_headers_are_refused() {
    let gw = gateway(Limits::default());
    let cases = [
        ("Content-Length: +5", "post"),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity",
            "post",
        ),
        ("Host: 127.0.0.1", "dup"),
        (
            "Origin: http://localhost\r\nOrigin: http://evil.example",
            "hdr",
        ),
        (
            "Authorization: Bearer x\r\nAuthorization: Bearer y",
            "hdr-noauth",
        ),
    ];
    for (headers, kind) in cases {
        let mut s = connect(gw.addr);
        let req = match kind {
            "post" => format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}{headers}\r\n\r\nhello",
                auth()
            ),
            "dup" => format!(
                "POST /mcp HTTP/1.1\r\nHost: x\r\n{}{headers}\r\n\r\n",
                auth()
            ),
            "hdr" => format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}{headers}\r\nContent-Length: 0\r\n\r\n",
                auth()
            ),
            _ => format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\nContent-Length: 0\r\n\r\n"
            ),
        };
        s.write_all(req.as_bytes()).unwrap();
        let r = read_all(&mut s);
        assert!(
            r.is_empty() || status(&r) == 400,
            "{headers:?} must be refused: {r}"
        );
    }
    let mut s = connect(gw.addr);
    let req = format!(
        "POST http://127.0.0.1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: 0\r\n\r\n",
        auth()
    );
    s.write_all(req.as_bytes()).unwrap();
    let r = read_head(&mut s);
    assert_eq!(status(&r), 400, "absolute-form target: {r}");
}

#[test]
fn slowloris_and_idle_connections_are_closed_after_the_header_timeout() {
    let gw = gateway(Limits {
        header_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    // A head that never ends.
    let mut slow = connect(gw.addr);
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        .unwrap();
    // A keep-alive connection that goes idle after one request.
    let mut idle = connect(gw.addr);
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n{INIT}",
        auth(),
        INIT.len()
    );
    idle.write_all(req.as_bytes()).unwrap();
    assert_eq!(status(&read_head(&mut idle)), 200);
    let start = Instant::now();
    let _ = read_all(&mut slow);
    let _ = read_all(&mut idle);
    assert!(
        start.elapsed() < DEADLINE,
        "both connections are closed by the server"
    );
}

#[test]
fn connections_over_the_cap_get_503_and_a_freed_slot_is_reused() {
    let gw = gateway(Limits {
        max_connections: 3,
        ..Limits::default()
    });
    let held: Vec<TcpStream> = (0..3).map(|_| connect(gw.addr)).collect();
    // Each accepted connection holds a slot once the server took it; the fourth waits
    // for that, then is turned away.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut extra = connect(gw.addr);
        let r = read_all(&mut extra);
        if status(&r) == 503 {
            assert!(r.contains("too many open connections"), "{r}");
            break;
        }
        assert!(Instant::now() < deadline, "no 503 past the cap: {r}");
    }
    drop(held);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut s = connect(gw.addr);
        s.write_all(post(&auth(), INIT).as_bytes()).unwrap();
        if status(&read_all(&mut s)) == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "slots are never freed");
    }
}

#[test]
fn a_client_that_leaves_mid_request_cancels_it() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (started, dropped) = (started.clone(), dropped.clone());
        tokio::spawn(httpd::serve(
            listener,
            Limits::default(),
            std::future::pending(),
            move |_req| {
                struct OnDrop(Arc<AtomicBool>);
                impl Drop for OnDrop {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::SeqCst);
                    }
                }
                let guard = OnDrop(dropped.clone());
                started.store(true, Ordering::SeqCst);
                async move {
                    std::future::pending::<()>().await;
                    drop(guard);
                    hyper::Response::new(Body::full("never"))
                }
            },
        ));
        addr
    });
    let mut s = connect(addr);
    s.write_all(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    while !started.load(Ordering::SeqCst) {
        assert!(start.elapsed() < DEADLINE, "the request never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(s);
    while !dropped.load(Ordering::SeqCst) {
        assert!(start.elapsed() < DEADLINE, "the request was not cancelled");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_body_that_trickles_is_cut_off_at_the_body_deadline() {
    let gw = gateway(Limits {
        body_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut s = connect(gw.addr);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: 100\r\n\r\n{{\"js",
        auth()
    );
    s.write_all(head.as_bytes()).unwrap();
    let r = read_all(&mut s);
    assert_eq!(status(&r), 408, "{r}");
    assert!(r.contains("not complete within"), "{r}");
}

#[test]
fn a_request_head_over_64_kib_gets_431_and_one_just_under_is_served() {
    let gw = gateway(Limits::default());
    let with_pad = |pad: usize| {
        let mut s = connect(gw.addr);
        let headers = format!("{}X-Pad: {}\r\n", auth(), "p".repeat(pad));
        s.write_all(post(&headers, INIT).as_bytes()).unwrap();
        read_all(&mut s)
    };
    // A head of 64 KiB and a few hundred bytes: over by little, refused.
    let r = with_pad(65 * 1024);
    assert_eq!(status(&r), 431, "{}", &r[..r.len().min(300)]);
    // Just under: served.
    let r = with_pad(63 * 1024);
    assert_eq!(status(&r), 200, "{}", &r[..r.len().min(300)]);
    // Many small headers count the same as one long one.
    let mut s = connect(gw.addr);
    let many: String = (0..90)
        .map(|i| format!("X-Pad-{i}: {}\r\n", "q".repeat(740)))
        .collect();
    s.write_all(post(&format!("{}{many}", auth()), INIT).as_bytes())
        .unwrap();
    let r = read_all(&mut s);
    assert_eq!(status(&r), 431, "{}", &r[..r.len().min(300)]);
}
