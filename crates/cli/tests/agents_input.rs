//! Bridge A of MCP 2026-07-28: a 2025 server's questions (elicitation, sampling) during
//! a call reach a stateless 2026-07-28 agent as an `input_required` result, and the
//! agent's retry with the answers completes the call, which Corral kept running (parked).
//! The real SDK clients (TypeScript `@modelcontextprotocol/client` and Python `mcp`,
//! pinned to 2026-07-28, their own handlers answering) over stdio and HTTP, and raw
//! traffic for what the SDKs never send.

mod common;
use common::http::Up;
use common::raw::Raw;
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

fn config(listen: bool) -> String {
    format!(
        "{}[servers.fx]\ncommand = \"{{fixture}}\"\nargs = [\"--conformance\"]\n",
        if listen {
            "[gateway]\nlisten = \"127.0.0.1:0\"\n\n"
        } else {
            ""
        },
    )
}

/// Runs one SDK client script; what it saw.
fn client(cmd: &str, script: &str, args: &[&str]) -> Value {
    peer_script(cmd, &repo().join("tests/peers").join(script), args)
}

/// The fixture's tools reported the answers the client's handlers gave.
fn check(seen: &Value, who: &str) {
    assert_eq!(seen["protocol"], "2026-07-28", "{seen}");
    let e = &seen["elicitation"];
    assert_eq!(e["isError"], false, "{seen}");
    let text = e["text"].as_str().unwrap();
    assert!(
        text.starts_with("User response: action=accept")
            && text.contains(&format!("{who}-user"))
            && text.contains(&format!("{who}@example.com")),
        "{seen}"
    );
    let s = &seen["sampling"];
    assert_eq!(s["isError"], false, "{seen}");
    assert_eq!(
        s["text"],
        format!("LLM response: sampled by {who}"),
        "{seen}"
    );
    let asked: Vec<&str> = seen["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        asked,
        ["elicitation/create", "sampling/createMessage"],
        "{seen}"
    );
    assert_eq!(seen["asked"][0]["message"], "who are you?", "{seen}");
    assert_eq!(seen["asked"][1]["text"], "say hi", "{seen}");
}

fn installed() {
    assert!(
        peers()
            .join("tsclient/node_modules/@modelcontextprotocol/client")
            .exists(),
        "the TypeScript client is not installed: run ./scripts/install-peers.sh"
    );
}

#[test]
fn sdk_clients_answer_a_2025_servers_questions_over_stdio() {
    installed();
    let p = Project::new(&config(false));
    let corral = corral();
    let cfg = p.dir.join("corral.toml");
    let (corral, cfg) = (corral.to_str().unwrap(), cfg.to_str().unwrap());
    let seen = client("node", "ts_client_input.mjs", &["stdio", corral, cfg]);
    check(&seen, "ts");
    assert_eq!(seen["asked"][0]["has_id"], false, "{seen}");
    let python = peers().join("venv/bin/python");
    let seen = client(
        python.to_str().unwrap(),
        "py_client_input.py",
        &["stdio", corral, cfg],
    );
    check(&seen, "py");
}

#[test]
fn sdk_clients_answer_a_2025_servers_questions_over_http() {
    installed();
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let args = ["http", up.url.as_str(), up.token.as_str()];
    check(&client("node", "ts_client_input.mjs", &args), "ts");
    let python = peers().join("venv/bin/python");
    check(
        &client(python.to_str().unwrap(), "py_client_input.py", &args),
        "py",
    );
}

const BOTH: &str = r#"{"elicitation":{},"sampling":{}}"#;

/// A modern `tools/call` line: `extra` is spliced into params (`,"k":v…` or empty).
fn call(id: u32, tool: &str, args: &str, caps: &str, extra: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}{extra},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}}}}}"#
    )
}

