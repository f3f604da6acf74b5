//! What ties the proxy's records together, over real sockets: each exchange's request id
//! (the target's `X-Request-Id`, the browser's `X-Corral-Request`, the id a page's report
//! echoes), page loads, stacks mapped frame by frame, and logs that outlive a proxy's run.

mod common;

use bytes::Bytes;
use common::*;
use corral_events::{EventBus, Kind};
use corral_proxy::browser::{BrowserEntry, BrowserQuery};
use corral_proxy::traffic::{TrafficEntry, TrafficQuery};
use corral_proxy::{Proxies, Proxy, ProxySpec, full};
use hyper::Request;
use hyper::body::Incoming;
use serde_json::{Value, json};
use sourcemap::SourceMapBuilder;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A target that answers each request with the `X-Request-Id` it got (or `-`), and 500
/// under `/fail`; with an `X-Corral-Request` of its own, which must not reach the browser.
async fn id_target() -> Target {
    Target::start(|req: Request<Incoming>| async move {
        let seen = req
            .headers()
            .get("x-request-id")
            .map_or("-".to_owned(), |v| {
                String::from_utf8_lossy(v.as_bytes()).into_owned()
            });
        let status = if req.uri().path().starts_with("/fail") {
            500
        } else {
            200
        };
        let mut resp = response(status, "text/plain", seen);
        resp.headers_mut()
            .insert("x-corral-request", "deadbeef-1".parse().unwrap());
        resp
    })
    .await
}

/// The newest traffic entry once `n` are recorded.
async fn nth_entry(proxy: &Proxy, n: u64) -> TrafficEntry {
    eventually("the exchange recorded", || proxy.traffic().total() >= n).await;
    proxy
        .traffic()
        .query(&TrafficQuery::default())
        .pop()
        .unwrap()
}

fn is_id_shape(id: &str) -> bool {
    let Some((prefix, n)) = id.split_once('-') else {
        return false;
    };
    prefix.len() == 8
        && prefix
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
}

#[tokio::test]
async fn every_request_has_an_id_the_target_the_browser_and_the_log_agree_on() {
    let target = id_target().await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let mut ids = Vec::new();
    for (i, path) in ["/a", "/fail", "/b?x=1"].into_iter().enumerate() {
        let reply = conn.get(path).await;
        let id = reply.header("x-corral-request").unwrap().to_owned();
        assert_eq!(
            reply.all("x-corral-request"),
            [id.as_str()],
            "one, the proxy's, not the target's own"
        );
        assert!(is_id_shape(&id), "{id}");
        assert_eq!(reply.text(), id, "the target got the same id");
        let entry = nth_entry(&proxy, i as u64 + 1).await;
        assert_eq!(entry.request_id, id);
        assert_eq!(entry.client_request_id, None);
        assert_eq!(entry.upstream_request_id(), id);
        assert!(proxy.traffic().is_own_request_id(&id));
        ids.push(id);
    }
    let prefix = proxy.traffic().request_id_prefix().to_owned();
    assert_eq!(
        ids,
        (1..=3).map(|n| format!("{prefix}-{n}")).collect::<Vec<_>>()
    );
    // Another proxy's ids are its own: not guessable from this one's.
    let (other, _bus) = proxy_with(&target.url(), |_| {}).await;
    let theirs = get(other.addr(), "/a").await;
    let theirs = theirs.header("x-corral-request").unwrap();
    assert!(!theirs.starts_with(&prefix), "{theirs} vs {prefix}");
    assert!(!proxy.traffic().is_own_request_id(theirs));
    assert!(!other.traffic().is_own_request_id(&ids[0]));
    // Only ids handed out, written as they were. (A prefix of digits alone, one in
    // 43, has no upper case: then that forgery is the real id and is left out.)
    let upper = format!("{}-1", prefix.to_uppercase());
    let forgeries = [
        format!("{prefix}-4"),
        format!("{prefix}-01"),
        format!("{prefix}-0"),
        format!("{prefix}-"),
        format!("{prefix}-1 "),
        upper,
        prefix.clone(),
        String::new(),
    ];
    for forged in forgeries.into_iter().filter(|f| *f != ids[0]) {
        assert!(!proxy.traffic().is_own_request_id(&forged), "{forged:?}");
    }
    // The JSON of an entry has the id (`corral proxy --log --json` only gains fields).
    let json = serde_json::to_value(nth_entry(&proxy, 3).await).unwrap();
    assert_eq!(json["request_id"], ids[2]);
    assert!(json.get("client_request_id").is_none());
    assert!(json.get("document").is_none());
    other.stop().await;
    proxy.stop().await;
}

