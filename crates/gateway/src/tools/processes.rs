//! Corral's process tools: an agent sees, starts, reads, stops, restarts and waits for
//! the project's dev processes (dev servers, watchers, test runners), the ones in
//! `[processes]` and the ones it starts itself with a command (ad hoc, never restarted).
//!
//! They are offered only by a gateway with processes attached (the daemon's, see
//! [`crate::Hub::attach_processes`]): a gateway without them (`corral mcp --standalone`,
//! `corral call` standalone) has nothing to start them in, and a listed tool that can
//! only ever fail would cost every agent context for nothing.
//!
//! Every answer is text written for an agent (state, pid, the lines that explain it),
//! and every message names other tools by the names the agent sees. A tool that could
//! not do what it was asked (an unknown process, a bad regex, a timeout, a process that
//! exited while waited for) answers `isError`.

use super::{Builtin, Project, count_arg, string_arg};
use corral_config::{ProcessCommand, ProcessConfig};
use corral_supervisor::output::{Limit, OutputLine, Query, Stream, StreamFilter};
use corral_supervisor::{Life, ProcessHandle, Processes, State};
use regex::Regex;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Lines `process_output` shows unless told.
const DEFAULT_LINES: usize = 50;
/// Most lines `process_output` shows.
const MAX_LINES: usize = 1000;
/// How long `process_start` waits for the process to show something.
const START_WAIT: Duration = Duration::from_secs(2);
/// Lines of output a start, restart or failure report shows.
const REPORT_LINES: usize = 20;
/// `process_wait`'s timeout unless told.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest `process_wait` / `process_restart` timeout.
const MAX_WAIT: Duration = Duration::from_secs(300);
/// `process_restart`'s timeout unless told (or the readiness check's, when longer).
const DEFAULT_RESTART_WAIT: Duration = Duration::from_secs(30);

/// What the process tools work on.
struct Ctx<'a> {
    processes: &'a Processes,
    /// The project root (ad-hoc `cwd`, alert locations).
    root: &'a Path,
    /// The servers (an ad-hoc process may not take a server's name: they would share a
    /// log file) and the names agents see of the other tools.
    tools: &'a super::Ctx<'a>,
}

impl Ctx<'_> {
    /// The name agents see for built-in tool `b`.
    fn tool(&self, b: Builtin) -> &str {
        self.tools.name(b)
    }
}

/// The tool object of process tool `b` for `tools/list` (without its name).
pub fn definition(b: Builtin) -> Value {
    let name = json!({"type": "string"});
    let timeout = json!({
        "type": ["number", "string"],
        "description": "seconds, or \"2m\" (default 30s, max 300s)"
    });
    let stream = json!({"type": "string", "enum": ["both", "stdout", "stderr"]});
    match b {
        Builtin::Processes => json!({
            "description": "Corral: the project's dev processes (configured, or started by \
                `{process_start}`): state, pid, uptime, restarts, readiness, last exit, and the \
                latest error recognised in their output (exception, file:line).",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": true},
        }),
        Builtin::ProcessStart => json!({
            "description": "Corral: start a dev process under supervision: a configured \
                `name`, or a new one running `command` (not restarted when it exits). Answers \
                its state and first lines of output.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "configured, or new ([A-Za-z0-9_.-])"},
                    "command": {
                        "description": "a shell line or an argv array",
                        "oneOf": [
                            {"type": "string"},
                            {"type": "array", "items": {"type": "string"}, "minItems": 1}
                        ]
                    },
                    "cwd": {"type": "string", "description": "relative to the project root"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}}
                },
                "required": ["name"]
            },
            "annotations": {"destructiveHint": false},
        }),
        Builtin::ProcessOutput => json!({
            "description": "Corral: a dev process's output (stdout and stderr interleaved), \
                oldest first; `── run N ──` marks a restart.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": name,
                    "last": {"type": "integer", "minimum": 1, "maximum": MAX_LINES, "description": "default 50"},
                    "first": {"type": "integer", "minimum": 1, "maximum": MAX_LINES, "description": "the oldest N instead"},
                    "grep": {"type": "string", "description": "regex"},
                    "stream": stream,
                    "since": {"type": "string", "description": "RFC 3339, or a duration ago (5m)"}
                },
                "required": ["name"]
            },
            "annotations": {"readOnlyHint": true},
        }),
        Builtin::ProcessStop => json!({
            "description": "Corral: stop a dev process gracefully; it stays stopped until \
                started again.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": name},
                "required": ["name"]
            },
            "annotations": {"destructiveHint": true, "idempotentHint": true},
        }),
        Builtin::ProcessRestart => json!({
            "description": "Corral: restart a dev process (or start a stopped one) and wait \
                until it is ready; answers its state and first lines of output.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": name, "timeout": timeout},
                "required": ["name"]
            },
            "annotations": {"destructiveHint": false},
        }),
        Builtin::ProcessWait => json!({
            "description": "Corral: wait until a dev process prints a line matching `pattern` \
                after this call began, or `port` accepts connections; answers which happened, \
                or that it timed out or exited.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": name,
                    "pattern": {"type": "string", "description": "regex"},
                    "stream": stream,
                    "port": {"type": ["integer", "string"], "description": "5173, or \"host:5173\""},
                    "timeout": timeout
                },
                "required": ["name"]
            },
            "annotations": {"readOnlyHint": true},
        }),
        _ => json!({}),
    }
}