/// The `input_required` of `r` (answering request `id`): its one key and its handle.
fn input_required(r: &Value, id: u32, method: &str) -> (String, String) {
    assert_eq!(r["id"], id, "{r}");
    let res = &r["result"];
    assert_eq!(res["resultType"], "input_required", "{r}");
    let asks = res["inputRequests"].as_object().unwrap();
    assert_eq!(asks.len(), 1, "{r}");
    let (key, ask) = asks.iter().next().unwrap();
    assert_eq!(ask["method"], method, "{r}");
    let state = res["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("corral-park-"), "{r}");
    (key.clone(), state)
}

fn invalid_params(r: &Value, id: u32, says: &str) {
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(id), json!(-32602)),
        "{r}"
    );
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains(says), "{says:?} not in {r}");
}

#[test]
fn retries_that_match_nothing_or_miss_answers_are_answered_and_the_call_goes_on() {
    let p = Project::new(&config(false));
    let mut c = Raw::start(&p);
    let args = r#"{"message":"name?"}"#;
    let r = c.ask(&call(1, "fx__test_elicitation", args, BOTH, ""));
    let (key, state) = input_required(&r, 1, "elicitation/create");
    let ask = &r["result"]["inputRequests"][&key]["params"];
    assert_eq!(ask["message"], "name?", "{r}");
    assert_eq!(
        ask["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "corral",
        "{r}"
    );
    let answer = r#"{"action":"accept","content":{"username":"raw","email":"r@x"}}"#;
    let retry = |id, tool, args, state: &str, answers: &str| {
        call(
            id,
            tool,
            args,
            BOTH,
            &format!(r#","inputResponses":{answers},"requestState":"{state}""#),
        )
    };
    let answers = format!(r#"{{"{key}":{answer}}}"#);
    // Forged (Corral's prefix, unknown handle) and foreign states: nothing to resume.
    // Bound to another tool, or other arguments: refused, the call still waits.
    let forged = format!("corral-park-{}", "0".repeat(32));
    let (elicit, other_args) = ("fx__test_elicitation", r#"{"message":"other"}"#);
    let refused = [
        (
            2,
            elicit,
            args,
            forged.as_str(),
            "again without requestState",
        ),
        (3, elicit, args, "opaque", "matches no call"),
        (
            4,
            "fx__test_sampling",
            r#"{"prompt":"x"}"#,
            &state,
            "belongs to another call",
        ),
        (5, elicit, other_args, &state, "belongs to another call"),
    ];
    for (id, tool, args, state, says) in refused {
        let r = c.ask(&retry(id, tool, args, state, &answers));
        invalid_params(&r, id, says);
    }
    // Missing keys (unknown ones ignored): asked again, under a new handle.
    let r = c.ask(&retry(
        6,
        "fx__test_elicitation",
        args,
        &state,
        r#"{"zz":{}}"#,
    ));
    let (again, state2) = input_required(&r, 6, "elicitation/create");
    assert_eq!(again, key, "{r}");
    assert_ne!(state2, state);
    // The first handle is spent.
    let r = c.ask(&retry(7, "fx__test_elicitation", args, &state, &answers));
    invalid_params(&r, 7, "again without requestState");
    // A malformed answer: refused, the call still waits under the same handle.
    let bad = format!(r#"{{"{key}":{{"action":"maybe"}}}}"#);
    let r = c.ask(&retry(8, "fx__test_elicitation", args, &state2, &bad));
    invalid_params(&r, 8, "ElicitResult");
    // The answer completes the call the server kept running.
    let r = c.ask(&retry(9, "fx__test_elicitation", args, &state2, &answers));
    assert_eq!(r["id"], 9, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        r#"User response: action=accept, content={"email":"r@x","username":"raw"}"#,
        "{r}"
    );
    // Answers without any state, to a 2025 server: the call goes on without them.
    let r = c.ask(&call(
        10,
        "fx__echo",
        r#"{"text":"plain"}"#,
        BOTH,
        r#","inputResponses":{"q1":{"action":"accept"}}"#,
    ));
    assert_eq!(r["result"]["content"][0]["text"], "plain", "{r}");
    // A kind the request did not declare: the server gets an error naming the
    // capability, and the call completes with the server's own answer to it.
    let r = c.ask(&call(
        11,
        "fx__test_sampling",
        r#"{"prompt":"hi"}"#,
        r#"{"elicitation":{}}"#,
        "",
    ));
    assert_eq!(r["id"], 11, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("'sampling' capability"), "{r}");
    // The connection goes on.
    let r = c.ask(&call(12, "fx__echo", r#"{"text":"after"}"#, "{}", ""));
    assert_eq!(r["result"]["content"][0]["text"], "after", "{r}");
}

#[test]
fn a_parked_call_expires_when_the_agent_never_retries() {
    let p = Project::new(&config(false));
    let mut c = Raw::start_with(&p, &[("CORRAL_INPUT_TTL_MS", "300")]);
    let args = r#"{"prompt":"hi"}"#;
    let r = c.ask(&call(1, "fx__test_sampling", args, BOTH, ""));
    let (key, state) = input_required(&r, 1, "sampling/createMessage");
    let retry = |id: u32, args: &str| {
        call(
            id,
            "fx__test_sampling",
            args,
            BOTH,
            &format!(
                r#","inputResponses":{{"{key}":{{"role":"assistant","content":{{"type":"text","text":"late"}},"model":"m"}}}},"requestState":"{state}""#
            ),
        )
    };
    // Probing with other arguments does not spend the handle: it says whether it lives.
    let mut n = 100;
    wait_until("the parked call to expire", || {
        n += 1;
        let r = c.ask(&retry(n, r#"{"prompt":"other"}"#));
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("matches no call"))
    });
    let r = c.ask(&retry(2, args));
    invalid_params(&r, 2, "again without requestState");
    // A fresh call works again.
    let r = c.ask(&call(3, "fx__echo", r#"{"text":"on"}"#, "{}", ""));
    assert_eq!(r["result"]["content"][0]["text"], "on", "{r}");
}

#[test]
fn http_posts_carry_the_question_and_the_retry() {
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "fx__test_elicitation"),
    ];
    let args = r#"{"message":"over http?"}"#;
    let r = up.post(&call(1, "fx__test_elicitation", args, BOTH, ""), &headers);
    assert_eq!(r.status, 200, "{r:?}");
    let m = r.messages().pop().unwrap();
    let (key, state) = input_required(&m, 1, "elicitation/create");
    let retry = |id, state: &str| {
        call(
            id,
            "fx__test_elicitation",
            args,
            BOTH,
            &format!(
                r#","inputResponses":{{"{key}":{{"action":"decline"}}}},"requestState":"{state}""#
            ),
        )
    };
    let r = up.post(&retry(2, "corral-park-nothing"), &headers);
    invalid_params(
        &r.messages().pop().unwrap(),
        2,
        "again without requestState",
    );
    let r = up.post(&retry(3, &state), &headers);
    let m = r.messages().pop().unwrap();
    assert_eq!(m["id"], 3, "{m}");
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert_eq!(
        m["result"]["content"][0]["text"], "User response: action=decline, content={}",
        "{m}"
    );
}

#[test]
fn a_parked_call_waits_at_the_agents_pace_not_the_servers_call_timeout() {
    let p = Project::new(
        "[servers.fx]\ncommand = \"{fixture}\"\nargs = [\"--conformance\"]\ncall_timeout = \"1s\"\n",
    );
    let mut c = Raw::start(&p);
    let args = r#"{"message":"slowly?"}"#;
    let r = c.ask(&call(1, "fx__test_elicitation", args, BOTH, ""));
    let (key, state) = input_required(&r, 1, "elicitation/create");
    let retry = |id: u32, args: &str| {
        call(
            id,
            "fx__test_elicitation",
            args,
            BOTH,
            &format!(
                r#","inputResponses":{{"{key}":{{"action":"accept","content":{{"username":"slow","email":"s@x"}}}}}},"requestState":"{state}""#
            ),
        )
    };
    // The human takes longer than the call timeout: this test is about time passing.
    // Probes with other arguments (which spend nothing) show the call is held meanwhile.
    let start = std::time::Instant::now();
    let mut n = 100;
    wait_until("twice the call timeout to pass", || {
        n += 1;
        let r = c.ask(&retry(n, r#"{"message":"probe"}"#));
        invalid_params(&r, n, "belongs to another call");
        start.elapsed() > Duration::from_millis(2500)
    });
    let r = c.ask(&retry(2, args));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        r#"User response: action=accept, content={"email":"s@x","username":"slow"}"#,
        "{r}"
    );
}

/// A project whose one server is `asking_server.py` (a 2025 server that asks during
/// calls, prompts and reads), logging to `ask.log`; `listen` adds the HTTP endpoint.
/// Its call timeout is longer than a test's deadline, so a cancellation a test sees
/// is never the timeout's.
fn asking(listen: bool) -> (Project, std::path::PathBuf) {
    let p = Project::new("");
    let log = p.dir.join("ask.log");
    p.write(
        "corral.toml",
        &format!(
            "{}[servers.ask]\ncommand = \"{}\"\nargs = [\"{{repo}}/crates/cli/tests/peers/asking_server.py\", \"{}\"]\n\
             call_timeout = \"120s\"\n",
            if listen {
                "[gateway]\nlisten = \"127.0.0.1:0\"\n\n"
            } else {
                ""
            },
            peers().join("venv/bin/python").display(),
            log.display()
        ),
    );
    (p, log)
}

fn logged(log: &std::path::Path, what: &str) -> bool {
    std::fs::read_to_string(log).is_ok_and(|t| t.contains(what))
}

impl Raw {
    /// Sends `line` and reads until the answer to request `id`: every line read.
    fn exchange(&mut self, line: &str, id: u32) -> Vec<Value> {
        writeln!(self.stdin, "{line}").unwrap();
        let mut seen = Vec::new();
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no answer to {line}; saw {seen:?}"));
            let v: Value = serde_json::from_str(&l).unwrap();
            let done = v["id"] == id;
            seen.push(v);
            if done {
                return seen;
            }
        }
    }
}

/// A modern request line of any method; `params` without `_meta`'s braces' content.
fn modern(id: u32, method: &str, params: &str, caps: &str, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params},"_meta":{{{meta}"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{caps}}}}}}}"#
    )
}

#[test]
fn questions_sent_together_come_together_and_progress_follows_the_retry() {
    let (p, _log) = asking(false);
    let mut c = Raw::start(&p);
    let params = r#""name":"ask__ask_two","arguments":{}"#;
    let caps = r#"{"elicitation":{}}"#;
    let r = c.ask(&modern(
        1,
        "tools/call",
        params,
        caps,
        r#""progressToken":"first","#,
    ));
    let res = &r["result"];
    assert_eq!(res["resultType"], "input_required", "{r}");
    let asks = res["inputRequests"].as_object().unwrap();
    let mut messages: Vec<&str> = asks
        .values()
        .map(|a| a["params"]["message"].as_str().unwrap())
        .collect();
    messages.sort();
    assert_eq!(messages, ["first?", "second?"], "{r}");
    let key = |m: &str| {
        asks.iter()
            .find(|(_, a)| a["params"]["message"] == m)
            .unwrap()
            .0
            .clone()
    };
    let answers = format!(
        r#""inputResponses":{{"{}":{{"action":"accept","content":{{"name":"a"}}}},"{}":{{"action":"decline"}}}},"requestState":{}"#,
        key("first?"),
        key("second?"),
        res["requestState"]
    );
    let seen = c.exchange(
        &modern(
            2,
            "tools/call",
            &format!("{params},{answers}"),
            caps,
            r#""progressToken":"second","#,
        ),
        2,
    );
    let progress: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{seen:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "second", "{seen:?}");
    let r = seen.last().unwrap();
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"], r#"answers: accept:{"name": "a"} / decline:{}"#,
        "{r}"
    );
}

#[test]
fn prompts_and_resource_reads_carry_questions_too_and_undeclared_kinds_are_refused() {
    let (p, _log) = asking(false);
    let mut c = Raw::start(&p);
    // (tools/list waits for the server to be ready.)
    let r = c.ask(&modern(1, "tools/list", r#""x":0"#, "{}", ""));
    assert_eq!(r["result"]["tools"][0]["name"], "ask__ask_two", "{r}");
    let caps = r#"{"elicitation":{},"roots":{}}"#;
    let params = r#""name":"ask__asking_prompt""#;
    let r = c.ask(&modern(1, "prompts/get", params, caps, ""));
    let (key, state) = input_required(&r, 1, "elicitation/create");
    let r = c.ask(&modern(
        2,
        "prompts/get",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"p"}}}}}},"requestState":"{state}""#
        ),
        caps,
        "",
    ));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], r#"prompt accept:{"name": "p"}"#,
        "{r}"
    );
    // roots/list during a resources/read: undeclared → the server is told which
    // capability is missing; declared → asked.
    let params = r#""uri":"ask://roots""#;
    let r = c.ask(&modern(
        3,
        "resources/read",
        params,
        r#"{"elicitation":{}}"#,
        "",
    ));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let text = r["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("roots error: ") && text.contains("'roots' capability"),
        "{r}"
    );
    let r = c.ask(&modern(4, "resources/read", params, caps, ""));
    let (key, state) = input_required(&r, 4, "roots/list");
    assert!(r["result"].get("ttlMs").is_none(), "{r}");
    let r = c.ask(&modern(
        5,
        "resources/read",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"roots":[{{"uri":"file:///w"}}]}}}},"requestState":"{state}""#
        ),
        caps,
        "",
    ));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["contents"][0]["text"], "roots: file:///w",
        "{r}"
    );
    assert_eq!(r["result"]["cacheScope"], "private", "{r}");
}