#[tokio::test]
async fn a_requests_own_id_reaches_the_target_untouched_and_never_the_browser() {
    let target = id_target().await;
    let (proxy, _bus) = proxy(&target.url()).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let hostile = "abc\"><script>alert(1)</script>\té".to_owned();
    let long = "r".repeat(300);
    for (n, own) in [hostile.as_str(), long.as_str()].into_iter().enumerate() {
        let req = conn
            .request("GET", "/a")
            .header("x-request-id", own)
            .body(full(""))
            .unwrap();
        let reply = conn.fetch(req).await;
        assert_eq!(reply.text(), own, "the target got the request's own id");
        let id = reply.header("x-corral-request").unwrap();
        assert!(
            is_id_shape(id),
            "the proxy's own id, not the request's: {id:?}"
        );
        for (name, value) in &reply.headers {
            assert!(
                !String::from_utf8_lossy(value.as_bytes()).contains(&own[..3]),
                "{name} echoes the request's id"
            );
        }
        let entry = nth_entry(&proxy, n as u64 + 1).await;
        assert_eq!(entry.request_id, id);
        let kept = entry.client_request_id.as_deref().unwrap();
        assert_eq!(kept, &own[..own.len().min(200)]);
        assert_eq!(entry.upstream_request_id(), kept);
    }
    proxy.stop().await;
}

#[tokio::test]
async fn a_502_carries_the_id_of_its_entry() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (proxy, _bus) = proxy(&format!("http://127.0.0.1:{port}")).await;
    let reply = get(proxy.addr(), "/api").await;
    assert_eq!(reply.status, 502);
    let entry = nth_entry(&proxy, 1).await;
    assert!(entry.error.is_some());
    assert_eq!(
        reply.header("x-corral-request"),
        Some(entry.request_id.as_str())
    );
    proxy.stop().await;
}

const PAGE: &str = "<!doctype html><html><head><title>t</title></head><body>hi</body></html>";

/// A target of documents and other things, for which of its responses are page loads.
async fn documents_target() -> Target {
    Target::start(|req: Request<Incoming>| async move {
        match req.uri().path() {
            "/" | "/missing" => {
                let status = if req.uri().path() == "/" { 200 } else { 404 };
                response(status, "text/html; charset=utf-8", PAGE)
            }
            "/empty" => response(200, "text/html", ""),
            "/data" => response(200, "application/json", "{}"),
            "/bomb" => {
                // A small gzip document that decodes to far over 100 times its size: it
                // is passed untouched, without the script, after it was read whole.
                use std::io::Write;
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                gz.write_all(b"<html><head>").unwrap();
                gz.write_all(&vec![b' '; 8 << 20]).unwrap();
                let mut resp = response(200, "text/html", gz.finish().unwrap());
                resp.headers_mut()
                    .insert("content-encoding", "gzip".parse().unwrap());
                resp
            }
            "/truncated" => {
                // A gzip document cut short, with no place for the tag before its end: it
                // fails to decode only there, after it was read (and its exchange
                // recorded) whole; it passes untouched.
                use std::io::Write;
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                gz.write_all(b"<html><head><title>t</title>").unwrap();
                let mut coded = gz.finish().unwrap();
                coded.truncate(coded.len() - 6);
                let mut resp = response(200, "text/html", coded);
                resp.headers_mut()
                    .insert("content-encoding", "gzip".parse().unwrap());
                resp
            }
            _ => response(404, "text/plain", "no"),
        }
    })
    .await
}