/// Runs process tool `b` on `project`; a `tools/call` result.
pub async fn call(
    b: Builtin,
    project: Project<'_>,
    tools: &super::Ctx<'_>,
    args: &Value,
) -> String {
    let ctx = &Ctx {
        processes: project.processes,
        root: project.root,
        tools,
    };
    let outcome = match b {
        Builtin::Processes => Ok(list(ctx)),
        Builtin::ProcessStart => start(ctx, args).await,
        Builtin::ProcessOutput => output(ctx, args),
        Builtin::ProcessStop => stop(ctx, args).await,
        Builtin::ProcessRestart => restart(ctx, args).await,
        Builtin::ProcessWait => wait(ctx, args).await,
        _ => Err(format!("'{}' is not a process tool", b.name())),
    };
    match outcome {
        Ok(answer) => answer.result(),
        Err(message) => crate::jsonrpc::tool_error_result(&message),
    }
}

/// A tool's answer: text, maybe structured content, maybe a failure.
struct Answer {
    text: String,
    structured: Option<Value>,
    error: bool,
}

impl Answer {
    fn ok(text: String) -> Answer {
        Answer {
            text,
            structured: None,
            error: false,
        }
    }

    fn result(&self) -> String {
        let mut v =
            json!({"content": [{"type": "text", "text": self.text}], "isError": self.error});
        if let Some(s) = &self.structured {
            v["structuredContent"] = s.clone();
        }
        v.to_string()
    }
}

// ---------------------------------------------------------------------------------------
// Arguments

fn name_arg(args: &Value) -> Result<&str, String> {
    string_arg(args, "name")?.ok_or_else(|| "missing argument `name` (the process's name)".into())
}

/// `timeout`: seconds (a number) or a duration string; at most [`MAX_WAIT`].
fn timeout_arg(args: &Value, default: Duration) -> Result<Duration, String> {
    let d = match args.get("timeout") {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("`timeout` must be a positive number of seconds, not {n}"))?,
        Some(Value::String(s)) => humantime::parse_duration(s.trim()).map_err(|e| {
            format!("`timeout` \"{s}\" is not a duration ({e}); write e.g. 30, \"90s\" or \"2m\"")
        })?,
        Some(other) => {
            return Err(format!(
                "`timeout` must be seconds or a duration like \"90s\", not {other}"
            ));
        }
    };
    if d > MAX_WAIT {
        return Err(format!(
            "`timeout` {} is longer than the maximum, {}",
            secs(d),
            secs(MAX_WAIT)
        ));
    }
    Ok(d)
}

fn stream_arg(args: &Value) -> Result<StreamFilter, String> {
    match string_arg(args, "stream")? {
        None | Some("both") => Ok(StreamFilter::Both),
        Some("stdout") => Ok(StreamFilter::Stdout),
        Some("stderr") => Ok(StreamFilter::Stderr),
        Some(other) => Err(format!(
            "`stream` must be \"stdout\", \"stderr\" or \"both\", not \"{other}\""
        )),
    }
}

fn regex_arg(args: &Value, key: &str) -> Result<Option<Regex>, String> {
    let Some(pattern) = string_arg(args, key)? else {
        return Ok(None);
    };
    Regex::new(pattern)
        .map(Some)
        .map_err(|e| format!("`{key}` \"{pattern}\" is not a valid regex: {e}"))
}

/// `since`: an RFC 3339 time, or a duration before now.
fn since_arg(args: &Value) -> Result<Option<SystemTime>, String> {
    let Some(text) = string_arg(args, "since")? else {
        return Ok(None);
    };
    let text = text.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(Some(t));
    }
    match humantime::parse_duration(text) {
        Ok(d) => Ok(Some(
            SystemTime::now()
                .checked_sub(d)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        )),
        Err(_) => Err(format!(
            "`since` \"{text}\" is neither an RFC 3339 time (2025-01-31T12:00:00Z) nor a \
             duration (30s, 5m, 1h)"
        )),
    }
}

