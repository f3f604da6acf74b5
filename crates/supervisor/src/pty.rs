//! Starting a dev process on a pseudo-terminal (`pty = true`), for programs that
//! block-buffer their output on a pipe and only line-buffer on a terminal, so their
//! lines would otherwise arrive late, in bursts, or never before a crash.
//!
//! # The crate
//!
//! [`pty_process`] (with its `async` feature) rather than `portable-pty`: it wraps
//! `tokio::process::Command` and hands back a `tokio::process::Child`, so a pty child
//! is waited for, killed and reaped exactly like a piped one, and its master side is a
//! tokio `AsyncRead` registered with the reactor. Its only dependency beyond tokio is
//! `rustix`. `portable-pty` is built for terminal emulators (Windows ConPTY, its own
//! blocking `Child` and reader, which would need a thread per process and its own
//! waiting), with a larger tree (`nix`, `serial`, `shared_library`, …).
//!
//! # What the child gets
//!
//! Everything [`spawn::spawn`](crate::spawn::spawn) gives (the same command lookup and
//! errors, `CORRAL_SERVER` naming the unit, the original `RLIMIT_NOFILE`,
//! `PR_SET_PDEATHSIG`, noted as ours for the reaper: it is the same
//! [`spawn::command`](crate::spawn::command)), except the process group: the child
//! starts a new session (`setsid`, with the terminal as its controlling terminal), which
//! also makes it the leader of a new process group whose id is its pid, so
//! [`spawn::signal_group`](crate::spawn::signal_group) reaches it and its children
//! as for a server. Its stdin, stdout and stderr are the terminal; nothing is ever
//! typed on it, so a program reading its stdin waits as on an idle terminal.
//!
//! The terminal is [`COLUMNS`]×[`ROWS`] and `TERM=dumb` unless the process's `env` sets
//! `TERM`. The point of the terminal is line buffering, not display: with `dumb`,
//! programs leave out cursor movement, spinners and progress bars redrawn in place,
//! which would otherwise fill the output ring with redraws. Colours mostly go too, which
//! costs nothing since escape sequences are stripped from the output anyway; a process
//! that wants them can set `TERM` (or `FORCE_COLOR`) in its `env`.
//!
//! # Reading it
//!
//! stdout and stderr arrive merged, in the order the terminal got them, on one reader:
//! [`PtyOutput`]. The terminal turns `\n` into `\r\n`, which the line splitter undoes.
//! When the last holder of the terminal's child side (the process and whatever it
//! started) closes it, Linux fails reads on the master with `EIO` rather than returning
//! end of file: [`PtyOutput`] reports that as end of file.
//!
//! # Platforms
//!
//! The terminal is the OS's own on both, opened by `pty_process` through rustix
//! (`posix_openpt`, `grantpt`, `unlockpt`, `ptsname`), the child's session and
//! controlling terminal set by `setsid` and `TIOCSCTTY` after the pre-exec setup. **Linux**
//! ends a read on the master with `EIO` once no one holds the child side; **macOS** ends
//! it with `EIO` or with end of file: [`PtyOutput`] takes either as the end. What differs
//! is only the child side of `spawn::command` (parent death: [`crate::platform`]).

use crate::spawn::{self, SpawnError, SpawnSpec};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::Child;

/// The terminal's width in characters.
pub const COLUMNS: u16 = 120;
/// The terminal's height in lines.
pub const ROWS: u16 = 40;

/// The environment that makes programs write their output as it comes on a pipe, for
/// processes that are not on a terminal: only `PYTHONUNBUFFERED=1` (Python is the one
/// common runtime that block-buffers stdout on a pipe and has a switch for it; Node
/// writes through, Ruby and Perl have no such variable). Nothing about colours: forcing
/// them (`FORCE_COLOR`) fills the logs with escape sequences, and disabling them
/// (`NODE_DISABLE_COLORS`) is not needed on a pipe, where they are off already.
pub fn unbuffered_env() -> [(&'static str, &'static str); 1] {
    [("PYTHONUNBUFFERED", "1")]
}

