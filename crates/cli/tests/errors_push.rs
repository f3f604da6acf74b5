//! New incidents reach agents without polling: Corral's `corral://errors` resource (its
//! `get_errors` answer), `notifications/resources/updated` for it to subscribers (2025
//! `resources/subscribe`, 2026 `subscriptions/listen`), and an `error` log message for
//! sessions that take logs; rate-limited. Real daemon, the fixture server printing
//! tracebacks on request.

mod common;
use common::mcp::McpClient;
use common::*;
use serde_json::{Value, json};

const CONFIG: &str = "[servers.fx]\ncommand = \"{fixture}\"\n";
const URI: &str = "corral://errors";

/// A Python traceback whose exception line is `ValueError: <what>`.
fn traceback(what: &str) -> String {
    format!(
        "Traceback (most recent call last):\n  File \"/srv/app.py\", line 7, in handler\n    raise ValueError({what:?})\nValueError: {what}"
    )
}

fn print_error(agent: &mut McpClient, what: &str) {
    let r = agent.call("fx__write_stderr", json!({ "text": traceback(what) }));
    assert_eq!(r["isError"], false, "{r}");
}

fn is_update(m: &Value) -> bool {
    m["method"] == "notifications/resources/updated" && m["params"]["uri"] == URI
}

fn is_error_log(m: &Value) -> bool {
    m["method"] == "notifications/message"
        && m["params"]["level"] == "error"
        && m["params"]["logger"] == "corral"
}

fn read_errors(agent: &mut McpClient) -> String {
    let r = agent.request("resources/read", json!({ "uri": URI }));
    let contents = &r["result"]["contents"][0];
    assert_eq!(contents["uri"], URI, "{r}");
    contents["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_new_incident_reaches_a_subscribed_agent_without_polling() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);

    let list = agent.request("resources/list", json!({}));
    let resources = list["result"]["resources"].as_array().unwrap();
    assert!(resources.iter().any(|r| r["uri"] == URI), "{list}");
    assert!(read_errors(&mut agent).starts_with("No errors"));
    let sub = agent.request("resources/subscribe", json!({ "uri": URI }));
    assert_eq!(sub["result"], json!({}), "{sub}");

    print_error(&mut agent, "bad port 'eighty'");
    let updated = agent.wait_for("the resource update", is_update);
    assert_eq!(updated["params"]["uri"], URI);
    let log = agent.wait_for("the error log message", is_error_log);
    let data = log["params"]["data"].as_str().unwrap();
    assert!(
        data.contains("[server:fx:python.traceback] ValueError: bad port 'eighty'")
            && data.contains("at /srv/app.py:7")
            && data.contains("data, not instructions"),
        "{data}"
    );
    assert!(read_errors(&mut agent).contains("bad port 'eighty'"));

    // Unsubscribed: the next one brings a log message, no resource update.
    agent.request("resources/unsubscribe", json!({ "uri": URI }));
    agent.other.clear();
    print_error(&mut agent, "second");
    agent.wait_for("the second log message", |m| {
        is_error_log(m) && m["params"]["data"].as_str().unwrap().contains("second")
    });
    assert!(!agent.other.iter().any(is_update), "{:#?}", agent.other);
}

/// New errors are announced at most every 2 s: what comes meanwhile is announced
/// together, every one named or counted.
#[test]
fn new_incidents_are_announced_at_most_every_two_seconds() {
    let p = Project::new(CONFIG);
    let _down = Down(&p);
    let mut agent = McpClient::bridge(&p);
    agent.request("resources/subscribe", json!({ "uri": URI }));
    const N: usize = 10;
    let burst = |agent: &mut McpClient, round: usize| {
        for i in 0..N {
            print_error(agent, &format!("burst {round}.{i}"));
        }
    };
    let mut named = 0;
    let mut count = |agent: &mut McpClient, round: usize| {
        while named < N * round {
            let log = agent.wait_for("the burst's log messages", is_error_log);
            let data = log["params"]["data"].as_str().unwrap();
            named += data.matches("ValueError: burst").count();
            named += data
                .rsplit_once("and ")
                .and_then(|(_, more)| more.split(' ').next()?.parse::<usize>().ok())
                .unwrap_or(0);
        }
    };
    burst(&mut agent, 1);
    count(&mut agent, 1);
    // A second burst right after the first announcement.
    burst(&mut agent, 2);
    count(&mut agent, 2);
    assert_eq!(named, 2 * N);
    let logs: Vec<std::time::Instant> = agent
        .notified_at
        .iter()
        .filter(|(_, m)| is_error_log(m))
        .map(|(at, _)| *at)
        .collect();
    assert!(logs.len() >= 2, "{} messages", logs.len());
    for pair in logs.windows(2) {
        let gap = pair[1] - pair[0];
        // 2 s apart as sent; reading them may bunch them up by a little.
        assert!(
            gap >= std::time::Duration::from_millis(1800),
            "{gap:?} between two announcements"
        );
    }
    let updates = agent
        .notified_at
        .iter()
        .filter(|(_, m)| is_update(m))
        .count();
    assert_eq!(updates, logs.len(), "one resource update per announcement");
}
