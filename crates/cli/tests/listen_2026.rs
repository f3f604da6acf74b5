//! `subscriptions/listen` (MCP 2026-07-28) through Corral, on stdio and Streamable HTTP:
//! raw traffic against `corral mcp --standalone` and `corral up`, with the fixture as a
//! 2025 server (`fx`) and as a 2026-07-28 one (`mfx`, `--modern`, which keeps Corral's
//! upstream listen and writes `fixture: listen ID FILTER` to its log); the TypeScript
//! client 2.4 pinned to 2026-07-28; and logs scoped to a modern request's `logLevel`.

mod common;
use common::http::Up;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

const CONFIG: &str = "[servers.fx]\ncommand = \"{fixture}\"\n\n[servers.mfx]\ncommand = \"{fixture}\"\nargs = [\"--modern\"]\n";

const SUB: &str = "io.modelcontextprotocol/subscriptionId";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "listen-test", "version": "1"},
    })
}

/// Modern params: `params` plus the 2026-07-28 `_meta` (and `extra` keys in it).
fn modern(mut params: Value, extra: &[(&str, &str)]) -> Value {
    let mut m = meta();
    for (k, v) in extra {
        m[*k] = json!(v);
    }
    params["_meta"] = m;
    params
}

fn listen_params(filter: Value) -> Value {
    modern(json!({ "notifications": filter }), &[])
}

fn subscription(msg: &Value) -> Option<&Value> {
    msg["params"]["_meta"].get(SUB)
}

fn is_response(msg: &Value, id: &Value) -> bool {
    msg.get("method").is_none() && &msg["id"] == id
}

/// The server `name`'s log (its stderr, where the fixture reports the listens it got).
fn server_log(p: &Project, name: &str) -> String {
    std::fs::read_to_string(p.dir.join(format!(".corral/logs/{name}.log"))).unwrap_or_default()
}

/// Waits until Corral's listen to `mfx` has exactly `uris` as its resource filter (the
/// last `fixture: listen` line of its log).
fn wait_upstream_filter(p: &Project, uris: &[&str]) {
    wait_until(
        &format!("Corral's listen to mfx filtering {uris:?}"),
        || {
            let log = server_log(p, "mfx");
            let Some(last) = log
                .lines()
                .rfind(|l| l.contains("fixture: listen ") && !l.ends_with("cancelled"))
            else {
                return false;
            };
            let filter: Value = last
                .split_once('{')
                .and_then(|(_, rest)| serde_json::from_str(&format!("{{{rest}")).ok())
                .unwrap_or(Value::Null);
            let got: Vec<&str> = filter["resourceSubscriptions"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            got == uris
        },
    );
}

/// `corral mcp --standalone` on raw pipes: every message it writes, in order.
struct Stdio2026 {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: Receiver<String>,
    /// Everything read so far.
    seen: Vec<Value>,
    next_id: u64,
}

impl Stdio2026 {
    fn start(p: &Project) -> Stdio2026 {
        let mut child = p
            .cmd(&["mcp", "--standalone"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = lines_of(child.stdout.take().unwrap());
        Stdio2026 {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next_id: 100,
        }
    }

    fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    fn send_request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Reads until a message matches `pred` (within the deadline); returns it. Every
    /// message read is kept in `seen`.
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let left = DEADLINE.saturating_sub(start.elapsed());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("timed out waiting for {what}; seen {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("stdout closed waiting for {what}; seen {:#?}", self.seen)
                }
            };
            let msg: Value = serde_json::from_str(&line).unwrap();
            self.seen.push(msg.clone());
            if pred(&msg) {
                return msg;
            }
        }
    }

    /// A request and its response, and the messages that came before the response.
    fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let from = self.seen.len();
        let id = self.send_request(method, params);
        let r = self.until(&format!("the response to {id}"), |m| is_response(m, &id));
        let before = self.seen[from..self.seen.len() - 1].to_vec();
        (r, before)
    }

    /// Reads until `n` notifications `method` tagged `sub` were seen from `from` on.
    fn wait_tagged(&mut self, from: usize, sub: &str, method: &str, n: usize) {
        let count = |c: &Stdio2026| {
            c.tagged(from, sub)
                .iter()
                .filter(|m| m["method"] == method)
                .count()
        };
        let seen = std::cell::Cell::new(count(self));
        if seen.get() >= n {
            return;
        }
        self.until(&format!("{n} {method} on {sub}"), |m| {
            if m["method"] == method && subscription(m) == Some(&json!(sub)) {
                seen.set(seen.get() + 1);
            }
            seen.get() >= n
        });
    }

    fn listen(&mut self, id: &str, filter: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": listen_params(filter)}));
        self.until(&format!("the acknowledgement of {id}"), |m| {
            m["method"] == "notifications/subscriptions/acknowledged"
                && subscription(m) == Some(&json!(id))
        })
    }

    /// Waits for Corral's answer to listen `id` as it ends, and checks it also
    /// cancelled the listen upstream (`notifications/cancelled` went by on stdio).
    fn ended_and_cancelled(&mut self, id: &str) {
        let end = self.until(&format!("the answer to listen {id}"), |m| {
            is_response(m, &json!(id))
        });
        assert_eq!(end["result"]["resultType"], "complete", "{end}");
        assert_eq!(end["result"]["_meta"][SUB], id, "{end}");
        assert!(
            self.seen
                .iter()
                .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id),
            "{:#?}",
            self.seen
        );
    }

    /// The notifications tagged with `sub` seen from `from` on.
    fn tagged(&self, from: usize, sub: &str) -> Vec<&Value> {
        self.seen[from..]
            .iter()
            .filter(|m| subscription(m) == Some(&json!(sub)))
            .collect()
    }
}

