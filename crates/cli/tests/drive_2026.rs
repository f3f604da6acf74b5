//! A 2026-07-28 server's multi round-trip requests (`input_required`) through Corral, to
//! agents of either era (bridge B, ARCHITECTURE.md "MCP revisions"): a 2026 agent gets
//! them untouched and its retry reaches the server as it was sent; a 2025 agent is asked
//! with ordinary elicitation/sampling requests on its session while Corral retries the
//! server. The server is the fixture in `--modern --conformance` mode (its
//! `test_elicitation` / `test_sampling` ask the 2026 way and verify the echoed
//! `requestState`) and the real TypeScript server SDK; the agents are raw sessions and
//! the real TypeScript client in both modes, over stdio and Streamable HTTP.

mod common;
use common::http::Up;
use common::raw::Raw;
use common::*;
use serde_json::{Value, json};
use std::io::Write;

fn config(listen: bool) -> String {
    format!(
        "{}[servers.fx]\ncommand = \"{{fixture}}\"\nargs = [\"--modern\", \"--conformance\"]\n",
        if listen {
            "[gateway]\nlisten = \"127.0.0.1:0\"\n\n"
        } else {
            ""
        }
    )
}

fn is_request(m: &Value, method: &str) -> bool {
    m["method"] == method && m.get("id").is_some()
}

/// Answers Corral's request `req` with `result`.
fn answer(agent: &mut mcp::McpClient, req: &Value, result: Value) {
    agent.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}));
}

#[test]
fn a_2025_agent_answers_a_2026_servers_questions_on_its_session() {
    let p = Project::new(&config(false));
    let mut agent =
        mcp::McpClient::start_with(&p, json!({"elicitation": {}, "sampling": {}, "roots": {}}));

    // Elicitation, after a round that carried only the server's state.
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": {"message": "Who are you?", "state_rounds": 1}}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    assert!(
        ask["id"].as_str().is_some_and(|i| i.starts_with("corral-")),
        "{ask}"
    );
    assert_eq!(ask["params"]["message"], "Who are you?", "{ask}");
    assert_eq!(ask["params"]["requestedSchema"]["type"], "object", "{ask}");
    answer(
        &mut agent,
        &ask,
        json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}),
    );
    let r = agent.response(id);
    let result = &r["result"];
    assert_eq!(
        mcp::text(result),
        r#"User response: action=accept, content={"email":"ada@example.com","username":"ada"}"#,
        "{r}"
    );
    assert!(result.get("isError").is_none_or(|e| e == false), "{r}");
    // A 2025 agent gets a 2025 result: no 2026-only members.
    for k in ["resultType", "ttlMs", "cacheScope"] {
        assert!(result.get(k).is_none(), "{k} in {r}");
    }

    // Sampling, two rounds: each round's answer alone goes upstream, the server's state
    // carries the first one into the second round.
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_sampling", "arguments": {"prompt": "Say hi", "rounds": 2}}),
    );
    for n in 1..=2 {
        let ask = agent.wait_for("sampling/createMessage", |m| {
            is_request(m, "sampling/createMessage")
        });
        assert_eq!(
            ask["params"]["messages"][0]["content"]["text"], "Say hi",
            "{ask}"
        );
        answer(
            &mut agent,
            &ask,
            json!({"model": "m", "role": "assistant", "content": {"type": "text", "text": format!("hi {n}")}}),
        );
    }
    let r = agent.response(id);
    assert_eq!(mcp::text(&r["result"]), "LLM response: hi 1; hi 2", "{r}");
    agent.close();
}

