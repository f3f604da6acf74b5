//! The headers a traffic entry keeps, over real sockets: the request's as the browser
//! sent them and the response's as the target answered, in order, bounded, with
//! credentials redacted.

mod common;

use common::*;
use corral_proxy::headers::{CUT_NAME, MAX_BYTES, MAX_HEADERS};
use corral_proxy::traffic::TrafficEntry;
use corral_proxy::{ProxyBody, full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pairs(h: &corral_proxy::headers::Headers) -> Vec<(String, String)> {
    h.iter()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

/// The one entry of `proxy`'s log, once recorded.
async fn only_entry(proxy: &corral_proxy::Proxy) -> TrafficEntry {
    eventually("the entry", || proxy.traffic().total() == 1).await;
    let mut entries = proxy.traffic().query(&Default::default());
    assert_eq!(entries.len(), 1);
    entries.pop().unwrap()
}

/// A target that answers with its own headers in a set order, a hop-by-hop one and an
/// `X-Corral-Request` of its own among them, and a `Location` at itself.
async fn with_headers(req: Request<Incoming>) -> Response<ProxyBody> {
    let host = req.headers()["host"].to_str().unwrap().to_owned();
    let mut resp = Response::new(full("ok"));
    let h = resp.headers_mut();
    h.append("x-first", HeaderValue::from_static("1"));
    h.append("content-type", HeaderValue::from_static("text/plain"));
    h.append("x-corral-request", HeaderValue::from_static("the-targets"));
    h.append("x-second", HeaderValue::from_static("2"));
    h.append("x-second", HeaderValue::from_static("2b"));
    h.append("connection", HeaderValue::from_static("x-hop"));
    h.append("x-hop", HeaderValue::from_static("hop"));
    h.append(
        "location",
        HeaderValue::from_str(&format!("http://{host}/next")).unwrap(),
    );
    resp
}

#[tokio::test]
async fn headers_are_recorded_both_ways_in_order_before_the_proxys_rewrites() {
    let target = Target::start(with_headers).await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let req = conn
        .request("GET", "/a?b=1")
        .header("accept", "text/html")
        .header("x-custom", "one")
        .header("x-custom", "two")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "browser's hop")
        .header("x-latin1", HeaderValue::from_bytes(b"caf\xe9").unwrap())
        .body(full(""))
        .unwrap();
    let reply = conn.fetch(req).await;
    assert_eq!(reply.status, 200);
    let ours = reply.header("x-corral-request").unwrap().to_owned();
    assert_ne!(ours, "the-targets");
    assert!(
        reply
            .header("location")
            .unwrap()
            .contains(&proxy.addr().to_string())
    );

    let e = only_entry(&proxy).await;
    // The browser's: its Host (not the target's), its hop-by-hop headers, none of the
    // X-Forwarded-* or X-Request-Id the proxy added.
    let browser_host = proxy.addr().to_string();
    assert_eq!(
        pairs(&e.request_headers),
        owned(&[
            ("host", &browser_host),
            ("accept", "text/html"),
            ("x-custom", "one"),
            ("x-custom", "two"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "browser's hop"),
            ("x-latin1", "caf\u{fffd}"),
        ])
    );
    // The target's: its own X-Corral-Request and Location, its hop-by-hop headers, and
    // what its server added (content-length, date) where it wrote them.
    let target_host = target.addr.to_string();
    let got = pairs(&e.response_headers);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    let expected_first = owned(&[
        ("x-first", "1"),
        ("content-type", "text/plain"),
        ("x-corral-request", "the-targets"),
        ("x-second", "2"),
        ("x-second", "2b"),
        ("connection", "x-hop"),
        ("x-hop", "hop"),
        ("location", &format!("http://{target_host}/next")),
    ]);
    assert_eq!(got[..expected_first.len()], expected_first, "{got:?}");
    assert!(names.contains(&"content-length"), "{names:?}");
    assert!(names.contains(&"date"), "{names:?}");
    assert!(
        !got.iter().any(|(_, v)| v == &ours),
        "the proxy's id is not the target's"
    );

    // In the entry's JSON as [name, value] pairs.
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(
        json["request_headers"][1],
        serde_json::json!(["accept", "text/html"])
    );
    assert_eq!(
        json["response_headers"][0],
        serde_json::json!(["x-first", "1"])
    );
    assert_eq!(
        serde_json::from_value::<TrafficEntry>(json.clone()).unwrap(),
        e
    );
    // Not for `get_errors`: its raw JSON is the entry without them.
    let raw = serde_json::to_value(e.without_headers()).unwrap();
    assert!(raw.get("request_headers").is_none() && raw.get("response_headers").is_none());
    let mut rest = json;
    rest.as_object_mut().unwrap().remove("request_headers");
    rest.as_object_mut().unwrap().remove("response_headers");
    assert_eq!(raw, rest);
    proxy.stop().await;
}

/// Secret values, each with a marker that must appear nowhere in what is recorded.
const MARK: &str = "zq9XV";

fn secret(n: u32) -> String {
    format!("value-{n}-{MARK}-end")
}

#[tokio::test]
async fn credential_headers_are_redacted_and_their_values_are_nowhere_in_the_entry() {
    let target = Target::start(|_req| async {
        let mut resp = Response::new(full("fine"));
        let h = resp.headers_mut();
        h.append(
            "set-cookie",
            HeaderValue::from_str(&format!(
                "sid={}; Path=/; HttpOnly; SameSite=Lax",
                secret(20)
            ))
            .unwrap(),
        );
        h.append(
            "set-cookie",
            HeaderValue::from_str(&format!("csrftoken={}; Max-Age=60", secret(21))).unwrap(),
        );
        h.append("x-session-id", HeaderValue::from_str(&secret(22)).unwrap());
        h.append(
            "x-upstream-token",
            HeaderValue::from_str(&secret(23)).unwrap(),
        );
        h.append("x-plain", HeaderValue::from_static("visible"));
        resp
    })
    .await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let shaped = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1");
    let mut req = conn.request("GET", "/account");
    let secrets = [
        ("authorization", format!("Bearer {}", secret(1))),
        ("proxy-authorization", format!("Basic {}", secret(2))),
        ("cookie", format!("sid={}; theme={}", secret(3), secret(4))),
        ("x-csrf-token", secret(5)),
        ("x-xsrf-token", secret(6)),
        ("x-api-key", secret(7)),
        ("apikey", secret(8)),
        ("x-client-secret", secret(9)),
        ("x-session", secret(10)),
        ("x-password", secret(11)),
        ("x-auth-token", secret(12)),
    ];
    for (name, value) in &secrets {
        req = req.header(*name, value.as_str());
    }
    let req = req
        .header("x-debug", format!("token {shaped} here"))
        .body(full(""))
        .unwrap();
    assert_eq!(conn.fetch(req).await.status, 200);

    let e = only_entry(&proxy).await;
    let json = serde_json::to_string(&e).unwrap();
    let debug = format!("{e:?}");
    for text in [&json, &debug] {
        assert!(!text.contains(MARK), "a secret was recorded: {text}");
        assert!(
            !text.contains(&shaped),
            "a shaped credential was recorded: {text}"
        );
    }
    let req_h = &e.request_headers;
    // The whole value's length: "Bearer " + the secret.
    let n = secrets[0].1.len();
    assert_eq!(
        req_h.get("authorization"),
        Some(format!("[redacted, {n} bytes]").as_str())
    );
    for (name, value) in &secrets[3..] {
        let expected = format!("[redacted, {} bytes]", value.len());
        assert_eq!(req_h.get(name), Some(expected.as_str()), "{name}");
    }
    assert!(
        req_h
            .get("proxy-authorization")
            .unwrap()
            .starts_with("[redacted, ")
    );
    assert_eq!(
        req_h.get("cookie"),
        Some("sid=[redacted]; theme=[redacted]")
    );
    assert_eq!(req_h.get("x-debug"), Some("token ghp_*** here"));

    let resp_h = pairs(&e.response_headers);
    let cookies: Vec<&str> = resp_h
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        cookies,
        [
            "sid=[redacted]; Path=/; HttpOnly; SameSite=Lax",
            "csrftoken=[redacted]; Max-Age=60"
        ]
    );
    assert_eq!(
        e.response_headers.get("x-session-id"),
        Some(format!("[redacted, {} bytes]", secret(22).len()).as_str())
    );
    assert!(
        e.response_headers
            .get("x-upstream-token")
            .unwrap()
            .starts_with("[redacted")
    );
    assert_eq!(e.response_headers.get("x-plain"), Some("visible"));
    proxy.stop().await;
}

