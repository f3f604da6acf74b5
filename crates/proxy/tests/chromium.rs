//! The dev proxy in front of a page, in real headless Chromium: what goes wrong in the
//! page reaches Corral, with the locations the developer wrote.
//!
//! The page (tests/e2e/page) renders, then fails four ways: `console.error`, an unhandled
//! promise rejection, a `fetch` answered 500, and a TypeError thrown from a timer. Its
//! script is served with a source map (built here from the script and its original,
//! `src/components/UserList.tsx`), so the TypeError's location in Corral must be the
//! original file's line and column. Chromium's own view of the same errors (DevTools
//! `Runtime.exceptionThrown`, `Runtime.consoleAPICalled`, `Log.entryAdded`) is collected
//! beside Corral's and checked first, so a failure says whether the browser or Corral
//! missed something.

mod common;
mod e2e;

use bytes::Bytes;
use common::{Target, response};
use corral_events::{Event, EventBus, Kind};
use corral_proxy::browser::{BrowserEntry, BrowserQuery};
use corral_proxy::traffic::TrafficQuery;
use corral_proxy::{Proxy, ProxySpec};
use e2e::chromium::Chromium;
use e2e::{DEADLINE, fixture};
use serde_json::Value;
use sourcemap::SourceMapBuilder;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast::error::RecvError;

/// The original's path as the map names it (relative to the map).
const ORIGINAL: &str = "src/components/UserList.tsx";

/// A token of JavaScript/TypeScript, for pairing generated code with its original: an
/// identifier or number, a string literal, or one punctuation character; with its
/// 0-based column.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
            {
                i += 1;
            }
        } else if c == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += 1;
            }
            i += 1;
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            break;
        } else {
            i += 1;
        }
        out.push((start, &line[start..i.min(line.len())]));
    }
    out
}

/// The 0-based index of the first line of `text` that, trimmed, starts with `prefix`.
fn line_of(text: &str, prefix: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starts with {prefix:?}"))
}

/// The source map of `app.js`, as a compiler would write it: every token of the generated
/// lines from `function findUser` on mapped to the same token of the original's line,
/// identifiers named. The two files are kept in step by hand (types stripped, line for
/// line); a token of app.js missing from its original line fails here.
fn source_map(app_js: &str, original: &str) -> Vec<u8> {
    let js: Vec<&str> = app_js.lines().collect();
    let ts: Vec<&str> = original.lines().collect();
    let (js_start, ts_start) = (
        line_of(app_js, "function findUser"),
        line_of(original, "function findUser"),
    );
    let mut b = SourceMapBuilder::new(Some("app.js"));
    let src = b.add_source(ORIGINAL);
    b.set_source_contents(src, Some(original));
    for (k, ts_line) in ts.iter().enumerate().skip(ts_start) {
        let (g, o) = ((js_start + k - ts_start), k);
        let js_line = js[g];
        let ts_tokens = tokens(ts_line);
        let mut cursor = 0;
        for (col, tok) in tokens(js_line) {
            let Some(found) = ts_tokens[cursor..].iter().position(|(_, t)| *t == tok) else {
                panic!(
                    "app.js line {} token {tok:?} is not on UserList.tsx line {}: the fixtures \
                     are out of step",
                    g + 1,
                    o + 1
                );
            };
            let (src_col, _) = ts_tokens[cursor + found];
            cursor += found + 1;
            let is_name = tok.as_bytes()[0].is_ascii_alphabetic();
            let name = is_name.then(|| b.add_name(tok));
            b.add_raw(
                g as u32,
                col as u32,
                o as u32,
                src_col as u32,
                Some(src),
                name,
                false,
            );
        }
    }
    let mut out = Vec::new();
    b.into_sourcemap().to_writer(&mut out).unwrap();
    out
}

/// 1-based line and column of `needle` in `text` (its first occurrence).
fn position(text: &str, needle: &str) -> (u32, u32) {
    for (i, line) in text.lines().enumerate() {
        if let Some(col) = line.find(needle) {
            return (i as u32 + 1, col as u32 + 1);
        }
    }
    panic!("{needle:?} not found");
}