#[test]
fn cancelling_the_retry_cancels_the_parked_call_on_the_server() {
    let (p, log) = asking(false);
    let mut c = Raw::start(&p);
    let caps = r#"{"elicitation":{}}"#;
    let params = r#""name":"ask__ask_then_wait","arguments":{}"#;
    let r = c.ask(&modern(1, "tools/call", params, caps, ""));
    let (key, state) = input_required(&r, 1, "elicitation/create");
    let retry = modern(
        2,
        "tools/call",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"c"}}}}}},"requestState":"{state}""#
        ),
        caps,
        "",
    );
    writeln!(c.stdin, "{retry}").unwrap();
    wait_until("the server to get the answer", || {
        logged(&log, r#"answered accept:{"name": "c"}"#)
    });
    writeln!(
        c.stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":2}}}}"#
    )
    .unwrap();
    wait_until("the server to see its call cancelled", || {
        logged(&log, "cancelled ")
    });
    // Nothing answers the cancelled request; the connection goes on.
    let r = c.ask(&modern(3, "tools/list", r#""x":0"#, "{}", ""));
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

#[test]
fn closing_the_retrys_http_connection_cancels_the_parked_call_on_the_server() {
    http_cancel(false);
}

/// The same once the retry's answer streams as SSE (its progress came first).
#[test]
fn closing_the_retrys_event_stream_cancels_the_parked_call_on_the_server() {
    http_cancel(true);
}

fn http_cancel(streamed: bool) {
    let (p, log) = asking(true);
    let up = Up::start(&p);
    let caps = r#"{"elicitation":{}}"#;
    let params = r#""name":"ask__ask_then_wait","arguments":{}"#;
    let headers = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "ask__ask_then_wait"),
    ];
    // (Progress reaches a retry only if the first request asked for it: the server
    // got its token then.)
    let token = if streamed {
        r#""progressToken":"p1","#
    } else {
        ""
    };
    let r = up.post(&modern(1, "tools/call", params, caps, token), &headers);
    let m = r.messages().pop().unwrap();
    let (key, state) = input_required(&m, 1, "elicitation/create");
    let body = modern(
        2,
        "tools/call",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"h"}}}}}},"requestState":"{state}""#
        ),
        caps,
        if streamed {
            r#""progressToken":7,"#
        } else {
            ""
        },
    );
    let mut s = std::net::TcpStream::connect(&up.addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: ask__ask_then_wait\r\nContent-Length: {}\r\n\r\n{body}",
        up.addr,
        up.token,
        body.len()
    )
    .unwrap();
    wait_until("the server to get the answer", || {
        logged(&log, r#"answered accept:{"name": "h"}"#)
    });
    if streamed {
        // Read up to the progress event: the answer is an SSE stream now.
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while !line.contains("notifications/progress") {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        }
        assert!(line.contains(r#""progressToken":7"#), "{line}");
    }
    drop(s);
    wait_until("the server to see its call cancelled", || {
        logged(&log, "cancelled ")
    });
}

#[test]
fn at_the_deadline_the_server_is_told_the_elicitation_was_cancelled_and_its_call_is_cancelled() {
    let (p, log) = asking(false);
    let mut c = Raw::start_with(&p, &[("CORRAL_INPUT_TTL_MS", "300")]);
    let r = c.ask(&modern(
        1,
        "tools/call",
        r#""name":"ask__ask_then_wait","arguments":{}"#,
        r#"{"elicitation":{}}"#,
        "",
    ));
    input_required(&r, 1, "elicitation/create");
    wait_until("the server to get the deadline's answer", || {
        logged(&log, "answered cancel:{}")
    });
    wait_until("the server to see its call cancelled", || {
        logged(&log, "cancelled ")
    });
}

#[test]
fn past_256_parked_calls_a_question_is_refused_to_its_server() {
    let (p, log) = asking(false);
    let mut c = Raw::start(&p);
    let line = |id| {
        modern(
            id,
            "tools/call",
            r#""name":"ask__ask_then_wait","arguments":{}"#,
            r#"{"elicitation":{}}"#,
            "",
        )
    };
    for id in 1..=256 {
        input_required(&c.ask(&line(id)), id, "elicitation/create");
    }
    writeln!(c.stdin, "{}", line(257)).unwrap();
    wait_until("the 257th question to be refused", || {
        logged(&log, "answered error: corral: 256 calls already wait")
    });
}

#[test]
fn a_call_that_finishes_while_parked_answers_the_retry() {
    let (p, log) = asking(false);
    let mut c = Raw::start(&p);
    let params = r#""name":"ask__ask_and_give_up","arguments":{}"#;
    let caps = r#"{"elicitation":{}}"#;
    let r = c.ask(&modern(1, "tools/call", params, caps, ""));
    let (key, state) = input_required(&r, 1, "elicitation/create");
    wait_until("the server to give up waiting", || {
        logged(&log, "gave up with error: no answer")
    });
    let r = c.ask(&modern(
        2,
        "tools/call",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"action":"accept","content":{{"name":"late"}}}}}},"requestState":"{state}""#
        ),
        caps,
        "",
    ));
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"], "gave up: error: no answer",
        "{r}"
    );
}

