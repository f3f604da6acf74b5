//! The dashboard's live feeds, as server-sent events. Each runs in a task of its own
//! that sends into a bounded channel: a page that reads slowly makes its feed wait
//! (what a feed reads from — the bus, a log file, a proxy's ring — keeps meanwhile),
//! and a page that leaves ends it.
//!
//! - [`main`]: `overview` (every unit's row and the agents) and `errors` (the
//!   `get_errors` report, every state) when they change, checked after each batch of
//!   events and every second; `journal`: the last events, then each new batch.
//! - [`logs`]: `lines` of one unit's log: its tail (then `caught_up`), then new lines in
//!   batches.
//! - [`traffic`]: `traffic` of one proxy: its last entries and browser errors, then new
//!   ones.

use super::Response;
use crate::control::State;
use bytes::Bytes;
use corral_events::Event;
use corral_gateway::httpd::Body;
use hyper::header::{self, HeaderValue};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Chunks a feed may have waiting for a slow page.
const QUEUE: usize = 16;
/// How long events are gathered into one batch.
const BATCH: Duration = Duration::from_millis(100);
/// How often a feed checks for what changed without an event (uptimes, counters).
const CHECK: Duration = Duration::from_secs(1);
/// Log lines in one `lines` event.
const LINES_PER_EVENT: usize = 2000;
/// Journal events sent when the feed opens.
const JOURNAL_TAIL: usize = 500;
/// A comment sent this often keeps proxies and the browser from timing out a quiet
/// feed, and tells the feed when the page is gone.
const KEEPALIVE: Duration = Duration::from_secs(15);

type Tx = mpsc::Sender<Bytes>;

fn sse(rx: mpsc::Receiver<Bytes>) -> Response {
    let mut r = hyper::Response::new(Body::Bounded(rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// One event; `data` is one line of JSON. `None` when the page is gone.
async fn send(tx: &Tx, event: &str, data: &str) -> Option<()> {
    let mut chunk = String::with_capacity(event.len() + data.len() + 16);
    chunk.push_str("event: ");
    chunk.push_str(event);
    chunk.push_str("\ndata: ");
    chunk.push_str(data);
    chunk.push_str("\n\n");
    tx.send(Bytes::from(chunk)).await.ok()
}

fn spawn_feed<F>(state: Arc<State>, feed: impl FnOnce(Arc<State>, Tx) -> F) -> Response
where
    F: std::future::Future<Output = Option<()>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(feed(state, tx));
    sse(rx)
}

/// The overview, errors and journal feed.
pub(super) fn main(state: Arc<State>) -> Response {
    spawn_feed(state, |state, tx| async move {
        // Subscribed before the journal is read, so nothing falls between the two.
        let mut bus = state.bus.subscribe();
        let tail = crate::journal::tail(&state.paths.journal, JOURNAL_TAIL);
        send(&tx, "journal", &events_json(&tail)).await?;
        let (mut overview_sent, mut errors_sent) = (String::new(), String::new());
        let mut check = tokio::time::interval(CHECK);
        let mut keepalive = keepalive();
        loop {
            let now = overview(&state).to_string();
            if now != overview_sent {
                send(&tx, "overview", &now).await?;
                overview_sent = now;
            }
            let (report, compared) = errors(&state).await;
            if compared != errors_sent {
                send(&tx, "errors", &report).await?;
                errors_sent = compared;
            }
            tokio::select! {
                _ = check.tick() => {}
                _ = keepalive.tick() => tx.send(Bytes::from_static(b": keepalive\n\n")).await.ok()?,
                first = bus.recv() => {
                    let mut batch = Vec::new();
                    match first {
                        Ok(ev) => batch.push(ev),
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                    let until = tokio::time::sleep(BATCH);
                    tokio::pin!(until);
                    while batch.len() < JOURNAL_TAIL {
                        tokio::select! {
                            _ = &mut until => break,
                            next = bus.recv() => match next {
                                Ok(ev) => batch.push(ev),
                                Err(broadcast::error::RecvError::Lagged(_)) => {}
                                Err(broadcast::error::RecvError::Closed) => break,
                            },
                        }
                    }
                    if !batch.is_empty() {
                        send(&tx, "journal", &events_json(&batch)).await?;
                    }
                }
                _ = state.shutdown.cancelled() => return None,
                _ = tx.closed() => return None,
            }
        }
    })
}

fn events_json(events: &[Event]) -> String {
    let mut out = String::from("[");
    for (i, ev) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&ev.to_json_line());
    }
    out.push(']');
    out
}

/// Every unit's row (as `corral ps --json`) and the agents connected. Proxies carry a
/// `state`: `running`, or `stopped` for a configured one that is not (`ps` lists running
/// proxies only), so the page can start it again.
fn overview(state: &State) -> Value {
    let mut value = match crate::control::servers::ps(state).data {
        Value::Object(map) => Value::Object(map),
        _ => json!({}),
    };
    let mut proxies = match value["proxies"].take() {
        Value::Array(rows) => rows,
        _ => Vec::new(),
    };
    for row in &mut proxies {
        row["state"] = json!("running");
    }
    for name in state.proxies.configured_names() {
        if state.proxies.get(&name).is_none()
            && let Some(spec) = state.proxies.configured(&name)
        {
            proxies.push(json!({ "name": name, "target": spec.target, "state": "stopped" }));
        }
    }
    value["proxies"] = Value::Array(proxies);
    value["agents"] = serde_json::to_value(state.hub.agents()).unwrap_or_default();
    value
}

/// The report of every incident, open or resolved, and the same without its `now` (what
/// tells whether it changed).
async fn errors(state: &State) -> (String, String) {
    match crate::control::daemon::errors_report(state, &json!({"status": "all"}), None).await {
        Ok((report, raw)) => {
            let mut report = report.json(raw);
            let now = report.as_object_mut().and_then(|r| r.remove("now"));
            let compared = report.to_string();
            if let (Some(now), Some(r)) = (now, report.as_object_mut()) {
                r.insert("now".to_owned(), now);
            }
            (report.to_string(), compared)
        }
        Err(e) => {
            let e = json!({ "error": e }).to_string();
            (e.clone(), e)
        }
    }
}

/// A keepalive timer whose first tick is one period away.
fn keepalive() -> tokio::time::Interval {
    tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE)
}

