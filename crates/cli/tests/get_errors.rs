//! `get_errors` end to end through `corral mcp` (a bridge to a real daemon): an MCP
//! server failing at import, a dev process dying with a real Python traceback, and a
//! page behind the dev proxy reporting a TypeError come back from one call, each once,
//! the broken ones first; once the process is fixed and restarted its error is history:
//! gone from the default view, still found with `since`.
//!
//! The page is loaded through the proxy by real headless Chromium (Debian's `chromium`,
//! installed by `scripts/install-peers.sh`), whose injected script reports the error.

mod common;
use common::http::request;
use common::mcp::{McpClient, text};
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The app's page: it renders, then a function gets `null` where it wanted a list.
const PAGE: &str = "<!doctype html><html><head><title>users</title></head><body>\
<div id=\"app\">loading</div><script>\
function renderUsers(list) { return list.map(function (u) { return u.name; }); }\
setTimeout(function () { document.getElementById('app').textContent = 'rendered'; renderUsers(null); }, 10);\
</script></body></html>";

/// The dev server: `PAGE` at every path, on a free loopback port.
fn dev_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    addr
}

fn serve(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PAGE}",
        PAGE.len()
    );
}

/// Loads `url` in headless Chromium until its timers have run (virtual time), and
/// returns the DOM it ended with.
fn chromium_load(p: &Project, url: &str) -> String {
    let profile = p.dir.join("chromium-profile");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium (Debian's package; ./scripts/install-peers.sh installs it)");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium: {status}");
            break;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {url}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut dom = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut dom).unwrap();
    dom
}

const CONFIG: &str = r#"
[servers.notes]
command = "python3"
args = ["-c", "import json\nimport notes_backend_missing\n"]
restart = "never"

[processes.web]
command = ["python3", "-u", "app.py"]
restart = "never"

[proxies.site]
target = "http://{target}"

[errors]
ignore = ["ResizeObserver loop"]
"#;

/// Dies with a traceback whose decisive line is the `ValueError`.
const BROKEN_APP: &str =
    "def port(text):\n    return int(text)\n\nprint('starting')\nport('abc')\n";
/// Runs until stopped.
const FIXED_APP: &str = "import time\nprint('serving')\nwhile True:\n    time.sleep(1)\n";