/// A GET with `extra` headers `x-hNNN: v` (and `Host`), written by hand: the status
/// line of the answer, read to its end (the proxy closes nothing; the head is enough).
async fn raw_get(addr: std::net::SocketAddr, extra: &[(String, String)]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!("GET /many HTTP/1.1\r\nhost: {addr}\r\n");
    for (n, v) in extra {
        head += &format!("{n}: {v}\r\n");
    }
    head += "connection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    within("the answer", stream.read_to_end(&mut answer))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or("").to_owned()
}

fn numbered(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("x-h{i:03}"), format!("v{i}")))
        .collect()
}

#[tokio::test]
async fn many_headers_or_a_huge_one_are_cut_to_the_bounds_and_marked() {
    let target = Target::start(|req: Request<Incoming>| async move {
        let mut resp = Response::new(full("ok"));
        let h = resp.headers_mut();
        match req.uri().path() {
            // As many as hyper's client takes from a target (100), Date and
            // Content-Length included.
            "/many-back" => {
                for (n, v) in numbered(97) {
                    h.append(
                        HeaderName::from_bytes(n.as_bytes()).unwrap(),
                        HeaderValue::from_str(&v).unwrap(),
                    );
                }
            }
            "/huge-back" => {
                h.append(
                    "x-huge",
                    HeaderValue::from_str(&"b".repeat(20 * 1024)).unwrap(),
                );
            }
            _ => {}
        }
        resp
    })
    .await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let addr = proxy.addr();

    // 200 headers: hyper itself refuses the request (over its 100), before the proxy
    // sees it, so nothing is recorded.
    let status = raw_get(addr, &numbered(200)).await;
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");
    // 95 + host + connection = 97 headers (99 at the target, with the proxy's three
    // less the hop-by-hop one, under its 100): 64 kept, the rest counted.
    let status = raw_get(addr, &numbered(95)).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    eventually("the entry", || proxy.traffic().total() == 1).await;
    let e = proxy.traffic().query(&Default::default()).pop().unwrap();
    let got = pairs(&e.request_headers);
    assert_eq!(got.len(), MAX_HEADERS + 1);
    assert_eq!(got[0].0, "host");
    assert_eq!(got[63], ("x-h062".to_owned(), "v62".to_owned()));
    assert_eq!(
        got[64],
        (CUT_NAME.to_owned(), "33 more headers not kept".to_owned())
    );

    // One header of 20 KiB: its value is cut where the 8 KiB run out, and marked.
    let huge = "a".repeat(20 * 1024);
    let status = raw_get(addr, &[("x-huge".into(), huge.clone())]).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    eventually("the entry", || proxy.traffic().total() == 2).await;
    let e = proxy.traffic().query(&Default::default()).pop().unwrap();
    let got = pairs(&e.request_headers);
    let (name, value) = &got[1];
    assert_eq!(name, "x-huge");
    let kept = MAX_BYTES - "host".len() - got[0].1.len() - "x-huge".len();
    assert_eq!(
        *value,
        format!("{}… [{} bytes not kept]", &huge[..kept], huge.len() - kept)
    );
    assert_eq!(
        got[2],
        (CUT_NAME.to_owned(), "1 more header not kept".to_owned()),
        "connection: close came after it"
    );
    assert!(e.request_headers.text_len() <= MAX_BYTES + 64);

    // The same bounds on the way back.
    let mut conn = Conn::open(addr).await;
    assert_eq!(conn.get("/many-back").await.status, 200);
    eventually("the entry", || proxy.traffic().total() == 3).await;
    let e = proxy.traffic().query(&Default::default()).pop().unwrap();
    let got = pairs(&e.response_headers);
    assert_eq!(got.len(), MAX_HEADERS + 1, "{got:?}");
    assert_eq!(got[0], ("x-h000".to_owned(), "v0".to_owned()));
    assert_eq!(
        got[64],
        (CUT_NAME.to_owned(), "35 more headers not kept".to_owned())
    );

    assert_eq!(conn.get("/huge-back").await.status, 200);
    eventually("the entry", || proxy.traffic().total() == 4).await;
    let e = proxy.traffic().query(&Default::default()).pop().unwrap();
    let got = pairs(&e.response_headers);
    assert_eq!(got[0].0, "x-huge");
    assert!(
        got[0].1.ends_with(" bytes not kept]"),
        "{}",
        &got[0].1[8000..]
    );
    assert!(e.response_headers.text_len() <= MAX_BYTES + 64);
    assert_eq!(got.last().unwrap().0, CUT_NAME);
    proxy.stop().await;
}

#[tokio::test]
async fn a_transport_error_has_the_requests_headers_and_no_response_headers() {
    // A port that was just free: nothing listens there, so connecting is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (proxy, _bus) = proxy(&format!("http://127.0.0.1:{port}")).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let req = conn
        .request("GET", "/down")
        .header("x-custom", "1")
        .body(full(""))
        .unwrap();
    let reply = conn.fetch(req).await;
    assert_eq!(reply.status, 502);
    assert!(reply.header("x-corral-request").is_some());

    let e = only_entry(&proxy).await;
    assert_eq!(e.error.as_deref(), Some("connection refused"));
    assert!(e.response_headers.is_empty(), "{:?}", e.response_headers);
    assert_eq!(e.request_headers.get("x-custom"), Some("1"));
    let json = serde_json::to_value(&e).unwrap();
    assert!(json.get("response_headers").is_none(), "{json}");
    assert!(json.get("request_headers").is_some(), "{json}");
    proxy.stop().await;
}
