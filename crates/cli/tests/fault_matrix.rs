//! The fault matrix: every fault mode of the fixture server, on each of the three paths
//! an agent reaches Corral by — the stdio gateway (`corral mcp --standalone`), the HTTP
//! gateway (`corral up`, foreground) and the bridge to the daemon (`corral up -d` +
//! `corral mcp`).
//!
//! Each cell runs a bad server `bad` (the fault) beside a healthy fixture `ok`, and checks
//! what the agent sees (the error's wording, `corral__servers`), the events (daemon paths:
//! `.corral/events.jsonl`), that `ok__echo` still answers, that the corral process serving
//! the path stayed under [`HWM_BOUND`], and that after teardown no process a fixture wrote
//! to a pid file (its grandchild and escaped sleeper too) is left.

mod common;
use common::http::{Up, request};
use common::mcp::McpClient;
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::thread::JoinHandle;

/// Peak anonymous memory allowed for the corral process serving a path: its peak resident
/// memory (VmHWM) less the file-backed pages resident at the end — the debug binary's own
/// code, ≈ 26 MiB of it resident, which grows with any code added anywhere and says
/// nothing about what a flood holds. Idle, the anonymous part is ≈ 14 MiB (debug build);
/// the floods write 160 MiB of stderr through it. What the design lets a flood hold at
/// once: the alert scanner's queue (256 chunks of at most 64 KiB, 16 MiB, full when the
/// scanning thread falls behind on a loaded machine), the drains' read buffers and the
/// rings — so the bound is idle + 16 MiB + headroom. (Measured as VmHWM alone, with a
/// 48 MiB bound, it failed at 49 MiB once the binary grew by the dashboard's code.)
const HWM_BOUND_KIB: u64 = 32 * 1024;
const HWM_BOUND: &str = "32 MiB of anonymous memory";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// `corral mcp --standalone`.
    Stdio,
    /// `corral up` in the foreground, over Streamable HTTP.
    Http,
    /// `corral up -d`, then `corral mcp` (the bridge hands its pipes to the daemon).
    Bridge,
}

const PATHS: [Path; 3] = [Path::Stdio, Path::Http, Path::Bridge];

impl Path {
    fn agent(self, p: &Project) -> Box<dyn Agent + '_> {
        match self {
            Path::Stdio => Box::new(Stdio(McpClient::start(p))),
            Path::Http => {
                let up = Up::start(p);
                let sid = up.initialize();
                Box::new(Http { up, sid, next: 100 })
            }
            Path::Bridge => {
                let down = Down(p);
                let r = p.run(&["up", "-d"]);
                assert_eq!(r.code(), 0, "{r:?}");
                let daemon = read_pid(&p.dir.join(".corral/daemon.pid"));
                Box::new(Bridge {
                    client: Some(McpClient::bridge(p)),
                    daemon,
                    down,
                })
            }
        }
    }

    /// Whether a daemon (with its event journal) serves this path.
    fn journal(self) -> bool {
        self != Path::Stdio
    }
}

/// A call sent and not yet answered.
enum Pending {
    Id(u64),
    Thread(JoinHandle<Value>),
}

/// An agent on one path.
trait Agent {
    /// Sends a `tools/call`.
    fn begin(&mut self, tool: &str, args: Value) -> Pending;
    /// The whole JSON-RPC response to a call sent with [`Agent::begin`].
    fn finish(&mut self, pending: Pending) -> Value;
    /// The corral process that serves this agent (the standalone gateway or the daemon).
    fn corral_pid(&self) -> u32;
    /// Ends the session and the corral process gracefully; returns once it is gone.
    fn teardown(self: Box<Self>);

    fn call(&mut self, tool: &str, args: Value) -> Value {
        let p = self.begin(tool, args);
        self.finish(p)
    }

    /// `corral__servers`' rows.
    fn servers(&mut self) -> Value {
        let r = self.call("corral__servers", json!({}));
        r["result"]["structuredContent"]["servers"].clone()
    }
}

struct Stdio(McpClient);

