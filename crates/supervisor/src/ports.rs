//! Which of the project's dev processes serves a TCP port: so that a request the dev
//! proxy sees fail can be joined to what the process behind it printed meanwhile.
//!
//! The listening socket's holder comes from [`platform::port_owner`], the process trees
//! from [`platform::procs`]. Only the processes Corral started are looked at (each run's
//! leader and its descendants), so the walk is a few processes. A listener passed down
//! to a child (uvicorn's and werkzeug's reloaders bind in the parent) is found in
//! either: both are the same unit. Reading the socket tables costs ~10 ms in some
//! sandboxes even when they are nearly empty, so [`PortOwners`] remembers an answer for
//! as long as the runs it names are the same.

use crate::platform::{self, port_owner::Listening};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Processes walked per unit at most (a leader and its descendants).
const MAX_TREE: usize = 256;
/// How long a miss (no unit listens) is believed before looking again.
const MISS_TTL: Duration = Duration::from_secs(2);

/// `root` and its descendants, at most [`MAX_TREE`].
fn tree(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_TREE {
        let pid = out[i];
        i += 1;
        out.extend(platform::procs::children(pid));
    }
    out.truncate(MAX_TREE);
    out
}

/// Which of `units` (name, pid of its current run's leader) listens on `port`.
pub fn listener_of(port: u16, units: &[(String, u32)]) -> Option<String> {
    let listening = Listening::on(port)?;
    units
        .iter()
        .find(|(_, leader)| tree(*leader).into_iter().any(|pid| listening.held_by(pid)))
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
