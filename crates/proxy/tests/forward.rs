//! The dev proxy's forwarding path and traffic log, over real sockets: a target server,
//! the proxy in front of it, and a client.

mod common;

use bytes::Bytes;
use common::*;
use corral_events::{Event, Kind};
use corral_proxy::{ProxyBody, full};
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response};
use std::future::Future as _;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, oneshot};

/// What an [`echo`] target saw, as it wrote it back.
struct Seen {
    request_line: String,
    peer_port: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn parse(text: &str) -> Seen {
        let (head, body) = text.split_once("\n\n").expect("an echo");
        let mut lines = head.lines();
        let request_line = lines.next().unwrap().to_owned();
        let peer_port = lines
            .next()
            .unwrap()
            .strip_prefix("peer: ")
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect();
        Seen {
            request_line,
            peer_port,
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(k, _)| k == name);
        let first = values.next().map(|(_, v)| v.as_str());
        assert!(values.next().is_none(), "{name} once");
        first
    }
}

/// A target that answers with what it got: the request line, its peer's port, the
/// headers and the body; with a header of its own and a hop-by-hop one.
async fn echo(req: Request<Incoming>) -> Response<ProxyBody> {
    let peer = req.extensions().get::<Peer>().unwrap().0;
    let mut text = format!("{} {}\npeer: {}\n", req.method(), req.uri(), peer.port());
    for (k, v) in req.headers() {
        text += &format!("{k}: {}\n", v.to_str().unwrap());
    }
    text += "\n";
    text += std::str::from_utf8(&body_of(req).await).unwrap();
    let mut resp = response(200, "text/plain", text);
    let h = resp.headers_mut();
    h.insert("x-from-target", "yes".parse().unwrap());
    h.insert("connection", "x-secret".parse().unwrap());
    h.insert("x-secret", "1".parse().unwrap());
    resp
}

/// The `proxy.error` events in `rx` so far.
fn proxy_errors(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.is(Kind::ProxyError) {
            out.push(e);
        }
    }
    out
}