/// `port`: `5173` (on 127.0.0.1) or `"host:5173"`.
fn port_arg(args: &Value) -> Result<Option<String>, String> {
    let bad = |v: &Value| format!("`port` must be a port number or \"host:port\", not {v}");
    match args.get("port") {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => match n.as_u64() {
            Some(p @ 1..=65535) => Ok(Some(format!("127.0.0.1:{p}"))),
            _ => Err(bad(v)),
        },
        Some(v @ Value::String(s)) => {
            let s = s.trim();
            if let Ok(p) = s.parse::<u16>() {
                return if p == 0 {
                    Err(bad(v))
                } else {
                    Ok(Some(format!("127.0.0.1:{p}")))
                };
            }
            match s.rsplit_once(':') {
                Some((host, port))
                    if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) =>
                {
                    Ok(Some(s.to_owned()))
                }
                _ => Err(bad(v)),
            }
        }
        Some(v) => Err(bad(v)),
    }
}

fn command_arg(args: &Value) -> Result<Option<ProcessCommand>, String> {
    match args.get("command") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Err("`command` is empty".into()),
        Some(Value::String(s)) => Ok(Some(ProcessCommand::Shell(s.clone()))),
        Some(Value::Array(items)) => {
            let argv: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            match argv {
                Some(argv) if !argv.is_empty() && !argv[0].is_empty() => {
                    Ok(Some(ProcessCommand::Argv(argv)))
                }
                Some(_) => Err("`command` as an array needs a program first".into()),
                None => Err("`command` as an array must hold only strings".into()),
            }
        }
        Some(other) => Err(format!(
            "`command` must be a shell line (a string) or an argv array, not {other}"
        )),
    }
}

fn env_arg(args: &Value) -> Result<BTreeMap<String, String>, String> {
    match args.get("env") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) if !k.is_empty() && !k.contains('=') => Ok((k.clone(), s.clone())),
                Value::String(_) => Err(format!("`env` has an invalid variable name \"{k}\"")),
                other => Err(format!("`env.{k}` must be a string, not {other}")),
            })
            .collect(),
        Some(other) => Err(format!("`env` must be an object of strings, not {other}")),
    }
}

// ---------------------------------------------------------------------------------------
// Finding processes

/// The process called `name`, or an error listing the ones there are.
fn find(ctx: &Ctx<'_>, name: &str) -> Result<ProcessHandle, String> {
    ctx.processes.get(name).ok_or_else(|| unknown(ctx, name))
}

fn unknown(ctx: &Ctx<'_>, name: &str) -> String {
    let names: Vec<String> = ctx
        .processes
        .list()
        .iter()
        .map(|h| h.name().to_owned())
        .collect();
    let start = ctx.tool(Builtin::ProcessStart);
    if names.is_empty() {
        format!(
            "no process named '{name}': this project has no dev processes yet; `{start}` with \
             {{\"name\": \"{name}\", \"command\": \"…\"}} starts one"
        )
    } else {
        format!(
            "no process named '{name}'; processes: {}. `{start}` with a `command` starts a new one",
            names.join(", ")
        )
    }
}