/// The log feed of server or process `unit`: its last `lines`, then new ones.
pub(super) fn logs(state: Arc<State>, unit: String, lines: usize) -> Response {
    spawn_feed(state, move |state, tx| async move {
        let path = match (state.server(&unit), state.processes.get(&unit)) {
            (Some(h), _) => h.log_path().to_owned(),
            (None, Some(p)) => p.log_path().to_owned(),
            (None, None) => {
                let why = crate::control::unknown_unit(&state, &unit).error;
                send(&tx, "gone", &json!({ "error": why }).to_string()).await?;
                return None;
            }
        };
        // The follower starts at the file's end, and the tail is read after it is made:
        // a line written in between is sent twice at worst, never lost.
        let mut follower = corral_supervisor::stderr::LogFollower::new(&path);
        let text = corral_gateway::tools::tail_of_file(&path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        if tail.is_empty() {
            send(&tx, "lines", r#"{"lines":[]}"#).await?;
        }
        for chunk in tail.chunks(LINES_PER_EVENT) {
            send(&tx, "lines", &json!({ "lines": chunk }).to_string()).await?;
        }
        send(&tx, "caught_up", "{}").await?;
        drop(all);
        drop(text);
        let mut tick = tokio::time::interval(BATCH);
        let mut keepalive = keepalive();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = keepalive.tick() => tx.send(Bytes::from_static(b": keepalive\n\n")).await.ok()?,
                _ = state.shutdown.cancelled() => return None,
                _ = tx.closed() => return None,
            }
            let new = follower.poll();
            for chunk in new.chunks(LINES_PER_EVENT) {
                send(&tx, "lines", &json!({ "lines": chunk }).to_string()).await?;
            }
        }
    })
}

/// The traffic feed of proxy `name` (running or stopped): its last `limit` exchanges
/// and browser errors, then new ones.
pub(super) fn traffic(state: Arc<State>, name: String, limit: usize) -> Response {
    use corral_proxy::browser::BrowserQuery;
    use corral_proxy::traffic::{Since, TrafficQuery};
    spawn_feed(state, move |state, tx| async move {
        let Some(logs) = state.proxies.logs_of(&name) else {
            let why = state.proxies.unknown(&name);
            send(&tx, "gone", &json!({ "error": why }).to_string()).await?;
            return None;
        };
        let (mut after_entry, mut after_browser) = (None, None);
        let mut first = true;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut keepalive = keepalive();
        loop {
            let entries = logs.traffic.query(&TrafficQuery {
                since: after_entry.map(Since::Id),
                limit: Some(limit),
                ..Default::default()
            });
            let browser = logs.browser.query(&BrowserQuery {
                after: after_browser,
                limit: Some(limit),
                ..Default::default()
            });
            if first || !entries.is_empty() || !browser.is_empty() {
                after_entry = entries.last().map(|e| e.id).or(after_entry);
                after_browser = browser.last().map(|e| e.id).or(after_browser);
                let data = json!({ "entries": entries, "browser": browser });
                send(&tx, "traffic", &data.to_string()).await?;
                first = false;
            }
            tokio::select! {
                _ = tick.tick() => {}
                _ = keepalive.tick() => tx.send(Bytes::from_static(b": keepalive\n\n")).await.ok()?,
                _ = state.shutdown.cancelled() => return None,
                _ = tx.closed() => return None,
            }
        }
    })
}
