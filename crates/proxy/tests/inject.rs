//! The dev proxy's page side through a real proxy on loopback: the script it serves, the
//! reports it takes, source-mapped locations, and the script tag in HTML documents.

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

const TAG: &str = r#"<script src="/__corral/client.js"></script>"#;

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
                    let reply = routes
                        .iter()
                        .find(|(path, _)| *path == req.uri().path())
                        .map(|(_, reply)| reply.response())
                        .unwrap_or_else(|| {
                            let mut r = Reply::new("text/plain", "not found").response();
                            *r.status_mut() = StatusCode::NOT_FOUND;
                            r
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
