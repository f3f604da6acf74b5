//! How far this process may raise its open-files limit.

/// The soft `RLIMIT_NOFILE` to raise to, given the current soft and hard limits, or
/// `None` when it is as high as it may go.
///
/// **Linux**: the hard limit: `setrlimit` takes any soft limit up to it (the hard limit
/// itself is at most `fs.nr_open`).
///
/// **macOS**: the hard limit is often `RLIM_INFINITY`, and `setrlimit` refuses a soft
/// limit above the per-process cap (`kern.maxfilesperproc`, `OPEN_MAX` = 10240 when it
/// cannot be read) with `EINVAL`: the target is the smaller of the two.
pub fn raise_target(soft: u64, hard: u64) -> Option<u64> {
    target(soft, hard, os_cap())
}

/// [`raise_target`] with the OS's per-process cap given (`None`: no cap but the hard
/// limit).
fn target(soft: u64, hard: u64, cap: Option<u64>) -> Option<u64> {
    let to = cap.map_or(hard, |c| hard.min(c));
    (soft < to).then_some(to)
}

#[cfg(target_os = "linux")]
fn os_cap() -> Option<u64> {
    None
}

#[cfg(target_os = "macos")]
fn os_cap() -> Option<u64> {
    /// `OPEN_MAX` of `<sys/syslimits.h>`.
    const OPEN_MAX: u64 = 10240;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>();
    // SAFETY: the name is NUL-terminated; the output buffer is one c_int of `len` bytes.
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.maxfilesperproc".as_ptr(),
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    Some(if rc == 0 && value > 0 {
        value as u64
    } else {
        OPEN_MAX
    })
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn os_cap() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn the_soft_limit_rises_to_the_hard_limit_or_the_os_cap_whichever_is_lower() {
        // Linux: the hard limit.
        assert_eq!(target(1024, 524_288, None), Some(524_288));
        assert_eq!(target(524_288, 524_288, None), None);
        // macOS: an infinite hard limit is capped (RLIM_INFINITY is u64::MAX there).
        assert_eq!(target(256, u64::MAX, Some(24_576)), Some(24_576));
        assert_eq!(target(256, 10_000, Some(24_576)), Some(10_000));
        assert_eq!(target(24_576, u64::MAX, Some(24_576)), None);
        // Never lowered.
        assert_eq!(target(30_000, u64::MAX, Some(24_576)), None);
    }

    #[test]
    fn this_machine_gives_a_target_no_lower_than_the_current_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct passed.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        if let Some(to) = super::raise_target(lim.rlim_cur, lim.rlim_max) {
            assert!(to > lim.rlim_cur && to <= lim.rlim_max);
        }
    }
}
