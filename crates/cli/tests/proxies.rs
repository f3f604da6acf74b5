//! Dev proxies through the CLI and the daemon: a configured proxy starts with the daemon
//! and shows in `ps`, its traffic in `corral proxy NAME --log` and the `proxy_log` tool;
//! ad-hoc proxies start and stop; a target that is down is a 502 and a `proxy.error`;
//! `--standalone` runs one in the foreground; a reload restarts a changed one.

mod common;
use common::http::request;
use common::mcp::{McpClient, text};
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;

/// A dev server stand-in on a free loopback port: `/hello` is 200 text, `/page` an HTML
/// page, `/boom` a 500 with a JSON error, anything else 404.
fn target() -> String {
    common::http::serve(|path| match path {
        "/hello" => ("200 OK", "text/plain", "hello from the target".to_owned()),
        "/page" => (
            "200 OK",
            "text/html",
            "<html><head></head><body>a page</body></html>".to_owned(),
        ),
        "/boom" => (
            "500 Internal Server Error",
            "application/json",
            r#"{"error":"database is down"}"#.to_owned(),
        ),
        _ => ("404 Not Found", "text/plain", "no such page".to_owned()),
    })
}

/// `host:port` of an `http://host:port` URL.
fn addr_of(url: &str) -> &str {
    url.strip_prefix("http://").unwrap().trim_end_matches('/')
}