#[tokio::test]
async fn page_loads_are_the_documents_the_script_went_into() {
    let target = documents_target().await;
    let (proxy, _bus) = proxy_with(&target.url(), |s| s.inject = true).await;
    let mut conn = Conn::open(proxy.addr()).await;
    let mut expected = Vec::new();
    for (method, path, document) in [
        ("GET", "/", true),
        ("GET", "/missing", true),
        ("GET", "/data", false),
        ("GET", "/empty", false),
        ("HEAD", "/", false),
        ("GET", "/bomb", false),
        ("GET", "/truncated", false),
        ("GET", "/other", false),
    ] {
        let req = conn
            .request(method, path)
            .header("accept", "text/html")
            .header("accept-encoding", "gzip")
            .body(full(""))
            .unwrap();
        let reply = conn.fetch(req).await;
        let injected = reply
            .body
            .windows(17)
            .any(|w| w == b"/__corral/client.".as_slice());
        assert_eq!(injected, document, "{method} {path}");
        expected.push((method.to_owned(), path.to_owned(), document));
    }
    eventually("every exchange recorded", || proxy.traffic().total() == 8).await;
    let seen: Vec<(String, String, bool)> = proxy
        .traffic()
        .query(&TrafficQuery::default())
        .into_iter()
        .map(|e| (e.method, e.url, e.document))
        .collect();
    assert_eq!(seen, expected);
    let json = serde_json::to_value(&proxy.traffic().query(&TrafficQuery::default())[0]).unwrap();
    assert_eq!(json["document"], true);
    proxy.stop().await;

    // Without the script there are no page loads to tell.
    let (plain, _bus) = proxy_with(&target.url(), |s| s.inject = false).await;
    get(plain.addr(), "/").await;
    assert!(!nth_entry(&plain, 1).await.document);
    plain.stop().await;
}

/// The key in the tag the proxy injected into its page.
async fn page_key(proxy: &Proxy) -> String {
    let page = get(proxy.addr(), "/").await;
    let text = page.text();
    text.split_once(r#"data-k=""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(k, _)| k.to_owned())
        .unwrap_or_else(|| panic!("no key in the tag: {text}"))
}

async fn post_errors(proxy: &Proxy, body: &Value) -> u16 {
    let mut conn = Conn::open(proxy.addr()).await;
    let req = conn
        .request("POST", "/__corral/errors")
        .header("origin", proxy.url())
        .header("content-type", "application/json")
        .body(full(body.to_string()))
        .unwrap();
    conn.fetch(req).await.status.as_u16()
}

/// The browser log once it holds `n` entries.
async fn browser_entries(proxy: &Proxy, n: usize) -> Vec<BrowserEntry> {
    eventually("the reports recorded", || {
        proxy.browser().query(&BrowserQuery::default()).len() >= n
    })
    .await;
    proxy.browser().query(&BrowserQuery::default())
}

#[tokio::test]
async fn a_report_keeps_only_a_request_id_this_proxy_handed_out() {
    let target = documents_target().await;
    let (proxy, bus) = proxy_with(&target.url(), |s| s.inject = true).await;
    let (other, _other_bus) = proxy_with(&target.url(), |s| s.inject = true).await;
    let mut events = bus.subscribe();
    let key = page_key(&proxy).await;
    let ours = nth_entry(&proxy, 1).await.request_id;
    get(other.addr(), "/").await;
    let theirs = nth_entry(&other, 1).await.request_id;
    let prefix = proxy.traffic().request_id_prefix();
    let claims = [
        json!(ours),
        json!(theirs),
        json!(format!("{prefix}-999")),
        json!(format!("{prefix}-01")),
        json!("<script>"),
        json!({"id": ours}),
        json!("x".repeat(100_000)),
        Value::Null,
    ];
    let errors: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, request)| {
            json!({"kind": "fetch", "message": format!("GET /api/{i} → 500"), "request": request})
        })
        .collect();
    let body = json!({"key": key, "page": format!("{}/", proxy.url()), "errors": errors});
    assert_eq!(post_errors(&proxy, &body).await, 204);
    let entries = browser_entries(&proxy, claims.len()).await;
    let requests: Vec<Option<&str>> = entries.iter().map(|e| e.request.as_deref()).collect();
    let mut expected = vec![None; claims.len()];
    expected[0] = Some(ours.as_str());
    assert_eq!(requests, expected, "only our own id, every error kept");
    // The event says it too, and the entry's JSON.
    let first = std::iter::from_fn(|| events.try_recv().ok())
        .find(|e| e.is(Kind::BrowserError))
        .unwrap();
    assert_eq!(first.str("request"), Some(ours.as_str()));
    let json = serde_json::to_value(&entries[0]).unwrap();
    assert_eq!(json["request"], ours.as_str());
    assert!(
        serde_json::to_value(&entries[1])
            .unwrap()
            .get("request")
            .is_none()
    );
    other.stop().await;
    proxy.stop().await;
}