#[tokio::test]
async fn requests_reach_the_target_rewritten_over_one_kept_alive_connection() {
    let target = Target::start(echo).await;
    let (proxy, bus) = proxy(&target.url()).await;
    let mut events = bus.subscribe();
    let mut conn = Conn::open(proxy.addr()).await;

    let req = conn
        .request("POST", "/api/items?q=1&r=%20")
        .header("x-custom", "abc")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "must not pass")
        .header("keep-alive", "timeout=5")
        .header("x-forwarded-for", "10.0.0.7")
        .header("content-type", "application/json")
        .body(full(r#"{"a":1}"#))
        .unwrap();
    let reply = conn.fetch(req).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-from-target"), Some("yes"));
    assert_eq!(reply.header("x-secret"), None, "named by Connection");
    assert_eq!(reply.header("connection"), None);
    let seen = Seen::parse(reply.text());
    assert_eq!(seen.request_line, "POST /api/items?q=1&r=%20");
    assert_eq!(seen.header("host"), Some(target.addr.to_string().as_str()));
    assert_eq!(seen.header("x-custom"), Some("abc"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("content-length"), Some("7"));
    assert_eq!(seen.header("x-hop"), None);
    assert_eq!(seen.header("keep-alive"), None);
    // The client's own passes as it came; the proxy adds none (see the next request).
    assert_eq!(seen.header("x-forwarded-for"), Some("10.0.0.7"));
    assert_eq!(
        seen.header("x-forwarded-host"),
        Some(proxy.addr().to_string().as_str())
    );
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
    assert_eq!(seen.body, r#"{"a":1}"#);

    let second = Seen::parse(conn.get("/second").await.text());
    assert_eq!(second.request_line, "GET /second");
    assert_eq!(second.header("x-forwarded-for"), None);
    assert_eq!(second.peer_port, seen.peer_port, "the pooled connection");
    assert_eq!(target.connections(), 1);
    assert!(proxy_errors(&mut events).is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn preserve_host_keeps_the_browsers_host_and_a_base_path_prefixes_the_path() {
    let target = Target::start(echo).await;
    let url = format!("{}/app/", target.url());
    let (proxy, _bus) = proxy_with(&url, |s| s.preserve_host = true).await;
    let seen = Seen::parse(get(proxy.addr(), "/x/y?z=1").await.text());
    assert_eq!(seen.request_line, "GET /app/x/y?z=1");
    let browser_host = proxy.addr().to_string();
    assert_eq!(seen.header("host"), Some(browser_host.as_str()));
    assert_eq!(seen.header("x-forwarded-host"), Some(browser_host.as_str()));
    proxy.stop().await;
}

#[tokio::test]
async fn a_target_that_is_down_gets_a_502_page_and_one_proxy_error() {
    // A port that was just free: nothing listens there, so connecting is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let target = format!("http://127.0.0.1:{port}");
    let (proxy, bus) = proxy(&target).await;
    let mut events = bus.subscribe();

    let reply = get(proxy.addr(), "/page?x=1").await;
    assert_eq!(reply.status, 502);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let page = reply.text();
    let headline = format!("Corral's dev proxy 'web' could not reach {target}: connection refused");
    assert!(page.contains(&headline), "{page}");
    assert!(page.contains("<code>corral ps</code>"), "{page}");

    let errors = proxy_errors(&mut events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    assert_eq!(e.source, "proxy:web");
    assert_eq!(e.str("error"), Some("connection refused"));
    assert_eq!(e.str("method"), Some("GET"));
    assert_eq!(e.str("url"), Some("/page?x=1"));
    assert_eq!(e.str("target"), Some(target.as_str()));

    let entries = proxy.traffic().query(&Default::default());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].status, None);
    assert_eq!(entries[0].error.as_deref(), Some("connection refused"));
    assert_eq!(proxy.traffic().errors(), 1);
    proxy.stop().await;
}

#[tokio::test]
async fn a_websocket_echoes_through_the_proxy_with_its_subprotocol_until_it_stops() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::handshake::server;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    let (seen_tx, seen_rx) = oneshot::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        #[allow(clippy::result_large_err)] // tungstenite's callback type
        let accept = |req: &server::Request, mut resp: server::Response| {
            let h = req.headers();
            let protocol = h.get("sec-websocket-protocol").cloned();
            let host = h.get("host").map(|v| v.to_str().unwrap().to_owned());
            let _ = seen_tx.send((req.uri().to_string(), host, protocol.clone()));
            if let Some(p) = protocol {
                resp.headers_mut().insert("sec-websocket-protocol", p);
            }
            Ok(resp)
        };
        let mut ws = tokio_tungstenite::accept_hdr_async(stream, accept)
            .await
            .unwrap();
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_text() || msg.is_binary() {
                ws.send(msg).await.unwrap();
            }
        }
    });
    let (proxy, _bus) = proxy(&format!("http://{target}")).await;

    let mut req = format!("ws://{}/hmr?token=1", proxy.addr())
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("sec-websocket-protocol", "vite-hmr".parse().unwrap());
    let stream = TcpStream::connect(proxy.addr()).await.unwrap();
    // tungstenite checks Sec-WebSocket-Accept and the protocol: they passed unchanged.
    let (mut ws, resp) = within(
        "the websocket handshake",
        tokio_tungstenite::client_async(req, stream),
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), 101);
    assert_eq!(resp.headers()["sec-websocket-protocol"], "vite-hmr");
    let (uri, host, protocol) = within("the target's handshake", seen_rx).await.unwrap();
    assert_eq!(uri, "/hmr?token=1");
    assert_eq!(host, Some(target.to_string()));
    assert_eq!(protocol.unwrap(), "vite-hmr");

    for msg in [
        Message::text("hello"),
        Message::binary(vec![0u8, 1, 2, 255]),
        Message::text("é".repeat(70_000)),
    ] {
        ws.send(msg.clone()).await.unwrap();
        let back = within("the echo", ws.next()).await.unwrap().unwrap();
        assert_eq!(back, msg);
    }

    eventually("the 101 in the traffic log", || {
        proxy.traffic().total() == 1
    })
    .await;
    let entry = &proxy.traffic().query(&Default::default())[0];
    assert_eq!(
        (entry.status, entry.url.as_str()),
        (Some(101), "/hmr?token=1")
    );

    // Stopping the proxy ends the spliced connection.
    proxy.stop().await;
    let after = within("the websocket to end", ws.next()).await;
    assert!(
        !matches!(after, Some(Ok(Message::Text(_) | Message::Binary(_)))),
        "{after:?}"
    );
}