impl Drop for Stdio2026 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The exposed name of Corral's `restart_server` tool.
fn restart_tool(c: &mut Stdio2026, params: Value) -> String {
    let (r, _) = c.call("tools/list", params);
    names(&r["result"]["tools"])
        .into_iter()
        .find(|n| n.ends_with("restart_server"))
        .expect("Corral's restart_server tool")
        .to_owned()
}

#[test]
fn stdio_listens_are_acknowledged_tagged_independent_and_ended() {
    let p = Project::new(CONFIG);
    let mut c = Stdio2026::start(&p);

    // The acknowledgement comes first and states the honored subset: a URI no server
    // owns is left out.
    let ack = c.listen(
        "a",
        json!({"toolsListChanged": true, "resourceSubscriptions": ["fixture://watched", "nope://x"]}),
    );
    assert_eq!(
        c.seen.len(),
        1,
        "the acknowledgement is the first message: {:#?}",
        c.seen
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["fixture://watched"]}),
        "{ack}"
    );
    let ack = c.listen(
        "b",
        json!({"promptsListChanged": true, "resourceSubscriptions": ["fixture://quiet"]}),
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourceSubscriptions": ["fixture://quiet"]})
    );
    // A modern server has no resources/subscribe: Corral's listen to it carries both.
    wait_upstream_filter(&p, &["fixture://quiet", "fixture://watched"]);

    // A resource update reaches only the listen that subscribed to it.
    let from = c.seen.len();
    let notify = |uri: &str| {
        modern(
            json!({"name": "mfx__notify", "arguments": {"count": 1, "uri": uri}}),
            &[],
        )
    };
    c.call("tools/call", notify("fixture://watched"));
    let updates = |c: &Stdio2026, sub: &str| -> Vec<Value> {
        c.tagged(from, sub)
            .into_iter()
            .filter(|m| m["method"] == "notifications/resources/updated")
            .map(|m| m["params"]["uri"].clone())
            .collect()
    };
    assert_eq!(
        updates(&c, "a"),
        [json!("fixture://watched")],
        "{:#?}",
        c.seen
    );
    assert!(updates(&c, "b").is_empty(), "{:#?}", c.seen);
    c.call("tools/call", notify("fixture://quiet"));
    assert_eq!(
        updates(&c, "b"),
        [json!("fixture://quiet")],
        "{:#?}",
        c.seen
    );
    assert_eq!(updates(&c, "a").len(), 1, "{:#?}", c.seen);

    // A modern server's tool change: a list change on the listen that opted in.
    c.call(
        "tools/call",
        modern(json!({"name": "mfx__change_tools", "arguments": {}}), &[]),
    );
    c.until("tools/list_changed on listen a", |m| {
        m["method"] == "notifications/tools/list_changed" && subscription(m) == Some(&json!("a"))
    });
    // A server stopping and becoming ready again is a change of Corral's catalog.
    let restart = restart_tool(&mut c, modern(json!({}), &[]));
    let from = c.seen.len();
    c.call(
        "tools/call",
        modern(json!({"name": restart, "arguments": {"server": "fx"}}), &[]),
    );
    c.wait_tagged(from, "a", "notifications/tools/list_changed", 2);

    // Cancelled, a listen ends; the other goes on. Corral lets go of its URI upstream.
    let cancelled_at = c.seen.len();
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "a"}}));
    wait_upstream_filter(&p, &["fixture://quiet"]);
    c.call(
        "tools/call",
        modern(json!({"name": "mfx__change_tools", "arguments": {}}), &[]),
    );
    // Once tools/list shows the change, any list change it caused has been sent.
    wait_until("mfx's tool list back to variant A", || {
        let (r, _) = c.call("tools/list", modern(json!({}), &[]));
        names(&r["result"]["tools"]).contains(&"mfx__add")
    });
    c.call("tools/call", notify("fixture://watched"));
    c.call("tools/call", notify("fixture://quiet"));
    let after: Vec<&Value> = c.seen[cancelled_at..]
        .iter()
        .filter(|m| m.get("method").is_some())
        .collect();
    assert!(
        after.iter().all(|m| subscription(m) == Some(&json!("b"))),
        "nothing for the cancelled listen, nothing of tools for b: {after:#?}"
    );
    assert_eq!(updates(&c, "b").len(), 2, "{:#?}", c.seen);

    // A modern connection gets nothing outside its requests and listens.
    let stray: Vec<&Value> = c
        .seen
        .iter()
        .filter(|m| m.get("method").is_some() && subscription(m).is_none())
        .collect();
    assert!(stray.is_empty(), "unsolicited: {stray:#?}");

    // The agent goes: Corral answers the open listen and, on stdio, cancels it.
    drop(c.stdin.take());
    c.ended_and_cancelled("b");
    assert!(
        !c.seen.iter().any(|m| is_response(m, &json!("a"))),
        "a cancelled listen is not answered: {:#?}",
        c.seen
    );
    assert!(c.child.wait().unwrap().success());
}