fn entries(r: &Value) -> Vec<Value> {
    r["structuredContent"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn get_errors(agent: &mut McpClient, args: Value) -> Value {
    let r = agent.call("get_errors", args);
    assert_eq!(r["isError"], false, "{r}");
    r
}

#[test]
fn one_call_finds_a_server_a_process_and_a_page_and_a_fixed_process_becomes_history() {
    let p = Project::new(&CONFIG.replace("{target}", &dev_server()));
    p.write("app.py", BROKEN_APP);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);
    assert!(
        agent.tool_names().contains(&"get_errors".to_owned()),
        "a bare name whatever the prefix"
    );

    // The page behind the proxy throws, twice (two loads in real Chromium).
    let ps: Value = serde_json::from_str(&p.run(&["ps", "--json"]).stdout()).unwrap();
    let url = ps["proxies"][0]["url"].as_str().unwrap().to_owned();
    let mut key = String::new();
    for _ in 0..2 {
        let dom = chromium_load(&p, &format!("{url}/users"));
        assert!(dom.contains("<div id=\"app\">rendered</div>"), "{dom}");
        assert!(dom.contains("/__corral/client.js"), "{dom}");
        key = dom
            .split_once("data-k=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(key, _)| key.to_owned())
            .unwrap_or_else(|| panic!("no report key in the tag: {dom}"));
    }
    // And a benign browser message the project's `[errors] ignore` hides (as the
    // injected script posts it).
    let benign = json!({"key": key, "page": format!("{url}/users"), "errors": [{
        "kind": "error", "message": "ResizeObserver loop limit exceeded"
    }]});
    let addr = url.strip_prefix("http://").unwrap();
    let posted = request(addr, "POST", "/__corral/errors", &[], &benign.to_string());
    assert_eq!(posted.status, 204, "{posted:?}");

    let mut r = Value::Null;
    wait_until("the server, the process and the page in one answer", || {
        r = get_errors(&mut agent, json!({}));
        let sources: Vec<String> = entries(&r)
            .iter()
            .map(|e| e["source"].as_str().unwrap().to_owned())
            .collect();
        ["server:notes", "process:web", "browser"]
            .iter()
            .all(|s| sources.iter().any(|x| x == s))
            && entries(&r).iter().any(|e| e["count"] == 2)
            && r["structuredContent"]["hidden_as_noise"] == 1
    });
    let all = entries(&r);
    let t = text(&r);
    assert_eq!(all.len(), 3, "each once: {t}");
    // The broken units first (down), then the page's error.
    assert_eq!(all[2]["source"], "browser", "{t}");
    let find = |source: &str| all.iter().find(|e| e["source"] == source).unwrap().clone();
    let server = find("server:notes");
    assert_eq!(server["down"], true, "{t}");
    assert_eq!(
        server["message"], "ModuleNotFoundError: No module named 'notes_backend_missing'",
        "the traceback's decisive line, not its last: {t}"
    );
    let process = find("process:web");
    assert_eq!(process["down"], true, "{t}");
    assert_eq!(
        process["message"], "ValueError: invalid literal for int() with base 10: 'abc'",
        "{t}"
    );
    assert_eq!(process["location"], "app.py:2", "{t}");
    let page = find("browser");
    assert_eq!(page["category"], "js");
    assert_eq!(page["count"], 2, "deduplicated: {t}");
    assert_eq!(
        page["message"], "Uncaught TypeError: Cannot read properties of null (reading 'map')",
        "{t}"
    );
    assert_eq!(
        page["location"],
        // Column 180 of the page as served with a bare tag, plus the tag's report key
        // attribute: `map` in `list.map(`.
        format!("{url}/users:1:{}", 180 + r#" data-k="""#.len() + key.len()),
        "where the page's script threw: {t}"
    );
    assert!(t.contains("[browser:js] TypeError (2x, latest"), "{t}");
    assert!(t.contains("page: "), "{t}");
    assert!(!t.contains("ResizeObserver"), "{t}");
    assert!(t.contains("1 hidden as noise"), "{t}");
    // Ids are stable across calls.
    let again = get_errors(&mut agent, json!({}));
    let ids = |v: &Value| -> Vec<Value> { entries(v).iter().map(|e| e["id"].clone()).collect() };
    assert_eq!(ids(&again), ids(&r));

    // Fixed and restarted: its error is history.
    p.write("app.py", FIXED_APP);
    let restarted = agent.call("corral__process_restart", json!({"name": "web"}));
    assert_eq!(restarted["isError"], false, "{restarted}");
    let now = get_errors(&mut agent, json!({}));
    assert!(
        entries(&now).iter().all(|e| e["source"] != "process:web"),
        "{}",
        text(&now)
    );
    assert!(entries(&now).iter().any(|e| e["source"] == "server:notes"));
    // The default answer says it was resolved since the last call; `resolved` lists it.
    assert!(
        text(&now).contains("1 resolved since your last call"),
        "{}",
        text(&now)
    );
    let history = get_errors(
        &mut agent,
        json!({"since": "10m", "source": "process:web", "status": "resolved"}),
    );
    let old = entries(&history);
    assert_eq!(old.len(), 1, "{}", text(&history));
    assert_eq!(
        old[0]["message"],
        "ValueError: invalid literal for int() with base 10: 'abc'"
    );
    assert_eq!(old[0]["down"], false);
    assert_eq!(old[0]["state"], "resolved");
    assert_eq!(old[0]["fix"]["kind"], "restarted", "{}", text(&history));

    // The human's view of the same.
    let cli = p.run(&["errors", "--no-warnings"]);
    assert_eq!(cli.code(), 0, "{cli:?}");
    assert!(cli.stdout().starts_with("2 errors"), "{cli:?}");
    let bad = agent.call("get_errors", json!({"since": "yesterday-ish"}));
    assert_eq!(bad["isError"], true, "{bad}");
}
