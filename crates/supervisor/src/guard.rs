//! The guard: a tiny watchdog process that kills our children's process groups when we
//! die, however we die.
//!
//! `PR_SET_PDEATHSIG` (set on every child in [`crate::spawn`]) kills a child when we die,
//! but not its own children: an `npx` wrapper dies and the `node` server it started lives
//! on, orphaned. The guard closes that gap. It is a separate process (the `corral` binary
//! re-executed with a hidden subcommand) holding the read end of a pipe; we write
//! `+PGID` / `-PGID` lines as process groups come and go. When we die — even by SIGKILL —
//! the kernel closes our end, the guard reads EOF, sends SIGKILL to every group still
//! registered, and exits. It ignores SIGINT/SIGTERM/SIGHUP and sits in its own process
//! group, so a Ctrl-C at the terminal cannot remove it before we are done.

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// Our handle on the guard process.
#[derive(Debug)]
pub struct Guard {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
}

impl Guard {
    /// Starts `program args…`, which must call [`run_guard`].
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Guard> {
        let _spawning = crate::spawn::SPAWNING.lock().unwrap();
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        crate::spawn::note_spawned(child.id());
        let stdin = child.stdin.take().expect("stdin piped");
        Ok(Guard {
            stdin: Mutex::new(Some(stdin)),
            child: Mutex::new(child),
        })
    }

    /// From now on, group `pgid` is killed if we die.
    pub fn register(&self, pgid: u32) {
        self.send(b'+', pgid);
    }

    /// Group `pgid` is gone (reaped and killed); forget it.
    pub fn unregister(&self, pgid: u32) {
        self.send(b'-', pgid);
    }

    fn send(&self, op: u8, pgid: u32) {
        // A line is far below PIPE_BUF, so the write is atomic and cannot block for long.
        let line = format!("{}{pgid}\n", op as char);
        if let Some(stdin) = self.stdin.lock().unwrap().as_mut() {
            let _ = stdin.write_all(line.as_bytes());
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe is the guard's signal to exit (after killing what is still
        // registered: nothing, after an orderly shutdown). Reap it so it is no zombie.
        drop(self.stdin.lock().unwrap().take());
        let _ = self.child.lock().unwrap().wait();
    }
}

/// The guard process's main loop; returns when the parent is gone, after killing every
/// registered process group.
pub fn run_guard() {
    // SAFETY: setting signal dispositions to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mut groups = BTreeSet::new();
    let stdin = io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let (op, pgid) = line.split_at(line.len().min(1));
        let Ok(pgid) = pgid.parse::<u32>() else {
            continue;
        };
        match op {
            "+" => {
                groups.insert(pgid);
            }
            "-" => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        crate::spawn::signal_group(pgid, libc::SIGKILL);
    }
}
