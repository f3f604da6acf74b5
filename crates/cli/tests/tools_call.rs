//! `corral tools` and `corral call` against the fixture: output, exit codes, failures
//! with the stderr lines that explain them, and no process left behind.

mod common;
use common::*;

const TWO: &str = r#"
[servers.fx]
command = "{fixture}"

[servers.other]
command = "{fixture}"
args = ["--tools", "2"]
tools = { allow = ["tool_*"] }
"#;

#[test]
fn tools_lists_namespaced_names_and_honours_allow() {
    let p = Project::new(TWO);
    let r = p.run(&["tools"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let out = r.stdout();
    assert!(out.contains("fx__echo  "), "{out}");
    assert!(out.contains("other__tool_0"), "{out}");
    assert!(!out.contains("other__echo"), "allow filter: {out}");

    let r = p.run(&["tools", "other", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let names = names(&v);
    assert_eq!(names, ["other__tool_0", "other__tool_1"]);
    assert_eq!(v[0]["server"], "other");
    assert_eq!(v[0]["tool"], "tool_0");
    assert_eq!(v[0]["inputSchema"]["type"], "object");
}

#[test]
fn tool_prefix_never_lists_bare_names() {
    let p =
        Project::new("[gateway]\ntool_prefix = \"never\"\n[servers.fx]\ncommand = \"{fixture}\"\n");
    let r = p.run(&["tools"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().lines().any(|l| l.starts_with("echo ")), "{r:?}");
}

#[test]
fn call_prints_text_and_json() {
    let p = Project::new(TWO);
    let r = p.run(&["call", "fx", "echo", r#"{"text": "hello\nworld"}"#]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout(), "hello\nworld\n");
    let r = p.run(&["call", "fx", "echo", r#"{"text":"j"}"#, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["content"][0]["text"], "j");
}

#[test]
fn tool_error_exits_1_with_its_text() {
    let p = Project::new(TWO);
    let r = p.run(&["call", "fx", "fail", r#"{"message":"bad input"}"#]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert_eq!(r.stdout(), "bad input\n");
    assert!(
        r.stderr()
            .contains("tool 'fail' of server 'fx' returned an error"),
        "{r:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let p = Project::new(TWO);
    let r = p.run(&["call", "nope", "echo"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains("configured servers: fx, other"),
        "{r:?}"
    );
    let r = p.run(&["call", "fx", "echo", "[1]"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains("arguments must be a JSON object"),
        "{r:?}"
    );
}

#[test]
fn crash_in_the_middle_of_a_call_exits_1_with_the_stderr_tail() {
    let p = Project::new(TWO);
    let r = p.run(&["call", "fx", "crash", r#"{"code": 5}"#]);
    assert_eq!(r.code(), 1, "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("server 'fx' exited with code 5; last stderr lines:"),
        "{err}"
    );
    assert!(
        err.contains("fixture: crashing in the middle of a call"),
        "{err}"
    );
}

#[test]
fn a_server_failing_at_initialize_shows_its_traceback() {
    let p = Project::new("[servers.py]\ncommand = \"{fixture}\"\nargs = [\"--exit-on-init\"]\n");
    let r = p.run(&["tools"]);
    assert_eq!(r.code(), 1, "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("server 'py' failed to start: exited with code 1 during initialize"),
        "{err}"
    );
    assert!(
        err.contains("ModuleNotFoundError: No module named 'fixture_missing_dep'"),
        "{err}"
    );
}

#[test]
fn a_missing_command_names_command_and_path_without_retrying() {
    let p = Project::new(
        "[servers.x]\ncommand = \"corral-no-such-binary\"\nenv = { PATH = \"/nonexistent\" }\n",
    );
    let r = p.run(&["call", "x", "echo"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(
        r.stderr().contains("server 'x' failed to start: command 'corral-no-such-binary' not found in PATH (searched: /nonexistent)"),
        "{r:?}"
    );
}

#[test]
fn one_broken_server_does_not_hide_the_others_tools() {
    let p = Project::new(
        "[servers.good]\ncommand = \"{fixture}\"\n[servers.bad]\ncommand = \"{fixture}\"\nargs = [\"--exit-at-start\"]\n",
    );
    let r = p.run(&["tools"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(r.stdout().contains("good__echo"), "{r:?}");
    assert!(r.stderr().contains("server 'bad' failed to start"), "{r:?}");
}

#[test]
fn servers_are_stopped_when_the_command_exits() {
    let p = Project::new(
        "[servers.fx]\ncommand = \"{fixture}\"\nargs = [\"--grandchild\", \"--pid-file\", \"fx.pid\"]\n",
    );
    let r = p.run(&["call", "fx", "getpid"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let pid: u32 = r.stdout().trim().parse().unwrap();
    let grandchild = read_pid(&p.dir.join("fx.pid.grandchild"));
    assert!(!alive(pid), "server outlived `corral call`");
    wait_until("grandchild gone", || !alive(grandchild));
    // Its stderr went to the log file.
    assert!(p.dir.join(".corral/logs/fx.log").exists());
}

#[test]
fn call_accepts_the_listed_tool_name_alone_or_after_its_server_standalone() {
    let p = Project::new(TWO);
    listed_names_round_trip(&p, &[]);
}

#[test]
fn call_resolves_names_through_the_catalog_with_tool_prefix_never() {
    // Bare names; the tool both servers offer is kept bare for the first server and
    // prefixed for the other, as the catalog decides.
    let p = Project::new(
        "[gateway]\ntool_prefix = \"never\"\n[servers.a]\ncommand = \"{fixture}\"\n[servers.b]\ncommand = \"{fixture}\"\nargs = [\"--pid-file\", \"b.pid\"]\n",
    );
    let listed = p.run(&["tools", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&listed.stdout()).unwrap();
    let names = names(&v);
    assert!(
        names.contains(&"getpid") && names.contains(&"b__getpid"),
        "{names:?}"
    );
    let r = p.run(&["call", "b__getpid"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(
        r.stdout().trim(),
        std::fs::read_to_string(p.dir.join("b.pid")).unwrap().trim(),
        "b__getpid is b's tool"
    );
    let r = p.run(&["call", "b", "b__getpid"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let r = p.run(&["call", "echo", r#"{"text":"bare"}"#]);
    assert_eq!(r.stdout(), "bare\n", "{r:?}");
    let r = p.run(&["call", "servers"]);
    assert_eq!(r.code(), 0, "the built-in, bare: {r:?}");
}

#[test]
fn call_help_explains_both_forms() {
    let p = Project::new(TWO);
    let r = p.run(&["call", "--help"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let help = r.stdout();
    for needle in [
        "corral call TOOL [JSON]",
        "corral call SERVER TOOL [JSON]",
        "<TOOL|SERVER>",
        "as `corral tools` lists it",
    ] {
        assert!(help.contains(needle), "{needle} missing:\n{help}");
    }
}

/// The fixture in each era mode: one that speaks only 2026-07-28 (every request must carry
/// the modern `_meta`, or it answers -32602), one silent on `server/discover` and one that
/// exits on it (both legacy): all list and call their tools.
#[test]
fn servers_of_either_era_list_and_call_tools() {
    let p = Project::new(
        r#"
[servers.modern]
command = "{fixture}"
args = ["--legacy", "reject"]

[servers.mute]
command = "{fixture}"
args = ["--hang-discover"]
startup_timeout = "3s"

[servers.fragile]
command = "{fixture}"
args = ["--exit-on-discover"]
"#,
    );
    for server in ["modern", "mute", "fragile"] {
        let r = p.run(&["tools", server, "--json"]);
        assert_eq!(r.code(), 0, "{server}: {r:?}");
        let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
        let echo = format!("{server}__echo");
        assert!(names(&v).contains(&echo.as_str()), "{server}: {v}");
        let r = p.run(&["call", server, "add", r#"{"a": 20, "b": 22}"#]);
        assert_eq!(r.code(), 0, "{server}: {r:?}");
        assert_eq!(r.stdout().trim(), "42", "{server}: {r:?}");
    }
}

/// `corral tools` lists Corral's own tools too (`corral call` calls them and suggests
/// them), standalone and through the daemon, where the process and proxy tools join.
#[test]
fn tools_lists_the_built_in_tools_that_call_can_call() {
    let p = Project::new(TWO);
    let builtins = |args: &[&str]| -> Vec<String> {
        let r = p.run(args);
        assert_eq!(r.code(), 0, "{r:?}");
        let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter(|t| t["builtin"] == true)
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let standalone = builtins(&["tools", "--json"]);
    assert!(
        standalone.contains(&"get_errors".to_owned())
            && standalone.contains(&"corral__servers".to_owned()),
        "{standalone:?}"
    );
    assert!(p.run(&["tools"]).stdout().contains("corral__server_logs"));
    let r = p.run(&["call", "corral__servers"]);
    assert_eq!(r.code(), 0, "{r:?}");
    // One server's tools are only its own.
    assert!(builtins(&["tools", "fx", "--json"]).is_empty());

    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let daemon = builtins(&["tools", "--json"]);
    assert!(
        daemon.contains(&"corral__process_start".to_owned()),
        "{daemon:?}"
    );
    assert!(daemon.len() > standalone.len(), "{daemon:?}");
}