impl Agent for Stdio {
    fn begin(&mut self, tool: &str, args: Value) -> Pending {
        Pending::Id(
            self.0
                .send_request("tools/call", json!({"name": tool, "arguments": args})),
        )
    }
    fn finish(&mut self, pending: Pending) -> Value {
        match pending {
            Pending::Id(id) => self.0.response(id),
            Pending::Thread(t) => t.join().unwrap(),
        }
    }
    fn corral_pid(&self) -> u32 {
        self.0.child.id()
    }
    fn teardown(self: Box<Self>) {
        let st = self.0.close();
        assert!(st.success(), "corral mcp --standalone: {st:?}");
    }
}

struct Http {
    up: Up,
    sid: String,
    next: u64,
}

impl Agent for Http {
    fn begin(&mut self, tool: &str, args: Value) -> Pending {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
                          "params": {"name": tool, "arguments": args}})
        .to_string();
        let (addr, sid) = (self.up.addr.clone(), self.sid.clone());
        let auth = format!("Bearer {}", self.up.token);
        Pending::Thread(std::thread::spawn(move || {
            let headers = [
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", sid.as_str()),
            ];
            let r = request(&addr, "POST", "/mcp", &headers, &body);
            assert_eq!(r.status, 200, "{r:?}");
            r.messages().pop().expect("a response")
        }))
    }
    fn finish(&mut self, pending: Pending) -> Value {
        match pending {
            Pending::Thread(t) => t.join().unwrap(),
            Pending::Id(_) => unreachable!(),
        }
    }
    fn corral_pid(&self) -> u32 {
        self.up.child.id()
    }
    fn teardown(self: Box<Self>) {
        let pid = self.up.child.id();
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        // A zombie counts as gone; `Up`'s drop then reaps it.
        wait_until("corral up to exit after SIGTERM", || !alive(pid));
    }
}

struct Bridge<'p> {
    client: Option<McpClient>,
    daemon: u32,
    down: Down<'p>,
}

impl Agent for Bridge<'_> {
    fn begin(&mut self, tool: &str, args: Value) -> Pending {
        let c = self.client.as_mut().unwrap();
        Pending::Id(c.send_request("tools/call", json!({"name": tool, "arguments": args})))
    }
    fn finish(&mut self, pending: Pending) -> Value {
        match pending {
            Pending::Id(id) => self.client.as_mut().unwrap().response(id),
            Pending::Thread(t) => t.join().unwrap(),
        }
    }
    fn corral_pid(&self) -> u32 {
        self.daemon
    }
    fn teardown(mut self: Box<Self>) {
        let st = self.client.take().unwrap().close();
        assert!(st.success(), "corral mcp (bridge): {st:?}");
        let r = self.down.0.run(&["down"]);
        assert_eq!(r.code(), 0, "{r:?}");
        let daemon = self.daemon;
        wait_until("the daemon to exit", || !alive(daemon));
        std::mem::forget(self.down);
    }
}

/// One cell of the matrix: a project with `ok` and `bad`, and an agent on `path`.
struct Cell<'p> {
    path: Path,
    p: &'p Project,
    agent: Box<dyn Agent + 'p>,
    pids: BTreeSet<u32>,
}

/// `corral.toml` with the healthy `ok` and `bad` = the fixture with `args` (plus a pid
/// file), then `extra` lines for `bad` (or further servers).
fn config(args: &str, extra: &str) -> String {
    format!(
        r#"
[servers.ok]
command = "{{fixture}}"
args = ["--pid-file", "ok.pid"]

[servers.bad]
command = "{{fixture}}"
args = [{args}, "--pid-file", "bad.pid"]
{extra}
"#
    )
}

