//! Corral's process tools through `corral mcp` (a real bridge to a real daemon): list,
//! output, start, stop, restart and wait on real programs, and the alert a traceback
//! raises.

mod common;
use common::mcp::{McpClient, text};
use common::*;
use serde_json::{Value, json};

/// Prints one line on each stream, then a tick every 100 ms, forever.
const TICKER: &str = r#"
[processes.ticker]
command = ["python3", "-u", "-c", "import sys, time\nprint('out one')\nprint('err one', file=sys.stderr)\ni = 0\nwhile True:\n    i += 1\n    print(f'tick {i}')\n    time.sleep(0.1)\n"]
"#;

fn processes(agent: &mut McpClient) -> Vec<Value> {
    let r = agent.call("corral__processes", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"]["processes"]
        .as_array()
        .expect("processes")
        .clone()
}

fn process(agent: &mut McpClient, name: &str) -> Value {
    processes(agent)
        .into_iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no process {name} listed"))
}

/// The `process_output` text, asserted to be no error.
fn output(agent: &mut McpClient, args: Value) -> String {
    let r = agent.call("corral__process_output", args);
    assert_eq!(r["isError"], false, "{r}");
    text(&r).to_owned()
}

/// The output lines (after the header line).
fn lines(out: &str) -> Vec<&str> {
    out.lines().skip(1).collect()
}

/// The number in the newest `tick N` line, once there is one.
fn last_tick(agent: &mut McpClient) -> Option<u64> {
    let out = output(
        agent,
        json!({"name": "ticker", "grep": "^tick [0-9]+$", "stream": "stdout", "last": 1}),
    );
    let line = lines(&out).pop()?.to_owned();
    Some(line.strip_prefix("tick ")?.parse().expect("tick N"))
}

#[test]
fn configured_process_list_output_stop_start_restart() {
    let p = Project::new(TICKER);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);

    let tools = agent.tool_names();
    for t in [
        "corral__processes",
        "corral__process_start",
        "corral__process_output",
        "corral__process_stop",
        "corral__process_restart",
        "corral__process_wait",
    ] {
        assert!(tools.iter().any(|n| n == t), "{t} not in {tools:?}");
    }
    let instructions = agent.init["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("`corral__process_start` starts one")
            && instructions.contains("`corral__process_wait` waits"),
        "{instructions}"
    );

    let mut row = Value::Null;
    wait_until("ticker is listed ready", || {
        row = process(&mut agent, "ticker");
        row["state"] == "ready"
    });
    let pid = row["pid"].as_u64().expect("a pid") as u32;
    assert!(alive(pid), "{row}");
    assert_eq!(row["restarts"], 0, "{row}");
    assert_eq!(row["ready"], true, "{row}");
    assert!(
        row["command"]
            .as_str()
            .unwrap()
            .starts_with("python3 -u -c")
    );
    let r = agent.call("corral__processes", json!({}));
    assert!(
        text(&r).contains(&format!("ticker: ready, pid {pid}")),
        "{}",
        text(&r)
    );

    wait_until("three ticks", || {
        last_tick(&mut agent).is_some_and(|n| n >= 3)
    });
    // Both streams, each line tagged.
    let all = output(&mut agent, json!({"name": "ticker", "last": 1000}));
    assert!(all.contains("[stdout] out one"), "{all}");
    assert!(all.contains("[stderr] err one"), "{all}");
    assert!(all.contains("[stdout] tick 1\n"), "{all}");
    // One stream: untagged, only its lines.
    let err = output(&mut agent, json!({"name": "ticker", "stream": "stderr"}));
    assert_eq!(lines(&err), vec!["err one"], "{err}");
    // grep and last N.
    let two = output(
        &mut agent,
        json!({"name": "ticker", "grep": "^tick", "stream": "stdout", "last": 2}),
    );
    let two = lines(&two);
    assert_eq!(two.len(), 2, "{two:?}");
    assert!(two.iter().all(|l| l.starts_with("tick ")), "{two:?}");
    let first = output(
        &mut agent,
        json!({"name": "ticker", "stream": "stdout", "first": 2}),
    );
    assert_eq!(lines(&first), vec!["out one", "tick 1"], "{first}");
    let recent = output(
        &mut agent,
        json!({"name": "ticker", "since": "10m", "grep": "one"}),
    );
    assert_eq!(lines(&recent).len(), 2, "{recent}");

    // Errors a user expects to be told.
    let r = agent.call(
        "corral__process_output",
        json!({"name": "ticker", "grep": "tick ("}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("`grep` \"tick (\" is not a valid regex"),
        "{}",
        text(&r)
    );
    let r = agent.call("corral__process_output", json!({"name": "nope"}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("no process named 'nope'; processes: ticker."),
        "{}",
        text(&r)
    );

    // Stop, then start again.
    let r = agent.call("corral__process_stop", json!({"name": "ticker"}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(
        text(&r).contains("process 'ticker' stopped"),
        "{}",
        text(&r)
    );
    let row = process(&mut agent, "ticker");
    assert_eq!(row["state"], "stopped", "{row}");
    assert_eq!(row["pid"], Value::Null, "{row}");
    wait_until("the stopped ticker is gone", || !alive(pid));

    let r = agent.call("corral__process_start", json!({"name": "ticker"}));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["state"], "ready", "{r}");
    assert_eq!(r["structuredContent"]["run"], 2, "{r}");
    assert!(
        text(&r).contains("out one"),
        "first lines shown: {}",
        text(&r)
    );
    let pid2 = r["structuredContent"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(pid2, pid);
    assert!(alive(pid2));

    // Restart: a new pid, one more restart, ready again.
    let r = agent.call("corral__process_restart", json!({"name": "ticker"}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(
        text(&r).contains("process 'ticker' restarted: ready"),
        "{}",
        text(&r)
    );
    // Its first lines are the new run's only (lines of several runs would be
    // separated by `── run N ──`).
    let first_lines = text(&r).split("first lines:\n").nth(1).unwrap();
    assert!(first_lines.contains("[stdout] out one"), "{}", text(&r));
    assert!(!first_lines.contains("── run"), "{}", text(&r));
    let row = process(&mut agent, "ticker");
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["restarts"], 1, "{row}");
    assert_eq!(row["runs"], 3, "{row}");
    assert_ne!(row["pid"].as_u64().unwrap() as u32, pid2);

    // The runs show in the output.
    wait_until("run 3 printed", || {
        output(&mut agent, json!({"name": "ticker", "last": 1000})).contains("── run 3 ──")
    });
    let all = output(&mut agent, json!({"name": "ticker", "last": 1000}));
    assert!(all.contains("── run 2 ──"), "{all}");
}

#[test]
fn a_traceback_in_the_users_code_is_one_alert_with_the_exception_and_file_line() {
    let p = Project::new(
        r#"
[processes.app]
command = ["python3", "app.py"]
"#,
    );
    // The exception is raised in the user's `hook`, called by the standard library's
    // json decoder: the alert must point at app.py's line 6, not at json/decoder.py.
    p.write(
        "app.py",
        r#"import json
import time
import traceback

def hook(obj):
    raise ValueError("bad record: " + json.dumps(obj))

def main():
    try:
        json.loads('{"boom": 1}', object_hook=hook)
    except ValueError:
        traceback.print_exc()
    print("still running", flush=True)
    while True:
        time.sleep(1)

main()
"#,
    );
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);
    let mut row = Value::Null;
    wait_until("the alert is listed", || {
        row = process(&mut agent, "app");
        !row["alert"].is_null()
    });
    assert_eq!(row["state"], "ready", "{row}");
    assert_eq!(row["alerts"], 1, "exactly one alert: {row}");
    let alert = &row["alert"];
    assert_eq!(
        alert["message"], "ValueError: bad record: {\"boom\": 1}",
        "{row}"
    );
    assert_eq!(alert["location"], "app.py:6", "{row}");
    assert_eq!(alert["count"], 1, "{row}");
    assert_eq!(row["last_alert"], alert["message"], "{row}");
    let r = agent.call("corral__processes", json!({}));
    assert!(
        text(&r).contains("latest alert: ValueError: bad record: {\"boom\": 1} at app.py:6"),
        "{}",
        text(&r)
    );

    // The traceback is in the output too, and the process keeps running: still one alert.
    let out = output(&mut agent, json!({"name": "app", "stream": "stderr"}));
    assert!(out.contains("Traceback (most recent call last):"), "{out}");
    assert!(out.contains("json/decoder.py"), "{out}");
    wait_until("still running", || {
        output(&mut agent, json!({"name": "app", "grep": "still running"}))
            .contains("[stdout] still running")
    });
    let row = process(&mut agent, "app");
    assert_eq!(
        (row["state"].as_str(), row["alerts"].as_u64()),
        (Some("ready"), Some(1)),
        "{row}"
    );
}

#[test]
fn ad_hoc_processes_and_waits() {
    let p = Project::new(TICKER);
    std::fs::create_dir(p.dir.join("sub")).unwrap();
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);

    // A shell line: its first output comes back with the start.
    let r = agent.call(
        "corral__process_start",
        json!({"name": "hello", "command": "echo hi; sleep 30"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["state"], "ready", "{r}");
    assert!(
        text(&r).contains("process 'hello' started: ready, pid "),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("\n[stdout] hi"), "{}", text(&r));
    let out = output(&mut agent, json!({"name": "hello"}));
    assert_eq!(lines(&out), vec!["[stdout] hi"], "{out}");
    let row = process(&mut agent, "hello");
    assert_eq!(row["command"], "echo hi; sleep 30", "{row}");

    // The name is taken now.
    let r = agent.call(
        "corral__process_start",
        json!({"name": "hello", "command": "echo again"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("a process named 'hello' exists already")
            && text(&r)
                .contains("`corral__process_restart` with {\"name\": \"hello\"} restarts it"),
        "{}",
        text(&r)
    );
    for (args, expect) in [
        (
            json!({"name": "../evil", "command": "true"}),
            "process name \"../evil\" may only contain letters, digits",
        ),
        // Regression (issue "14. Hardening", item 7): a name carries no terminal escape
        // into `ps`, `errors` or `events`; the agent's rule is the config's.
        (
            json!({"name": "x\u{1b}]0;pwned\u{7}", "command": "true"}),
            "may only contain letters, digits, '_' and '-'",
        ),
        (
            json!({"name": "dotted.name", "command": "true"}),
            "may only contain letters, digits, '_' and '-'",
        ),
        (
            json!({"name": "x", "command": "true", "cwd": "missing"}),
            "`cwd` ",
        ),
        (json!({"name": "nothing"}), "no process named 'nothing'"),
    ] {
        let r = agent.call("corral__process_start", args);
        assert_eq!(r["isError"], true, "{r}");
        assert!(text(&r).contains(expect), "{}", text(&r));
    }

    // An argv array, in a subdirectory, with env.
    let r = agent.call(
        "corral__process_start",
        json!({"name": "where", "command": ["sh", "-c", "echo \"$PWD $GREETING\"; sleep 30"],
               "cwd": "sub", "env": {"GREETING": "hello there"}}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let sub = p.dir.join("sub");
    wait_until("the argv process printed", || {
        output(&mut agent, json!({"name": "where"}))
            .contains(&format!("{} hello there", sub.display()))
    });

    // Wait for a line printed after the call began.
    wait_until("ticker ticks", || {
        process(&mut agent, "ticker")["state"] == "ready" && last_tick(&mut agent).is_some()
    });
    let before = last_tick(&mut agent).unwrap();
    let r = agent.call(
        "corral__process_wait",
        json!({"name": "ticker", "pattern": "^tick [0-9]+$", "timeout": 30}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["outcome"], "matched", "{r}");
    let line = r["structuredContent"]["line"]["text"].as_str().unwrap();
    let n: u64 = line.strip_prefix("tick ").unwrap().parse().unwrap();
    assert!(n > before, "a new line: {line} after tick {before}");
    assert!(
        text(&r).contains(&format!("printed on stdout:\n{line}")),
        "{}",
        text(&r)
    );

    // A timeout, for a pattern and for a port that is closed.
    let r = agent.call(
        "corral__process_wait",
        json!({"name": "ticker", "pattern": "never printed", "timeout": 0.5}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["outcome"], "timed_out", "{r}");
    assert!(
        text(&r).contains("timed out after 0.5s: no new line matched /never printed/"),
        "{}",
        text(&r)
    );
    // Reserved (bound, not listening) for the test's life; listen.py binds it with
    // SO_REUSEPORT once it starts listening.
    let reserved = common::port::reserve_port();
    let port = reserved.port;
    p.write(
        "listen.py",
        &format!(
            "import os, socket, time\n\
             while not os.path.exists('go'):\n    time.sleep(0.05)\n\
             s = socket.socket()\n\
             s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n\
             s.bind(('127.0.0.1', {port}))\n\
             s.listen()\n\
             print('listening', flush=True)\n\
             time.sleep(60)\n"
        ),
    );
    let r = agent.call(
        "corral__process_start",
        json!({"name": "web", "command": ["python3", "listen.py"]}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let r = agent.call(
        "corral__process_wait",
        json!({"name": "web", "port": port, "timeout": "1s"}),
    );
    assert_eq!(r["structuredContent"]["outcome"], "timed_out", "{r}");
    assert!(
        text(&r).contains(&format!("port 127.0.0.1:{port}: not ready after")),
        "{}",
        text(&r)
    );
    // The port opens while the wait runs.
    let id = agent.send_request(
        "tools/call",
        json!({"name": "corral__process_wait",
               "arguments": {"name": "web", "port": format!("127.0.0.1:{port}"), "timeout": 60}}),
    );
    std::fs::write(p.dir.join("go"), "").unwrap();
    let r = agent.response(id)["result"].clone();
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["outcome"], "port_open", "{r}");
    assert!(
        text(&r).contains(&format!("127.0.0.1:{port} accepts connections")),
        "{}",
        text(&r)
    );

    // The process exits while the wait runs: said at once, with its exit code. It exits
    // 2 s after the file appears, long after the wait (sent first) began.
    let r = agent.call(
        "corral__process_start",
        json!({"name": "quitter",
               "command": "echo waiting; while [ ! -e stop ]; do sleep 0.05; done; sleep 2; echo bye; exit 3"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let id = agent.send_request(
        "tools/call",
        json!({"name": "corral__process_wait",
               "arguments": {"name": "quitter", "pattern": "never printed", "timeout": 120}}),
    );
    std::fs::write(p.dir.join("stop"), "").unwrap();
    let r = agent.response(id)["result"].clone();
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["outcome"], "exited", "{r}");
    assert_eq!(r["structuredContent"]["last_exit"]["code"], 3, "{r}");
    assert_eq!(r["structuredContent"]["state"], "failed", "{r}");
    assert!(
        text(&r).contains("process 'quitter' exited with code 3"),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("[stdout] bye"), "{}", text(&r));
    assert!(
        r["structuredContent"]["elapsed_ms"].as_u64().unwrap() < 60_000,
        "not the timeout: {r}"
    );

    // A wait on a process that is not running says so at once.
    let r = agent.call(
        "corral__process_wait",
        json!({"name": "quitter", "pattern": "x"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("process 'quitter' is not running (failed: exited with code 3")
            && text(&r).contains("`corral__process_start` starts it"),
        "{}",
        text(&r)
    );
}

/// `corral mcp --standalone` runs the config's processes in its own process, and its
/// gateway offers the process tools over them as the daemon's does.
#[test]
fn the_standalone_gateway_offers_the_process_tools_over_its_own_processes() {
    let p = Project::new(TICKER);
    let mut agent = McpClient::start(&p);
    let tools = agent.tool_names();
    for t in [
        "corral__servers",
        "corral__processes",
        "corral__process_output",
    ] {
        assert!(tools.iter().any(|n| n == t), "{t}: {tools:?}");
    }
    let instructions = agent.init["instructions"].as_str().unwrap();
    assert!(instructions.contains("corral__processes"), "{instructions}");
    let listed = processes(&mut agent);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["name"], "ticker", "{listed:?}");
}
