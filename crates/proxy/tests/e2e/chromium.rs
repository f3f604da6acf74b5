//! Headless Chromium: Debian's `chromium`, a fresh profile, DevTools on a port the OS
//! picks (`--remote-debugging-port=0`; the address is read from the
//! `DevTools listening on ws://…` line Chromium prints to stderr).

use super::cdp::{Cdp, Page};
use super::proc::{self, Group, Log, TempDir};
use std::sync::Arc;

pub struct Chromium {
    pub cdp: Arc<Cdp>,
    /// Its stderr, for messages when something fails.
    pub stderr: Arc<Log<String>>,
    /// The browser's DevTools websocket.
    pub ws_url: String,
    group: Group,
    _profile: TempDir,
}

impl Chromium {
    /// Starts Chromium on `about:blank` and connects to it. Panics naming the package
    /// when it is not installed.
    pub async fn launch() -> Chromium {
        let bin = ["chromium", "chromium-browser"]
            .iter()
            .find_map(|name| proc::which(name))
            .unwrap_or_else(|| panic!("{}", super::not_installed("chromium (Debian package)")));
        let profile = TempDir::new("chromium");
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        let mut group =
            Group::spawn("chromium", cmd).unwrap_or_else(|e| panic!("spawning chromium: {e}"));
        // Drained for the browser's whole life: a full pipe would block it.
        let stderr = proc::lines(group.child.stderr.take().unwrap());
        let ws_url = stderr
            .wait_for("chromium's DevTools address", super::DEADLINE, |line| {
                line.strip_prefix("DevTools listening on ")
                    .map(|url| url.trim().to_owned())
            })
            .await
            .unwrap_or_else(|e| {
                panic!("{e}\nchromium's stderr:\n{}", stderr.snapshot().join("\n"))
            });
        let cdp = Cdp::connect(&ws_url)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Chromium {
            cdp: Arc::new(cdp),
            stderr,
            ws_url,
            group,
            _profile: profile,
        }
    }

    /// A new tab on `about:blank`, attached.
    pub async fn page(&self) -> Page {
        Page::open(self.cdp.clone())
            .await
            .unwrap_or_else(|e| panic!("opening a page: {e}\n{}", self.stderr_tail()))
    }

    /// The last lines of its stderr, for a failure message.
    pub fn stderr_tail(&self) -> String {
        let lines = self.stderr.snapshot();
        let start = lines.len().saturating_sub(30);
        format!(
            "chromium's stderr (last lines):\n{}",
            lines[start..].join("\n")
        )
    }

    /// Closes the browser: the whole process group is killed, and this waits until no
    /// process of it is left, nor one that runs on its profile (the crash handler leaves
    /// the group, and quits once the browser is gone).
    pub async fn close(self) {
        let pgid = self.group.pgid();
        let profile = self._profile.path().to_string_lossy().into_owned();
        let ours = |p: &proc::LiveProcess| p.pgid == pgid || p.cmdline.contains(&profile);
        // The check below means something only if it sees the browser while it runs.
        let running = proc::live_processes(ours);
        assert!(
            running.len() > 1
                && running
                    .iter()
                    .any(|p| p.cmdline.contains("--type=renderer")),
            "chromium's processes are not where they are looked for: {running:#?}"
        );
        drop(self.cdp);
        self.group.kill().await;
        proc::wait_gone("chromium", super::DEADLINE, ours).await;
    }
}