/// Logs reach a modern request only when its `_meta` asks (`logLevel`), at or above that
/// level: filtered by Corral for a 2025 server, which logs regardless, and at the source
/// by a modern one, which gets the level in the call's `_meta`.
#[test]
fn logs_reach_a_modern_request_only_when_asked_and_at_its_level() {
    let p = Project::new(CONFIG);
    let mut c = Stdio2026::start(&p);
    for server in ["fx", "mfx"] {
        let call = |c: &mut Stdio2026, level: &str, asked: Option<&str>| -> Vec<Value> {
            let params = json!({"name": format!("{server}__notify"), "arguments": {"count": 2, "level": level}});
            let extra: Vec<(&str, &str)> = asked
                .map(|a| ("io.modelcontextprotocol/logLevel", a))
                .into_iter()
                .collect();
            let (r, before) = c.call("tools/call", modern(params, &extra));
            assert_eq!(
                r["result"]["content"][0]["text"], "sent 2 notifications",
                "{r}"
            );
            before
                .into_iter()
                .filter(|m| m["method"] == "notifications/message")
                .collect()
        };
        let logs = call(&mut c, "error", Some("warning"));
        assert_eq!(logs.len(), 2, "{server}: {logs:#?}");
        assert_eq!(logs[0]["params"]["level"], "error");
        assert_eq!(logs[0]["params"]["logger"], format!("{server}/fixture"));
        assert!(
            call(&mut c, "info", Some("warning")).is_empty(),
            "{server}: below the level"
        );
        assert!(
            call(&mut c, "error", None).is_empty(),
            "{server}: not asked"
        );
        assert_eq!(call(&mut c, "debug", Some("debug")).len(), 2, "{server}");
    }
}

