//! A project's daemon driven through the `corral` CLI, as a user drives it: `up -d`,
//! `dashboard --no-browser` for login links, `ps --json`, `down`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A daemon started (or found running) for one config file.
pub struct Daemon {
    corral: PathBuf,
    config: PathBuf,
    /// The daemon's pid (`.corral/daemon.pid`).
    pub pid: u32,
    /// Stop it when this is dropped (it was started here).
    owned: bool,
}

impl Daemon {
    /// Starts the project's daemon in the background (`corral up -d`, which answers
    /// once its servers and processes have started); stopped when this is dropped.
    pub fn up(corral: &Path, config: &Path) -> Result<Daemon, String> {
        Daemon::attach(corral, config, false)
    }

    /// The daemon already running for `config` (left running when this is dropped).
    pub fn running(corral: &Path, config: &Path) -> Result<Daemon, String> {
        Daemon::attach(corral, config, true)
    }

    fn attach(corral: &Path, config: &Path, existing: bool) -> Result<Daemon, String> {
        let config = std::fs::canonicalize(config)
            .map_err(|e| format!("config {}: {e}", config.display()))?;
        let mut d = Daemon {
            corral: corral.to_owned(),
            config,
            pid: 0,
            owned: false,
        };
        if existing {
            d.corral(&["ps"])?;
        } else {
            d.corral(&["up", "-d"])?;
            d.owned = true;
        }
        d.pid = read_pid(&d.config)?;
        Ok(d)
    }

    /// Runs `corral -c CONFIG ARGS…`; its output, or why it failed.
    pub fn run(&self, args: &[&str]) -> Result<Output, String> {
        Command::new(&self.corral)
            .arg("-c")
            .arg(&self.config)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("running {}: {e}", self.corral.display()))
    }

    /// [`Daemon::run`] that must succeed: its stdout.
    pub fn corral(&self, args: &[&str]) -> Result<String, String> {
        let out = self.run(args)?;
        if !out.status.success() {
            return Err(format!(
                "`corral {}` failed ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A fresh one-time login link (`corral dashboard --no-browser`).
    pub fn login_url(&self) -> Result<String, String> {
        let out = self.corral(&["dashboard", "--no-browser"])?;
        out.lines()
            .map(str::trim)
            .find(|l| l.starts_with("http://") && l.contains("/dashboard/login#"))
            .map(str::to_owned)
            .ok_or_else(|| format!("`corral dashboard --no-browser` printed no link: {out}"))
    }

    /// `corral ps --json`.
    pub fn ps(&self) -> Result<Value, String> {
        let out = self.corral(&["ps", "--json"])?;
        serde_json::from_str(&out).map_err(|e| format!("`corral ps --json`: {e}: {out}"))
    }
}

fn read_pid(config: &Path) -> Result<u32, String> {
    let file = config
        .parent()
        .unwrap_or(Path::new("/"))
        .join(".corral/daemon.pid");
    std::fs::read_to_string(&file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("no daemon pid in {}", file.display()))
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.run(&["down"]);
        }
    }
}
