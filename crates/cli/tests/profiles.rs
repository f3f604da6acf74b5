//! Profiles: agents of one daemon that each see only the servers and tools they need
//! (`corral mcp --profile NAME`, `/mcp/NAME`), and what tool definitions cost
//! (`corral tools --tokens`).

mod common;

use common::http::Up;
use common::mcp::McpClient;
use common::{Down, Project};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[servers.a]
command = "{fixture}"

[servers.m]
command = "{fixture}"
args = ["--modern"]

[profiles.lean]
servers = ["a"]
tools = { allow = ["a__echo", "a__add", "get_errors"] }

[profiles.modern-only]
servers = ["m"]
builtin_tools = false
tools = { deny = ["*crash*", "*hang*"] }
"#;

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// The JSON-RPC error message of a response, or the text of a tool error result.
fn refusal(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("expected an error response: {r}"))
}

#[test]
fn agents_of_two_profiles_share_one_daemon_and_see_only_their_tools() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let mut lean = McpClient::spawn_args(&p, &["mcp", "--profile", "lean"]);
    let mut modern = McpClient::spawn_args(&p, &["mcp", "--profile", "modern-only"]);
    let mut all = McpClient::bridge(&p);

    assert_eq!(
        sorted(lean.tool_names()),
        ["a__add", "a__echo", "get_errors"],
        "lean sees the tools its profile allows, of its one server"
    );
    let modern_tools = modern.tool_names();
    assert!(
        modern_tools.iter().all(|t| t.starts_with("m__")),
        "modern-only sees server m's tools and none of Corral's: {modern_tools:?}"
    );
    assert!(modern_tools.contains(&"m__echo".to_owned()));
    assert!(
        !modern_tools
            .iter()
            .any(|t| t.contains("crash") || t.contains("hang")),
        "its deny patterns apply: {modern_tools:?}"
    );
    let every = all.tool_names();
    for t in ["a__echo", "a__crash", "m__echo", "m__crash", "get_errors"] {
        assert!(every.contains(&t.to_owned()), "{t} in {every:?}");
    }

    // One daemon, one set of servers, for all three agents.
    let ps = common::ps(&p);
    assert_eq!(ps["servers"].as_array().unwrap().len(), 2, "{ps}");
    assert_eq!(ps["daemon"]["agents"], 3, "{ps}");

    // Inside the profile: served.
    let r = lean.call("a__echo", json!({"text": "hi"}));
    assert_eq!(common::mcp::text(&r), "hi", "{r}");
    // Outside it: refused, saying why and what to do — another server's tool, a tool of
    // its own server that the profile leaves out, Corral's own tool for a profile
    // without them.
    for (agent, tool) in [
        ("lean", "m__echo"),
        ("lean", "a__crash"),
        ("modern", "get_errors"),
    ] {
        let agent = if agent == "lean" {
            &mut lean
        } else {
            &mut modern
        };
        let r = agent.request(
            "tools/call",
            json!({"name": tool, "arguments": {"text": "x"}}),
        );
        let msg = refusal(&r);
        assert!(
            msg.contains(&format!("tool '{tool}' is not offered to this agent"))
                && msg.contains("profile '")
                && msg.contains("corral.toml"),
            "{tool}: {msg}"
        );
    }
    // The same call from an agent without a profile works: the refusal was the
    // profile's, not the server's.
    let r = all.call("m__echo", json!({"text": "through"}));
    assert_eq!(common::mcp::text(&r), "through", "{r}");

    // Resources follow the servers: m's are not lean's to list or read.
    let listed = |c: &mut McpClient| -> Vec<String> {
        let r = c.request("resources/list", json!({}));
        r["result"]["resources"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|x| x["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(listed(&mut all).contains(&"fixture://watched".to_owned()));
    let lean_resources = listed(&mut lean);
    assert!(
        !lean_resources.iter().any(|u| u.starts_with("fixture://")),
        "{lean_resources:?}"
    );
    // (Its one server with resources is asked instead, and knows no such resource.)
    let r = lean.request("resources/read", json!({"uri": "fixture://watched"}));
    assert!(
        r["result"].is_null() && !refusal(&r).is_empty(),
        "lean cannot read m's resource: {r}"
    );
    let r = modern.request("resources/read", json!({"uri": "fixture://watched"}));
    assert!(r["result"]["contents"].is_array(), "{r}");
}

#[test]
fn an_unknown_profile_is_refused_before_any_session() {
    let p = Project::new(CONFIG);
    let r = p.run(&["mcp", "--profile", "leen"]);
    assert_eq!(r.code(), 2, "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("no profile 'leen'")
            && err.contains("did you mean 'lean'?")
            && err.contains("lean, modern-only"),
        "{err}"
    );
    assert!(
        !p.dir.join(".corral/daemon.pid").exists(),
        "no daemon was started for a refused profile"
    );
}

#[test]
fn a_profile_naming_a_server_that_does_not_exist_is_a_config_error() {
    let p = Project::new(
        "[servers.files]\ncommand = \"{fixture}\"\n\n[profiles.web]\nservers = [\"filez\"]\nbuiltin = true\n",
    );
    let r = p.run(&["check"]);
    assert_eq!(r.code(), 2, "{r:?}");
    let err = r.stderr() + &r.stdout();
    assert!(
        err.contains("profiles.web.servers[0]")
            && err.contains("no server named \"filez\"")
            && err.contains("did you mean \"files\"?"),
        "{err}"
    );
    assert!(
        err.contains("profiles.web.builtin"),
        "unknown keys too: {err}"
    );
}

#[test]
fn http_agents_choose_a_profile_by_path() {
    let p = Project::new(&format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{CONFIG}"));
    let up = Up::start(&p);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let names = |r: &common::http::Resp| -> Vec<String> {
        let m = r.messages().pop().unwrap_or_else(|| panic!("{r:?}"));
        sorted(
            common::names(&m["result"]["tools"])
                .into_iter()
                .map(str::to_owned)
                .collect(),
        )
    };

    let r = up.post_to("/mcp/lean", init, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let r = up.post_to("/mcp/lean", list, &[("Mcp-Session-Id", &sid)]);
    assert_eq!(names(&r), ["a__add", "a__echo", "get_errors"]);

    // The session belongs to its path: at /mcp it is unknown, not widened.
    let r = up.post(list, &[("Mcp-Session-Id", &sid)]);
    assert_eq!(r.status, 404, "{r:?}");

    // A stateless 2026-07-28 request at the profile's path sees the profile too.
    let modern = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let r = up.post_to(
        "/mcp/lean",
        modern,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(names(&r), ["a__add", "a__echo", "get_errors"]);

    // An unknown profile: 404 naming the ones there are.
    let r = up.post_to("/mcp/nope", init, &[]);
    assert_eq!(r.status, 404, "{r:?}");
    assert!(
        r.body.contains("no profile \"nope\"") && r.body.contains("lean, modern-only"),
        "{r:?}"
    );
    // Without a profile: everything, as before.
    let r = up.post(init, &[]);
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let r = up.post(list, &[("Mcp-Session-Id", &sid)]);
    assert!(names(&r).contains(&"m__echo".to_owned()), "{r:?}");
}

#[test]
fn a_reload_that_changes_a_profile_tells_its_agents() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let mut lean = McpClient::spawn_args(&p, &["mcp", "--profile", "lean"]);
    assert_eq!(
        sorted(lean.tool_names()),
        ["a__add", "a__echo", "get_errors"]
    );
    p.write(
        "corral.toml",
        &CONFIG.replace(
            r#"allow = ["a__echo", "a__add", "get_errors"]"#,
            r#"allow = ["a__echo"]"#,
        ),
    );
    let r = p.run(&["reload"]);
    assert_eq!(r.code(), 0, "{r:?}");
    lean.wait_for("tools/list_changed", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    assert_eq!(lean.tool_names(), ["a__echo"]);
    let r = lean.request(
        "tools/call",
        json!({"name": "a__add", "arguments": {"a": 1, "b": 2}}),
    );
    assert!(refusal(&r).contains("profile 'lean'"), "{r}");
}

#[test]
fn tools_tokens_prices_each_tool_server_and_profile() {
    let p = Project::new(CONFIG);
    let r = p.run(&["tools", "--tokens", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    let report: Value = serde_json::from_str(&r.stdout()).unwrap();
    let tools = report["tools"].as_array().unwrap();
    let cost = |name: &str| -> u64 {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {report}"))["tokens"]
            .as_u64()
            .unwrap()
    };
    // The estimate follows the definition's size: a tool with a longer definition costs
    // more, and none is free.
    assert!(tools.iter().all(|t| t["tokens"].as_u64().unwrap() > 0));
    assert!(cost("get_errors") > cost("a__echo"), "{report}");
    let sum = |pick: &dyn Fn(&Value) -> bool| -> u64 {
        tools
            .iter()
            .filter(|t| pick(t))
            .map(|t| t["tokens"].as_u64().unwrap())
            .sum()
    };
    let servers = report["servers"].as_array().unwrap();
    let server = |s: &str| servers.iter().find(|x| x["server"] == s).unwrap().clone();
    assert_eq!(
        server("a")["tokens"].as_u64().unwrap(),
        sum(&|t| t["server"] == "a")
    );
    assert_eq!(
        server("corral")["tokens"].as_u64().unwrap(),
        sum(&|t| t["server"] == "corral")
    );
    let profiles = report["profiles"].as_array().unwrap();
    let profile = |n: Value| profiles.iter().find(|x| x["profile"] == n).unwrap().clone();
    assert_eq!(
        profile(Value::Null)["tokens"].as_u64().unwrap(),
        sum(&|_| true)
    );
    let lean = profile(json!("lean"));
    assert_eq!(lean["tools"], 3, "{report}");
    assert_eq!(
        lean["tokens"].as_u64().unwrap(),
        cost("a__echo") + cost("a__add") + cost("get_errors")
    );

    // The text form says the same, and how it is estimated.
    let r = p.run(&["tools", "--tokens"]);
    let out = r.stdout();
    assert!(
        out.contains("corral mcp --profile lean") && out.contains("bytes per token"),
        "{out}"
    );
    // --profile lists what that agent sees.
    let r = p.run(&["tools", "--profile", "lean", "--json"]);
    let listed: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(
        sorted(
            common::names(&listed)
                .into_iter()
                .map(str::to_owned)
                .collect()
        ),
        ["a__add", "a__echo", "get_errors"]
    );

    // Without a daemon the cost is what an agent pays through one: the process and proxy
    // tools the daemon offers are counted too.
    let corral_tools = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["server"] == "corral")
        .unwrap()["tools"]
        .clone();
    assert_eq!(corral_tools, 14, "{report}");
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let r = p.run(&["tools", "--tokens", "--json"]);
    let from_daemon: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(from_daemon["profiles"], report["profiles"], "{from_daemon}");
    assert_eq!(from_daemon["servers"], report["servers"], "{from_daemon}");
}

/// The official Python SDK client with a profile, pinned to 2026-07-28 and legacy, over
/// the daemon bridge (`corral mcp --profile`) and HTTP (`/mcp/PROFILE`).
#[test]
fn the_python_sdk_client_sees_its_profile_in_every_mode() {
    let p = Project::new(&format!("[gateway]\nlisten = \"127.0.0.1:0\"\n{CONFIG}"));
    let _down = Down(&p);
    let up = Up::start(&p);
    let python = common::peers().join("venv/bin/python");
    let script = common::repo().join("tests/peers/py_profile.py");
    let corral = common::corral();
    let cfg = p.dir.join("corral.toml");
    let url = format!("{}/lean", up.url);
    for (mode, protocol) in [("2026-07-28", "2026-07-28"), ("legacy", "2025-11-25")] {
        for args in [
            vec![
                mode,
                "stdio",
                corral.to_str().unwrap(),
                cfg.to_str().unwrap(),
                "lean",
            ],
            vec![mode, "http", url.as_str(), up.token.as_str()],
        ] {
            let seen = common::peer_script(&python, &script, &args);
            assert_eq!(seen["protocol"], protocol, "{args:?}: {seen}");
            assert_eq!(
                seen["tools"],
                json!(["a__add", "a__echo", "get_errors"]),
                "{args:?}: {seen}"
            );
            assert_eq!(seen["allowed"], "inside", "{seen}");
            let refused = seen["outside"]["refused"].as_str().unwrap_or_else(|| {
                panic!("{args:?}: a tool outside the profile was not refused: {seen}")
            });
            assert!(
                refused.contains("not offered to this agent") && refused.contains("'lean'"),
                "{refused}"
            );
        }
    }
}
