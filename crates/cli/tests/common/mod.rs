//! Runs the real `corral` binary against configs written into temp dirs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn corral() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corral"))
}

/// The fixture server, built beside `corral` by `cargo build --workspace --bins`.
pub fn fixture() -> PathBuf {
    let path = corral().with_file_name("corral-fixture");
    assert!(
        path.exists(),
        "{} missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// The repository root (for tests/peers and .peers).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The installed peers; a clear failure when `scripts/install-peers.sh` was not run.
pub fn peers() -> PathBuf {
    let p = repo().join(".peers");
    assert!(
        p.join("venv/bin/python").exists() && p.join("node/node_modules").exists(),
        "real peers are not installed: run ./scripts/install-peers.sh (./scripts/test.sh does)"
    );
    p
}

pub struct Project {
    pub dir: PathBuf,
}

impl Project {
    /// A temp project whose corral.toml is `config` with `{fixture}` (and `{corral}`,
    /// `{repo}`) replaced.
    pub fn new(config: &str) -> Project {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "corral-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = Project { dir };
        p.write("corral.toml", config);
        p
    }

    pub fn write(&self, name: &str, text: &str) {
        let text = text
            .replace("{fixture}", &fixture().to_string_lossy())
            .replace("{corral}", &corral().to_string_lossy())
            .replace("{repo}", &repo().to_string_lossy());
        std::fs::write(self.dir.join(name), text).unwrap();
    }

    /// `corral ARGS` in the project. Its user config is [`Project::user_config`] (absent
    /// unless a test writes it), never the developer's own, its OAuth credentials are in
    /// `.test-user/oauth`, never the user's store, and no opt-in to widened access comes
    /// from the environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(corral());
        c.args(args)
            .current_dir(&self.dir)
            .env_remove("CORRAL_CONFIG")
            .env("CORRAL_USER_CONFIG", self.user_config())
            .env("CORRAL_OAUTH_DIR", self.dir.join(".test-user/oauth"))
            .env_remove("CORRAL_ALLOW_WIDENED_ACCESS");
        c
    }

    /// The user config every `corral` of this project reads (see [`Project::cmd`]).
    pub fn user_config(&self) -> PathBuf {
        self.dir.join(".test-user/config.toml")
    }

    /// Writes the user config so this project's corral.toml may widen access (`auth =
    /// "none"`, listen beyond loopback): `[trust] widen_access = [DIR]`, mode 0600.
    pub fn trust_widening(&self) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.user_config();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let dir = self.dir.display().to_string();
        std::fs::write(&path, format!("[trust]\nwiden_access = [{dir:?}]\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// Runs to completion, bounded by [`DEADLINE`].
    /// `corral events --standalone -f --json`: the process and its event lines.
    pub fn follow_events(
        &self,
    ) -> (
        std::process::Child,
        std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    ) {
        use std::io::BufRead;
        let mut child = self
            .cmd(&["events", "--standalone", "-f", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn corral events");
        let lines = std::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        (child, lines)
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_in(&self.dir, args)
    }

    /// [`Project::run`] with `dir` (e.g. a subdirectory) as the working directory.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        let child = self
            .cmd(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(DEADLINE) {
            Ok(out) => Run(out.unwrap()),
            Err(_) => {
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
                panic!("corral {args:?} did not finish within {DEADLINE:?}");
            }
        }
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Stops the project's daemon when a test ends, however it ends.
pub struct Down<'a>(pub &'a Project);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        if self.0.run(&["down"]).code() != 0 {
            // `down` needs a loadable config; a test that broke it still must not leave a
            // daemon behind: SIGTERM the pid the daemon recorded.
            if let Some(pid) = std::fs::read_to_string(self.0.dir.join(".corral/daemon.pid"))
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
    }
}

pub struct Run(pub Output);

impl Run {
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }
}

/// A loopback `IP:PORT` where nothing listens: a port the OS handed out, released at
/// once (never a fixed one: another project's Corral may hold any port).
pub fn closed_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").to_string()
}

/// `corral dashboard --no-browser`: the one-time sign-in link it prints.
pub fn dashboard_link(p: &Project) -> String {
    let run = p.run(&["dashboard", "--no-browser"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run.stdout()
        .lines()
        .find(|l| l.starts_with("http://"))
        .unwrap_or_else(|| panic!("no link in {:?}", run.stdout()))
        .to_owned()
}

/// Server `name`'s row of `corral ps --json` (a daemon must run).
/// `corral ps --json`.
pub fn ps(p: &Project) -> serde_json::Value {
    let r = p.run(&["ps", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap()
}

/// The `ps --json` row of process `name` (`Null` when there is none).
pub fn process(ps: &serde_json::Value, name: &str) -> serde_json::Value {
    ps["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

pub fn ps_row(p: &Project, name: &str) -> serde_json::Value {
    let v = ps(p);
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no server {name} in {v}"))
}

pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_until_within(what, DEADLINE, cond)
}

/// [`wait_until`] with its own deadline (for real dev servers starting on a loaded
/// machine).
pub fn wait_until_within(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < deadline,
            "timed out waiting {deadline:?} for: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// The parent pid of `pid`.
pub fn ppid_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn read_pid(path: &Path) -> u32 {
    wait_until(&format!("pid file {}", path.display()), || path.exists());
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
/// The `name` of each object in a JSON array (a tool list).
pub fn names(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .expect("an array")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect()
}

/// A JSON array of strings.
pub fn strings(list: &serde_json::Value) -> Vec<&str> {
    list.as_array()
        .expect("an array")
        .iter()
        .map(|t| t.as_str().expect("a string"))
        .collect()
}

/// Lines of a child's output, on a channel (so a test can wait with a deadline).
pub fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Every name `corral tools` lists is callable as it is, alone or after its server; a
/// miss suggests the listed spelling. `p` has servers `fx` (the fixture) and `other`
/// (`--tools 2`, `tools.allow = ["tool_*"]`); used standalone (tools_call.rs) and
/// through the daemon (daemon.rs).
pub fn listed_names_round_trip(p: &Project, extra: &[&str]) {
    let call = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(extra);
        p.run(&all)
    };
    let r = call(&["call", "fx__echo", r#"{"text":"alone"}"#]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, "alone\n"), "{r:?}");
    let r = call(&["call", "fx", "fx__echo", r#"{"text":"after its server"}"#]);
    assert_eq!(r.stdout(), "after its server\n", "{r:?}");
    let r = call(&["call", "fx", "echo", r#"{"text":"own name"}"#]);
    assert_eq!(r.stdout(), "own name\n", "{r:?}");
    let r = call(&["call", "fx__getpid"]);
    assert_eq!(r.code(), 0, "no JSON means {{}}: {r:?}");

    let r = call(&["call", "fx__ecko", r#"{"text":"x"}"#]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains(
            "no tool named 'fx__ecko'; did you mean 'fx__echo'? (`corral tools` lists them)"
        ),
        "{r:?}"
    );
    let r = call(&["call", "echo", r#"{"text":"x"}"#]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(r.stderr().contains("did you mean 'fx__echo'?"), "{r:?}");
    let r = call(&["call", "other", "fx__echo"]);
    assert_eq!(r.code(), 2, "{r:?}");
    // The daemon knows whose tool it is; standalone, only `other` was started.
    assert!(
        r.stderr().contains(
            "tool 'fx__echo' belongs to server 'fx', not 'other': `corral call fx__echo`"
        ) || r
            .stderr()
            .contains("server 'other' has no tool named 'fx__echo'"),
        "{r:?}"
    );
    let r = call(&["call", "other", "tool_2"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr().contains(
            "server 'other' has no tool named 'tool_2'; did you mean 'other__tool_0'? (`corral tools other` lists them)"
        ),
        "{r:?}"
    );
    let r = call(&["call", "fx"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr()
            .contains("'fx' is a server, not a tool: `corral call fx TOOL [JSON]`"),
        "{r:?}"
    );
    // Corral's own tools, by their listed names.
    let r = call(&["call", "corral__servers", "--json"]);
    assert_eq!(r.code(), 0, "{r:?}");
    assert!(r.stdout().contains(r#""name":"fx""#), "{r:?}");
}

pub mod http;
pub mod mcp;
#[path = "../../../supervisor/tests/common/port.rs"]
pub mod port;
pub mod raw;

/// Runs a peer script (an SDK client) with `program` (`node`, the venv's python): it
/// must succeed, and its last stdout line is what it saw, as JSON.
pub fn peer_script(
    program: impl AsRef<std::ffi::OsStr>,
    script: &Path,
    args: &[&str],
) -> serde_json::Value {
    let out = Command::new(program)
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}\n{stdout}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{}: {e}: {stdout}", script.display()))
}

/// A request as [`FakeHttp`] saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What [`FakeHttp`] answers: status, headers, body (sent with its length; then the
/// connection closes).
pub type Reply = (u16, Vec<(String, String)>, String);

/// An HTTP server on 127.0.0.1 (a port the OS picks) answering each request with
/// `answer(base URL, request)`, one connection at a time; it records what it was asked.
/// For servers that misbehave on purpose. Its thread ends with the test process.
pub struct FakeHttp {
    pub base: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl FakeHttp {
    pub fn start(answer: impl Fn(&str, &Seen) -> Reply + Send + 'static) -> FakeHttp {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (log, me) = (seen.clone(), base.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let _ = reader.read_line(&mut head);
                let mut headers = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                    }
                }
                let length = headers
                    .iter()
                    .find(|(k, _)| k == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let mut parts = head.split_whitespace();
                let req = Seen {
                    method: parts.next().unwrap_or("").to_owned(),
                    path: parts.next().unwrap_or("").to_owned(),
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                };
                log.lock().unwrap().push(req.clone());
                let (status, headers, text) = answer(&me, &req);
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    text.len()
                );
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                let _ = stream.write_all(out.as_bytes());
                let _ = stream.write_all(text.as_bytes());
            }
        });
        FakeHttp { base, seen }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}
