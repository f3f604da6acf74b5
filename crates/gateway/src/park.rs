//! Bridge A of MCP 2026-07-28: a 2025 server asks, a 2026 agent answers — park the
//! call, don't replay it.
//!
//! A legacy (`initialize`) server asks its client with real requests (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) sent in the middle of a call. A stateless
//! 2026-07-28 agent cannot be sent a request: the only way to ask it is to answer its own
//! request (`tools/call`, `prompts/get`, `resources/read`) with an `input_required`
//! result and let it retry with the answers (multi round-trip requests, MRTR).
//!
//! So the upstream call U is *parked*, not replayed (a replay would re-run the tool's side
//! effects and ask the user again):
//!
//! - U runs as a boxed future polled inline by the agent's request R (no extra task on
//!   the common path, where no question comes). Every server request routed to U
//!   ([`Hub::server_request`](crate::Hub) finds U's [`Slot`] on its in-flight call)
//!   lands in the slot's queue.
//! - On the first question (plus a few ms to gather siblings sent together), U moves
//!   into its own task — it keeps running and keeps its concurrency slot — and the
//!   conversation is stored under a random 128-bit handle H. R is answered with
//!   `input_required`, one key per unanswered question, `requestState` = H.
//! - The retry R2 (same method and params, plus `inputResponses` and `requestState`)
//!   takes the conversation back (single use), answers each question with its
//!   `inputResponses` value verbatim, and waits on U again: its result answers R2;
//!   another question answers R2 with `input_required` again under a new handle.
//! - Dropping the conversation (R2 cancelled, the deadline) aborts U's task, which
//!   cancels the call upstream.
//!
//! `requestState` needs no MAC: it carries no state, only the name of state kept here,
//! and the name is 128 random bits — unguessable, so a forged or altered one matches
//! nothing and is refused like an expired one. The state is still bound to the method,
//! the exposed tool/prompt name or resource URI and a digest of the arguments, so a
//! handle cannot be spent on another call by mistake.
//!
//! Which call a question belongs to is the latest call in flight on that server (2025
//! stdio carries no association): exact with one call at a time, a guess with several.

use crate::hub::Hub;
use crate::jsonrpc;
use crate::modern::{self, ModernMeta};
use crate::session::Session;
use corral_supervisor::patience::{PATIENCE, Patience};
use corral_supervisor::rpc::{Responder, ServerRequest};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Every handle Corral mints starts with this, so a `requestState` of a 2026 server
/// (passed through to it untouched) is never mistaken for one of Corral's.
pub const STATE_PREFIX: &str = "corral-park-";

/// The environment variable that overrides how long a parked call waits for the agent's
/// retry, in milliseconds (tests use a short one).
pub const TTL_ENV: &str = "CORRAL_INPUT_TTL_MS";

/// A human answers these questions: ten minutes per round by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

/// At most this many calls wait for agents' answers at once; a question beyond it is
/// refused to its server (which then fails or goes on as it sees fit), so agents that
/// never retry cannot pile up waiting calls until their deadlines.
const MAX_PARKED: usize = 256;

/// How long after the first question Corral waits for siblings sent together, so they
/// reach the agent in one `input_required`.
const COALESCE: Duration = Duration::from_millis(15);

tokio::task_local! {
    /// The slot of the parkable call this task's future is running, if any.
    static CARRIER: Arc<Slot>;
}

/// Whether `method` may answer `input_required` (the specification allows only these).
pub(crate) fn carries(method: &str) -> bool {
    as_static(method).is_some()
}

fn as_static(method: &str) -> Option<&'static str> {
    ["tools/call", "prompts/get", "resources/read"]
        .into_iter()
        .find(|m| *m == method)
}

/// The slot of the parkable call being run by the current task, for
/// [`Hub::begin_call`](crate::Hub) to put on the call in flight.
pub(crate) fn current_slot() -> Option<Arc<Slot>> {
    CARRIER.try_with(Arc::clone).ok()
}

/// Where the server requests of one parkable upstream call wait for the conversation to
/// take them.
#[derive(Default)]
pub(crate) struct Slot {
    asked: Mutex<VecDeque<ServerRequest>>,
    notify: Notify,
    /// The gateway progress route of the call, when the agent gave a progress token.
    progress: Mutex<Option<u64>>,
}

