//! How commands end: quietly when their stdout is closed (`corral ps | head -1`), and
//! `corral down` only once the daemon is gone.

mod common;
use common::*;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Stdio;

const CFG: &str = r#"
[gateway]
listen = "127.0.0.1:0"

[servers.fx]
command = "{fixture}"
"#;

/// A pipe whose read end is already closed: its write end, for a child's stdout.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are ours, open, and owned once each.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Runs `corral ARGS` with stdout a pipe nobody reads; its exit code and stderr.
fn run_into_closed_pipe(p: &Project, args: &[&str]) -> (i32, String) {
    let child = p
        .cmd(args)
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: our own child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("corral {args:?} into a closed pipe did not end within {DEADLINE:?}");
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let p = Project::new(CFG);
    let _down = Down(&p);
    let r = p.run(&["up", "-d"]);
    assert_eq!(r.code(), 0, "{r:?}");
    wait_until("fx ready", || {
        p.run(&["ps", "--json"]).stdout().contains("ready")
    });
    for args in [
        &["ps"][..],
        &["ps", "--json"],
        &["tools"],
        &["events"],
        &["events", "-f"],
        &["logs", "fx"],
        &["check"],
        &["down"],
    ] {
        let (code, stderr) = run_into_closed_pipe(&p, args);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "corral {args:?}: {stderr}"
        );
        assert_eq!(code, 0, "corral {args:?}: {stderr}");
    }
}

#[test]
fn down_returns_only_once_the_daemon_process_is_gone() {
    // The daemon's last moments (after it lets go of its lock) are short: try a few
    // times, checking the moment `down` has exited.
    for _ in 0..4 {
        let p = Project::new(CFG);
        let _down = Down(&p);
        let r = p.run(&["up", "-d"]);
        assert_eq!(r.code(), 0, "{r:?}");
        let pid = read_pid(&p.dir.join(".corral/daemon.pid"));
        assert!(alive(pid), "the daemon {pid} runs");
        let mut down = p
            .cmd(&["down"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(down.wait());
        });
        let status = rx
            .recv_timeout(DEADLINE)
            .expect("corral down ends in time")
            .unwrap();
        let gone = !alive(pid);
        assert!(status.success(), "corral down: {status}");
        assert!(
            gone,
            "`corral down` returned while the daemon {pid} still ran"
        );
    }
}
