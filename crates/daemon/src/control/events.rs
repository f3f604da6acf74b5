//! `events`: the last lines of the journal, and with `follow` every new event until the
//! daemon's last.

use super::{State, send_line};
use crate::journal;
use corral_events::Kind;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast;

/// The last `lines` journal events as JSON lines; with `follow`, then every new one.
pub(crate) async fn stream(
    state: &State,
    lines: usize,
    follow: bool,
    write: &mut (impl AsyncWriteExt + Unpin),
) {
    // Subscribe before reading the journal, so nothing falls between the two.
    let mut rx = state.bus.subscribe();
    for ev in journal::tail(&state.paths.journal, lines) {
        if send_line(write, &ev.to_json_line()).await.is_err() {
            return;
        }
    }
    if !follow {
        return;
    }
    // A follower sees the daemon out: through shutdown (the servers' `stopped`
    // events) up to and including `daemon.stopped`; the daemon waits for it.
    let Some(_following) = state.followers.lock().unwrap().clone() else {
        return; // Already stopped.
    };
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if send_line(write, &ev.to_json_line()).await.is_err() || ev.is(Kind::DaemonStopped)
                {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