fn ps_proxies(p: &Project) -> Vec<Value> {
    let ps = p.run(&["ps", "--json"]);
    assert_eq!(ps.code(), 0, "{ps:?}");
    let v: Value = serde_json::from_str(&ps.stdout()).unwrap();
    v["proxies"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_configured_proxy_runs_with_the_daemon_and_its_traffic_is_in_ps_the_log_and_the_tools() {
    let target = target();
    let p = Project::new(&format!("[proxies.site]\ntarget = \"http://{target}\"\n"));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let proxies = ps_proxies(&p);
    assert_eq!(proxies.len(), 1, "{proxies:?}");
    assert_eq!(proxies[0]["name"], "site");
    assert_eq!(proxies[0]["target"], format!("http://{target}"));
    let url = proxies[0]["url"].as_str().unwrap().to_owned();

    let hello = request(addr_of(&url), "GET", "/hello", &[], "");
    assert_eq!(
        (hello.status, hello.body.as_str()),
        (200, "hello from the target")
    );
    let boom = request(addr_of(&url), "GET", "/boom", &[], "");
    assert_eq!(boom.status, 500);
    assert_eq!(boom.body, r#"{"error":"database is down"}"#);

    // The table, the log and the failed-only log.
    wait_until("two requests counted in ps", || {
        ps_proxies(&p)[0]["requests"] == 2
    });
    let ps = p.run(&["ps"]).stdout();
    let row = ps
        .lines()
        .find(|l| l.starts_with("site "))
        .expect("a proxy row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], url, "{ps}");
    assert_eq!(
        cols[4..],
        ["2", "1", "0"],
        "requests, failed, browser errors: {ps}"
    );
    let log = p.run(&["proxy", "site", "--log"]);
    assert_eq!(log.code(), 0, "{log:?}");
    let out = log.stdout();
    assert!(out.contains("GET /hello → 200"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("GET /boom → 500") && l.ends_with(": database is down")),
        "{out}"
    );
    // What the injected script sends when the page throws (the script itself is run
    // by real Chromium in crates/proxy/tests/chromium.rs).
    // It sends the key of the tag the proxy put into the page.
    let page = request(addr_of(&url), "GET", "/page", &[], "");
    let key = page
        .body
        .split_once("data-k=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(key, _)| key.to_owned())
        .unwrap_or_else(|| panic!("no key in the page: {page:?}"));
    let report = format!(
        r#"{{"key":"{key}","page":"http://site/users","errors":[{{"kind":"error","message":"TypeError: x is undefined","source":"http://site/app.js","line":3,"column":7}}]}}"#
    );
    let unkeyed = request(
        addr_of(&url),
        "POST",
        "/__corral/errors",
        &[("content-type", "application/json")],
        &report.replace(&key, ""),
    );
    assert_eq!(unkeyed.status, 403, "{unkeyed:?}");
    let posted = request(
        addr_of(&url),
        "POST",
        "/__corral/errors",
        &[("content-type", "application/json")],
        &report,
    );
    assert_eq!(posted.status, 204, "{posted:?}");
    wait_until("the browser error in the log", || {
        p.run(&["proxy", "site", "--log"]).stdout().contains(
            "error TypeError: x is undefined → http://site/app.js:3:7 (page http://site/users)",
        )
    });
    let failed = p.run(&["proxy", "site", "--log", "--errors"]).stdout();
    assert!(failed.contains("GET /boom → 500"), "{failed}");
    assert!(!failed.contains("/hello"), "{failed}");

    // The same through the agent's tools.
    let mut agent = McpClient::bridge(&p);
    let tools = agent.tool_names();
    for t in ["proxies", "proxy_start", "proxy_stop", "proxy_log"] {
        assert!(tools.contains(&format!("corral__{t}")), "{tools:?}");
    }
    let listed = agent.call("corral__proxies", json!({}));
    assert_eq!(
        listed["structuredContent"]["proxies"][0]["url"],
        url.as_str()
    );
    let r = agent.call("corral__proxy_log", json!({"name": "site", "errors": true}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(text(&r).contains("GET /boom → 500"), "{r}");
    assert!(text(&r).contains("database is down"), "{r}");
    let traffic = r["structuredContent"]["traffic"].as_array().unwrap();
    assert_eq!(traffic.len(), 1, "{r}");
    assert_eq!(traffic[0]["status"], 500);
    let unknown = agent.call("corral__proxy_log", json!({"name": "nope"}));
    assert_eq!(unknown["isError"], true);
    assert!(
        text(&unknown).contains("no proxy named 'nope'; proxies: site"),
        "{unknown}"
    );
}

#[test]
fn ad_hoc_proxies_start_stop_and_a_dead_target_is_a_502_and_a_proxy_error() {
    let target = target();
    let p = Project::new("");
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);

    let started = p.run(&["proxy", "web", "--target", &format!("http://{target}")]);
    assert_eq!(started.code(), 0, "{started:?}");
    let out = started.stdout();
    let url = out
        .trim()
        .strip_prefix("web: ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("web: URL → TARGET, got {out}"))
        .to_owned();
    assert!(out.trim().ends_with(&format!("→ http://{target}")), "{out}");
    assert_eq!(request(addr_of(&url), "GET", "/hello", &[], "").status, 200);

    let again = p.run(&["proxy", "web", "--target", &format!("http://{target}")]);
    assert_eq!(again.code(), 2, "{again:?}");
    assert!(
        again.stderr().contains("proxy 'web' runs already"),
        "{again:?}"
    );
    let bad = p.run(&["proxy", "bad", "--target", "https://example.com"]);
    assert_ne!(bad.code(), 0, "{bad:?}");
    assert!(bad.stderr().contains("only http:// targets"), "{bad:?}");

    let stopped = p.run(&["proxy", "web", "--stop"]);
    assert_eq!(stopped.code(), 0, "{stopped:?}");
    assert!(
        TcpStream::connect(addr_of(&url)).is_err(),
        "still listening"
    );
    assert!(ps_proxies(&p).is_empty());
    let unknown = p.run(&["proxy", "web", "--stop"]);
    assert_eq!(unknown.code(), 2, "{unknown:?}");
    assert!(
        unknown.stderr().contains("no proxy named 'web'"),
        "{unknown:?}"
    );

    // A target nobody listens on: the port of a listener we close.
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let started = p.run(&[
        "proxy",
        "dead",
        "--target",
        &format!("http://{dead}"),
        "--json",
    ]);
    assert_eq!(started.code(), 0, "{started:?}");
    let row: Value = serde_json::from_str(&started.stdout()).unwrap();
    let resp = request(
        addr_of(row["url"].as_str().unwrap()),
        "GET",
        "/x?y=1",
        &[],
        "",
    );
    assert_eq!(resp.status, 502, "{resp:?}");
    assert!(resp.body.contains("Corral"), "{resp:?}");
    assert!(resp.body.contains("refused"), "{resp:?}");
    wait_until("a proxy.error event", || {
        let events = p.run(&["events", "--json", "-n", "200"]).stdout();
        events.lines().any(|l| {
            let ev: Value = serde_json::from_str(l).unwrap();
            ev["kind"] == "proxy.error" && ev["source"] == "proxy:dead" && ev["url"] == "/x?y=1"
        })
    });
}

#[test]
fn a_standalone_proxy_prints_its_url_first_and_stops_on_sigterm() {
    let target = target();
    let p = Project::new("");
    let mut child = p
        .cmd(&[
            "proxy",
            "solo",
            "--target",
            &format!("http://{target}"),
            "--standalone",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://") && !w.contains(&target))
        .unwrap_or_else(|| panic!("a URL in {first:?}"))
        .to_owned();
    assert!(first.starts_with("corral: proxy 'solo' on "), "{first}");
    let hello = request(addr_of(&url), "GET", "/hello", &[], "");
    assert_eq!(hello.body, "hello from the target");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(
        TcpStream::connect(addr_of(&url)).is_err(),
        "still listening"
    );
}

#[test]
fn a_reload_restarts_a_changed_proxy_and_stops_a_removed_one() {
    let (one, two) = (target(), target());
    let config = |t: &str| {
        format!(
            "[proxies.site]\ntarget = \"http://{t}\"\n[proxies.other]\ntarget = \"http://{t}\"\n"
        )
    };
    let p = Project::new(&config(&one));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    assert_eq!(ps_proxies(&p).len(), 2);
    p.write(
        "corral.toml",
        &format!("[proxies.site]\ntarget = \"http://{two}\"\n"),
    );
    let reload = p.run(&["reload"]);
    assert_eq!(reload.code(), 0, "{reload:?}");
    let out = reload.stdout();
    assert!(out.contains("proxies restarted:   site"), "{out}");
    assert!(out.contains("proxies stopped:     other"), "{out}");
    let proxies = ps_proxies(&p);
    assert_eq!(proxies.len(), 1, "{proxies:?}");
    assert_eq!(proxies[0]["target"], format!("http://{two}"));
}

/// `corral restart`, `stop` and `start` know proxies: a restart keeps the address (the
/// browser's tabs keep working) and begins a new traffic count; a stopped configured
/// proxy starts again.
#[test]
fn restart_stop_and_start_know_proxies() {
    let target = target();
    let p = Project::new(&format!("[proxies.site]\ntarget = \"http://{target}\"\n"));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let url = ps_proxies(&p)[0]["url"].as_str().unwrap().to_owned();
    let hello = request(addr_of(&url), "GET", "/hello", &[], "");
    assert_eq!(hello.status, 200);
    wait_until("one request counted", || ps_proxies(&p)[0]["requests"] == 1);

    let r = p.run(&["restart", "site"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(
        r.stdout().trim(),
        format!("site: listening on {url} → http://{target}")
    );
    let row = &ps_proxies(&p)[0];
    assert_eq!(row["url"], url.as_str(), "the same address");
    assert_eq!(row["requests"], 0, "a new run: {row}");
    assert_eq!(request(addr_of(&url), "GET", "/hello", &[], "").status, 200);

    let r = p.run(&["stop", "site"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(ps_proxies(&p).is_empty());
    let r = p.run(&["start", "site"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stdout().starts_with("site: listening on http://"),
        "{r:?}"
    );
    assert_eq!(ps_proxies(&p).len(), 1);
    let r = p.run(&["restart", "nosuch"]);
    assert_eq!(r.code(), 2);
    assert!(r.stderr().contains("proxies: site"), "{r:?}");
}

/// A request the target answers with a 5xx is a `proxy.request_failed` event, live in
/// `events -f` (with the error body's message); the same request (its query aside)
/// failing again within 10 s is held back.
#[test]
fn a_failed_request_is_an_event_in_events_follow() {
    let target = target();
    let p = Project::new(&format!("[proxies.site]\ntarget = \"http://{target}\"\n"));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let url = ps_proxies(&p)[0]["url"].as_str().unwrap().to_owned();
    let mut follower = p
        .cmd(&["events", "-f", "-n", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = lines_of(follower.stdout.take().unwrap());
    rx.recv_timeout(DEADLINE).expect("the line of history");
    for path in ["/boom", "/boom", "/boom?again=1"] {
        assert_eq!(request(addr_of(&url), "GET", path, &[], "").status, 500);
    }
    let failed = |e: &Value| e["kind"] == "proxy.request_failed";
    let first: Value = loop {
        let line = rx
            .recv_timeout(DEADLINE)
            .expect("proxy.request_failed in events -f");
        let e: Value = serde_json::from_str(&line).unwrap();
        if failed(&e) {
            break e;
        }
    };
    assert_eq!(first["source"], "proxy:site", "{first}");
    assert_eq!(
        (first["method"].as_str(), first["status"].as_u64()),
        (Some("GET"), Some(500))
    );
    assert_eq!(first["url"], "/boom", "{first}");
    assert!(
        first["message"]
            .as_str()
            .unwrap_or("")
            .contains("database is down"),
        "{first}"
    );
    // The two repeats (same path, a query aside) are held back: the journal has one.
    wait_until("three requests counted", || {
        ps_proxies(&p)[0]["requests"] == 3
    });
    let events = p.run(&["events", "-n", "100", "--json"]);
    let n = events
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(failed)
        .count();
    assert_eq!(n, 1, "{events:?}");
    let _ = follower.kill();
    let _ = follower.wait();
}