impl Slot {
    /// A server request made during the call.
    pub(crate) fn ask(&self, request: ServerRequest) {
        self.asked.lock().unwrap().push_back(request);
        self.notify.notify_one();
    }

    pub(crate) fn set_progress(&self, route: u64) {
        *self.progress.lock().unwrap() = Some(route);
    }

    fn take(&self) -> Option<ServerRequest> {
        self.asked.lock().unwrap().pop_front()
    }

    fn progress(&self) -> Option<u64> {
        *self.progress.lock().unwrap()
    }
}

type Call = Pin<Box<dyn Future<Output = Vec<u8>> + Send>>;

/// The upstream call: polled inline until it is parked, then in its own task (aborted
/// when this is dropped).
enum Upstream {
    Inline(Call),
    Spawned(JoinHandle<Vec<u8>>),
}

impl Upstream {
    /// Its response (with the first request's id), or why its task ended without one.
    /// Cancel-safe: awaiting it again after a drop goes on where it was. Not to be
    /// awaited again once it returned.
    async fn done(&mut self) -> Result<Vec<u8>, String> {
        match self {
            Upstream::Inline(call) => Ok(call.await),
            Upstream::Spawned(task) => (&mut *task).await.map_err(|e| e.to_string()),
        }
    }

    /// Moves an inline call into its own task, so it runs while nobody waits on it.
    fn detach(&mut self) {
        if let Upstream::Inline(call) = self {
            let call = std::mem::replace(call, Box::pin(std::future::pending()));
            *self = Upstream::Spawned(tokio::spawn(call));
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        if let Upstream::Spawned(task) = self {
            task.abort();
        }
    }
}

/// What kind of question a server asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Elicitation,
    Sampling,
    Roots,
}

impl Kind {
    fn of(method: &str) -> Option<Kind> {
        match method {
            "elicitation/create" => Some(Kind::Elicitation),
            "sampling/createMessage" => Some(Kind::Sampling),
            "roots/list" => Some(Kind::Roots),
            _ => None,
        }
    }

    fn capability(self) -> &'static str {
        match self {
            Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
            Kind::Roots => "roots",
        }
    }

    /// Why `value` is not an answer of this kind, if it is not.
    fn malformed(self, value: &RawValue) -> Option<&'static str> {
        let v: Map<String, Value> = match serde_json::from_str(value.get()) {
            Ok(v) => v,
            Err(_) => return Some("a JSON object"),
        };
        let ok = match self {
            Kind::Elicitation => v
                .get("action")
                .and_then(Value::as_str)
                .is_some_and(|a| matches!(a, "accept" | "decline" | "cancel")),
            Kind::Sampling => {
                v.get("role").is_some_and(Value::is_string) && v.contains_key("content")
            }
            Kind::Roots => v.get("roots").is_some_and(Value::is_array),
        };
        match (ok, self) {
            (true, _) => None,
            (false, Kind::Elicitation) => Some(
                "an ElicitResult ({\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\"?})",
            ),
            (false, Kind::Sampling) => {
                Some("a CreateMessageResult ({\"role\", \"content\", \"model\"})")
            }
            (false, Kind::Roots) => Some("a ListRootsResult ({\"roots\": [...]})"),
        }
    }
}

/// A question the agent has not answered yet.
struct Pending {
    key: String,
    kind: Kind,
    method: String,
    /// As embedded in `input_required` (a URL elicitation without its `elicitationId`).
    params: Option<Box<RawValue>>,
    responder: Responder,
    /// A URL elicitation's id, kept here: 2026-07-28 has none, and the retry is the
    /// signal that the URL flow is over (the server's
    /// `notifications/elicitation/complete` is not forwarded either).
    #[expect(
        dead_code,
        reason = "kept with the conversation; nothing reads it back yet"
    )]
    elicitation_id: Option<String>,
}

/// What a handle may be spent on: a digest of the method, the exposed tool or prompt
/// name (or the resource URI) and the arguments as sent (whitespace aside; SDKs resend
/// the very params they sent first). A fixed-key hash: it tells one call from another
/// for the holder of the handle, and the handle itself is the secret. Computed when a
/// call parks (from a copy of its params kept until then: a memcpy, where parsing and
/// hashing every call cost more), and on each retry.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Binding(u64);