#[test]
fn a_url_elicitation_needs_the_url_capability_and_travels_without_its_id() {
    let (p, _log) = asking(false);
    let mut c = Raw::start(&p);
    let params = r#""name":"ask__ask_url","arguments":{}"#;
    let r = c.ask(&modern(
        1,
        "tools/call",
        params,
        r#"{"elicitation":{}}"#,
        "",
    ));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("url error: ") && text.contains("'elicitation.url' capability"),
        "{r}"
    );
    let caps = r#"{"elicitation":{"url":{}}}"#;
    let r = c.ask(&modern(2, "tools/call", params, caps, ""));
    let (key, state) = input_required(&r, 2, "elicitation/create");
    let ask = &r["result"]["inputRequests"][&key]["params"];
    assert_eq!(
        (ask["mode"].clone(), ask["url"].clone()),
        (json!("url"), json!("https://example.com/login")),
        "{r}"
    );
    assert!(ask.get("elicitationId").is_none(), "{r}");
    let r = c.ask(&modern(
        3,
        "tools/call",
        &format!(
            r#"{params},"inputResponses":{{"{key}":{{"action":"accept"}}}},"requestState":"{state}""#
        ),
        caps,
        "",
    ));
    assert_eq!(r["result"]["content"][0]["text"], "url accept:{}", "{r}");
}
