//! A minimal MCP client over a child's stdio, for driving `corral mcp` in tests.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

pub struct McpClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<(Instant, Value)>,
    /// Messages received that were not the awaited response (notifications, requests).
    pub other: Vec<Value>,
    /// When each notification was read off corral's stdout, in order: `(when, method)`.
    pub notified_at: Vec<(Instant, Value)>,
    /// The `initialize` result.
    pub init: Value,
    next_id: u64,
}

impl McpClient {
    /// Starts `corral mcp` in `p` and performs the handshake.
    pub fn start(p: &super::Project) -> McpClient {
        Self::start_with(p, json!({}))
    }

    pub fn start_with(p: &super::Project, capabilities: Value) -> McpClient {
        Self::spawn(p, &["mcp", "--standalone"], capabilities)
    }

    /// Starts `corral mcp` as a bridge to the project's daemon (started if none runs)
    /// and performs the handshake.
    pub fn bridge(p: &super::Project) -> McpClient {
        Self::spawn(p, &["mcp"], json!({}))
    }

    /// `corral ARGS` (an `mcp` command line) with the handshake done.
    pub fn spawn_args(p: &super::Project, args: &[&str]) -> McpClient {
        Self::spawn(p, args, json!({}))
    }

    fn spawn(p: &super::Project, args: &[&str], capabilities: Value) -> McpClient {
        let mut child = p
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("corral wrote a non-JSON line {line:?}: {e}"));
                if tx.send((Instant::now(), v)).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut c = McpClient {
            child,
            stdin,
            lines: rx,
            other: Vec::new(),
            notified_at: Vec::new(),
            init: Value::Null,
            next_id: 1,
        };
        let init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "corral-test", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "corral", "{init}");
        c.init = init["result"].clone();
        c.notify("notifications/initialized", None);
        c
    }

    pub fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes raw bytes to corral's stdin (a message too large or too broken for JSON).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut m = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            m["params"] = p;
        }
        self.send(&m);
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its response (whole message).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    /// Waits for the response with `id`, keeping everything else in `other`.
    pub fn response(&mut self, id: u64) -> Value {
        self.wait_for(&format!("response {id}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
    }

    /// Waits for a message matching `pred` (checking already-received ones first).
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.other.iter().position(&pred) {
            return self.other.remove(i);
        }
        let deadline = Instant::now() + super::DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left)
                .map(|(at, m)| self.note(at, m))
            {
                Ok(m) if pred(&m) => return m,
                Ok(m) => self.other.push(m),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("timed out waiting for {what}; got {:#?}", self.other)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("corral closed stdout waiting for {what}")
                }
            }
        }
    }

    /// Calls a tool; returns the `result` (panics on a JSON-RPC error).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r.get("error").is_none(), "tools/call {tool}: {r}");
        r["result"].clone()
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let r = self.request("tools/list", json!({}));
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Records when a notification came (see `notified_at`).
    fn note(&mut self, at: Instant, m: Value) -> Value {
        if m.get("id").is_none() && m.get("method").is_some() {
            self.notified_at.push((at, m.clone()));
        }
        m
    }

    /// Waits until nobody holds the write end of corral's stdout any more (EOF); what
    /// was sent before (a `list_changed`, say) is kept in `other`.
    pub fn wait_stdout_closed(&mut self) {
        let deadline = Instant::now() + super::DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left)
                .map(|(at, m)| self.note(at, m))
            {
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => panic!("corral's stdout is still open"),
                Ok(m) => self.other.push(m),
            }
        }
    }

    /// Whether a write to corral's stdin fails because nobody reads it any more.
    pub fn stdin_closed(&mut self) -> bool {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let ping = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/ping\"}\n";
        stdin.write_all(ping).and_then(|()| stdin.flush()).is_err()
    }

    /// Closes stdin, then waits for the response to `id` (sent before).
    pub fn close_input_and_read(&mut self, id: u64) -> Value {
        drop(self.stdin.take());
        self.response(id)
    }

    /// Closes stdin and waits for corral to exit.
    pub fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + super::DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "corral mcp did not exit after stdin closed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Text of the first content block.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}