/// An ad-hoc name must be usable as a log file name and be nobody's yet.
fn check_new_name(ctx: &Ctx<'_>, name: &str) -> Result<(), String> {
    // The config's and the CLI's one rule: the name goes into `ps`, events and files.
    if let Some(problem) = corral_config::name_problem("process", name) {
        return Err(format!("{problem} (`name` of a new process)"));
    }
    if ctx.tools.servers.contains_key(name) || name == "corral" {
        return Err(format!(
            "'{name}' is the name of an MCP server here; pick another name for the process"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Showing state and output

fn running(state: State) -> bool {
    matches!(state, State::Starting | State::Ready)
}

fn secs(d: Duration) -> String {
    let tenths = (d.as_secs_f64() * 10.0).round() as u64;
    match tenths % 10 {
        0 => format!("{}s", tenths / 10),
        t => format!("{}.{t}s", tenths / 10),
    }
}

/// "exited with code 3", "killed by signal 9".
fn exit_text(life: &Life) -> Option<String> {
    let e = life.last_exit?;
    Some(match (e.code, e.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "exited".to_owned(),
    })
}

/// The state in a few words: "ready (pid 4242)", "failed: exited with code 1".
fn state_text(h: &ProcessHandle) -> String {
    let s = h.status();
    let life = &s.life;
    let mut text = life.state().as_str().to_owned();
    if let Some(pid) = life.pid() {
        text.push_str(&format!(", pid {pid}"));
    }
    if let Some(w) = &s.waiting_for {
        text.push_str(&format!(", waiting for {w}"));
    }
    if !running(life.state())
        && let Some(e) = life.last_error.as_ref().or(exit_text(life).as_ref())
    {
        text.push_str(&format!(": {e}"));
    }
    text
}

/// `lines` for an agent: a `── run N ──` line where the run changes (and first, when
/// they span several runs), each line tagged with its stream when `tag`.
fn render(lines: &[OutputLine], tag: bool) -> String {
    let several_runs = lines.windows(2).any(|w| w[0].run != w[1].run);
    let mut out = String::new();
    let mut run = None;
    for l in lines {
        if run != Some(l.run) && (run.is_some() || several_runs) {
            out.push_str(&format!("── run {} ──\n", l.run));
        }
        run = Some(l.run);
        if tag {
            match l.stream {
                Stream::Stdout => out.push_str("[stdout] "),
                Stream::Stderr => out.push_str("[stderr] "),
                Stream::Pty => {}
            }
        }
        out.push_str(&l.text);
        out.push('\n');
    }
    out
}

/// The lines after `after_seq`, first (or last) `n`, tagged by stream.
fn lines_after(h: &ProcessHandle, after_seq: u64, limit: Limit) -> String {
    let lines = h.output(&Query {
        after_seq: Some(after_seq),
        limit,
        ..Query::default()
    });
    if lines.is_empty() {
        return "(no output yet)\n".to_owned();
    }
    render(&lines, true)
}

/// The lines of runs from `min_run` on after `after_seq`, as `limit` says, tagged.
fn run_lines(h: &ProcessHandle, after_seq: u64, min_run: u32, limit: Limit) -> String {
    let mut lines: Vec<OutputLine> = h
        .output(&Query {
            after_seq: Some(after_seq),
            ..Query::default()
        })
        .into_iter()
        .filter(|l| l.run >= min_run)
        .collect();
    match limit {
        Limit::First(n) => lines.truncate(n),
        Limit::Last(n) => {
            lines.drain(..lines.len().saturating_sub(n));
        }
        Limit::All => {}
    }
    if lines.is_empty() {
        return "(no output yet)\n".to_owned();
    }
    render(&lines, true)
}

/// A command on one line, at most 200 characters, for listings.
fn one_line(command: &str) -> String {
    let flat = command.replace('\n', "\\n");
    match flat.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// Where an alert points, relative to the project root when inside it.
fn location_text(ctx: &Ctx<'_>, alert: &corral_alerts::Alert) -> Option<String> {
    super::errors::alert_location(alert, Some(ctx.root))
}

// ---------------------------------------------------------------------------------------
// The tools

fn list(ctx: &Ctx<'_>) -> Answer {
    let handles = ctx.processes.list();
    let alerts = ctx.processes.alerts();
    let mut text = String::new();
    let mut rows = Vec::new();
    for h in &handles {
        let source = format!("process:{}", h.name());
        let (latest, count) = match alerts {
            Some(a) => {
                let all = a.query(&corral_alerts::AlertQuery {
                    source: Some(source.clone()),
                    ..Default::default()
                });
                (all.last().cloned(), all.len())
            }
            None => (None, 0),
        };
        let row = h.row(latest.as_ref().map(|a| a.message.clone()));
        let status = h.status();
        text.push_str(&format!("{}: {}", row.name, row.state));
        if let Some(pid) = row.pid {
            text.push_str(&format!(", pid {pid}"));
        }
        if let Some(up) = row.uptime_s {
            text.push_str(&format!(", up {up}s"));
        }
        text.push_str(&format!(
            ", {} restart{}, run {}{}\n  command: {}\n",
            row.restarts,
            if row.restarts == 1 { "" } else { "s" },
            status.life.runs,
            if row.ready || !running(status.life.state()) {
                ""
            } else {
                " (not ready yet)"
            },
            one_line(&row.command)
        ));
        if let Some(w) = &row.waiting_for {
            text.push_str(&format!("  waiting for {w}\n"));
        }
        if let Some(e) = exit_text(&status.life) {
            text.push_str(&format!("  last exit: {e}\n"));
        }
        if let Some(e) = &row.last_error
            && Some(e) != exit_text(&status.life).as_ref()
        {
            text.push_str(&format!("  last error: {e}\n"));
        }
        let mut value = serde_json::to_value(&row).unwrap_or(Value::Null);
        let alert_value = latest.as_ref().map(|a| {
            let location = location_text(ctx, a);
            text.push_str(&format!(
                "  latest alert{}: {}{}{}\n",
                if count > 1 {
                    format!(" (of {count})")
                } else {
                    String::new()
                },
                a.message,
                location
                    .as_ref()
                    .map(|l| format!(" at {l}"))
                    .unwrap_or_default(),
                if a.count > 1 {
                    format!(", seen {} times", a.count)
                } else {
                    String::new()
                }
            ));
            json!({
                "id": a.id,
                "rule": a.rule,
                "severity": a.severity,
                "message": a.message,
                "location": location,
                "count": a.count,
                "first_seen": humantime::format_rfc3339_millis(a.first_seen).to_string(),
                "last_seen": humantime::format_rfc3339_millis(a.last_seen).to_string(),
            })
        });
        if let Value::Object(m) = &mut value {
            m.insert("runs".into(), status.life.runs.into());
            m.insert("alert".into(), alert_value.unwrap_or(Value::Null));
            m.insert("alerts".into(), count.into());
        }
        rows.push(value);
    }
    if handles.is_empty() {
        text.push_str(&format!(
            "no dev processes: none is configured ([processes] in corral.toml) and none was \
             started; `{}` starts one\n",
            ctx.tool(Builtin::ProcessStart)
        ));
    }
    Answer {
        text: text.trim_end().to_owned(),
        structured: Some(json!({ "processes": rows })),
        error: false,
    }
}

async fn start(ctx: &Ctx<'_>, args: &Value) -> Result<Answer, String> {
    let name = name_arg(args)?;
    let command = command_arg(args)?;
    let cwd = string_arg(args, "cwd")?;
    let env = env_arg(args)?;
    let Some(command) = command else {
        let h = find(ctx, name).map_err(|e| {
            if ctx.processes.get(name).is_none() {
                format!("{e} (give `command` to run a new process under this name)")
            } else {
                e
            }
        })?;
        if cwd.is_some() || !env.is_empty() {
            return Err(format!(
                "process '{name}' is configured: it runs with its own cwd and env; `cwd` and \
                 `env` are for a new process with a `command`"
            ));
        }
        let life = h.status().life;
        if running(life.state()) {
            let mut text = format!(
                "process '{name}' is already running: {}; `{}` restarts it. Last lines:\n",
                state_text(&h),
                ctx.tool(Builtin::ProcessRestart)
            );
            text.push_str(&lines_after(&h, 0, Limit::Last(REPORT_LINES)));
            return Ok(Answer::ok(text.trim_end().to_owned()));
        }
        let t0 = SystemTime::now();
        let after_seq = h.latest_seq();
        h.start().await;
        return Ok(started(ctx, &h, t0, life.runs, after_seq, "started", START_WAIT).await);
    };
    check_new_name(ctx, name)?;
    if let Some(h) = ctx.processes.get(name) {
        return Err(format!(
            "a process named '{name}' exists already (`{}`, {}); `{}` with {{\"name\": \
             \"{name}\"}} restarts it, `{}` with only the name starts it again as it is, or \
             pick another name for this command",
            one_line(&h.row(None).command),
            state_text(&h),
            ctx.tool(Builtin::ProcessRestart),
            ctx.tool(Builtin::ProcessStart),
        ));
    }
    let dir = match cwd {
        None => ctx.root.to_path_buf(),
        Some(c) => ctx.root.join(c),
    };
    if !dir.is_dir() {
        return Err(format!(
            "`cwd` {} is not a directory (it is relative to the project root {})",
            dir.display(),
            ctx.root.display()
        ));
    }
    let mut cfg = ProcessConfig::ad_hoc(name, command, normalize(&dir));
    cfg.env = env;
    let t0 = SystemTime::now();
    let h = ctx.processes.add(cfg, Vec::new()).map_err(|e| {
        // Lost a race with another start of the same name.
        format!("{e}; or `{}` it", ctx.tool(Builtin::ProcessRestart))
    })?;
    Ok(started(ctx, &h, t0, 0, 0, "started", START_WAIT).await)
}

/// `dir` without `.` components (`root/./web` → `root/web`), as shown in messages.
fn normalize(dir: &Path) -> PathBuf {
    dir.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// Whether a run started after `t0` (run count above `runs0`) is ready or ended.
fn settled(l: &Life, t0: SystemTime, runs0: u32) -> bool {
    match l.state() {
        State::Ready => l.runs > runs0,
        State::Starting => false,
        // Entered after t0: the start (or restart) led here.
        _ => l.since >= t0,
    }
}

/// Waits until a just-started (or restarted) process is ready or ended, at most
/// `limit`, and then up to [`START_WAIT`] (within `limit`) for its new run to print
/// something; then tells how it is.
async fn started(
    ctx: &Ctx<'_>,
    h: &ProcessHandle,
    t0: SystemTime,
    runs0: u32,
    after_seq: u64,
    what: &str,
    limit: Duration,
) -> Answer {
    let deadline = Instant::now() + limit;
    let mut rx = h.watch();
    let _ = tokio::time::timeout_at(deadline, rx.wait_for(|l| settled(l, t0, runs0))).await;
    let output_deadline = deadline.min(Instant::now() + START_WAIT);
    if h.state() == State::Ready {
        // The first line of the new run (a restart's old run may still have printed).
        let mut cursor = after_seq;
        loop {
            let left = output_deadline.saturating_duration_since(Instant::now());
            match h.wait_output(cursor, &Query::default(), left).await {
                Some(line) if line.run > runs0 => {
                    // The rest of a first burst (a banner) arrives with it.
                    let settle = Duration::from_millis(100)
                        .min(output_deadline.saturating_duration_since(Instant::now()));
                    tokio::time::sleep(settle).await;
                    break;
                }
                Some(line) => cursor = line.seq,
                None => break,
            }
        }
    }
    report(ctx, h, t0, runs0, after_seq, what)
}

/// The state a start or restart led to, with the run's first lines; an error when it
/// did not get (or stay) up.
fn report(
    ctx: &Ctx<'_>,
    h: &ProcessHandle,
    t0: SystemTime,
    runs0: u32,
    after_seq: u64,
    what: &str,
) -> Answer {
    let s = h.status();
    let life = &s.life;
    let name = h.name();
    let state = life.state();
    let mut text = match state {
        State::Ready => format!("process '{name}' {what}: {}", state_text(h)),
        State::Starting => format!(
            "process '{name}' {what}: still starting after {} ({}); `{}` shows whether it gets \
             ready",
            secs(SystemTime::now().duration_since(t0).unwrap_or_default()),
            state_text(h),
            ctx.tool(Builtin::Processes)
        ),
        State::Stopped if life.last_exit.is_some_and(|e| e.code == Some(0)) => {
            format!("process '{name}' {what} and finished: exited with code 0")
        }
        _ => format!("process '{name}' {what} but is {}", state_text(h)),
    };
    text.push_str(&format!(
        ", run {}\ncommand: {}\nfirst lines:\n",
        life.runs,
        one_line(&h.row(None).command)
    ));
    text.push_str(&run_lines(
        h,
        after_seq,
        runs0 + 1,
        Limit::First(REPORT_LINES),
    ));
    let failed = matches!(state, State::Failed | State::GaveUp | State::Backoff);
    let mut structured = Map::new();
    structured.insert("name".into(), name.into());
    structured.insert("state".into(), state.as_str().into());
    structured.insert("pid".into(), life.pid().into());
    structured.insert("run".into(), life.runs.into());
    structured.insert("restarts".into(), life.restarts.into());
    structured.insert(
        "last_exit".into(),
        serde_json::to_value(life.last_exit).unwrap_or(Value::Null),
    );
    Answer {
        text: text.trim_end().to_owned(),
        structured: Some(Value::Object(structured)),
        error: failed,
    }
}

fn output(ctx: &Ctx<'_>, args: &Value) -> Result<Answer, String> {
    let h = find(ctx, name_arg(args)?)?;
    let limit = match (count_arg(args, "last")?, count_arg(args, "first")?) {
        (Some(_), Some(_)) => return Err("give `last` or `first`, not both".into()),
        (Some(n), None) => Limit::Last(n),
        (None, Some(n)) => Limit::First(n),
        (None, None) => Limit::Last(DEFAULT_LINES),
    };
    let query = Query {
        stream: stream_arg(args)?,
        since: since_arg(args)?,
        after_seq: None,
        grep: regex_arg(args, "grep")?,
        limit,
    };
    let lines = h.output(&query);
    let mut what = match limit {
        Limit::First(n) => format!("first {} of the", n.min(lines.len())),
        _ => format!("last {}", lines.len()),
    };
    if lines.is_empty() {
        what = "no".to_owned();
    }
    let mut filters = Vec::new();
    if query.stream != StreamFilter::Both {
        filters.push(format!(
            "on {}",
            match query.stream {
                StreamFilter::Stdout => "stdout",
                _ => "stderr",
            }
        ));
    }
    if let Some(re) = &query.grep {
        filters.push(format!("matching /{re}/"));
    }
    if let Some(t) = query.since {
        filters.push(format!("since {}", humantime::format_rfc3339_seconds(t)));
    }
    let mut text = format!(
        "process '{}' is {}; {what} line(s){}{}:\n",
        h.name(),
        state_text(&h),
        if filters.is_empty() { "" } else { " " },
        filters.join(", ")
    );
    text.push_str(&render(&lines, query.stream == StreamFilter::Both));
    Ok(Answer::ok(text.trim_end().to_owned()))
}

async fn stop(ctx: &Ctx<'_>, args: &Value) -> Result<Answer, String> {
    let h = find(ctx, name_arg(args)?)?;
    let before = state_text(&h);
    let state = h.state();
    if matches!(state, State::Stopped | State::Failed | State::GaveUp) {
        return Ok(Answer::ok(format!(
            "process '{}' is not running ({before}); nothing to stop (`{}` starts it)",
            h.name(),
            ctx.tool(Builtin::ProcessStart)
        )));
    }
    h.stop().await;
    Ok(Answer::ok(format!(
        "process '{}' stopped (it was {before}); it is now {}",
        h.name(),
        state_text(&h)
    )))
}

async fn restart(ctx: &Ctx<'_>, args: &Value) -> Result<Answer, String> {
    let h = find(ctx, name_arg(args)?)?;
    let default = h
        .config()
        .ready
        .as_ref()
        .map_or(DEFAULT_RESTART_WAIT, |r| {
            (r.timeout + Duration::from_secs(2)).max(DEFAULT_RESTART_WAIT)
        })
        .min(MAX_WAIT);
    let limit = timeout_arg(args, default)?;
    let t0 = SystemTime::now();
    let runs0 = h.status().life.runs;
    let after_seq = h.latest_seq();
    let begun = Instant::now();
    let mut answer = if tokio::time::timeout(limit, h.restart()).await.is_ok() {
        let left = limit.saturating_sub(begun.elapsed());
        started(ctx, &h, t0, runs0, after_seq, "restarted", left).await
    } else {
        report(ctx, &h, t0, runs0, after_seq, "restarted")
    };
    if h.state() != State::Ready {
        answer.error = true;
    }
    Ok(answer)
}

/// How a wait ended.
enum Waited {
    Line(OutputLine),
    Port,
    TimedOut(Option<String>),
    /// The run ended (or a new one began) meanwhile.
    Ended(Life),
}

async fn wait(ctx: &Ctx<'_>, args: &Value) -> Result<Answer, String> {
    let h = find(ctx, name_arg(args)?)?;
    let pattern = regex_arg(args, "pattern")?;
    let port = port_arg(args)?;
    let timeout = timeout_arg(args, DEFAULT_WAIT)?;
    let stream = stream_arg(args)?;
    if pattern.is_none() && port.is_none() {
        return Err(
            "give `pattern` (a regex a new output line must match) or `port` (5173 or \
             \"host:5173\"), or both"
                .into(),
        );
    }
    let name = h.name().to_owned();
    // Only lines after this count: "new" output.
    let after_seq = h.latest_seq();
    let mut rx = h.watch();
    let life0 = rx.borrow_and_update().clone();
    let state0 = life0.state();
    if matches!(state0, State::Stopped | State::Failed | State::GaveUp) {
        return Err(format!(
            "process '{name}' is not running ({}), so nothing can come; `{}` starts it. Last \
             lines:\n{}",
            state_text(&h),
            ctx.tool(Builtin::ProcessStart),
            lines_after(&h, 0, Limit::Last(10)).trim_end()
        ));
    }
    let started = Instant::now();
    let deadline = started + timeout;
    let query = Query {
        stream,
        grep: pattern.clone(),
        ..Query::default()
    };
    // The run watched ended: it stopped, failed or gave up; or, if it was running, it
    // died (backoff) or a new run began (someone restarted it).
    let was_running = running(state0) && life0.pid().is_some();
    let ended = |l: &Life| match l.state() {
        State::Stopped | State::Failed | State::GaveUp => true,
        State::Backoff => running(state0),
        _ => was_running && l.runs != life0.runs,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let waited = {
        let line = async {
            match &pattern {
                Some(_) => match h.wait_output(after_seq, &query, timeout).await {
                    Some(l) => Waited::Line(l),
                    None => Waited::TimedOut(None),
                },
                None => std::future::pending().await,
            }
        };
        let tcp = async {
            match &port {
                Some(addr) => {
                    match corral_supervisor::ready::wait_tcp(addr, deadline, &cancel).await {
                        corral_supervisor::ready::Outcome::Ready { .. } => Waited::Port,
                        outcome => Waited::TimedOut(Some(outcome.to_string())),
                    }
                }
                None => std::future::pending().await,
            }
        };
        let exit = async {
            let life = rx.wait_for(|l| ended(l)).await.map(|l| l.clone()).ok();
            match life {
                Some(l) => Waited::Ended(l),
                None => std::future::pending().await,
            }
        };
        // Each probe given ends itself at the deadline (a port probe with why it failed).
        tokio::select! {
            w = line => w,
            w = tcp => w,
            w = exit => w,
        }
    };
    cancel.cancel();
    // A line printed just before the exit still counts as the match.
    let waited = match waited {
        Waited::Ended(life) if pattern.is_some() => {
            let mut q = query.clone();
            q.after_seq = Some(after_seq);
            q.limit = Limit::First(1);
            match h.output(&q).pop() {
                Some(line) => Waited::Line(line),
                None => Waited::Ended(life),
            }
        }
        w => w,
    };
    let elapsed = secs(started.elapsed());
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let mut structured = json!({"name": name, "elapsed_ms": elapsed_ms});
    let answer = match waited {
        Waited::Line(line) => {
            structured["outcome"] = "matched".into();
            structured["line"] = serde_json::to_value(&line).unwrap_or(Value::Null);
            Answer {
                text: format!(
                    "matched after {elapsed}: process '{name}' printed on {}:\n{}",
                    match line.stream {
                        Stream::Stdout => "stdout",
                        Stream::Stderr => "stderr",
                        Stream::Pty => "its terminal",
                    },
                    line.text
                ),
                structured: None,
                error: false,
            }
        }
        Waited::Port => {
            let addr = port.clone().unwrap_or_default();
            structured["outcome"] = "port_open".into();
            structured["port"] = addr.clone().into();
            Answer::ok(format!(
                "port open after {elapsed}: {addr} accepts connections (process '{name}' is {})",
                state_text(&h)
            ))
        }
        Waited::TimedOut(why) => {
            structured["outcome"] = "timed_out".into();
            let mut what = Vec::new();
            if let Some(re) = &pattern {
                what.push(format!("no new line matched /{re}/"));
            }
            if let Some(addr) = &port {
                what.push(match &why {
                    Some(why) => format!("port {addr}: {why}"),
                    None => format!("port {addr} did not open"),
                });
            }
            let mut text = format!(
                "timed out after {elapsed}: {}; process '{name}' is {}. New lines since the \
                 wait began (last 10):\n",
                what.join("; "),
                state_text(&h)
            );
            text.push_str(&lines_after(&h, after_seq, Limit::Last(10)));
            Answer {
                text: text.trim_end().to_owned(),
                structured: None,
                error: true,
            }
        }
        Waited::Ended(life) => {
            structured["outcome"] = "exited".into();
            structured["state"] = life.state().as_str().into();
            structured["last_exit"] = serde_json::to_value(life.last_exit).unwrap_or(Value::Null);
            let how = if life.state() != State::Stopped || life.last_error != life0.last_error {
                life.last_error
                    .clone()
                    .or_else(|| exit_text(&life))
                    .unwrap_or_else(|| "ended".to_owned())
            } else if life.runs != life0.runs || life.last_exit == life0.last_exit {
                "was stopped or restarted on request".to_owned()
            } else {
                exit_text(&life).unwrap_or_else(|| "ended".to_owned())
            };
            let mut text = format!(
                "process '{name}' {how} after {elapsed} of waiting, before {}; it is now {}. \
                 Last lines:\n",
                match (&pattern, &port) {
                    (Some(re), None) => format!("a line matched /{re}/"),
                    (None, Some(addr)) => format!("port {addr} opened"),
                    _ => "a line matched or the port opened".to_owned(),
                },
                life.state().as_str()
            );
            text.push_str(&lines_after(&h, 0, Limit::Last(10)));
            Answer {
                text: text.trim_end().to_owned(),
                structured: None,
                error: true,
            }
        }
    };
    Ok(Answer {
        structured: Some(structured),
        ..answer
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, run: u32, stream: Stream, text: &str) -> OutputLine {
        OutputLine {
            seq,
            run,
            stream,
            time: SystemTime::now(),
            text: text.into(),
        }
    }

    #[test]
    fn output_is_tagged_by_stream_and_runs_are_separated() {
        let lines = [
            line(1, 1, Stream::Stdout, "a"),
            line(2, 1, Stream::Stderr, "b"),
            line(3, 2, Stream::Stdout, "c"),
        ];
        assert_eq!(
            render(&lines, true),
            "── run 1 ──\n[stdout] a\n[stderr] b\n── run 2 ──\n[stdout] c\n"
        );
        assert_eq!(
            render(&lines[..2], false),
            "a\nb\n",
            "one run: no separator"
        );
        assert_eq!(render(&[line(1, 3, Stream::Pty, "p")], true), "p\n");
    }

    #[test]
    fn arguments_are_checked_and_named_in_errors() {
        let port = |v: Value| port_arg(&json!({ "port": v }));
        assert_eq!(port(json!(5173)), Ok(Some("127.0.0.1:5173".into())));
        assert_eq!(port(json!("5173")), Ok(Some("127.0.0.1:5173".into())));
        assert_eq!(port(json!("[::1]:80")), Ok(Some("[::1]:80".into())));
        assert!(port(json!(0)).is_err());
        assert!(port(json!("host")).unwrap_err().contains("\"host\""));
        let timeout = |v: Value| timeout_arg(&json!({ "timeout": v }), DEFAULT_WAIT);
        assert_eq!(timeout(json!(1.5)), Ok(Duration::from_millis(1500)));
        assert_eq!(timeout(json!("2m")), Ok(Duration::from_secs(120)));
        assert!(timeout(json!(301)).unwrap_err().contains("maximum, 300s"));
        assert!(since_arg(&json!({"since": "5m"})).unwrap().is_some());
        assert!(
            since_arg(&json!({"since": "2025-01-31T12:00:00Z"}))
                .unwrap()
                .is_some()
        );
        assert!(
            regex_arg(&json!({"grep": "a("}), "grep")
                .unwrap_err()
                .starts_with("`grep` \"a(\"")
        );
        assert_eq!(
            command_arg(&json!({"command": ["cargo", "watch"]})),
            Ok(Some(ProcessCommand::Argv(vec![
                "cargo".into(),
                "watch".into()
            ])))
        );
        assert!(command_arg(&json!({"command": []})).is_err());
        assert!(
            env_arg(&json!({"env": {"A": 1}}))
                .unwrap_err()
                .contains("env.A")
        );
        assert_eq!(secs(Duration::from_millis(500)), "0.5s");
        assert_eq!(secs(Duration::from_secs(30)), "30s");
    }
}
