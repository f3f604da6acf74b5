//! Every buffer bounded in bytes, and every request accounted for: over-long lines,
//! agents and streams that stop reading, duplicate ids, unreadable server answers.

mod common;
use common::http::Up;
use common::mcp::{McpClient, text};
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

const ONE: &str = r#"
[servers.fx]
command = "{fixture}"
call_timeout = "60s"
"#;

const MIB: u64 = 1024 * 1024;

/// The daemon's pid, from its pid file.
fn daemon_pid(p: &Project) -> u32 {
    let path = p.dir.join(".corral/daemon.pid");
    wait_until("the daemon's pid file", || {
        std::fs::read_to_string(&path).is_ok_and(|s| s.trim().parse::<u32>().is_ok())
    });
    read_pid(&path)
}

/// A `/proc/PID/status` field in bytes (`VmHWM`: the peak resident set).
fn vm(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// The journal's events of `kind`.
fn events(p: &Project, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(p.dir.join(".corral/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[test]
fn a_200_mb_line_to_corral_mcp_is_refused_without_buffering_it() {
    let p = Project::new(ONE);
    let _down = Down(&p);
    let mut c = McpClient::bridge(&p);
    let pid = daemon_pid(&p);
    let before = vm(pid, "VmHWM");
    c.send_raw(br#"{"jsonrpc":"2.0","id":"huge","method":"ping","x":""#);
    let chunk = vec![b'y'; MIB as usize];
    for _ in 0..200 {
        c.send_raw(&chunk);
    }
    c.send_raw(b"\"}\n");
    let refused = c.wait_for("the refusal", |m| m["id"] == "huge");
    let msg = refused["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("over the 64 MiB limit"), "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    // Never buffered whole: the daemon's peak stays far below the line's 200 MiB plus
    // what it had (the limit itself is 64 MiB).
    let peak = vm(pid, "VmHWM");
    assert!(
        peak < before + 200 * MIB,
        "daemon peak {} MiB (was {} MiB)",
        peak / MIB,
        before / MIB
    );
    // The session goes on.
    assert_eq!(
        text(&c.call("fx__echo", json!({"text": "still here"}))),
        "still here"
    );
}

#[test]
fn an_agent_that_stops_reading_is_dropped_not_buffered() {
    let p = Project::new(ONE);
    let _down = Down(&p);
    let mut child = p
        .cmd(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"sleepy","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut hello = String::new();
    stdout.read_line(&mut hello).unwrap();
    assert!(hello.contains("serverInfo"), "{hello}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let pid = daemon_pid(&p);
    // From here on the agent never reads, and its server chats 50 MiB of log messages
    // at it during one call.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "fx__notify", "arguments": {"count": 200, "bytes": 256 * 1024}}});
    writeln!(stdin, "{call}").unwrap();
    wait_until("agent.dropped", || !events(&p, "agent.dropped").is_empty());
    let ev = &events(&p, "agent.dropped")[0];
    assert_eq!(ev["transport"], "stdio", "{ev}");
    assert!(ev["session"].is_u64(), "{ev}");
    assert!(
        ev["reason"].as_str().unwrap_or("").contains("did not read"),
        "{ev}"
    );
    let peak = vm(pid, "VmHWM");
    assert!(peak < 300 * MIB, "daemon peak {} MiB", peak / MIB);
    let _ = child.kill();
    let _ = child.wait();
    drop(stdout);
}

#[test]
fn an_unread_get_stream_is_dropped_at_its_byte_limit() {
    let p = Project::new(ONE);
    let up = Up::start(&p);
    let sid = up.initialize();
    // Open the GET stream and never read it.
    let mut get = std::net::TcpStream::connect(&up.addr).unwrap();
    write!(
        get,
        "GET /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n\r\n",
        up.addr, up.token
    )
    .unwrap();
    // A call whose server chats 60 MiB of log messages; with a plain JSON reply they
    // go to the GET stream.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "fx__notify", "arguments": {"count": 240, "bytes": 256 * 1024}}});
    let r = up.post(
        &call.to_string(),
        &[("Mcp-Session-Id", &sid), ("Accept", "application/json")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(text(&r.messages()[0]["result"]), "sent 240 notifications");
    wait_until("agent.dropped", || !events(&p, "agent.dropped").is_empty());
    let ev = &events(&p, "agent.dropped")[0];
    assert_eq!(ev["transport"], "http", "{ev}");
    assert_eq!(ev["stream"], "GET", "{ev}");
    let peak = vm(up.child.id(), "VmHWM");
    assert!(peak < 200 * MIB, "daemon peak {} MiB", peak / MIB);
    // The session itself goes on.
    let r = up.post(
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        &[("Mcp-Session-Id", &sid)],
    );
    assert_eq!(r.status, 200, "{r:?}");
    drop(get);
}

#[test]
fn a_duplicate_in_flight_id_gets_an_error_and_the_first_call_its_answer() {
    let p = Project::new(ONE);
    let mut c = McpClient::start(&p);
    let call = |tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
    };
    c.send(&call("fx__sleep", json!({"ms": 500})));
    c.send(&call("fx__echo", json!({"text": "second"})));
    let first = c.wait_for("the duplicate's error", |m| m["id"] == 77);
    assert_eq!(first["error"]["code"], -32600, "{first}");
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("request id 77 is already in flight in this session"),
        "{first}"
    );
    let second = c.wait_for("the first call's answer", |m| m["id"] == 77);
    assert_eq!(text(&second["result"]), "slept 500 ms", "{second}");
}

#[test]
fn an_unreadable_server_answer_fails_the_call_at_once_with_the_reason() {
    let p = Project::new(ONE);
    let mut c = McpClient::start(&p);
    for (kind, why) in [
        ("utf8", "not valid UTF-8"),
        ("json", "not valid JSON"),
        ("oversized", "over the 64 MiB limit"),
        ("wrong_id", "matches no request in flight"),
    ] {
        let started = Instant::now();
        let r = c.request(
            "tools/call",
            json!({"name": "fx__bad_answer", "arguments": {"kind": kind}}),
        );
        let took = started.elapsed();
        assert_eq!(r["result"]["isError"], true, "{kind}: {r}");
        let msg = text(&r["result"]);
        assert!(
            msg.contains("server 'fx'") && msg.contains(why),
            "{kind}: {msg}"
        );
        assert!(took < Duration::from_secs(20), "{kind}: took {took:?}");
        // The server is still served.
        assert_eq!(text(&c.call("fx__echo", json!({"text": kind}))), kind);
    }
}
