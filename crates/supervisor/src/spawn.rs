//! Starting a child: command lookup, process group, death signal.
//!
//! Problems that no restart can fix (a command that does not exist, a file that is not
//! executable, a missing working directory) are found here, before `fork`, and reported
//! as [`SpawnError`]s that the server actor treats as permanent: no restart loop.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::process::{Child, Command};

/// The soft open-files limit this process started with, when [`raise_nofile_limit`]
/// raised it (0: not raised). Children get it back.
static ORIGINAL_NOFILE: AtomicU64 = AtomicU64::new(0);

/// Raises this process's soft `RLIMIT_NOFILE` as far as it may go (the hard limit; on
/// macOS at most its per-process cap: [`crate::platform::nofile`]): a daemon holding three
/// pipes per child, every agent's pipes and every HTTP connection must not fail at the
/// common soft limit of 1024. Children are started with the original soft limit, since
/// some programs misbehave above 1024 (`select`). Returns (before, after).
pub fn raise_nofile_limit() -> std::io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let before = lim.rlim_cur;
        if let Some(to) = crate::platform::nofile::raise_target(lim.rlim_cur, lim.rlim_max) {
            lim.rlim_cur = to;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            ORIGINAL_NOFILE.store(before, Ordering::Relaxed);
        }
        Ok((before, lim.rlim_cur))
    }
}

/// Why a child could not be started: permanent for the current config, except
/// [`SpawnError::Resources`] (see [`SpawnError::is_temporary`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum SpawnError {
    #[error("command '{command}' not found in PATH (searched: {path})")]
    NotFound { command: String, path: String },
    #[error("command '{}' is not executable (mode {mode:o}); run `chmod +x` on it or fix `command`", path.display())]
    NotExecutable { path: PathBuf, mode: u32 },
    #[error("command '{}' does not exist (relative commands are resolved against the server's cwd)", path.display())]
    Missing { path: PathBuf },
    #[error("working directory '{}' does not exist; fix `cwd` (it is relative to the config file)", path.display())]
    NoCwd { path: PathBuf },
    #[error("could not start '{command}': {message}")]
    Os { command: String, message: String },
    /// Out of descriptors, processes or memory for now (EMFILE, ENFILE, EAGAIN, ENOMEM).
    #[error("could not start '{command}' for now: {message}; retrying with backoff")]
    Resources { command: String, message: String },
}

impl SpawnError {
    /// Whether waiting may fix it: the machine or this process ran short of something,
    /// which a restart with backoff should retry, never give up on.
    pub fn is_temporary(&self) -> bool {
        matches!(self, SpawnError::Resources { .. })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    /// Merged over the parent's environment.
    pub env: &'a BTreeMap<String, String>,
    pub cwd: &'a Path,
}

/// Finds the executable for `command` the way `execvp` would, but with an error that
/// names what was searched.
pub fn resolve(spec: &SpawnSpec<'_>) -> Result<PathBuf, SpawnError> {
    if !spec.cwd.is_dir() {
        return Err(SpawnError::NoCwd {
            path: spec.cwd.to_owned(),
        });
    }
    if spec.command.contains('/') {
        let path = spec.cwd.join(spec.command);
        return check_executable(&path)
            .and_then(|found| found.ok_or(SpawnError::Missing { path: path.clone() }));
    }
    let path_var: OsString = match spec.env.get("PATH") {
        Some(p) => p.into(),
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    let mut not_executable = None;
    for dir in std::env::split_paths(&path_var) {
        let dir = if dir.as_os_str().is_empty() {
            spec.cwd.to_owned()
        } else {
            dir
        };
        match check_executable(&dir.join(spec.command)) {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => {}
            Err(e) => not_executable = not_executable.or(Some(e)),
        }
    }
    Err(not_executable.unwrap_or_else(|| SpawnError::NotFound {
        command: spec.command.to_owned(),
        path: path_var.to_string_lossy().into_owned(),
    }))
}

/// `Ok(Some)` if `path` is an executable file, `Ok(None)` if it does not exist.
fn check_executable(path: &Path) -> Result<Option<PathBuf>, SpawnError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            let mode = meta.permissions().mode();
            if mode & 0o111 == 0 {
                Err(SpawnError::NotExecutable {
                    path: path.to_owned(),
                    mode: mode & 0o7777,
                })
            } else {
                Ok(Some(path.to_owned()))
            }
        }
        _ => Ok(None),
    }
}

/// Held while spawning and while the [`crate::reaper`] scans, so a child just spawned
/// is always registered in [`SPAWNED`] before a scan can see it.
pub(crate) static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Pids of the children this process spawned (servers, the guard), as opposed to
/// processes reparented to it.
static SPAWNED: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Notes `pid` as a child this process spawned itself.
pub(crate) fn note_spawned(pid: u32) {
    SPAWNED.lock().unwrap().insert(pid);
}

/// Forgets a child of ours once it is reaped.
pub(crate) fn forget_spawned(pid: u32) {
    SPAWNED.lock().unwrap().remove(&pid);
}