/// The fixture page's target: the HTML, the script and its map, and the failing API;
/// with the paths it was asked for.
async fn page_target() -> (Target, Arc<Mutex<Vec<String>>>) {
    let app_js = fixture("page/app.js");
    let original = fixture("page/src/components/UserList.tsx");
    let map = Bytes::from(source_map(&app_js, &original));
    let (html, app_js) = (Bytes::from(fixture("page/index.html")), Bytes::from(app_js));
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let target = Target::start(move |req: hyper::Request<hyper::body::Incoming>| {
        let path = req.uri().path().to_owned();
        seen.lock().unwrap().push(path.clone());
        let resp = match path.as_str() {
            "/" => response(200, "text/html; charset=utf-8", html.clone()),
            "/app.js" => response(200, "text/javascript", app_js.clone()),
            "/app.js.map" => response(200, "application/json", map.clone()),
            "/api/users" => response(500, "application/json", r#"{"error":"database is down"}"#),
            _ => response(404, "text/plain", "not found"),
        };
        async move { resp }
    })
    .await;
    (target, asked)
}

/// What Chromium itself reported for the page, from DevTools events.
#[derive(Debug, Default)]
struct Seen {
    console_errors: Vec<String>,
    /// `(description, url, line0, column0)` of each uncaught exception, rejection included.
    exceptions: Vec<(String, String, u64, u64)>,
    /// Network log entries (failed resources).
    network: Vec<String>,
}

impl Seen {
    /// Takes in one DevTools event of the page.
    fn add(&mut self, e: &Value) {
        let p = &e["params"];
        match e["method"].as_str() {
            Some("Runtime.consoleAPICalled") if p["type"] == "error" => {
                let args: Vec<String> = p["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| match &a["value"] {
                        Value::String(s) => s.clone(),
                        Value::Null => a["description"].as_str().unwrap_or("").to_owned(),
                        v => v.to_string(),
                    })
                    .collect();
                self.console_errors.push(args.join(" "));
            }
            Some("Runtime.exceptionThrown") => {
                let d = &p["exceptionDetails"];
                let desc = d["exception"]["description"]
                    .as_str()
                    .or(d["text"].as_str())
                    .unwrap_or("")
                    .to_owned();
                self.exceptions.push((
                    desc,
                    d["url"].as_str().unwrap_or("").to_owned(),
                    d["lineNumber"].as_u64().unwrap_or(0),
                    d["columnNumber"].as_u64().unwrap_or(0),
                ));
            }
            Some("Log.entryAdded") if p["entry"]["source"] == "network" => {
                self.network
                    .push(p["entry"]["text"].as_str().unwrap_or("").to_owned());
            }
            _ => {}
        }
    }

    fn complete(&self) -> bool {
        !self.console_errors.is_empty() && self.exceptions.len() >= 2 && !self.network.is_empty()
    }
}

/// The location Corral must give for `needle` in the original: 1-based line and column
/// of `needle`'s `at`-th byte.
fn original_at(original: &str, needle: &str, at: usize) -> String {
    let (line, col) = position(original, needle);
    format!("{ORIGINAL}:{line}:{}", col as usize + at)
}

