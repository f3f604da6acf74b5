//! How long a request to a server may take, when its caller needs to move the clock
//! while the request is in flight.
//!
//! A call that a 2026-07-28 agent's request started can be parked by the gateway while
//! the agent answers the server's question (elicitation, sampling): a human's pace, not
//! `call_timeout`. The gateway runs such a call inside [`PATIENCE`]; while it
//! [holds](Patience::hold) the clock, the request never times out (the gateway's own
//! deadline cancels the call instead), and when it [resumes](Patience::resume), the
//! request has its full `call_timeout` again from that moment.

use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

tokio::task_local! {
    /// The clock of the requests made by the current task, when its caller moves it.
    pub static PATIENCE: Arc<Patience>;
}

/// A movable clock for the requests of one call.
#[derive(Debug, Default)]
pub struct Patience {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct State {
    held: bool,
    restarted: Option<Instant>,
}

impl Patience {
    /// Stops the clock: requests in flight wait without a timeout.
    pub fn hold(&self) {
        self.state.lock().unwrap().held = true;
        self.changed.notify_one();
    }

    /// Restarts the clock: requests in flight get their whole timeout again, from now.
    pub fn resume(&self) {
        *self.state.lock().unwrap() = State {
            held: false,
            restarted: Some(Instant::now()),
        };
        self.changed.notify_one();
    }

    fn state(&self) -> State {
        *self.state.lock().unwrap()
    }
}

/// Waits for `rx` until `deadline` (the request's `timeout` after it started), moved by
/// the task's [`PATIENCE`] if it has one. `None`: timed out.
pub(crate) async fn wait<T>(
    deadline: Instant,
    timeout: std::time::Duration,
    mut rx: oneshot::Receiver<T>,
) -> Option<Result<T, oneshot::error::RecvError>> {
    let Ok(patience) = PATIENCE.try_with(Arc::clone) else {
        return tokio::time::timeout_at(deadline, rx).await.ok();
    };
    loop {
        let s = patience.state();
        let until = s.restarted.map_or(deadline, |r| deadline.max(r + timeout));
        tokio::select! {
            r = &mut rx => return Some(r),
            _ = patience.changed.notified() => {}
            _ = tokio::time::sleep_until(until), if !s.held => return None,
        }
    }
}