/// Spawns `spec` for unit `unit` on a new pseudo-terminal (see the module docs). The
/// child's pid is also its process group's id. Returns the child and the terminal's
/// output (stdout and stderr merged).
pub fn spawn(spec: &SpawnSpec<'_>, unit: &str) -> Result<(Child, PtyOutput), SpawnError> {
    let mut cmd = spawn::command(spec, unit)?;
    if !spec.env.contains_key("TERM") {
        cmd.env("TERM", "dumb");
    }
    let (pty, pts) = pty_process::open().map_err(|e| spawn::os_error(spec, &io_error(e)))?;
    pty.resize(pty_process::Size::new(ROWS, COLUMNS))
        .map_err(|e| spawn::os_error(spec, &io_error(e)))?;
    // pty_process runs its `setsid` and `TIOCSCTTY` after the pre-exec setup of
    // `spawn::command`; no `process_group(0)` here, since a group leader cannot start a
    // session. `pts` is dropped when `spawn` returns: from then on only the child (and
    // what it starts) holds the terminal's child side.
    let cmd = pty_process::Command::from(cmd);
    let child = spawn::start(spec, || cmd.spawn(pts).map_err(io_error))?;
    Ok((child, PtyOutput { pty }))
}

fn io_error(e: pty_process::Error) -> std::io::Error {
    match e {
        pty_process::Error::Io(e) => e,
        pty_process::Error::Rustix(errno) => {
            std::io::Error::from_raw_os_error(errno.raw_os_error())
        }
        other => std::io::Error::other(other.to_string()),
    }
}

/// The master side of a process's terminal: its stdout and stderr, merged. Reads end
/// (`Ok` with nothing read) when the terminal's child side is closed by all its holders.
pub struct PtyOutput {
    pty: pty_process::Pty,
}

