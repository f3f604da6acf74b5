//! The HTTP port: never a fixed default, so two projects (and a test suite beside a
//! developer's own daemon) never clash; and a clash never costs an agent its tools.

mod common;
use common::mcp::McpClient;
use common::*;
use serde_json::{Value, json};

const CFG: &str = r#"
[servers.fx]
command = "{fixture}"
"#;

fn status(p: &Project) -> Value {
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    serde_json::from_str::<Value>(&r.stdout()).unwrap()["daemon"].clone()
}

fn up_detached(p: &Project) -> String {
    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "{r:?}");
    r.stdout()
        .lines()
        .find_map(|l| l.strip_prefix("corral: MCP endpoint "))
        .unwrap_or_else(|| panic!("`up -d` printed no endpoint: {r:?}"))
        .to_owned()
}

fn endpoint_file(p: &Project) -> String {
    std::fs::read_to_string(p.dir.join(".corral/endpoint"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Whether something accepts TCP connections at `http://ADDR/mcp`.
fn listening(url: &str) -> bool {
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    std::net::TcpStream::connect(addr).is_ok()
}

#[test]
fn two_projects_daemons_run_at_once_each_on_its_own_free_port() {
    let (a, b) = (Project::new(CFG), Project::new(CFG));
    let (_down_a, _down_b) = (Down(&a), Down(&b));
    let url_a = up_detached(&a);
    let url_b = up_detached(&b);
    assert_ne!(url_a, url_b);
    for (p, url) in [(&a, &url_a), (&b, &url_b)] {
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        assert_eq!(status(p)["endpoint"], url.as_str(), "ps shows the endpoint");
        assert_eq!(&endpoint_file(p), url, ".corral/endpoint holds it");
        assert!(listening(url));
        let mut agent = McpClient::bridge(p);
        let r = agent.call("fx__echo", json!({"text": "hi"}));
        assert_eq!(common::mcp::text(&r), "hi");
    }
}

#[test]
fn an_unset_listen_gets_the_same_port_again_after_a_restart() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let first = up_detached(&p);
    assert_eq!(p.run(&["down"]).code(), 0);
    assert_eq!(up_detached(&p), first, "HTTP clients keep their URL");
}

#[test]
fn a_taken_listen_port_costs_http_only_and_stdio_agents_keep_their_tools() {
    // Someone else holds the configured port.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let p = Project::new(&format!("[gateway]\nlisten = \"{addr}\"\n{CFG}"));
    let _down = Down(&p);

    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "the daemon runs without HTTP: {r:?}");
    assert!(r.stdout().contains("no HTTP endpoint"), "{r:?}");
    assert!(
        r.stderr().contains(&format!("cannot listen on {addr}"))
            && r.stderr().contains("corral mcp"),
        "the warning names the address and that stdio agents are fine: {r:?}"
    );

    let mut agent = McpClient::bridge(&p);
    let r = agent.call("fx__echo", json!({"text": "no port needed"}));
    assert_eq!(common::mcp::text(&r), "no port needed");

    let st = status(&p);
    assert!(st["endpoint"].is_null(), "{st}");
    assert!(st["http_error"].as_str().unwrap().contains("cannot listen"));
    let ps = p.run(&["ps"]);
    assert!(ps.stderr().contains("cannot listen on"), "{ps:?}");
    assert!(!p.dir.join(".corral/endpoint").exists());
    assert!(
        p.run(&["events", "--json"])
            .stdout()
            .contains("\"gateway.listen_failed\"")
    );
}

#[test]
fn up_survives_whoever_started_it_no_longer_reading_its_stdout() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    // `corral up | true`: the pipe is closed before `up` writes its first line.
    let mut up = p
        .cmd(&["up"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(up.stdout.take());
    wait_until("the daemon answers", || {
        p.run(&["ps", "--json"]).code() == 0
    });
    let mut agent = McpClient::bridge(&p);
    let r = agent.call("fx__echo", json!({"text": "still serving"}));
    assert_eq!(common::mcp::text(&r), "still serving");
    assert!(up.try_wait().unwrap().is_none(), "corral up died");
}
