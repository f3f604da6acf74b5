//! Corral listed as one of its own servers — what the README's `.mcp.json` entry plus
//! `corral init` used to produce — is skipped on import, refused in `corral.toml`,
//! skipped in an `.mcp.json` used as the config, and a bridge never connects to the
//! daemon it runs under.

mod common;
use common::*;
use serde_json::Value;

/// The `.mcp.json` the README tells users to write, plus one real server.
const MCP_JSON: &str = r#"{"mcpServers": {
  "corral": {"command": "corral", "args": ["mcp"]},
  "fx": {"command": "{fixture}"}
}}"#;

fn without_corral_toml() -> Project {
    let p = Project::new("");
    std::fs::remove_file(p.dir.join("corral.toml")).unwrap();
    p
}

#[test]
fn init_skips_the_corral_mcp_entry_of_mcp_json_with_a_note_in_the_file_and_on_stdout() {
    let p = without_corral_toml();
    p.write(".mcp.json", MCP_JSON);
    let r = p.run(&["init"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stdout()
            .contains("not imported: server 'corral' runs Corral itself (`corral mcp`)"),
        "{r:?}"
    );
    let text = std::fs::read_to_string(p.dir.join("corral.toml")).unwrap();
    assert!(text.contains("[servers.fx]"), "{text}");
    assert!(!text.contains("[servers.corral]"), "{text}");
    assert!(
        text.contains("# Not imported: server 'corral' runs Corral itself"),
        "{text}"
    );
    let check = p.run(&["check"]);
    assert_eq!(check.code(), 0, "{check:?}");
    assert!(check.stdout().contains("ok (1 servers"), "{check:?}");
}

#[test]
fn check_and_up_refuse_corral_itself_in_corral_toml_naming_the_server_and_the_fix() {
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"

[servers.byname]
command = "corral"
args = ["-c", "corral.toml", "mcp"]

[servers.bypath]
command = "{corral}"
args = ["tools"]
"#,
    );
    let _down = Down(&p);
    for args in [&["check"][..], &["up", "-d"]] {
        let r = p.run(args);
        assert_eq!(r.code(), 2, "{args:?}: {r:?}");
        let err = r.stderr();
        assert!(
            err.contains(
                "servers.byname.command: server 'byname' runs Corral itself (`corral -c corral.toml mcp`)"
            ),
            "{err}"
        );
        assert!(err.contains("remove the [servers.byname] table"), "{err}");
        assert!(
            err.contains("servers.bypath.command: server 'bypath' runs Corral itself"),
            "{err}"
        );
        assert!(err.contains("remove the [servers.bypath] table"), "{err}");
    }
    assert!(
        !p.dir.join(".corral/daemon.pid").exists(),
        "no daemon may start"
    );
}

#[test]
fn a_mcp_json_config_skips_corral_itself_with_a_warning_and_runs_the_rest() {
    let p = without_corral_toml();
    p.write(".mcp.json", MCP_JSON);
    let r = p.run(&["tools", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let list: Value = serde_json::from_str(&r.stdout()).unwrap();
    let names = names(&list);
    assert!(names.contains(&"fx__echo"), "{names:?}");
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["server"] == "corral"),
        "{names:?}"
    );
    assert!(
        r.stderr().contains("corral: note: ")
            && r.stderr()
                .contains("server 'corral' runs Corral itself (`corral mcp`)"),
        "{r:?}"
    );
    assert!(r.stderr().contains("skipped"), "{r:?}");
}

#[test]
fn a_bridge_refuses_to_connect_to_the_daemon_it_runs_under() {
    // A wrapper the config check cannot see through: only the daemon's environment
    // tells the bridge where it runs.
    let p = Project::new(
        r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"

[servers.wrapped]
command = "sh"
args = ["-c", "exec '{corral}' mcp"]
restart = "never"
"#,
    );
    let _down = Down(&p);
    let up = p.run(&["up", "-d"]);
    assert_eq!(up.code(), 0, "{up:?}");
    let state = |p: &Project| -> Value {
        let r = p.run(&["ps", "--json"]);
        let v: Value = serde_json::from_str(&r.stdout()).unwrap();
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "wrapped")
            .cloned()
            .unwrap()
    };
    wait_until("the wrapped bridge to fail", || {
        state(&p)["state"] == "failed"
    });
    let logs = p.run(&["logs", "wrapped"]);
    assert!(
        logs.stdout().contains(
            "`corral mcp` runs as server 'wrapped' of the project daemon it would connect to"
        ),
        "{logs:?}"
    );
    assert!(
        logs.stdout().contains("remove server 'wrapped' from"),
        "{logs:?}"
    );
    // The daemon is unharmed: one session at most (none from the refused bridge), and
    // the other server works.
    let ps = p.run(&["ps", "--json"]);
    let v: Value = serde_json::from_str(&ps.stdout()).unwrap();
    assert_eq!(v["daemon"]["agents"], 0, "{v}");
    let call = p.run(&["call", "fx", "echo", r#"{"text":"fine"}"#]);
    assert_eq!(call.stdout(), "fine\n", "{call:?}");
}
