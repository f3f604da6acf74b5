//! Secrets a server prints never reach a file, the console, an event or a tool result;
//! the project's state is private whatever the auth mode; a server's terminal escapes
//! are shown, not obeyed, on a terminal.

mod common;

use common::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Secrets of every shape the redactor knows, one per line, and the config's own.
const CONFIG_SECRET: &str = "cfg-secret-7f3a9b2c";
const SHAPED: &[&str] = &[
    "sk-proj-0123456789abcdefghijKLMNOPQR",
    "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "xoxb-123456789012-abcdefABCDEF",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.e30.sig123",
];
const KEY_BODY: &str = "MIIEowIBAAKCAQEAq7BFUAkEXAMPLEKEYBODYLINE";

fn leaky_config() -> String {
    // The server prints a secret on stdout (noise) before it becomes the fixture.
    format!(
        r#"
[gateway]
auth = "none"

[servers.leaky]
command = "sh"
args = ["-c", "echo 'banner ghp_0123456789abcdefghijABCDEFGHIJ012345 {CONFIG_SECRET}'; exec {{fixture}}"]
env = {{ API_KEY = "{CONFIG_SECRET}" }}
"#
    )
}

fn leak_text() -> String {
    let mut lines = vec![format!("config secret {CONFIG_SECRET}")];
    for s in SHAPED {
        if s.starts_with("eyJ") {
            lines.push(format!("Authorization: Bearer {s}"));
        } else {
            lines.push(format!("token {s}"));
        }
    }
    lines.push("-----BEGIN RSA PRIVATE KEY-----".into());
    lines.push(KEY_BODY.into());
    lines.push("-----END RSA PRIVATE KEY-----".into());
    lines.push("leak done".into());
    lines.join("\n")
}

fn assert_clean(what: &str, text: &str) {
    for secret in SHAPED.iter().chain([&CONFIG_SECRET, &KEY_BODY]) {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_secret_printed_by_a_server_never_reaches_logs_events_or_tools() {
    let p = Project::new(&leaky_config());
    p.trust_widening();
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let call = p.run(&[
        "call",
        "leaky",
        "write_stderr",
        &json!({ "text": leak_text() }).to_string(),
    ]);
    assert_eq!(call.code(), 0, "{call:?}");
    let log = p.dir.join(".corral/logs/leaky.log");
    wait_until("the leak in the server's log", || {
        read(&log).contains("leak done")
    });
    // A crash carries the stderr tail into the event, the journal and the message.
    let crash = p.run(&[
        "call",
        "leaky",
        "write_stderr",
        &json!({ "text": format!("dying with {}", SHAPED[2]) }).to_string(),
    ]);
    assert_eq!(crash.code(), 0, "{crash:?}");
    let crash = p.run(&["call", "leaky", "crash"]);
    assert_ne!(crash.code(), 0, "{crash:?}");
    let journal = p.dir.join(".corral/events.jsonl");
    wait_until("the crash in the journal", || {
        read(&journal).contains("server.crashed")
    });

    let log_text = read(&log);
    assert_clean("the log file", &log_text);
    for shown in [
        "config secret ***",
        "token sk-***",
        "token ghp_***",
        "token github_pat_***",
        "token xoxb-***",
        "token AKIA***",
        "Authorization: Bearer ***",
        "-----BEGIN RSA PRIVATE KEY-----\n***\n-----END RSA PRIVATE KEY-----",
        "[stdout noise] banner ghp_*** ***",
    ] {
        assert!(log_text.contains(shown), "log lacks {shown:?}:\n{log_text}");
    }
    let journal_text = read(&journal);
    assert_clean("the journal", &journal_text);
    assert!(journal_text.contains("server.noise"), "{journal_text}");
    assert!(
        journal_text.contains("dying with ghp_***"),
        "{journal_text}"
    );
    let daemon_log = read(&p.dir.join(".corral/daemon.log"));
    assert_clean("daemon.log", &daemon_log);
    assert!(
        !daemon_log.contains("[server:leaky]"),
        "daemon.log is not a copy of the servers' stderr: {daemon_log}"
    );
    assert_clean("the failure message", &crash.stderr());

    let logs = p.run(&["logs", "leaky", "-n", "100"]);
    assert_eq!(logs.code(), 0, "{logs:?}");
    assert!(logs.stdout().contains("token sk-***"), "{logs:?}");
    assert_clean("corral logs", &logs.stdout());
    let events = p.run(&["events", "-n", "100"]);
    assert_clean("corral events", &events.stdout());
    let events = p.run(&["events", "-n", "100", "--json"]);
    assert_clean("corral events --json", &events.stdout());

    // The tool that gives server output to the agent: the log, and after a restart the
    // new instance's tail (the in-memory ring).
    let tool = p.run(&[
        "call",
        "corral__server_logs",
        r#"{"server":"leaky","lines":200}"#,
    ]);
    assert_eq!(tool.code(), 0, "{tool:?}");
    assert!(tool.stdout().contains("token ghp_***"), "{tool:?}");
    assert_clean("the server_logs tool", &tool.stdout());
    let ps = p.run(&["ps", "--json"]);
    assert_clean("ps", &ps.stdout());
}

#[test]
fn a_secret_on_a_servers_stderr_is_redacted_in_standalone_runs_too() {
    let p = Project::new(&leaky_config());
    let call = p.run(&[
        "call",
        "leaky",
        "write_stderr",
        &json!({ "text": leak_text() }).to_string(),
    ]);
    assert_eq!(call.code(), 0, "{call:?}");
    let log = read(&p.dir.join(".corral/logs/leaky.log"));
    assert!(log.contains("leak done"), "{log}");
    assert_clean("the standalone log", &log);
    assert_clean("call's output", &(call.stdout() + &call.stderr()));
}

/// Every directory under `.corral` is 0700 and every file 0600.
fn assert_private(dir: &Path) {
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{} is {mode:o}", dir.display());
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            assert_private(&path);
        } else {
            let mode = meta.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} is {mode:o}", path.display());
        }
    }
}