/// A call's [`Binding`], or the params it is worked out from when it is first needed.
enum Bound {
    Params(Option<Box<RawValue>>),
    Done(Binding),
}

impl Bound {
    fn resolve(&mut self, method: &str) -> Binding {
        if let Bound::Params(params) = self {
            let binding = match params
                .as_deref()
                .and_then(|p| serde_json::from_str::<Params<'_>>(p.get()).ok())
            {
                Some(p) => Binding::of(method, &p),
                None => Binding::of(method, &EMPTY),
            };
            *self = Bound::Done(binding);
        }
        match self {
            Bound::Done(b) => *b,
            Bound::Params(_) => unreachable!("resolved above"),
        }
    }

    /// Whether a parked call (resolved when it parked) is bound to `binding`.
    fn is(&self, binding: Binding) -> bool {
        matches!(self, Bound::Done(b) if *b == binding)
    }
}

impl Binding {
    fn of(method: &str, params: &Params<'_>) -> Binding {
        use std::hash::{Hash, Hasher};
        let name = match method {
            "resources/read" => params.uri.as_deref(),
            _ => params.name.as_deref(),
        };
        let mut h = std::hash::DefaultHasher::new();
        method.hash(&mut h);
        name.hash(&mut h);
        let args = params.arguments.map_or("", RawValue::get).as_bytes();
        let mut in_string = false;
        let mut escaped = false;
        for &b in args {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
            } else if b == b'"' {
                in_string = true;
            } else if b.is_ascii_whitespace() {
                continue;
            }
            h.write_u8(b);
        }
        Binding(h.finish())
    }
}

/// One parked (or parkable) upstream call and its unanswered questions.
struct Conv {
    upstream: Upstream,
    /// The clock of U's request to the server: held while parked (the deadline here
    /// governs then), restarted on the retry.
    patience: Arc<Patience>,
    slot: Arc<Slot>,
    pending: Vec<Pending>,
    next_key: u64,
    /// The length of the id U's response carries (the first request's), which a retry's
    /// answer replaces.
    first_id_len: usize,
    /// Whether a retry resumed it (its answer has another id than U's response).
    resumed: bool,
    binding: Bound,
}

impl Conv {
    /// Takes every question queued on the slot; those the carrying request did not
    /// declare the capability for are answered with an error at once.
    fn gather(&mut self, caps: &Caps) {
        while let Some(req) = self.slot.take() {
            self.admit(req, Some(caps));
        }
    }

    /// Adds one question (gated on `caps`, unless `None`).
    fn admit(&mut self, req: ServerRequest, caps: Option<&Caps>) {
        let ServerRequest {
            method,
            params,
            responder,
        } = req;
        let Some(kind) = Kind::of(&method) else {
            responder.error(
                jsonrpc::METHOD_NOT_FOUND,
                &format!(
                    "corral: {method} cannot be forwarded to a client that speaks MCP \
                     2026-07-28: only elicitation/create, sampling/createMessage and \
                     roots/list can become an input_required result"
                ),
            );
            return;
        };
        let url_mode = kind == Kind::Elicitation
            && params.as_deref().is_some_and(|p| {
                jsonrpc::str_member(Some(p.get()), "mode").as_deref() == Some("url")
            });
        if let Some(caps) = caps
            && let Err(missing) = caps.allows(kind, url_mode)
        {
            responder.error(
                jsonrpc::METHOD_NOT_FOUND,
                &format!(
                    "corral: the client's request did not declare the '{missing}' capability \
                     (in _meta[\"{}\"]), so it cannot be asked {method}",
                    modern::CLIENT_CAPABILITIES_KEY
                ),
            );
            return;
        }
        let (params, elicitation_id) = if url_mode {
            strip_elicitation_id(params)
        } else {
            (params, None)
        };
        self.next_key += 1;
        self.pending.push(Pending {
            key: format!("q{}", self.next_key),
            kind,
            method,
            params,
            responder,
            elicitation_id,
        });
    }

    /// Refuses every open question: too many calls are parked already.
    fn refuse_all(&mut self) {
        for p in self.pending.drain(..) {
            p.responder.error(
                jsonrpc::INTERNAL_ERROR,
                &format!(
                    "corral: {MAX_PARKED} calls already wait for their agents' answers; \
                     {} was not asked (retry the call once agents have answered)",
                    p.method
                ),
            );
        }
    }

