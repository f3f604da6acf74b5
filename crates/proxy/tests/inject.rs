//! The dev proxy's page side through a real proxy on loopback: the script it serves, the
//! reports it takes, source-mapped locations, and the script tag in HTML documents.

mod common;

use bytes::Bytes;
use corral_events::{Event, EventBus, Kind};
use corral_proxy::browser::{BrowserEntry, BrowserQuery};
use corral_proxy::{Proxy, ProxySpec};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::broadcast;

/// The tag `proxy` injects (with its report key).
fn script_tag(proxy: &Proxy) -> String {
    format!(
        r#"<script src="/__corral/client.js" data-k="{}"></script>"#,
        proxy.report_key()
    )
}

/// Waits for conditions: generous, the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------
// A target: a tiny HTTP server whose responses are written in chunks of a chosen size.

/// A response body sent as separate chunks, so the proxy sees them one by one.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
    }
}

/// What the target answers one path with.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// Chunk size (0: one chunk).
    chunk: usize,
}

impl Reply {
    fn new(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            body: body.into(),
            chunk: 0,
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    fn status(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }

    fn chunked(mut self, size: usize) -> Reply {
        self.chunk = size;
        self
    }

    fn response(&self) -> Response<Chunks> {
        let size = if self.chunk == 0 {
            self.body.len().max(1)
        } else {
            self.chunk
        };
        let chunks = self.body.chunks(size).map(Bytes::copy_from_slice).collect();
        let mut response = Response::new(Chunks(chunks));
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap();
        for (name, value) in &self.headers {
            response.headers_mut().append(*name, value.parse().unwrap());
        }
        response
    }
}

/// Starts a target serving `routes` (path → reply; anything else is a 404).
async fn target(routes: Vec<(&'static str, Reply)>) -> SocketAddr {
    let routes = Arc::new(routes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    // `/headers` echoes the request's headers, one `name: value` a line.
                    let echo = (req.uri().path() == "/headers").then(|| {
                        let lines: String = req
                            .headers()
                            .iter()
                            .map(|(n, v)| format!("{n}: {}\n", v.to_str().unwrap_or("?")))
                            .collect();
                        Reply::new("text/plain", lines).response()
                    });
                    let reply = echo.unwrap_or_else(|| {
                        routes
                            .iter()
                            .find(|(path, _)| *path == req.uri().path())
                            .map(|(_, reply)| reply.response())
                            .unwrap_or_else(|| {
                                let mut r = Reply::new("text/plain", "not found").response();
                                *r.status_mut() = StatusCode::NOT_FOUND;
                                r
                            })
                    });
                    async move { Ok::<_, std::convert::Infallible>(reply) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

async fn proxy(target: SocketAddr, inject: bool) -> (Proxy, EventBus) {
    let bus = EventBus::new(1024);
    let mut spec = ProxySpec::new("web", &format!("http://{target}"), "127.0.0.1:0");
    spec.inject = inject;
    (Proxy::start(spec, bus.clone()).await.unwrap(), bus)
}

// ---------------------------------------------------------------------------------------
// A client.

struct Got {
    status: StatusCode,
    headers: hyper::HeaderMap,
    body: Vec<u8>,
}

async fn send(url: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Got {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let response = tokio::time::timeout(DEADLINE, client.request(request))
        .await
        .expect("the proxy answers in time")
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(DEADLINE, body.collect())
        .await
        .expect("the body arrives in time")
        .unwrap()
        .to_bytes()
        .to_vec();
    Got {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

async fn get(url: &str, headers: &[(&str, &str)]) -> Got {
    send(url, "GET", headers, b"").await
}

/// The next `browser.error` event.
async fn next_browser_error(events: &mut broadcast::Receiver<Event>) -> Event {
    tokio::time::timeout(DEADLINE, async {
        loop {
            match events.recv().await {
                Ok(event) if event.is(Kind::BrowserError) => return event,
                Ok(_) => {}
                Err(e) => panic!("event bus: {e}"),
            }
        }
    })
    .await
    .expect("a browser.error event in time")
}

async fn report(proxy: &Proxy, body: &serde_json::Value) -> Got {
    let mut body = body.clone();
    body["key"] = proxy.report_key().into();
    send(
        &format!("{}/__corral/errors", proxy.url()),
        "POST",
        &[("content-type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
}

fn entries(proxy: &Proxy) -> Vec<BrowserEntry> {
    proxy.browser().query(&BrowserQuery::default())
}

// ---------------------------------------------------------------------------------------
// The endpoints.

#[tokio::test]
async fn the_script_is_served_uncached_as_javascript() {
    let (proxy, _bus) = proxy(target(vec![]).await, true).await;
    let got = get(&format!("{}/__corral/client.js", proxy.url()), &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(
        got.headers["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(got.headers["cache-control"], "no-store");
    assert_eq!(got.body, corral_proxy::browser::SCRIPT.as_bytes());
    assert!(
        String::from_utf8(got.body)
            .unwrap()
            .contains("/__corral/errors")
    );

    let post = send(
        &format!("{}/__corral/client.js", proxy.url()),
        "POST",
        &[],
        b"",
    )
    .await;
    assert_eq!(post.status, 405);
    assert_eq!(post.headers["allow"], "GET, HEAD");
    let unknown = get(&format!("{}/__corral/nope", proxy.url()), &[]).await;
    assert_eq!(unknown.status, 404);
    proxy.stop().await;
}

#[tokio::test]
async fn a_report_is_recorded_and_announced() {
    let (proxy, bus) = proxy(target(vec![]).await, true).await;
    let mut events = bus.subscribe();
    let page = format!("{}/users", proxy.url());
    let got = report(
        &proxy,
        &serde_json::json!({
            "page": page,
            "errors": [
                {"kind": "error", "message": "TypeError: users.map is not a function",
                 "stack": "TypeError: users.map is not a function\n    at x (https://cdn.example/lib.js:1:2)",
                 "source": "https://cdn.example/lib.js", "line": 1, "column": 2,
                 "time": "2026-01-01T00:00:00Z", "unknown": {"ignored": true}},
                {"kind": "fetch", "message": "GET /api/users → 500 Internal Server Error: db down"}
            ]
        }),
    )
    .await;
    assert_eq!(got.status, 204);
    assert!(got.body.is_empty());

    let first = next_browser_error(&mut events).await;
    assert_eq!(first.source, "browser");
    assert_eq!(first.str("proxy"), Some("web"));
    assert_eq!(first.str("error_kind"), Some("error"));
    assert_eq!(
        first.str("message"),
        Some("TypeError: users.map is not a function")
    );
    assert_eq!(
        first.str("location"),
        Some("https://cdn.example/lib.js:1:2")
    );
    assert_eq!(first.str("page"), Some(page.as_str()));
    let second = next_browser_error(&mut events).await;
    assert_eq!(second.str("error_kind"), Some("fetch"));
    assert_eq!(second.str("location"), Some(""));

    let recorded = entries(&proxy);
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].id, 1);
    assert_eq!(recorded[0].proxy, "web");
    assert_eq!(recorded[0].line, 1);
    assert_eq!(recorded[0].column, 2);
    assert!(recorded[0].stack.starts_with("TypeError: users.map"));
    assert_eq!(
        recorded[1].message,
        "GET /api/users → 500 Internal Server Error: db down"
    );
    assert_eq!(proxy.browser().total(), 2);
    assert_eq!(proxy.row().browser_errors, 2);
    proxy.stop().await;
}

#[tokio::test]
async fn a_bad_report_is_refused_with_the_reason() {
    let (proxy, _bus) = proxy(target(vec![]).await, true).await;
    let url = format!("{}/__corral/errors", proxy.url());
    let bad = send(&url, "POST", &[], b"{not json").await;
    assert_eq!(bad.status, 400);
    assert!(
        String::from_utf8(bad.body)
            .unwrap()
            .starts_with("the error report is not JSON")
    );
    let no_errors = send(&url, "POST", &[], br#"{"page":"x"}"#).await;
    assert_eq!(no_errors.status, 400);
    let huge = vec![b' '; corral_proxy::browser::BODY_LIMIT + 1];
    assert_eq!(send(&url, "POST", &[], &huge).await.status, 413);
    assert_eq!(get(&url, &[]).await.status, 405);
    assert!(entries(&proxy).is_empty());
    proxy.stop().await;
}

/// Another page the user has open cannot write into what the agent reads: a report
/// from another origin, or for a DNS-rebound host name, is refused; the proxy's own
/// origin (by IP or `localhost`) is accepted.
#[tokio::test]
async fn reports_from_other_origins_are_refused() {
    let (proxy, _bus) = proxy(target(vec![]).await, true).await;
    let url = format!("{}/__corral/errors", proxy.url());
    let body = serde_json::json!({"key": proxy.report_key(), "page": "x",
        "errors": [{"kind": "error", "message": "planted"}]})
    .to_string();
    let body = body.as_bytes();
    let port = proxy.addr().port();
    let own = format!("127.0.0.1:{port}");
    let by_name = format!("localhost:{port}");
    let evil = format!("evil.example:{port}");
    let cases = [
        (own.clone(), Some("http://attacker.example".to_owned()), 403),
        (evil.clone(), Some(format!("http://{evil}")), 403),
        (evil.clone(), None, 403),
        (own.clone(), Some(format!("http://{own}")), 204),
        (by_name.clone(), Some(format!("http://{by_name}")), 204),
    ];
    for (host, origin, status) in cases {
        let mut headers = vec![("host", host.as_str())];
        if let Some(o) = &origin {
            headers.push(("origin", o.as_str()));
        }
        let got = send(&url, "POST", &headers, body).await;
        assert_eq!(got.status, status, "Host {host}, Origin {origin:?}");
    }
    // Recorded in the background after the 204: wait for the two accepted ones (a
    // refused one would make it three).
    let counted = || entries(&proxy).iter().map(|e| e.count).sum::<u32>();
    tokio::time::timeout(DEADLINE, async {
        while counted() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the two accepted reports are recorded");
    assert_eq!(counted(), 2);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Source maps.

/// A map from `bundle.js` line 1, column 4821 (1-based) to UserList.tsx 28:12, with the
/// sources relative to the map at `/assets/`.
fn bundle_map() -> Vec<u8> {
    let mut builder = sourcemap::SourceMapBuilder::new(Some("bundle.js"));
    builder.add(0, 10, 3, 0, Some("../src/main.tsx"), None, false);
    builder.add(
        0,
        4820,
        27,
        11,
        Some("../src/components/UserList.tsx"),
        None,
        false,
    );
    builder.add(0, 5000, 9, 4, Some("../src/api.ts"), None, false);
    let mut map = Vec::new();
    builder.into_sourcemap().to_writer(&mut map).unwrap();
    map
}

#[tokio::test]
async fn locations_are_source_mapped_through_the_target() {
    let map = bundle_map();
    let inline = format!(
        "var b=1;\n//# sourceMappingURL=data:application/json;base64,{}\n",
        base64(&map)
    );
    let target = target(vec![
        (
            "/assets/bundle.js",
            Reply::new(
                "text/javascript",
                "var a=1;\n//# sourceMappingURL=bundle.js.map\n",
            ),
        ),
        (
            "/assets/bundle.js.map",
            Reply::new("application/json", map.clone()),
        ),
        ("/assets/inline.js", Reply::new("text/javascript", inline)),
        (
            "/assets/header.js",
            Reply::new("text/javascript", "var c;").header("sourcemap", "/maps/h.map"),
        ),
        ("/maps/h.map", Reply::new("application/json", map.clone())),
    ])
    .await;
    let (proxy, bus) = proxy(target, true).await;
    let mut events = bus.subscribe();
    let origin = proxy.url();
    let got = report(
        &proxy,
        &serde_json::json!({
            "page": format!("{origin}/"),
            "errors": [
                {"message": "a", "source": format!("{origin}/assets/bundle.js"), "line": 1, "column": 4821},
                {"message": "b", "source": format!("{origin}/assets/inline.js"), "line": 1, "column": 5003},
                {"message": "c", "stack": format!("Error: c\n    at f ({origin}/__corral/client.js:1:1)\n    at g ({origin}/assets/header.js:1:11)")},
                {"message": "d", "source": format!("{origin}/assets/missing.js"), "line": 1, "column": 4821},
                {"message": "e", "source": format!("{origin}/assets/bundle.js"), "line": 1, "column": 5}
            ]
        }),
    )
    .await;
    assert_eq!(got.status, 204);
    let mut locations = Vec::new();
    for _ in 0..5 {
        let event = next_browser_error(&mut events).await;
        locations.push((
            event.str("message").unwrap().to_owned(),
            event.str("location").unwrap().to_owned(),
        ));
    }
    let expected = [
        ("a", "src/components/UserList.tsx:28:12".to_owned()),
        ("b", "src/api.ts:10:5".to_owned()),
        ("c", "src/main.tsx:4:1".to_owned()),
        ("d", format!("{origin}/assets/missing.js:1:4821")),
        ("e", format!("{origin}/assets/bundle.js:1:5")),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(m, l)| (m.to_string(), l.clone()))
        .collect();
    assert_eq!(locations, expected);
    let recorded = entries(&proxy);
    assert_eq!(recorded[0].location, "src/components/UserList.tsx:28:12");
    assert_eq!(recorded[0].source, format!("{origin}/assets/bundle.js"));
    proxy.stop().await;
}

/// Standard base64, for the inline map.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The tag in HTML documents.

const PAGE: &str =
    "<!doctype html><html><head><title>Users</title></head><body><ul id=users></ul></body></html>";

fn with_tag(doc: &str, at: &str, tag: &str) -> String {
    let expected = doc.replacen(at, &format!("{tag}{at}"), 1);
    assert_ne!(expected, doc, "{at} is in the document");
    expected
}

#[tokio::test]
async fn html_documents_get_the_tag_once_wherever_it_fits() {
    let html = "text/html; charset=utf-8";
    let no_head = "<html><body class=app><p>hi</p></body></html>";
    let upper = "<HTML><HEAD><TITLE>x</TITLE></HEAD><BODY>y</BODY></HTML>";
    let target = target(vec![
        (
            "/",
            Reply::new(html, PAGE)
                .header("etag", "\"v1\"")
                .header("last-modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ),
        ("/no-head", Reply::new(html, no_head)),
        ("/fragment", Reply::new(html, "<p>a fragment</p>")),
        ("/upper", Reply::new("TEXT/HTML", upper)),
        ("/ones", Reply::new(html, PAGE).chunked(1)),
        ("/sevens", Reply::new(html, PAGE).chunked(7)),
        ("/missing", Reply::new(html, PAGE).status(404)),
        ("/broken", Reply::new(html, PAGE).status(500).chunked(7)),
    ])
    .await;
    let (proxy, _bus) = proxy(target, true).await;
    let url = |path: &str| format!("{}{path}", proxy.url());
    let tag = script_tag(&proxy);
    let page = with_tag(PAGE, "</head>", &tag);

    let got = get(&url("/"), &[("accept", "text/html")]).await;
    assert_eq!(got.status, 200);
    assert_eq!(String::from_utf8(got.body).unwrap(), page);
    for dropped in [
        "content-length",
        "etag",
        "last-modified",
        "content-encoding",
    ] {
        assert!(!got.headers.contains_key(dropped), "{dropped} is dropped");
    }
    assert_eq!(got.headers["content-type"], html);

    let cases = [
        ("/no-head", with_tag(no_head, "<p>", &tag)),
        ("/fragment", format!("{tag}<p>a fragment</p>")),
        ("/upper", with_tag(upper, "</HEAD>", &tag)),
        ("/ones", page.clone()),
        ("/sevens", page.clone()),
        ("/missing", page.clone()),
        ("/broken", page.clone()),
    ];
    for (path, expected) in cases {
        let got = get(&url(path), &[]).await;
        assert_eq!(String::from_utf8(got.body).unwrap(), expected, "{path}");
    }
    proxy.stop().await;
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
    encoder.write_all(bytes).unwrap();
    encoder.into_inner()
}

#[tokio::test]
async fn compressed_documents_are_decoded_and_sent_plain() {
    let big = PAGE.replace("<ul id=users></ul>", &"<li>ünïcode row</li>\n".repeat(5000));
    let target = target(vec![
        (
            "/gz",
            Reply::new("text/html", gzip(big.as_bytes()))
                .header("content-encoding", "gzip")
                .chunked(7),
        ),
        (
            "/br",
            Reply::new("text/html", brotli(big.as_bytes()))
                .header("content-encoding", "br")
                .chunked(1000),
        ),
        (
            "/zstd",
            Reply::new("text/html", "opaque").header("content-encoding", "zstd"),
        ),
    ])
    .await;
    let (proxy, _bus) = proxy(target, true).await;
    let expected = with_tag(&big, "</head>", &script_tag(&proxy));
    for path in ["/gz", "/br"] {
        let got = get(
            &format!("{}{path}", proxy.url()),
            &[("accept-encoding", "gzip, br")],
        )
        .await;
        assert!(!got.headers.contains_key("content-encoding"), "{path}");
        assert_eq!(String::from_utf8(got.body).unwrap(), expected, "{path}");
    }
    // A coding the proxy cannot decode passes as it came, without the script.
    let got = get(&format!("{}/zstd", proxy.url()), &[]).await;
    assert_eq!(got.headers["content-encoding"], "zstd");
    assert_eq!(got.body, b"opaque");

    // Requests that may get HTML ask only for codings the proxy decodes.
    let navigation = [
        ("accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
        ("accept-encoding", "gzip, deflate, br, zstd"),
        ("if-none-match", "\"v0\""),
    ];
    let seen = get(&format!("{}/headers", proxy.url()), &navigation).await;
    let seen = String::from_utf8(seen.body).unwrap();
    assert!(
        seen.contains("accept-encoding: gzip, deflate, br\n"),
        "{seen}"
    );
    assert!(!seen.contains("if-none-match"), "{seen}");
    let image = [
        ("accept", "image/avif,image/webp"),
        ("accept-encoding", "gzip, zstd"),
        ("if-none-match", "\"v0\""),
    ];
    let seen = get(&format!("{}/headers", proxy.url()), &image).await;
    let seen = String::from_utf8(seen.body).unwrap();
    assert!(seen.contains("accept-encoding: gzip, zstd\n"), "{seen}");
    assert!(seen.contains("if-none-match: \"v0\"\n"), "{seen}");
    proxy.stop().await;
}

#[tokio::test]
async fn the_tag_carries_the_pages_csp_nonce() {
    let csp =
        "default-src 'self'; script-src 'nonce-r4nd0m+/=' 'strict-dynamic'; object-src 'none'";
    let target = target(vec![(
        "/",
        Reply::new("text/html", PAGE).header("content-security-policy", csp),
    )])
    .await;
    let (proxy, _bus) = proxy(target, true).await;
    let got = get(&proxy.url(), &[]).await;
    let tag = format!(
        r#"<script src="/__corral/client.js" nonce="r4nd0m+/=" data-k="{}"></script>"#,
        proxy.report_key()
    );
    assert_eq!(
        String::from_utf8(got.body).unwrap(),
        with_tag(PAGE, "</head>", &tag)
    );
    assert_eq!(
        got.headers["content-security-policy"], csp,
        "the policy is not weakened"
    );
    proxy.stop().await;
}

#[tokio::test]
async fn everything_else_passes_byte_for_byte() {
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR</head><body>"
        .iter()
        .copied()
        .cycle()
        .take(3000)
        .collect();
    let json_gz = gzip(br#"{"html":"<head></head>"}"#);
    let routes = vec![
        (
            "/api/users",
            Reply::new("application/json", r#"{"users":"<head></head>"}"#)
                .header("etag", "\"j\"")
                .chunked(7),
        ),
        (
            "/app.js",
            Reply::new("text/javascript", "document.write('<head></head>')")
                .header("content-length", "31"),
        ),
        ("/logo.png", Reply::new("image/png", png.clone())),
        (
            "/api/gz",
            Reply::new("application/json", json_gz.clone()).header("content-encoding", "gzip"),
        ),
        (
            "/partial",
            Reply::new("text/html", "<head></head>")
                .status(206)
                .header("content-range", "bytes 0-12/99"),
        ),
        (
            "/download",
            Reply::new("text/html", PAGE)
                .header("content-disposition", "attachment; filename=a.html"),
        ),
    ];
    let target = target(routes.clone()).await;
    let (proxy, _bus) = proxy(target, true).await;
    for (path, reply) in &routes {
        let got = get(
            &format!("{}{path}", proxy.url()),
            &[("accept-encoding", "gzip")],
        )
        .await;
        assert_eq!(got.status.as_u16(), reply.status, "{path}");
        assert_eq!(got.body, reply.body, "{path}");
        for (name, value) in &reply.headers {
            assert_eq!(got.headers[*name], value.as_str(), "{path}: {name}");
        }
    }
    proxy.stop().await;
}

#[tokio::test]
async fn no_tag_without_inject_on_head_or_not_modified() {
    let target = target(vec![
        (
            "/",
            Reply::new("text/html", PAGE)
                .header("etag", "\"v1\"")
                .header("content-length", &PAGE.len().to_string()),
        ),
        (
            "/same",
            Reply::new("text/html", "")
                .status(304)
                .header("etag", "\"v1\""),
        ),
    ])
    .await;
    let (plain, _bus) = proxy(target, false).await;
    let got = get(&plain.url(), &[("accept", "text/html")]).await;
    assert_eq!(got.body, PAGE.as_bytes());
    assert_eq!(got.headers["etag"], "\"v1\"");
    assert_eq!(got.headers["content-length"], PAGE.len().to_string());
    plain.stop().await;

    let (proxy, _bus) = self::proxy(target, true).await;
    let head = send(&proxy.url(), "HEAD", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.headers["etag"], "\"v1\"");
    assert_eq!(head.headers["content-length"], PAGE.len().to_string());
    let same = get(&format!("{}/same", proxy.url()), &[]).await;
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Limits: decompression bombs and a map named by many scripts.

/// `head` in one gzip member, then members of 1 MiB of spaces (gzip allows members back
/// to back) until `mib` MiB: about a KiB coded per MiB.
fn gzip_bomb(head: &[u8], mib: usize) -> Vec<u8> {
    let mut out = gzip(head);
    let member = gzip(&vec![b' '; 1 << 20]);
    for _ in 0..mib {
        out.extend_from_slice(&member);
    }
    out
}

/// The `proxy.error` events on `events` until none comes for a moment.
async fn proxy_errors(events: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut found = Vec::new();
    while let Ok(Ok(event)) = tokio::time::timeout(Duration::from_millis(300), events.recv()).await
    {
        if event.is(Kind::ProxyError) {
            found.push(event);
        }
    }
    found
}

/// An HTML page that decodes to over a hundred times its coded size is given up on
/// before its head goes out: the browser gets the target's bytes and headers untouched
/// (no tag), and one `proxy.error` says so, however often it is fetched.
#[tokio::test]
async fn a_gzip_bombed_page_passes_untouched_with_one_event() {
    let bomb = gzip_bomb(b"<!doctype html><html>", 16);
    let target = target(vec![(
        "/bomb",
        Reply::new("text/html", bomb.clone())
            .header("content-encoding", "gzip")
            .header("content-length", &bomb.len().to_string()),
    )])
    .await;
    let (proxy, bus) = proxy(target, true).await;
    let mut events = bus.subscribe();
    for _ in 0..3 {
        let got = get(
            &format!("{}/bomb", proxy.url()),
            &[("accept", "text/html"), ("accept-encoding", "gzip")],
        )
        .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.headers["content-encoding"], "gzip");
        assert_eq!(
            got.headers["content-length"].to_str().unwrap(),
            bomb.len().to_string()
        );
        assert!(got.body == bomb, "the coded bytes as the target sent them");
    }
    let errors = proxy_errors(&mut events).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].str("error").unwrap().contains("untouched"));
    assert_eq!(errors[0].str("path"), Some("/bomb"));
    proxy.stop().await;
}

/// A big page that compresses as HTML does still gets its tag, decoded in full.
#[tokio::test]
async fn a_large_compressed_page_still_gets_the_tag() {
    let doc = format!(
        "<html><head><title>t</title></head><body>{}</body></html>",
        (0..200_000)
            .map(|i| format!("<p>{i}</p>"))
            .collect::<String>()
    );
    let target = target(vec![(
        "/big",
        Reply::new("text/html", gzip(doc.as_bytes()))
            .header("content-encoding", "gzip")
            .chunked(16 * 1024),
    )])
    .await;
    let (proxy, _bus) = proxy(target, true).await;
    let got = get(&format!("{}/big", proxy.url()), &[("accept", "text/html")]).await;
    assert!(got.headers.get("content-encoding").is_none());
    let expected = doc.replace("</head>", &format!("{}</head>", script_tag(&proxy)));
    assert!(got.body == expected.as_bytes(), "{} bytes", got.body.len());
    proxy.stop().await;
}

/// A script served gzip-bombed is decoded only up to the script limit, then skipped for
/// mapping: the error keeps the browser's location, and one `proxy.error` says why.
#[tokio::test]
async fn a_gzip_bombed_script_is_skipped_for_mapping_with_one_event() {
    let target = target(vec![(
        "/bm.js",
        Reply::new("text/javascript", gzip_bomb(b"var a;\n", 24))
            .header("content-encoding", "gzip"),
    )])
    .await;
    let (proxy, bus) = proxy(target, true).await;
    let mut events = bus.subscribe();
    let origin = proxy.url();
    for v in 0..3 {
        let got = report(
            &proxy,
            &serde_json::json!({"page": format!("{origin}/"), "errors": [
                {"message": format!("m{v}"), "source": format!("{origin}/bm.js?v={v}"), "line": 1, "column": 2}
            ]}),
        )
        .await;
        assert_eq!(got.status, 204);
    }
    let mut errors = Vec::new();
    let mut mapped = 0;
    tokio::time::timeout(DEADLINE, async {
        while mapped < 3 {
            let event = events.recv().await.unwrap();
            if event.is(Kind::BrowserError) {
                assert!(
                    event.str("location").unwrap().contains("/bm.js?v="),
                    "{event:?}"
                );
                mapped += 1;
            } else if event.is(Kind::ProxyError) {
                errors.push(event);
            }
        }
    })
    .await
    .expect("three browser errors");
    errors.extend(proxy_errors(&mut events).await);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .str("error")
            .unwrap()
            .contains("script over 16 MiB")
    );
    assert_eq!(errors[0].str("path"), Some("/bm.js?v=0"));
    proxy.stop().await;
}

/// Scripts that differ only in their query (`bm.js?v=N`) and name one map share one
/// decoded map: the map is fetched once, not once per query.
#[tokio::test]
async fn scripts_differing_in_query_share_one_decoded_map() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let map = Bytes::from(bundle_map());
    let map_fetches = Arc::new(AtomicUsize::new(0));
    let counted = map_fetches.clone();
    let target = common::Target::start(move |req: Request<Incoming>| {
        let (map, counted) = (map.clone(), counted.clone());
        async move {
            if req.uri().path() == "/assets/bundle.js.map" {
                counted.fetch_add(1, Ordering::SeqCst);
                return common::response(200, "application/json", map);
            }
            common::response(
                200,
                "text/javascript",
                "var a;\n//# sourceMappingURL=bundle.js.map\n",
            )
        }
    })
    .await;
    let (proxy, bus) = proxy(target.addr, true).await;
    let mut events = bus.subscribe();
    let origin = proxy.url();
    let errors: Vec<_> = (0..16)
        .map(|v| serde_json::json!({"message": format!("m{v}"), "source": format!("{origin}/assets/bundle.js?v={v}"), "line": 1, "column": 4821}))
        .collect();
    let got = report(
        &proxy,
        &serde_json::json!({"page": format!("{origin}/"), "errors": errors}),
    )
    .await;
    assert_eq!(got.status, 204);
    for _ in 0..16 {
        let event = next_browser_error(&mut events).await;
        assert_eq!(
            event.str("location"),
            Some("src/components/UserList.tsx:28:12")
        );
    }
    assert_eq!(map_fetches.load(Ordering::SeqCst), 1);
    proxy.stop().await;
}
