//! Where a remote server's OAuth credentials live: one record per (project, server,
//! URL), a JSON file in a per-user directory outside every repository —
//! `$CORRAL_OAUTH_DIR`, else `$XDG_STATE_HOME/corral/oauth`, else
//! `~/.local/state/corral/oauth` — the directory 0700, each file 0600.
//!
//! Every change is made under the record's `flock` (`NAME.lock`, beside it), re-reading
//! the record first, and written atomically (a new file, fsynced, renamed over the old
//! one, the directory fsynced): so two daemons of one project (two worktrees), and
//! `corral auth` beside them, never lose a rotated refresh token to each other.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Overrides the store's directory (tests, or a user who keeps state elsewhere).
pub const ENV_DIR: &str = "CORRAL_OAUTH_DIR";

/// A record is small; anything bigger is not ours.
const MAX_RECORD: u64 = 1024 * 1024;

/// What Corral keeps for one remote server.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// The project directory and server name it belongs to (for a human reading the
    /// directory, and `corral auth --logout`).
    pub project: String,
    pub server: String,
    /// The URL of the server, as configured.
    pub url: String,
    /// The resource the tokens are for (RFC 8707: the protected resource's own name).
    pub resource: String,
    /// The authorization server: its issuer and the endpoints the daemon uses.
    pub issuer: String,
    pub token_endpoint: String,
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    pub client: Client,
    #[serde(default)]
    pub tokens: Option<Tokens>,
    /// Scopes a server asked for beyond the grant (403 `insufficient_scope`): the next
    /// `corral auth` asks for them too.
    #[serde(default)]
    pub wanted_scope: Option<String>,
    /// Counts every change of the tokens, so a holder of an older copy knows.
    #[serde(default)]
    pub generation: u64,
}

/// The client Corral is at the authorization server.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Client {
    pub id: String,
    #[serde(default)]
    pub secret: Option<String>,
    /// `config` (the user's), `dcr` (registered by Corral), `cimd` (a metadata URL).
    pub source: String,
    /// The issuer it was registered with (a client is only good there).
    pub issuer: String,
    /// The loopback redirect URI it was registered with.
    #[serde(default)]
    pub redirect_uri: Option<String>,
}

/// The grant.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Tokens {
    pub access: String,
    #[serde(default)]
    pub refresh: Option<String>,
    /// Unix seconds; unknown when the server did not say.
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// When it was received (unix seconds), for the refresh point.
    pub received_at: u64,
    #[serde(default)]
    pub scope: Option<String>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens or the client secret.
        f.debug_struct("Record")
            .field("server", &self.server)
            .field("url", &self.url)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client.id)
            .field("has_tokens", &self.tokens.is_some())
            .field("generation", &self.generation)
            .finish()
    }
}

/// One record's place on disk.
#[derive(Debug, Clone)]
pub struct Store {
    path: PathBuf,
    lock: PathBuf,
}

/// The store's directory: [`ENV_DIR`], else the XDG state directory.
pub fn dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os(ENV_DIR).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Ok(PathBuf::from(d).join("corral/oauth"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/state/corral/oauth")),
        None => Err(format!(
            "no place for OAuth credentials: HOME is not set (set {ENV_DIR} to a directory)"
        )),
    }
}

/// Creates `dir` (0700) or checks the one there: ours, and closed to others.
fn prepare(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory of this user: Corral keeps credentials only in its own",
                dir.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

impl Store {
    /// The record of server `server` of the project at `project`, for `url`.
    pub fn of(project: &Path, server: &str, url: &str) -> Result<Store, String> {
        let dir = dir()?;
        let mut h = Sha256::new();
        for part in [
            project.to_string_lossy().as_bytes(),
            server.as_bytes(),
            url.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        let key: String = h.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let safe: String = server
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        Ok(Store {
            path: dir.join(format!("{safe}-{key}.json")),
            lock: dir.join(format!("{safe}-{key}.lock")),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The record, if there is one.
    pub fn load(&self) -> io::Result<Option<Record>> {
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        // SAFETY: geteuid has no preconditions.
        if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o077 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is not private to this user (owner or mode): not trusted; delete it and \
                     run `corral auth` again",
                    self.path.display()
                ),
            ));
        }
        let mut text = String::new();
        file.take(MAX_RECORD).read_to_string(&mut text)?;
        serde_json::from_str(&text).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is not a Corral credentials record ({e}); delete it and run `corral auth` \
                     again",
                    self.path.display()
                ),
            )
        })
    }

    /// Writes the record atomically and durably (0600).
    pub fn save(&self, record: &Record) -> io::Result<()> {
        let dir = self.path.parent().expect("a record lives in a directory");
        prepare(dir)?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let written = f
            .write_all(&serde_json::to_vec_pretty(record).expect("a record serializes"))
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .and_then(|()| File::open(dir)?.sync_all());
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Forgets the record.
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Takes the record's lock (blocking): every read-change-write of a record is made
    /// under it, by every process.
    pub fn lock(&self) -> io::Result<Lock> {
        prepare(self.lock.parent().expect("a lock lives in a directory"))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.lock)?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Lock { _file: file })
    }
}

/// A record's lock, released when dropped (or when its holder dies).
pub struct Lock {
    _file: File,
}

/// Now, in unix seconds.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_in(dir: &Path) -> Store {
        let key = dir.join("k");
        Store {
            path: key.with_extension("json"),
            lock: key.with_extension("lock"),
        }
    }

    #[test]
    fn a_record_is_private_and_written_whole() {
        let dir = std::env::temp_dir().join(format!("corral-oauth-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = store_in(&dir.join("oauth"));
        assert!(s.load().unwrap().is_none());
        let mut r = Record {
            server: "x".into(),
            ..Record::default()
        };
        r.tokens = Some(Tokens {
            access: "secret-access".into(),
            refresh: Some("secret-refresh".into()),
            ..Tokens::default()
        });
        let _l = s.lock().unwrap();
        s.save(&r).unwrap();
        let meta = std::fs::metadata(s.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.join("oauth")).unwrap().mode() & 0o777,
            0o700
        );
        let back = s.load().unwrap().unwrap();
        assert_eq!(
            back.tokens.unwrap().refresh.as_deref(),
            Some("secret-refresh")
        );
        // Debug never shows a secret.
        let shown = format!("{r:?}");
        assert!(!shown.contains("secret"), "{shown}");
        // A file others can read is not trusted; a symlink is not followed.
        std::fs::set_permissions(s.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = s.load().unwrap_err().to_string();
        assert!(e.contains("not private"), "{e}");
        std::fs::remove_file(s.path()).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.path()).unwrap();
        assert!(s.load().is_err());
        // Saving replaces the link, never writes through it.
        s.save(&back_record()).unwrap();
        assert!(
            !std::fs::symlink_metadata(s.path())
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn back_record() -> Record {
        Record {
            server: "y".into(),
            ..Record::default()
        }
    }

    #[test]
    fn records_are_told_apart_by_project_server_and_url() {
        let a = Store::of(Path::new("/p"), "s", "https://a/mcp").unwrap();
        let b = Store::of(Path::new("/p"), "s", "https://b/mcp").unwrap();
        let c = Store::of(Path::new("/q"), "s", "https://a/mcp").unwrap();
        let d = Store::of(Path::new("/p"), "../s/..", "https://a/mcp").unwrap();
        assert_ne!(a.path, b.path);
        assert_ne!(a.path, c.path);
        assert_eq!(
            a.path.parent(),
            d.path.parent(),
            "a name cannot leave the directory"
        );
    }
}
