//! `subscriptions/listen` on the agent hop (MCP 2026-07-28), resource subscriptions
//! across eras, and logs scoped to one modern request.
//!
//! A modern agent gets nothing outside a request. What a 2025 session receives
//! unsolicited — `notifications/*/list_changed`, `notifications/resources/updated` for
//! what it subscribed to — a modern agent receives only on a listen it opened: a
//! long-lived request whose first message is `notifications/subscriptions/acknowledged`
//! (the honored subset of its filter), then only the kinds it opted in to, each with
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen's request id. On
//! stdio the listen stays in flight on the connection; on HTTP its POST's SSE stream
//! stays open (the related-message stream every request has). The agent ends it with
//! `notifications/cancelled` (stdio) or by closing the stream (HTTP): either drops the
//! request's task, and the [`Registered`] and [`Held`] guards undo what it set up.
//! Corral ends it (shutdown, the session closing) by answering it — `resultType:
//! "complete"` with the subscriptionId — and on stdio by also sending
//! `notifications/cancelled` for it, as `cancellation.mdx` asks.
//!
//! Resource subscriptions are one refcounted set per URI over both eras: a 2025
//! session's `resources/subscribe` and a listen's `resourceSubscriptions` hold a URI
//! alike. The first holder subscribes upstream — `resources/subscribe` to a legacy
//! server, or a new filter on Corral's own listen to a modern server
//! ([`corral_supervisor::ServerHandle::set_resource_subscriptions`]) — and the last one
//! to let go unsubscribes, so one agent leaving never silences another.

use crate::agent::SessionShared;
use crate::hub::Hub;
use crate::jsonrpc;
use crate::session::Session;
use corral_supervisor::{CallError, Era};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";
pub use crate::modern::LOG_LEVEL_KEY;

/// What a listen asks for (as requested), or honors (as acknowledged).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    /// `resourceSubscriptions`, when sent (even empty).
    uris: Option<Vec<String>>,
}

impl Filter {
    /// The filter of a listen's `params.notifications`; `Err` says what is wrong.
    pub(crate) fn parse(params: Option<&RawValue>) -> Result<Filter, String> {
        #[derive(Deserialize)]
        struct P<'a> {
            #[serde(borrow)]
            notifications: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct F {
            #[serde(default)]
            tools_list_changed: Option<bool>,
            #[serde(default)]
            prompts_list_changed: Option<bool>,
            #[serde(default)]
            resources_list_changed: Option<bool>,
            #[serde(default)]
            resource_subscriptions: Option<Vec<String>>,
        }
        const USAGE: &str = "subscriptions/listen needs params.notifications, an object with \
             any of toolsListChanged, promptsListChanged, resourcesListChanged (booleans) and \
             resourceSubscriptions (an array of resource URIs)";
        let f: F = params
            .and_then(|p| serde_json::from_str::<P<'_>>(p.get()).ok())
            .and_then(|p| p.notifications)
            .filter(|n| n.get().starts_with('{'))
            .and_then(|n| serde_json::from_str(n.get()).ok())
            .ok_or_else(|| USAGE.to_owned())?;
        Ok(Filter {
            tools: f.tools_list_changed.unwrap_or(false),
            prompts: f.prompts_list_changed.unwrap_or(false),
            resources: f.resources_list_changed.unwrap_or(false),
            uris: f.resource_subscriptions,
        })
    }

    fn wants(&self, list_changed: &str) -> bool {
        match list_changed {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            _ => false,
        }
    }

    fn subscribed(&self, uri: &str) -> bool {
        self.uris
            .as_ref()
            .is_some_and(|u| u.iter().any(|x| x == uri))
    }

    /// The filter as the acknowledgement states it: only what is honored.
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                out.insert(key.into(), Value::Bool(true));
            }
        }
        if let Some(uris) = &self.uris {
            out.insert("resourceSubscriptions".into(), json!(uris));
        }
        Value::Object(out)
    }
}

/// One open listen.
struct Listener {
    session: Arc<SessionShared>,
    /// The listen request's id: the subscriptionId.
    id: Box<RawValue>,
    filter: Filter,
    /// Ends it from Corral's side, with the reason.
    end: Option<oneshot::Sender<&'static str>>,
}

/// Every open listen, and the resource subscriptions held upstream.
#[derive(Default)]
pub(crate) struct Listens {
    next: AtomicU64,
    active: Mutex<crate::FastMap<u64, Listener>>,
    /// URI → (the server that owns it, holders): listens and 2025 sessions alike.
    held: Mutex<HashMap<String, (String, usize)>>,
    /// Modern requests that asked for logs (`_meta` logLevel): (session, raw request
    /// id) → the lowest level they want.
    log_scopes: Mutex<crate::FastMap<(u64, String), u8>>,
}

