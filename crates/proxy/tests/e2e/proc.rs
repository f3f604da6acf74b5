//! Child processes in their own process group, their output as a log of lines, temp dirs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::Notify;

/// Items arriving over time (output lines, protocol events) that a test waits on.
pub struct Log<T> {
    inner: Mutex<LogInner<T>>,
    notify: Notify,
}

struct LogInner<T> {
    items: Vec<T>,
    /// No more items will come (the stream ended).
    closed: bool,
}

impl<T: Clone> Log<T> {
    pub fn new() -> Arc<Log<T>> {
        Arc::new(Log {
            inner: Mutex::new(LogInner {
                items: Vec::new(),
                closed: false,
            }),
            notify: Notify::new(),
        })
    }

    pub fn push(&self, item: T) {
        self.inner.lock().unwrap().items.push(item);
        self.notify.notify_waiters();
    }

    pub fn close(&self) {
        self.inner.lock().unwrap().closed = true;
        self.notify.notify_waiters();
    }

    pub fn snapshot(&self) -> Vec<T> {
        self.inner.lock().unwrap().items.clone()
    }

    /// The first item, from `from` on, that `f` picks: its index and what `f` made of it.
    /// Fails when the log closes or `deadline` passes first, naming `what`.
    pub async fn wait_for_from<R>(
        &self,
        from: usize,
        what: &str,
        deadline: Duration,
        mut f: impl FnMut(&T) -> Option<R>,
    ) -> Result<(usize, R), String> {
        let end = tokio::time::Instant::now() + deadline;
        let mut seen = from;
        loop {
            // Registered before looking, so a push between the look and the wait wakes it.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let inner = self.inner.lock().unwrap();
                for (i, item) in inner.items.iter().enumerate().skip(seen) {
                    if let Some(r) = f(item) {
                        return Ok((i, r));
                    }
                }
                seen = inner.items.len().max(seen);
                if inner.closed {
                    return Err(format!("{what}: the stream ended first"));
                }
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                return Err(format!("{what}: not within {deadline:?}"));
            }
        }
    }

    /// [`Log::wait_for_from`] from the start.
    pub async fn wait_for<R>(
        &self,
        what: &str,
        deadline: Duration,
        f: impl FnMut(&T) -> Option<R>,
    ) -> Result<R, String> {
        self.wait_for_from(0, what, deadline, f)
            .await
            .map(|(_, r)| r)
    }

    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().items.len()
    }
}

/// Reads `stream` line by line into a new log (ANSI escapes removed), closed at its end.
pub fn lines(stream: impl AsyncRead + Unpin + Send + 'static) -> Arc<Log<String>> {
    let log = Log::new();
    let writer = log.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => writer.push(
                    strip_ansi(&String::from_utf8_lossy(&buf))
                        .trim_end()
                        .to_owned(),
                ),
            }
        }
        writer.close();
    });
    log
}

/// `text` without ANSI escape sequences (CSI `ESC [ … final` and two-byte `ESC x`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // A two-byte escape drops the byte after ESC; a CSI its parameters and
        // intermediates too, up to the final byte (@ to ~).
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

/// A child in its own process group (its pid is the group's id). Dropping it kills the
/// whole group with SIGKILL: the child and every helper it forked that stayed in the
/// group (Chromium's renderers and zygotes, Vite's esbuild service).
pub struct Group {
    pub child: tokio::process::Child,
    pgid: libc::pid_t,
    /// What it runs, for messages.
    pub name: String,
    /// The leader was waited for: its pid, and so the group id, may be reused now.
    reaped: bool,
}

impl Group {
    /// Spawns `cmd` as the leader of a new process group; stdin is closed.
    pub fn spawn(name: &str, mut cmd: tokio::process::Command) -> std::io::Result<Group> {
        cmd.process_group(0)
            .kill_on_drop(true)
            .stdin(std::process::Stdio::null());
        // If the test process dies without dropping the guard (a harness timeout kills
        // it), the leader dies with it; its helpers then see their parent gone and quit.
        // (The signal comes when the spawning *thread* ends: spawn from the test's own
        // task, which runs on the test's thread, not from a spawned task.)
        // SAFETY: prctl is async-signal-safe and touches only the child being set up.
        // (Linux only: the end-to-end tests run on Linux; elsewhere they only compile.)
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pgid = child.id().expect("a just-spawned child has a pid") as libc::pid_t;
        Ok(Group {
            child,
            pgid,
            name: name.to_owned(),
            reaped: false,
        })
    }

    pub fn pgid(&self) -> libc::pid_t {
        self.pgid
    }

    /// Kills the group and waits for the leader (its helpers are reaped by their parent
    /// or, orphaned, by init).
    pub async fn kill(mut self) {
        self.killpg();
        let _ = self.child.wait().await;
        self.reaped = true;
    }

    fn killpg(&self) {
        // SAFETY: killpg only sends a signal; the group is ours (a new one at spawn),
        // and an already gone group is ESRCH, ignored.
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
    }
}

/// A live (not zombie) process: its pid, process group and command line.
#[derive(Debug, Clone)]
pub struct LiveProcess {
    pub pid: u32,
    pub pgid: i32,
    pub cmdline: String,
}

/// Every live process on the machine that `pick` selects (from /proc).
pub fn live_processes(pick: impl Fn(&LiveProcess) -> bool) -> Vec<LiveProcess> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?;
        let pgid: i32 = fields.nth(1)?.parse().ok()?;
        if state == "Z" || state == "X" {
            return None;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let p = LiveProcess { pid, pgid, cmdline };
        pick(&p).then_some(p)
    })
    .collect()
}

/// Waits until no live process is selected by `pick` (children that outlive a kill for a
/// moment, or helpers that left the group and quit once their parent is gone); fails
/// naming the ones left at the deadline.
pub async fn wait_gone(what: &str, deadline: Duration, pick: impl Fn(&LiveProcess) -> bool) {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let left = live_processes(&pick);
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{what}: processes left {deadline:?} after it was stopped: {left:#?}"
        );
        // /proc has nothing to wait on; a short poll interval against the deadline.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.reaped {
            self.killpg();
        }
        // kill_on_drop makes tokio reap the leader in the background.
    }
}

/// A fresh directory under the system temp dir, removed with everything in it on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "corral-e2e-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies the directory tree `from` into `to` (created).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// `name` found on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