#[test]
fn state_files_are_private_whatever_the_auth_mode() {
    for auth in ["none", "token"] {
        let p = Project::new(&format!(
            "[gateway]\nauth = \"{auth}\"\n\n[servers.fx]\ncommand = \"{{fixture}}\"\n"
        ));
        p.trust_widening();
        // Left by an older version: a world-readable state directory and log.
        let logs = p.dir.join(".corral/logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(logs.join("fx.log"), "old line\n").unwrap();
        for (path, mode) in [(&p.dir.join(".corral"), 0o755), (&logs, 0o755)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(logs.join("fx.log"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        {
            let _down = Down(&p);
            let up = p.run(&["up", "-d"]);
            assert_eq!(up.code(), 0, "{up:?}");
            let call = p.run(&["call", "fx", "write_stderr", r#"{"text":"hello"}"#]);
            assert_eq!(call.code(), 0, "{call:?}");
            wait_until("the line in the log", || {
                read(&logs.join("fx.log")).contains("hello")
            });
            assert_private(&p.dir.join(".corral"));
        }
        assert_private(&p.dir.join(".corral"));
        if auth == "token" {
            let token = read(&p.dir.join(".corral/token"));
            let token = token.trim();
            assert!(token.len() >= 32, "{token:?}");
            let daemon_log = read(&p.dir.join(".corral/daemon.log"));
            assert!(
                !daemon_log.contains(token),
                "the detached daemon wrote its token to daemon.log: {daemon_log}"
            );
            assert!(
                daemon_log.contains("bearer token in .corral/token"),
                "{daemon_log}"
            );
        }
    }
}

/// Runs `corral ARGS` in the project under a pseudo-terminal (`script`), returning what
/// the terminal received.
fn on_a_terminal(p: &Project, args: &str) -> String {
    let line = format!(
        "cd '{}' && '{}' {args}",
        p.dir.display(),
        corral().display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("CORRAL_CONFIG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run script(1) (util-linux) to get a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn terminal_escapes_from_a_server_are_shown_escaped_on_a_terminal() {
    let p = Project::new("[gateway]\nauth = \"none\"\n\n[servers.fx]\ncommand = \"{fixture}\"\n");
    p.trust_widening();
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2Jcleared\u{9b}31m";
    let shown = "^[]0;pwned^G^[[2Jcleared\\u{9b}31m";
    let args = json!({ "text": evil }).to_string();
    let call = p.run(&["call", "fx", "write_stderr", &args]);
    assert_eq!(call.code(), 0, "{call:?}");
    let log = p.dir.join(".corral/logs/fx.log");
    wait_until("the line in the log", || read(&log).contains("cleared"));
    // Files and pipes keep the bytes as they are.
    assert!(read(&log).contains(evil), "the log file keeps the bytes");
    assert!(p.run(&["logs", "fx"]).stdout().contains(evil));
    let json_logs: Vec<Value> = p
        .run(&["logs", "fx", "--json"])
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(json_logs.iter().any(|v| v["line"] == evil), "{json_logs:?}");

    // A terminal gets them escaped: `logs`, `call`'s tool result, `events`.
    let logs = on_a_terminal(&p, "logs fx");
    assert!(logs.contains(shown), "{logs:?}");
    assert!(!logs.contains('\u{1b}'), "{logs:?}");
    let echo = json!({ "text": evil }).to_string();
    let call = on_a_terminal(&p, &format!("call fx echo '{echo}'"));
    assert!(call.contains(shown), "{call:?}");
    assert!(!call.contains('\u{1b}'), "{call:?}");
    let _ = p.run(&["call", "fx", "crash"]);
    let journal = p.dir.join(".corral/events.jsonl");
    wait_until("the crash in the journal", || {
        read(&journal).contains("server.crashed")
    });
    let events = on_a_terminal(&p, "events -n 50");
    assert!(events.contains("server.crashed"), "{events:?}");
    assert!(
        events.contains(shown),
        "the crash's stderr tail: {events:?}"
    );
    assert!(!events.contains('\u{1b}'), "{events:?}");
}
