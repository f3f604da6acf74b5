//! OAuth for remote MCP servers, against a real authorization server: oidc-provider
//! with dynamic registration, PKCE, resource indicators and rotating refresh tokens
//! (`tests/peers/oauth_server.mjs`), protecting a TypeScript SDK server. The browser is
//! `tests/peers/oauth_login.mjs`, which signs in and consents on the provider's pages
//! and follows the redirect to `corral auth`'s loopback address (or prints it, for the
//! paste path). Every credential lives in the test's own store (`CORRAL_OAUTH_DIR`).

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The authorization server and the MCP server it protects, killed when dropped.
struct Provider {
    child: Child,
    mcp_url: String,
    control: String,
}

impl Provider {
    fn start(args: &[&str]) -> Provider {
        assert!(
            peers().join("oauth/node_modules/oidc-provider").exists(),
            "oidc-provider is not installed: run ./scripts/install-peers.sh"
        );
        let mut child = Command::new("node")
            .arg(repo().join("crates/cli/tests/peers/oauth_server.mjs"))
            .arg(peers())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run the OAuth peer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Provider {
            child,
            mcp_url: v["mcp_url"].as_str().unwrap().to_owned(),
            control: v["control"].as_str().unwrap().to_owned(),
        }
    }

    /// `METHOD /_peer/PATH` on the control API, its JSON answer.
    fn control(&self, method: &str, path: &str) -> Value {
        let rest = self.control.strip_prefix("http://").unwrap();
        let (host, base) = rest.split_once('/').unwrap();
        let mut s = std::net::TcpStream::connect(host).unwrap();
        write!(
            s,
            "{method} /{base}/{path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    fn stats(&self) -> Value {
        self.control("GET", "stats")
    }

    /// The authorization server's log of requests at `endpoint`.
    fn log(&self, endpoint: &str) -> Vec<Value> {
        let v = self.control("GET", "log");
        let all = v
            .as_array()
            .cloned()
            .or_else(|| v["log"].as_array().cloned());
        all.unwrap_or_else(|| panic!("no log in {v}"))
            .into_iter()
            .filter(|e| e["endpoint"] == endpoint)
            .collect()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project with server `web` behind the provider, and its own credential store.
struct Setup {
    p: Project,
    store: PathBuf,
}

impl Setup {
    fn new(provider: &Provider) -> Setup {
        let p = Project::new(&format!(
            "[servers.web]\nurl = \"{}\"\nstartup_timeout = \"20s\"\n",
            provider.mcp_url
        ));
        let store = p.dir.join(".test-user/oauth");
        Setup { p, store }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.p.cmd(args);
        c.env_remove("SSH_CONNECTION")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
        c
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("run corral");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `corral auth web` with the test browser signing in.
    fn auth(&self) -> (i32, String, String) {
        let browser = format!(
            "node {}",
            repo()
                .join("crates/cli/tests/peers/oauth_login.mjs")
                .display()
        );
        let out = self
            .cmd(&["auth", "web", "--wait", "60"])
            .env("BROWSER", browser)
            .stdin(Stdio::null())
            .output()
            .expect("run corral auth");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `corral auth web --no-browser`, and a browser elsewhere (over SSH) signing in:
    /// the running command, the rest of its output, and the address the browser ended
    /// on, to paste.
    fn auth_elsewhere(
        &self,
    ) -> (
        Child,
        std::io::Lines<BufReader<std::process::ChildStdout>>,
        String,
    ) {
        let mut auth = self
            .cmd(&["auth", "web", "--no-browser", "--wait", "60"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(auth.stdout.take().unwrap()).lines();
        let url = loop {
            let line = out.next().expect("the authorization address").unwrap();
            if let Some(u) = line.trim().strip_prefix("http://") {
                break format!("http://{u}");
            }
        };
        let landed = Command::new("node")
            .arg(repo().join("crates/cli/tests/peers/oauth_login.mjs"))
            .arg(&url)
            .arg("--print")
            .output()
            .unwrap();
        assert!(landed.status.success(), "{landed:?}");
        let landed = String::from_utf8(landed.stdout).unwrap().trim().to_owned();
        assert!(landed.contains("/callback?"), "{landed}");
        (auth, out, landed)
    }

    fn row(&self) -> Value {
        let (code, out, err) = self.run(&["ps", "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["servers"][0].clone()
    }

    fn wait_state(&self, state: &str) -> Value {
        let mut row = Value::Null;
        wait_until(&format!("web {state}"), || {
            row = self.row();
            row["state"] == state
        });
        row
    }

    fn call(&self, tool: &str) -> (i32, String, String) {
        self.run(&["call", "web", tool, "{}"])
    }

    /// The store's record of `web`.
    fn record(&self) -> (PathBuf, Value) {
        let file = std::fs::read_dir(&self.store)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .expect("a record");
        let v = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        (file, v)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

/// Every file under `dir`, read as text (lossy).
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push_str(&String::from_utf8_lossy(&b));
            }
        }
    }
    out
}

#[test]
fn a_server_behind_oauth_waits_for_corral_auth_then_serves_and_never_shows_its_token() {
    let provider = Provider::start(&[]);
    let s = Setup::new(&provider);
    let (code, _, err) = s.run(&["up", "-d"]);
    assert_eq!(code, 0, "{err}");

    // Not failed, not restarting: waiting for the one command that helps.
    let row = s.wait_state("needs_auth");
    let why = row["last_error"].as_str().unwrap_or_default().to_owned();
    assert!(why.contains("corral auth web"), "{row}");
    let (code, _, err) = s.call("whoami");
    assert_ne!(code, 0);
    assert!(err.contains("corral auth web"), "{err}");
    let (_, errors, _) = s.run(&["errors", "--json"]);
    assert!(errors.contains("corral auth web"), "{errors}");

    // The flow: registration, the browser, the loopback answer, the code redeemed.
    let started = Instant::now();
    let (code, out, err) = s.auth();
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("authorized server 'web'"), "{out}");
    s.wait_state("ready");
    let (code, out, err) = s.call("whoami");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mcp:tools"), "{out}");
    eprintln!("authorized and serving in {:?}", started.elapsed());

    // RFC 8707: exactly one `resource`, the server's, on the authorization and the
    // token request; PKCE S256; one registration.
    for endpoint in ["authorization", "token"] {
        let reqs = provider.log(endpoint);
        assert!(!reqs.is_empty(), "no {endpoint} request");
        for r in &reqs {
            assert_eq!(r["params"]["resource"], 1, "{endpoint}: {r}");
            assert_eq!(r["resource"][0], provider.mcp_url.as_str(), "{r}");
        }
    }
    assert_eq!(provider.stats()["registrations"], 1);

    // The store: outside the project, private; the token nowhere else.
    let (file, record) = s.record();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(&s.store).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let access = record["tokens"]["access"].as_str().unwrap().to_owned();
    let refresh = record["tokens"]["refresh"].as_str().unwrap().to_owned();
    assert!(access.len() > 10 && refresh.len() > 10, "{record}");
    let state = all_text_under(&s.p.dir.join(".corral"));
    let (_, ps, _) = s.run(&["ps", "--json"]);
    let (_, events, _) = s.run(&["events", "--json"]);
    for (what, text) in [("state dir", &state), ("ps", &ps), ("events", &events)] {
        assert!(!text.contains(&access), "the access token in {what}");
        assert!(!text.contains(&refresh), "the refresh token in {what}");
    }

    // Logout revokes and forgets; the daemon's server is back to needing auth.
    let (code, out, err) = s.run(&["auth", "web", "--logout"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("revoked the refresh token"), "{out}");
    s.wait_state("needs_auth");
    let (_, record) = s.record();
    assert!(record["tokens"].is_null(), "{record}");
    assert!(!provider.log("revocation").is_empty());
}

/// Twenty agents calling while every access token dies at once (as at an expiry),
/// three times: each time every agent's request gets a 401 together, and exactly one
/// refresh serves them all — no refresh token is ever presented twice (the provider
/// would revoke the whole grant: the failure of agents that each refresh on their own)
/// — and every call succeeds, retried once behind the scenes.
#[test]
fn twenty_agents_hit_by_one_expiry_share_one_refresh() {
    let provider = Provider::start(&[]);
    let s = Setup::new(&provider);
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    s.wait_state("needs_auth");
    let (code, out, err) = s.auth();
    assert_eq!(code, 0, "{out}\n{err}");
    s.wait_state("ready");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let agents: Vec<_> = (0..20)
        .map(|_| {
            let child = s
                .cmd(&["mcp"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stop = stop.clone();
            std::thread::spawn(move || agent_calls(child, &stop))
        })
        .collect();
    for round in 1..=3u64 {
        let accepted = provider.stats()["accepted_tokens"].as_u64().unwrap();
        provider.control("POST", "drop-access-tokens");
        wait_until(&format!("refresh {round}"), || {
            provider.stats()["refresh_requests"].as_u64() >= Some(round)
        });
        wait_until("calls on the new token", || {
            provider.stats()["accepted_tokens"].as_u64() > Some(accepted)
        });
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 0;
    for a in agents {
        calls += a.join().expect("an agent's calls all succeed");
    }
    let refreshes: Vec<Value> = provider
        .log("token")
        .into_iter()
        .filter(|r| r["grant_type"] == "refresh_token")
        .collect();
    assert_eq!(refreshes.len(), 3, "one refresh per expiry: {refreshes:#?}");
    let mut presented: Vec<&str> = refreshes
        .iter()
        .map(|r| r["refresh_token_hash"].as_str().unwrap())
        .collect();
    presented.sort();
    presented.dedup();
    assert_eq!(presented.len(), 3, "a refresh token presented twice");
    assert!(
        refreshes
            .iter()
            .all(|r| r["status"] == 200 && r["params"]["resource"] == 1),
        "{refreshes:#?}"
    );
    eprintln!("{calls} calls by 20 agents across 3 expiries: 3 refreshes");
}

/// A short-lived token is refreshed before it expires, while the server is in use: the
/// server never sees an expired token.
#[test]
fn a_token_is_refreshed_before_it_expires() {
    let provider = Provider::start(&["--access-ttl", "12"]);
    let s = Setup::new(&provider);
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    s.wait_state("needs_auth");
    assert_eq!(s.auth().0, 0);
    s.wait_state("ready");
    let start = Instant::now();
    // Past the first token's life (12 s): refreshed 3 s before it ends.
    while start.elapsed() < Duration::from_secs(14) {
        let (code, _, err) = s.call("whoami");
        assert_eq!(code, 0, "{err}");
        std::thread::sleep(Duration::from_millis(250));
    }
    let stats = provider.stats();
    assert!(stats["refresh_requests"].as_u64() >= Some(1), "{stats}");
    assert_eq!(
        stats["rejected_tokens"], 0,
        "an expired token was sent: {stats}"
    );
    let (_, record) = s.record();
    assert!(record["generation"].as_u64() >= Some(2), "{record}");
}

/// One agent over `corral mcp`: initialize, then `whoami` calls until `stop`; how many
/// succeeded (a failed one panics with the answer).
fn agent_calls(mut child: Child, stop: &std::sync::atomic::AtomicBool) -> usize {
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let msg =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").unwrap();
        loop {
            let line = lines.next().expect("an answer").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = ask(
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "agent", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let r = ask(
            n,
            "tools/call",
            serde_json::json!({"name": "web__whoami", "arguments": {}}),
        );
        assert!(
            r["result"]["isError"] != true && r["result"]["content"].is_array(),
            "call {n}: {r}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let _ = child.wait();
    n as usize
}

/// A grant the provider revoked: the next call learns it (a 401, one refresh refused)
/// and says which command helps; the server waits in `needs_auth` — no retry storm —
/// and `corral auth` brings it back with the client registered the first time.
#[test]
fn a_revoked_grant_moves_the_server_to_needs_auth_and_corral_auth_brings_it_back() {
    let provider = Provider::start(&[]);
    let s = Setup::new(&provider);
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    s.wait_state("needs_auth");
    assert_eq!(s.auth().0, 0);
    s.wait_state("ready");
    assert_eq!(s.call("whoami").0, 0);

    provider.control("POST", "revoke-all");
    let (code, _, err) = s.call("whoami");
    assert_ne!(code, 0);
    assert!(err.contains("corral auth web"), "{err}");
    let row = s.wait_state("needs_auth");
    assert!(
        row["last_error"]
            .as_str()
            .unwrap()
            .contains("corral auth web"),
        "{row}"
    );
    let refreshes_after_revoke = provider.stats()["refresh_requests"].clone();
    assert_eq!(refreshes_after_revoke, 1, "one refresh, refused; no storm");
    let (_, record) = s.record();
    assert!(
        record["tokens"].is_null(),
        "a dead grant is forgotten: {record}"
    );
    assert_eq!(record["client"]["source"], "dcr", "the registration stays");

    let (code, out, err) = s.auth();
    assert_eq!(code, 0, "{out}\n{err}");
    s.wait_state("ready");
    assert_eq!(s.call("whoami").0, 0);
    assert_eq!(
        provider.stats()["registrations"],
        1,
        "the client registered once is reused"
    );
}

/// Over SSH the browser cannot reach this machine's loopback: the user pastes the
/// address the browser ended on. The authorization server's metadata is found through
/// OpenID Connect discovery when RFC 8414's path is missing.
#[test]
fn the_answer_can_be_pasted_and_openid_discovery_is_the_fallback() {
    let provider = Provider::start(&["--no-rfc8414"]);
    let s = Setup::new(&provider);
    // The browser, somewhere else: signs in and ends on an address it cannot load.
    let (mut auth, out, landed) = s.auth_elsewhere();
    let mut stdin = auth.stdin.take().unwrap();
    // Something else first (a typo), then the address.
    writeln!(stdin, "not an address").unwrap();
    writeln!(stdin, "{landed}").unwrap();
    let status = auth.wait().unwrap();
    let rest: Vec<String> = out.map_while(Result::ok).collect();
    let mut err = String::new();
    auth.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{rest:?} {err}");
    assert!(
        rest.iter().any(|l| l.contains("authorized server 'web'")),
        "{rest:?}"
    );
    // No daemon ran: the next one starts with the credentials.
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    s.wait_state("ready");
    assert_eq!(s.call("whoami").0, 0);
}

/// A server that wants credentials, but not OAuth (Basic): not `needs_auth`, and
/// `corral auth` says what to do instead of starting a flow that cannot work.
#[test]
fn a_401_that_is_not_oauth_is_not_treated_as_oauth() {
    let provider = Provider::start(&["--basic"]);
    let s = Setup::new(&provider);
    let (code, out, err) = s.run(&["auth", "web"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("not with OAuth") && err.contains("Basic"),
        "{err}"
    );
    assert!(err.contains("headers"), "{err}");
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    let mut row = Value::Null;
    wait_until("web fails", || {
        row = s.row();
        row["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("401"))
    });
    assert_ne!(row["state"], "needs_auth", "{row}");
    assert_eq!(provider.stats()["registrations"], 0);
}

/// A tool that needs more than was granted (403 `insufficient_scope`): that call says
/// so and which command grants it, the server goes on serving the rest, and the next
/// `corral auth` asks for the union of the scopes.
#[test]
fn a_call_needing_more_scope_asks_for_step_up_and_the_next_auth_grants_it() {
    let provider = Provider::start(&["--insufficient-scope"]);
    let s = Setup::new(&provider);
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    s.wait_state("needs_auth");
    assert_eq!(s.auth().0, 0);
    s.wait_state("ready");
    let (code, _, err) = s.call("admin");
    assert_ne!(code, 0);
    assert!(
        err.contains("corral auth web") && err.contains("mcp:admin"),
        "{err}"
    );
    assert_eq!(s.call("whoami").0, 0, "the rest still works");
    assert_eq!(s.row()["state"], "ready");
    let (code, out, err) = s.auth();
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("mcp:admin"),
        "the union was asked and granted: {out}"
    );
    s.wait_state("ready");
    let (code, out, err) = s.call("admin");
    assert_eq!(code, 0, "{out}\n{err}");
}

fn json(status: u16, body: Value) -> Reply {
    (
        status,
        vec![("Content-Type".into(), "application/json".into())],
        body.to_string(),
    )
}

/// Metadata that lies or points where credentials must not go: `corral auth` refuses it
/// with the reason, before registering anything or opening a browser.
#[test]
fn hostile_metadata_is_refused_with_the_reason_before_anything_is_sent() {
    type Case = (
        &'static str,
        fn(&str) -> Value,
        fn(&str) -> Value,
        &'static str,
    );
    fn good_prm(base: &str) -> Value {
        serde_json::json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]})
    }
    fn good_as(base: &str) -> Value {
        serde_json::json!({"issuer": base, "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
            "code_challenge_methods_supported": ["S256"], "response_types_supported": ["code"]})
    }
    let cases: Vec<Case> = vec![
        (
            "resource metadata for another server",
            |_| serde_json::json!({"resource": "https://evil.example/mcp", "authorization_servers": ["https://evil.example"]}),
            good_as,
            "not trusted",
        ),
        (
            "metadata of another issuer",
            good_prm,
            |base| {
                let mut m = good_as(base);
                m["issuer"] = "https://evil.example".into();
                m
            },
            "not trusted",
        ),
        (
            "no PKCE",
            good_prm,
            |base| {
                let mut m = good_as(base);
                m.as_object_mut()
                    .unwrap()
                    .remove("code_challenge_methods_supported");
                m
            },
            "PKCE",
        ),
        (
            "plain PKCE only",
            good_prm,
            |base| {
                let mut m = good_as(base);
                m["code_challenge_methods_supported"] = serde_json::json!(["plain"]);
                m
            },
            "PKCE",
        ),
        (
            "a token endpoint at the cloud metadata address",
            good_prm,
            |base| {
                let mut m = good_as(base);
                m["token_endpoint"] = "https://169.254.169.254/latest/meta-data".into();
                m
            },
            "does not send credentials",
        ),
        (
            "a plain-http authorization server elsewhere",
            |base| serde_json::json!({"resource": format!("{base}/mcp"), "authorization_servers": ["http://auth.example"]}),
            good_as,
            "not an https URL",
        ),
        (
            "garbage resource metadata",
            |_| serde_json::json!(["not", "metadata"]),
            good_as,
            "not RFC 9728",
        ),
    ];
    for (what, prm, meta, says) in cases {
        let server = FakeHttp::start(move |base, r| match r.path.as_str() {
            "/mcp" => (
                401,
                vec![(
                    "WWW-Authenticate".into(),
                    format!(r#"Bearer resource_metadata="{base}/prm", scope="read""#),
                )],
                String::new(),
            ),
            "/prm" => json(200, prm(base)),
            "/.well-known/oauth-authorization-server" => json(200, meta(base)),
            _ => json(404, Value::Null),
        });
        let p = Project::new(&format!("[servers.web]\nurl = \"{}/mcp\"\n", server.base));
        let s = Setup {
            store: p.dir.join(".test-user/oauth"),
            p,
        };
        let (code, out, err) = s.run(&["auth", "web", "--no-browser", "--wait", "5"]);
        assert_eq!(code, 1, "{what}: {out}");
        assert!(err.contains(says), "{what}: {err}");
        assert!(
            !out.contains("authorize"),
            "{what}: no address offered: {out}"
        );
        let asked: Vec<String> = server.seen().into_iter().map(|r| r.path).collect();
        assert!(
            !asked.iter().any(|p| p == "/register" || p == "/token"),
            "{what}: {asked:?}"
        );
    }
}

/// An oversized metadata document is cut off, not read without end.
#[test]
fn oversized_metadata_is_refused() {
    let server = FakeHttp::start(|base, r| match r.path.as_str() {
        "/mcp" => (
            401,
            vec![(
                "WWW-Authenticate".into(),
                format!(r#"Bearer resource_metadata="{base}/prm""#),
            )],
            String::new(),
        ),
        "/prm" => (200, vec![], "x".repeat(2 * 1024 * 1024)),
        _ => json(404, Value::Null),
    });
    let p = Project::new(&format!("[servers.web]\nurl = \"{}/mcp\"\n", server.base));
    let s = Setup {
        store: p.dir.join(".test-user/oauth"),
        p,
    };
    let (code, _, err) = s.run(&["auth", "web", "--no-browser", "--wait", "5"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("length limit") || err.contains("reading the answer"),
        "{err}"
    );
}

/// An answer with another flow's state is ignored (the flow goes on waiting); one
/// naming another issuer is refused (RFC 9207: a mix-up), and nothing is stored.
#[test]
fn an_answer_of_another_flow_or_issuer_is_refused() {
    let provider = Provider::start(&[]);
    let s = Setup::new(&provider);
    let (mut auth, mut out, landed) = s.auth_elsewhere();
    let replace = |key: &str, value: &str| {
        let (base, query) = landed.split_once('?').unwrap();
        let q: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k == key => format!("{k}={value}"),
                _ => kv.to_owned(),
            })
            .collect();
        format!("{base}?{}", q.join("&"))
    };
    let mut stdin = auth.stdin.take().unwrap();
    writeln!(stdin, "{}", replace("state", "forged")).unwrap();
    let said = out
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("not this authorization's answer"));
    assert!(said.is_some(), "a forged state is ignored, the flow waits");
    writeln!(stdin, "{}", replace("iss", "https%3A%2F%2Fevil.example")).unwrap();
    let status = auth.wait().unwrap();
    let mut err = String::new();
    auth.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success());
    assert!(err.contains("mix-up"), "{err}");
    assert!(
        !s.store.exists()
            || std::fs::read_dir(&s.store).unwrap().all(|e| e
                .unwrap()
                .path()
                .extension()
                .is_none_or(|x| x != "json")),
        "nothing stored"
    );
    // The code was never redeemed.
    assert!(provider.log("token").is_empty());
}

/// A token endpoint that answers garbage is a passing failure, not a revoked grant: the
/// server is retried with backoff (not `needs_auth`), the reason is shown, and the
/// stored grant is kept.
#[test]
fn garbage_from_the_token_endpoint_is_not_taken_for_a_revoked_grant() {
    let provider = Provider::start(&[]);
    let s = Setup::new(&provider);
    assert_eq!(s.auth().0, 0);
    let garbage = FakeHttp::start(|_, _| {
        (
            200,
            vec![("Content-Type".into(), "text/html".into())],
            "<html>maintenance</html>".into(),
        )
    });
    // The stored token no longer works, and refreshing it meets the garbage.
    let (file, mut record) = s.record();
    record["tokens"]["access"] = "revoked-elsewhere".into();
    record["token_endpoint"] = format!("{}/token", garbage.base).into();
    std::fs::write(&file, record.to_string()).unwrap();
    assert_eq!(s.run(&["up", "-d"]).0, 0);
    let mut row = Value::Null;
    wait_until("the refresh failure shown", || {
        row = s.row();
        row["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not a token response"))
    });
    assert_ne!(row["state"], "needs_auth", "{row}");
    let (_, record) = s.record();
    assert!(
        record["tokens"]["refresh"].is_string(),
        "the grant is kept: {record}"
    );
}
