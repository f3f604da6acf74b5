//! `corral mcp` as an agent sees it: one endpoint over several servers, over stdio.

mod common;
use common::mcp::{McpClient, text};
use common::*;
use serde_json::json;

const TWO: &str = r#"
[servers.alpha]
command = "{fixture}"

[servers.beta]
command = "{fixture}"
args = ["--tools", "2"]
tools = { deny = ["crash", "hang"] }
"#;

#[test]
fn lists_every_servers_tools_namespaced_with_builtins() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    let names = c.tool_names();
    assert!(names.contains(&"alpha__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"beta__tool_1".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"beta__crash".to_owned()),
        "deny filter: {names:?}"
    );
    for b in [
        "corral__servers",
        "corral__server_logs",
        "corral__restart_server",
    ] {
        assert!(names.contains(&b.to_owned()), "{b} missing: {names:?}");
    }
    assert!(c.close().success());
}

#[test]
fn calls_two_servers_concurrently() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    let a = c.send_request(
        "tools/call",
        json!({"name": "alpha__sleep", "arguments": {"ms": 300}}),
    );
    let b = c.send_request(
        "tools/call",
        json!({"name": "beta__echo", "arguments": {"text": "quick"}}),
    );
    // The quick call is not held up behind the slow one.
    let rb = c.response(b);
    assert_eq!(text(&rb["result"]), "quick");
    assert!(
        c.other.iter().all(|m| m["id"] != a),
        "slow call answered first?"
    );
    let ra = c.response(a);
    assert_eq!(text(&ra["result"]), "slept 300 ms");
}

#[test]
fn a_crashed_server_fails_fast_others_keep_working_and_its_tools_come_back() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    c.tool_names();
    let r = c.call("alpha__crash", json!({}));
    assert_eq!(r["isError"], true);
    assert!(
        text(&r).contains("server 'alpha' exited with code 3"),
        "{r}"
    );
    // Other server unaffected.
    assert_eq!(
        text(&c.call("beta__echo", json!({"text": "still here"}))),
        "still here"
    );
    // The crash takes alpha's tools out of the list (list_changed), and the restart
    // (backoff 1 s) brings them back (list_changed again).
    c.other.clear();
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let s = c.call("corral__servers", json!({}));
        let alpha = &s["structuredContent"]["servers"][0];
        if alpha["state"] == "ready" && alpha["restarts"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "alpha never restarted: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    c.wait_for("tools/list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    assert!(c.tool_names().contains(&"alpha__echo".to_owned()));
    assert_eq!(
        text(&c.call("alpha__echo", json!({"text": "back"}))),
        "back"
    );
}