impl<'p> Cell<'p> {
    fn start(path: Path, p: &'p Project) -> Cell<'p> {
        Cell {
            path,
            p,
            agent: path.agent(p),
            pids: BTreeSet::new(),
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.agent.call(tool, args)
    }

    /// A call's text, asserting it succeeded.
    fn ok_text(&mut self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args);
        assert!(
            r["result"]["isError"] != true && r.get("error").is_none(),
            "{:?}: {tool}: {r}",
            self.path
        );
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The text of a tool error, asserting it is one.
    fn error_text(&mut self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args);
        error_of(self.path, &r)
    }

    /// `ok` answers.
    fn ok_answers(&mut self) {
        let t = self.ok_text("ok__echo", json!({"text": "still here"}));
        assert_eq!(t, "still here", "{:?}", self.path);
    }

    /// `name`'s row in `corral__servers`.
    fn server(&mut self, name: &str) -> Value {
        let rows = self.agent.servers();
        rows.as_array()
            .unwrap_or_else(|| panic!("{:?}: corral__servers rows: {rows}", self.path))
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{:?}: no row for {name}: {rows}", self.path))
    }

    /// Waits until `name`'s row satisfies `cond`; returns it.
    fn wait_server(&mut self, name: &str, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
        let mut row = Value::Null;
        wait_until(&format!("{:?}: {name} {what}", self.path), || {
            row = self.server(name);
            cond(&row)
        });
        row
    }

    /// `server_logs` for `bad`, filtered by `grep`.
    fn bad_logs(&mut self, grep: &str) -> String {
        self.ok_text(
            "corral__server_logs",
            json!({"server": "bad", "grep": grep, "lines": 20}),
        )
    }

    /// Every pid the fixtures wrote so far (a restart overwrites the files: call this
    /// before one).
    fn record_pids(&mut self) {
        for e in std::fs::read_dir(&self.p.dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".pid")
                && let Ok(pid) = std::fs::read_to_string(e.path())
                && let Ok(pid) = pid.trim().parse()
            {
                self.pids.insert(pid);
            }
        }
    }

    /// The checks every cell ends with: `ok` answers, memory stayed bounded, teardown
    /// leaves no process behind. Returns the daemon's journal (daemon paths).
    fn finish(mut self) -> Option<Vec<Value>> {
        self.ok_answers();
        self.record_pids();
        let pid = self.agent.corral_pid();
        let hwm = vm_hwm_kib(pid);
        assert!(
            hwm < HWM_BOUND_KIB,
            "{:?}: corral (pid {pid}) peaked at {hwm} KiB of anonymous memory, over {HWM_BOUND}",
            self.path
        );
        self.agent.teardown();
        for pid in &self.pids {
            let pid = *pid;
            wait_until(&format!("{:?}: process {pid} gone", self.path), || {
                !alive(pid)
            });
        }
        self.path.journal().then(|| journal(self.p))
    }
}

/// Whether `server`'s log file ends with `tail` (read from its end: the file is large).
fn log_ends_with(p: &Project, server: &str, tail: &str) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(p.dir.join(format!(".corral/logs/{server}.log"))) else {
        return false;
    };
    let mut buf = Vec::new();
    let from = SeekFrom::End(-(tail.len() as i64));
    f.seek(from).is_ok() && f.read_to_end(&mut buf).is_ok() && buf == tail.as_bytes()
}

/// Peak resident set of `pid`, in KiB.
/// The process's peak resident memory less its file-backed and shared pages resident now
/// (see [`HWM_BOUND_KIB`]): its peak anonymous memory, or a little more.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    };
    field("VmHWM:") - field("RssFile:") - field("RssShmem:")
}

/// The daemon's event journal.
fn journal(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.dir.join(".corral/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line {l:?}: {e}")))
        .collect()
}

/// The events of `server` of `kind`.
fn of<'a>(events: &'a [Value], server: &str, kind: &str) -> Vec<&'a Value> {
    let source = format!("server:{server}");
    events
        .iter()
        .filter(|e| e["source"] == source && e["kind"] == kind)
        .collect()
}

/// The kinds of `server`'s events, in order.
/// The lifecycle events of `server`, in order (its `alert`s, which come from scanning
/// its stderr, are asserted on their own).
fn kinds<'a>(events: &'a [Value], server: &str) -> Vec<&'a str> {
    let source = format!("server:{server}");
    events
        .iter()
        .filter(|e| e["source"] == source && e["kind"] != "alert")
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

