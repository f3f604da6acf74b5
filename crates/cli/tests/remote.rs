//! Remote (url) MCP servers through Corral: real servers built with the TypeScript SDK 2.x
//! over Streamable HTTP (`tests/peers/ts_http_server.mjs`: MCP 2026-07-28 only, stateless
//! with a 2025 fallback, and 2025 sessions), on loopback ports the OS picks. A remote
//! server is carried by `corral __remote` and supervised like a stdio one: the same
//! handshake and probe, calls, deadlines, restarts with backoff and failures in words.

mod common;
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

/// A TypeScript SDK server over HTTP, killed when dropped.
struct Remote {
    child: Child,
    url: String,
}

impl Remote {
    fn start(mode: &str) -> Remote {
        Self::start_on(mode, 0)
    }

    /// On `port` (0: any free one).
    fn start_on(mode: &str, port: u16) -> Remote {
        let ts = peers().join("ts-server");
        assert!(
            ts.join("node_modules/@modelcontextprotocol/server")
                .exists(),
            "the TypeScript server SDK is not installed: run ./scripts/install-peers.sh"
        );
        let mut cmd = Command::new("node");
        cmd.arg(repo().join("crates/cli/tests/peers/ts_http_server.mjs"))
            .arg(&ts)
            .arg(mode)
            .args(["--port", &port.to_string()]);
        Self::spawn(cmd)
    }

    /// Over HTTPS with `cert` and `key`.
    fn tls(mode: &str, cert: &std::path::Path, key: &std::path::Path) -> Remote {
        let mut cmd = Command::new("node");
        cmd.arg(repo().join("crates/cli/tests/peers/ts_http_server.mjs"))
            .arg(peers().join("ts-server"))
            .arg(mode)
            .arg("--tls")
            .args([cert, key]);
        Self::spawn(cmd)
    }

    /// A Python SDK server (`tests/peers/py_http_server.py`): `sse`, `streamable` or
    /// `stateless`.
    fn python(mode: &str) -> Remote {
        let python = peers().join("venv/bin/python");
        assert!(
            python.exists(),
            "the Python SDK is not installed: run ./scripts/install-peers.sh"
        );
        let mut cmd = Command::new(python);
        cmd.arg(repo().join("tests/peers/py_http_server.py"))
            .arg(mode);
        Self::spawn(cmd)
    }

    /// Runs `cmd`, which prints `{"url": …}` first.
    fn spawn(mut cmd: Command) -> Remote {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the peer server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{cmd:?}: {e}: {line:?}"));
        Remote {
            child,
            url: v["url"].as_str().unwrap().to_owned(),
        }
    }

    fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.split('/').next())
            .and_then(|p| p.parse().ok())
            .unwrap()
    }

    /// A plain HTTP POST to `path` on the server (its control endpoints).
    fn post(&self, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(p: &Project, server: &str, tool: &str, args: &str) -> Run {
    p.run(&["call", server, tool, args])
}

#[test]
fn remote_servers_of_each_kind_serve_agents_through_corral() {
    let (modern, stateless, session) = (
        Remote::start("modern"),
        Remote::start("stateless"),
        Remote::start("session"),
    );
    let p = Project::new(&format!(
        "[servers.modern]\nurl = \"{}\"\n[servers.stateless]\nurl = \"{}\"\n[servers.session]\nurl = \"{}\"\n",
        modern.url, stateless.url, session.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    for server in ["modern", "stateless", "session"] {
        let r = call(&p, server, "shout", r#"{"text": "hi"}"#);
        assert_eq!(r.code(), 0, "{server}: {r:?}");
        assert_eq!(r.stdout().trim(), "HI", "{server}");
    }
    // Probed and spoken to in the revision each offers.
    for (server, version, era) in [
        ("modern", "2026-07-28", "modern"),
        ("stateless", "2026-07-28", "modern"),
        ("session", "2025-11-25", "legacy"),
    ] {
        let row = ps_row(&p, server);
        assert_eq!(row["state"], "ready", "{row}");
        assert_eq!(row["protocol_version"], version, "{row}");
        assert_eq!(row["era"], era, "{row}");
    }

    // An agent sees their tools side by side, namespaced, and calls them; a progress
    // token comes back as the agent's own.
    let mut agent = mcp::McpClient::bridge(&p);
    let names = agent.tool_names();
    for n in ["modern__shout", "stateless__count", "session__slow"] {
        assert!(names.iter().any(|t| t == n), "{n} in {names:?}");
    }
    let result = agent.call("session__shout", json!({"text": "abc"}));
    assert_eq!(mcp::text(&result), "ABC", "{result}");
    let id = agent.send_request(
        "tools/call",
        json!({"name": "session__slow", "arguments": {"ms": 50}, "_meta": {"progressToken": "p1"}}),
    );
    let r = agent.response(id);
    assert_eq!(mcp::text(&r["result"]), "slept 50", "{r}");
    assert!(
        agent.other.iter().any(
            |m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p1"
        ),
        "{:?}",
        agent.other
    );
    agent.close();
}

#[test]
fn an_expired_session_is_begun_again_and_the_call_goes_through() {
    let session = Remote::start("session");
    let p = Project::new(&format!("[servers.s]\nurl = \"{}\"\n", session.url));
    let _down = Down(&p);
    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(
        call(&p, "s", "shout", r#"{"text": "a"}"#).stdout().trim(),
        "A"
    );
    assert!(session.post("/expire").contains("expired"));
    // The next call meets a 404 on its session id: a new session begins and the call is
    // sent again, unseen by the agent; the server was not restarted.
    let r = call(&p, "s", "shout", r#"{"text": "b"}"#);
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout().trim(), "B");
    let row = ps_row(&p, "s");
    assert_eq!(row["restarts"], 0, "{row}");
    let log = std::fs::read_to_string(p.dir.join(".corral/logs/s.log")).unwrap();
    assert!(
        log.contains("the session expired; a new one began"),
        "{log}"
    );
}

#[test]
fn a_remote_server_that_goes_away_and_comes_back_serves_the_next_call() {
    let first = Remote::start("session");
    let port = first.port();
    let p = Project::new(&format!(
        "[defaults]\nrestart = \"always\"\n[servers.s]\nurl = \"{}\"\n",
        first.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    assert_eq!(
        call(&p, "s", "shout", r#"{"text": "a"}"#).stdout().trim(),
        "A"
    );
    drop(first);
    // Gone: a call fails saying why (not a hang), and Corral reconnects with backoff.
    let r = call(&p, "s", "shout", r#"{"text": "b"}"#);
    assert_ne!(r.code(), 0, "{r:?}");
    let said = format!("{}{}", r.stdout(), r.stderr());
    assert!(
        said.contains("connection refused")
            || said.contains("not ready")
            || said.contains("exited"),
        "{said}"
    );
    let _again = Remote::start_on("session", port);
    wait_until("the remote server to be ready again", || {
        call(&p, "s", "shout", r#"{"text": "c"}"#).stdout().trim() == "C"
    });
}

#[test]
fn unreachable_and_non_mcp_urls_fail_with_the_cause() {
    let session = Remote::start("session");
    let at = |path: &str| session.url.replace("/mcp", path);
    let p = Project::new(&format!(
        "[servers.gone]\nurl = \"http://{}/mcp\"\n[servers.html]\nurl = \"{}\"\n\
         [servers.page]\nurl = \"{}\"\n[servers.loop]\nurl = \"{}\"\n[servers.ok]\nurl = \"{}\"\n",
        closed_addr(),
        at("/other"),
        at("/page"),
        at("/loop"),
        session.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("both failures to be recorded", || {
        let gone = ps_row(&p, "gone");
        let html = ps_row(&p, "html");
        gone["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("connection refused") && e.contains("cannot reach"))
            && html["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("404 Not Found") && e.contains("/other"))
    });
    // A web page is not MCP, and a redirect is not followed (a loop cannot trap it).
    wait_until("the page and the redirect to be refused in words", || {
        let page = ps_row(&p, "page")["last_error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let looped = ps_row(&p, "loop")["last_error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        page.contains("not JSON") && page.contains("A web page") && looped.contains("HTTP 302")
    });
    // The good one is untouched by its neighbours.
    assert_eq!(
        call(&p, "ok", "shout", r#"{"text": "x"}"#).stdout().trim(),
        "X"
    );
    // An agent's call to a server that is down is told why at once.
    let r = call(&p, "gone", "shout", r#"{"text": "x"}"#);
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("connection refused"), "{r:?}");
}

#[test]
fn a_remote_call_that_hangs_times_out_and_the_server_goes_on() {
    let session = Remote::start("session");
    let p = Project::new(&format!(
        "[servers.s]\nurl = \"{}\"\ncall_timeout = \"1s\"\n",
        session.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let r = call(&p, "s", "slow", r#"{"ms": 20000}"#);
    assert_ne!(r.code(), 0, "{r:?}");
    assert!(
        r.stderr().contains("1s") || r.stderr().contains("timed out"),
        "{r:?}"
    );
    assert_eq!(
        call(&p, "s", "shout", r#"{"text": "y"}"#).stdout().trim(),
        "Y"
    );
}

#[test]
fn python_sdk_servers_over_sse_and_streamable_http_serve_through_corral() {
    let (sse, streamable, stateless) = (
        Remote::python("sse"),
        Remote::python("streamable"),
        Remote::python("stateless"),
    );
    let p = Project::new(&format!(
        "[servers.sse]\nurl = \"{}\"\n[servers.forced]\nurl = \"{}\"\ntransport = \"sse\"\n\
         [servers.http_only]\nurl = \"{}\"\ntransport = \"http\"\n\
         [servers.streamable]\nurl = \"{}\"\n[servers.stateless]\nurl = \"{}\"\n",
        sse.url, sse.url, sse.url, streamable.url, stateless.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    // The SSE server is found by the specification's fallback (its POST gets 405, a GET
    // opens the stream with the endpoint), or named outright.
    for server in ["sse", "forced", "streamable", "stateless"] {
        let r = call(&p, server, "greet", r#"{"name": "ada"}"#);
        assert_eq!(r.code(), 0, "{server}: {r:?}");
        assert_eq!(r.stdout().trim(), "Hello, ada!", "{server}");
    }
    let r = call(&p, "sse", "multiply", r#"{"a": 6, "b": 7}"#);
    assert_eq!(r.stdout().trim(), "42", "{r:?}");
    // Streamable HTTP only: no fallback, and the refusal says what answered.
    wait_until("http_only to fail naming the 405", || {
        ps_row(&p, "http_only")["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("405"))
    });
}

/// A test CA and two server certificates it signed, made with `openssl`: one for
/// 127.0.0.1, one for another name. Returns (ca, [(cert, key)] for each).
fn test_pki(
    dir: &std::path::Path,
) -> (
    std::path::PathBuf,
    [(std::path::PathBuf, std::path::PathBuf); 2],
) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=Corral Test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat(),
    );
    let mut leaves = Vec::new();
    for (name, san) in [("ip", "IP:127.0.0.1"), ("other", "DNS:other.example")] {
        let (key, csr, pem, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(
            dir.join(&ext),
            format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            ),
        )
        .unwrap();
        openssl(
            &[
                &["req"][..],
                &ec,
                &[
                    "-keyout",
                    &key,
                    "-out",
                    &csr,
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
        leaves.push((dir.join(pem), dir.join(key)));
    }
    let [a, b]: [_; 2] = leaves.try_into().unwrap();
    (dir.join("ca.pem"), [a, b])
}

#[test]
fn tls_problems_are_named_and_a_private_ca_is_trusted_through_ssl_cert_file() {
    // (A project's directory as a scratch directory for the certificates.)
    let pki = Project::new("");
    let (ca, [(ip_cert, ip_key), (other_cert, other_key)]) = test_pki(&pki.dir);
    let good = Remote::tls("session", &ip_cert, &ip_key);
    let misnamed = Remote::tls("session", &other_cert, &other_key);
    let config = format!(
        "[servers.good]\nurl = \"{}\"\n[servers.misnamed]\nurl = \"{}\"\n[servers.plain]\nurl = \"{}\"\n",
        good.url,
        misnamed.url,
        good.url.replace("https://", "http://")
    );

    // Without the CA: not trusted, said so.
    let p = Project::new(&config);
    let _down = Down(&p);
    let r = p
        .cmd(&["up", "-d"])
        .env_remove("SSL_CERT_FILE")
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    wait_until("the untrusted certificate to be named", || {
        ps_row(&p, "good")["last_error"].as_str().is_some_and(|e| {
            e.contains("TLS") && e.contains("not trusted") && e.contains("SSL_CERT_FILE")
        })
    });
    // Plain HTTP to a TLS port: the server hangs up or answers garbage; either way, words.
    wait_until("plain HTTP to the TLS port to fail", || {
        ps_row(&p, "plain")["last_error"]
            .as_str()
            .is_some_and(|e| !e.is_empty())
    });

    // With the CA in SSL_CERT_FILE: trusted; a certificate for another name is not.
    let q = Project::new(&config);
    let _down_q = Down(&q);
    let r = q
        .cmd(&["up", "-d"])
        .env("SSL_CERT_FILE", &ca)
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    let r = call(&q, "good", "shout", r#"{"text": "tls"}"#);
    assert_eq!(r.stdout().trim(), "TLS", "{r:?}");
    wait_until("the misnamed certificate to be named", || {
        ps_row(&q, "misnamed")["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("another host name"))
    });
}

/// A CONNECT proxy on a loopback port: it records each CONNECT's target and
/// `Proxy-Authorization`, and tunnels `*.test` hosts to 127.0.0.1 (they resolve nowhere
/// else, so a connection that bypassed the proxy fails).
struct Proxy {
    addr: String,
    seen: Seen,
}

/// Each CONNECT's target and `Proxy-Authorization`.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

impl Proxy {
    fn start() -> Proxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Seen::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut client) = conn else { return };
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(client.try_clone().unwrap());
                    let mut first = String::new();
                    reader.read_line(&mut first).unwrap();
                    let mut auth = None;
                    loop {
                        let mut h = String::new();
                        reader.read_line(&mut h).unwrap();
                        if h.trim().is_empty() {
                            break;
                        }
                        if let Some(v) = h
                            .strip_prefix("Proxy-Authorization: ")
                            .or_else(|| h.strip_prefix("proxy-authorization: "))
                        {
                            auth = Some(v.trim().to_owned());
                        }
                    }
                    let target = first.split_whitespace().nth(1).unwrap_or("").to_owned();
                    log.lock().unwrap().push((target.clone(), auth));
                    let port = target.rsplit(':').next().unwrap_or("0");
                    let Ok(upstream) =
                        std::net::TcpStream::connect(("127.0.0.1", port.parse().unwrap_or(0)))
                    else {
                        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                        return;
                    };
                    client
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .unwrap();
                    let (mut a, mut b) =
                        (upstream.try_clone().unwrap(), client.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut reader, &mut a);
                    });
                    let mut up = upstream;
                    let _ = std::io::copy(&mut up, &mut b);
                });
            }
        });
        Proxy { addr, seen }
    }
}

#[test]
fn a_proxy_from_the_environment_carries_remote_traffic_and_no_proxy_and_loopback_bypass_it() {
    let session = Remote::start("session");
    let proxy = Proxy::start();
    let port = session.port();
    let config = format!(
        "[servers.far]\nurl = \"http://remote.test:{port}/mcp\"\n[servers.near]\nurl = \"{}\"\n",
        session.url
    );
    let p = Project::new(&config);
    let _down = Down(&p);
    let r = p
        .cmd(&["up", "-d"])
        .env("HTTP_PROXY", format!("http://ada:secret@{}", proxy.addr))
        .env("HTTPS_PROXY", format!("http://ada:secret@{}", proxy.addr))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    for server in ["far", "near"] {
        let r = call(&p, server, "shout", r#"{"text": "via"}"#);
        assert_eq!(r.stdout().trim(), "VIA", "{server}: {r:?}");
    }
    // Only the far one went through the proxy, with the credentials of the proxy URL.
    let seen = proxy.seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    for (target, auth) in &seen {
        assert_eq!(target, &format!("remote.test:{port}"), "{seen:?}");
        assert_eq!(auth.as_deref(), Some("Basic YWRhOnNlY3JldA=="), "{seen:?}");
    }

    // NO_PROXY exempts the host: the connection is direct, and the name resolves nowhere.
    let q = Project::new(&config);
    let _down_q = Down(&q);
    let r = q
        .cmd(&["up", "-d"])
        .env("HTTP_PROXY", format!("http://{}", proxy.addr))
        .env("NO_PROXY", "remote.test")
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    wait_until("the direct connection's DNS failure to be named", || {
        ps_row(&q, "far")["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("DNS lookup failed") && e.contains("remote.test"))
    });
}

/// Resources, prompts and cancellation, as for a stdio server: through a 2025 session
/// (the cancellation posted as a notification) and a 2026-07-28 server (the cancellation
/// is the end of the request's exchange).
#[test]
fn resources_prompts_and_cancellation_reach_remote_servers() {
    let (session, modern) = (Remote::start("session"), Remote::start("modern"));
    let p = Project::new(&format!(
        "[servers.s]\nurl = \"{}\"\n[servers.m]\nurl = \"{}\"\n",
        session.url, modern.url
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    let mut agent = mcp::McpClient::bridge(&p);
    assert!(!agent.tool_names().is_empty());

    let prompts = agent.request("prompts/list", json!({}));
    let names: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        names.contains(&"s__welcome") && names.contains(&"m__welcome"),
        "{names:?}"
    );
    for server in ["s", "m"] {
        let got = agent.request(
            "prompts/get",
            json!({"name": format!("{server}__welcome"), "arguments": {"name": "ada"}}),
        );
        assert_eq!(
            got["result"]["messages"][0]["content"]["text"], "Welcome, ada!",
            "{got}"
        );
    }
    let resources = agent.request("resources/list", json!({}));
    assert!(
        resources.to_string().contains("peer://greeting"),
        "{resources}"
    );
    let read = agent.request("resources/read", json!({"uri": "peer://greeting"}));
    assert_eq!(
        read["result"]["contents"][0]["text"], "hello from the peer",
        "{read}"
    );

    for server in ["s", "m"] {
        let id = agent.send_request(
            "tools/call",
            json!({"name": format!("{server}__slow"), "arguments": {"ms": 60000}}),
        );
        wait_until("the slow call to be in flight", || {
            let s = agent.call("corral__servers", json!({}));
            s["structuredContent"]["servers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|row| row["name"] == server && row["in_flight"] == 1)
        });
        agent.notify(
            "notifications/cancelled",
            Some(json!({"requestId": id, "reason": "user"})),
        );
        wait_until("the server to see the cancellation", || {
            mcp::text(&agent.call(&format!("{server}__cancelled"), json!({}))) == "1"
        });
        assert!(agent.other.iter().all(|m| m["id"] != id));
    }
    agent.close();
}

/// A 2025 session's server that numbers its events: an answer stream that ends before
/// the answer is resumed with `Last-Event-ID` (a GET), and the session's GET stream,
/// which carries a list change and ends, is reopened after the server's `retry` with
/// the last event's id — the list change reaching Corral's catalog.
#[test]
fn a_broken_answer_stream_is_resumed_and_the_get_stream_reopened() {
    use std::sync::{Arc, Mutex};
    let call_id = Arc::new(Mutex::new(String::from("null")));
    let listed_change = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (id_slot, changed) = (call_id.clone(), listed_change.clone());
    let server = FakeHttp::start(move |_, r| {
        let sse = |body: String| {
            (
                200,
                vec![("Content-Type".to_owned(), "text/event-stream".to_owned())],
                body,
            )
        };
        let json = |v: Value| {
            (
                200,
                vec![
                    ("Content-Type".to_owned(), "application/json".to_owned()),
                    ("Mcp-Session-Id".to_owned(), "s1".to_owned()),
                ],
                v.to_string(),
            )
        };
        if r.method == "GET" {
            return match r.header("last-event-id") {
                // The resumed answer stream.
                Some("e1") => sse(format!(
                    "id: e2\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"resumed\"}}]}}}}\n\n",
                    id_slot.lock().unwrap()
                )),
                // The reopened session stream: nothing more to say.
                Some(_) => (405, vec![], String::new()),
                None => {
                    changed.store(true, std::sync::atomic::Ordering::SeqCst);
                    sse("retry: 100\nid: g1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n".to_owned())
                }
            };
        }
        let msg: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        let id = msg["id"].clone();
        match msg["method"].as_str() {
            None => (202, vec![], String::new()),
            Some(m) if m.starts_with("notifications/") => (202, vec![], String::new()),
            Some("initialize") => json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "numbered", "version": "1"}}})),
            Some("tools/list") => {
                let mut tools = vec![json!({"name": "flaky", "inputSchema": {"type": "object"}})];
                if changed.load(std::sync::atomic::Ordering::SeqCst) {
                    tools.push(json!({"name": "second", "inputSchema": {"type": "object"}}));
                }
                json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}))
            }
            Some("tools/call") => {
                *id_slot.lock().unwrap() = id.to_string();
                // A progress event, then the stream ends before the answer.
                sse("id: e1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"working\"}}\n\n".to_owned())
            }
            Some(_) => json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}})),
        }
    });
    let p = Project::new(&format!(
        "[servers.num]\nurl = \"{}/mcp\"\ntransport = \"http\"\n",
        server.base
    ));
    let _down = Down(&p);
    assert_eq!(p.run(&["up", "-d"]).code(), 0);
    wait_until("the list change reached the catalog", || {
        p.run(&["tools"]).stdout().contains("num__second")
    });
    let r = call(&p, "num", "flaky", "{}");
    assert_eq!(r.code(), 0, "{r:?}");
    assert_eq!(r.stdout().trim(), "resumed");
    let gets = || -> Vec<Option<String>> {
        server
            .seen()
            .into_iter()
            .filter(|r| r.method == "GET")
            .map(|r| r.header("last-event-id").map(str::to_owned))
            .collect()
    };
    assert!(
        gets().contains(&Some("e1".into())),
        "resumed after e1: {:?}",
        gets()
    );
    wait_until("the session stream reopened after g1", || {
        gets().contains(&Some("g1".into()))
    });
    assert!(
        server
            .seen()
            .iter()
            .filter(|r| r.method == "GET")
            .all(|r| r.header("mcp-session-id") == Some("s1")),
        "every GET in the session"
    );
}
