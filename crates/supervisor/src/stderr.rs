//! Where a child's stderr goes: the tail ring, the log file and the live console.
//!
//! The drain starts the moment the child is spawned, before the handshake, so a server
//! that dies during `initialize` has its traceback captured. It never waits on anyone:
//! the ring is a bounded in-memory queue, the log file rotates at a fixed size, and the
//! console drops lines (and says so) rather than block when the terminal is slow. A child
//! writing a gigabyte to stderr therefore never blocks on its pipe, and our memory stays
//! bounded whatever it writes.
//!
//! Every line goes through the server's [`Redactor`] first (one per stream, since a
//! private key block spans lines), so its secrets and anything shaped like a credential
//! never reach the ring (events, error messages, the `server_logs` tool), the log file
//! or the console.
//!
//! Log files are private: created 0600 (an existing one is made so) in directories
//! created 0700, whatever the process's umask, as their rotated `.1` copies are.

use crate::console::Console;
use corral_config::redact::Redactor;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncRead;

/// Lines kept in memory per child (ARCHITECTURE.md, "Where data lives": 50 lines of at
/// most 8 KiB).
pub const RING_LINES: usize = 50;
/// Longest line kept; longer ones are cut with a marker.
pub const MAX_LINE: usize = 8 * 1024;
/// Size at which a log file is rotated to `<name>.log.1`.
pub const LOG_ROTATE_BYTES: u64 = 10 * 1024 * 1024;

/// The last [`RING_LINES`] stderr lines of one child instance.
///
/// A fresh ring is made for every spawn, so a restarted server's tail shows only its own
/// life; the crash event of the previous instance already carries the old tail.
#[derive(Debug, Clone, Default)]
pub struct StderrRing {
    inner: Arc<Mutex<RingInner>>,
}

#[derive(Debug, Default)]
struct RingInner {
    lines: VecDeque<String>,
    total: u64,
}

impl StderrRing {
    /// Appends a line, evicting the oldest beyond [`RING_LINES`].
    pub fn push(&self, line: String) {
        let mut inner = self.inner.lock().unwrap();
        if inner.lines.len() == RING_LINES {
            inner.lines.pop_front();
        }
        inner.lines.push_back(line);
        inner.total += 1;
    }

    /// The last `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let inner = self.inner.lock().unwrap();
        let skip = inner.lines.len().saturating_sub(n);
        inner.lines.iter().skip(skip).cloned().collect()
    }

    /// How many lines this instance has written in all.
    pub fn total_lines(&self) -> u64 {
        self.inner.lock().unwrap().total
    }
}

/// An append-only log file that rotates to `<path>.1` when it reaches its size limit.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    size: u64,
    limit: u64,
}

impl LogFile {
    /// Opens (creating directories as needed, 0700) a log at `path`, readable by its
    /// owner only.
    pub fn open(path: &Path, limit: u64) -> io::Result<LogFile> {
        if let Some(dir) = path.parent() {
            private_dir_all(dir)?;
        }
        let file = open_private(path)?;
        let size = file.metadata()?.len();
        Ok(LogFile {
            path: path.to_owned(),
            file: Some(BufWriter::with_capacity(64 * 1024, file)),
            size,
            limit,
        })
    }

    /// Appends one line with a newline. Errors are swallowed after the first: a full disk
    /// must not stop the drain (the ring and console still work).
    pub fn write_line(&mut self, prefix: &str, line: &str) {
        if self.size >= self.limit {
            self.rotate();
        }
        if let Some(file) = &mut self.file {
            let n = prefix.len() + line.len() + 1;
            let ok = file.write_all(prefix.as_bytes()).is_ok()
                && file.write_all(line.as_bytes()).is_ok()
                && file.write_all(b"\n").is_ok();
            if !ok {
                self.file = None;
            }
            self.size += n as u64;
        }
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        if let Some(file) = &mut self.file
            && file.flush().is_err()
        {
            self.file = None;
        }
    }

    fn rotate(&mut self) {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        self.flush();
        self.file = None;
        let _ = std::fs::rename(&self.path, &old);
        self.file = open_private(&self.path)
            .ok()
            .map(|f| BufWriter::with_capacity(64 * 1024, f));
        self.size = 0;
    }
}

