//! A spawned child dies when the supervisor dies, however it dies.
//!
//! Two mechanisms share the promise. The [guard](crate::guard) (a watchdog process that
//! reads EOF on a pipe when we die and SIGKILLs every registered process group) works the
//! same on every Unix. On Linux, each child also gets `PR_SET_PDEATHSIG`, which the kernel
//! delivers itself, so a child dies with us even if the guard was killed first.

/// Set up, in a child between `fork` and `exec`, that it dies with `parent` (the pid of
/// the process that forked it).
///
/// **Linux**: `PR_SET_PDEATHSIG = signal`: the kernel sends `signal` when the forking
/// *thread* ends, so it holds even if the guard is gone; then a check that `parent` is
/// still our parent (it may have died between `fork` and `prctl`, when no signal would
/// come), and if not, the child kills itself.
///
/// **macOS**: there is no parent-death signal, and a kqueue (for an `EVFILT_PROC`/
/// `NOTE_EXIT` watch) is not inherited by a child, so a child alone cannot watch its
/// parent. Only the check
/// that `parent` is still alive at fork time is done here; the guard's process-group kill
/// is the mechanism, and a guard that dies is started again (`Guard::revive`). A child is
/// left behind only if Corral is killed between the guard's death and its replacement
/// (README.md, SECURITY.md).
///
/// # Safety
/// Call only between `fork` and `exec` (a `pre_exec` closure): it calls only
/// async-signal-safe functions (`prctl`, `getppid`, `getpid`, `kill`).
pub unsafe fn die_with_parent(parent: libc::pid_t, signal: libc::c_int) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_PDEATHSIG takes an integer argument only.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: getppid, getpid and kill are async-signal-safe.
    unsafe {
        if libc::getppid() != parent {
            libc::kill(libc::getpid(), signal);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = signal;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_of_a_live_parent_is_set_up() {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        let mut cmd = std::process::Command::new("true");
        // SAFETY: die_with_parent is async-signal-safe (see its docs).
        unsafe {
            cmd.pre_exec(move || die_with_parent(parent, libc::SIGKILL));
        }
        let status = cmd.status().expect("spawn true");
        assert!(status.success(), "{status:?}");
    }

    #[test]
    fn a_child_whose_parent_is_not_the_one_named_kills_itself() {
        use std::os::unix::process::CommandExt;
        use std::os::unix::process::ExitStatusExt;
        // pid 1 is never the test's own pid, so the check sees a "dead" parent.
        let mut cmd = std::process::Command::new("true");
        // SAFETY: die_with_parent is async-signal-safe (see its docs).
        unsafe {
            cmd.pre_exec(|| die_with_parent(1, libc::SIGKILL));
        }
        let status = cmd.status().expect("spawn true");
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
}
