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
//!
//! A guard that is killed anyway (a `kill -9` of the wrong pid, an OOM kill) is started
//! again by [`Guard::revive`], which the [reaper](crate::reaper) calls on every SIGCHLD
//! (the guard is our child) and every scan, and is given every group still registered:
//! so a guard killed first and Corral killed after still leaves nothing behind. This
//! matters most on macOS, where the guard is the only mechanism (no `PR_SET_PDEATHSIG`).

use std::collections::BTreeSet;
use std::io::{self, BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// Our handle on the guard process.
#[derive(Debug)]
pub struct Guard {
    program: PathBuf,
    args: Vec<String>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    stdin: Option<ChildStdin>,
    child: Child,
    /// The groups registered, to give a guard started again.
    groups: BTreeSet<u32>,
}

impl Guard {
    /// Starts `program args…`, which must call [`run_guard`].
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Guard> {
        let (child, stdin) = start(program, args)?;
        Ok(Guard {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            state: Mutex::new(State {
                stdin: Some(stdin),
                child,
                groups: BTreeSet::new(),
            }),
        })
    }

    /// From now on, group `pgid` is killed if we die.
    pub fn register(&self, pgid: u32) {
        let mut state = self.state.lock().unwrap();
        state.groups.insert(pgid);
        send(&mut state, b'+', pgid);
    }

    /// Group `pgid` is gone (reaped and killed); forget it.
    pub fn unregister(&self, pgid: u32) {
        let mut state = self.state.lock().unwrap();
        state.groups.remove(&pgid);
        send(&mut state, b'-', pgid);
    }

    /// When the guard process has died, reaps it, starts another and registers every
    /// group with it. `None` when it is alive; else the new guard's pid, or why none
    /// could be started (once: from then on there is no guard, and `None`).
    pub fn revive(&self) -> Option<io::Result<u32>> {
        let mut state = self.state.lock().unwrap();
        if state.stdin.is_none() || !matches!(state.child.try_wait(), Ok(Some(_))) {
            return None;
        }
        crate::spawn::forget_spawned(state.child.id());
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let (child, stdin) = match start(&self.program, &args) {
            Ok(started) => started,
            Err(e) => {
                state.stdin = None;
                return Some(Err(e));
            }
        };
        state.child = child;
        state.stdin = Some(stdin);
        let groups: Vec<u32> = state.groups.iter().copied().collect();
        for pgid in groups {
            send(&mut state, b'+', pgid);
        }
        Some(Ok(state.child.id()))
    }
}

/// Spawns a guard process, noted as our own child.
fn start(program: &Path, args: &[&str]) -> io::Result<(Child, ChildStdin)> {
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
    Ok((child, stdin))
}

fn send(state: &mut State, op: u8, pgid: u32) {
    // A line is far below PIPE_BUF, so the write is atomic and cannot block for long.
    let line = format!("{}{pgid}\n", op as char);
    if let Some(stdin) = state.stdin.as_mut() {
        let _ = stdin.write_all(line.as_bytes());
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe is the guard's signal to exit (after killing what is still
        // registered: nothing, after an orderly shutdown). Reap it so it is no zombie.
        let mut state = self.state.lock().unwrap();
        drop(state.stdin.take());
        let _ = state.child.wait();
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