/// `params` with `_meta[subscriptionId]` set to `id` (`params` is an object's text, or
/// none).
fn tagged(params: Option<&str>, id: &RawValue) -> String {
    let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
    jsonrpc::with_meta_member(params, SUBSCRIPTION_ID_KEY, id)
}

/// `params` without the upstream `_meta[subscriptionId]` (of Corral's own listen to a
/// modern server), for a 2025 session; untouched (and unparsed) when it has none.
pub(crate) fn untagged(params: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    let p = params?;
    if !jsonrpc::mentions!(p.as_bytes(), SUBSCRIPTION_ID_KEY) {
        return Some(std::borrow::Cow::Borrowed(p));
    }
    let mut v: Map<String, Value> = serde_json::from_str(p).ok()?;
    if let Some(meta) = v.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(SUBSCRIPTION_ID_KEY);
        if meta.is_empty() {
            v.remove("_meta");
        }
    }
    Some(std::borrow::Cow::Owned(Value::Object(v).to_string()))
}

impl Hub {
    /// A list changed (`method` is its `notifications/*/list_changed`): every 2025
    /// session is told unsolicited, every listen that opted in on its stream.
    pub(crate) fn list_changed(&self, method: &str) {
        self.broadcast(&jsonrpc::notification(method, None));
        let active = self.listens.active.lock().unwrap();
        for l in active.values().filter(|l| l.filter.wants(method)) {
            let params = tagged(None, &l.id);
            l.session
                .send(jsonrpc::notification(method, Some(&params)), Some(&l.id));
        }
    }

    /// A server's `notifications/resources/updated` for `uri`, onto the listens that
    /// subscribed to it (2025 sessions get it through `route_resource_updated`).
    pub(crate) fn listens_resource_updated(&self, uri: &str, params: Option<&str>) {
        let active = self.listens.active.lock().unwrap();
        for l in active.values().filter(|l| l.filter.subscribed(uri)) {
            let params = tagged(params, &l.id);
            l.session.send(
                jsonrpc::notification("notifications/resources/updated", Some(&params)),
                Some(&l.id),
            );
        }
    }

    /// Ends every listen of `session` (all of them with `None`) from Corral's side: each
    /// is answered (and on stdio cancelled).
    /// Returns how many were ended.
    pub fn end_listens(&self, session: Option<u64>, reason: &'static str) -> usize {
        let mut active = self.listens.active.lock().unwrap();
        let mut ended = 0;
        for l in active.values_mut() {
            if session.is_none_or(|s| s == l.session.id())
                && let Some(end) = l.end.take()
            {
                ended += usize::from(end.send(reason).is_ok());
            }
        }
        ended
    }