/// Reads `body` until what came ends with `end`.
async fn read_until(body: &mut Incoming, end: &str) -> String {
    let mut got = Vec::new();
    while !got.ends_with(end.as_bytes()) {
        let frame = within("a chunk", body.frame()).await;
        let frame = frame.expect("more body").unwrap();
        got.extend_from_slice(frame.data_ref().unwrap());
    }
    String::from_utf8(got).unwrap()
}

#[tokio::test]
async fn server_sent_events_arrive_one_by_one() {
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let go_rx = Arc::new(Mutex::new(Some(go_rx)));
    let target = Target::start(move |_req| {
        let go = go_rx.lock().unwrap().take();
        async move {
            let (tx, body) = stream();
            tokio::spawn(async move {
                tx.send(Bytes::from("data: 1\n\n")).unwrap();
                if let Some(go) = go {
                    let _ = go.await;
                }
                let _ = tx.send(Bytes::from("data: 2\n\n"));
            });
            let mut resp = Response::new(body);
            resp.headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
            resp
        }
    })
    .await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let req = conn.request("GET", "/events").body(full("")).unwrap();
    let resp = conn.send(req).await;
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut body = resp.into_body();
    // Event 2 is not even sent yet: event 1 must come through on its own.
    assert_eq!(read_until(&mut body, "\n\n").await, "data: 1\n\n");
    go_tx.send(()).unwrap();
    assert_eq!(read_until(&mut body, "\n\n").await, "data: 2\n\n");
    assert!(within("the end", body.frame()).await.is_none());
    proxy.stop().await;
}

/// `len` pseudo-random bytes (xorshift), the same for the same seed.
fn pseudo_random(len: usize, mut seed: u64) -> Bytes {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out.into()
}

/// FNV-1a, fed chunk by chunk.
fn fnv(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}
const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

#[tokio::test]
async fn a_large_download_and_upload_pass_byte_for_byte() {
    const DOWN: usize = 8 << 20;
    const UP: usize = 32 << 20;
    let file = pseudo_random(DOWN, 7);
    let served = file.clone();
    let target = Target::start(move |req: Request<Incoming>| {
        let served = served.clone();
        async move {
            if req.method() == "GET" {
                return response(200, "application/octet-stream", served);
            }
            // Hash the upload as it streams in.
            let mut body = req.into_body();
            let (mut size, mut hash) = (0usize, FNV_START);
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.unwrap().into_data() {
                    size += data.len();
                    hash = fnv(hash, &data);
                }
            }
            response(200, "text/plain", format!("{size} {hash:x}"))
        }
    })
    .await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;

    let reply = conn.get("/file.bin").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), Some("8388608"));
    assert_eq!(
        reply.header("content-type"),
        Some("application/octet-stream")
    );
    assert!(reply.body == file, "the download differs");

    let upload = pseudo_random(UP, 11);
    let (tx, body) = stream();
    for at in (0..UP).step_by(64 * 1024) {
        tx.send(upload.slice(at..(at + 64 * 1024).min(UP))).unwrap();
    }
    drop(tx);
    let req = conn.request("PUT", "/upload").body(body).unwrap();
    let reply = conn.fetch(req).await;
    assert_eq!(reply.text(), format!("{UP} {:x}", fnv(FNV_START, &upload)));

    eventually("both in the traffic log", || proxy.traffic().total() == 2).await;
    let log = proxy.traffic().query(&Default::default());
    let down = log.iter().find(|e| e.method == "GET").unwrap();
    assert_eq!(down.response_bytes, DOWN as u64);
    assert_eq!(
        down.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert!(down.headers_ms.unwrap() <= down.total_ms, "{down:?}");
    let up = log.iter().find(|e| e.method == "PUT").unwrap();
    assert_eq!(up.request_bytes, UP as u64);
    proxy.stop().await;
}

