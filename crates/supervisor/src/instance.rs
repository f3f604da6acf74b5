//! One run of a supervised program: the child, its process group, its output drains and
//! its registration with the guard and the reaper.
//!
//! An [`Instance`] is the only owner of these. Everything that ends a run goes through
//! it — [`Instance::stop`] (polite, then firm), [`Instance::kill`] (at once) — and every
//! way a run ends, including the instance simply being dropped, kills the whole group,
//! unregisters it and ends what escaped it (see [`crate::reaper`]). Nothing else clears
//! a pid: the pid lives here and in the [`Phase`](crate::Phase) that names this run.

use crate::spawn::{self, SpawnError, SpawnSpec};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

/// How long, after stdin is closed, a program gets to exit by itself before SIGTERM.
const STDIN_GRACE: Duration = Duration::from_millis(1000);
/// How long to wait for the output drains to reach EOF after the child died, so the
/// death's event carries the last lines.
pub(crate) const DRAIN_SETTLE: Duration = Duration::from_millis(500);

/// What keeps a run's processes contained however Corral ends (see
/// [`SupervisorOptions::contain`](crate::SupervisorOptions::contain)).
#[derive(Clone, Default)]
pub(crate) struct Containment {
    pub guard: Option<Arc<crate::guard::Guard>>,
    pub reaper: Option<Arc<crate::reaper::Reaper>>,
}

/// A spawned child and everything that belongs to its run.
pub(crate) struct Instance {
    child: Child,
    pid: u32,
    started: Instant,
    /// The exit status once reaped (`None` inside: it could not be read).
    exit: Option<Option<ExitStatus>>,
    /// Output drains; each ends at EOF of its pipe, awaited (bounded) after the death so
    /// the logs and rings hold the run's last words.
    drains: Vec<JoinHandle<()>>,
    /// Other tasks of the run (a writer to its stdin): ended with it.
    tasks: Vec<JoinHandle<()>>,
    contain: Containment,
    /// The unit's tag in the reaper (the `CORRAL_SERVER` value of its processes).
    tag: String,
}

impl Instance {
    /// Spawns `spec` in its own process group, registered with the guard. `tag` names
    /// the unit to the reaper.
    pub(crate) fn spawn(
        spec: &SpawnSpec<'_>,
        tag: &str,
        contain: &Containment,
    ) -> Result<Instance, SpawnError> {
        let child = spawn::spawn(spec, tag)?;
        Ok(Self::adopt(child, tag, contain))
    }

    /// Takes over a child spawned elsewhere (a pseudo-terminal spawn) the same way.
    pub(crate) fn adopt(child: Child, tag: &str, contain: &Containment) -> Instance {
        let pid = child.id().unwrap_or(0);
        if let Some(guard) = &contain.guard {
            guard.register(pid);
        }
        Instance {
            child,
            pid,
            started: Instant::now(),
            exit: None,
            drains: Vec::new(),
            tasks: Vec::new(),
            contain: contain.clone(),
            tag: tag.to_owned(),
        }
    }

    /// The child's pid, which is also its process group.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// How long ago it was spawned.
    pub(crate) fn age(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    pub(crate) fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    pub(crate) fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Runs `drain` (reading one of the child's outputs to EOF) for the life of the run.
    pub(crate) fn drain(&mut self, drain: impl Future<Output = ()> + Send + 'static) {
        self.drains.push(tokio::spawn(drain));
    }

    /// Runs `task` (one that serves the run, like the writer to its stdin) until the run
    /// ends.
    pub(crate) fn task(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.push(tokio::spawn(task));
    }

    /// Waits for the child to exit and reaps it. Cancel-safe, and idempotent: once
    /// reaped, it returns the same status at once.
    pub(crate) async fn exited(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.exit {
            return status;
        }
        let status = self.child.wait().await.ok();
        self.exit = Some(status);
        status
    }

    /// [`exited`](Self::exited), waiting at most `limit`.
    pub(crate) async fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(limit, self.exited())
            .await
            .ok()
            .flatten()
    }

    /// SIGKILLs the whole group at once: a broken, wedged or dead run. The leader's
    /// children must not outlive it.
    pub(crate) fn kill(&self) {
        spawn::signal_group(self.pid, libc::SIGKILL);
    }

    /// Kills the group, reaps the leader and lets the drains catch up.
    pub(crate) async fn kill_and_reap(&mut self) -> Option<ExitStatus> {
        self.kill();
        let status = self.exited().await;
        self.settle().await;
        status
    }

    /// The polite stop: (when `stdin_closed`, a moment to exit on its own) → SIGTERM to
    /// the group → `grace` → SIGKILL to the group → reap; then the drains catch up.
    pub(crate) async fn stop(&mut self, grace: Duration, stdin_closed: bool) {
        let gone = stdin_closed
            && tokio::time::timeout(STDIN_GRACE.min(grace), self.exited())
                .await
                .is_ok();
        if !gone {
            spawn::signal_group(self.pid, libc::SIGTERM);
            if tokio::time::timeout(grace, self.exited()).await.is_err() {
                self.kill();
                self.exited().await;
            }
        }
        // The leader is gone; what it left in its group goes with it.
        self.kill();
        self.settle().await;
    }

    /// Waits (bounded) for every drain to reach EOF. A drain still reading then (a pipe
    /// held open by a process that left the group) is ended: the run is over.
    pub(crate) async fn settle(&mut self) {
        let all = async {
            for d in &mut self.drains {
                let _ = d.await;
            }
        };
        let _ = tokio::time::timeout(DRAIN_SETTLE, all).await;
        for d in self.drains.drain(..) {
            d.abort();
        }
    }
}

impl Drop for Instance {
    /// However the run ended: the group is killed (a no-op after a stop), the guard
    /// forgets it, and what escaped it is ended. The leader itself is reaped by tokio
    /// (`kill_on_drop`) if nobody waited for it.
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.kill();
        }
        for t in self.drains.iter().chain(&self.tasks) {
            t.abort();
        }
        if let Some(guard) = &self.contain.guard {
            guard.unregister(self.pid);
        }
        spawn::forget_spawned(self.pid);
        if let Some(reaper) = &self.contain.reaper {
            reaper.server_ended(&self.tag);
        }
    }
}
