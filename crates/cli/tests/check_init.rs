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

/// A repository's corral.toml that opens Corral up: `check` passes (exit 0: the config
/// is valid and runs safely), but warns of each setting with file, line and key, says
/// it is not applied and how the user opts in; with the opt-in, what is open.
#[test]
fn check_warns_when_the_repository_widens_access() {
    let p = Project::new(&format!(
        r#"[gateway]
auth = "none"
listen = "0.0.0.0:0"

[proxies.web]
target = "http://{}"
listen = "0.0.0.0:0"
"#,
        closed_addr()
    ));
    let file = p.dir.join("corral.toml").display().to_string();
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let err = r.stderr();
    for (at, key, what) in [
        ("2:1", "gateway.auth", "auth = \"none\" is not applied"),
        (
            "3:1",
            "gateway.listen",
            "listen = \"0.0.0.0:0\" is not applied",
        ),
        (
            "7:1",
            "proxies.web.listen",
            "listen = \"0.0.0.0:0\" is not applied",
        ),
    ] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("{file}:{at}: {key}: ")))
            .unwrap_or_else(|| panic!("no warning for {key} at {at}: {err}"));
        assert!(line.starts_with("corral: warning: "), "{line}");
        assert!(line.contains(what), "{line}");
        assert!(
            line.contains(&format!(
                "add \"{}\" to `widen_access` under [trust]",
                p.dir.display()
            )) && line.contains(&p.user_config().display().to_string())
                && line.contains("--allow-widened-access")
                && line.contains("CORRAL_ALLOW_WIDENED_ACCESS=1"),
            "says how to opt in: {line}"
        );
    }
    assert!(
        r.stdout()
            .contains(": ok (0 servers, 0 processes, 1 proxies); 3 warnings"),
        "{r:?}"
    );

    let json = p.run(&["check", "--json"]);
    assert_eq!(json.code(), 0, "{json:?}");
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).unwrap();
    let keys: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["access"].as_str())
        .collect();
    assert_eq!(
        keys,
        ["gateway.auth", "gateway.listen", "proxies.web.listen"],
        "{v}"
    );

    // Opted in (the user config lists the project): still said, plainly.
    p.trust_widening();
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains(&format!("{file}:2:1: gateway.auth: auth = \"none\" applies (allowed by [trust] widen_access in {})", p.user_config().display()))
            && err.contains("requires no token"),
        "{err}"
    );
    assert!(err.contains("listens beyond loopback"), "{err}");

    // A user config with a mistake, or one others can write, is an error (exit 2).
    std::fs::write(p.user_config(), "[trust]\nwiden_acces = [\"*\"]\n").unwrap();
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains(&format!(
            "{}:2:1: trust.widen_acces: unknown key `widen_acces` in [trust]; did you mean `widen_access`?",
            p.user_config().display()
        )),
        "{r:?}"
    );
    p.trust_widening();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p.user_config(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr()
            .contains("refused: its group and every user can write it (mode 666)"),
        "{r:?}"
    );
}
