//! Shared test harness: the fixture server, configs, an event recorder and
//! deadline-bounded waits. Nothing here sleeps except while polling a condition.
#![allow(dead_code)]

pub mod port;

use corral_config::{CrashLoop, RestartPolicy, ServerConfig, ToolFilter, Transport};
use corral_events::{Event, EventBus};
use corral_supervisor::{Supervisor, SupervisorOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Generous: the suite must pass on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The fixture binary, built by `cargo build --bins` (the test script does it).
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/corral-fixture
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join("corral-fixture");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// A unique empty directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "corral-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fixture server config with short timeouts suitable for tests.
pub fn fixture_server(name: &str, flags: &[&str]) -> ServerConfig {
    ServerConfig {
        name: name.to_owned(),
        transport: Transport::Stdio {
            command: fixture().to_string_lossy().into_owned(),
            args: flags.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            cwd: std::env::temp_dir(),
        },
        startup_timeout: Duration::from_secs(10),
        call_timeout: Duration::from_secs(10),
        stop_grace: Duration::from_millis(500),
        restart: RestartPolicy::OnFailure,
        max_concurrency: None,
        tools: ToolFilter::default(),
        quiet: true,
        crash_loop: CrashLoop {
            max: 5,
            window: Duration::from_secs(60),
        },
        secrets: Vec::new(),
    }
}

/// A running supervisor plus a recorder of every event it emitted.
pub struct Harness {
    pub sup: Option<Supervisor>,
    pub events: broadcast::Receiver<Event>,
    pub seen: Vec<Event>,
    /// Indices into `seen` already returned by `wait_event`.
    returned: std::collections::HashSet<usize>,
    pub dir: TempDir,
}

impl Harness {
    pub fn start(servers: Vec<ServerConfig>) -> Harness {
        become_subreaper();
        let dir = TempDir::new("sup");
        let bus = EventBus::new(100_000);
        let events = bus.subscribe();
        let opts = SupervisorOptions::new(bus, dir.path().join("logs"));
        Harness {
            sup: Some(Supervisor::start(servers, &opts)),
            events,
            seen: Vec::new(),
            returned: Default::default(),
            dir,
        }
    }

    /// A supervisor for the servers and processes of a `corral.toml` (relative paths
    /// resolve in the harness's directory), with alert scanning on.
    pub fn start_toml(text: &str) -> Harness {
        become_subreaper();
        let dir = TempDir::new("sup");
        let path = dir.path().join("corral.toml");
        let cfg = corral_config::load_str(&path, text, &|_| None).unwrap_or_else(|e| panic!("{e}"));
        let bus = EventBus::new(100_000);
        let events = bus.subscribe();
        let mut opts = SupervisorOptions::new(bus.clone(), dir.path().join("logs"));
        opts.alerts = Some(corral_supervisor::alerts::Alerts::new(&cfg.alerts, bus).unwrap());
        let mut sup = Supervisor::start(cfg.servers.values().cloned(), &opts);
        sup.start_processes(cfg.start_order()).unwrap();
        Harness {
            sup: Some(sup),
            events,
            seen: Vec::new(),
            returned: Default::default(),
            dir,
        }
    }

    pub fn process(&self, name: &str) -> corral_supervisor::ProcessHandle {
        self.sup().processes().get(name).unwrap()
    }

    pub fn sup(&self) -> &Supervisor {
        self.sup.as_ref().unwrap()
    }

    pub fn server(&self, name: &str) -> corral_supervisor::ServerHandle {
        self.sup().get(name).unwrap().clone()
    }

    /// Waits for the next event of `kind` from `server` that no earlier `wait_event`
    /// returned (every event received is recorded in `seen`), at most [`DEADLINE`].
    pub async fn wait_event(&mut self, kind: &str, server: &str) -> Event {
        self.wait_from(kind, &format!("server:{server}")).await
    }

    /// [`Harness::wait_event`] for any source (`process:web`).
    pub async fn wait_from(&mut self, kind: &str, source: &str) -> Event {
        let matches = |ev: &Event| ev.kind == kind && ev.source == source;
        let found = tokio::time::timeout(DEADLINE, async {
            loop {
                let pending = (0..self.seen.len())
                    .find(|i| !self.returned.contains(i) && matches(&self.seen[*i]));
                if let Some(i) = pending {
                    self.returned.insert(i);
                    return self.seen[i].clone();
                }
                let ev = self.events.recv().await.expect("event bus open");
                self.seen.push(ev);
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            panic!(
                "no {kind} event from {source} within {DEADLINE:?}; saw: {:#?}",
                self.seen
                    .iter()
                    .map(|e| (&e.kind, &e.source))
                    .collect::<Vec<_>>()
            )
        })
    }

    /// Collects whatever events are already queued.
    pub fn drain_events(&mut self) {
        while let Ok(ev) = self.events.try_recv() {
            self.seen.push(ev);
        }
    }

    /// How many events of `kind` were seen so far (after draining the queue).
    pub fn count(&mut self, kind: &str) -> usize {
        self.drain_events();
        self.seen.iter().filter(|e| e.kind == kind).count()
    }

    /// Stops everything, then checks that no process of this test's tree survives.
    pub async fn shutdown(mut self) {
        self.sup
            .take()
            .unwrap()
            .shutdown(Duration::from_secs(10))
            .await;
        wait_until("no process of the test's tree survives", || {
            live_children().is_empty()
        })
        .await;
    }
}

/// Makes this test process the reaper of orphaned descendants, so that a grandchild
/// whose parent died is re-parented here and [`live_children`] sees it. (Each test runs
/// in its own process under nextest.)
pub fn become_subreaper() {
    // Linux's PR_SET_CHILD_SUBREAPER; elsewhere unsupported (and these tests are Linux's).
    let _ = corral_supervisor::platform::escape::become_subreaper();
}

/// Live (non-zombie) processes whose parent is this process.
pub fn live_children() -> Vec<u32> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().unwrap_or("");
        if ppid == me && state != "Z" && state != "X" {
            out.push(pid);
        }
    }
    out
}

/// Polls `cond` until it is true, at most `DEADLINE`; panics with `what` otherwise.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // Field 3, after the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Whether a process exists at all (zombies included).
pub fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Reads a pid file written by the fixture's `--pid-file`, waiting for it to appear.
pub async fn read_pid(path: &Path) -> u32 {
    wait_until(&format!("pid file {}", path.display()), || path.exists()).await;
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Text of the first content block of a tool result.
pub fn result_text(raw: &serde_json::value::RawValue) -> String {
    let v: serde_json::Value = serde_json::from_str(raw.get()).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub fn args(json: &str) -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string(json.to_owned()).unwrap()
}
