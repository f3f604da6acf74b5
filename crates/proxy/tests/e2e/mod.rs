//! The harness of the dev proxy's end-to-end tests: the real peers a developer runs
//! behind the proxy, started the way they are on a desk.
//!
//! * [`chromium`]: headless Chromium (Debian's `chromium`), driven over the DevTools
//!   protocol ([`cdp`]) on a websocket.
//! * [`vite`]: the Vite dev server (npm `vite`, in `.peers/vite`).
//!
//! (The stand-in target server and the HTTP client are the proxy tests' `tests/common`.)
//!
//! Every child runs in its own process group, killed whole when its guard drops
//! ([`proc::Group`]), so a failing test leaves no browser helpers or esbuild services
//! behind. Waits are on a condition with a deadline ([`proc::Log::wait_for`]); the
//! deadlines are generous for a loaded two-core machine, the happy path does not wait
//! for them.
//!
//! The peers are installed by `scripts/install-peers.sh`; a missing one fails the test
//! with a message saying so.
#![allow(dead_code)]

pub mod cdp;
pub mod chromium;
pub mod proc;
pub mod vite;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long any one thing may take: a browser start, a page load, a report to arrive.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This directory: the fixtures beside the harness.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e")
}

/// A fixture file's text.
pub fn fixture(path: &str) -> String {
    let p = fixtures().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The message a test fails with when a peer is missing.
pub fn not_installed(what: &str) -> String {
    format!(
        "{what} is not installed: run ./scripts/install-peers.sh (./scripts/test.sh does); \
         the dev proxy's end-to-end tests need it"
    )
}
