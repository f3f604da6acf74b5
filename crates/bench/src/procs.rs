//! Child processes that are always stopped: each one leads its own process group, which
//! is registered until the child is reaped, so that a watchdog, a panic or a SIGINT /
//! SIGTERM / SIGHUP to the bench kills every group it started (grandchildren included:
//! a Node or Python gateway's servers run in its group). If the bench is SIGKILLed, the
//! direct children still get SIGTERM through `PR_SET_PDEATHSIG`.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// Process groups started by the bench and not yet reaped (0: a free slot).
static GROUPS: [AtomicI32; 256] = [const { AtomicI32::new(0) }; 256];

/// Remembers a process group for [`kill_all`].
pub fn register(pgid: i32) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, pgid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
    eprintln!(
        "corral-bench: more than {} process groups at once",
        GROUPS.len()
    );
}

/// Forgets a process group (it has been stopped).
pub fn unregister(pgid: i32) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(pgid, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// Sends `sig` to every registered process group. Async-signal-safe (atomics and
/// `kill` only), so the signal handler calls it too.
pub fn kill_all(sig: libc::c_int) {
    for slot in &GROUPS {
        let pgid = slot.load(Ordering::SeqCst);
        if pgid > 0 {
            // SAFETY: kill has no memory preconditions.
            unsafe {
                libc::kill(-pgid, sig);
            }
        }
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    kill_all(libc::SIGKILL);
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + sig) }
}

/// Installs, once: a panic hook and SIGINT / SIGTERM / SIGHUP handlers that kill every
/// registered process group, and a watchdog that does the same and exits after `limit`.
pub fn install_cleanup(limit: Duration, what: &'static str) {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("corral-bench: panic; killing every process group the bench started");
        kill_all(libc::SIGKILL);
    }));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only touches atomics and calls kill and _exit.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("corral-bench: the {what} benchmark did not finish within {limit:?}; giving up");
        kill_all(libc::SIGKILL);
        std::process::exit(1);
    });
}

/// A child process in its own process group that is always stopped: `stop` (or drop)
/// waits `graceful` for it to exit on its own, then sends SIGTERM to its group and waits
/// 5 s, then SIGKILL; once the leader is reaped, whatever is left of its group is killed.
pub struct Proc {
    pub child: Child,
    graceful: Duration,
    done: bool,
}

impl Proc {
    /// Spawns `cmd` as the leader of a new process group. Call from a thread that lives
    /// as long as the child: `PR_SET_PDEATHSIG` fires when the spawning thread exits.
    pub fn spawn(cmd: &mut Command, graceful: Duration) -> Result<Proc, String> {
        // SAFETY: setpgid and prctl are async-signal-safe and touch no memory of the
        // parent.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                // If the bench dies (or the watchdog ends it), the child gets SIGTERM.
                // (Linux only; the benchmark's figures are Linux's.)
                #[cfg(target_os = "linux")]
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        register(child.id() as i32);
        Ok(Proc {
            child,
            graceful,
            done: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (it is reaped then).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let pgid = self.pid() as i32;
        if !self.exits_within(self.graceful) {
            signal_group(pgid, libc::SIGTERM);
            if !self.exits_within(Duration::from_secs(5)) {
                eprintln!("corral-bench: pid {pgid} ignored SIGTERM for 5 s; sending SIGKILL");
                signal_group(pgid, libc::SIGKILL);
                let _ = self.child.wait();
            }
        }
        // Whatever the leader left behind in its group (a server it did not stop).
        signal_group(pgid, libc::SIGKILL);
        unregister(pgid);
    }

    fn exits_within(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return true,
                Ok(None) if Instant::now() >= deadline => return false,
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends `sig` to process group `pgid`.
pub fn signal_group(pgid: i32, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Whether a process (or process group leader) `pid` still exists.
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}
