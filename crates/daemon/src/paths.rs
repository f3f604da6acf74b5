//! Where a project's daemon keeps its files, derived from the config path alone so that
//! every client finds the same daemon.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The files of one project's daemon.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `.corral/` beside the config: 0700, and every file in it 0600.
    pub state_dir: PathBuf,
    /// The control socket (0600, in a 0700 directory).
    pub socket: PathBuf,
    /// Holds the daemon's pid; the daemon keeps an exclusive `flock` on it while alive,
    /// which — not the file's content — is what says a daemon runs.
    pub pid: PathBuf,
    /// Serializes starting a daemon between clients racing to do it.
    pub spawn_lock: PathBuf,
    /// The event journal.
    pub journal: PathBuf,
    /// stdout/stderr of a detached daemon.
    pub daemon_log: PathBuf,
    /// `http://ADDR/mcp` of the HTTP endpoint, one line, for scripts; written when the
    /// daemon listens, left after it stops (an unset `listen` reuses the port).
    pub endpoint: PathBuf,
}

impl Paths {
    /// The paths for the project whose config is `config` (absolute) with state in
    /// `state_dir`.
    pub fn new(config: &Path, state_dir: &Path) -> Paths {
        let key = format!(
            "{:016x}",
            corral_gateway::naming::fnv1a(config.as_os_str().as_encoded_bytes())
        );
        let runtime = runtime_dir();
        Paths {
            state_dir: state_dir.to_owned(),
            socket: runtime.join(format!("{key}.sock")),
            pid: state_dir.join("daemon.pid"),
            spawn_lock: state_dir.join("daemon.lock"),
            journal: state_dir.join("events.jsonl"),
            daemon_log: state_dir.join("daemon.log"),
            endpoint: state_dir.join("endpoint"),
        }
    }

    /// Creates the state directory and the socket directory (0700, ours). The state
    /// directory is made 0700 when it exists wider (an older version, `auth = "none"`):
    /// it holds server logs, the journal and the token, whatever the auth mode.
    pub fn prepare(&self) -> std::io::Result<()> {
        corral_supervisor::stderr::private_dir_all(&self.state_dir)?;
        if let Some(dir) = self.socket.parent() {
            private_dir(dir)?;
        }
        Ok(())
    }
}

/// Where the control sockets live: private to the user, and short enough that a socket
/// path (`DIR/` + 16 hex digits + `.sock`) fits `sun_path`.
///
/// **Linux**: `$XDG_RUNTIME_DIR/corral` (the login session's private tmpfs), else
/// `$TMPDIR/corral-UID` (`std::env::temp_dir`: usually `/tmp`).
///
/// **macOS**: no `XDG_RUNTIME_DIR` as a rule; `$TMPDIR` is launchd's per-user private
/// directory (`/var/folders/…/T/`), so `$TMPDIR/corral-UID`.
///
/// On both, a directory whose socket paths would not fit (a long `$TMPDIR` or
/// `$XDG_RUNTIME_DIR`) gives way to `/tmp/corral-UID`; [`private_dir`] then insists
/// that it is ours and 0700.
fn runtime_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    runtime_dir_from(
        std::env::var_os("XDG_RUNTIME_DIR"),
        std::env::temp_dir(),
        uid,
    )
}

/// The longest socket path: `sun_path` less its NUL (108 bytes on Linux, 104 on macOS).
#[cfg(target_os = "linux")]
const SOCKET_PATH_MAX: usize = 107;
#[cfg(not(target_os = "linux"))]
const SOCKET_PATH_MAX: usize = 103;

/// [`runtime_dir`] given `$XDG_RUNTIME_DIR`, the temporary directory and the user.
fn runtime_dir_from(xdg: Option<std::ffi::OsString>, tmp: PathBuf, uid: libc::uid_t) -> PathBuf {
    let fits = |d: &Path| d.as_os_str().len() + "/0123456789abcdef.sock".len() <= SOCKET_PATH_MAX;
    let candidates = [
        xdg.filter(|d| !d.is_empty())
            .map(|d| PathBuf::from(d).join("corral")),
        Some(tmp.join(format!("corral-{uid}"))),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| fits(d))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/corral-{uid}")))
}

/// Makes `dir` (mode 0700) or checks that the existing one is ours and private.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::metadata(dir)?;
    // SAFETY: getuid has no preconditions.
    if meta.uid() != unsafe { libc::getuid() } {
        return Err(std::io::Error::other(format!(
            "{} belongs to another user; set XDG_RUNTIME_DIR to a private directory",
            dir.display()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_config_same_socket_and_short_paths() {
        let a = Paths::new(Path::new("/p/corral.toml"), Path::new("/p/.corral"));
        let b = Paths::new(Path::new("/p/corral.toml"), Path::new("/p/.corral"));
        let c = Paths::new(Path::new("/q/corral.toml"), Path::new("/q/.corral"));
        assert_eq!(a.socket, b.socket);
        assert_ne!(a.socket, c.socket);
        assert!(a.socket.as_os_str().len() < 100);
        assert_eq!(a.pid, Path::new("/p/.corral/daemon.pid"));
    }

    #[test]
    fn the_runtime_dir_is_xdg_then_tmpdir_then_tmp_and_always_fits_a_socket_path() {
        let tmp = |s: &str| PathBuf::from(s);
        // Linux with a login session; without one.
        assert_eq!(
            runtime_dir_from(Some("/run/user/1000".into()), tmp("/tmp"), 1000),
            Path::new("/run/user/1000/corral")
        );
        assert_eq!(
            runtime_dir_from(None, tmp("/tmp"), 1000),
            Path::new("/tmp/corral-1000")
        );
        assert_eq!(
            runtime_dir_from(Some("".into()), tmp("/tmp"), 1000),
            Path::new("/tmp/corral-1000")
        );
        // macOS: launchd's per-user TMPDIR.
        let darwin = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/";
        assert_eq!(
            runtime_dir_from(None, tmp(darwin), 501),
            Path::new(darwin).join("corral-501")
        );
        // Too long for a socket path: the next candidate, at last /tmp.
        let long = format!("/{}", "d".repeat(120));
        assert_eq!(
            runtime_dir_from(Some(long.clone().into()), tmp("/tmp"), 7),
            Path::new("/tmp/corral-7")
        );
        assert_eq!(
            runtime_dir_from(None, tmp(&long), 7),
            Path::new("/tmp/corral-7")
        );
        for dir in [darwin, "/tmp", long.as_str()] {
            let d = runtime_dir_from(None, tmp(dir), 4_294_967_294);
            let socket = d.join("0123456789abcdef.sock");
            assert!(socket.as_os_str().len() <= SOCKET_PATH_MAX, "{socket:?}");
        }
    }
}