    /// Answers every question still open as the deadline does: an elicitation is
    /// cancelled, the others fail.
    fn expire(mut self, ttl: Duration) {
        while let Some(req) = self.slot.take() {
            self.admit(req, None);
        }
        for p in self.pending.drain(..) {
            match p.kind {
                Kind::Elicitation => p
                    .responder
                    .result(&jsonrpc::raw_str(r#"{"action":"cancel"}"#)),
                _ => p.responder.error(
                    jsonrpc::INTERNAL_ERROR,
                    &format!(
                        "corral: the agent did not answer within {} s (the client speaks MCP \
                         2026-07-28 and did not retry its request)",
                        ttl.as_secs_f64()
                    ),
                ),
            }
        }
        // Dropping `self` aborts the upstream call.
    }
}

/// A 2026-07-28 URL elicitation carries no `elicitationId`: it is kept by Corral.
fn strip_elicitation_id(params: Option<Box<RawValue>>) -> (Option<Box<RawValue>>, Option<String>) {
    let Some(p) = params else {
        return (None, None);
    };
    let Ok(mut v) = serde_json::from_str::<Map<String, Value>>(p.get()) else {
        return (Some(p), None);
    };
    let id = v.remove("elicitationId");
    let id = id.map(|i| match i {
        Value::String(s) => s,
        other => other.to_string(),
    });
    (Some(jsonrpc::raw(Value::Object(v).to_string())), id)
}

/// The client capabilities one modern request declared.
struct Caps(Map<String, Value>);

impl Caps {
    fn of(meta: &ModernMeta) -> Caps {
        Caps(serde_json::from_str(meta.capabilities.get()).unwrap_or_default())
    }

    /// `Err`: the capability that is missing.
    fn allows(&self, kind: Kind, url_mode: bool) -> Result<(), &'static str> {
        let Some(cap) = self.0.get(kind.capability()) else {
            return Err(kind.capability());
        };
        if url_mode && cap.get("url").is_none() {
            return Err("elicitation.url");
        }
        Ok(())
    }
}

/// The parked conversations, by handle.
pub(crate) struct Store {
    parked: Mutex<HashMap<String, Conv>>,
    ttl: Duration,
}

impl Store {
    /// A store whose deadline is [`TTL_ENV`] when set (milliseconds), else
    /// [`DEFAULT_TTL`]; an unreadable value is named on stderr and ignored.
    pub(crate) fn from_env() -> Store {
        let ttl = match std::env::var(TTL_ENV) {
            Ok(v) => match v.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    eprintln!(
                        "corral: {TTL_ENV}={v:?} is not a positive number of milliseconds; \
                         using {} s (unset it, or set e.g. {TTL_ENV}=600000)",
                        DEFAULT_TTL.as_secs()
                    );
                    DEFAULT_TTL
                }
            },
            Err(_) => DEFAULT_TTL,
        };
        Store {
            parked: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// How long a question waits for the agent's answer (a parked call for its retry, a
    /// driven round for the agent's answers).
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }
}

