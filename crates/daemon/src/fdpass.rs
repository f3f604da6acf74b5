//! Passing file descriptors over the control socket (`SCM_RIGHTS`).
//!
//! The `corral mcp` bridge hands the agent's stdin/stdout pipes to the daemon, which then
//! speaks MCP on them directly: no byte is relayed through the bridge, so the bridge path
//! costs what the standalone path costs. The bridge stays alive (agents watch the process
//! they launched) and exits when the daemon ends the session.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Sends `fds` with one byte of data over the Unix socket `sock` (blocking).
pub fn send_fds(sock: &impl AsRawFd, fds: &[RawFd]) -> io::Result<()> {
    let data = [b'F'];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let payload = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; zeroed is a valid initial state.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer is CMSG_SPACE(payload) bytes, enough for one header
    // and `fds`; CMSG_FIRSTHDR/CMSG_DATA point into it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr() as *const u8, libc::CMSG_DATA(cmsg), payload);
        if libc::sendmsg(sock.as_raw_fd(), &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// How a received descriptor is kept from leaking into the children we spawn.
///
/// **Linux**: `MSG_CMSG_CLOEXEC`: the kernel installs the descriptors close-on-exec, so no
/// fork can ever see one without it.
///
/// **macOS**: there is no such flag; [`recv_fds`] sets `FD_CLOEXEC` on each descriptor
/// right after `recvmsg`. A server spawned by another thread in that window (between two
/// system calls) could inherit the agent's pipe; it is not otherwise reachable by it.
#[cfg(target_os = "linux")]
const RECV_FLAGS: libc::c_int = libc::MSG_CMSG_CLOEXEC;
#[cfg(not(target_os = "linux"))]
const RECV_FLAGS: libc::c_int = 0;

/// Receives up to `max` descriptors sent with [`send_fds`] from `sock`. The socket may be
/// non-blocking: `WouldBlock` means "not yet".
pub fn recv_fds(sock: &impl AsRawFd, max: usize) -> io::Result<Vec<OwnedFd>> {
    let mut data = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let payload = max * std::mem::size_of::<RawFd>();
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; zeroed is a valid initial state.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: recvmsg writes at most the buffers' sizes.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, RECV_FLAGS) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed"));
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages recvmsg filled in, within msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = len / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                for i in 0..count {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    #[cfg(not(target_os = "linux"))]
                    libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
                    fds.push(fd);
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_pipe_crosses_the_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut r, w) = std::io::pipe().unwrap();
        send_fds(&a, &[w.as_raw_fd()]).unwrap();
        drop(w);
        let fds = recv_fds(&b, 2).unwrap();
        assert_eq!(fds.len(), 1);
        let mut w2 = std::fs::File::from(fds.into_iter().next().unwrap());
        w2.write_all(b"through").unwrap();
        drop(w2);
        let mut got = String::new();
        r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "through");
    }
}
