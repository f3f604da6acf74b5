//! The gateway on stdin/stdout: one session, newline-delimited JSON-RPC.

use crate::Session;
use crate::hub::{Hub, Outbound};
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::sync::mpsc;

/// Longest message accepted from the agent.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

struct StdoutOutbound(mpsc::UnboundedSender<Vec<u8>>);

impl Outbound for StdoutOutbound {
    fn send(&self, message: Vec<u8>, _related: Option<&RawValue>) {
        let _ = self.0.send(message);
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
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) {
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_loop(output, rx));
    let session = hub.open_session(Arc::new(StdoutOutbound(tx.clone())), "stdio");
    let mut guard = SessionGuard {
        hub: hub.clone(),
        id: session.id(),
        session: Arc::downgrade(&session),
        writer: writer.abort_handle(),
        reason: "gone",
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_MESSAGE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > MAX_MESSAGE {
            let _ = tx.send(crate::jsonrpc::error(
                None,
                crate::jsonrpc::INVALID_REQUEST,
                "message longer than 64 MiB",
            ));
            // Skip the rest of that line.
            let mut rest = Vec::new();
            let _ = reader.read_until(b'\n', &mut rest).await;
            continue;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let tx = tx.clone();
        session.receive(
            &line,
            Box::new(move |reply| {
                if let Some(r) = reply {
                    let _ = tx.send(r);
                }
            }),
        );
    }
    // The agent closed its input: answer what is in flight, then end.
    guard.reason = "closed";
    hub.close_session(session.id(), guard.reason);
    drop(session);
    drop(tx);
    let _ = writer.await;
}

async fn write_loop(output: impl AsyncWrite + Unpin, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut w = BufWriter::with_capacity(64 * 1024, output);
    while let Some(msg) = rx.recv().await {
        let mut next = Some(msg);
        while let Some(m) = next.take() {
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