    /// Holds `uri` (owned by `server`) for one more subscriber; the first holder
    /// subscribes upstream, and its failure is returned (and nothing held).
    pub(crate) async fn hold_resource(&self, server: &str, uri: &str) -> Result<(), CallError> {
        let first = {
            let mut held = self.listens.held.lock().unwrap();
            let entry = held
                .entry(uri.to_owned())
                .or_insert_with(|| (server.to_owned(), 0));
            entry.1 += 1;
            entry.1 == 1
        };
        if !first {
            return Ok(());
        }
        let Some(h) = self.servers().get(server).cloned() else {
            self.listens.held.lock().unwrap().remove(uri);
            return Ok(());
        };
        if h.era() == Some(Era::Modern) {
            h.set_resource_subscriptions(self.held_uris(server));
            return Ok(());
        }
        let params = json!({ "uri": uri }).to_string();
        match h.request_json("resources/subscribe", Some(&params)).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.listens.held.lock().unwrap().remove(uri);
                Err(e)
            }
        }
    }

    /// Lets go of `uri` once; the last holder unsubscribes upstream (in the background).
    pub(crate) fn release_resource(&self, uri: &str) {
        let server = {
            let mut held = self.listens.held.lock().unwrap();
            let Some(entry) = held.get_mut(uri) else {
                return;
            };
            entry.1 -= 1;
            if entry.1 > 0 {
                return;
            }
            held.remove(uri).map(|(server, _)| server)
        };
        let Some(h) = server.and_then(|s| self.servers().get(&s).cloned()) else {
            return;
        };
        if h.era() == Some(Era::Modern) {
            h.set_resource_subscriptions(self.held_uris(h.name()));
            return;
        }
        let params = json!({ "uri": uri }).to_string();
        tokio::spawn(async move {
            let _ = h.request_json("resources/unsubscribe", Some(&params)).await;
        });
    }

    /// Subscribes a new instance of `server` to the URIs agents hold on it: a legacy
    /// one with `resources/subscribe` (in the background); a modern one reads them when
    /// it opens its listen.
    pub(crate) fn resubscribe(&self, server: &str) {
        let Some(h) = self.servers().get(server).cloned() else {
            return;
        };
        if h.era() == Some(Era::Modern) {
            return;
        }
        let uris = self.held_uris(server);
        if uris.is_empty() {
            return;
        }
        tokio::spawn(async move {
            for uri in uris {
                let params = json!({ "uri": uri }).to_string();
                let _ = h.request_json("resources/subscribe", Some(&params)).await;
            }
        });
    }

    /// The URIs held on `server`, sorted (the filter of Corral's listen to it).
    fn held_uris(&self, server: &str) -> Vec<String> {
        let held = self.listens.held.lock().unwrap();
        let mut uris: Vec<String> = held
            .iter()
            .filter(|(_, (s, _))| s == server)
            .map(|(u, _)| u.clone())
            .collect();
        uris.sort();
        uris
    }

    /// Whether a log line of `level` goes to the modern request `request` of `session`
    /// (it asked for logs at or below that level).
    pub(crate) fn log_wanted(&self, session: u64, request: &RawValue, level: u8) -> bool {
        self.listens
            .log_scopes
            .lock()
            .unwrap()
            .get(&(session, request.get().to_owned()))
            .is_some_and(|min| level >= *min)
    }
}

/// Removes a listen from the registry when its request ends, however it ends.
struct Registered<'a> {
    hub: &'a Hub,
    key: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.hub.listens.active.lock().unwrap().remove(&self.key);
    }
}

/// Releases the resource URIs a listen held.
struct Held<'a> {
    hub: &'a Hub,
    uris: Vec<String>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for uri in &self.uris {
            self.hub.release_resource(uri);
        }
    }
}

/// Stops scoping logs to a modern request when it ends.
pub(crate) struct LogScope<'a> {
    hub: &'a Hub,
    key: (u64, String),
}

impl Drop for LogScope<'_> {
    fn drop(&mut self) {
        self.hub
            .listens
            .log_scopes
            .lock()
            .unwrap()
            .remove(&self.key);
    }
}

/// The `_meta` (JSON object text, or none) of a call `session` forwards to `server`,
/// with `logLevel` added when a 2025 agent asked for a level with `logging/setLevel`
/// and the server is modern (it has no setLevel; its logs are per request). Keys the
/// agent's `_meta` already has stay. Anything else passes untouched, unparsed.
/// Whether [`with_log_level`] would add a `logLevel` to what `session` sends `server`:
/// a 2025 session that set one, calling a modern server.
pub(crate) fn adds_log_level(
    session: &SessionShared,
    server: &corral_supervisor::ServerHandle,
) -> bool {
    session.asked_log_level().is_some() && !session.is_modern() && server.era() == Some(Era::Modern)
}

pub(crate) fn with_log_level(
    meta: Option<String>,
    session: &SessionShared,
    server: &corral_supervisor::ServerHandle,
) -> Option<String> {
    let Some(level) = session.asked_log_level() else {
        return meta;
    };
    if !adds_log_level(session, server) {
        return meta;
    }
    let mut m: Map<String, Value> = meta
        .as_deref()
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    let name = crate::agent::LEVELS
        .get(usize::from(level))
        .copied()
        .unwrap_or("debug");
    m.entry(LOG_LEVEL_KEY)
        .or_insert_with(|| Value::String(name.to_owned()));
    Some(Value::Object(m).to_string())
}

/// [`with_log_level`] for a forwarded request's whole params (`prompts/get`,
/// `resources/read`, …): `Some` only when `logLevel` was added.
pub(crate) fn params_with_log_level(
    params: Option<&RawValue>,
    session: &SessionShared,
    server: &corral_supervisor::ServerHandle,
) -> Option<Box<RawValue>> {
    session.asked_log_level()?;
    let mut p: Map<String, Value> = match params {
        Some(p) => serde_json::from_str(p.get()).ok()?,
        None => Map::new(),
    };
    let meta = p.get("_meta").map(Value::to_string);
    let meta =
        with_log_level(meta.clone(), session, server).filter(|m| Some(m) != meta.as_ref())?;
    p.insert("_meta".into(), serde_json::from_str(&meta).ok()?);
    RawValue::from_string(Value::Object(p).to_string()).ok()
}