/// Opens `path` for appending, creating it 0600; an existing file that others could read
/// (left by an older version) is made 0600 too.
pub fn open_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Creates `dir` and its missing parents 0700; an existing `dir` (not its parents) that
/// others could enter is made 0700.
pub fn private_dir_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The log file of server `name` in `log_dir`.
pub fn log_path(log_dir: &Path, name: &str) -> PathBuf {
    log_dir.join(format!("{name}.log"))
}

/// Reads a [`LogFile`] as it grows, across rotations: it starts at the file's current
/// end, and each [`LogFollower::poll`] returns the complete lines written since.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    /// The inode read: a new one means the file was rotated.
    ino: u64,
    pos: u64,
    partial: Vec<u8>,
}

impl LogFollower {
    /// A follower of `path` (which need not exist yet) from its current end.
    pub fn new(path: &Path) -> LogFollower {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok();
        LogFollower {
            path: path.to_owned(),
            ino: meta.as_ref().map_or(0, |m| m.ino()),
            pos: meta.map_or(0, |m| m.len()),
            partial: Vec::new(),
        }
    }

    /// The complete lines appended since the last call. A rotated file (a new inode, or
    /// a shorter file) is read from its start; what the old one got after the previous
    /// call is in `<name>.log.1`.
    pub fn poll(&mut self) -> Vec<String> {
        use std::io::{Read, Seek, SeekFrom};
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return Vec::new();
        };
        let len = meta.len();
        if meta.ino() != self.ino || len < self.pos {
            self.ino = meta.ino();
            self.pos = 0;
            self.partial.clear();
        }
        if len == self.pos {
            return Vec::new();
        }
        let Ok(mut f) = File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.pos)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        self.pos += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut lines = Vec::new();
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            lines.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        lines
    }
}

/// A log shared by the stderr drain and the stdout reader of one server.
pub type SharedLog = Arc<Mutex<Option<LogFile>>>;

/// Everything one stderr line is written to.
pub struct StderrSinks {
    /// Server name, for the console prefix.
    pub name: String,
    pub ring: StderrRing,
    pub log: SharedLog,
    /// `None` when the server is `quiet`.
    pub console: Option<Console>,
    /// This stream's redactor ([`corral_config::ServerConfig::redactor`]).
    pub redactor: Redactor,
    /// Hands what is read to the alert scanner; `None` when alerts are off.
    pub(crate) alerts: Option<crate::alerts::Tap>,
}

impl StderrSinks {
    /// Sinks without an alert scanner.
    pub fn new(
        name: String,
        ring: StderrRing,
        log: SharedLog,
        console: Option<Console>,
        redactor: Redactor,
    ) -> StderrSinks {
        StderrSinks {
            name,
            ring,
            log,
            console,
            redactor,
            alerts: None,
        }
    }
}

struct StderrSink {
    sinks: StderrSinks,
    prefix: String,
}

impl crate::lines::LineSink for StderrSink {
    fn line(&mut self, line: String) {
        let sinks = &mut self.sinks;
        let line = match sinks.redactor.line(&line) {
            std::borrow::Cow::Borrowed(_) => line,
            std::borrow::Cow::Owned(redacted) => redacted,
        };
        if let Some(log) = sinks.log.lock().unwrap().as_mut() {
            log.write_line("", &line);
        }
        if let Some(console) = &sinks.console {
            console.dim_line(&self.prefix, &line);
        }
        sinks.ring.push(line);
    }

    fn chunk(&mut self, bytes: &[u8]) {
        if let Some(tap) = &mut self.sinks.alerts {
            tap.chunk(bytes);
        }
    }

    /// One write per read, not per line; the log is current after each read.
    fn read_done(&mut self) {
        if let Some(log) = self.sinks.log.lock().unwrap().as_mut() {
            log.flush();
        }
    }

    fn end(&mut self) {
        self.read_done();
    }
}

