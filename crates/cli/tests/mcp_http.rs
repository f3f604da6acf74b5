//! The gateway over Streamable HTTP (`corral up`): sessions, security, routing.

mod common;
use common::http::{Up, request};
use common::*;

const CFG: &str = r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"

[servers.other]
command = "{fixture}"
args = ["--tools", "1"]
"#;

fn call(up: &Up, sid: &str, id: u32, tool: &str, args: &str) -> serde_json::Value {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
    );
    let r = up.post(&body, &[("Mcp-Session-Id", sid)]);
    assert_eq!(r.status, 200, "{r:?}");
    r.messages().pop().unwrap()
}

#[test]
fn token_file_is_private_and_required() {
    let p = Project::new(CFG);
    let up = Up::start(&p);
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(p.dir.join(".corral/token")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(up.token.len(), 64);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
    let r = up.post(init, &[("Authorization", "Bearer wrong")]);
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="corral", error="invalid_token""#)
    );
    let token_file = p.dir.join(".corral/token");
    assert!(
        r.body.contains("wrong bearer token") && r.body.contains(&*token_file.to_string_lossy()),
        "the body says where the token is: {r:?}"
    );
    let r = request(&up.addr, "POST", "/mcp", &[], init);
    assert_eq!(r.status, 401, "no token at all: {r:?}");
    assert_eq!(
        r.header("www-authenticate"),
        Some(r#"Bearer realm="corral""#)
    );
    assert!(r.body.contains("missing bearer token"), "{r:?}");
    // The same token is used on the next start.
    drop(up);
    let again = Up::start(&p);
    assert_eq!(
        again.token,
        std::fs::read_to_string(p.dir.join(".corral/token"))
            .unwrap()
            .trim()
    );
}

#[test]
fn host_and_origin_are_checked_against_dns_rebinding() {
    let p = Project::new(CFG);
    let up = Up::start(&p);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    assert_eq!(up.post(init, &[("Host", "evil.example:80")]).status, 403);
    assert_eq!(
        up.post(init, &[("Origin", "http://evil.example")]).status,
        403
    );
    assert_eq!(
        up.post(init, &[("Origin", "http://localhost:5173")]).status,
        200
    );
    let port = up.addr.rsplit(':').next().unwrap();
    assert_eq!(
        up.post(init, &[("Host", &format!("localhost:{port}"))])
            .status,
        200
    );
}

#[test]
fn sessions_route_calls_to_both_servers() {
    let p = Project::new(CFG);
    let up = Up::start(&p);
    let sid = up.initialize();
    let r = up.post(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        &[("Mcp-Session-Id", &sid)],
    );
    let list = &r.messages()[0];
    let names = names(&list["result"]["tools"]);
    assert!(
        names.contains(&"fx__echo") && names.contains(&"other__tool_0"),
        "{names:?}"
    );
    let a = call(&up, &sid, 3, "fx__echo", r#"{"text":"one"}"#);
    assert_eq!(a["result"]["content"][0]["text"], "one");
    let b = call(&up, &sid, 4, "other__tool_0", r#"{"text":"two"}"#);
    assert_eq!(b["result"]["content"][0]["text"], "two");
}

#[test]
fn requests_without_or_with_unknown_session_are_refused() {
    let p = Project::new(CFG);
    let up = Up::start(&p);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(up.post(list, &[]).status, 400);
    assert_eq!(up.post(list, &[("Mcp-Session-Id", "nope")]).status, 404);
    let sid = up.initialize();
    let r = request(
        &up.addr,
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &format!("Bearer {}", up.token)),
            ("Mcp-Session-Id", &sid),
        ],
        "",
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        up.post(list, &[("Mcp-Session-Id", &sid)]).status,
        404,
        "deleted session is gone"
    );
    assert_eq!(up.post("not json", &[("Mcp-Session-Id", &sid)]).status, 400);
}

#[test]
fn a_call_with_a_progress_token_is_answered_on_its_post() {
    // The token is rewritten for the server and mapped back; real progress events over
    // HTTP are checked with the Python SDK client against server-everything (peers_gateway).
    let p = Project::new(CFG);
    let up = Up::start(&p);
    let sid = up.initialize();
    let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"t"},"_meta":{"progressToken":"tok-1"}}}"#;
    let r = up.post(body, &[("Mcp-Session-Id", &sid)]);
    assert_eq!(r.status, 200, "{r:?}");
    let msgs = r.messages();
    assert_eq!(msgs.last().unwrap()["id"], 9, "{msgs:?}");
    assert_eq!(msgs.last().unwrap()["result"]["content"][0]["text"], "t");
}

/// A 2025 client closing a call's event stream does not cancel the call: that revision
/// cancels with `notifications/cancelled` only (a 2026-07-28 client's closed stream is
/// its cancellation: `agents_input.rs`). The server's sampling request rides the call's
/// stream; the client closes it, answers on a new POST, and the server's call goes on
/// to use the answer, never told it was cancelled.
#[test]
fn a_2025_clients_closed_event_stream_does_not_cancel_its_call() {
    use std::io::{BufRead, Write};
    let p = Project::new(
        r#"
[servers.fx]
command = "{fixture}"
args = ["--conformance"]
"#,
    );
    let up = Up::start(&p);
    let r = up.post(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}"#,
        &[],
    );
    let sid = r.header("mcp-session-id").expect("session id").to_owned();
    let r = up.post(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &[("Mcp-Session-Id", &sid)],
    );
    assert_eq!(r.status, 202, "{r:?}");

    let body = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx__test_sampling","arguments":{"prompt":"hi"}}}"#;
    let mut s = std::net::TcpStream::connect(&up.addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
        up.addr,
        up.token,
        body.len()
    )
    .unwrap();
    // The server's question comes first on the call's stream.
    let mut reader = std::io::BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    while !line.contains("sampling/createMessage") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
    }
    let asked: serde_json::Value =
        serde_json::from_str(line.trim().strip_prefix("data: ").unwrap()).unwrap();
    drop(reader);
    drop(s);

    let answer = serde_json::json!({"jsonrpc": "2.0", "id": asked["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}});
    let r = up.post(&answer.to_string(), &[("Mcp-Session-Id", &sid)]);
    assert_eq!(r.status, 202, "{r:?}");
    let logs = |up: &Up| {
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"corral__server_logs","arguments":{"server":"fx","grep":"fixture:"}}}"#;
        let r = up.post(body, &[("Mcp-Session-Id", &sid)]);
        r.messages().pop().unwrap()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mut seen = String::new();
    wait_until("the server to get the client's answer", || {
        seen = logs(&up);
        seen.contains("fixture: client answered s1")
    });
    assert!(
        !seen.contains("fixture: cancelled request"),
        "a closed 2025 stream cancelled the call: {seen}"
    );
}