/// A 2026-07-28 server's changes reach a 2025 session as they always did: unsolicited
/// list changes, resource updates for what it subscribed to (through Corral's listen,
/// since the server has no resources/subscribe), logs at the level of its setLevel.
#[test]
fn a_2025_session_gets_a_modern_servers_changes_unsolicited() {
    let p = Project::new(CONFIG);
    let mut c = Stdio2026::start(&p);
    let (r, _) = c.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "1"}}),
    );
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let (r, _) = c.call("logging/setLevel", json!({"level": "warning"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let (r, _) = c.call("resources/subscribe", json!({"uri": "fixture://watched"}));
    assert_eq!(r["result"], json!({}), "{r}");
    wait_upstream_filter(&p, &["fixture://watched"]);

    let from = c.seen.len();
    c.call(
        "tools/call",
        json!({"name": "mfx__change_tools", "arguments": {}}),
    );
    c.until("an unsolicited tools/list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let (r, _) = c.call("tools/list", json!({}));
    assert!(names(&r["result"]["tools"]).contains(&"mfx__extra"), "{r}");

    let (_, before) = c.call(
        "tools/call",
        json!({"name": "mfx__notify", "arguments": {"count": 1, "uri": "fixture://watched"}}),
    );
    let updated: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updated.len(), 1, "{before:#?}");
    assert_eq!(updated[0]["params"]["uri"], "fixture://watched");

    let logs = |c: &mut Stdio2026, level: &str| -> usize {
        let (_, before) = c.call(
            "tools/call",
            json!({"name": "mfx__notify", "arguments": {"count": 1, "level": level}}),
        );
        before
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    assert_eq!(logs(&mut c, "error"), 1, "{:#?}", c.seen);
    assert_eq!(logs(&mut c, "info"), 0, "{:#?}", c.seen);
    // A 2025 session's notifications are as they were: no subscriptionId on any.
    assert!(
        c.seen[from..].iter().all(|m| subscription(m).is_none()),
        "{:#?}",
        c.seen
    );
    // Requests other than tools/call carry the level too.
    let read_logs = |c: &mut Stdio2026| -> usize {
        let (r, before) = c.call("resources/read", json!({"uri": "fixture://watched"}));
        assert_eq!(
            r["result"]["contents"][0]["text"], "fixture://watched",
            "{r}"
        );
        before
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count()
    };
    assert_eq!(
        read_logs(&mut c),
        0,
        "the fixture logs reads at info, below warning"
    );
    c.call("logging/setLevel", json!({"level": "info"}));
    assert_eq!(read_logs(&mut c), 1, "{:#?}", c.seen);

    // A restarted modern server gets a listen of its own, with the subscriptions held.
    let listens_with_watched = |p: &Project| {
        server_log(p, "mfx")
            .lines()
            .filter(|l| l.contains("fixture: listen ") && l.contains("fixture://watched"))
            .count()
    };
    let before_restart = listens_with_watched(&p);
    let restart = restart_tool(&mut c, json!({}));
    let (r, _) = c.call(
        "tools/call",
        json!({"name": restart, "arguments": {"server": "mfx"}}),
    );
    assert_ne!(r["result"]["isError"], true, "{r}");
    wait_until("the new mfx instance's listen", || {
        listens_with_watched(&p) > before_restart
    });
    let (_, before) = c.call(
        "tools/call",
        json!({"name": "mfx__notify", "arguments": {"count": 1, "uri": "fixture://watched"}}),
    );
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/resources/updated"),
        "{before:#?}"
    );

    let (r, _) = c.call("resources/unsubscribe", json!({"uri": "fixture://watched"}));
    assert_eq!(r["result"], json!({}), "{r}");
    wait_upstream_filter(&p, &[]);
}

/// `corral mcp --standalone` stopped (SIGTERM) answers the listens still open and, on
/// stdio, cancels them.
#[test]
fn a_stopping_corral_answers_open_listens() {
    let p = Project::new(CONFIG);
    let mut c = Stdio2026::start(&p);
    c.listen("z", json!({"toolsListChanged": true}));
    unsafe {
        libc::kill(c.child.id() as i32, libc::SIGTERM);
    }
    c.ended_and_cancelled("z");
}

/// The TypeScript client 2.4 pinned to 2026-07-28 opens a listen (`client.listen`) and
/// hears a modern server's tool change on it.
#[test]
fn the_typescript_client_hears_a_list_change_on_its_listen() {
    assert!(
        peers()
            .join("tsclient/node_modules/@modelcontextprotocol/client")
            .exists(),
        "the TypeScript client is not installed: run ./scripts/install-peers.sh"
    );
    let p = Project::new(CONFIG);
    let corral = corral();
    let config = p.dir.join("corral.toml");
    let seen = peer_script(
        "node",
        &repo().join("tests/peers/ts_listen_2026.mjs"),
        &[
            corral.to_str().unwrap(),
            config.to_str().unwrap(),
            "mfx__change_tools",
        ],
    );
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    assert_eq!(seen["honored"], json!({"toolsListChanged": true}), "{seen}");
    assert_eq!(
        seen["notification"], "notifications/tools/list_changed",
        "{seen}"
    );
    assert!(seen["subscription"].is_string(), "{seen}");
    assert_eq!(seen["added"], json!(["mfx__extra"]), "{seen}");
    assert_eq!(seen["closed"], "local", "{seen}");
}

/// A POST whose response is read as it streams: each SSE message (or the JSON body) on
/// a channel that closes when the response ends.
struct Streamed {
    status: u16,
    messages: Receiver<Value>,
    sock: TcpStream,
}

impl Streamed {
    fn post(up: &Up, body: &Value, headers: &[(&str, &str)]) -> Streamed {
        let mut sock = TcpStream::connect(&up.addr).unwrap();
        let body = body.to_string();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            up.addr,
            up.token,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        sock.write_all(req.as_bytes()).unwrap();
        let mut r = BufReader::new(sock.try_clone().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let (mut chunked, mut len) = (false, 0usize);
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let l = line.trim_end().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            chunked |= l.starts_with("transfer-encoding:") && l.contains("chunked");
            if let Some(n) = l.strip_prefix("content-length:") {
                len = n.trim().parse().unwrap_or(0);
            }
        }
        let (tx, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let emit = |text: &mut String| {
                while let Some(at) = text.find("\n\n") {
                    let event: String = text.drain(..at + 2).collect();
                    for data in event.lines().filter_map(|l| l.strip_prefix("data: ")) {
                        if tx
                            .send(serde_json::from_str::<Value>(data).unwrap())
                            .is_err()
                        {
                            return false;
                        }
                    }
                }
                true
            };
            if !chunked {
                let mut body = vec![0; len];
                if r.read_exact(&mut body).is_ok() && !body.is_empty() {
                    let _ = tx.send(serde_json::from_slice::<Value>(&body).unwrap());
                }
                return;
            }
            loop {
                let mut size = String::new();
                if r.read_line(&mut size).unwrap_or(0) == 0 {
                    return;
                }
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if n == 0 {
                    return;
                }
                let mut chunk = vec![0; n + 2];
                if r.read_exact(&mut chunk).is_err() {
                    return;
                }
                text.push_str(&String::from_utf8_lossy(&chunk[..n]));
                if !emit(&mut text) {
                    return;
                }
            }
        });
        Streamed {
            status,
            messages,
            sock,
        }
    }

    /// The next message, within the deadline (`None`: the response ended).
    fn next(&self) -> Option<Value> {
        match self.messages.recv_timeout(DEADLINE) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no message within {DEADLINE:?}"),
        }
    }

    /// Reads until a message matches; every one read is appended to `seen`.
    fn until(&self, what: &str, seen: &mut Vec<Value>, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = self
                .next()
                .unwrap_or_else(|| panic!("the stream ended waiting for {what}; seen {seen:#?}"));
            seen.push(m.clone());
            if pred(&m) {
                return m;
            }
        }
    }
}

