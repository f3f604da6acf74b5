//! Which process holds the socket listening on a TCP port.
//!
//! **Linux**: the kernel's socket tables (`/proc/net/tcp`, `/proc/net/tcp6`) give the
//! inodes of the sockets listening on the port; a process holds one when a link in
//! `/proc/PID/fd` reads `socket:[INODE]`. Only our own processes' fds are readable,
//! which is all that is asked.
//!
//! **macOS**: libproc, through the [`listeners`] crate (its `socket_fdinfo` layout is
//! kept there, not here): the descriptors of each process of ours that can be read
//! (`proc_pidinfo(PROC_PIDLISTFDS)`, then `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`) until
//! one is a TCP socket on the port. One process is found, and a listener passed down to
//! a child (a reloader's) is held by both: callers match it against a whole process
//! tree, so either is right.

/// The sockets listening on one port, asked once and matched against many processes.
pub struct Listening(imp::Listening);

impl Listening {
    /// Who listens on `port`; `None` when nobody does.
    pub fn on(port: u16) -> Option<Listening> {
        imp::on(port).map(Listening)
    }

    /// Whether `pid` holds one of the sockets.
    pub fn held_by(&self, pid: u32) -> bool {
        self.0.held_by(pid)
    }
}

/// The inodes of the LISTEN entries (state `0A`) of a socket table whose local port is
/// `port`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn listeners_in(table: &str, port: u16) -> impl Iterator<Item = u64> + '_ {
    table.lines().skip(1).filter_map(move |line| {
        let mut fields = line.split_whitespace();
        let _slot = fields.next()?;
        let local = fields.next()?;
        let _remote = fields.next()?;
        let state = fields.next()?;
        let local_port = u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()?;
        if state != "0A" || local_port != port {
            return None;
        }
        // tx_queue:rx_queue, tr:tm->when, retrnsmt, uid, timeout, then inode.
        fields.nth(5)?.parse().ok()
    })
}

/// The inode a `/proc/PID/fd` link names when it is a socket (`socket:[INODE]`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::HashSet;

    pub struct Listening {
        inodes: HashSet<u64>,
    }

    pub fn on(port: u16) -> Option<Listening> {
        let mut inodes = HashSet::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Ok(text) = std::fs::read_to_string(table) {
                inodes.extend(super::listeners_in(&text, port));
            }
        }
        (!inodes.is_empty()).then_some(Listening { inodes })
    }

    impl Listening {
        pub fn held_by(&self, pid: u32) -> bool {
            let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
                return false;
            };
            fds.flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|target| {
                    target
                        .to_str()
                        .and_then(super::socket_inode)
                        .is_some_and(|inode| self.inodes.contains(&inode))
                })
            })
        }
    }
}

#[cfg(target_os = "macos")]
mod imp {
    pub struct Listening {
        pid: u32,
    }

    pub fn on(port: u16) -> Option<Listening> {
        let process = listeners::get_process_by_port(port, listeners::Protocol::TCP).ok()?;
        Some(Listening { pid: process.pid })
    }

    impl Listening {
        pub fn held_by(&self, pid: u32) -> bool {
            self.pid == pid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn listen_entries_are_found_by_port_and_state() {
        // Two ports the OS gave (nothing fixed), as the kernel writes them: hex.
        let bind = || TcpListener::bind("127.0.0.1:0").unwrap();
        let (a, b) = (bind(), bind());
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:{pa:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n\
            1: 0100007F:{pa:04X} 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0000000000000000 20 4 30 10 -1\n\
            2: 0100007F:{pb:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4244 1 0000000000000000 100 0 0 10 0\n"
        );
        assert_eq!(listeners_in(&table, pa).collect::<Vec<_>>(), vec![4242]);
        assert_eq!(listeners_in(&table, pb).collect::<Vec<_>>(), vec![4244]);
        assert_eq!(listeners_in(&table, 0).count(), 0);
    }

    #[test]
    fn fd_links_name_socket_inodes() {
        assert_eq!(socket_inode("socket:[4242]"), Some(4242));
        for other in ["pipe:[4242]", "socket:[x]", "socket:4242", "/dev/null", ""] {
            assert_eq!(socket_inode(other), None, "{other}");
        }
    }

    #[test]
    fn this_process_holds_its_listener_and_a_child_does_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let found = Listening::on(port).expect("our listener");
        assert!(found.held_by(std::process::id()));
        assert!(!found.held_by(child.id()), "the listener is close-on-exec");
        let _ = child.kill();
        let _ = child.wait();
        drop(listener);
        assert!(Listening::on(port).is_none());
    }
}
