//! MCP clients shared by the `gateway` and `peers` benchmarks: a bare blocking client on a
//! child's stdin/stdout (the fixture itself, `corral mcp`), and Streamable HTTP sessions
//! (`corral up` and the peers) on the small client in `http.rs`.

use crate::http::Conn;
use crate::procs::Proc;
use crate::util;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Barrier, mpsc};
use std::time::{Duration, Instant};

/// The arguments of the `echo` call every latency figure is made of.
pub const ARGS: &str = r#"{"text":"hello"}"#;

/// The fixture child of a running gateway.
pub fn fixture_child(gateway: u32) -> Result<u32, String> {
    let kids: Vec<u32> = util::children_of(gateway)
        .into_iter()
        .filter(|(_, comm)| comm == "corral-fixture")
        .map(|(pid, _)| pid)
        .collect();
    match kids[..] {
        [pid] => Ok(pid),
        _ => Err(format!(
            "expected one corral-fixture child of the gateway (pid {gateway}), found {kids:?}"
        )),
    }
}

/// Writes `<dir>/corral.toml` with the fixture as `servers` (token auth, the default).
pub fn write_config(dir: &Path, fixture: &Path, servers: &[String]) -> Result<PathBuf, String> {
    let servers: Vec<(String, Vec<String>)> =
        servers.iter().map(|s| (s.clone(), Vec::new())).collect();
    write_config_args(dir, fixture, &servers)
}

/// Writes `<dir>/corral.toml` with one fixture server per `(name, args)` (token auth).
pub fn write_config_args(
    dir: &Path,
    fixture: &Path,
    servers: &[(String, Vec<String>)],
) -> Result<PathBuf, String> {
    // A JSON string is a valid TOML basic string.
    let command = serde_json::to_string(&fixture.to_string_lossy()).expect("a string");
    let mut text = String::from(
        "[gateway]\nlisten = \"127.0.0.1:0\"\nauth = \"token\"\nbuiltin_tools = true\n",
    );
    for (name, args) in servers {
        text += &format!("\n[servers.{name}]\ncommand = {command}\n");
        if !args.is_empty() {
            text += &format!("args = {}\n", serde_json::to_string(args).expect("strings"));
        }
    }
    let path = dir.join("corral.toml");
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------
// JSON-RPC messages

/// Appends a `tools/call` of `tool` with `args` (a JSON object) to `buf`.
pub fn request(buf: &mut Vec<u8>, tool: &str, args: &str, id: u64) {
    let _ = write!(
        buf,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
    );
}

/// The revision a stateless client claims in every request's `_meta`.
pub const STATELESS_VERSION: &str = "2026-07-28";

/// Appends a stateless (2026-07-28) `tools/call` of `tool` with `args` to `buf`: the same
/// call, with the `_meta` claim every such request carries instead of a session.
pub fn stateless_request(buf: &mut Vec<u8>, tool: &str, args: &str, id: u64) {
    let _ = write!(
        buf,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{STATELESS_VERSION}","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"corral-bench","version":"0"}}}}}}}}"#
    );
}

pub fn initialize(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"corral-bench","version":"0"}}}}}}"#,
        corral_supervisor::PROTOCOL_VERSION
    )
}

pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// `tools/list` with id `id`.
pub fn tools_list(id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#)
}