impl AsyncRead for PtyOutput {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.pty).poll_read(cx, buf) {
            // Linux: the child side is closed (and no data remains): the end.
            Poll::Ready(Err(e)) if e.raw_os_error() == Some(libc::EIO) => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

impl std::fmt::Debug for PtyOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::os::fd::AsRawFd;
        f.debug_struct("PtyOutput")
            .field("fd", &self.pty.as_raw_fd())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OutputRing, Query, Stream, drain};
    use corral_config::redact::Redactor;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;

    const DEADLINE: Duration = Duration::from_secs(20);

    fn python(script: &str) -> Vec<String> {
        vec!["-c".to_owned(), script.to_owned()]
    }

    /// Spawns `python3 args` on a pty and drains it into a new ring.
    fn start(
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> (Child, OutputRing, tokio::task::JoinHandle<()>) {
        let spec = SpawnSpec {
            command: "python3",
            args,
            env,
            cwd: Path::new("/"),
        };
        let (child, output) = spawn(&spec, "web").expect("spawns");
        let ring = OutputRing::new(1 << 20);
        let drained = tokio::spawn(drain(
            output,
            ring.clone(),
            1,
            Stream::Pty,
            Redactor::default(),
            |_| {},
        ));
        (child, ring, drained)
    }

    async fn line_matching(ring: &OutputRing, pattern: &str) -> String {
        let query = Query {
            grep: Some(regex::Regex::new(pattern).unwrap()),
            ..Query::default()
        };
        tokio::time::timeout(DEADLINE, ring.wait_for(0, &query))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no line matching {pattern:?}; got {:?}",
                    ring.query(&Query::default())
                )
            })
            .text
    }

    #[tokio::test]
    async fn unflushed_output_arrives_while_the_process_runs() {
        // On a pipe this print stays in Python's buffer until exit; on a terminal it is
        // line-buffered. The process then sleeps far longer than the deadline.
        let args = python("import time\nprint('hello from the pty')\ntime.sleep(600)");
        let env = BTreeMap::new();
        let (mut child, ring, drained) = start(&args, &env);
        assert_eq!(line_matching(&ring, "hello").await, "hello from the pty");
        assert!(child.try_wait().unwrap().is_none(), "still running");
        spawn::signal_group(child.id().unwrap(), libc::SIGKILL);
        let status = tokio::time::timeout(DEADLINE, child.wait())
            .await
            .expect("dies")
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        // The master then fails with EIO, which is the end of the output.
        tokio::time::timeout(DEADLINE, drained)
            .await
            .expect("the drain ends")
            .unwrap();
    }

    #[tokio::test]
    async fn the_child_is_on_a_terminal_in_its_own_session_and_group() {
        let script = "import os, sys\n\
            print(sys.stdin.isatty(), sys.stdout.isatty(), sys.stderr.isatty())\n\
            print('size', os.get_terminal_size().columns, os.get_terminal_size().lines)\n\
            print('leader', os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())\n\
            print('env', os.environ.get('TERM'), os.environ.get('CORRAL_SERVER'))\n\
            sys.stderr.write('to stderr\\n')";
        let args = python(script);
        let env = BTreeMap::new();
        let (mut child, ring, drained) = start(&args, &env);
        let status = tokio::time::timeout(DEADLINE, child.wait())
            .await
            .expect("exits")
            .unwrap();
        assert!(status.success(), "{status:?}");
        tokio::time::timeout(DEADLINE, drained)
            .await
            .expect("EOF after the exit")
            .unwrap();
        let all = ring.query(&Query::default());
        let texts: Vec<&str> = all.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "True True True",
                "size 120 40",
                "leader True True",
                "env dumb web",
                "to stderr"
            ]
        );
    }

    #[tokio::test]
    async fn term_can_be_set_by_the_process_env() {
        let args = python("import os; print(os.environ['TERM'])");
        let env = BTreeMap::from([("TERM".to_owned(), "xterm-256color".to_owned())]);
        let (mut child, ring, drained) = start(&args, &env);
        tokio::time::timeout(DEADLINE, child.wait())
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(DEADLINE, drained)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ring.query(&Query::default())[0].text, "xterm-256color");
    }

    fn alive(pid: i32) -> bool {
        // A zombie is as good as dead.
        crate::platform::procs::info(pid as u32).is_some_and(|p| !p.zombie)
    }

    #[tokio::test]
    async fn signal_group_ends_the_child_and_its_children() {
        let args = python(
            "import subprocess, time\n\
             p = subprocess.Popen(['sleep', '600'])\n\
             print('grandchild', p.pid, flush=True)\n\
             time.sleep(600)",
        );
        let env = BTreeMap::new();
        let (mut child, ring, drained) = start(&args, &env);
        let line = line_matching(&ring, "^grandchild ").await;
        let grandchild: i32 = line["grandchild ".len()..].parse().unwrap();
        assert!(alive(grandchild));
        spawn::signal_group(child.id().unwrap(), libc::SIGTERM);
        tokio::time::timeout(DEADLINE, child.wait())
            .await
            .expect("the child dies")
            .unwrap();
        let until = std::time::Instant::now() + DEADLINE;
        while alive(grandchild) {
            assert!(
                std::time::Instant::now() < until,
                "grandchild {grandchild} survived"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::timeout(DEADLINE, drained)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn lookup_errors_are_those_of_spawn() {
        let env = BTreeMap::from([("PATH".to_owned(), "/nonexistent-a".to_owned())]);
        let spec = SpawnSpec {
            command: "no-such-dev-server",
            args: &[],
            env: &env,
            cwd: Path::new("/"),
        };
        let err = spawn(&spec, "web").unwrap_err();
        assert_eq!(
            err.to_string(),
            "command 'no-such-dev-server' not found in PATH (searched: /nonexistent-a)"
        );
        let spec = SpawnSpec {
            cwd: Path::new("/definitely/not/here"),
            ..spec
        };
        assert!(matches!(spawn(&spec, "web"), Err(SpawnError::NoCwd { .. })));
    }

    #[test]
    fn unbuffered_env_is_python_only() {
        assert_eq!(unbuffered_env(), [("PYTHONUNBUFFERED", "1")]);
    }
}