/// Reads `stderr` to EOF, splitting lines and feeding every sink. Returns at EOF or on a
/// read error (the child is gone either way).
pub async fn drain(stderr: impl AsyncRead + Unpin, sinks: StderrSinks) {
    let prefix = format!("[server:{}] ", sinks.name);
    crate::lines::pump(stderr, MAX_LINE, &mut StderrSink { sinks, prefix }).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_last_fifty() {
        let ring = StderrRing::default();
        for i in 0..120 {
            ring.push(format!("line {i}"));
        }
        let tail = ring.tail(100);
        assert_eq!(tail.len(), RING_LINES);
        assert_eq!(tail[0], "line 70");
        assert_eq!(tail[49], "line 119");
        assert_eq!(ring.tail(2), ["line 118", "line 119"]);
        assert_eq!(ring.total_lines(), 120);
    }

    #[test]
    fn log_file_rotates_at_limit() {
        let dir = std::env::temp_dir().join(format!("corral-log-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("logs/a.log");
        let mut log = LogFile::open(&path, 100).unwrap();
        for i in 0..30 {
            log.write_line("", &format!("line {i:04}"));
        }
        log.flush();
        let cur = std::fs::read_to_string(&path).unwrap();
        let old = std::fs::read_to_string(dir.join("logs/a.log.1")).unwrap();
        assert!(cur.len() <= 110, "current log bounded: {}", cur.len());
        assert!(old.len() <= 110);
        assert!(cur.ends_with("line 0029\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn follower_reads_new_lines_across_a_rotation() {
        let dir = std::env::temp_dir().join(format!("corral-follow-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = log_path(&dir, "a");
        let mut log = LogFile::open(&path, 30).unwrap();
        log.write_line("", "before");
        log.flush();
        let mut follower = LogFollower::new(&path);
        assert!(follower.poll().is_empty(), "starts at the end");
        log.write_line("", "one");
        log.flush();
        assert_eq!(follower.poll(), ["one"]);
        log.write_line("", "a line that fills it up");
        log.write_line("", "after rotation");
        log.flush();
        assert_eq!(follower.poll(), ["after rotation"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn drain_feeds_ring_and_flushes_partial_line() {
        let ring = StderrRing::default();
        let sinks = StderrSinks {
            name: "t".into(),
            ring: ring.clone(),
            log: Arc::new(Mutex::new(None)),
            console: None,
            redactor: Redactor::default(),
            alerts: None,
        };
        let input: &[u8] = b"first\r\nsecond\nthird";
        drain(input, sinks).await;
        assert_eq!(ring.tail(10), ["first", "second", "third"]);
    }

    #[tokio::test]
    async fn the_drain_redacts_every_line_before_the_ring_and_the_log() {
        let dir = std::env::temp_dir().join(format!("corral-redact-drain-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = log_path(&dir, "a");
        let log: SharedLog = Arc::new(Mutex::new(Some(LogFile::open(&path, 1 << 20).unwrap())));
        let ring = StderrRing::default();
        let secret = "cfg-secret-1234".to_owned();
        let sinks = StderrSinks {
            name: "a".into(),
            ring: ring.clone(),
            log: log.clone(),
            console: None,
            redactor: Redactor::new([&secret]),
            alerts: None,
        };
        let input: &[u8] = b"key cfg-secret-1234\n-----BEGIN PRIVATE KEY-----\nMIIEbody\n\
            -----END PRIVATE KEY-----\ntoken ghp_0123456789abcdefghijABCDEFGHIJ012345";
        drain(input, sinks).await;
        let want = [
            "key ***",
            "-----BEGIN PRIVATE KEY-----",
            "***",
            "-----END PRIVATE KEY-----",
            "token ghp_***",
        ];
        assert_eq!(ring.tail(10), want);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            want.join("\n") + "\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn log_files_and_their_rotations_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("corral-log-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("logs/a.log");
        let mut log = LogFile::open(&path, 20).unwrap();
        for i in 0..10 {
            log.write_line("", &format!("line {i:04}"));
        }
        log.flush();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("logs")), 0o700);
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("logs/a.log.1")), 0o600);
        // An older, world-readable log is made private when opened.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(LogFile::open(&path, 20).unwrap());
        assert_eq!(mode(&path), 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
