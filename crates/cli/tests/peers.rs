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