/// The numeric id of a response; `None` for notifications and requests from the server
/// (they carry a `method`).
pub fn response_id(msg: &str) -> Option<u64> {
    if msg.contains(r#""method":"#) {
        return None;
    }
    let start = msg.find(r#""id":"#)? + 5;
    let digits = msg[start..].trim_start();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

pub fn check_echo(msg: &str) -> Result<(), String> {
    if msg.contains(r#""result""#) && msg.contains("hello") && !msg.contains(r#""isError":true"#) {
        Ok(())
    } else {
        Err(format!(
            "unexpected answer to echo: {}",
            msg.trim_end().chars().take(300).collect::<String>()
        ))
    }
}

/// The number of tools in a `tools/list` answer (occurrences of `"inputSchema"`).
pub fn count_tools(msg: &str) -> usize {
    msg.matches(r#""inputSchema""#).count()
}

// ---------------------------------------------------------------------------------------
// Newline-delimited JSON-RPC client (the bare fixture, or `corral mcp`)

/// A blocking client on a child's stdin/stdout. Fields drop in order: stdin first (EOF
/// asks the child to exit), then the process (waited for, then signalled).
pub struct LineClient {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    tool: String,
    id: u64,
    buf: Vec<u8>,
    /// The last line read (after a call: the answer).
    pub line: String,
    proc: Proc,
}

impl LineClient {
    /// Spawns `program args` and does the MCP handshake.
    pub fn start(program: &Path, args: &[&str], tool: &str) -> Result<LineClient, String> {
        let mut c = LineClient::spawn(program, args, tool)?;
        c.handshake()?;
        Ok(c)
    }

    /// Spawns `program args` without talking to it yet.
    pub fn spawn(program: &Path, args: &[&str], tool: &str) -> Result<LineClient, String> {
        let mut proc = Proc::spawn(
            Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
            Duration::from_secs(5),
        )?;
        let stdin = proc.child.stdin.take();
        let stdout = BufReader::with_capacity(64 * 1024, proc.child.stdout.take().expect("piped"));
        Ok(LineClient {
            stdin,
            stdout,
            tool: tool.to_owned(),
            id: 1,
            buf: Vec::with_capacity(4096),
            line: String::with_capacity(256),
            proc,
        })
    }

    /// `initialize`, its answer, `notifications/initialized`.
    pub fn handshake(&mut self) -> Result<(), String> {
        self.send(initialize(1).as_bytes())?;
        self.read_response(1)?;
        if !self.line.contains(r#""result""#) {
            return Err(format!("initialize failed: {}", self.line.trim_end()));
        }
        self.send(INITIALIZED.as_bytes())
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Calls `tool` instead from now on.
    pub fn set_tool(&mut self, tool: &str) {
        self.tool = tool.to_owned();
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().expect("open until stop");
        stdin
            .write_all(msg)
            .and_then(|()| stdin.write_all(b"\n"))
            .map_err(|e| format!("writing to pid {}: {e}", self.proc.pid()))
    }

    fn read_line(&mut self) -> Result<(), String> {
        read_line(&mut self.stdout, &mut self.line, self.proc.pid())
    }

    /// Reads lines until the response with `id` (skipping notifications).
    fn read_response(&mut self, id: u64) -> Result<(), String> {
        loop {
            self.read_line()?;
            if response_id(&self.line) == Some(id) {
                return Ok(());
            }
        }
    }

    /// One `tools/call` of the current tool with `args`; its latency in ns. The answer
    /// (an echo of "hello") is in `self.line`.
    pub fn call_args(&mut self, args: &str) -> Result<u64, String> {
        let ns = self.call_raw(args)?;
        check_echo(&self.line)?;
        Ok(ns)
    }

    /// Like [`LineClient::call_args`], whatever the answer says.
    pub fn call_raw(&mut self, args: &str) -> Result<u64, String> {
        self.id += 1;
        let id = self.id;
        self.buf.clear();
        request(&mut self.buf, &self.tool, args, id);
        self.buf.push(b'\n');
        let start = Instant::now();
        let stdin = self.stdin.as_mut().expect("open until stop");
        stdin
            .write_all(&self.buf)
            .map_err(|e| format!("writing to pid {}: {e}", self.proc.pid()))?;
        self.read_response(id)?;
        Ok(start.elapsed().as_nanos() as u64)
    }

    /// `tools/list`; its latency in ns. The answer is in `self.line`.
    pub fn list_tools(&mut self) -> Result<u64, String> {
        self.id += 1;
        let id = self.id;
        let msg = tools_list(id);
        let start = Instant::now();
        self.send(msg.as_bytes())?;
        self.read_response(id)?;
        Ok(start.elapsed().as_nanos() as u64)
    }

    /// `calls` round trips, one at a time; the latency of each in ns.
    pub fn sequential(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        (0..calls).map(|_| self.call_args(ARGS)).collect()
    }

    /// Round trips one at a time until `calls` are done or `max` has passed.
    pub fn sequential_for(&mut self, calls: usize, max: Duration) -> Result<Vec<u64>, String> {
        let t0 = Instant::now();
        let mut samples = Vec::with_capacity(calls);
        while samples.len() < calls && t0.elapsed() < max {
            samples.push(self.call_args(ARGS)?);
        }
        Ok(samples)
    }

    /// Keeps `in_flight` calls outstanding for `dur`, then collects the rest. One thread:
    /// it reads every answer already buffered, then sends as many new requests in one
    /// write. (With ≤ 32 small requests outstanding neither pipe can fill, so blocking on
    /// the read side cannot deadlock.) The latency of each call in ns.
    pub fn pipelined(&mut self, in_flight: usize, dur: Duration) -> Result<Vec<u64>, String> {
        const RING: usize = 1 << 16;
        let pid = self.proc.pid();
        let t0 = Instant::now();
        let deadline = t0 + dur;
        // (id, send time in ns since t0) by id % RING.
        let mut sent_at = vec![(0u64, 0u64); RING];
        let mut samples = Vec::with_capacity(400_000);
        let LineClient {
            stdin,
            stdout,
            tool,
            id,
            buf,
            line,
            ..
        } = self;
        let stdin = stdin.as_mut().expect("open until stop");
        let mut send = |k: usize, buf: &mut Vec<u8>, id: &mut u64, sent_at: &mut [(u64, u64)]| {
            buf.clear();
            let now = t0.elapsed().as_nanos() as u64;
            for _ in 0..k {
                *id += 1;
                sent_at[*id as usize % RING] = (*id, now);
                request(buf, tool, ARGS, *id);
                buf.push(b'\n');
            }
            stdin
                .write_all(buf)
                .map_err(|e| format!("writing to pid {pid}: {e}"))
        };
        send(in_flight, buf, id, &mut sent_at)?;
        let mut outstanding = in_flight;
        let mut stopping = false;
        while outstanding > 0 {
            let mut answered = 0;
            loop {
                read_line(stdout, line, pid)?;
                if let Some(rid) = response_id(line) {
                    let now = t0.elapsed().as_nanos() as u64;
                    let (sid, at) = sent_at[rid as usize % RING];
                    if sid != rid {
                        return Err(format!("answer with an unknown id: {}", line.trim_end()));
                    }
                    check_echo(line)?;
                    samples.push(now.saturating_sub(at));
                    answered += 1;
                    outstanding -= 1;
                }
                if !stdout.buffer().contains(&b'\n') {
                    break;
                }
            }
            stopping = stopping || Instant::now() >= deadline;
            if !stopping && answered > 0 {
                send(answered, buf, id, &mut sent_at)?;
                outstanding += answered;
            }
        }
        Ok(samples)
    }

    /// Closes stdin (both the fixture and `corral mcp` exit at EOF) and waits.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        self.proc.stop();
    }
}

fn read_line(r: &mut BufReader<ChildStdout>, line: &mut String, pid: u32) -> Result<(), String> {
    line.clear();
    match r.read_line(line) {
        Ok(0) => Err(format!("pid {pid} closed its stdout")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("reading the stdout of pid {pid}: {e}")),
    }
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP

/// An MCP endpoint over Streamable HTTP.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// `/mcp`, `/servers/NAME/mcp`, …
    pub path: String,
    /// Sent as `Authorization: Bearer …`.
    pub token: Option<String>,
}

impl Endpoint {
    /// A new MCP session on its own keep-alive connection: `initialize`, then
    /// `notifications/initialized` with the `Mcp-Session-Id` the server gave, if any
    /// (a stateless server gives none). `tool` is what [`Session::call`] calls.
    pub fn session(&self, tool: &str) -> Result<Session, String> {
        let mut conn = Conn::new(self.addr, &self.path, self.token.clone());
        let r = conn.post_for(initialize(1).as_bytes(), Some(1))?;
        let msg = r.messages().into_iter().find(|m| response_id(m) == Some(1));
        let (200, Some(msg)) = (r.status, msg) else {
            return Err(format!(
                "initialize on {}{}: status {}, {}",
                self.addr,
                self.path,
                r.status,
                String::from_utf8_lossy(&r.body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        };
        let v: serde_json::Value =
            serde_json::from_str(&msg).map_err(|e| format!("initialize result: {e}"))?;
        conn.session = r.session_id;
        conn.protocol = v["result"]["protocolVersion"].as_str().map(str::to_owned);
        let r = conn.post(INITIALIZED.as_bytes())?;
        if !(200..300).contains(&r.status) {
            return Err(format!(
                "notifications/initialized on {}{}: status {}",
                self.addr, self.path, r.status
            ));
        }
        Ok(Session {
            conn,
            tool: tool.to_owned(),
            stateless: false,
            id: 1,
            body: Vec::with_capacity(256),
            last: String::new(),
        })
    }

    /// A stateless (2026-07-28) client on its own keep-alive connection: no
    /// `initialize`, no session id; every call carries the `_meta` claim and the
    /// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
    pub fn stateless(&self, tool: &str) -> Session {
        let mut conn = Conn::new(self.addr, &self.path, self.token.clone());
        conn.protocol = Some(STATELESS_VERSION.to_owned());
        let mut s = Session {
            conn,
            tool: String::new(),
            stateless: true,
            id: 1,
            body: Vec::with_capacity(512),
            last: String::new(),
        };
        s.set_tool(tool);
        s
    }
}

/// A running `corral up`.
pub struct HttpGateway {
    pub endpoint: Endpoint,
    proc: Proc,
}

impl HttpGateway {
    pub fn start(corral: &Path, config: &Path) -> Result<HttpGateway, String> {
        let mut proc = Proc::spawn(
            Command::new(corral)
                .arg("-c")
                .arg(config)
                .arg("up")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
            Duration::ZERO,
        )?;
        // A thread reads the two announcement lines, then drains stdout to EOF.
        let stdout = proc.child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let _ = tx.send(line);
            }
        });
        let next = || {
            rx.recv_timeout(Duration::from_secs(30))
                .map_err(|_| "`corral up` printed no endpoint within 30 s (or exited)".to_owned())
        };
        let endpoint = next()?;
        let addr = endpoint
            .strip_prefix("corral: MCP endpoint http://")
            .and_then(|r| r.strip_suffix("/mcp"))
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .ok_or_else(|| format!("unexpected first line from `corral up`: {endpoint:?}"))?;
        let token_line = next()?;
        let token = match token_line.strip_prefix("corral: bearer token ") {
            Some(rest) => Some(rest.split_whitespace().next().unwrap_or("").to_owned()),
            None if token_line.contains("no token") => None,
            None => {
                return Err(format!(
                    "unexpected second line from `corral up`: {token_line:?}"
                ));
            }
        };
        Ok(HttpGateway {
            endpoint: Endpoint {
                addr,
                path: "/mcp".to_owned(),
                token,
            },
            proc,
        })
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// A new MCP session on its own keep-alive connection.
    pub fn session(&self, tool: &str) -> Result<Session, String> {
        self.endpoint.session(tool)
    }

    /// A stateless (2026-07-28) client on its own keep-alive connection.
    pub fn stateless(&self, tool: &str) -> Session {
        self.endpoint.stateless(tool)
    }

    pub fn stop(mut self) {
        self.proc.stop();
    }
}

/// One MCP session over HTTP.
pub struct Session {
    pub conn: Conn,
    tool: String,
    /// A 2026-07-28 client: each call carries its own `_meta` claim and headers.
    stateless: bool,
    id: u64,
    body: Vec<u8>,
    /// The answer to the last call (its JSON-RPC message).
    pub last: String,
}

impl Session {
    /// Calls `tool` instead from now on.
    pub fn set_tool(&mut self, tool: &str) {
        self.tool = tool.to_owned();
        if self.stateless {
            self.conn.headers = format!("Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\n");
        }
    }

    /// One `tools/call` round trip, in ns: until the answer with the call's id has
    /// arrived (for an SSE response, the event that carries it).
    pub fn call(&mut self) -> Result<u64, String> {
        self.call_args(ARGS)
    }

    /// One `tools/call` of the session's tool with `args`; the answer (an echo of
    /// "hello") is in `self.last`.
    pub fn call_args(&mut self, args: &str) -> Result<u64, String> {
        let ns = self.call_raw(args)?;
        check_echo(&self.last)?;
        Ok(ns)
    }

    /// Like [`Session::call_args`], whatever the answer says.
    pub fn call_raw(&mut self, args: &str) -> Result<u64, String> {
        self.id += 1;
        let id = self.id;
        self.body.clear();
        if self.stateless {
            stateless_request(&mut self.body, &self.tool, args, id);
        } else {
            request(&mut self.body, &self.tool, args, id);
        }
        let start = Instant::now();
        let r = self.conn.post_for(&self.body, Some(id))?;
        let ns = (r.answered.unwrap_or_else(Instant::now) - start).as_nanos() as u64;
        if r.status != 200 {
            return Err(format!(
                "tools/call over HTTP: status {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        }
        let msgs = r.messages();
        let msg = msgs
            .into_iter()
            .find(|m| response_id(m) == Some(id))
            .ok_or_else(|| {
                format!(
                    "no response with id {id} in {}",
                    String::from_utf8_lossy(&r.body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                )
            })?;
        self.last = msg;
        Ok(ns)
    }

    pub fn sequential(&mut self, calls: usize) -> Result<Vec<u64>, String> {
        (0..calls).map(|_| self.call()).collect()
    }

    /// Round trips one at a time until `calls` are done or `max` has passed.
    pub fn sequential_for(&mut self, calls: usize, max: Duration) -> Result<Vec<u64>, String> {
        let t0 = Instant::now();
        let mut samples = Vec::with_capacity(calls);
        while samples.len() < calls && t0.elapsed() < max {
            samples.push(self.call()?);
        }
        Ok(samples)
    }

    /// `POST tools/list`; the body of the answer.
    pub fn tools_list(&mut self) -> Result<String, String> {
        self.list_tools().map(|(_, msg)| msg)
    }

    /// `POST tools/list`; its latency in ns and the answer (its JSON-RPC message).
    pub fn list_tools(&mut self) -> Result<(u64, String), String> {
        self.id += 1;
        let id = self.id;
        let body = tools_list(id);
        let start = Instant::now();
        let r = self.conn.post_for(body.as_bytes(), Some(id))?;
        let ns = (r.answered.unwrap_or_else(Instant::now) - start).as_nanos() as u64;
        let msg = r
            .messages()
            .into_iter()
            .find(|m| response_id(m) == Some(id))
            .ok_or_else(|| {
                format!(
                    "tools/list: status {}, no response with id {id}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                        .chars()
                        .take(300)
                        .collect::<String>()
                )
            })?;
        Ok((ns, msg))
    }
}

/// Each session makes sequential calls on its own thread for `dur`; the latency of every
/// call in ns.
pub fn concurrent_sessions(sessions: &mut [Session], dur: Duration) -> Result<Vec<u64>, String> {
    let start = Barrier::new(sessions.len());
    let per_session: Vec<Result<Vec<u64>, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = sessions
            .iter_mut()
            .map(|session| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let deadline = Instant::now() + dur;
                    let mut samples = Vec::with_capacity(100_000);
                    while Instant::now() < deadline {
                        samples.push(session.call()?);
                    }
                    Ok(samples)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("session thread"))
            .collect()
    });
    let mut all = Vec::new();
    for r in per_session {
        all.extend(r?);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::TempDir;

    #[test]
    fn response_ids_skip_notifications_and_server_requests() {
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":42,"result":{}}"#),
            Some(42)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","result":{},"id": 7}"#),
            Some(7)
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            None
        );
        assert_eq!(
            response_id(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#),
            None
        );
    }

    #[test]
    fn echo_check_rejects_tool_errors() {
        assert!(check_echo(r#"{"id":2,"result":{"content":[{"text":"hello"}]}}"#).is_ok());
        assert!(
            check_echo(r#"{"id":2,"result":{"content":[{"text":"hello down"}],"isError":true}}"#)
                .is_err()
        );
        assert!(check_echo(r#"{"id":2,"error":{"message":"hello"}}"#).is_err());
    }

    #[test]
    fn config_quotes_the_command_and_the_args() {
        let dir = TempDir::new("gateway-config");
        let p = write_config_args(
            dir.path(),
            Path::new("/a b/\"q\"/corral-fixture"),
            &[
                ("fx0".into(), Vec::new()),
                ("fx1".into(), vec!["--tools".into(), "50".into()]),
            ],
        )
        .unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        assert!(text.contains("[servers.fx0]\ncommand = \"/a b/\\\"q\\\"/corral-fixture\"\n\n"));
        assert!(text.contains(
            "[servers.fx1]\ncommand = \"/a b/\\\"q\\\"/corral-fixture\"\nargs = [\"--tools\",\"50\"]\n"
        ));
    }

    #[test]
    fn tools_are_counted_by_their_schemas() {
        let msg =
            r#"{"result":{"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":{}}]}}"#;
        assert_eq!(count_tools(msg), 2);
    }
}