#[test]
fn a_2025_agent_without_the_capability_gets_a_tool_error_naming_it() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"sampling": {}}));
    let r = agent.request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": {"message": "?"}}),
    );
    let result = &r["result"];
    assert_eq!(result["isError"], true, "{r}");
    let text = mcp::text(result);
    assert!(
        text.contains("fx") && text.contains("elicitation") && text.contains("did not declare"),
        "{r}"
    );
    // Nothing was asked of the agent, and the session goes on.
    assert!(
        !agent
            .other
            .iter()
            .any(|m| m.get("method").is_some() && m.get("id").is_some()),
        "{:?}",
        agent.other
    );
    let r = agent.call("fx__echo", json!({"text": "still here"}));
    assert_eq!(mcp::text(&r), "still here");
    agent.close();
}

#[test]
fn a_server_that_keeps_asking_is_stopped_after_the_round_cap() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}}));
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": {"message": "again?", "rounds": 50}}),
    );
    let mut asked = 0;
    let r = loop {
        let m = agent.wait_for("a question or the response", |m| {
            is_request(m, "elicitation/create") || (m["id"] == id && m.get("method").is_none())
        });
        if m.get("method").is_none() {
            break m;
        }
        asked += 1;
        answer(
            &mut agent,
            &m,
            json!({"action": "accept", "content": {"username": "a", "email": "b"}}),
        );
    };
    assert_eq!(asked, 8, "{r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(mcp::text(&r["result"]).contains("after 8 rounds"), "{r}");
    agent.close();
}

#[test]
fn a_question_the_agent_never_answers_fails_the_call_at_the_input_deadline() {
    let p = Project::new(&config(false));
    // The deadline a parked call waits for its retry bounds a driven round too.
    let mut c = Raw::start_with(&p, &[("CORRAL_INPUT_TTL_MS", "300")]);
    let init = c.ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    writeln!(
        c.stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(
        c.stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"fx__test_elicitation","arguments":{{"message":"anyone?"}}}}}}"#
    )
    .unwrap();
    // (Notifications, such as a list change, may come in between.)
    let next = |what: &str, pred: &dyn Fn(&Value) -> bool| loop {
        let line = c
            .lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {what}"));
        let m: Value = serde_json::from_str(&line).unwrap();
        if pred(&m) {
            break m;
        }
    };
    next("question", &|m| is_request(m, "elicitation/create"));
    // Not answered: the call fails, naming the server and the deadline.
    let r = next("answer to the call", &|m| m["id"] == 2);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("did not answer") && text.contains("'fx'") && text.contains("300ms"),
        "{r}"
    );
    // The session goes on.
    let r = c.ask(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"still here"}}}"#,
    );
    assert_eq!(r["result"]["content"][0]["text"], "still here", "{r}");
}

#[test]
fn cancelling_the_agents_call_withdraws_corrals_question() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}}));
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": {"message": "wait"}}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    agent.notify(
        "notifications/cancelled",
        Some(json!({"requestId": id, "reason": "user pressed stop"})),
    );
    let note = agent.wait_for("notifications/cancelled", |m| {
        m["method"] == "notifications/cancelled"
    });
    assert_eq!(note["params"]["requestId"], ask["id"], "{note}");
    // The cancelled call is not answered; the session goes on.
    let r = agent.call("fx__echo", json!({"text": "next"}));
    assert_eq!(mcp::text(&r), "next");
    assert!(
        !agent
            .other
            .iter()
            .any(|m| m["id"] == id && m.get("method").is_none()),
        "{:?}",
        agent.other
    );
    agent.close();
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}"#;

