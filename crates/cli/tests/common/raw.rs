//! `corral mcp --standalone` fed raw lines, for traffic no SDK would send (malformed
//! requests, forged retries) and checks on the exact bytes of an answer.
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;

pub struct Raw {
    child: Child,
    pub stdin: ChildStdin,
    /// Corral's stdout, a line at a time.
    pub lines: Receiver<String>,
}

impl Raw {
    pub fn start(p: &super::Project) -> Raw {
        Self::start_with(p, &[])
    }

    /// [`Raw::start`] with `envs` set for `corral mcp`.
    pub fn start_with(p: &super::Project, envs: &[(&str, &str)]) -> Raw {
        let mut child = p
            .cmd(&["mcp", "--standalone"])
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = super::lines_of(child.stdout.take().unwrap());
        Raw {
            child,
            stdin,
            lines,
        }
    }

    /// Sends `line`; the next line Corral writes, as it came.
    pub fn ask_text(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        self.lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no answer to {line}"))
    }

    /// Sends `line`; the next message Corral writes.
    pub fn ask(&mut self, line: &str) -> Value {
        serde_json::from_str(&self.ask_text(line)).unwrap()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
