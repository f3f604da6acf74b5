//! Agents speaking MCP 2026-07-28 (stateless requests) through Corral, next to 2025
//! sessions: the real SDK clients (TypeScript `@modelcontextprotocol/client` and Python
//! `mcp`, installed by scripts/install-peers.sh) in each version mode over stdio and
//! HTTP, and malformed 2026 traffic as raw JSON.

mod common;
use common::http::Up;
use common::raw::Raw;
use common::*;
use serde_json::{Value, json};

fn config(listen: bool) -> String {
    format!(
        "{}[servers.fx]\ncommand = \"{{fixture}}\"\n\n[servers.everything]\ncommand = \"node\"\n\
         args = [\"{}/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js\"]\n",
        if listen {
            "[gateway]\nlisten = \"127.0.0.1:0\"\n\n"
        } else {
            ""
        },
        peers().display()
    )
}

/// Runs one SDK client script; what it saw.
fn client(cmd: &str, script: &str, args: &[&str]) -> Value {
    peer_script(cmd, &repo().join("tests/peers").join(script), args)
}

fn check(seen: &Value, protocol: &str) {
    assert_eq!(seen["protocol"], protocol, "{seen}");
    let tools = strings(&seen["tools"]);
    assert!(
        tools.contains(&"fx__echo") && tools.contains(&"everything__echo"),
        "{seen}"
    );
    assert!(
        seen["echo"].as_str().unwrap().starts_with("from "),
        "{seen}"
    );
    assert!(seen["resources"].as_u64().unwrap() > 0, "{seen}");
    assert_eq!(seen["read"], 1, "{seen}");
    assert_eq!(seen["prompt_messages"], 1, "{seen}");
}

fn tsclient() -> bool {
    let ok = peers()
        .join("tsclient/node_modules/@modelcontextprotocol/client")
        .exists();
    assert!(
        ok,
        "the TypeScript client is not installed: run ./scripts/install-peers.sh"
    );
    ok
}

/// Pinned, auto and legacy, each SDK, over `corral mcp --standalone`.
#[test]
fn sdk_clients_in_every_mode_over_stdio() {
    tsclient();
    let p = Project::new(&config(false));
    let corral = corral();
    let cfg = p.dir.join("corral.toml");
    let (corral, cfg) = (corral.to_str().unwrap(), cfg.to_str().unwrap());
    let python = peers().join("venv/bin/python");
    for (mode, protocol) in [
        ("2026-07-28", "2026-07-28"),
        ("auto", "2026-07-28"),
        ("legacy", "2025-11-25"),
    ] {
        let seen = client(
            python.to_str().unwrap(),
            "py_client_2026.py",
            &[mode, "stdio", corral, cfg],
        );
        check(&seen, protocol);
        let seen = client("node", "ts_client_2026.mjs", &[mode, "stdio", corral, cfg]);
        check(&seen, protocol);
    }
}

/// The same over Streamable HTTP (`corral up`), on one endpoint.
#[test]
fn sdk_clients_in_every_mode_over_http() {
    tsclient();
    let p = Project::new(&config(true));
    let up = Up::start(&p);
    let python = peers().join("venv/bin/python");
    for (mode, protocol) in [
        ("2026-07-28", "2026-07-28"),
        ("auto", "2026-07-28"),
        ("legacy", "2025-11-25"),
    ] {
        let args = [mode, "http", up.url.as_str(), up.token.as_str()];
        check(
            &client(python.to_str().unwrap(), "py_client_2026.py", &args),
            protocol,
        );
        check(&client("node", "ts_client_2026.mjs", &args), protocol);
    }
}

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

fn req(id: u32, method: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
}