/// A 2026 agent's raw lines: the server's `input_required` reaches it as the server sent
/// it (never with a cache hint), and its retry's answers and state reach the server as
/// it sent them (the fixture refuses a state changed by one byte).
#[test]
fn a_2026_agent_gets_input_required_untouched_and_its_retry_reaches_the_server() {
    let p = Project::new(&config(false));
    let mut c = Raw::start(&p);
    let mut ask = |line: String| c.ask_text(&line);
    let call = |id: u32, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"fx__test_elicitation","arguments":{{"message":"Name?"}}{extra},{META}}}}}"#
        )
    };
    let first = ask(call(1, ""));
    let v: Value = serde_json::from_str(&first).unwrap();
    let result = &v["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert!(
        result.get("ttlMs").is_none() && result.get("cacheScope").is_none(),
        "{first}"
    );
    assert_eq!(
        result["inputRequests"]["ask0"]["method"], "elicitation/create",
        "{first}"
    );
    // The state as raw JSON text, exactly as it came.
    let state_at = first.find(r#""requestState":"#).unwrap() + r#""requestState":"#.len();
    let state: Box<serde_json::value::RawValue> =
        serde_json::Deserializer::from_str(&first[state_at..])
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
    let state = state.get();
    let answers =
        r#""inputResponses":{"ask0":{"action":"accept","content":{"username":"ada","email":"e"}}}"#;
    let done = ask(call(2, &format!(",{answers},\"requestState\":{state}")));
    let v: Value = serde_json::from_str(&done).unwrap();
    assert_eq!(v["id"], 2, "{done}");
    assert_eq!(v["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        mcp::text(&v["result"]),
        r#"User response: action=accept, content={"email":"e","username":"ada"}"#,
        "{done}"
    );
    // A state changed on the way is the server's -32602, relayed.
    let forged = state.replacen("ask0", "ask9", 1);
    let refused = ask(call(3, &format!(",{answers},\"requestState\":{forged}")));
    let v: Value = serde_json::from_str(&refused).unwrap();
    assert_eq!(v["error"]["code"], -32602, "{refused}");
}

fn ts_client(mode: &str, args: &[&str]) -> Value {
    assert!(
        peers()
            .join("tsclient/node_modules/@modelcontextprotocol/client")
            .exists(),
        "the TypeScript client is not installed: run ./scripts/install-peers.sh"
    );
    mrtr_client(
        std::path::Path::new("node"),
        "tests/peers/ts_client_mrtr.mjs",
        mode,
        args,
    )
}

/// Runs a client script in `mode` with `args`, then the two tools both clients call.
fn mrtr_client(program: &std::path::Path, script: &str, mode: &str, args: &[&str]) -> Value {
    let tools = json!([
        ["fx__test_elicitation", {"message": "Who are you?", "state_rounds": 1}],
        ["fx__test_sampling", {"prompt": "Say hi", "rounds": 2}],
    ])
    .to_string();
    let args: Vec<&str> = [mode]
        .iter()
        .chain(args)
        .copied()
        .chain([tools.as_str()])
        .collect();
    peer_script(program, &repo().join(script), &args)
}

fn check_ts(seen: &Value, protocol: &str) {
    assert_eq!(seen["protocol"], protocol, "{seen}");
    let calls = &seen["calls"];
    assert_eq!(
        calls[0]["text"],
        r#"User response: action=accept, content={"email":"ada@example.com","ok":true,"username":"ada"}"#,
        "{seen}"
    );
    assert_eq!(
        calls[1]["text"], "LLM response: sampled 2; sampled 3",
        "{seen}"
    );
    assert_eq!(
        seen["asked"],
        json!([
            "elicitation: Who are you?",
            "sampling: Say hi",
            "sampling: Say hi"
        ]),
        "{seen}"
    );
}

fn py_client(mode: &str, args: &[&str]) -> Value {
    mrtr_client(
        &peers().join("venv/bin/python"),
        "tests/peers/py_client_mrtr.py",
        mode,
        args,
    )
}

/// The real Python client (mcp 2.x): a 2025 session over stdio (Corral drives) and
/// pinned to 2026-07-28 over HTTP (the SDK drives, through the pass-through).
#[test]
fn the_python_client_answers_in_either_mode() {
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let (corral, cfg) = (corral(), p.dir.join("corral.toml"));
    let legacy = py_client(
        "legacy",
        &["stdio", corral.to_str().unwrap(), cfg.to_str().unwrap()],
    );
    let pinned = py_client("2026-07-28", &["http", up.url.as_str(), up.token.as_str()]);
    for (seen, protocol) in [(&legacy, "2025-11-25"), (&pinned, "2026-07-28")] {
        assert_eq!(seen["protocol"], protocol, "{seen}");
        let calls = &seen["calls"];
        assert_eq!(
            calls[0]["text"],
            r#"User response: action=accept, content={"email":"py@example.com","username":"py"}"#,
            "{seen}"
        );
        assert_eq!(
            calls[1]["text"], "LLM response: sampled 2; sampled 3",
            "{seen}"
        );
        assert_eq!(
            seen["asked"],
            json!([
                "elicitation: Who are you?",
                "sampling: Say hi",
                "sampling: Say hi"
            ]),
            "{seen}"
        );
    }
}

/// The real TypeScript client, 2025 session (Corral drives) and pinned to 2026-07-28
/// (the client drives, through Corral's pass-through), over stdio.
#[test]
fn the_typescript_client_answers_in_either_mode_over_stdio() {
    let p = Project::new(&config(false));
    let (corral, cfg) = (corral(), p.dir.join("corral.toml"));
    for (mode, protocol) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let seen = ts_client(
            mode,
            &["stdio", corral.to_str().unwrap(), cfg.to_str().unwrap()],
        );
        check_ts(&seen, protocol);
    }
}

