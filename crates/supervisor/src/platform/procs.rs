//! Process listings: a process's parent, group and state, its children, the processes
//! of a user, and a variable of the environment a process started with.
//!
//! **Linux**: `/proc/PID/stat`, `/proc/PID/task/*/children` and `/proc/PID/environ`.
//!
//! **macOS**: libproc, as `ps` and Activity Monitor read it: `proc_pidinfo` with
//! `PROC_PIDTBSDINFO` (parent, group, state, start time), `proc_listpids` with
//! `PROC_PPID_ONLY` and `PROC_UID_ONLY`, and the environment from
//! `sysctl(KERN_PROCARGS2)` (the strings the process was started with: its argument
//! count, executable path, arguments, then its environment).
//!
//! On both, another user's processes are listed but their environment is not readable:
//! what Corral asks of them it asks only of its own user's processes.

/// What the supervisor needs to know of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// Exited, not yet reaped by its parent (or being reaped: Linux's `X`).
    pub zombie: bool,
    /// When it started, in an OS unit: with the pid, a process's identity (a pid may be
    /// reused, a pid and its start time are not).
    pub started: u64,
}

/// `pid`'s entry, `None` when it is gone (or not readable).
pub fn info(pid: u32) -> Option<Proc> {
    imp::info(pid)
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    imp::children(pid)
}

/// Every process of this machine (Linux), or of the user `uid` (macOS, where the listing
/// is asked of the kernel by user). Callers filter by parent or user themselves.
pub fn of_user(uid: u32) -> Vec<Proc> {
    imp::of_user(uid)
}

/// The value of `name` in the environment `pid` started with, if readable.
pub fn env_var(pid: u32, name: &str) -> Option<String> {
    env_lookup(&environ(pid)?, name)
}

/// The environment `pid` started with, NUL-separated `NAME=value` entries; `None` when
/// it is not readable (gone, another user's, or exiting).
pub fn environ(pid: u32) -> Option<Vec<u8>> {
    imp::environ(pid)
}

/// The value of `name` in an [`environ`] block.
pub fn env_lookup(block: &[u8], name: &str) -> Option<String> {
    env_value(env_entries_nul(block), name)
}

/// The value of `name` among `NAME=value` entries.
fn env_value<'a>(entries: impl IntoIterator<Item = &'a [u8]>, name: &str) -> Option<String> {
    let key = name.as_bytes();
    entries.into_iter().find_map(|kv| {
        let value = kv.strip_prefix(key)?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

/// The entries of a NUL-separated environment block (`/proc/PID/environ`, and what
/// [`procargs2_env`] leaves).
fn env_entries_nul(block: &[u8]) -> impl Iterator<Item = &[u8]> {
    block.split(|b| *b == 0).filter(|e| !e.is_empty())
}

/// The environment block in a `KERN_PROCARGS2` buffer: after the argument count (a
/// native `int`), the executable's path, the NULs that pad it, and that many
/// NUL-terminated arguments, the environment's entries follow up to the first empty
/// string (what comes after is the kernel's own `apple[]` strings). Empty when the
/// buffer is shorter than it says.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
fn procargs2_env(buf: &[u8]) -> Vec<u8> {
    let Some((argc, rest)) = buf.split_first_chunk::<4>() else {
        return Vec::new();
    };
    let Ok(argc) = usize::try_from(i32::from_ne_bytes(*argc)) else {
        return Vec::new();
    };
    let Some(path_end) = rest.iter().position(|b| *b == 0) else {
        return Vec::new();
    };
    let rest = &rest[path_end..];
    let Some(start) = rest.iter().position(|b| *b != 0) else {
        return Vec::new();
    };
    let mut fields = rest[start..].split(|b| *b == 0);
    for _ in 0..argc {
        if fields.next().is_none() {
            return Vec::new();
        }
    }
    let mut env = Vec::new();
    for entry in fields.take_while(|e| !e.is_empty()) {
        env.extend_from_slice(entry);
        env.push(0);
    }
    env
}

/// One line of `/proc/PID/stat` as a [`Proc`]: after `(comm)`, which may hold spaces and
/// parentheses, come state, ppid, pgrp, …, and the 20th field after comm is the start
/// time in clock ticks since boot.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_stat(pid: u32, stat: &str) -> Option<Proc> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    // session, tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime, stime,
    // cutime, cstime, priority, nice, num_threads, itrealvalue, then starttime.
    let started = fields.nth(16)?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        zombie: matches!(state, "Z" | "X"),
        started,
    })
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Proc, parse_stat};

    pub fn info(pid: u32) -> Option<Proc> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(pid, &stat)
    }

    pub fn children(pid: u32) -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
        out
    }

    pub fn of_user(_uid: u32) -> Vec<Proc> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(info)
            .collect()
    }

    pub fn environ(pid: u32) -> Option<Vec<u8>> {
        std::fs::read(format!("/proc/{pid}/environ")).ok()
    }
}

