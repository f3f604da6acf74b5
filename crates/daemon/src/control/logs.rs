//! `logs`: a server's stderr log, and with `follow` its new lines as they come.

use super::{State, send_line, unknown_unit};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The `logs` request: the log lines of a server (its stderr) or of a dev process (its
/// output, with a header line per run), or the refusal of an unknown name.
pub(crate) async fn stream(
    state: &State,
    name: &str,
    lines: usize,
    follow: bool,
    write: &mut (impl AsyncWriteExt + Unpin),
) {
    let path = match (state.server(name), state.processes.get(name)) {
        (Some(h), _) => h.log_path().to_owned(),
        (None, Some(p)) => p.log_path().to_owned(),
        (None, None) => {
            let _ = write
                .write_all(unknown_unit(state, name).line().as_bytes())
                .await;
            return;
        }
    };
    follow_log(path, lines, follow, write, state).await;
}

/// Log lines as `{"line": …}` JSON lines: the last `n`, then (with `follow`) new ones as
/// the file grows, across rotations, until the client leaves or the daemon stops.
async fn follow_log(
    path: PathBuf,
    n: usize,
    follow: bool,
    write: &mut (impl AsyncWriteExt + Unpin),
    state: &State,
) {
    let text = corral_gateway::tools::tail_of_file(&path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    for l in &all[all.len().saturating_sub(n)..] {
        if send_line(write, &json!({ "line": l }).to_string())
            .await
            .is_err()
        {
            return;
        }
    }
    if !follow {
        return;
    }
    let mut follower = corral_supervisor::stderr::LogFollower::new(&path);
    let stopping = state.shutdown.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopping.cancelled() => return,
        }
        for text in follower.poll() {
            if send_line(write, &json!({ "line": text }).to_string())
                .await
                .is_err()
            {
                return;
            }
        }
    }
}