/// The same over Streamable HTTP: a 2025 session's questions ride its POST's SSE stream.
#[test]
fn the_typescript_client_answers_in_either_mode_over_http() {
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    for (mode, protocol) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let seen = ts_client(mode, &["http", up.url.as_str(), up.token.as_str()]);
        check_ts(&seen, protocol);
    }
}

/// The real TypeScript server SDK (2.x) in 2026-only mode asks the 2026 way; a 2025 agent
/// answers an ordinary elicitation through Corral.
#[test]
fn a_typescript_2026_server_asks_a_2025_agent_through_corral() {
    let ts = peers().join("ts-server");
    assert!(
        ts.join("node_modules/@modelcontextprotocol/server")
            .exists(),
        "the TypeScript server SDK is not installed: run ./scripts/install-peers.sh"
    );
    let p = Project::new(&format!(
        "[servers.tsmodern]\ncommand = \"node\"\nargs = [\"{{repo}}/crates/cli/tests/peers/ts_modern_server.cjs\", \"{}\"]\n",
        ts.display()
    ));
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}, "roots": {}}));
    let id = agent.send_request(
        "tools/call",
        json!({"name": "tsmodern__confirm", "arguments": {}}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    assert_eq!(ask["params"]["message"], "Go ahead?", "{ask}");
    answer(
        &mut agent,
        &ask,
        json!({"action": "accept", "content": {"ok": true}}),
    );
    let r = agent.response(id);
    assert_eq!(mcp::text(&r["result"]), "confirmed: true", "{r}");
    assert!(r["result"].get("resultType").is_none(), "{r}");

    // Roots, the same way.
    let id = agent.send_request(
        "tools/call",
        json!({"name": "tsmodern__where", "arguments": {}}),
    );
    let ask = agent.wait_for("roots/list", |m| is_request(m, "roots/list"));
    answer(
        &mut agent,
        &ask,
        json!({"roots": [{"uri": "file:///work/app", "name": "app"}]}),
    );
    let r = agent.response(id);
    assert_eq!(mcp::text(&r["result"]), "roots: file:///work/app", "{r}");
    agent.close();

    // An agent that declared neither is not asked: a tool error names what is missing.
    let mut agent = mcp::McpClient::start_with(&p, json!({}));
    for (tool, cap) in [
        ("tsmodern__confirm", "elicitation"),
        ("tsmodern__where", "roots"),
    ] {
        let r = agent.request("tools/call", json!({"name": tool, "arguments": {}}));
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(mcp::text(&r["result"]).contains(cap), "{r}");
    }
    assert!(
        !agent
            .other
            .iter()
            .any(|m| m.get("method").is_some() && m.get("id").is_some()),
        "{:?}",
        agent.other
    );
    agent.close();
}

/// `resources/read` is driven like a call; where the agent cannot answer, it is a
/// JSON-RPC error naming the capability (a read has no tool-error shape).
#[test]
fn a_2025_agents_resource_read_is_driven_too() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}}));
    // (tools/list waits for the server to be ready; resources/read does not.)
    assert!(
        agent
            .tool_names()
            .iter()
            .any(|t| t == "fx__test_elicitation")
    );
    let id = agent.send_request("resources/read", json!({"uri": "test://mrtr/elicitation"}));
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    assert_eq!(ask["params"]["message"], "Who reads?", "{ask}");
    answer(
        &mut agent,
        &ask,
        json!({"action": "accept", "content": {"username": "r", "email": "e"}}),
    );
    let r = agent.response(id);
    assert_eq!(
        r["result"]["contents"][0]["text"],
        r#"User response: action=accept, content={"email":"e","username":"r"}"#,
        "{r}"
    );
    for k in ["resultType", "ttlMs", "cacheScope"] {
        assert!(r["result"].get(k).is_none(), "{k} in {r}");
    }
    agent.close();

    let mut agent = mcp::McpClient::start_with(&p, json!({}));
    assert!(!agent.tool_names().is_empty());
    let r = agent.request("resources/read", json!({"uri": "test://mrtr/elicitation"}));
    let msg = r["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("elicitation") && msg.contains("did not declare"),
        "{r}"
    );
    agent.close();
}