#[cfg(target_os = "macos")]
mod imp {
    use super::{Proc, procargs2_env};
    use libc::c_int;

    /// `<libproc.h>`'s listing kinds (not in the libc crate).
    const PROC_UID_ONLY: u32 = 4;
    const PROC_PPID_ONLY: u32 = 6;

    pub fn info(pid: u32) -> Option<Proc> {
        // SAFETY: proc_bsdinfo is plain data; all zeroes is a valid value.
        let mut bsd: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as c_int;
        // SAFETY: the buffer is one proc_bsdinfo of `size` bytes.
        let n = unsafe {
            libc::proc_pidinfo(
                pid as c_int,
                libc::PROC_PIDTBSDINFO,
                0,
                (&mut bsd as *mut libc::proc_bsdinfo).cast(),
                size,
            )
        };
        (n == size).then(|| Proc {
            pid,
            ppid: bsd.pbi_ppid,
            pgid: bsd.pbi_pgid,
            zombie: bsd.pbi_status == libc::SZOMB,
            started: bsd.pbi_start_tvsec * 1_000_000 + bsd.pbi_start_tvusec,
        })
    }

    /// The pids `proc_listpids(kind, arg)` lists, the buffer grown until they fit.
    fn list(kind: u32, arg: u32) -> Vec<u32> {
        let mut capacity = 1024usize;
        loop {
            let mut pids = vec![0 as libc::pid_t; capacity];
            let bytes = (capacity * std::mem::size_of::<libc::pid_t>()) as c_int;
            // SAFETY: the buffer holds `bytes` bytes; the kernel writes at most that.
            let n = unsafe { libc::proc_listpids(kind, arg, pids.as_mut_ptr().cast(), bytes) };
            let Ok(n) = usize::try_from(n) else {
                return Vec::new();
            };
            let got = n / std::mem::size_of::<libc::pid_t>();
            if got < capacity || capacity >= 1 << 20 {
                pids.truncate(got);
                return pids
                    .into_iter()
                    .filter_map(|p| u32::try_from(p).ok())
                    .filter(|p| *p > 0)
                    .collect();
            }
            capacity *= 4;
        }
    }

    pub fn children(pid: u32) -> Vec<u32> {
        list(PROC_PPID_ONLY, pid)
    }

    pub fn of_user(uid: u32) -> Vec<Proc> {
        list(PROC_UID_ONLY, uid)
            .into_iter()
            .filter_map(info)
            .collect()
    }