/// A new unguessable handle.
fn mint() -> String {
    let mut bytes = [0u8; 16];
    corral_httpd::random_bytes(&mut bytes);
    let mut s = String::with_capacity(STATE_PREFIX.len() + 32);
    s.push_str(STATE_PREFIX);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// What a carrying request's params say, for the bridge.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default)]
    request_state: Option<Cow<'a, str>>,
    #[serde(rename = "inputResponses", borrow, default)]
    input_responses: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

/// Serves a modern `tools/call`, `prompts/get` or `resources/read`: a fresh call runs
/// parkable; a retry with Corral's `requestState` resumes its parked call. Returns the
/// final response, in the 2026-07-28 shape.
pub(crate) async fn serve(
    session: &Session,
    me: Arc<Session>,
    id: &RawValue,
    method: &str,
    params: Option<Box<RawValue>>,
    meta: &ModernMeta,
) -> Vec<u8> {
    let hub = session.hub();
    let mut params = params;
    if meta.retry {
        // Off the common path: only a retry mentions these.
        let parsed = match params
            .as_deref()
            .map(|p| serde_json::from_str::<Params<'_>>(p.get()))
        {
            Some(Ok(p)) => p,
            _ => {
                return jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_PARAMS,
                    &format!("{method} needs params as a JSON object"),
                );
            }
        };
        if let Some(state) = parsed.request_state.as_deref()
            && state.starts_with(STATE_PREFIX)
        {
            return resume(hub, session.id(), id, method, &parsed, state, meta).await;
        }
        if upstream_is_modern(hub, method, &parsed) {
            // A 2026 server's own state and answers: for it to read (passed through).
        } else if let Some(state) = parsed.request_state.as_deref() {
            return unknown_state(id, method, state);
        } else {
            // Answers with no state to go with, for a 2025 server: it never asked;
            // the call goes on without them.
            let stripped = without(params.as_deref(), &["inputResponses"]);
            drop(parsed);
            params = stripped;
        }
    }
    // What the call is bound to is worked out only if it parks: most calls never ask.
    let binding = Bound::Params(params.clone());
    let slot = Arc::new(Slot::default());
    let patience = Arc::new(Patience::default());
    let first_id_len = id.get().len();
    let call: Call = {
        let id = id.to_owned();
        let method = as_static(method).unwrap_or("tools/call");
        let call = CARRIER.scope(slot.clone(), async move {
            me.request(&id, method, params).await
        });
        Box::pin(PATIENCE.scope(patience.clone(), call))
    };
    let conv = Conv {
        upstream: Upstream::Inline(call),
        patience,
        slot,
        pending: Vec::new(),
        next_key: 0,
        first_id_len,
        resumed: false,
        binding,
    };
    drive(hub, conv, id, method, meta).await
}

const EMPTY: Params<'static> = Params {
    name: None,
    uri: None,
    arguments: None,
    request_state: None,
    input_responses: None,
    meta: None,
};

/// Whether the call would go to a 2026-07-28 server (whose own `requestState` and
/// `inputResponses` are its business), as far as the routes known now tell.
fn upstream_is_modern(hub: &Hub, method: &str, p: &Params<'_>) -> bool {
    let server = match method {
        "tools/call" => p
            .name
            .as_deref()
            .and_then(|n| match hub.catalog().routes.get(n) {
                Some(crate::catalog::Route::Server { server, .. }) => Some(server.clone()),
                _ => None,
            }),
        "prompts/get" => p.name.as_deref().and_then(|n| {
            hub.prompt_routes
                .lock()
                .unwrap()
                .get(n)
                .map(|r| r.0.clone())
        }),
        _ => p
            .uri
            .as_deref()
            .and_then(|u| hub.resource_routes.lock().unwrap().get(u).cloned()),
    };
    server
        .and_then(|s| hub.servers().get(&s).and_then(|h| h.era()))
        .is_some_and(|e| e == corral_supervisor::Era::Modern)
}

/// `params` without the members `drop`.
fn without(params: Option<&RawValue>, drop: &[&str]) -> Option<Box<RawValue>> {
    let p = params?;
    match serde_json::from_str::<Map<String, Value>>(p.get()) {
        Ok(mut m) => {
            for k in drop {
                m.remove(*k);
            }
            Some(jsonrpc::raw(Value::Object(m).to_string()))
        }
        Err(_) => Some(p.to_owned()),
    }
}

fn unknown_state(id: &RawValue, method: &str, state: &str) -> Vec<u8> {
    let shown: String = state.chars().take(48).collect();
    jsonrpc::error(
        Some(id),
        jsonrpc::INVALID_PARAMS,
        &format!(
            "requestState {shown:?} matches no call Corral is holding (it expired, was \
             already used, was not Corral's, or Corral restarted): call {method} again \
             without requestState and inputResponses"
        ),
    )
}