#[tokio::test]
async fn redirects_and_cookies_for_the_target_point_at_the_proxy() {
    let target = Target::start(|req: Request<Incoming>| async move {
        let host = req.headers()["host"].to_str().unwrap().to_owned();
        let location = match req.uri().path() {
            "/base/login" => format!("http://{host}/base/home?from=login"),
            "/base/local" => format!(
                "http://localhost:{}/elsewhere",
                host.rsplit(':').next().unwrap()
            ),
            "/base/away" => "https://example.com/x".to_owned(),
            _ => "/base/relative".to_owned(),
        };
        let mut resp = response(302, "text/plain", "");
        let h = resp.headers_mut();
        h.insert("location", location.parse().unwrap());
        h.append(
            "set-cookie",
            "sid=1; Domain=127.0.0.1; Path=/; HttpOnly".parse().unwrap(),
        );
        h.append("set-cookie", "other=2; Domain=example.com".parse().unwrap());
        resp
    })
    .await;
    let (proxy, _bus) = proxy(&format!("{}/base", target.url())).await;
    let origin = proxy.url();

    let reply = get(proxy.addr(), "/login").await;
    assert_eq!(reply.status, 302);
    let home = format!("{origin}/home?from=login");
    assert_eq!(reply.header("location"), Some(home.as_str()));
    assert_eq!(
        reply.all("set-cookie"),
        ["sid=1; Path=/; HttpOnly", "other=2; Domain=example.com"]
    );
    let elsewhere = format!("{origin}/elsewhere");
    assert_eq!(
        get(proxy.addr(), "/local").await.header("location"),
        Some(elsewhere.as_str())
    );
    assert_eq!(
        get(proxy.addr(), "/away").await.header("location"),
        Some("https://example.com/x")
    );
    assert_eq!(
        get(proxy.addr(), "/rel").await.header("location"),
        Some("/relative")
    );
    proxy.stop().await;
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

const HTML_500: &str = "<!doctype html><html><head><title>Error</title>\
    <style>p { color: red }</style></head><body><p>Cannot  read\n properties of \
    <em>undefined</em></p><script>report()</script></body></html>";

#[tokio::test]
async fn the_traffic_log_records_statuses_sizes_timings_and_error_messages() {
    let target = Target::start(|req: Request<Incoming>| async move {
        match req.uri().path() {
            "/json" => response(
                500,
                "application/json",
                r#"{"error":{"message":"db down"}}"#,
            ),
            "/html" => response(500, "text/html; charset=utf-8", HTML_500),
            "/gz" => {
                let mut resp = response(
                    503,
                    "application/json",
                    gzip(br#"{"status":503,"detail":"warming up"}"#),
                );
                resp.headers_mut()
                    .insert("content-encoding", "gzip".parse().unwrap());
                resp
            }
            _ => {
                let body = body_of(req).await;
                response(200, "text/plain", format!("got {}", body.len()))
            }
        }
    })
    .await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let post = conn.request("POST", "/ok?x=1").body(full("12345")).unwrap();
    assert_eq!(conn.fetch(post).await.text(), "got 5");
    for path in ["/json", "/html", "/gz"] {
        assert!(conn.get(path).await.status.as_u16() >= 500);
    }

    let log = proxy.traffic();
    eventually("four entries", || log.total() == 4).await;
    assert_eq!(log.errors(), 3);
    let entries = log.query(&Default::default());
    let by_url = |url: &str| entries.iter().find(|e| e.url == url).unwrap().clone();

    let ok = by_url("/ok?x=1");
    assert_eq!((ok.method.as_str(), ok.status), ("POST", Some(200)));
    assert_eq!((ok.request_bytes, ok.response_bytes), (5, 5));
    assert_eq!(ok.content_type.as_deref(), Some("text/plain"));
    assert!(ok.headers_ms.unwrap() <= ok.total_ms);
    assert!(ok.ts.ends_with('Z') && ok.ts.len() == 24, "{}", ok.ts);
    assert_eq!((ok.excerpt, ok.message, ok.error), (None, None, None));

    let json = by_url("/json");
    assert_eq!(json.status, Some(500));
    assert_eq!(json.message.as_deref(), Some("db down"));
    assert_eq!(
        json.excerpt.as_deref(),
        Some(r#"{"error":{"message":"db down"}}"#)
    );
    assert_eq!(
        json.error, None,
        "an error response is not a transport error"
    );

    let html = by_url("/html");
    assert_eq!(
        html.message.as_deref(),
        Some("Cannot read properties of undefined")
    );
    assert_eq!(html.excerpt.as_deref(), Some(HTML_500));

    let gz = by_url("/gz");
    assert_eq!(gz.status, Some(503));
    assert_eq!(
        gz.excerpt.as_deref(),
        Some(r#"{"status":503,"detail":"warming up"}"#)
    );
    assert_eq!(gz.message.as_deref(), Some("warming up"));
    assert_eq!(
        gz.response_bytes,
        gzip(br#"{"status":503,"detail":"warming up"}"#).len() as u64
    );

    let errors = log.query(&corral_proxy::traffic::TrafficQuery {
        errors_only: true,
        ..Default::default()
    });
    let urls: Vec<&str> = errors.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(urls, ["/json", "/html", "/gz"]);
    proxy.stop().await;
}

#[tokio::test]
async fn the_traffic_ring_keeps_the_newest() {
    let target = Target::start(|_req| async { response(200, "text/plain", "ok") }).await;
    let (proxy, _bus) = proxy_with(&target.url(), |s| s.traffic_ring = 3).await;
    let mut conn = Conn::open(proxy.addr()).await;
    for i in 1..=5 {
        assert_eq!(conn.get(&format!("/r{i}")).await.text(), "ok");
        eventually("the entry", || proxy.traffic().total() == i).await;
    }
    let kept = proxy.traffic().query(&Default::default());
    let kept: Vec<(u64, &str)> = kept.iter().map(|e| (e.id, e.url.as_str())).collect();
    assert_eq!(kept, [(3, "/r3"), (4, "/r4"), (5, "/r5")]);
    assert_eq!(proxy.traffic().errors(), 0);
    proxy.stop().await;
}

/// A body that sends one chunk, then fails when told to.
struct BreaksOff {
    sent: bool,
    fail: oneshot::Receiver<()>,
}

impl Body for BreaksOff {
    type Data = Bytes;
    type Error = corral_proxy::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        if !std::mem::replace(&mut self.sent, true) {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from("partial")))));
        }
        match std::pin::Pin::new(&mut self.fail).poll(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Err("disk on fire".into()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[tokio::test]
async fn a_body_that_breaks_off_is_logged_and_reported() {
    let (fail_tx, fail_rx) = oneshot::channel();
    let fail_rx = Arc::new(Mutex::new(Some(fail_rx)));
    let target = Target::start(move |_req| {
        let fail = fail_rx.lock().unwrap().take().unwrap();
        async move {
            let body = BreaksOff { sent: false, fail };
            let mut resp = Response::new(body.boxed_unsync());
            resp.headers_mut()
                .insert("content-type", "text/plain".parse().unwrap());
            resp
        }
    })
    .await;
    let (proxy, bus) = proxy(&target.url()).await;
    let mut events = bus.subscribe();
    let mut conn = Conn::open(proxy.addr()).await;
    let resp = conn
        .send(conn.request("GET", "/big").body(full("")).unwrap())
        .await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    assert_eq!(read_until(&mut body, "partial").await, "partial");
    fail_tx.send(()).unwrap();
    let rest = within("the body to fail", body.collect()).await;
    assert!(rest.is_err(), "the browser sees the cut");

    eventually("the entry", || proxy.traffic().total() == 1).await;
    let entry = &proxy.traffic().query(&Default::default())[0];
    let why = "the response broke off: connection closed early";
    assert_eq!(entry.status, Some(200));
    assert_eq!(entry.error.as_deref(), Some(why));
    assert_eq!(entry.response_bytes, 7);
    let errors = proxy_errors(&mut events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].str("error"), Some(why));
    assert_eq!(errors[0].str("url"), Some("/big"));
    proxy.stop().await;
}

#[tokio::test]
async fn a_client_that_leaves_is_logged_as_aborted_not_as_an_error() {
    let (arrived_tx, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let target = Target::start(move |_req| {
        let _ = arrived_tx.send(());
        std::future::pending()
    })
    .await;
    let (proxy, bus) = proxy(&target.url()).await;
    let mut events = bus.subscribe();
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    within("the request at the target", arrived.recv()).await;
    drop(stream);

    eventually("the entry", || proxy.traffic().total() == 1).await;
    let entry = &proxy.traffic().query(&Default::default())[0];
    assert!(entry.aborted, "{entry:?}");
    assert_eq!((entry.status, entry.error.as_deref()), (None, None));
    assert_eq!(proxy.traffic().errors(), 0);
    assert!(proxy_errors(&mut events).is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn a_target_that_answers_garbage_or_nothing_gets_a_502() {
    use tokio::io::AsyncReadExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        // The first connection gets garbage, the next is closed once the request is in.
        for answer in [&b"SPLAT\r\n\r\n"[..], b""] {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                assert!(n > 0);
                got.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer).await.unwrap();
        }
    });
    let (proxy, bus) = proxy(&target).await;
    let mut events = bus.subscribe();

    let reply = get(proxy.addr(), "/a").await;
    assert_eq!(reply.status, 502);
    let errors = proxy_errors(&mut events);
    let why = errors[0].str("error").unwrap();
    assert!(why.starts_with("bad response: "), "{why}");
    assert!(reply.text().contains(why), "{}", reply.text());

    let reply = get(proxy.addr(), "/b").await;
    assert_eq!(reply.status, 502);
    let errors = proxy_errors(&mut events);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].str("error"),
        Some("connection closed before the response")
    );
    assert_eq!(proxy.traffic().errors(), 2);
    proxy.stop().await;
}

/// DNS rebinding: a page on `evil.example`, its name re-pointed at 127.0.0.1, reads
/// whatever answers there with its own origin. A dev server guards against that by
/// checking `Host` (Vite answers 403); the proxy, which rewrites `Host` to the target's,
/// must check it in its stead: only loopback names, its own listen IP and the
/// configured `allowed_hosts` pass, on its own endpoints too, and a refused request never
/// reaches the target.
#[tokio::test]
async fn a_request_for_a_host_the_proxy_does_not_serve_is_refused_before_the_target() {
    let reached = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = reached.clone();
    let target = Target::start(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            let host = req
                .headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned());
            seen.lock().unwrap().push(format!("{} {host:?}", req.uri()));
            echo(req).await
        }
    })
    .await;
    let (proxy, bus) = proxy_with(&target.url(), |s| {
        s.allowed_hosts = vec!["myapp.test".into()];
        s.preserve_host = true;
    })
    .await;
    let mut events = bus.subscribe();
    let port = proxy.addr().port();
    let mut conn = Conn::open(proxy.addr()).await;
    let with_host = |path: &str, host: Option<&str>| {
        let mut req = Request::builder().uri(path);
        if let Some(host) = host {
            req = req.header("host", host);
        }
        req.body(full("")).unwrap()
    };

    let refused = [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("localhost.evil.example:{port}"),
        format!("10.0.0.1:{port}"),
        format!("myapp.test.evil:{port}"),
    ];
    for host in &refused {
        for path in ["/main.js", "/__corral/client.js"] {
            let reply = conn.fetch(with_host(path, Some(host))).await;
            assert_eq!(reply.status, 403, "Host {host} {path}: {}", reply.text());
            let text = reply.text();
            let name = host.rsplit_once(':').map_or(host.as_str(), |(n, _)| n);
            assert!(text.contains(name), "names the host: {text}");
            assert!(text.contains("'web'"), "names the proxy: {text}");
            assert!(text.contains("allowed_hosts"), "names the fix: {text}");
            assert_eq!(
                reply.header("content-type"),
                Some("text/plain; charset=utf-8")
            );
        }
    }
    let reply = conn.fetch(with_host("/main.js", None)).await;
    assert_eq!(reply.status, 403, "no Host: {}", reply.text());
    assert!(
        reached.lock().unwrap().is_empty(),
        "{:?}",
        reached.lock().unwrap()
    );
    assert!(proxy.traffic().query(&Default::default()).is_empty());

    let served = [
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("app.localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("127.1.2.3:{port}"),
        format!("[::1]:{port}"),
        format!("myapp.test:{port}"),
        "MYAPP.TEST".to_owned(),
    ];
    for host in &served {
        let reply = conn.fetch(with_host("/main.js", Some(host))).await;
        assert_eq!(reply.status, 200, "Host {host}: {}", reply.text());
        // preserve_host still sends the browser's Host once it passed.
        assert_eq!(
            Seen::parse(reply.text()).header("host"),
            Some(host.as_str())
        );
    }
    assert_eq!(reached.lock().unwrap().len(), served.len());
    // One event says why requests were refused (not one per request).
    let refusals: Vec<Event> = proxy_errors(&mut events);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    proxy.stop().await;
}
