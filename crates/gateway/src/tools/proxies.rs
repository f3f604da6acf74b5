//! Corral's proxy tools: an agent starts a dev proxy in front of the app's dev server,
//! lists and stops them, and reads what went through one: the requests (with the error
//! message of each failed one) and the errors the pages reported from the browser.
//!
//! Offered with the process tools (a gateway that runs the project: the daemon's, and
//! `corral mcp --standalone`), answered with the attached [`corral_proxy::Proxies`].

use super::{Builtin, count_arg, string_arg};
use corral_events::rows::ProxyRow;
use corral_proxy::browser::{BrowserEntry, BrowserQuery};
use corral_proxy::traffic::{TrafficEntry, TrafficQuery};
use corral_proxy::{Proxies, ProxySpec};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// Entries `proxy_log` shows unless told.
const DEFAULT_ENTRIES: usize = 30;

/// What the proxy tools work on.
struct Ctx<'a> {
    proxies: &'a Proxies,
    /// The names agents see of the other tools.
    tools: &'a super::Ctx<'a>,
}

impl Ctx<'_> {
    fn tool(&self, b: Builtin) -> &str {
        self.tools.name(b)
    }
}

/// The tool object of proxy tool `b` for `tools/list` (without its name).
pub fn definition(b: Builtin) -> Value {
    let name = json!({"type": "string"});
    match b {
        Builtin::Proxies => json!({
            "description": "Corral: the dev proxies: the URL to open instead of the dev \
                server's, the target, and counts of requests, failures and page errors.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
        }),
        Builtin::ProxyStart => json!({
            "description": "Corral: start a dev proxy that records requests and the page's \
                JavaScript errors: a configured `name`, or a new one for `target`. Answers the \
                URL to open.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "configured, or new ([A-Za-z0-9_-])"},
                    "target": {"type": "string", "description": "e.g. http://127.0.0.1:5173"},
                    "listen": {"type": "string", "description": "loopback IP:PORT (default: a free port)"}
                },
                "required": ["name"]
            },
            "annotations": {"destructiveHint": false},
        }),
        Builtin::ProxyStop => json!({
            "description": "Corral: stop a dev proxy (the dev server is left running).",
            "inputSchema": {
                "type": "object",
                "properties": {"name": name},
                "required": ["name"]
            },
            "annotations": {"destructiveHint": true, "idempotentHint": true},
        }),
        Builtin::ProxyLog => json!({
            "description": "Corral: a dev proxy's requests and its pages' errors (source-mapped \
                JavaScript errors, rejections, console.error, failed fetches), newest last.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": name,
                    "errors": {"type": "boolean", "description": "only failed requests"},
                    "path": {"type": "string", "description": "only paths containing this"},
                    "last": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "default 30"}
                },
                "required": ["name"]
            },
            "annotations": {"readOnlyHint": true},
        }),
        _ => unreachable!("not a proxy tool: {b:?}"),
    }
}

/// Runs proxy tool `b` on `proxies`; a `tools/call` result.
pub async fn call(b: Builtin, proxies: &Proxies, tools: &super::Ctx<'_>, args: &Value) -> String {
    let ctx = &Ctx { proxies, tools };
    let outcome = match b {
        Builtin::Proxies => Ok(list(ctx)),
        Builtin::ProxyStart => start(ctx, args).await,
        Builtin::ProxyStop => stop(ctx, args).await,
        Builtin::ProxyLog => log(ctx, args),
        _ => Err(format!("'{}' is not a proxy tool", b.name())),
    };
    match outcome {
        Ok((text, data)) => crate::jsonrpc::tool_text_result(&text, Some(&data)),
        Err(message) => crate::jsonrpc::tool_error_result(&message),
    }
}

type Outcome = Result<(String, Value), String>;

fn name_arg(args: &Value) -> Result<&str, String> {
    string_arg(args, "name")?.ok_or_else(|| "missing argument `name` (the proxy's name)".into())
}

/// One line per proxy: `web  http://127.0.0.1:41234 → http://127.0.0.1:5173  …`.
fn list(ctx: &Ctx<'_>) -> (String, Value) {
    let running = ctx.proxies.list();
    let rows: Vec<_> = running.iter().map(|p| p.row()).collect();
    let mut text = String::new();
    for r in &rows {
        let _ = writeln!(
            text,
            "{}  {} → {}  up {}s, {} requests, {} failed, {} browser errors",
            r.name, r.url, r.target, r.uptime_s, r.requests, r.errors, r.browser_errors
        );
    }
    let stopped: Vec<String> = ctx
        .proxies
        .configured_names()
        .into_iter()
        .filter(|n| !rows.iter().any(|r| &r.name == n))
        .collect();
    for n in &stopped {
        let _ = writeln!(
            text,
            "{n}  (configured, not running: `{}` starts it)",
            ctx.tool(Builtin::ProxyStart)
        );
    }
    if text.is_empty() {
        text = format!(
            "No dev proxies. `{}` with a name and the dev server's URL as `target` starts one.",
            ctx.tool(Builtin::ProxyStart)
        );
    }
    (text, json!({"proxies": rows, "stopped": stopped}))
}

