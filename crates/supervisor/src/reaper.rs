//! Processes that escape their server's process group.
//!
//! Stop signals and the [`guard`](crate::guard) reach a server's process group. A server
//! that daemonizes a helper — fork, `setsid`, fork again, exit — puts it outside that
//! group, and without more it would outlive `stop`, `down` and even a SIGKILL of Corral.
//! [`platform::escape`] finds the candidates (on Linux the orphans reparented to us as
//! the subreaper, on macOS the processes carrying our marker in their environment); the
//! [`Reaper`] judges them ([`judge`]: not one we spawned, not in one of our groups),
//! tells which server each came from by the `CORRAL_SERVER` their environment inherited
//! (set on every server by [`crate::spawn`]), registers their groups with the guard (so
//! they die with us, however we die), ends them when their server's run ends, ends
//! every one at shutdown, and reaps those that are our children.
//!
//! It scans on every SIGCHLD (a child of ours changed state: maybe an escaped process
//! died and must be reaped), when a server's run ends, and every [`SCAN_EVERY`]
//! (reparenting itself sends no signal).

use crate::guard::Guard;
use corral_events::{Kind, Source};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the process table is scanned for escaped processes.
pub const SCAN_EVERY: Duration = Duration::from_secs(2);

/// The environment variable naming the server a process was started for.
pub const SERVER_ENV: &str = "CORRAL_SERVER";

use crate::platform::{self, procs::Proc};

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
    /// [`SCAN_EVERY`] until dropped. Call [`platform::escape::prepare`] first.
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
                reaper.revive_guard();
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

    /// Starts the guard again when it died (see [`Guard::revive`]); when it cannot, says
    /// why on the bus, once.
    fn revive_guard(&self) {
        if let Some(Err(e)) = self.guard.as_ref().and_then(|g| g.revive()) {
            self.bus.emit(
                corral_events::Event::new(Kind::DaemonContainmentFailed, Source::Corral).with(
                    "reason",
                    format!(
                        "the guard process died and cannot be started again ({e}): servers' own children may outlive a killed corral"
                    ),
                ),
            );
        }
    }

    /// Finds new escaped processes and reaps dead ones.
    fn scan(&self) {
        let me = std::process::id();
        let _spawning = crate::spawn::SPAWNING.lock().unwrap();
        let mut escaped = self.escaped.lock().unwrap();
        let mut alive = Vec::new();
        for p in platform::escape::candidates(me) {
            let known = escaped.contains_key(&p.pid);
            match judge(&p, me, known, crate::spawn::is_ours) {
                Verdict::Ours => continue,
                verdict @ (Verdict::Reap | Verdict::Gone) => {
                    if verdict == Verdict::Reap {
                        let mut status = 0;
                        // SAFETY: waitpid on a specific pid that is our child and that no
                        // other part of this process waits for (we did not spawn it).
                        unsafe {
                            libc::waitpid(p.pid as libc::pid_t, &mut status, libc::WNOHANG);
                        }
                    }
                    if let Some(e) = escaped.remove(&p.pid)
                        && let Some(guard) = &self.guard
                    {
                        guard.unregister(e.pgid);
                    }
                    continue;
                }
                Verdict::Escaped => {}
            }
            alive.push(p.pid);
            escaped.entry(p.pid).or_insert_with(|| self.found(&p));
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

    /// A newly escaped process: its group goes to the guard, and it is announced.
    fn found(&self, p: &Proc) -> Escaped {
        // The group is its own (setsid) or the one it was left in; killing the group
        // reaches whatever it started in turn.
        let pgid = if p.pgid > 1 { p.pgid } else { p.pid };
        if let Some(guard) = &self.guard {
            guard.register(pgid);
        }
        let server = platform::procs::env_var(p.pid, SERVER_ENV);
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
                .with("pid", p.pid)
                .with("pgid", pgid)
                .with("reason", reason),
        );
        Escaped { server, pgid }
    }
}

/// What a scan makes of one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// One we spawned ourselves, or still in the group of one: the group's signals reach
    /// it, so it has escaped nothing.
    Ours,
    /// Dead and our child (reparented to us): to be reaped, and forgotten.
    Reap,
    /// Dead and another's child (launchd's): forgotten.
    Gone,
    /// Out of every group of ours, alive.
    Escaped,
}

/// The verdict on candidate `p` of this process `me`; `known`: found escaped before;
/// `spawned`: whether a pid is a child we spawned (whose pid is its group's id).
fn judge(p: &Proc, me: u32, known: bool, spawned: impl Fn(u32) -> bool) -> Verdict {
    if spawned(p.pid) {
        return Verdict::Ours;
    }
    if p.zombie {
        return if p.ppid == me {
            Verdict::Reap
        } else {
            Verdict::Gone
        };
    }
    // Orphaned but still in a group of ours (its parent exited: a reloader's worker, a
    // shell's child while the unit restarts). Once found escaped it stays so: a process
    // that joined a group of ours after leaving one is still not that unit's.
    if !known && spawned(p.pgid) {
        return Verdict::Ours;
    }
    Verdict::Escaped
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.end_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 100;

    fn proc(pid: u32, ppid: u32, pgid: u32, zombie: bool) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            zombie,
            started: 1,
        }
    }

    /// We spawned 200 (a server, leader of group 200) and 300.
    fn spawned(pid: u32) -> bool {
        matches!(pid, 200 | 300)
    }

    #[test]
    fn our_own_children_and_their_groups_have_not_escaped() {
        assert_eq!(
            judge(&proc(200, ME, 200, false), ME, false, spawned),
            Verdict::Ours
        );
        // A dead server is its actor's to reap, not the reaper's.
        assert_eq!(
            judge(&proc(300, ME, 300, true), ME, false, spawned),
            Verdict::Ours
        );
        // A worker whose reloader died, reparented to us, still in the server's group.
        assert_eq!(
            judge(&proc(201, ME, 200, false), ME, false, spawned),
            Verdict::Ours
        );
        // macOS: a descendant with our marker still in the group, wherever its parent.
        assert_eq!(
            judge(&proc(202, 1, 200, false), ME, false, spawned),
            Verdict::Ours
        );
    }

    #[test]
    fn a_process_out_of_every_group_of_ours_has_escaped() {
        // Linux: daemonized with setsid, reparented to us as the subreaper.
        assert_eq!(
            judge(&proc(210, ME, 210, false), ME, false, spawned),
            Verdict::Escaped
        );
        // macOS: the same, reparented to launchd, found by its marker.
        assert_eq!(
            judge(&proc(211, 1, 211, false), ME, false, spawned),
            Verdict::Escaped
        );
        // Left in a group that was never ours.
        assert_eq!(
            judge(&proc(212, 1, 50, false), ME, false, spawned),
            Verdict::Escaped
        );
        // Found escaped, then moved into a group of ours: still escaped.
        assert_eq!(
            judge(&proc(213, ME, 200, false), ME, true, spawned),
            Verdict::Escaped
        );
    }

    #[test]
    fn the_dead_are_reaped_when_ours_and_forgotten_otherwise() {
        assert_eq!(
            judge(&proc(220, ME, 220, true), ME, true, spawned),
            Verdict::Reap
        );
        assert_eq!(
            judge(&proc(221, ME, 200, true), ME, false, spawned),
            Verdict::Reap
        );
        assert_eq!(
            judge(&proc(222, 1, 222, true), ME, true, spawned),
            Verdict::Gone
        );
    }
}
