//! Processes that escape their server's process group.
//!
//! Stop signals and the [`guard`](crate::guard) reach a server's process group. A server
//! that daemonizes a helper — fork, `setsid`, fork again, exit — puts it outside that
//! group, and without more it would outlive `stop`, `down` and even a SIGKILL of Corral,
//! orphaned to init. With [`become_subreaper`], such orphans are reparented to us
//! instead. The [`Reaper`] finds them (processes whose parent is us that we did not
//! spawn), tells which server they came from by the `CORRAL_SERVER` their environment
//! inherited (set on every server by [`crate::spawn`]), registers their groups with the
//! guard (so they die with us, however we die), ends them when their server's run ends,
//! ends every one at shutdown, and reaps them.
//!
//! It scans `/proc` on every SIGCHLD (a child of ours changed state: maybe an escaped
//! process died and must be reaped), when a server's run ends, and every
//! [`SCAN_EVERY`] (reparenting itself sends no signal).

use crate::guard::Guard;
use corral_events::{Kind, Source};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often `/proc` is scanned for processes reparented to us.
pub const SCAN_EVERY: Duration = Duration::from_secs(2);

/// The environment variable naming the server a process was started for.
pub const SERVER_ENV: &str = "CORRAL_SERVER";

pub use crate::platform::subreaper::become_subreaper;

/// One escaped process.
#[derive(Debug, Clone)]
struct Escaped {
    /// The server it came from, when its environment says.
    server: Option<String>,
    /// Its process group (killed whole).
    pgid: u32,
}

/// Finds, contains and ends escaped processes. See the module docs.
#[derive(Debug)]
pub struct Reaper {
    guard: Option<Arc<Guard>>,
    bus: corral_events::EventBus,
    escaped: Mutex<BTreeMap<u32, Escaped>>,
}

impl Reaper {
    /// A reaper registering what it finds with `guard`, scanning on SIGCHLD and every
    /// [`SCAN_EVERY`] until dropped. Call [`become_subreaper`] first.
    /// Each process found is reported as a `server.escaped` event on `bus`.
    pub fn start(guard: Option<Arc<Guard>>, bus: corral_events::EventBus) -> Arc<Reaper> {
        let reaper = Arc::new(Reaper {
            guard,
            bus,
            escaped: Mutex::new(BTreeMap::new()),
        });
        let weak = Arc::downgrade(&reaper);
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let mut chld = signal(SignalKind::child()).ok();
            let mut tick = tokio::time::interval(SCAN_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    Some(()) = async { chld.as_mut()?.recv().await } => {}
                }
                let Some(reaper) = weak.upgrade() else { return };
                reaper.scan();
            }
        });
        reaper
    }

    /// A run of `server` ended: its escaped processes end too (SIGKILL to their groups;
    /// they already outlived their server's graceful stop).
    pub fn server_ended(&self, server: &str) {
        self.scan();
        self.kill(|e| e.server.as_deref() == Some(server));
    }

    /// Ends every escaped process (shutdown).
    pub fn end_all(&self) {
        self.scan();
        self.kill(|_| true);
    }

    /// Kills the groups of the escaped processes `which` picks; the SIGCHLD of each
    /// death brings the scan that reaps it.
    fn kill(&self, which: impl Fn(&Escaped) -> bool) {
        let escaped = self.escaped.lock().unwrap();
        for e in escaped.values().filter(|e| which(e)) {
            crate::spawn::signal_group(e.pgid, libc::SIGKILL);
        }
    }

    /// Finds new escaped processes and reaps dead ones.
    fn scan(&self) {
        let me = std::process::id();
        let _spawning = crate::spawn::SPAWNING.lock().unwrap();
        let mut escaped = self.escaped.lock().unwrap();
        let mut alive = Vec::new();
        for (pid, stat) in children_of(me) {
            if crate::spawn::is_ours(pid) {
                continue;
            }
            if stat.zombie {
                let mut status = 0;
                // SAFETY: waitpid on a specific pid that is our child and that no other
                // part of this process waits for (it was not spawned by us).
                unsafe {
                    libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG);
                }
                if let Some(e) = escaped.remove(&pid)
                    && let Some(guard) = &self.guard
                {
                    guard.unregister(e.pgid);
                }
                continue;
            }
            // Orphaned but still in a group of ours (its parent exited: a reloader's
            // worker, a shell's child while the unit restarts): the group's signals
            // reach it, so it has escaped nothing.
            if !escaped.contains_key(&pid) && crate::spawn::is_ours(stat.pgid) {
                continue;
            }
            alive.push(pid);
            escaped.entry(pid).or_insert_with(|| {
                // The group is its own (setsid) or the one it was left in; killing the
                // group reaches whatever it started in turn.
                let pgid = if stat.pgid > 1 { stat.pgid } else { pid };
                if let Some(guard) = &self.guard {
                    guard.register(pgid);
                }
                let server = server_of(pid);
                // A dev process's tag is `process:NAME`; a server's is its bare name.
                let source = match server.as_deref() {
                    None => Source::Corral,
                    Some(tag) => match tag.strip_prefix("process:") {
                        Some(name) => Source::Process(name.to_owned()),
                        None => Source::Server(tag.to_owned()),
                    },
                };
                let reason = match &source {
                    Source::Process(_) => {
                        "left its process's process group; it is stopped with the process"
                    }
                    _ => "left its server's process group; it is stopped with the server",
                };
                self.bus.emit(
                    corral_events::Event::new(Kind::ServerEscaped, source)
                        .with("pid", pid)
                        .with("pgid", pgid)
                        .with("reason", reason),
                );
                Escaped { server, pgid }
            });
        }
        // Gone without our reaping them (another reaper, or a race): forget them.
        escaped.retain(|pid, e| {
            let keep = alive.contains(pid);
            if !keep && let Some(guard) = &self.guard {
                guard.unregister(e.pgid);
            }
            keep
        });
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.end_all();
    }
}

/// What `/proc/PID/stat` says of a process that matters here.
struct Stat {
    zombie: bool,
    pgid: u32,
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<(u32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After "(comm)": state, ppid, pgrp, …; comm may hold spaces and parentheses.
        let mut fields = stat
            .rsplit_once(')')
            .map_or("", |(_, r)| r)
            .split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().and_then(|f| f.parse::<u32>().ok());
        let pgid = fields
            .next()
            .and_then(|f| f.parse::<u32>().ok())
            .unwrap_or(0);
        if ppid == Some(parent) {
            out.push((
                pid,
                Stat {
                    zombie: state == "Z",
                    pgid,
                },
            ));
        }
    }
    out
}

/// The server named in `pid`'s environment ([`SERVER_ENV`]), if readable.
fn server_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{SERVER_ENV}=");
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}