#[test]
fn a_server_that_never_starts_does_not_break_initialize_or_listing() {
    let p = Project::new(
        r#"
[servers.good]
command = "{fixture}"
[servers.broken]
command = "{fixture}"
args = ["--exit-on-init"]
restart = "never"
[servers.missing]
command = "corral-no-such-command"
"#,
    );
    let mut c = McpClient::start(&p);
    let names = c.tool_names();
    assert!(names.contains(&"good__echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("broken__")),
        "{names:?}"
    );
    let r = c.call("broken__echo", json!({"text": "x"}));
    assert_eq!(r["isError"], true, "{r}");
    let msg = text(&r);
    assert!(msg.starts_with("server 'broken' is down since"), "{msg}");
    assert!(
        msg.contains("exited with code 1 during initialize"),
        "{msg}"
    );
    assert!(msg.contains("server_logs"), "{msg}");
    // The built-in tools explain it.
    let s = c.call("corral__servers", json!({}));
    let rows = s["structuredContent"]["servers"].as_array().unwrap();
    let missing = rows.iter().find(|r| r["name"] == "missing").unwrap();
    assert_eq!(missing["state"], "failed");
    assert!(
        missing["last_error"]
            .as_str()
            .unwrap()
            .contains("not found in PATH")
    );
    let logs = c.call(
        "corral__server_logs",
        json!({"server": "broken", "grep": "modulenotfound"}),
    );
    assert!(
        text(&logs).contains("ModuleNotFoundError: No module named 'fixture_missing_dep'"),
        "{logs}"
    );
}

#[test]
fn a_hung_server_does_not_block_the_others() {
    let p = Project::new(
        r#"
[servers.stuck]
command = "{fixture}"
args = ["--hang-calls"]
call_timeout = "1s"
[servers.fine]
command = "{fixture}"
"#,
    );
    let mut c = McpClient::start(&p);
    let hung = c.send_request(
        "tools/call",
        json!({"name": "stuck__echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(text(&c.call("fine__echo", json!({"text": "ok"}))), "ok");
    let r = c.response(hung);
    assert_eq!(r["result"]["isError"], true);
    assert!(
        text(&r["result"]).contains("no answer to tools/call within 1s"),
        "{r}"
    );
}

#[test]
fn restart_server_builtin_restarts_and_the_tools_return() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    let pid1 = text(&c.call("alpha__getpid", json!({}))).to_owned();
    let r = c.call("corral__restart_server", json!({"server": "alpha"}));
    assert!(
        text(&r).starts_with("server 'alpha' restarted: ready"),
        "{r}"
    );
    let pid2 = text(&c.call("alpha__getpid", json!({}))).to_owned();
    assert_ne!(pid1, pid2);
    let unknown = c.call("corral__restart_server", json!({"server": "nope"}));
    assert_eq!(unknown["isError"], true);
    assert!(text(&unknown).contains("servers: alpha, beta"), "{unknown}");
}

#[test]
fn restart_server_on_a_server_still_starting_really_restarts_it() {
    let p = Project::new(
        "[servers.slow]\ncommand = \"{fixture}\"\nargs = [\"--startup-delay\", \"1500\", \"--pid-file\", \"slow.pid\"]\n",
    );
    let mut c = McpClient::start(&p);
    // The server is still in its handshake (the pid file is written before the delay).
    let first = read_pid(&p.dir.join("slow.pid"));
    std::fs::remove_file(p.dir.join("slow.pid")).unwrap();
    let r = c.call("corral__restart_server", json!({"server": "slow"}));
    assert!(
        text(&r).starts_with("server 'slow' restarted: ready"),
        "{r}"
    );
    let second = read_pid(&p.dir.join("slow.pid"));
    assert_ne!(first, second, "a new instance was started");
    assert_eq!(
        text(&c.call("slow__getpid", json!({}))),
        second.to_string(),
        "the ready instance is the new one"
    );
}

#[test]
fn list_changed_from_a_server_reaches_the_agent() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    assert!(c.tool_names().contains(&"alpha__add".to_owned()));
    c.call("alpha__change_tools", json!({}));
    c.wait_for("list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let names = c.tool_names();
        if names.contains(&"alpha__extra".to_owned()) {
            assert!(!names.contains(&"alpha__add".to_owned()));
            break;
        }
        assert!(std::time::Instant::now() < deadline);
        c.wait_for("list_changed", |m| {
            m["method"] == "notifications/tools/list_changed"
        });
    }
}

#[test]
fn cancellation_from_the_agent_reaches_the_server() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    let id = c.send_request(
        "tools/call",
        json!({"name": "alpha__sleep", "arguments": {"ms": 20000}}),
    );
    // Wait until the call is in flight on the server, as the built-in `servers` shows.
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let s = c.call("corral__servers", json!({}));
        let alpha = &s["structuredContent"]["servers"][0];
        if alpha["in_flight"] == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "call never in flight: {s}"
        );
    }
    c.notify(
        "notifications/cancelled",
        Some(json!({"requestId": id, "reason": "user"})),
    );
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let logs = c.call(
            "corral__server_logs",
            json!({"server": "alpha", "grep": "cancelled request"}),
        );
        if text(&logs).contains("fixture: cancelled request") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cancel never reached the server: {logs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // A cancelled request gets no response.
    assert!(c.other.iter().all(|m| m["id"] != id));
}