/// The text of a tool error response.
fn error_of(path: Path, r: &Value) -> String {
    assert!(r.get("error").is_none(), "{path:?}: a tool error, not {r}");
    assert_eq!(r["result"]["isError"], true, "{path:?}: {r}");
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The advice every gateway-side error about `bad` ends with.
const LOGS_ADVICE: &str =
    r#"the `corral__server_logs` tool with {"server": "bad"} shows its stderr"#;

/// `msg` is "server 'bad' is STATE since TIME (DETAIL); <advice>".
fn assert_down(path: Path, msg: &str, state: &str, detail: &str) {
    let head = format!("server 'bad' is {state} since 20");
    let tail = format!(" ({detail}); {LOGS_ADVICE}");
    assert!(
        msg.starts_with(&head) && msg.ends_with(&tail),
        "{path:?}: expected `{head}…{tail}`, got `{msg}`"
    );
}

const TRACEBACK_LAST: &str = "ModuleNotFoundError: No module named 'fixture_missing_dep'";

/// A server that dies before it is ready, with a traceback: what the agent and the
/// journal get (`exit_at_start`: before reading stdin; else on `initialize`).
fn start_failure_with_traceback(fault: &str) {
    for path in PATHS {
        let p = Project::new(&config(fault, r#"restart = "never""#));
        let mut c = Cell::start(path, &p);
        c.record_pids();
        let detail = "exited with code 1 during initialize";
        let msg = c.error_text("bad__echo", json!({"text": "x"}));
        assert_down(path, &msg, "down", detail);
        let row = c.wait_server("bad", "failed", |r| r["state"] == "failed");
        assert_eq!(row["last_error"], detail, "{path:?}: {row}");
        assert_eq!(row["pid"], Value::Null, "{path:?}: {row}");
        // The decisive line is one tool call away.
        let logs = c.bad_logs("modulenotfound");
        assert!(
            logs.starts_with("server 'bad' is failed; last 1 stderr line(s) matching")
                && logs.ends_with(TRACEBACK_LAST),
            "{path:?}: {logs}"
        );
        if let Some(ev) = c.finish() {
            assert_eq!(
                kinds(&ev, "bad"),
                ["server.starting", "server.start_failed"],
                "{path:?}: {ev:#?}"
            );
            let failed = of(&ev, "bad", "server.start_failed")[0];
            assert_eq!(failed["reason"], detail, "{path:?}: {failed}");
            assert_eq!(failed["exit_code"], 1, "{path:?}: {failed}");
            assert_eq!(
                failed["stderr_tail"].as_array().unwrap().last().unwrap(),
                TRACEBACK_LAST,
                "{path:?}: {failed}"
            );
            // The traceback on its stderr is one alert, its exception line the message.
            let alerts = of(&ev, "bad", "alert");
            assert_eq!(alerts.len(), 1, "{path:?}: {alerts:#?}");
            assert_eq!(alerts[0]["rule"], "python.traceback", "{path:?}");
            assert_eq!(alerts[0]["message"], TRACEBACK_LAST, "{path:?}");
        }
    }
}

#[test]
fn exit_on_init_fails_the_start_once_with_the_traceback_in_the_event_and_the_logs() {
    start_failure_with_traceback(r#""--exit-on-init""#);
}

#[test]
fn exit_at_start_fails_the_start_once_with_the_traceback_in_the_event_and_the_logs() {
    start_failure_with_traceback(r#""--exit-at-start""#);
}

#[test]
fn a_crash_mid_call_fails_that_call_with_the_exit_code_and_the_server_restarts() {
    for path in PATHS {
        let p = Project::new(&config(r#""--crash-after", "2""#, ""));
        let mut c = Cell::start(path, &p);
        assert_eq!(c.ok_text("bad__echo", json!({"text": "1"})), "1");
        assert_eq!(c.ok_text("bad__echo", json!({"text": "2"})), "2");
        c.record_pids();
        // The third call is the one the fixture dies in.
        let msg = c.error_text("bad__echo", json!({"text": "3"}));
        assert_eq!(
            msg,
            format!("server 'bad' exited with code 3; {LOGS_ADVICE}"),
            "{path:?}"
        );
        c.ok_answers();
        let row = c.wait_server("bad", "restarted", |r| {
            r["state"] == "ready" && r["restarts"] == 1
        });
        // Ready again: the crash is history (the journal's), not a current error.
        assert_eq!(row["last_error"], Value::Null, "{path:?}: {row}");
        assert_eq!(c.ok_text("bad__echo", json!({"text": "back"})), "back");
        c.record_pids();
        // The crash tool, with its own exit code, on the new instance (its second call).
        let msg = c.error_text("bad__crash", json!({"code": 7}));
        assert_eq!(
            msg,
            format!("server 'bad' exited with code 7; {LOGS_ADVICE}"),
            "{path:?}"
        );
        let logs = c.bad_logs("crashing");
        assert!(
            logs.ends_with("fixture: crashing in the middle of a call"),
            "{path:?}: {logs}"
        );
        if let Some(ev) = c.finish() {
            let crashed = of(&ev, "bad", "server.crashed");
            assert_eq!(crashed.len(), 2, "{path:?}: {ev:#?}");
            let last_words = [
                "fixture: crashing after 2 tool calls (--crash-after)",
                "fixture: crashing in the middle of a call",
            ];
            for ((e, code), words) in crashed.iter().zip([3, 7]).zip(last_words) {
                assert_eq!(e["exit_code"], code, "{path:?}: {e}");
                assert_eq!(
                    e["reason"],
                    format!("exited with code {code}"),
                    "{path:?}: {e}"
                );
                assert_eq!(
                    e["stderr_tail"].as_array().unwrap().last().unwrap(),
                    words,
                    "{path:?}: {e}"
                );
            }
            assert!(of(&ev, "bad", "server.start_failed").is_empty(), "{ev:#?}");
            let restarting = of(&ev, "bad", "server.restarting");
            assert_eq!(restarting[0]["attempt"], 1, "{path:?}: {ev:#?}");
            assert!(kinds(&ev, "ok").iter().all(|k| *k != "server.crashed"));
        }
    }
}

#[test]
fn a_hung_call_times_out_with_an_error_while_the_other_server_answers_and_the_server_lives_on() {
    for path in PATHS {
        let p = Project::new(&config(r#""--hang-calls""#, r#"call_timeout = "2s""#));
        let mut c = Cell::start(path, &p);
        c.record_pids();
        let pid = c.server("bad")["pid"].clone();
        let hung = c.agent.begin("bad__echo", json!({"text": "x"}));
        // While `bad` hangs, `ok` answers.
        c.ok_answers();
        let timeout = format!("server 'bad': no answer to tools/call within 2s; {LOGS_ADVICE}");
        let r = c.agent.finish(hung);
        assert_eq!(error_of(path, &r), timeout, "{path:?}");
        // The hang tool hangs even without --hang-calls; same answer.
        let hung = c.agent.begin("bad__hang", json!({}));
        c.ok_answers();
        let r = c.agent.finish(hung);
        assert_eq!(error_of(path, &r), timeout, "{path:?}");
        // It answered the ping after each timeout: still the same process, never restarted.
        let row = c.server("bad");
        assert_eq!(
            (&row["state"], &row["pid"], &row["restarts"]),
            (&json!("ready"), &pid, &json!(0)),
            "{path:?}: {row}"
        );
        if let Some(ev) = c.finish() {
            let timeouts = of(&ev, "bad", "server.call_timeout");
            let tools: Vec<_> = timeouts.iter().map(|e| &e["tool"]).collect();
            assert_eq!(tools, [&json!("echo"), &json!("hang")], "{path:?}: {ev:#?}");
            assert!(timeouts.iter().all(|e| e["after_ms"] == 2000), "{ev:#?}");
            assert!(
                of(&ev, "bad", "server.crashed").is_empty(),
                "{path:?}: {ev:#?}"
            );
        }
    }
}

#[test]
fn a_server_that_never_answers_initialize_is_killed_at_the_startup_timeout() {
    for path in PATHS {
        let p = Project::new(&config(
            r#""--hang-init""#,
            "startup_timeout = \"4s\"\nrestart = \"never\"",
        ));
        let mut c = Cell::start(path, &p);
        // `ok` answers while `bad` hangs in initialize, without waiting for it.
        c.ok_answers();
        let row = c.server("bad");
        assert_eq!(
            row["state"], "starting",
            "{path:?}: `ok` waited for `bad`: {row}"
        );
        c.record_pids();
        let detail = "no answer to initialize within 4s (startup_timeout)";
        let row = c.wait_server("bad", "failed", |r| r["state"] == "failed");
        assert_eq!(row["last_error"], detail, "{path:?}: {row}");
        let msg = c.error_text("bad__echo", json!({"text": "x"}));
        assert_down(path, &msg, "down", detail);
        // Killed, not left hanging.
        let pid = read_pid(&p.dir.join("bad.pid"));
        wait_until("the hung server is killed", || !alive(pid));
        if let Some(ev) = c.finish() {
            assert_eq!(
                kinds(&ev, "bad"),
                ["server.starting", "server.start_failed"],
                "{path:?}: {ev:#?}"
            );
            let failed = of(&ev, "bad", "server.start_failed")[0];
            assert_eq!(failed["reason"], detail, "{path:?}: {failed}");
        }
    }
}

#[test]
fn a_slow_start_is_waited_for_by_the_first_call_and_does_not_hold_up_the_other_server() {
    for path in PATHS {
        let p = Project::new(&config(r#""--startup-delay", "3000""#, ""));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        let row = c.server("bad");
        assert_eq!(
            row["state"], "starting",
            "{path:?}: `ok` waited for `bad`: {row}"
        );
        // Right after connecting, a call to the starting server waits for it.
        assert_eq!(c.ok_text("bad__echo", json!({"text": "late"})), "late");
        let row = c.server("bad");
        assert_eq!(
            (&row["state"], &row["restarts"]),
            (&json!("ready"), &json!(0))
        );
        if let Some(ev) = c.finish() {
            let ready = of(&ev, "bad", "server.ready");
            assert!(
                ready[0]["startup_ms"].as_u64().unwrap() >= 3000,
                "{path:?}: {ready:?}"
            );
            assert!(of(&ev, "bad", "server.start_failed").is_empty(), "{ev:#?}");
        }
    }
}

#[test]
fn stderr_floods_with_and_without_newlines_keep_memory_bounded_and_calls_answered() {
    for path in PATHS {
        // `bad` floods while it serves; `blob` writes one 32 MiB line before it serves.
        let p = Project::new(&config(
            r#""--stderr-flood", "64", "--flood-when", "during""#,
            r#"
[servers.blob]
command = "{fixture}"
args = ["--stderr-flood", "32", "--flood-no-newlines", "--pid-file", "blob.pid"]
"#,
        ));
        let mut c = Cell::start(path, &p);
        c.record_pids();
        // Calls are answered while the flood runs.
        let mut during = 0;
        while !log_ends_with(&p, "bad", "fixture: flood done\n") {
            c.ok_answers();
            assert_eq!(c.ok_text("bad__echo", json!({"text": "x"})), "x");
            during += 1;
        }
        assert!(
            during > 0,
            "{path:?}: the flood ended before the first call"
        );
        let logs = c.bad_logs("flood done");
        assert!(logs.ends_with("fixture: flood done"), "{path:?}: {logs}");
        assert_eq!(c.ok_text("blob__echo", json!({"text": "y"})), "y");
        let logs = c.ok_text(
            "corral__server_logs",
            json!({"server": "blob", "grep": "flood done"}),
        );
        assert!(logs.ends_with("fixture: flood done"), "{path:?}: {logs}");
        for name in ["bad", "blob"] {
            let row = c.server(name);
            assert_eq!(
                (&row["state"], &row["restarts"]),
                (&json!("ready"), &json!(0))
            );
        }
        if let Some(ev) = c.finish() {
            for name in ["bad", "blob"] {
                assert!(
                    of(&ev, name, "server.crashed").is_empty()
                        && of(&ev, name, "server.start_failed").is_empty(),
                    "{path:?}: {ev:#?}"
                );
            }
        }
    }
}

#[test]
fn stdout_noise_is_reported_as_noise_events_and_never_reaches_the_agent() {
    for path in PATHS {
        let p = Project::new(&config(r#""--stdout-noise""#, ""));
        let mut c = Cell::start(path, &p);
        // Every response is preceded by a noise line; the agent gets clean JSON (the
        // stdio clients fail on any non-JSON line).
        for text in ["a", "b"] {
            assert_eq!(c.ok_text("bad__echo", json!({"text": text})), text);
        }
        let row = c.server("bad");
        assert_eq!(
            (&row["state"], &row["restarts"]),
            (&json!("ready"), &json!(0))
        );
        let logs = c.bad_logs("stdout noise");
        assert!(
            logs.contains("[stdout noise] Starting fixture server v0.1.0...")
                && logs.ends_with("[stdout noise] debug: handling tools/call"),
            "{path:?}: {logs}"
        );
        if let Some(ev) = c.finish() {
            let noise: Vec<_> = of(&ev, "bad", "server.noise")
                .iter()
                .map(|e| e["line"].as_str().unwrap())
                .collect();
            assert_eq!(
                noise,
                [
                    "Starting fixture server v0.1.0...",
                    "listening on stdio",
                    "debug: stdio transport ready",
                    "debug: handling tools/call",
                    "debug: handling tools/call",
                ],
                "{path:?}"
            );
            assert!(of(&ev, "ok", "server.noise").is_empty(), "{ev:#?}");
        }
    }
}

#[test]
fn content_length_framing_is_a_permanent_start_failure_that_says_so_and_never_loops() {
    const FRAMING: &str =
        "server speaks Content-Length framing; MCP stdio is one JSON object per line";
    for path in PATHS {
        // The default restart policy: a permanent failure must not loop anyway.
        let p = Project::new(&config(r#""--content-length""#, ""));
        let mut c = Cell::start(path, &p);
        c.record_pids();
        let msg = c.error_text("bad__echo", json!({"text": "x"}));
        assert_down(path, &msg, "down", FRAMING);
        let row = c.server("bad");
        assert_eq!(
            (&row["state"], &row["restarts"], &row["last_error"]),
            (&json!("failed"), &json!(0), &json!(FRAMING)),
            "{path:?}: {row}"
        );
        let pid = read_pid(&p.dir.join("bad.pid"));
        wait_until("the server is killed", || !alive(pid));
        if let Some(ev) = c.finish() {
            assert_eq!(
                kinds(&ev, "bad"),
                ["server.starting", "server.start_failed"],
                "{path:?}: {ev:#?}"
            );
            let failed = of(&ev, "bad", "server.start_failed")[0];
            assert_eq!(
                (&failed["reason"], &failed["permanent"]),
                (&json!(FRAMING), &json!(true)),
                "{path:?}: {failed}"
            );
        }
    }
}

#[test]
fn a_server_that_ignores_sigterm_is_killed_after_stop_grace_on_restart_and_teardown() {
    for path in PATHS {
        // --linger: it does not exit at stdin EOF either, so only SIGKILL ends it.
        let p = Project::new(&config(
            r#""--ignore-sigterm", "--linger""#,
            r#"stop_grace = "1s""#,
        ));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        c.record_pids();
        let old = read_pid(&p.dir.join("bad.pid"));
        let r = c.ok_text("corral__restart_server", json!({"server": "bad"}));
        assert!(
            r.starts_with("server 'bad' restarted: ready, pid "),
            "{path:?}: {r}"
        );
        assert!(
            !alive(old),
            "{path:?}: the old instance outlived its restart"
        );
        c.record_pids();
        assert_eq!(c.ok_text("bad__echo", json!({"text": "new"})), "new");
        if let Some(ev) = c.finish() {
            // A requested stop is no crash, however it had to end.
            assert_eq!(
                kinds(&ev, "bad"),
                [
                    "server.starting",
                    "server.ready",
                    "server.stopped",
                    "server.starting",
                    "server.ready",
                    "server.stopped"
                ],
                "{path:?}: {ev:#?}"
            );
            let reasons: Vec<_> = of(&ev, "bad", "server.stopped")
                .iter()
                .map(|e| e["reason"].clone())
                .collect();
            assert_eq!(reasons, [json!("restart"), json!("shutdown")], "{path:?}");
        }
    }
}

#[test]
fn a_grandchild_holding_the_pipes_does_not_hide_a_crash_and_dies_with_its_server() {
    for path in PATHS {
        let p = Project::new(&config(r#""--grandchild""#, ""));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        c.record_pids();
        let grandchild = read_pid(&p.dir.join("bad.pid.grandchild"));
        assert!(alive(grandchild));
        // The grandchild keeps the server's stdout open: the crash must still be seen.
        let msg = c.error_text("bad__crash", json!({}));
        assert_eq!(
            msg,
            format!("server 'bad' exited with code 3; {LOGS_ADVICE}"),
            "{path:?}"
        );
        wait_until("the grandchild dies with its crashed server", || {
            !alive(grandchild)
        });
        c.wait_server("bad", "restarted", |r| {
            r["state"] == "ready" && r["restarts"] == 1
        });
        c.record_pids();
        assert_ne!(read_pid(&p.dir.join("bad.pid.grandchild")), grandchild);
        assert_eq!(c.ok_text("bad__echo", json!({"text": "back"})), "back");
        if let Some(ev) = c.finish() {
            assert_eq!(of(&ev, "bad", "server.crashed").len(), 1, "{ev:#?}");
            assert_eq!(of(&ev, "bad", "server.ready").len(), 2, "{ev:#?}");
        }
    }
}

#[test]
fn a_process_that_escapes_the_group_is_ended_with_its_servers_run_and_at_teardown() {
    for path in PATHS {
        let p = Project::new(&config(r#""--escape""#, ""));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        c.record_pids();
        let escaped = read_pid(&p.dir.join("bad.pid.escaped"));
        assert!(alive(escaped));
        let corral = c.agent.corral_pid();
        wait_until("the escaped process is reparented to corral", || {
            ppid_of(escaped) == Some(corral)
        });
        // A restart ends the run's escaped process; the new run escapes again.
        std::fs::remove_file(p.dir.join("bad.pid.escaped")).unwrap();
        let r = c.ok_text("corral__restart_server", json!({"server": "bad"}));
        assert!(r.starts_with("server 'bad' restarted"), "{path:?}: {r}");
        wait_until("the escaped process ends with its server's run", || {
            !alive(escaped)
        });
        let again = read_pid(&p.dir.join("bad.pid.escaped"));
        c.record_pids();
        wait_until("the new escaped process is reparented to corral", || {
            ppid_of(again) == Some(corral)
        });
        if path.journal() {
            wait_until("server.escaped for both runs", || {
                of(&journal(&p), "bad", "server.escaped").len() == 2
            });
        }
        let journal = c.finish();
        if let Some(ev) = journal {
            let pids: Vec<_> = of(&ev, "bad", "server.escaped")
                .iter()
                .map(|e| e["pid"].clone())
                .collect();
            assert_eq!(pids, [json!(escaped), json!(again)], "{path:?}: {ev:#?}");
        }
    }
}

#[test]
fn invalid_utf8_and_crlf_on_stderr_reach_logs_events_and_the_agent_as_valid_text() {
    for path in PATHS {
        let p = Project::new(&config(r#""--invalid-utf8""#, r#"restart = "never""#));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        c.record_pids();
        let logs = c.ok_text("corral__server_logs", json!({"server": "bad"}));
        assert!(
            logs.contains("\nbad utf8: \u{fffd}\u{fffd}\u{fffd}(\ncrlf line"),
            "{path:?}: {logs:?}"
        );
        assert!(!logs.contains('\r'), "{path:?}: {logs:?}");
        // The lines travel in the crash's event (the journal is JSON: valid UTF-8).
        let msg = c.error_text("bad__crash", json!({}));
        assert!(msg.starts_with("server 'bad' exited with code 3;"), "{msg}");
        let msg = c.error_text("bad__echo", json!({"text": "x"}));
        assert_down(path, &msg, "down", "exited with code 3");
        if let Some(ev) = c.finish() {
            let crashed = of(&ev, "bad", "server.crashed");
            let tail = crashed[0]["stderr_tail"].as_array().unwrap();
            assert!(
                tail.contains(&json!("bad utf8: \u{fffd}\u{fffd}\u{fffd}("))
                    && tail.contains(&json!("crlf line")),
                "{path:?}: {tail:?}"
            );
        }
    }
}

#[test]
fn a_partial_last_line_at_exit_is_kept_as_the_last_line_of_the_crash() {
    for path in PATHS {
        let p = Project::new(&config(
            r#""--partial-line-at-exit""#,
            r#"restart = "never""#,
        ));
        let mut c = Cell::start(path, &p);
        c.ok_answers();
        c.record_pids();
        let msg = c.error_text("bad__crash", json!({}));
        assert_eq!(
            msg,
            format!("server 'bad' exited with code 3; {LOGS_ADVICE}"),
            "{path:?}"
        );
        let row = c.wait_server("bad", "failed", |r| r["state"] == "failed");
        assert_eq!(row["last_error"], "exited with code 3", "{path:?}: {row}");
        let logs = c.bad_logs("tail");
        assert!(logs.ends_with("\npartial tail"), "{path:?}: {logs}");
        if let Some(ev) = c.finish() {
            let crashed = of(&ev, "bad", "server.crashed");
            assert_eq!(crashed.len(), 1, "{path:?}: {ev:#?}");
            let tail = crashed[0]["stderr_tail"].as_array().unwrap();
            assert_eq!(
                tail.iter().rev().take(2).collect::<Vec<_>>(),
                [
                    &json!("partial tail"),
                    &json!("fixture: crashing in the middle of a call")
                ],
                "{path:?}: {tail:?}"
            );
        }
    }
}
