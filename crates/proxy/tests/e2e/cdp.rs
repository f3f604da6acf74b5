//! A client of the Chrome DevTools protocol over its websocket: commands matched to their
//! responses by id, every event kept in a log to wait on. Sessions are flat
//! (`Target.attachToTarget` with `flatten`): a page's commands and events carry its
//! `sessionId` on the browser's one connection.

use super::proc::Log;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

/// How long a command may take to be answered.
const CALL_DEADLINE: Duration = Duration::from_secs(30);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// One connection to a browser's DevTools endpoint.
pub struct Cdp {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next_id: AtomicU64,
    /// Every event, in arrival order (`{"method", "params", "sessionId"?}`).
    pub events: Arc<Log<Value>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Cdp {
    pub async fn connect(ws_url: &str) -> Result<Cdp, String> {
        let (ws, _) = tokio_tungstenite::connect_async(ws_url)
            .await
            .map_err(|e| format!("DevTools websocket {ws_url}: {e}"))?;
        let (mut sink, mut stream) = ws.split();
        let (out, mut out_rx) = mpsc::unbounded_channel::<Message>();
        let pending: Pending = Arc::default();
        let events = Log::new();
        let writer = tokio::spawn(async move {
            while let Some(msg) = out_rx.recv().await {
                if sink.send(msg).await.is_err() {
                    break;
                }
            }
        });
        let reader = {
            let pending = pending.clone();
            let events = events.clone();
            tokio::spawn(async move {
                while let Some(Ok(msg)) = stream.next().await {
                    let Message::Text(text) = msg else { continue };
                    let Ok(value) = serde_json::from_str::<Value>(&text) else {
                        continue;
                    };
                    match value.get("id").and_then(Value::as_u64) {
                        Some(id) => {
                            if let Some(tx) = pending.lock().unwrap().remove(&id) {
                                let _ = tx.send(value);
                            }
                        }
                        None => events.push(value),
                    }
                }
                // The browser went away: fail every waiting call (dropping its sender).
                pending.lock().unwrap().clear();
                events.close();
            })
        };
        Ok(Cdp {
            out,
            pending,
            next_id: AtomicU64::new(1),
            events,
            tasks: vec![writer, reader],
        })
    }

    /// Sends `method` (to `session`, or the browser for `None`) and returns its `result`.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.out
            .send(Message::text(msg.to_string()))
            .map_err(|_| format!("{method}: the DevTools connection is closed"))?;
        let reply = match tokio::time::timeout(CALL_DEADLINE, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => return Err(format!("{method}: the DevTools connection closed")),
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                return Err(format!("{method}: no answer within {CALL_DEADLINE:?}"));
            }
        };
        match reply.get("error") {
            Some(e) => Err(format!("{method}: {e}")),
            None => Ok(reply.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    /// Waits for an event `method` of `session` whose params `pred` accepts, looking at
    /// events from index `from` on; returns its index and params.
    pub async fn wait_event(
        &self,
        from: usize,
        session: Option<&str>,
        method: &str,
        deadline: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Result<(usize, Value), String> {
        self.events
            .wait_for_from(from, &format!("DevTools event {method}"), deadline, |e| {
                let same_session = e.get("sessionId").and_then(Value::as_str) == session;
                let params = &e["params"];
                (same_session && e["method"] == method && pred(params)).then(|| params.clone())
            })
            .await
    }
}

impl Drop for Cdp {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A page target the client is attached to.
pub struct Page {
    pub cdp: Arc<Cdp>,
    pub session: String,
    pub target_id: String,
}

impl Page {
    /// Opens a new tab on `about:blank`, attaches to it, and enables the domains the tests
    /// watch (Page for loads, Runtime for exceptions and console, Log for the browser's
    /// own messages, e.g. failed resources).
    pub async fn open(cdp: Arc<Cdp>) -> Result<Page, String> {
        let created = cdp
            .call(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let target_id = created["targetId"]
            .as_str()
            .ok_or("Target.createTarget: no targetId")?
            .to_owned();
        let attached = cdp
            .call(
                None,
                "Target.attachToTarget",
                json!({"targetId": target_id, "flatten": true}),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or("Target.attachToTarget: no sessionId")?
            .to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            cdp.call(Some(&session), domain, json!({})).await?;
        }
        Ok(Page {
            cdp,
            session,
            target_id,
        })
    }

    pub async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        self.cdp.call(Some(&self.session), method, params).await
    }

    /// Navigates to `url` and waits for its `load` event.
    pub async fn navigate(&self, url: &str, deadline: Duration) -> Result<(), String> {
        let from = self.cdp.events.len();
        let nav = self.call("Page.navigate", json!({"url": url})).await?;
        if let Some(err) = nav.get("errorText") {
            return Err(format!("Page.navigate {url}: {err}"));
        }
        self.cdp
            .wait_event(
                from,
                Some(&self.session),
                "Page.loadEventFired",
                deadline,
                |_| true,
            )
            .await
            .map_err(|e| format!("loading {url}: {e}"))?;
        Ok(())
    }

    /// Evaluates `expression` in the page (promises awaited) and returns its value.
    pub async fn evaluate(&self, expression: &str) -> Result<Value, String> {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(exc) = r.get("exceptionDetails") {
            return Err(format!("evaluating {expression:?} threw: {exc}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Evaluates `expression` until it returns `want`, or fails at the deadline with the
    /// last value. The page polls itself (a change shows within a frame or two); each
    /// evaluation lasts at most a couple of seconds, so a reload in between (which
    /// destroys the context the evaluation runs in) only costs a retry.
    pub async fn wait_until(
        &self,
        expression: &str,
        want: &Value,
        deadline: Duration,
    ) -> Result<(), String> {
        let end = tokio::time::Instant::now() + deadline;
        let poll = format!(
            "new Promise(resolve => {{ \
               const want = {want}, end = Date.now() + 2000; \
               (function poll() {{ \
                 let v; try {{ v = ({expression}); }} catch (e) {{ v = 'threw: ' + e; }} \
                 if (JSON.stringify(v) === JSON.stringify(want) || Date.now() > end) resolve(v); \
                 else setTimeout(poll, 20); \
               }})(); \
             }})"
        );
        loop {
            let last = self.evaluate(&poll).await;
            if last.as_ref() == Ok(want) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= end {
                return Err(format!(
                    "{expression} did not become {want} within {deadline:?}; last: {last:?}"
                ));
            }
        }
    }
}