#[test]
fn stdio_decides_the_era_per_connection_and_refuses_malformed_2026_requests() {
    let p = Project::new("[servers.fx]\ncommand = \"{fixture}\"\n");
    let mut c = Raw::start(&p);
    // Malformed claims answer with the request's id and decide nothing.
    let r = c.ask(&req(
        1,
        "tools/list",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    ));
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(1), json!(-32602)),
        "{r}"
    );
    let r = c.ask(&req(2, "tools/list", r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#));
    assert_eq!(r["id"], 2);
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["requested"], "1900-01-01");
    assert_eq!(r["error"]["data"]["supported"][0], "2026-07-28");
    // Discover answers without deciding.
    let r = c.ask(&req(3, "server/discover", &format!("{{{META}}}")));
    let d = &r["result"];
    assert_eq!(d["resultType"], "complete", "{r}");
    assert!(
        strings(&d["supportedVersions"]).contains(&"2025-11-25"),
        "{r}"
    );
    assert_eq!(
        (d["ttlMs"].clone(), d["cacheScope"].clone()),
        (json!(0), json!("private"))
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "corral"
    );
    assert!(
        d["instructions"].as_str().unwrap().contains("Corral"),
        "{r}"
    );
    // A complete modern request pins the connection; its results are 2026-shaped.
    let r = c.ask(&req(4, "tools/list", &format!("{{{META}}}")));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["cacheScope"], "private", "{r}");
    let r = c.ask(&req(
        5,
        "tools/call",
        &format!(r#"{{"name":"fx__echo","arguments":{{"text":"hi"}},{META}}}"#),
    ));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    assert!(r["result"].get("ttlMs").is_none(), "{r}");
    // Removed methods, a bare initialize, a claimless request: refused, the connection goes on.
    let r = c.ask(&req(6, "ping", &format!("{{{META}}}")));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = c.ask(&req(
        7,
        "logging/setLevel",
        &format!(r#"{{"level":"info",{META}}}"#),
    ));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let r = c.ask(&req(8, "initialize", r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}"#));
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(8), json!(-32600)),
        "{r}"
    );
    let r = c.ask(&req(9, "tools/list", "{}"));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = c.ask(&req(10, "tools/list", &format!("{{{META}}}")));
    assert_eq!(r["result"]["resultType"], "complete", "{r}");

    // A 2025 connection is exactly as before and refuses a modern claim.
    let mut c = Raw::start(&p);
    let r = c.ask(&req(1, "initialize", r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}"#));
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    let r = c.ask(&req(
        2,
        "tools/call",
        r#"{"name":"fx__echo","arguments":{"text":"hi"}}"#,
    ));
    assert!(r["result"].get("resultType").is_none(), "{r}");
    let r = c.ask(&req(3, "tools/list", &format!("{{{META}}}")));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let r = c.ask(&req(4, "ping", "{}"));
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn http_decides_per_post_and_checks_headers_against_the_body() {
    let p = Project::new(
        "[gateway]\nlisten = \"127.0.0.1:0\"\n\n[servers.fx]\ncommand = \"{fixture}\"\n",
    );
    let up = Up::start(&p);
    let v = "2026-07-28";
    let call = req(
        7,
        "tools/call",
        &format!(r#"{{"name":"fx__echo","arguments":{{"text":"hé"}},{META}}}"#),
    );
    let ok = |r: &common::http::Resp| r.messages().pop().unwrap();
    // Good: stateless, no session minted, a stale session id ignored.
    let r = up.post(
        &call,
        &[
            ("MCP-Protocol-Version", v),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "fx__echo"),
            ("Mcp-Session-Id", "stale"),
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("mcp-session-id").is_none(), "{r:?}");
    let m = ok(&r);
    assert_eq!(m["result"]["resultType"], "complete", "{m}");
    assert_eq!(m["result"]["content"][0]["text"], "hé");
    // Base64-encoded name.
    let r = up.post(
        &call,
        &[
            ("MCP-Protocol-Version", v),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "=?base64?ZnhfX2VjaG8=?="),
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // Header trouble: 400 + -32020 with the id.
    for headers in [
        vec![("Mcp-Method", "tools/call"), ("Mcp-Name", "fx__echo")],
        vec![
            ("MCP-Protocol-Version", v),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "fx__echo"),
        ],
        vec![("MCP-Protocol-Version", v), ("Mcp-Method", "tools/call")],
        vec![
            ("MCP-Protocol-Version", v),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "fx__add"),
        ],
        vec![
            ("MCP-Protocol-Version", v),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "=?base64?%%?="),
        ],
    ] {
        let r = up.post(&call, &headers);
        assert_eq!(r.status, 400, "{headers:?}: {r:?}");
        let m = ok(&r);
        assert_eq!(
            (m["id"].clone(), m["error"]["code"].clone()),
            (json!(7), json!(-32020)),
            "{m}"
        );
    }
    let h = |m: &'static str| vec![("MCP-Protocol-Version", v), ("Mcp-Method", m)];
    // Missing capabilities → 400 -32602; unknown revision → 400 -32022; unknown method → 404.
    let r = up.post(
        &req(
            8,
            "tools/list",
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        ),
        &h("tools/list"),
    );
    assert_eq!(
        (r.status, ok(&r)["error"]["code"].clone()),
        (400, json!(-32602)),
        "{r:?}"
    );
    let r = up.post(&req(9, "tools/list", r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#), &h("tools/list"));
    let m = ok(&r);
    assert_eq!(
        (r.status, m["id"].clone(), m["error"]["code"].clone()),
        (400, json!(9), json!(-32022)),
        "{r:?}"
    );
    assert_eq!(m["error"]["data"]["requested"], "2099-01-01");
    let r = up.post(
        &req(10, "nope/nothing", &format!("{{{META}}}")),
        &h("nope/nothing"),
    );
    assert_eq!(
        (r.status, ok(&r)["error"]["code"].clone()),
        (404, json!(-32601)),
        "{r:?}"
    );
    let r = up.post(
        &req(
            11,
            "resources/subscribe",
            &format!(r#"{{"uri":"x:/a",{META}}}"#),
        ),
        &h("resources/subscribe"),
    );
    assert_eq!(
        (r.status, ok(&r)["error"]["code"].clone()),
        (404, json!(-32601)),
        "{r:?}"
    );
    // Discover and a list: cache hints.
    let r = up.post(
        &req(12, "server/discover", &format!("{{{META}}}")),
        &h("server/discover"),
    );
    assert_eq!(
        ok(&r)["result"]["supportedVersions"][0],
        "2026-07-28",
        "{r:?}"
    );
    let r = up.post(
        &req(13, "tools/list", &format!("{{{META}}}")),
        &h("tools/list"),
    );
    let m = ok(&r);
    assert_eq!(
        (
            m["result"]["ttlMs"].clone(),
            m["result"]["cacheScope"].clone()
        ),
        (json!(0), json!("private")),
        "{m}"
    );
    // A 2025 session on the same endpoint is unchanged.
    let sid = up.initialize();
    let r = up.post(
        &req(
            14,
            "tools/call",
            r#"{"name":"fx__echo","arguments":{"text":"x"}}"#,
        ),
        &[("Mcp-Session-Id", &sid)],
    );
    let m = ok(&r);
    assert_eq!(m["result"]["content"][0]["text"], "x", "{m}");
    assert!(m["result"].get("resultType").is_none(), "{m}");
}