async fn start(ctx: &Ctx<'_>, args: &Value) -> Outcome {
    let name = name_arg(args)?;
    if let Some(problem) = corral_config::name_problem("proxy", name) {
        return Err(problem);
    }
    let target = string_arg(args, "target")?;
    let listen = string_arg(args, "listen")?;
    if let Some(listen) = listen {
        loopback_listen(listen)?;
    }
    let spec = match (target, ctx.proxies.configured(name)) {
        (Some(t), _) => ProxySpec::new(name, t, listen.unwrap_or("127.0.0.1:0")),
        (None, Some(mut spec)) => {
            if let Some(l) = listen {
                spec.listen = l.to_owned();
            }
            spec
        }
        (None, None) => {
            return Err(format!(
                "{}; pass `target` (the dev server's URL, e.g. \"http://127.0.0.1:5173\") to start a new one",
                ctx.proxies.unknown(name)
            ));
        }
    };
    let proxy = ctx.proxies.start(spec).await?;
    let row = proxy.row();
    let text = format!(
        "Proxy '{}' listens on {} → {}. Open {} instead of the target; `{}` shows its requests \
         and the page's errors.",
        row.name,
        row.url,
        row.target,
        row.url,
        ctx.tool(Builtin::ProxyLog)
    );
    Ok((text, json!(row)))
}

/// An agent may only put a proxy on a loopback address: one on `0.0.0.0` or a LAN IP
/// would open the dev server (and what the proxy records) to the network, which is the
/// user's call, made in the config.
fn loopback_listen(listen: &str) -> Result<(), String> {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(addr) if addr.ip().is_loopback() => Ok(()),
        Ok(_) => Err(format!(
            "`listen` {listen:?} is not a loopback address: an agent may only start a proxy \
             on 127.0.0.0/8 or [::1] (e.g. \"127.0.0.1:0\"); to serve one beyond this machine, \
             the user configures it in corral.toml ([proxies.NAME] listen = ...)"
        )),
        Err(_) => Err(format!(
            "`listen` {listen:?} is not a loopback IP:PORT: an agent may only start a proxy \
             on 127.0.0.0/8 or [::1] (e.g. \"127.0.0.1:0\"); other addresses are for the \
             user to configure in corral.toml ([proxies.NAME] listen = ...)"
        )),
    }
}

async fn stop(ctx: &Ctx<'_>, args: &Value) -> Outcome {
    let name = name_arg(args)?;
    let Some(proxy) = ctx.proxies.get(name) else {
        return Err(ctx.proxies.unknown(name));
    };
    let row = proxy.row();
    drop(proxy);
    ctx.proxies.stop(name).await;
    Ok((
        format!("Proxy '{name}' stopped ({} was its URL).", row.url),
        json!(row),
    ))
}

fn log(ctx: &Ctx<'_>, args: &Value) -> Outcome {
    let name = name_arg(args)?;
    let Some(proxy) = ctx.proxies.get(name) else {
        return Err(ctx.proxies.unknown(name));
    };
    let limit = count_arg(args, "last")?.unwrap_or(DEFAULT_ENTRIES);
    let errors_only = match args.get("errors") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("`errors` must be true or false, not {other}")),
    };
    let traffic = proxy.traffic().query(&TrafficQuery {
        errors_only,
        path: string_arg(args, "path")?.map(str::to_owned),
        limit: Some(limit),
        ..Default::default()
    });
    let browser = proxy.browser().query(&BrowserQuery {
        limit: Some(limit),
        ..Default::default()
    });
    let row = proxy.row();
    let text = render_log(&row, &browser, &traffic, errors_only);
    // The headers are for the dashboard and the CLI's `--log --json`: up to 16 KiB an
    // entry is too much for an agent's context.
    let traffic: Vec<_> = traffic.iter().map(TrafficEntry::without_headers).collect();
    Ok((
        text,
        json!({"proxy": row, "browser": browser, "traffic": traffic}),
    ))
}