/// A retry of a parked call: the handle is spent, the answers go to the server, and the
/// call is waited on again.
async fn resume(
    hub: &Arc<Hub>,
    session: u64,
    id: &RawValue,
    method: &str,
    p: &Params<'_>,
    state: &str,
    meta: &ModernMeta,
) -> Vec<u8> {
    let answers: HashMap<String, Box<RawValue>> = match p.input_responses {
        None => HashMap::new(),
        Some(raw) => match serde_json::from_str(raw.get()) {
            Ok(a) => a,
            Err(_) => {
                return jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_PARAMS,
                    "inputResponses must be a JSON object: key (from inputRequests) → the \
                     answer (ElicitResult, CreateMessageResult or ListRootsResult)",
                );
            }
        },
    };
    let binding = Binding::of(method, p);
    let mut conv = {
        let mut parked = hub.parked.parked.lock().unwrap();
        let Some(conv) = parked.get(state) else {
            return unknown_state(id, method, state);
        };
        if !conv.binding.is(binding) {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &format!(
                    "this requestState belongs to another call (another method, name or \
                     arguments): a retry repeats its request's params exactly; or call \
                     {method} again without requestState and inputResponses"
                ),
            );
        }
        for q in &conv.pending {
            if let Some(answer) = answers.get(&q.key)
                && let Some(expected) = q.kind.malformed(answer)
            {
                return jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_PARAMS,
                    &format!(
                        "inputResponses[{:?}] answers {} and must be {expected}; the call is \
                         still waiting: retry with the same requestState",
                        q.key, q.method
                    ),
                );
            }
        }
        match parked.remove(state) {
            Some(conv) => conv,
            None => return unknown_state(id, method, state),
        }
    };
    // Unknown keys are ignored; missing ones are asked again by `drive`.
    let mut open = Vec::with_capacity(conv.pending.len());
    for q in conv.pending.drain(..) {
        match answers.get(&q.key) {
            Some(answer) => q.responder.result(answer),
            None => open.push(q),
        }
    }
    conv.pending = open;
    conv.resumed = true;
    conv.patience.resume();
    // The call's progress (when the first request asked for it) now reaches this
    // request, under this request's token; without one, it reaches nobody.
    if let Some(route) = conv.slot.progress() {
        let token = progress_token(p.meta);
        hub.rebind_progress(route, token.as_deref().map(|t| (session, t, id)));
    }
    drive(hub, conv, id, method, meta).await
}

/// `_meta.progressToken` of a request.
fn progress_token(meta: Option<&RawValue>) -> Option<Box<RawValue>> {
    #[derive(Deserialize)]
    struct M<'a> {
        #[serde(rename = "progressToken", borrow, default)]
        token: Option<&'a RawValue>,
    }
    let m: M<'_> = serde_json::from_str(meta?.get()).ok()?;
    m.token.map(RawValue::to_owned)
}