#[test]
fn garbage_and_unknown_methods_get_errors_and_the_session_survives() {
    let p = Project::new(TWO);
    let mut c = McpClient::start(&p);
    c.send(&json!("not an object"));
    let e = c.wait_for("parse error", |m| m["error"]["code"] == -32700);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("one JSON object per line")
    );
    let r = c.request("no/such/method", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    let r = c.request("tools/call", json!({"name": "nope__nope", "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(
        text(&c.call("alpha__echo", json!({"text": "alive"}))),
        "alive"
    );
}

#[test]
fn resources_prompts_and_completion_are_aggregated_and_routed() {
    let p = Project::new(
        r#"
[servers.one]
command = "{fixture}"
args = ["--conformance"]
[servers.two]
command = "{fixture}"
args = ["--conformance"]
"#,
    );
    let mut c = McpClient::start(&p);
    let prompts = c.request("prompts/list", json!({}));
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"one__test_simple_prompt") && names.contains(&"two__test_simple_prompt"),
        "{names:?}"
    );
    let got = c.request(
        "prompts/get",
        json!({"name": "two__test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
    );
    assert!(got.get("error").is_none(), "{got}");
    assert!(
        got["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains('a'),
        "{got}"
    );

    let resources = c.request("resources/list", json!({}));
    let uris: Vec<&str> = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(uris.contains(&"test://static-text"), "{uris:?}");
    let read = c.request("resources/read", json!({"uri": "test://static-text"}));
    assert!(read["result"]["contents"][0]["text"].is_string(), "{read}");
    // A template URI is routed by its prefix.
    let t = c.request("resources/read", json!({"uri": "test://template/42/data"}));
    assert!(t.get("error").is_none(), "{t}");
    let missing = c.request("resources/read", json!({"uri": "nope://x"}));
    assert_eq!(missing["error"]["code"], -32002, "{missing}");

    let comp = c.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "one__test_prompt_with_arguments"},
               "argument": {"name": "arg1", "value": ""}}),
    );
    assert!(comp["result"]["completion"]["values"].is_array(), "{comp}");
}

#[test]
fn builtin_tools_can_be_turned_off() {
    let p =
        Project::new("[gateway]\nbuiltin_tools = false\n[servers.fx]\ncommand = \"{fixture}\"\n");
    let mut c = McpClient::start(&p);
    let names = c.tool_names();
    assert!(names.contains(&"fx__echo".to_owned()));
    assert!(
        !names.iter().any(|n| n.starts_with("corral__")),
        "{names:?}"
    );
}

/// A 2025 agent's roots reach a server: Corral declares `roots` upstream, a server's
/// `roots/list` during the agent's call is asked of that agent and its answer returned
/// to the server; the agent's `notifications/roots/list_changed` reaches the server. An
/// agent that did not declare roots makes the server's request fail with a reason
/// naming the capability (never a hang).
#[test]
fn an_agents_roots_reach_the_server_and_so_do_their_changes() {
    let p = Project::new(
        r#"
[servers.fx]
command = "{fixture}"
args = ["--conformance"]
"#,
    );
    let mut c = McpClient::start_with(&p, json!({"roots": {"listChanged": true}}));
    let id = c.send_request(
        "tools/call",
        json!({"name": "fx__test_roots", "arguments": {}}),
    );
    let ask = c.wait_for("roots/list from corral", |m| m["method"] == "roots/list");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"roots": [{"uri": "file:///work/app", "name": "app"}]}}));
    let r = c.response(id);
    assert_eq!(text(&r["result"]), "Roots: file:///work/app", "{r}");

    c.notify("notifications/roots/list_changed", None);
    let mut seen = String::new();
    wait_until("the server logs the roots change", || {
        let r = c.call(
            "corral__server_logs",
            json!({"server": "fx", "grep": "roots changed"}),
        );
        seen = text(&r).to_owned();
        seen.contains("fixture: roots changed")
    });

    let mut other = McpClient::start(&p);
    let r = other.call("fx__test_roots", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("did not declare the 'roots' capability"),
        "{r}"
    );
    assert!(other.close().success());
    assert!(c.close().success());
}
