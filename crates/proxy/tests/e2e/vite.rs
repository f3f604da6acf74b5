//! The Vite dev server (`.peers/vite/node_modules/.bin/vite`, installed by
//! `scripts/install-peers.sh`) serving a project directory.
//!
//! The port: Vite's CLI cannot be given port 0 (it treats 0 as unset and takes 5173), and
//! a port reserved by binding 127.0.0.1:0 and passed with `--strictPort` could be taken
//! by someone else between our release and Vite's bind. So Vite gets such a port only as
//! where to *start*, without `--strictPort`: if it is taken by then, Vite itself moves on
//! to the next free one, binding atomically. The port it ends up on is read from the
//! `Local: http://…` line it prints, never assumed.

use super::proc::{self, Group, Log};
use std::path::Path;
use std::sync::Arc;

pub struct Vite {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    /// Its stdout and stderr, interleaved in arrival order per stream.
    pub stdout: Arc<Log<String>>,
    pub stderr: Arc<Log<String>>,
    group: Group,
}

impl Vite {
    /// Starts `vite` in `project` and waits for it to say where it listens.
    pub async fn start(project: &Path) -> Vite {
        let bin = super::repo().join(".peers/vite/node_modules/.bin/vite");
        assert!(
            bin.exists(),
            "{}",
            super::not_installed("vite (npm, in .peers/vite)")
        );
        let start_port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(["--host", "127.0.0.1", "--port"])
            .arg(start_port.to_string())
            .args(["--clearScreen", "false", "--logLevel", "info"])
            .current_dir(project)
            // Plain output (CI=true alone turns picocolors' colours on) and no browser.
            .env("NO_COLOR", "1")
            .env_remove("FORCE_COLOR")
            .env("BROWSER", "none")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut group = Group::spawn("vite", cmd).unwrap_or_else(|e| panic!("spawning vite: {e}"));
        let stdout = proc::lines(group.child.stdout.take().unwrap());
        let stderr = proc::lines(group.child.stderr.take().unwrap());
        let found = stdout
            .wait_for("vite's Local URL", super::DEADLINE, |line| {
                let rest = line.split_once("Local:")?.1.trim();
                let url = rest.split_whitespace().next()?;
                url.starts_with("http://")
                    .then(|| url.trim_end_matches('/').to_owned())
            })
            .await;
        let url = found.unwrap_or_else(|e| {
            panic!(
                "{e}\nvite's stdout:\n{}\nvite's stderr:\n{}",
                stdout.snapshot().join("\n"),
                stderr.snapshot().join("\n")
            )
        });
        Vite {
            url,
            stdout,
            stderr,
            group,
        }
    }

    /// Its output so far, for a failure message.
    pub fn output(&self) -> String {
        format!(
            "vite's stdout:\n{}\nvite's stderr:\n{}",
            self.stdout.snapshot().join("\n"),
            self.stderr.snapshot().join("\n")
        )
    }

    /// Stops Vite: its process group is killed (node and its esbuild service), and this
    /// waits until none of it is left.
    pub async fn stop(self) {
        let pgid = self.group.pgid();
        let ours = |p: &proc::LiveProcess| p.pgid == pgid;
        // The check below means something only if it sees Vite while it runs.
        let running = proc::live_processes(ours);
        assert!(
            running.iter().any(|p| p.cmdline.contains("vite")),
            "vite's processes are not where they are looked for: {running:#?}"
        );
        self.group.kill().await;
        proc::wait_gone("vite", super::DEADLINE, ours).await;
    }
}