/// A proxy's log as text (the tool's answer, and `corral proxy NAME --log`): a header
/// line, the browser errors, then the requests, newest last.
pub fn render_log(
    row: &ProxyRow,
    browser: &[BrowserEntry],
    traffic: &[TrafficEntry],
    errors_only: bool,
) -> String {
    let mut text = format!(
        "proxy '{}' {} → {}: {} requests, {} failed, {} browser errors\n",
        row.name, row.url, row.target, row.requests, row.errors, row.browser_errors
    );
    if !browser.is_empty() {
        text.push_str("\nbrowser errors (newest last):\n");
        for e in browser {
            browser_line(&mut text, e);
        }
    }
    text.push_str(match (traffic.is_empty(), errors_only) {
        (true, true) => "\nno failed requests\n",
        (true, false) => "\nno requests yet\n",
        (false, true) => "\nfailed requests (newest last):\n",
        (false, false) => "\nrequests (newest last):\n",
    });
    for t in traffic {
        traffic_line(&mut text, t);
    }
    text
}

/// `12:01:03 error TypeError: … → src/x.tsx:28:12 (page http://…/users)`.
fn browser_line(out: &mut String, e: &BrowserEntry) {
    let _ = write!(out, "  {} {} {}", clock(&e.ts), e.kind, e.message);
    if e.count > 1 {
        let _ = write!(out, " ({}x)", e.count);
    }
    if !e.location.is_empty() {
        let _ = write!(out, " → {}", e.location);
    }
    if !e.page.is_empty() {
        let _ = write!(out, " (page {})", e.page);
    }
    out.push('\n');
}

/// `12:01:02 GET /api/users → 500 in 12 ms, 57 B: database is down`.
fn traffic_line(out: &mut String, t: &TrafficEntry) {
    let _ = write!(out, "  {} {} {} → ", clock(&t.ts), t.method, t.url);
    match (&t.status, &t.error) {
        (_, Some(err)) => {
            let _ = write!(out, "failed: {err}");
        }
        (Some(status), None) => {
            let _ = write!(
                out,
                "{status} in {:.0} ms, {} B",
                t.total_ms, t.response_bytes
            );
            if let Some(m) = &t.message {
                let _ = write!(out, ": {m}");
            }
        }
        (None, None) => out.push_str("no answer yet"),
    }
    out.push('\n');
}

/// The time of day of an RFC 3339 timestamp (`12:01:03`).
fn clock(ts: &str) -> &str {
    ts.get(11..19).unwrap_or(ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_events::EventBus;

    fn error_text(answer: &str) -> String {
        let v: Value = serde_json::from_str(answer).unwrap();
        assert_eq!(v["isError"], true, "an error: {v}");
        v["content"][0]["text"].as_str().unwrap().to_owned()
    }

    /// An agent's `name` follows the config's rule (it is printed by `ps`, `errors` and
    /// `events`: a terminal escape in it would reach the user's terminal), and its
    /// `listen` must be loopback (a proxy on 0.0.0.0 opens the dev server to the network;
    /// only the user may configure that).
    #[tokio::test]
    async fn an_agent_cannot_start_a_proxy_with_a_bad_name_or_a_non_loopback_listen() {
        let proxies = Proxies::new(EventBus::new(16));
        let servers = Default::default();
        let tools = super::super::Ctx::servers(&servers);
        let target = "http://127.0.0.1:9";
        for name in ["we\u{1b}]0;pwned\u{7}b", "a b", "", "x/y"] {
            let args = json!({"name": name, "target": target, "listen": "127.0.0.1:0"});
            let text = error_text(&call(Builtin::ProxyStart, &proxies, &tools, &args).await);
            assert!(
                text.contains("may only contain") || text.contains("empty"),
                "{text}"
            );
            assert!(!text.contains('\u{1b}'), "the escape is quoted: {text:?}");
        }
        for listen in ["0.0.0.0:0", "[::]:0", "192.0.2.1:0", "localhost:0"] {
            let args = json!({"name": "web", "target": target, "listen": listen});
            let text = error_text(&call(Builtin::ProxyStart, &proxies, &tools, &args).await);
            assert!(text.contains("loopback"), "{listen}: {text}");
            assert!(text.contains("corral.toml"), "{listen}: {text}");
        }
        assert!(proxies.names().is_empty());
        for listen in ["127.0.0.1:0", "127.0.0.2:0", "[::1]:0"] {
            let args = json!({"name": "ok_name-1", "target": target, "listen": listen});
            let v: Value =
                serde_json::from_str(&call(Builtin::ProxyStart, &proxies, &tools, &args).await)
                    .unwrap();
            if listen == "[::1]:0" && v["isError"] == true {
                continue; // no IPv6 on this machine
            }
            assert_ne!(v["isError"], true, "{listen}: {v}");
            proxies.stop("ok_name-1").await;
        }
    }
}