/// The headers of a 2026-07-28 POST of `method` (naming `name`).
fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(n) = name {
        h.push(("Mcp-Name", n));
    }
    h
}

fn http_listen(up: &Up, id: &str, filter: Value) -> (Streamed, Value) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": listen_params(filter)});
    let s = Streamed::post(up, &body, &modern_headers("subscriptions/listen", None));
    assert_eq!(s.status, 200);
    let ack = s.next().expect("an acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(subscription(&ack), Some(&json!(id)), "{ack}");
    (s, ack)
}

fn http_call(up: &Up, tool: &str, args: Value, extra: &[(&str, &str)]) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": modern(json!({"name": tool, "arguments": args}), extra)});
    let r = up.post(&body.to_string(), &modern_headers("tools/call", Some(tool)));
    assert_eq!(r.status, 200, "{r:?}");
    r.messages()
}

#[test]
fn http_listens_stream_until_the_client_closes_them_or_corral_shuts_down() {
    let p = Project::new(&format!("[gateway]\nlisten = \"127.0.0.1:0\"\n\n{CONFIG}"));
    let mut up = Up::start(&p);

    // A listen needs its stream.
    let body = json!({"jsonrpc": "2.0", "id": "x", "method": "subscriptions/listen",
        "params": listen_params(json!({"toolsListChanged": true}))});
    let mut h = modern_headers("subscriptions/listen", None);
    h[0] = ("Accept", "application/json");
    let r = up.post(&body.to_string(), &h);
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("text/event-stream"), "{r:?}");

    let (one, ack) = http_listen(
        &up,
        "h1",
        json!({"toolsListChanged": true, "resourceSubscriptions": ["fixture://watched"]}),
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["fixture://watched"]})
    );
    let (two, _) = http_listen(
        &up,
        "h2",
        json!({"resourceSubscriptions": ["fixture://quiet"]}),
    );
    wait_upstream_filter(&p, &["fixture://quiet", "fixture://watched"]);

    let mut seen_one = Vec::new();
    http_call(
        &up,
        "mfx__notify",
        json!({"count": 1, "uri": "fixture://watched"}),
        &[],
    );
    let m = one.until("the update on h1", &mut seen_one, |m| {
        m["method"] == "notifications/resources/updated"
    });
    assert_eq!(subscription(&m), Some(&json!("h1")), "{m}");
    assert_eq!(m["params"]["uri"], "fixture://watched");
    http_call(&up, "mfx__change_tools", json!({}), &[]);
    let m = one.until("tools/list_changed on h1", &mut seen_one, |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    assert_eq!(subscription(&m), Some(&json!("h1")), "{m}");

    // A call's logs ride its own stream when it asks, never a listen.
    let msgs = http_call(
        &up,
        "fx__notify",
        json!({"count": 1, "level": "error"}),
        &[("io.modelcontextprotocol/logLevel", "warning")],
    );
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    assert_eq!(msgs[0]["method"], "notifications/message", "{msgs:#?}");
    assert_eq!(msgs[1]["id"], 7);
    let msgs = http_call(
        &up,
        "fx__notify",
        json!({"count": 1, "level": "error"}),
        &[],
    );
    assert_eq!(msgs.len(), 1, "no logs unasked: {msgs:#?}");

    // Closing its stream ends a listen: Corral lets go of its URI upstream.
    one.sock.shutdown(std::net::Shutdown::Both).unwrap();
    drop(one);
    wait_upstream_filter(&p, &["fixture://quiet"]);

    // Shutting down answers the listens still open.
    unsafe {
        libc::kill(up.child.id() as i32, libc::SIGTERM);
    }
    let mut seen_two = Vec::new();
    let end = two.until("the answer to h2", &mut seen_two, |m| {
        is_response(m, &json!("h2"))
    });
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(end["result"]["_meta"][SUB], "h2", "{end}");
    assert!(two.next().is_none(), "the stream ends with the answer");
    assert_eq!(
        seen_two.len(),
        1,
        "h2 opted in to nothing that happened: {seen_two:#?}"
    );
    assert!(
        seen_one.iter().all(
            |m| subscription(m) == Some(&json!("h1")) && m["method"] != "notifications/message"
        ),
        "{seen_one:#?}"
    );
    let _ = up.child.wait();
}