/// URL-mode elicitation goes only to an agent that declared `elicitation.url`, with the
/// `elicitationId` a 2025 client expects (2026 dropped it; Corral makes one up).
#[test]
fn url_elicitation_needs_the_url_capability_and_gets_an_elicitation_id() {
    let p = Project::new(&config(false));
    let args = json!({"message": "Sign in", "url": "https://example.com/login"});
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}}));
    let r = agent.request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": args}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(mcp::text(&r["result"]).contains("elicitation.url"), "{r}");
    agent.close();

    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {"form": {}, "url": {}}}));
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": args}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    assert_eq!(ask["params"]["mode"], "url", "{ask}");
    assert_eq!(ask["params"]["url"], "https://example.com/login", "{ask}");
    let eid = ask["params"]["elicitationId"].as_str().unwrap_or("");
    assert_eq!(eid.len(), 36, "{ask}");
    answer(&mut agent, &ask, json!({"action": "accept"}));
    let r = agent.response(id);
    assert_eq!(
        mcp::text(&r["result"]),
        "User response: action=accept, content={}",
        "{r}"
    );
    agent.close();
}

/// One progress token spans every leg Corral sends upstream for a 2025 agent's call: the
/// server's progress on each leg reaches the agent under the agent's token, in order,
/// and only growing (MCP requires it; each leg here counts from 1 again).
/// And an agent that answers Corral's question with an error fails the call with a tool
/// error saying so.
#[test]
fn progress_spans_every_leg_and_an_error_answer_fails_the_call() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"sampling": {}, "elicitation": {}}));
    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_sampling", "arguments": {"prompt": "p", "rounds": 2, "state_rounds": 1},
               "_meta": {"progressToken": "tok-1"}}),
    );
    for n in 1..=2 {
        let ask = agent.wait_for("sampling/createMessage", |m| {
            is_request(m, "sampling/createMessage")
        });
        answer(
            &mut agent,
            &ask,
            json!({"model": "m", "role": "assistant", "content": {"type": "text", "text": format!("s{n}")}}),
        );
    }
    let r = agent.response(id);
    assert_eq!(mcp::text(&r["result"]), "LLM response: s1; s2", "{r}");
    let progress: Vec<&Value> = agent
        .other
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "tok-1"),
        "{progress:?}"
    );
    let values: Vec<u64> = progress
        .iter()
        .filter_map(|m| m["params"]["progress"].as_u64())
        .collect();
    // The first request, the state-only retry, then one retry per answer; each leg
    // counted from 1 again, and the agent saw only the values that grew.
    assert_eq!(values, [1, 2, 3, 4], "{progress:?}");

    let id = agent.send_request(
        "tools/call",
        json!({"name": "fx__test_elicitation", "arguments": {"message": "?"}}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    agent.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -1, "message": "user closed the dialog"}}));
    let r = agent.response(id);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        mcp::text(&r["result"]).contains("user closed the dialog"),
        "{r}"
    );
    agent.close();
}

