//! Which local user a TCP peer on this machine is: the owner of its socket, as the
//! kernel's socket tables say (`/proc/net/tcp`, `/proc/net/tcp6`).
//!
//! A loopback port is open to every user of the machine. Where that matters (what the
//! agent reads must not be writable by another user), the endpoint asks who is on the
//! other end: the peer's socket is an entry of the same table, its local address the
//! peer's and its remote address ours, and the entry carries its owner's uid. A peer
//! that is not in the table is on another host (a proxy listening beyond loopback).
//! Reading the table costs a fraction of a millisecond, so callers ask only for the
//! requests that need it.
//!
//! **Linux**: `/proc/net/tcp` and `/proc/net/tcp6`, readable by every user.
//! **macOS**: no `/proc`, and no public call names a TCP socket's owner (it is in the
//! private structures of `sysctl net.inet.tcp.pcblist_n`): every peer is
//! [`PeerUser::Unknown`], as one from another host (SECURITY.md, "On macOS").

use std::net::{IpAddr, SocketAddr};

/// Who is on the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerUser {
    /// A process of the user this process runs as.
    Same,
    /// A process of another local user (its uid).
    Other(u32),
    /// Not found in this machine's socket tables: another host, or a connection that
    /// closed meanwhile.
    Unknown,
}

/// The owner of the local socket at `peer` connected to our port `local_port`.
pub fn peer_user(peer: SocketAddr, local_port: u16) -> PeerUser {
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let Ok(text) = std::fs::read_to_string(table) else {
        return PeerUser::Unknown;
    };
    match owner(&text, peer, local_port) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(uid) if uid == unsafe { libc::geteuid() } => PeerUser::Same,
        Some(uid) => PeerUser::Other(uid),
        None => PeerUser::Unknown,
    }
}

/// The uid of the entry of `table` whose local address is `peer` and whose remote port
/// is `local_port`.
fn owner(table: &str, peer: SocketAddr, local_port: u16) -> Option<u32> {
    let want = address(peer.ip(), peer.port());
    table.lines().skip(1).find_map(|line| {
        let mut fields = line.split_whitespace();
        let _slot = fields.next()?;
        let local = fields.next()?;
        let remote = fields.next()?;
        let remote_port = u16::from_str_radix(remote.rsplit_once(':')?.1, 16).ok()?;
        if !local.eq_ignore_ascii_case(&want) || remote_port != local_port {
            return None;
        }
        // st, tx_queue:rx_queue, tr:tm->when, retrnsmt, then uid.
        fields.nth(4)?.parse().ok()
    })
}

/// An address as the kernel's tables write it: the IP's 32-bit words each in this
/// machine's byte order, in hex, then `:` and the port in hex.
fn address(ip: IpAddr, port: u16) -> String {
    let octets: Vec<u8> = match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    let mut out = String::new();
    for word in octets.chunks(4) {
        let word = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
        out.push_str(&format!("{word:08X}"));
    }
    out.push_str(&format!(":{port:04X}"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_connection_of_this_process_is_the_same_user() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer_user(peer, port), PeerUser::Same);
        // The same peer seen from another port is nobody's.
        assert_eq!(peer_user(peer, port.wrapping_add(1)), PeerUser::Unknown);
    }

    #[test]
    fn ipv6_loopback_peers_are_found_too() {
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            eprintln!("skipped: no IPv6 loopback here");
            return;
        };
        let port = listener.local_addr().unwrap().port();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer_user(peer, port), PeerUser::Same);
    }

    #[test]
    fn table_entries_are_read_by_address_and_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 12345 1 0000000000000000 20 4 30 10 -1\n\
            1: 0100007F:1F90 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 20 4 30 10 -1\n";
        if cfg!(target_endian = "little") {
            let peer: SocketAddr = "127.0.0.1:41394".parse().unwrap();
            assert_eq!(owner(table, peer, 8080), Some(1001));
            assert_eq!(owner(table, peer, 8081), None);
            let ours: SocketAddr = "127.0.0.1:8080".parse().unwrap();
            assert_eq!(owner(table, ours, 41394), Some(0));
        }
    }
}
