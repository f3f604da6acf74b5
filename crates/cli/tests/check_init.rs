//! `corral check` and `corral init` through the real binary.

mod common;
use common::*;

#[test]
fn check_reports_every_problem_with_file_line_and_key_and_exits_2() {
    let p = Project::new(
        r#"[servers.a]
comand = "x"

[servers.b]
command = "y"
restart = "sometimes"
startup_timeout = 30
"#,
    );
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("corral.toml:2:1: servers.a.comand: unknown key"),
        "{err}"
    );
    assert!(err.contains("did you mean `command`"), "{err}");
    assert!(
        err.contains("corral.toml:6:11: servers.b.restart: unknown value \"sometimes\""),
        "{err}"
    );
    assert!(err.contains("corral.toml:7:"), "{err}");
    assert!(err.contains("servers.b.startup_timeout"), "{err}");
}

#[test]
fn check_passes_on_a_good_config() {
    let p = Project::new("[servers.fx]\ncommand = \"{fixture}\"\n");
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains("ok (1 servers"), "{r:?}");
}

#[test]
fn no_config_anywhere_names_the_fix() {
    let p = Project::new("");
    std::fs::remove_file(p.dir.join("corral.toml")).unwrap();
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(r.stderr().contains("run `corral init`"), "{r:?}");
}

#[test]
fn init_imports_mcp_json_and_the_result_checks_clean() {
    let p = Project::new("");
    std::fs::remove_file(p.dir.join("corral.toml")).unwrap();
    p.write(
        ".mcp.json",
        r#"{"mcpServers": {"fx": {"command": "{fixture}", "args": ["--banner", "hi"], "env": {"API_TOKEN": "${TOKEN}"}}}}"#,
    );
    let r = p.run(&["init"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let text = std::fs::read_to_string(p.dir.join("corral.toml")).unwrap();
    assert!(text.contains("[servers.fx]"), "{text}");
    assert!(
        text.contains("${env:TOKEN}"),
        "secrets stay references: {text}"
    );
    // A second init refuses to overwrite.
    assert_eq!(p.run(&["init"]).code(), 1);
    let mut c = p.cmd(&["tools", "--json"]);
    let out = c.env("TOKEN", "s3cret-value").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"fx__echo\""));
}

#[test]
fn a_mcp_json_file_is_accepted_as_the_config() {
    let p = Project::new("");
    std::fs::remove_file(p.dir.join("corral.toml")).unwrap();
    p.write(
        ".mcp.json",
        r#"{"mcpServers": {"fx": {"command": "{fixture}"}}}"#,
    );
    let r = p.run(&["call", "fx", "add", r#"{"a": 1, "b": 2}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout(), "3\n");
}
