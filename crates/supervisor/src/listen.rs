//! Corral's one `subscriptions/listen` to each modern (2026-07-28) server.
//!
//! A modern server sends nothing outside a request: no unsolicited `list_changed`, no
//! `resources/subscribe`. So for each ready modern instance Corral keeps one listen
//! open, asking for every list change and for the resource URIs agents subscribed to
//! (the gateway keeps the refcounted set, [`crate::ServerHandle::set_resource_subscriptions`]).
//! What arrives on it is an ordinary notification to the supervisor (its
//! `_meta.subscriptionId` aside), so a modern server's `tools/list_changed` re-reads the
//! tools and its `resources/updated` reaches subscribers exactly as a legacy server's
//! do. A change of the URI set reopens the listen with the new filter (cancelling the
//! old one); the listen ends with the instance, and the next instance opens its own.

use crate::rpc::{Connection, RpcError};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The URIs agents want `notifications/resources/updated` for, on one server.
pub(crate) type Uris = Arc<Vec<String>>;

/// How long to wait before reopening a listen the server ended on its own.
const REOPEN_AFTER: Duration = Duration::from_millis(500);

/// The params of the listen: every list change, and `uris`.
pub(crate) fn params(uris: &[String]) -> String {
    let mut filter = json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    });
    if !uris.is_empty() {
        filter["resourceSubscriptions"] = json!(uris);
    }
    json!({ "notifications": filter }).to_string()
}

/// Keeps a listen open on `conn` until the connection closes or the server refuses
/// listens (an error answer: it does not serve `subscriptions/listen`, and asking again
/// would not change that). `on_refused` hears why, once.
pub(crate) async fn run(
    conn: Arc<Connection>,
    mut uris: watch::Receiver<Uris>,
    on_refused: impl FnOnce(String),
) {
    loop {
        let wanted = uris.borrow_and_update().clone();
        let body = params(&wanted);
        let listen = conn.long_lived("subscriptions/listen", &body);
        tokio::select! {
            answer = listen => match answer {
                // The server ended it (shutting down, or a limit): ask again, calmly.
                Ok(_) => tokio::time::sleep(REOPEN_AFTER).await,
                Err(RpcError::Closed(_)) => return,
                Err(e) => {
                    on_refused(format!("subscriptions/listen refused: {e}"));
                    return;
                }
            },
            // Dropping the listen above cancels it on the server; the loop reopens it
            // with the new set.
            changed = uris.changed() => if changed.is_err() {
                return;
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_params() {
        let p: serde_json::Value = serde_json::from_str(&params(&[])).unwrap();
        assert_eq!(p["notifications"]["toolsListChanged"], true);
        assert!(p["notifications"].get("resourceSubscriptions").is_none());
        let p: serde_json::Value = serde_json::from_str(&params(&["a://b".into()])).unwrap();
        assert_eq!(p["notifications"]["resourceSubscriptions"][0], "a://b");
    }
}
