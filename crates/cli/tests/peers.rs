//! Real peers (installed by scripts/install-peers.sh): the reference TypeScript server
//! `@modelcontextprotocol/server-everything` and Python servers built with the official
//! `mcp` SDK.

mod common;
use common::*;

fn config() -> String {
    let peers = peers();
    format!(
        r#"
[servers.everything]
command = "node"
args = ["{peers}/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"]

[servers.py]
command = "{peers}/venv/bin/python"
args = ["{{repo}}/tests/peers/py_server.py"]

[servers.broken]
command = "{peers}/venv/bin/python"
args = ["{{repo}}/tests/peers/py_broken.py"]
restart = "never"
"#,
        peers = peers.display()
    )
}

#[test]
fn server_everything_lists_and_calls_tools() {
    let p = Project::new(&config());
    let r = p.run(&["tools", "everything", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let names = names(&v);
    assert!(names.contains(&"everything__echo"), "{names:?}");
    assert!(names.contains(&"everything__get-sum"), "{names:?}");

    let r = p.run(&[
        "call",
        "everything",
        "echo",
        r#"{"message": "hi from corral"}"#,
    ]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout().trim(), "Echo: hi from corral");
    let r = p.run(&["call", "everything", "get-sum", r#"{"a": 2, "b": 3}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains('5'), "{r:?}");
}

#[test]
fn python_sdk_server_lists_and_calls_tools() {
    let p = Project::new(&config());
    let r = p.run(&["tools", "py"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains("py__greet"), "{r:?}");
    assert!(r.stdout().contains("py__multiply"), "{r:?}");
    let r = p.run(&["call", "py", "multiply", r#"{"a": 6, "b": 7}"#, "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["content"][0]["text"], "42");
    // The SDK validates arguments: a bad call is a tool error, not a hang.
    let r = p.run(&["call", "py", "multiply", r#"{"a": "x"}"#]);
    assert_eq!(r.code(), 1, "{r:?}");
}

#[test]
fn python_import_failure_shows_the_traceback_in_the_error_and_the_event() {
    let p = Project::new(&config());
    let r = p.run(&["call", "broken", "anything"]);
    assert_eq!(r.code(), 1, "{r:?}");
    let err = r.stderr();
    assert!(err.contains("server 'broken' failed to start"), "{err}");
    assert!(
        err.contains("ModuleNotFoundError: No module named 'corral_missing_dependency'"),
        "{err}"
    );

    // The same last line is in the start_failed event.
    p.write(
        "corral.toml",
        &config().replace(
            "[servers.everything]",
            "[servers.everything]\nrestart = \"never\"",
        ),
    );
    let (mut child, lines) = p.follow_events();
    let mut found = None;
    for line in lines {
        let ev: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if ev["kind"] == "server.start_failed" && ev["source"] == "server:broken" {
            found = Some(ev);
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let ev = found.expect("a start_failed event for the broken server");
    let tail = ev["stderr_tail"].as_array().unwrap();
    assert_eq!(
        tail.last().unwrap(),
        "ModuleNotFoundError: No module named 'corral_missing_dependency'"
    );
    assert_eq!(ev["exit_code"], 1);
}

/// Servers that speak MCP 2026-07-28: the TypeScript SDK 2.x refusing legacy clients, and
/// the Python SDK (its stdio server takes the era of the client's first request).
fn modern_config() -> String {
    let peers = peers();
    let ts = peers.join("ts-server");
    assert!(
        ts.join("node_modules/@modelcontextprotocol/server")
            .exists(),
        "the TypeScript server SDK is not installed: run ./scripts/install-peers.sh"
    );
    format!(
        r#"
[servers.tsmodern]
command = "node"
args = ["{{repo}}/crates/cli/tests/peers/ts_modern_server.cjs", "{ts}"]

[servers.py]
command = "{peers}/venv/bin/python"
args = ["{{repo}}/tests/peers/py_server.py"]
"#,
        ts = ts.display(),
        peers = peers.display()
    )
}

#[test]
fn a_typescript_server_that_rejects_legacy_clients_serves_a_2025_agent_through_corral() {
    let p = Project::new(&modern_config());
    let _down = Down(&p);
    let r = p.run(&["call", "tsmodern", "shout", r#"{"text": "hi"}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout().trim(), "HI");
    let r = p.run(&["tools", "tsmodern", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert!(names(&v).contains(&"tsmodern__shout"), "{v}");

    // A 2025-06-18 agent, through the daemon.
    let mut agent = mcp::McpClient::bridge(&p);
    let result = agent.call("tsmodern__shout", serde_json::json!({"text": "abc"}));
    assert_eq!(mcp::text(&result), "ABC", "{result}");
    // This agent declared no elicitation, and Corral says so upstream: a tool that asks
    // for it fails with a tool error naming the capability, no hang (an agent that
    // declares it is asked: drive_2026.rs).
    let r = agent.request(
        "tools/call",
        serde_json::json!({"name": "tsmodern__confirm", "arguments": {}}),
    );
    assert!(r.to_string().contains("elicitation"), "{r}");

    // The negotiated revision: ps --json and the servers tool.
    let row = ps_row(&p, "tsmodern");
    assert_eq!(row["protocol_version"], "2026-07-28", "{row}");
    assert_eq!(row["era"], "modern", "{row}");
    let servers = agent.call("corral__servers", serde_json::json!({}));
    assert!(
        mcp::text(&servers).contains("tsmodern: ready")
            && mcp::text(&servers).contains("MCP 2026-07-28"),
        "{servers}"
    );
    let rows = &servers["structuredContent"]["servers"];
    let ts = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tsmodern")
        .unwrap();
    assert_eq!(ts["era"], "modern", "{ts}");
    agent.close();
}

#[test]
fn the_python_sdk_server_is_spoken_to_in_2026() {
    let p = Project::new(&modern_config());
    let _down = Down(&p);
    let r = p.run(&["call", "py", "greet", r#"{"name": "Ada"}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout().trim(), "Hello, Ada!");
    let mut agent = mcp::McpClient::bridge(&p);
    let result = agent.call("py__multiply", serde_json::json!({"a": 6, "b": 7}));
    assert_eq!(mcp::text(&result), "42", "{result}");
    let row = ps_row(&p, "py");
    assert_eq!(row["protocol_version"], "2026-07-28", "{row}");
    assert_eq!(row["era"], "modern", "{row}");
    agent.close();
}