/// Waits on the call for request `id`: its response (complete), or `input_required`
/// once it asked something the request can carry.
async fn drive(
    hub: &Arc<Hub>,
    mut conv: Conv,
    id: &RawValue,
    method: &str,
    meta: &ModernMeta,
) -> Vec<u8> {
    // Parsed only when a question comes: the common call never needs them.
    let mut caps: Option<Caps> = None;
    let slot = conv.slot.clone();
    loop {
        if !slot.asked.lock().unwrap().is_empty() {
            conv.gather(caps.get_or_insert_with(|| Caps::of(meta)));
        }
        if !conv.pending.is_empty() {
            // Siblings sent together reach the agent together.
            let until = tokio::time::Instant::now() + COALESCE;
            loop {
                tokio::select! {
                    biased;
                    r = conv.upstream.done() => return finish(conv, r, id, method),
                    _ = slot.notify.notified() => {
                        conv.gather(caps.get_or_insert_with(|| Caps::of(meta)));
                    }
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
            if !conv.pending.is_empty() {
                if hub.parked.parked.lock().unwrap().len() >= MAX_PARKED {
                    conv.refuse_all();
                    continue;
                }
                return park(hub, conv, id, method);
            }
        }
        tokio::select! {
            biased;
            r = conv.upstream.done() => return finish(conv, r, id, method),
            _ = slot.notify.notified() => {}
        }
    }
}

/// The call's response (or why it has none) as the answer to request `id`, which may
/// be a retry.
fn finish(conv: Conv, response: Result<Vec<u8>, String>, id: &RawValue, method: &str) -> Vec<u8> {
    let response = match response {
        Ok(r) if conv.resumed => reid(r, conv.first_id_len, id),
        Ok(r) => r,
        Err(why) => jsonrpc::error(
            Some(id),
            jsonrpc::INTERNAL_ERROR,
            &format!("corral: the parked call ended abnormally: {why}"),
        ),
    };
    // Questions still open are moot: dropping them answers the server with an error.
    drop(conv);
    modern::stamp(response, id, modern::cacheable(method))
}

/// `response` (a JSON-RPC response we built) with its id, `old_len` bytes long,
/// replaced by `new`.
fn reid(response: Vec<u8>, old_len: usize, new: &RawValue) -> Vec<u8> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    if !response.starts_with(HEAD) || response.len() < HEAD.len() + old_len {
        return response;
    }
    let mut out = Vec::with_capacity(response.len() + new.get().len());
    out.extend_from_slice(HEAD);
    out.extend_from_slice(new.get().as_bytes());
    out.extend_from_slice(&response[HEAD.len() + old_len..]);
    out
}

/// Parks the call under a new handle and answers request `id` with `input_required`.
fn park(hub: &Arc<Hub>, mut conv: Conv, id: &RawValue, method: &str) -> Vec<u8> {
    conv.binding.resolve(method);
    conv.upstream.detach();
    conv.patience.hold();
    if let Some(route) = conv.slot.progress() {
        hub.rebind_progress(route, None);
    }
    let handle = mint();
    let mut body = String::from(r#"{"resultType":"input_required","inputRequests":{"#);
    for (i, q) in conv.pending.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        jsonrpc::push_str(&mut body, &q.key);
        body.push_str(r#":{"method":"#);
        jsonrpc::push_str(&mut body, &q.method);
        if let Some(p) = &q.params {
            body.push_str(r#","params":"#);
            body.push_str(p.get());
        }
        body.push('}');
    }
    body.push_str(r#"},"requestState":"#);
    jsonrpc::push_str(&mut body, &handle);
    body.push('}');
    let ttl = hub.parked.ttl;
    hub.parked
        .parked
        .lock()
        .unwrap()
        .insert(handle.clone(), conv);
    let weak = Arc::downgrade(hub);
    tokio::spawn(async move {
        tokio::time::sleep(ttl).await;
        let Some(hub) = weak.upgrade() else { return };
        let expired = hub.parked.parked.lock().unwrap().remove(&handle);
        if let Some(conv) = expired {
            conv.expire(ttl);
        }
    });
    modern::stamp(jsonrpc::result(id, &body), id, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reid_replaces_the_first_id() {
        let old = jsonrpc::raw_str("17");
        let new = jsonrpc::raw_str("\"b\"");
        let r = reid(jsonrpc::result(&old, "{}"), 2, &new);
        assert_eq!(r, br#"{"jsonrpc":"2.0","id":"b","result":{}}"#);
        let r = reid(jsonrpc::error(Some(&old), -1, "x"), 2, &new);
        assert!(r.starts_with(br#"{"jsonrpc":"2.0","id":"b","error""#));
    }

    #[test]
    fn handles_are_prefixed_and_distinct() {
        let (a, b) = (mint(), mint());
        assert!(a.starts_with(STATE_PREFIX) && a.len() == STATE_PREFIX.len() + 32);
        assert_ne!(a, b);
    }

    #[test]
    fn bindings_ignore_spacing_but_not_values() {
        let p = |args: &'static str| Params {
            arguments: Some(Box::leak(jsonrpc::raw_str(args))),
            name: Some("t".into()),
            ..EMPTY
        };
        let a = Binding::of("tools/call", &p(r#"{"a":1,"b":2}"#));
        let b = Binding::of(
            "tools/call",
            &p(r#"{ "a": 1,
          "b":2 }"#),
        );
        let d = Binding::of("tools/call", &p(r#"{"a":"x y"}"#));
        let e = Binding::of("tools/call", &p(r#"{"a":"xy"}"#));
        assert_ne!(d, e);
        let c = Binding::of("tools/call", &p(r#"{"a":1,"b":3}"#));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn answers_are_checked_by_kind() {
        let ok = |k: Kind, v: &str| k.malformed(&jsonrpc::raw_str(v)).is_none();
        assert!(ok(Kind::Elicitation, r#"{"action":"accept","content":{}}"#));
        assert!(!ok(Kind::Elicitation, r#"{"action":"maybe"}"#));
        assert!(!ok(Kind::Elicitation, r#""accept""#));
        assert!(ok(
            Kind::Sampling,
            r#"{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}"#
        ));
        assert!(!ok(Kind::Sampling, r#"{"content":"x"}"#));
        assert!(ok(Kind::Roots, r#"{"roots":[]}"#));
        assert!(!ok(Kind::Roots, r#"{}"#));
    }
}