/// Waits for `browser.error` events until one of each kind in `kinds` came; returns them.
async fn browser_errors(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    kinds: &[&str],
) -> Vec<Event> {
    let end = tokio::time::Instant::now() + DEADLINE;
    let mut got: Vec<Event> = Vec::new();
    while !kinds
        .iter()
        .all(|k| got.iter().any(|e| e.str("error_kind") == Some(k)))
    {
        match tokio::time::timeout_at(end, events.recv()).await {
            Ok(Ok(e)) if e.is(Kind::BrowserError) => got.push(e),
            Ok(Ok(_)) => {}
            Ok(Err(RecvError::Lagged(n))) => panic!("{n} events were missed"),
            Ok(Err(RecvError::Closed)) => panic!("the event bus closed"),
            Err(_) => panic!(
                "not every kind of {kinds:?} was reported within {DEADLINE:?}; got: {:#?}",
                got.iter().map(Event::to_json_line).collect::<Vec<_>>()
            ),
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_errors_reach_corral_with_source_mapped_locations() {
    let original = fixture("page/src/components/UserList.tsx");
    let (target, asked) = page_target().await;
    let bus = EventBus::new(1024);
    let mut events = bus.subscribe();
    let proxy = Proxy::start(ProxySpec::new("app", &target.url(), "127.0.0.1:0"), bus)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let chromium = Chromium::launch().await;
    let page = chromium.page().await;
    let from = chromium.cdp.events.len();

    let url = format!("{}/", proxy.url());
    page.navigate(&url, DEADLINE)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", chromium.stderr_tail()));
    page.wait_until(
        "document.getElementById('app').textContent",
        &Value::from("rendered"),
        DEADLINE,
    )
    .await
    .unwrap();

    // The browser's own view first: the page did fail the four ways.
    let mut seen = Seen::default();
    chromium
        .cdp
        .events
        .wait_for_from(from, "chromium's own reports", DEADLINE, |e| {
            if e["sessionId"] == page.session.as_str() {
                seen.add(e);
            }
            seen.complete().then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {seen:#?}"));
    let script = format!("{}/app.js", proxy.url());
    let type_error = seen
        .exceptions
        .iter()
        .find(|x| {
            x.0.starts_with("TypeError: Cannot read properties of null (reading 'foo')")
        })
        .unwrap_or_else(|| panic!("chromium saw no TypeError: {seen:#?}"));
    assert_eq!(type_error.1, script, "{seen:#?}");
    assert!(
        seen.exceptions
            .iter()
            .any(|x| x.0.starts_with("Error: load failed")),
        "{seen:#?}"
    );
    assert!(
        seen.console_errors[0].starts_with("widget failed"),
        "{seen:#?}"
    );
    assert!(seen.network[0].contains("status of 500"), "{seen:#?}");

    // Corral's: one report of each kind, announced on the bus and kept in the log.
    let announced = browser_errors(
        &mut events,
        &["error", "console.error", "unhandledrejection", "fetch"],
    )
    .await;
    let log = proxy.browser().query(&BrowserQuery::default());
    let entry = |kind: &str| -> BrowserEntry {
        let mut of_kind = log.iter().filter(|e| e.kind == kind);
        let entry = of_kind
            .next()
            .unwrap_or_else(|| panic!("no {kind} in the browser log: {log:#?}"))
            .clone();
        assert!(of_kind.next().is_none(), "more than one {kind}: {log:#?}");
        assert_eq!(entry.page, url, "{entry:#?}");
        assert_eq!(entry.count, 1, "{entry:#?}");
        let event = announced
            .iter()
            .find(|e| e.str("error_kind") == Some(kind))
            .unwrap();
        assert_eq!(event.str("message"), Some(entry.message.as_str()));
        assert_eq!(event.str("location"), Some(entry.location.as_str()));
        assert_eq!(event.str("proxy"), Some("app"));
        entry
    };

    // The TypeError: Chromium's words, the browser's position in app.js (the same as
    // DevTools gave, made 1-based), and the original's line and column of `foo` (V8 places
    // a failed property read at the property's name).
    let e = entry("error");
    assert_eq!(
        e.message,
        "Uncaught TypeError: Cannot read properties of null (reading 'foo')"
    );
    assert_eq!(
        (e.source.as_str(), e.line, e.column),
        (
            script.as_str(),
            type_error.2 as u32 + 1,
            type_error.3 as u32 + 1
        )
    );
    assert_eq!(e.location, original_at(&original, "(user as User).foo", 15));
    // Its stack, frame by frame, as mapped.
    assert!(
        e.stack
            .contains(&format!("    at renderUserList ({})", e.location)),
        "{e:#?}"
    );

    let e = entry("console.error");
    assert_eq!(
        e.message,
        r#"widget failed {"widget":"UserList","retries":3}"#
    );
    // V8 places a method call at the method's name.
    assert_eq!(e.location, original_at(&original, "console.error(", 8));
    // The call stack: mountUserList's frame mapped; the bundler's wrapper, which calls it
    // from a line no mapping covers, shown without the origin.
    assert!(
        e.stack
            .contains(&format!("    at mountUserList ({})", e.location)),
        "{e:#?}"
    );
    assert!(e.stack.contains("    at app.js:"), "{e:#?}");
    assert!(!e.stack.contains("http://"), "{e:#?}");

    let e = entry("unhandledrejection");
    assert_eq!(e.message, "Unhandled rejection: Error: load failed");
    assert_eq!(e.location, original_at(&original, "new Error(", 0));

    let e = entry("fetch");
    assert_eq!(
        e.message,
        r#"GET /api/users → 500 Internal Server Error: {"error":"database is down"}"#
    );
    assert_eq!(e.location, original_at(&original, "fetch(", 0));
    assert!(
        e.stack
            .contains(&format!("    at mountUserList ({})", e.location)),
        "the call site's stack: {e:#?}"
    );
    let fetch_request = e.request.clone();

    // The proxy's traffic log has the failed request, with the message read out of it
    // (among the errors may also be the browser's own /favicon.ico, a 404 here).
    let failed = proxy.traffic().query(&TrafficQuery {
        errors_only: true,
        path: Some("/api/".into()),
        ..TrafficQuery::default()
    });
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].method, "GET");
    assert_eq!(failed[0].url, "/api/users");
    assert_eq!(failed[0].status, Some(500));
    assert_eq!(failed[0].message.as_deref(), Some("database is down"));
    // The page's report names that very request, by the id the response carried.
    assert_eq!(
        fetch_request.as_deref(),
        Some(failed[0].request_id.as_str()),
        "{failed:#?}"
    );

    // And it served the page and the script; the map was read from the target by Corral
    // (the browser does not ask for maps unless DevTools is open).
    let all = proxy.traffic().query(&TrafficQuery::default());
    for (path, document) in [("/", true), ("/app.js", false)] {
        assert!(
            all.iter()
                .any(|t| t.url == path && t.status == Some(200) && t.document == document),
            "{path} is not in the traffic log (a page load: {document}): {all:#?}"
        );
    }
    let asked = asked.lock().unwrap().clone();
    assert!(asked.iter().any(|p| p == "/app.js.map"), "{asked:?}");

    chromium.close().await;
    proxy.stop().await;
}
