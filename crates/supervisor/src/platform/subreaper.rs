//! Orphaned descendants of our servers come back to us, so that the
//! [reaper](crate::reaper) can find a helper that left its server's process group.

/// Make this process the reaper of its orphaned descendants.
///
/// **Linux**: `PR_SET_CHILD_SUBREAPER`: a descendant whose parent dies is reparented to
/// us instead of to init, so a helper that daemonized (fork, `setsid`, fork, exit) is
/// still ours to find, contain and stop.
///
/// **macOS**: there is no subreaper; an orphan goes to launchd. This returns
/// [`std::io::ErrorKind::Unsupported`], the supervisor warns that processes which leave
/// their server's process group are not stopped with it, and the guard's process-group
/// kill is all that reaches a server's descendants (README.md, SECURITY.md).
pub fn become_subreaper() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer argument only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this OS has no subreaper (PR_SET_CHILD_SUBREAPER is Linux's)",
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn linux_makes_us_the_subreaper() {
        super::become_subreaper().expect("PR_SET_CHILD_SUBREAPER");
        let mut on: libc::c_int = 0;
        // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
        let rc = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut on as *mut libc::c_int) };
        assert_eq!((rc, on), (0, 1));
    }
}
