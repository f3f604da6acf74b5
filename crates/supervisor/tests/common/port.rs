//! A loopback port reserved for a test without holding it open to connections.
//!
//! A test that needs a program to start listening on a known port later cannot pick a
//! free port and release it: another process (another project's Corral) may take it in
//! between. Instead the test binds port 0 with `SO_REUSEPORT` and keeps the socket
//! bound but not listening: no process without `SO_REUSEPORT` can bind the port, a
//! connection to it is refused (nobody listens), and the program under test binds it
//! with `SO_REUSEPORT` too when it starts listening. Shared by the supervisor's and the
//! CLI's tests.

use std::os::fd::{FromRawFd, OwnedFd};

/// A reserved port: bound (not listening) for as long as this lives.
pub struct ReservedPort {
    _socket: OwnedFd,
    pub port: u16,
}

/// Close-on-exec at creation where the OS has it (Linux); these tests run on Linux.
#[cfg(target_os = "linux")]
const SOCK_CLOEXEC: libc::c_int = libc::SOCK_CLOEXEC;
#[cfg(not(target_os = "linux"))]
const SOCK_CLOEXEC: libc::c_int = 0;

/// Reserves a free loopback port (see the module docs). A program binds it with
/// `setsockopt(SOL_SOCKET, SO_REUSEPORT, 1)` before `bind`.
pub fn reserve_port() -> ReservedPort {
    // SAFETY: plain socket calls on a descriptor we own; every result is checked.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let socket = OwnedFd::from_raw_fd(fd);
        let one: libc::c_int = 1;
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "SO_REUSEPORT: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let r = libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len);
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        let mut len = len;
        let r = libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_in).cast(), &mut len);
        assert_eq!(r, 0, "getsockname: {}", std::io::Error::last_os_error());
        ReservedPort {
            _socket: socket,
            port: u16::from_be(addr.sin_port),
        }
    }
}
