//! The official Python SDK client (PyPI `mcp`) drives Corral, which fronts the reference
//! server-everything (npm) and the fixture: list tools, call two servers at once, receive
//! progress and list_changed — over stdio (`corral mcp`) and Streamable HTTP (`corral up`).

mod common;
use common::http::Up;
use common::*;

fn config(listen: bool) -> String {
    let peers = peers();
    format!(
        r#"{gateway}
[servers.fx]
command = "{{fixture}}"

[servers.everything]
command = "node"
args = ["{peers}/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"]
"#,
        gateway = if listen {
            "[gateway]\nlisten = \"127.0.0.1:0\"\n"
        } else {
            ""
        },
        peers = peers.display()
    )
}

fn run_client(args: &[&str]) -> serde_json::Value {
    let python = peers().join("venv/bin/python");
    let script = repo().join("tests/peers/py_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check(seen: &serde_json::Value) {
    let tools = strings(&seen["tools"]);
    assert!(
        tools.contains(&"fx__echo") && tools.contains(&"everything__echo"),
        "{tools:?}"
    );
    assert_eq!(seen["slow"], "slept 300 ms");
    assert_eq!(seen["quick"], "Echo: from python");
    assert_eq!(
        seen["progress"],
        serde_json::json!([1.0, 2.0, 3.0]),
        "{seen}"
    );
    assert_eq!(seen["long_op_error"], false);
    let after = strings(&seen["tools_after_change"]);
    assert!(
        after.contains(&"fx__extra") && !after.contains(&"fx__add"),
        "{after:?}"
    );
}

#[test]
fn python_client_over_stdio() {
    let p = Project::new(&config(false));
    let seen = run_client(&[
        "stdio",
        &corral().to_string_lossy(),
        &p.dir.join("corral.toml").to_string_lossy(),
    ]);
    check(&seen);
}

#[test]
fn python_client_over_http() {
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let seen = run_client(&["http", &up.url, &up.token]);
    check(&seen);
}

#[test]
fn python_client_through_the_daemon_bridge() {
    let p = Project::new(&config(false));
    let _down = Down(&p);
    let seen = run_client(&[
        "bridge",
        &corral().to_string_lossy(),
        &p.dir.join("corral.toml").to_string_lossy(),
    ]);
    check(&seen);
}