#[tokio::test]
async fn logs_outlive_a_stop_and_go_on_under_the_same_name() {
    let target = documents_target().await;
    let bus = EventBus::new(1024);
    let proxies = Proxies::new(bus);
    let mut spec = ProxySpec::new("web", &target.url(), "127.0.0.1:0");
    spec.inject = true;
    let first = proxies.start(spec.clone()).await.unwrap();
    let key = page_key(&first).await;
    get(first.addr(), "/data").await;
    let body = json!({"key": key, "page": format!("{}/", first.url()),
                      "errors": [{"kind": "error", "message": "before the stop"}]});
    assert_eq!(post_errors(&first, &body).await, 204);
    browser_entries(&first, 1).await;
    nth_entry(&first, 2).await;
    let first_started = first.started_at();
    let first_url = first.url();
    drop(first);
    assert!(proxies.stop("web").await);

    // Stopped: still there, and said to be stopped.
    let logs = proxies.logs();
    assert_eq!(logs.len(), 1);
    let stopped = &logs[0];
    assert_eq!(stopped.name, "web");
    assert!(!stopped.running);
    assert!(stopped.stopped_at.is_some());
    assert_eq!(stopped.started_at, first_started);
    assert_eq!(stopped.target, target.url());
    assert_eq!(stopped.url, first_url);
    assert_eq!(stopped.traffic.total(), 2);
    let browser = stopped.browser.query(&BrowserQuery::default());
    assert_eq!(browser[0].message, "before the stop");

    // Started again: the same logs, written on; ids go on from where they were.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let second = proxies.start(spec.clone()).await.unwrap();
    assert!(Arc::ptr_eq(&stopped.traffic, &proxies.logs()[0].traffic));
    assert_eq!(second.row().requests, 0, "the row counts this run");
    let key = page_key(&second).await;
    let entry = nth_entry(&second, 3).await;
    assert_eq!(entry.id, 3);
    assert!(entry.request_id.ends_with("-3"), "{}", entry.request_id);
    let body = json!({"key": key, "page": format!("{}/", second.url()),
                      "errors": [{"kind": "error", "message": "after the restart"}]});
    assert_eq!(post_errors(&second, &body).await, 204);
    let both = browser_entries(&second, 2).await;
    let messages: Vec<(u64, &str)> = both.iter().map(|e| (e.id, e.message.as_str())).collect();
    assert_eq!(messages, [(1, "before the stop"), (2, "after the restart")]);
    let now = proxies.logs_of("web").unwrap();
    assert!(now.running && now.stopped_at.is_none());
    assert!(now.started_at > first_started);
    assert_eq!(second.row().requests, 1);
    assert_eq!(second.row().browser_errors, 1);

    // The logs of at most STOPPED_LOGS_KEPT stopped proxies are kept, the oldest go.
    for i in 0..=corral_proxy::STOPPED_LOGS_KEPT {
        let name = format!("adhoc{i:02}");
        proxies
            .start(ProxySpec::new(&name, &target.url(), "127.0.0.1:0"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(proxies.stop(&name).await);
    }
    let names: Vec<String> = proxies.logs().into_iter().map(|l| l.name).collect();
    assert_eq!(names.len(), corral_proxy::STOPPED_LOGS_KEPT + 1);
    assert!(
        names.contains(&"web".to_owned()),
        "a running proxy's logs stay"
    );
    assert!(
        !names.contains(&"adhoc00".to_owned()),
        "the oldest stopped went"
    );
    assert!(names.contains(&"adhoc01".to_owned()));
    proxies.stop_all().await;
    assert!(proxies.logs().iter().all(|l| !l.running));
    assert!(proxies.logs_of("web").is_some());
}

/// A map of a generated script whose line `g` (0-based) is `source`'s line `o`, column
/// `c` for column `c`, named as the generated line starts.
fn line_map(file: &str, source: &str, lines: &[(u32, u32)]) -> Vec<u8> {
    let mut b = SourceMapBuilder::new(Some(file));
    let src = b.add_source(source);
    for &(g, o) in lines {
        for c in 0..200 {
            b.add_raw(g, c, o, c, Some(src), None, false);
        }
    }
    let mut out = Vec::new();
    b.into_sourcemap().to_writer(&mut out).unwrap();
    out
}

/// Standard base64, padded (for a `data:` URL).
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// A dev server's scripts: `/src/UserList.tsx?t=…` (Vite's transformed module, its map
/// inline: generated line 10 is the original's line 4, 11 is 5), and a pre-bundled
/// package `/node_modules/.vite/deps/react-dom.js?v=…` whose map (beside it) points
/// into `node_modules/react-dom/cjs/react-dom.development.js`; each script numbered
/// `/src/many/N.js` has no map. `/slow.js` never answers. With the paths asked.
async fn scripts_target() -> (Target, Arc<Mutex<Vec<String>>>) {
    let user_map = line_map("UserList.tsx", "UserList.tsx", &[(9, 3), (10, 4)]);
    let inline = base64(&user_map);
    let user_js = Bytes::from(format!(
        "{}//# sourceMappingURL=data:application/json;base64,{inline}\n",
        "\n".repeat(12)
    ));
    let dom_map = Bytes::from(line_map(
        "react-dom.js",
        "../../react-dom/cjs/react-dom.development.js",
        &[(99, 16000), (199, 20000)],
    ));
    let dom_js = Bytes::from("\n//# sourceMappingURL=react-dom.js.map\n");
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let target = Target::start(move |req: Request<Incoming>| {
        let path = req
            .uri()
            .path_and_query()
            .map_or(String::new(), |p| p.to_string());
        seen.lock().unwrap().push(path.clone());
        let (user_js, dom_js, dom_map) = (user_js.clone(), dom_js.clone(), dom_map.clone());
        async move {
            let bare = path.split('?').next().unwrap_or("");
            match bare {
                "/" => response(200, "text/html", PAGE),
                "/src/UserList.tsx" => response(200, "text/javascript", user_js),
                "/node_modules/.vite/deps/react-dom.js" => response(200, "text/javascript", dom_js),
                "/node_modules/.vite/deps/react-dom.js.map" => {
                    response(200, "application/json", dom_map)
                }
                "/slow.js" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    response(200, "text/javascript", "")
                }
                p if p.starts_with("/src/many/") => response(200, "text/javascript", "var x;\n"),
                _ => response(404, "text/plain", "no"),
            }
        }
    })
    .await;
    (target, asked)
}

#[tokio::test]
async fn stacks_are_mapped_frame_by_frame_and_located_in_the_apps_code() {
    let (target, asked) = scripts_target().await;
    let (proxy, _bus) = proxy_with(&target.url(), |s| s.inject = true).await;
    let key = page_key(&proxy).await;
    let o = proxy.url();
    // React 18's console.error after a render error: called from react-dom (in the
    // pre-bundled package), with a call stack of react-dom's alone (its commit runs from
    // the scheduler), the component stack in the message.
    let dom = format!("{o}/node_modules/.vite/deps/react-dom.js?v=ab12cd34");
    let user = format!("{o}/src/UserList.tsx?t=1712345678");
    let message = format!(
        "The above error occurred in the <UserList> component:\n\n    at UserList \
         ({user}:11:17)\n    at ul\n    at App ({o}/src/App.tsx:3:3)\n\nConsider adding an \
         error boundary to your tree to customize error handling behavior."
    );
    let console_stack = format!(
        "Error\n    at logCapturedError ({dom}:200:9)\n    at commitRoot ({dom}:100:5)\n    \
         at https://cdn.example/scheduler.js:1:2"
    );
    // The TypeError itself: thrown in the component, through react-dom.
    let error_stack = format!(
        "TypeError: Cannot read properties of undefined (reading 'map')\n    at UserList \
         ({user}:11:17)\n    at renderWithHooks ({dom}:100:20)\n    at {o}/slow.js:1:1"
    );
    let body = json!({"key": key, "page": format!("{o}/"), "errors": [
        {"kind": "console.error", "message": message, "stack": console_stack,
         "source": dom, "line": 200, "column": 9},
        {"kind": "error", "message": "Uncaught TypeError: Cannot read properties of undefined (reading 'map')",
         "stack": error_stack, "source": user, "line": 11, "column": 17},
    ]});
    let started = Instant::now();
    assert_eq!(post_errors(&proxy, &body).await, 204);
    let entries = browser_entries(&proxy, 2).await;
    let waited = started.elapsed();

    let console = &entries[0];
    assert_eq!(
        console.message,
        "The above error occurred in the <UserList> component:\n\n    at UserList \
         (UserList.tsx:5:17)\n    at ul\n    at App (src/App.tsx:3:3)\n\nConsider adding an \
         error boundary to your tree to customize error handling behavior."
            .replace("(UserList.tsx", "(src/UserList.tsx")
    );
    assert_eq!(
        console.stack,
        "Error\n    at logCapturedError \
         (node_modules/react-dom/cjs/react-dom.development.js:20001:9)\n    at commitRoot \
         (node_modules/react-dom/cjs/react-dom.development.js:16001:5)\n    at \
         https://cdn.example/scheduler.js:1:2"
    );
    // Not react-dom's frame, nor the scheduler's: the component the stack names.
    assert_eq!(console.location, "src/UserList.tsx:5:17");
    // What the browser said stays as it said it.
    assert_eq!((console.source.as_str(), console.line), (dom.as_str(), 200));

    let error = &entries[1];
    assert_eq!(
        error.stack,
        "TypeError: Cannot read properties of undefined (reading 'map')\n    at UserList \
         (src/UserList.tsx:5:17)\n    at renderWithHooks \
         (node_modules/react-dom/cjs/react-dom.development.js:16001:20)\n    at slow.js:1:1"
    );
    assert_eq!(error.location, "src/UserList.tsx:5:17");
    // The frame on /slow.js waited for the batch's deadline, no longer.
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    let asked_slow = asked.lock().unwrap().iter().any(|p| p == "/slow.js");
    assert!(asked_slow);

    // At most FRAMES_MAPPED frames of one error are looked up; the rest are shown
    // without the origin, unmapped.
    let deep: Vec<String> = (0..30)
        .map(|i| format!("    at f{i} ({o}/src/many/{i}.js:1:1)"))
        .collect();
    let body = json!({"key": key, "page": format!("{o}/"), "errors": [
        {"kind": "error", "message": "deep", "stack": format!("Error: deep\n{}", deep.join("\n"))}
    ]});
    asked.lock().unwrap().clear();
    assert_eq!(post_errors(&proxy, &body).await, 204);
    let entries = browser_entries(&proxy, 3).await;
    let looked_up = asked
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.starts_with("/src/many/"))
        .count();
    assert_eq!(looked_up, corral_proxy::FRAMES_MAPPED);
    assert!(
        entries[2]
            .stack
            .ends_with("    at f29 (src/many/29.js:1:1)")
    );
    assert_eq!(entries[2].location, format!("{o}/src/many/0.js:1:1"));
    proxy.stop().await;
}

/// A proxy outside any registry still works as before: fresh logs per start.
#[tokio::test]
async fn a_proxy_started_alone_has_logs_of_its_own() {
    let target = id_target().await;
    let bus = EventBus::new(16);
    let a = Proxy::start(
        ProxySpec::new("a", &target.url(), "127.0.0.1:0"),
        bus.clone(),
    )
    .await
    .unwrap();
    get(a.addr(), "/x").await;
    nth_entry(&a, 1).await;
    a.stop().await;
    let b = Proxy::start(ProxySpec::new("a", &target.url(), "127.0.0.1:0"), bus)
        .await
        .unwrap();
    assert_eq!(b.traffic().total(), 0);
    b.stop().await;
}
