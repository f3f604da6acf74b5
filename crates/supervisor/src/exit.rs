//! How a child ended, in words and in event fields.

use serde_json::{Map, Value};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// "exited with code 3", "killed by signal 9 (SIGKILL)".
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
        _ => "exited".to_owned(),
    }
}

/// `exit_code` or `signal` (and `signal_name`) fields for an event.
pub fn fields(status: ExitStatus) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(code) = status.code() {
        m.insert("exit_code".into(), code.into());
    }
    if let Some(sig) = status.signal() {
        m.insert("signal".into(), sig.into());
        m.insert("signal_name".into(), signal_name(sig).into());
    }
    m
}

/// The conventional name of a signal number.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_codes_and_signals() {
        assert_eq!(describe(ExitStatus::from_raw(3 << 8)), "exited with code 3");
        assert_eq!(
            describe(ExitStatus::from_raw(9)),
            "killed by signal 9 (SIGKILL)"
        );
        let f = fields(ExitStatus::from_raw(15));
        assert_eq!(f["signal"], 15);
        assert_eq!(f["signal_name"], "SIGTERM");
    }
}