/// A listen's `resourceSubscriptions` on a 2025 server's resource: one upstream
/// `resources/subscribe` however many hold it, `resources/unsubscribe` when the last
/// one goes; updates onto each listen that holds it.
#[test]
fn listens_hold_a_2025_servers_resource_refcounted() {
    let p = Project::new("[servers.leg]\ncommand = \"{fixture}\"\nargs = [\"--conformance\"]\n");
    let mut c = Stdio2026::start(&p);
    const URI: &str = "test://watched-resource";
    let count = |p: &Project, what: &str| {
        server_log(p, "leg")
            .lines()
            .filter(|l| l.ends_with(&format!("fixture: {what} {URI}")))
            .count()
    };
    for id in ["r1", "r2"] {
        let ack = c.listen(id, json!({"resourceSubscriptions": [URI]}));
        assert_eq!(
            ack["params"]["notifications"],
            json!({"resourceSubscriptions": [URI]})
        );
    }
    assert_eq!(
        count(&p, "resources/subscribe"),
        1,
        "{}",
        server_log(&p, "leg")
    );
    let from = c.seen.len();
    c.call(
        "tools/call",
        modern(
            json!({"name": "leg__notify", "arguments": {"count": 1, "uri": URI}}),
            &[],
        ),
    );
    c.wait_tagged(from, "r1", "notifications/resources/updated", 1);
    c.wait_tagged(from, "r2", "notifications/resources/updated", 1);

    // A restarted 2025 server is subscribed again.
    let (r, _) = c.call("tools/list", modern(json!({}), &[]));
    let restart = names(&r["result"]["tools"])
        .into_iter()
        .find(|n| n.ends_with("restart_server"))
        .unwrap()
        .to_owned();
    c.call(
        "tools/call",
        modern(
            json!({"name": restart, "arguments": {"server": "leg"}}),
            &[],
        ),
    );
    wait_until("the new leg instance subscribed", || {
        count(&p, "resources/subscribe") == 2
    });
    let from = c.seen.len();
    c.call(
        "tools/call",
        modern(
            json!({"name": "leg__notify", "arguments": {"count": 1, "uri": URI}}),
            &[],
        ),
    );
    c.wait_tagged(from, "r1", "notifications/resources/updated", 1);

    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r1"}}));
    // The other listen still holds it: the update still comes, to r2 alone.
    let from = c.seen.len();
    c.call(
        "tools/call",
        modern(
            json!({"name": "leg__notify", "arguments": {"count": 1, "uri": URI}}),
            &[],
        ),
    );
    c.wait_tagged(from, "r2", "notifications/resources/updated", 1);
    assert!(c.tagged(from, "r1").is_empty(), "{:#?}", c.seen);
    assert_eq!(count(&p, "resources/unsubscribe"), 0);
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r2"}}));
    wait_until("resources/unsubscribe upstream", || {
        count(&p, "resources/unsubscribe") == 1
    });
    assert_eq!(count(&p, "resources/subscribe"), 2);
}

