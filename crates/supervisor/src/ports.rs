//! Which of the project's dev processes serves a TCP port: so that a request the dev
//! proxy sees fail can be joined to what the process behind it printed meanwhile.
//!
//! Linux: the kernel's socket tables (`/proc/net/tcp`, `/proc/net/tcp6`) give the
//! inodes of the sockets listening on the port; a process holds one when a link in
//! `/proc/PID/fd` reads `socket:[INODE]`. Only the processes Corral started are looked
//! at (each run's leader and its descendants, through `/proc/PID/task/*/children`), so
//! the walk is a few directories, and only our own processes' fds are readable anyway.
//! A listener passed down to a child (uvicorn's and werkzeug's reloaders bind in the
//! parent) is found in either: both are the same unit. Reading the tables costs ~10 ms
//! in some sandboxes even when they are nearly empty, so [`PortOwners`] remembers an
//! answer for as long as the runs it names are the same.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Processes walked per unit at most (a leader and its descendants).
const MAX_TREE: usize = 256;
/// How long a miss (no unit listens) is believed before looking again.
const MISS_TTL: Duration = Duration::from_secs(2);

/// The inodes of the sockets listening on `port`, IPv4 and IPv6.
fn listening_inodes(port: u16) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            inodes.extend(listeners_in(&text, port));
        }
    }
    inodes
}

/// The inodes of the LISTEN entries (state `0A`) of a socket table whose local port is
/// `port`.
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

/// `root` and its descendants, at most [`MAX_TREE`].
fn tree(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_TREE {
        let pid = out[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("children");
            if let Ok(children) = std::fs::read_to_string(path) {
                out.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    out.truncate(MAX_TREE);
    out
}

/// Whether `pid` holds one of `inodes`.
fn holds(pid: u32, inodes: &HashSet<u64>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
                .is_some_and(|inode| inodes.contains(&inode))
        })
    })
}

/// Which of `units` (name, pid of its current run's leader) listens on `port`.
pub fn listener_of(port: u16, units: &[(String, u32)]) -> Option<String> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    units
        .iter()
        .find(|(_, leader)| tree(*leader).into_iter().any(|pid| holds(pid, &inodes)))
        .map(|(name, _)| name.clone())
}

/// Remembered answers of [`listener_of`]: an owner for as long as its run (its leader's
/// pid) is the same, a miss for [`MISS_TTL`].
#[derive(Default)]
pub struct PortOwners {
    known: Mutex<HashMap<u16, Known>>,
}

enum Known {
    Owner {
        unit: String,
        leader: u32,
    },
    Nobody {
        at: Instant,
        units: Vec<(String, u32)>,
    },
}

impl PortOwners {
    /// The unit of `units` listening on `port`, from memory when still true.
    pub fn owner(&self, port: u16, units: &[(String, u32)]) -> Option<String> {
        if let Some(known) = self.known.lock().unwrap().get(&port) {
            match known {
                Known::Owner { unit, leader } => {
                    if units.iter().any(|(n, l)| n == unit && l == leader) {
                        return Some(unit.clone());
                    }
                }
                Known::Nobody { at, units: then } => {
                    if at.elapsed() < MISS_TTL && then == units {
                        return None;
                    }
                }
            }
        }
        let found = listener_of(port, units);
        let known = match &found {
            Some(unit) => Known::Owner {
                unit: unit.clone(),
                leader: units.iter().find(|(n, _)| n == unit).map_or(0, |(_, l)| *l),
            },
            None => Known::Nobody {
                at: Instant::now(),
                units: units.to_vec(),
            },
        };
        self.known.lock().unwrap().insert(port, known);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn listen_entries_are_found_by_port_and_state() {
        // Two ports the OS gave (nothing fixed), as the kernel writes them: hex.
        let bind = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
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
    fn a_listener_in_a_child_is_its_units() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        // This test process is one unit's leader; another unit's (a child that holds
        // no socket: the listener is close-on-exec) does not hold it.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let units = vec![
            ("process:other".to_owned(), other.id()),
            ("process:me".to_owned(), me),
        ];
        assert_eq!(listener_of(port, &units).as_deref(), Some("process:me"));
        assert_eq!(listener_of(port, &units[..1]), None);
        let _ = other.kill();
        let _ = other.wait();
        let owners = PortOwners::default();
        assert_eq!(owners.owner(port, &units).as_deref(), Some("process:me"));
        // Remembered while the run is the same; asked again when the run changed.
        drop(listener);
        assert_eq!(owners.owner(port, &units).as_deref(), Some("process:me"));
        let moved = vec![("process:me".to_owned(), me + 1_000_000)];
        assert_eq!(owners.owner(port, &moved), None);
    }
}