impl Session {
    /// Scopes the server logs of this modern request to it, at `level` and above, until
    /// the guard drops.
    pub(crate) fn scope_logs(&self, id: &RawValue, level: u8) -> LogScope<'_> {
        let key = (self.id(), id.get().to_owned());
        self.hub()
            .listens
            .log_scopes
            .lock()
            .unwrap()
            .insert(key.clone(), level);
        LogScope {
            hub: self.hub(),
            key,
        }
    }

    /// Serves a modern `subscriptions/listen` until the agent withdraws it (the task is
    /// dropped) or Corral ends it (answered here).
    pub(crate) async fn listen(&self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let asked = match Filter::parse(params) {
            Ok(f) => f,
            Err(why) => return jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &why),
        };
        let hub = self.hub();
        let shared = self.shared();
        let mut honored = Filter {
            uris: asked.uris.as_ref().map(|_| Vec::new()),
            ..asked.clone()
        };
        let mut held = Held {
            hub,
            uris: Vec::new(),
        };
        for uri in asked.uris.iter().flatten() {
            if held.uris.contains(uri) {
                continue;
            }
            // A URI no server owns, or whose server refuses the subscription, is not
            // honored: the acknowledgement leaves it out.
            let Some(server) = self.resource_server(uri).await else {
                continue;
            };
            if hub.hold_resource(&server, uri).await.is_ok() {
                held.uris.push(uri.clone());
            }
        }
        if let Some(uris) = &mut honored.uris {
            uris.clone_from(&held.uris);
        }
        let (end_tx, end_rx) = oneshot::channel();
        let key = hub.listens.next.fetch_add(1, Ordering::Relaxed);
        let ack = {
            let params = json!({
                "_meta": { SUBSCRIPTION_ID_KEY: serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null) },
                "notifications": honored.to_json(),
            });
            jsonrpc::notification(
                "notifications/subscriptions/acknowledged",
                Some(&params.to_string()),
            )
        };
        {
            // Registered and acknowledged under one lock: nothing is delivered on the
            // stream before its acknowledgement, and nothing is missed after it.
            let mut active = hub.listens.active.lock().unwrap();
            active.insert(
                key,
                Listener {
                    session: shared.clone(),
                    id: id.to_owned(),
                    filter: honored,
                    end: Some(end_tx),
                },
            );
            shared.send(ack, Some(id));
        }
        let _registered = Registered { hub, key };
        let reason = end_rx.await.unwrap_or("ended");
        if shared.transport() == "stdio" {
            let params = json!({
                "requestId": serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null),
                "reason": format!("corral ended the subscription: {reason}"),
            });
            shared.send(
                jsonrpc::notification("notifications/cancelled", Some(&params.to_string())),
                None,
            );
        }
        drop(held);
        let result = json!({
            "resultType": "complete",
            "_meta": { SUBSCRIPTION_ID_KEY: serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null) },
        });
        jsonrpc::result(id, &result.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn filters() {
        let f = Filter::parse(Some(&raw(
            r#"{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://x"]}}"#,
        )))
        .unwrap();
        assert!(f.wants("notifications/tools/list_changed"));
        assert!(!f.wants("notifications/prompts/list_changed"));
        assert!(f.subscribed("a://x") && !f.subscribed("a://y"));
        assert_eq!(
            f.to_json(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]})
        );
        assert!(Filter::parse(None).is_err());
        assert!(Filter::parse(Some(&raw(r#"{"notifications":[]}"#))).is_err());
        assert!(Filter::parse(Some(&raw(r#"{}"#))).is_err());
    }

    #[test]
    fn tags_and_levels() {
        let t: Value =
            serde_json::from_str(&tagged(Some(r#"{"uri":"a://x"}"#), &raw("\"l-1\""))).unwrap();
        assert_eq!(
            t,
            json!({"uri": "a://x", "_meta": {SUBSCRIPTION_ID_KEY: "l-1"}})
        );
        let back = untagged(Some(&tagged(Some(r#"{"uri":"a://x"}"#), &raw("\"l-1\""))))
            .unwrap()
            .into_owned();
        assert_eq!(back, r#"{"uri":"a://x"}"#);
        let t: Value = serde_json::from_str(&tagged(None, &raw("7"))).unwrap();
        assert_eq!(t, json!({"_meta": {SUBSCRIPTION_ID_KEY: 7}}));
    }
}
