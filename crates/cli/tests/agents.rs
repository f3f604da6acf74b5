//! Agent sessions on the daemon: however a bridge ends, its session ends with it.

mod common;
use common::mcp::McpClient;
use common::*;
use serde_json::{Value, json};

// No [gateway] listen: these daemons also prove the default port never clashes.
const CFG: &str = r#"
[servers.fx]
command = "{fixture}"
args = ["--log-calls"]
"#;

fn status(p: &Project) -> Value {
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    serde_json::from_str::<Value>(&r.stdout()).unwrap()["daemon"].clone()
}

fn agents(p: &Project) -> u64 {
    status(p)["agents"].as_u64().expect("agents count")
}

fn fx_log(p: &Project) -> String {
    std::fs::read_to_string(p.dir.join(".corral/logs/fx.log")).unwrap_or_default()
}

fn events(p: &Project) -> Vec<Value> {
    let r = p.run(&["events", "--json", "-n", "1000"]);
    assert_eq!(r.code(), 0, "{r:?}");
    r.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Claude Code and Gemini CLI end their stdio servers with a signal: the daemon must
/// close the session, cancel its call on the server and let go of the agent's pipes.
fn bridge_killed_mid_call(signal: i32) {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);
    wait_until("the session is counted", || agents(&p) == 1);

    agent.send_request(
        "tools/call",
        json!({"name": "fx__sleep", "arguments": {"ms": 60_000}}),
    );
    // The server sees the gateway's own request id.
    let mut id = String::new();
    wait_until("the call reaches the server", || {
        let log = fx_log(&p);
        let found = log.lines().find_map(|l| {
            l.strip_prefix("fixture: call ")?
                .strip_suffix(" \"sleep\"")
                .map(str::to_owned)
        });
        id = found.unwrap_or_default();
        !id.is_empty()
    });
    unsafe {
        libc::kill(agent.child.id() as i32, signal);
    }
    let _ = agent.child.wait();

    wait_until("the session is closed", || agents(&p) == 0);
    wait_until("the server hears the call was cancelled", || {
        fx_log(&p).contains(&format!("fixture: cancelled request {id}"))
    });
    agent.wait_stdout_closed();
    assert!(
        agent.stdin_closed(),
        "the daemon still reads the agent's stdin"
    );

    let evs = events(&p);
    let kinds: Vec<&str> = evs.iter().filter_map(|e| e["kind"].as_str()).collect();
    let connected = evs
        .iter()
        .find(|e| e["kind"] == "agent.connected")
        .unwrap_or_else(|| panic!("no agent.connected in {kinds:?}"));
    assert_eq!(connected["transport"], "stdio");
    assert_eq!(connected["client"], "corral-test 1");
    let gone = evs
        .iter()
        .find(|e| e["kind"] == "agent.disconnected")
        .unwrap_or_else(|| panic!("no agent.disconnected in {kinds:?}"));
    assert_eq!(gone["session"], connected["session"]);
    assert_eq!(gone["reason"], "gone");

    // The server itself is fine and serves the next agent.
    let mut next = McpClient::bridge(&p);
    let r = next.call("fx__echo", json!({"text": "still here"}));
    assert_eq!(common::mcp::text(&r), "still here");
}

#[test]
fn sigkill_of_a_bridge_mid_call_closes_its_session_cancels_the_call_and_its_pipes() {
    bridge_killed_mid_call(libc::SIGKILL);
}

#[test]
fn sigterm_of_a_bridge_mid_call_closes_its_session_cancels_the_call_and_its_pipes() {
    bridge_killed_mid_call(libc::SIGTERM);
}

#[test]
fn an_agent_closing_its_input_gets_its_answer_and_a_closed_event() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__sleep", "arguments": {"ms": 300}}),
    );
    // Closing stdin with a call in flight: the answer still comes, then the session ends.
    let r = agent.close_input_and_read(id);
    assert_eq!(common::mcp::text(&r["result"]), "slept 300 ms", "{r}");
    assert!(
        agent.close().success(),
        "the bridge exits when its session ends"
    );
    wait_until("the session is closed", || agents(&p) == 0);
    wait_until("agent.disconnected (closed) is journaled", || {
        events(&p)
            .iter()
            .any(|e| e["kind"] == "agent.disconnected" && e["reason"] == "closed")
    });
}

#[test]
fn down_says_how_many_agents_it_disconnects() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let _a = McpClient::bridge(&p);
    let _b = McpClient::bridge(&p);
    wait_until("two sessions", || agents(&p) == 2);
    let r = p.run(&["down"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(
        r.stdout().contains("2 agent sessions were connected"),
        "{r:?}"
    );
}