/// A modern agent hears of a new incident on its listen: `corral://errors` is honored in
/// `resourceSubscriptions` and updated, tagged, when a server prints a new error.
#[test]
fn a_listen_on_corral_errors_hears_a_new_incident() {
    let p = Project::new(CONFIG);
    let mut c = Stdio2026::start(&p);
    let ack = c.listen(
        "errs",
        json!({"resourceSubscriptions": ["corral://errors"]}),
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["corral://errors"]}),
        "{ack}"
    );
    let from = c.seen.len();
    let traceback =
        "Traceback (most recent call last):\n  File \"/srv/w.py\", line 3, in run\nKeyError: 'job'";
    c.call(
        "tools/call",
        modern(
            json!({"name": "fx__write_stderr", "arguments": {"text": traceback}}),
            &[],
        ),
    );
    c.wait_tagged(from, "errs", "notifications/resources/updated", 1);
    let update = c
        .tagged(from, "errs")
        .into_iter()
        .find(|m| m["method"] == "notifications/resources/updated")
        .unwrap()
        .clone();
    assert_eq!(update["params"]["uri"], "corral://errors", "{update}");
    // Reading it gives the incident.
    let (r, _) = c.call(
        "resources/read",
        modern(json!({"uri": "corral://errors"}), &[]),
    );
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("KeyError"), "{r}");
}
