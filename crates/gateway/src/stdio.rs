//! The gateway on stdin/stdout: one session, newline-delimited JSON-RPC.

use crate::Session;
use crate::agent::Outbound;
use crate::hub::Hub;
use crate::jsonrpc;
use corral_events::{Event, Kind, Source};
use corral_supervisor::lines::{LineRead, read_line_bounded, top_level_id};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;

/// Longest message accepted from the agent.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// Bytes queued for an agent that does not read its stdout, beyond the message being
/// written: past this the session is dropped (`agent.dropped`), not buffered. A single
/// message of any size is always accepted into an empty queue.
pub const OUTBOUND_LIMIT: usize = 32 * 1024 * 1024;

/// The session's queue to the agent's stdout, counted in bytes.
#[derive(Clone)]
struct Queue {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    state: Arc<QueueState>,
}

struct QueueState {
    /// Bytes sent and not yet taken by the writer.
    queued: AtomicUsize,
    /// Set once the limit was passed: nothing more is queued.
    over: AtomicBool,
    dropped: tokio::sync::Notify,
}

impl Queue {
    fn push(&self, message: Vec<u8>) {
        let len = message.len();
        let before = self.state.queued.fetch_add(len, Ordering::Relaxed);
        if before > 0 && before + len > OUTBOUND_LIMIT {
            self.state.queued.fetch_sub(len, Ordering::Relaxed);
            if !self.state.over.swap(true, Ordering::Relaxed) {
                self.state.dropped.notify_one();
            }
            return;
        }
        if self.tx.send(message).is_err() {
            self.state.queued.fetch_sub(len, Ordering::Relaxed);
        }
    }
}

struct StdoutOutbound(Queue);

impl Outbound for StdoutOutbound {
    fn send(&self, message: Vec<u8>, _related: Option<&RawValue>) {
        self.0.push(message);
    }
}

/// Ends a session however [`serve`] ends. Dropped with the future (the bridge that
/// handed over the agent's pipes died, the command was interrupted), it cancels the
/// calls in flight — the servers get `notifications/cancelled` — and closes the agent's
/// pipes; after a normal end there is nothing left for it to do.
struct SessionGuard {
    hub: Arc<Hub>,
    id: u64,
    /// Weak: the session (and with it the writer's last sender) must go away when its
    /// requests are done, or the writer would wait for it forever.
    session: std::sync::Weak<Session>,
    writer: tokio::task::AbortHandle,
    reason: &'static str,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(session) = self.session.upgrade() {
            session.cancel_all();
        }
        self.hub.close_session(self.id, self.reason);
        self.writer.abort();
    }
}

/// Serves one agent on `input`/`output` until the agent closes `input`; responses still
/// in flight are written before returning. Dropping the future instead ends the session
/// at once: its calls are cancelled and `output` is closed.
pub async fn serve(
    hub: Arc<Hub>,
    profile: Option<&str>,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) {
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let state = Arc::new(QueueState {
        queued: AtomicUsize::new(0),
        over: AtomicBool::new(false),
        dropped: tokio::sync::Notify::new(),
    });
    let queue = Queue {
        tx,
        state: state.clone(),
    };
    let writer = tokio::spawn(write_loop(output, rx, state.clone()));
    let out = Arc::new(StdoutOutbound(queue.clone()));
    let session = crate::Session::open(&hub, out, "stdio", profile);
    let mut guard = SessionGuard {
        hub: hub.clone(),
        id: session.id(),
        session: Arc::downgrade(&session),
        writer: writer.abort_handle(),
        reason: "gone",
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let read = read_loop(&session, &mut reader, &queue);
    tokio::select! {
        () = read => {}
        () = state.dropped.notified() => {
            // The agent stopped reading: drop the session rather than buffer for it.
            hub.emit(
                Event::new(Kind::AgentDropped, Source::Corral)
                    .with("session", session.id())
                    .with("transport", "stdio")
                    .with(
                        "reason",
                        format!(
                            "the agent did not read its stdout: over {} MiB of messages \
                             queued for it",
                            OUTBOUND_LIMIT >> 20
                        ),
                    )
                    .with("limit_bytes", OUTBOUND_LIMIT as u64),
            );
            guard.reason = "dropped: not reading";
            return;
        }
    }
    // The agent closed its input: answer what is in flight, then end.
    guard.reason = "closed";
    hub.close_session(session.id(), guard.reason);
    drop(session);
    drop(queue);
    let _ = writer.await;
}

/// Reads the agent's messages until it closes its input. A line over [`MAX_MESSAGE`] is
/// discarded as it streams (never held whole) and answered with an error.
async fn read_loop(
    session: &Arc<Session>,
    reader: &mut (impl AsyncBufRead + Unpin),
    queue: &Queue,
) {
    let mut line = Vec::with_capacity(4096);
    loop {
        // A large message's buffer is not kept for the session's life.
        if line.capacity() > 1024 * 1024 {
            line = Vec::with_capacity(4096);
        }
        line.clear();
        match read_line_bounded(reader, &mut line, MAX_MESSAGE).await {
            Ok(LineRead::Eof) | Err(_) => break,
            Ok(LineRead::TooLong { len }) => {
                let id = top_level_id(&line).map(jsonrpc::raw_str);
                queue.push(jsonrpc::error(
                    id.as_deref(),
                    jsonrpc::INVALID_REQUEST,
                    &format!(
                        "message of {len} bytes is over the {} MiB limit on one message; it \
                         was discarded (send large data as a file path or a URL instead)",
                        MAX_MESSAGE >> 20
                    ),
                ));
                continue;
            }
            Ok(LineRead::Line) => {}
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let queue = queue.clone();
        session.receive(
            &line,
            Box::new(move |reply| {
                if let Some(r) = reply {
                    queue.push(r);
                }
            }),
        );
    }
}

async fn write_loop(
    output: impl AsyncWrite + Unpin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    state: Arc<QueueState>,
) {
    let mut w = BufWriter::with_capacity(64 * 1024, output);
    while let Some(msg) = rx.recv().await {
        let mut next = Some(msg);
        while let Some(m) = next.take() {
            state.queued.fetch_sub(m.len(), Ordering::Relaxed);
            if w.write_all(&m).await.is_err() || w.write_all(b"\n").await.is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        if w.flush().await.is_err() {
            return;
        }
    }
}
