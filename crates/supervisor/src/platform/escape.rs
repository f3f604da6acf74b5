//! Finding the processes that left their server's process group: the candidates the
//! [reaper](crate::reaper) judges at each scan.
//!
//! Stop signals and the guard reach a server's process group. A helper that daemonized
//! (fork, `setsid`, fork again, exit) is outside it, and its parent is gone.
//!
//! **Linux**: Corral is the subreaper (`PR_SET_CHILD_SUBREAPER`): such an orphan is
//! reparented to Corral instead of to init, so the candidates are Corral's own children
//! (`/proc`), and Corral reaps them when they die. Whatever a process does, it cannot
//! leave this.
//!
//! **macOS** has no subreaper: an orphan goes to launchd. Every child of Corral carries
//! [`MARKER`] in its environment, a value this Corral alone hands out, and descendants
//! inherit it; the candidates are the processes of Corral's user that carry it (libproc
//! lists them, `KERN_PROCARGS2` gives their environment), wherever they were
//! reparented. A process that starts its children with an environment of its own making
//! (`env -i`) drops the marker, and what it starts so escapes. launchd reaps them.

use crate::platform::procs::{self, Proc};

/// The environment variable naming the Corral a process descends from (macOS).
pub const MARKER: &str = "CORRAL_SUPERVISOR";

/// Set up what finding escaped processes needs: on Linux, becoming the subreaper; on
/// macOS nothing (the marker is in every child's environment from [`marker`]).
pub fn prepare() -> std::io::Result<()> {
    match marker() {
        Some(_) => Ok(()),
        None => become_subreaper(),
    }
}

/// Make this process the reaper of its orphaned descendants.
///
/// **Linux**: `PR_SET_CHILD_SUBREAPER`: a descendant whose parent dies is reparented to
/// us instead of to init. **macOS**: [`std::io::ErrorKind::Unsupported`] (see the
/// module docs for what stands in for it there).
pub fn become_subreaper() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer argument only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this OS has no subreaper (PR_SET_CHILD_SUBREAPER is Linux's)",
        ))
    }
}

/// The variable every child of this process gets (`NAME`, value), where the OS needs
/// one to find escaped processes: macOS's [`MARKER`] with this process's own value;
/// none on Linux.
pub fn marker() -> Option<(&'static str, &'static str)> {
    #[cfg(target_os = "macos")]
    {
        Some((MARKER, token()))
    }
    #[cfg(not(target_os = "macos"))]
    {
        None
    }
}

/// This process's marker value: its pid and 64 random bits, so that one Corral's
/// descendants are never another's (nor a past Corral's of the same pid).
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
fn token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let mut random = [0u8; 8];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random));
        if read.is_err() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            random = (now.as_nanos() as u64).to_ne_bytes();
        }
        format!("{}-{:016x}", std::process::id(), u64::from_ne_bytes(random))
    })
}

/// The processes that may have escaped from this process (`me`): they are judged by
/// [`crate::reaper`], which skips those it spawned itself and those still in a group
/// of theirs.
pub fn candidates(me: u32) -> Vec<Proc> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let all = procs::of_user(uid);
    match marker() {
        None => all.into_iter().filter(|p| p.ppid == me).collect(),
        Some((name, value)) => {
            // What started before us is not our descendant: its environment is not read.
            let since = procs::info(me).map_or(0, |p| p.started);
            all.into_iter()
                .filter(|p| p.pid != me && p.started >= since && marked(p, name, value))
                .collect()
        }
    }
}

/// Whether `p` carries `name=value`, remembered by pid and start time: a process's
/// starting environment never changes, so each process's is read once.
fn marked(p: &Proc, name: &str, value: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static SEEN: Mutex<Option<HashMap<(u32, u64), bool>>> = Mutex::new(None);
    let key = (p.pid, p.started);
    if let Some(known) = SEEN.lock().unwrap().as_ref().and_then(|m| m.get(&key)) {
        return *known;
    }
    // Not readable now (exiting, say): not remembered, asked again at the next scan.
    // Empty: a process in the middle of its exec (Linux sets the environment's place
    // after the exec lets the parent go on), not remembered either.
    let Some(env) = procs::environ(p.pid).filter(|e| !e.is_empty()) else {
        return false;
    };
    let ours = procs::env_lookup(&env, name).as_deref() == Some(value);
    let mut seen = SEEN.lock().unwrap();
    let seen = seen.get_or_insert_with(HashMap::new);
    // Forget the dead now and then, so the memory stays the size of the process table.
    if seen.len() > 4096 {
        seen.retain(|(pid, started), _| procs::info(*pid).is_some_and(|q| q.started == *started));
    }
    seen.insert(key, ours);
    ours
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn linux_makes_us_the_subreaper() {
        become_subreaper().expect("PR_SET_CHILD_SUBREAPER");
        let mut on: libc::c_int = 0;
        // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
        let rc = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut on as *mut libc::c_int) };
        assert_eq!((rc, on), (0, 1));
    }

    #[test]
    fn tokens_are_this_process_and_stable() {
        let t = token();
        assert!(t.starts_with(&format!("{}-", std::process::id())), "{t}");
        assert_eq!(t.len(), std::process::id().to_string().len() + 17);
        assert_eq!(token(), t);
    }

    /// A `sleep` with `CORRAL_ESCAPE_TEST=value`, once its environment is readable.
    fn sleeper(value: &str) -> (std::process::Child, Proc) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .env("CORRAL_ESCAPE_TEST", value)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while procs::env_var(child.id(), "CORRAL_ESCAPE_TEST").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "environment never readable"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let p = procs::info(child.id()).unwrap();
        (child, p)
    }

    #[test]
    fn a_marked_process_is_known_by_its_environment_once() {
        let (mut mine, p) = sleeper("mine");
        let (mut theirs, q) = sleeper("theirs");
        assert!(marked(&p, "CORRAL_ESCAPE_TEST", "mine"));
        assert!(!marked(&q, "CORRAL_ESCAPE_TEST", "mine"));
        for child in [&mut mine, &mut theirs] {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Remembered: the environment is not read again (the processes are gone now).
        assert!(marked(&p, "CORRAL_ESCAPE_TEST", "mine"));
        assert!(!marked(&q, "CORRAL_ESCAPE_TEST", "mine"));
        // A new process of that pid is another.
        let reused = Proc {
            started: p.started + 1,
            ..p
        };
        assert!(!marked(&reused, "CORRAL_ESCAPE_TEST", "mine"));
    }
}