/// Over Streamable HTTP, a 2025 session's question rides the SSE stream of the POST
/// that made the call (not the GET stream), and the answer, POSTed on its own, lets the
/// call finish on that same stream.
#[test]
fn over_http_the_question_rides_the_calls_own_stream() {
    use std::io::{BufRead, BufReader};
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let init = up.post(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw-http","version":"1"}}}"#,
        &[],
    );
    assert_eq!(init.status, 200, "{init:?}");
    let sid = init
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let r = up.post(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &[("Mcp-Session-Id", &sid)],
    );
    assert_eq!(r.status, 202, "{r:?}");
    // tools/list waits for the server to be ready.
    let r = up.post(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        &[("Mcp-Session-Id", &sid)],
    );
    assert!(r.body.contains("fx__test_elicitation"), "{r:?}");

    // The call, on a connection read as it streams.
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx__test_elicitation","arguments":{"message":"Over HTTP?"}}}"#;
    let mut s = std::net::TcpStream::connect(&up.addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Mcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n{body}",
        up.addr,
        up.token,
        body.len()
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { break };
            if let Some(data) = line.strip_prefix("data: ")
                && let Ok(v) = serde_json::from_str(data)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let ask = rx
        .recv_timeout(DEADLINE)
        .expect("the question on the call's stream");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["message"], "Over HTTP?", "{ask}");
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"username": "h", "email": "t"}}});
    let r = up.post(&reply.to_string(), &[("Mcp-Session-Id", &sid)]);
    assert_eq!(r.status, 202, "{r:?}");
    let done = rx
        .recv_timeout(DEADLINE)
        .expect("the call's result on its stream");
    assert_eq!(done["id"], 3, "{done}");
    assert_eq!(
        mcp::text(&done["result"]),
        r#"User response: action=accept, content={"email":"t","username":"h"}"#,
        "{done}"
    );
}

/// `prompts/get` (its name renamed back to the server's) is driven like a call.
#[test]
fn a_2025_agents_prompt_get_is_driven_too() {
    let p = Project::new(&config(false));
    let mut agent = mcp::McpClient::start_with(&p, json!({"elicitation": {}}));
    assert!(!agent.tool_names().is_empty()); // (the server is ready)
    let id = agent.send_request(
        "prompts/get",
        json!({"name": "fx__test_mrtr_prompt", "_meta": {"progressToken": 7}}),
    );
    let ask = agent.wait_for("elicitation/create", |m| {
        is_request(m, "elicitation/create")
    });
    assert_eq!(ask["params"]["message"], "Whose prompt?", "{ask}");
    answer(
        &mut agent,
        &ask,
        json!({"action": "accept", "content": {"username": "pr", "email": "e"}}),
    );
    let r = agent.response(id);
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        r#"User response: action=accept, content={"email":"e","username":"pr"}"#,
        "{r}"
    );
    assert!(r["result"].get("resultType").is_none(), "{r}");
    // Its progress token, like a tool call's, reaches the server as a route of Corral's
    // and the server's progress on both legs comes back under the agent's own token,
    // only growing.
    let progress: Vec<(Value, Value)> = agent
        .other
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            (
                m["params"]["progressToken"].clone(),
                m["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(progress, [(json!(7), json!(1)), (json!(7), json!(2))]);
    agent.close();
}
