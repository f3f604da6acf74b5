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

/// `$XDG_RUNTIME_DIR/corral`, else `/tmp/corral-<uid>`: short enough for a socket path
/// (108 bytes), private to the user.
fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("corral"),
        // SAFETY: getuid has no preconditions.
        _ => std::env::temp_dir().join(format!("corral-{}", unsafe { libc::getuid() })),
    }
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
}