    pub fn environ(pid: u32) -> Option<Vec<u8>> {
        let mut argmax: c_int = 0;
        let mut len = std::mem::size_of::<c_int>();
        let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
        // SAFETY: a two-level name; the output is one c_int of `len` bytes.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                2,
                (&mut argmax as *mut c_int).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        let size = if rc == 0 && argmax > 0 {
            argmax as usize
        } else {
            1 << 20
        };
        let mut buf = vec![0u8; size];
        let mut len = size;
        let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid as c_int];
        // SAFETY: a three-level name; the buffer holds `len` bytes and the kernel sets
        // `len` to what it wrote.
        let rc = unsafe {
            libc::sysctl(
                mib.as_mut_ptr(),
                3,
                buf.as_mut_ptr().cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then(|| procargs2_env(&buf[..len.min(size)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_with_spaces_and_parentheses() {
        let line =
            "4242 (a (b) c) S 17 4240 4240 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100";
        let p = parse_stat(4242, line).unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 4242,
                ppid: 17,
                pgid: 4240,
                zombie: false,
                started: 987654
            }
        );
        let zombie = "7 (x) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(parse_stat(7, zombie).unwrap().zombie);
        assert_eq!(parse_stat(7, "7 (x) S 1"), None);
    }

    #[test]
    fn this_process_is_listed_with_its_parent_and_group() {
        let me = std::process::id();
        let p = info(me).unwrap();
        // SAFETY: getppid and getpgrp have no preconditions.
        let (ppid, pgid) = unsafe { (libc::getppid(), libc::getpgrp()) };
        assert_eq!(
            (p.ppid, p.pgid, p.zombie),
            (ppid as u32, pgid as u32, false)
        );
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert!(
            of_user(uid)
                .iter()
                .any(|q| q.pid == me && q.started == p.started)
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("CORRAL_PROCS_TEST", "a=b")
            .spawn()
            .unwrap();
        assert!(children(me).contains(&child.id()));
        // Right after the exec the environment may not be in place yet (Linux lets the
        // parent go on before it sets the environment's bounds).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while env_var(child.id(), "CORRAL_PROCS_TEST").is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "environment never readable"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            env_var(child.id(), "CORRAL_PROCS_TEST").as_deref(),
            Some("a=b")
        );
        assert_eq!(env_var(child.id(), "CORRAL_PROCS_TES"), None);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(info(child.id()), None);
    }

    /// A `KERN_PROCARGS2` buffer as macOS lays it out.
    fn procargs(argc: i32, path: &str, pad: usize, rest: &[&str]) -> Vec<u8> {
        let mut buf = argc.to_ne_bytes().to_vec();
        buf.extend_from_slice(path.as_bytes());
        buf.extend(std::iter::repeat_n(0, 1 + pad));
        for s in rest {
            buf.extend_from_slice(s.as_bytes());
            buf.push(0);
        }
        buf
    }

    #[test]
    fn procargs2_yields_the_environment_after_the_arguments() {
        let buf = procargs(
            3,
            "/usr/bin/python3",
            5,
            &[
                "python3",
                "",
                "CORRAL_SERVER=fake",
                "PATH=/bin",
                "CORRAL_SERVER=db",
                "",
                "executable_path=/usr/bin/python3",
            ],
        );
        let env = procargs2_env(&buf);
        let entries: Vec<&[u8]> = env_entries_nul(&env).collect();
        // The third argument looks like a variable; it is an argument all the same.
        assert_eq!(entries, [&b"PATH=/bin"[..], b"CORRAL_SERVER=db"]);
        assert_eq!(
            env_value(entries.iter().copied(), "CORRAL_SERVER").as_deref(),
            Some("db")
        );
        assert_eq!(env_value(entries, "executable_path"), None);
    }

    #[test]
    fn a_short_or_hostile_procargs2_buffer_has_no_environment() {
        for buf in [
            vec![],
            vec![1, 0],
            procargs(-1, "/x", 0, &["A=1"]),
            procargs(5, "/x", 0, &["a", "b"]),
            4i32.to_ne_bytes().to_vec(),
            procargs(0, "/x", 0, &[]),
        ] {
            assert!(procargs2_env(&buf).is_empty(), "{buf:?}");
        }
        assert_eq!(
            procargs2_env(&procargs(0, "/x", 0, &["A=1", "", "B=2"])),
            b"A=1\0"
        );
    }
}