/// Whether `pid` is a child this process spawned itself.
pub(crate) fn is_ours(pid: u32) -> bool {
    SPAWNED.lock().unwrap().contains(&pid)
}

/// Spawns the child for server `server` with all three pipes, in a new process group
/// (so stop signals reach its grandchildren), with `PR_SET_PDEATHSIG = SIGKILL` (so it
/// dies with us even when we are killed with SIGKILL), and `CORRAL_SERVER=server` in its
/// environment (so a process that escapes the group can be told apart:
/// [`crate::reaper`]).
pub fn spawn(spec: &SpawnSpec<'_>, server: &str) -> Result<Child, SpawnError> {
    let mut cmd = command(spec, server)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    start(spec, || cmd.spawn())
}

/// The command for `spec` with what every child of ours gets, whatever its streams and
/// its process group or session (the caller's to set): the program found by
/// [`resolve`], `CORRAL_SERVER=unit`, the working directory, `kill_on_drop`, and
/// between fork and exec the original soft `RLIMIT_NOFILE` ([`raise_nofile_limit`]) and
/// `PR_SET_PDEATHSIG = SIGKILL`.
pub(crate) fn command(spec: &SpawnSpec<'_>, unit: &str) -> Result<Command, SpawnError> {
    let program = resolve(spec)?;
    let mut cmd = Command::new(&program);
    cmd.args(spec.args)
        .envs(spec.env)
        .env(crate::reaper::SERVER_ENV, unit)
        .current_dir(spec.cwd)
        .kill_on_drop(true);
    if let Some((name, value)) = crate::platform::escape::marker() {
        cmd.env(name, value);
    }
    let parent = std::process::id() as libc::pid_t;
    let nofile = ORIGINAL_NOFILE.load(Ordering::Relaxed);
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // functions (getrlimit, setrlimit, and those of `die_with_parent`).
    unsafe {
        cmd.pre_exec(move || {
            if nofile > 0 {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                    lim.rlim_cur = nofile.min(lim.rlim_max);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                }
            }
            crate::platform::parent_death::die_with_parent(parent, libc::SIGKILL)
        });
    }
    Ok(cmd)
}

/// Runs `spawn_it` (the fork and exec of a [`command`]) so that the reaper never sees
/// the child before it is noted as ours, and maps its error to a [`SpawnError`] (a
/// shortage of descriptors, processes or memory is temporary).
pub(crate) fn start(
    spec: &SpawnSpec<'_>,
    spawn_it: impl FnOnce() -> std::io::Result<Child>,
) -> Result<Child, SpawnError> {
    let _spawning = SPAWNING.lock().unwrap();
    let child = spawn_it().map_err(|e| os_error(spec, &e))?;
    if let Some(pid) = child.id() {
        note_spawned(pid);
    }
    Ok(child)
}

/// `e`, from starting `spec`'s command, as a [`SpawnError`].
pub(crate) fn os_error(spec: &SpawnSpec<'_>, e: &std::io::Error) -> SpawnError {
    let (command, message) = (spec.command.to_owned(), e.to_string());
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM) => {
            SpawnError::Resources { command, message }
        }
        _ => SpawnError::Os { command, message },
    }
}

/// Sends `signal` to the whole process group `pgid`. Errors (the group is gone) are
/// ignored: that is the outcome we wanted.
pub fn signal_group(pgid: u32, signal: libc::c_int) {
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid as libc::pid_t, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(command: &'a str, env: &'a BTreeMap<String, String>) -> SpawnSpec<'a> {
        SpawnSpec {
            command,
            args: &[],
            env,
            cwd: Path::new("/"),
        }
    }

    #[test]
    fn missing_command_names_command_and_path() {
        let mut env = BTreeMap::new();
        env.insert("PATH".into(), "/nonexistent-a:/nonexistent-b".into());
        let err = resolve(&spec("no-such-tool", &env)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "command 'no-such-tool' not found in PATH (searched: /nonexistent-a:/nonexistent-b)"
        );
    }

    #[test]
    fn finds_sh_in_path() {
        let env = BTreeMap::new();
        let found = resolve(&spec("sh", &env)).unwrap();
        assert!(found.ends_with("sh"));
    }

    #[test]
    fn non_executable_file_is_reported_with_mode() {
        let dir = std::env::temp_dir().join(format!("corral-spawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("script.sh");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let env = BTreeMap::new();
        let s = SpawnSpec {
            command: "./script.sh",
            args: &[],
            env: &env,
            cwd: &dir,
        };
        let err = resolve(&s).unwrap_err();
        assert!(
            matches!(err, SpawnError::NotExecutable { mode: 0o644, .. }),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_cwd_is_reported() {
        let env = BTreeMap::new();
        let s = SpawnSpec {
            command: "sh",
            args: &[],
            env: &env,
            cwd: Path::new("/definitely/not/here"),
        };
        assert!(matches!(resolve(&s), Err(SpawnError::NoCwd { .. })));
    }
}
