//! Advisory file locks (`flock`): released by the kernel when the holder dies, so they
//! never go stale the way a pid file does.
//!
//! **Linux** and **macOS** alike: `flock(2)` locks the open file description, is kept
//! across `fork` by the child's copy of the descriptor (every descriptor of the daemon
//! is close-on-exec, so no server holds it), and is released when the last descriptor
//! of it closes, however the holder died. Neither OS's `flock` reaches across NFS
//! reliably; the runtime directory is local (`paths.rs`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// An exclusive lock on a file, held until dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Takes the lock without waiting; `Ok(None)` if someone else holds it.
    pub fn try_lock(path: &Path) -> io::Result<Option<FileLock>> {
        let file = open(path)?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            Ok(Some(FileLock { file }))
        } else {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }

    /// Takes the lock, waiting for it (on a blocking thread).
    pub async fn lock(path: &Path) -> io::Result<FileLock> {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || {
            let file = open(&path)?;
            // SAFETY: flock on an fd we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                Ok(FileLock { file })
            } else {
                Err(io::Error::last_os_error())
            }
        })
        .await
        .map_err(io::Error::other)?
    }

    /// The locked file (the daemon writes its pid into it).
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Whether someone holds the lock on `path` right now.
pub fn is_locked(path: &Path) -> bool {
    matches!(FileLock::try_lock(path), Ok(None))
}

/// Opens (creating it 0600; an older, wider file is made 0600) the file to lock.
fn open(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}
