//! One agent's MCP session: what it may call, how each request is routed, and the
//! messages flowing back to it.
//!
//! A session is transport-agnostic: a transport hands it each incoming message with
//! [`Session::receive`] and a way to deliver the reply; notifications and requests for
//! the agent go through its [`Outbound`]. Every request runs in its own task, so a slow
//! tool never holds up another, and `notifications/cancelled` aborts that task — which
//! drops the forwarded call and so sends `notifications/cancelled` on to the server.

use crate::agent::{ERA_LEGACY, ERA_MODERN, ERA_UNKNOWN, Outbound, SessionShared, level_rank};
use crate::catalog::Route;
use crate::drive;
use crate::hub::{FAN_OUT_LIMIT, Hub};
use crate::jsonrpc::{self, Envelope, Request};
use crate::modern::{self, Claim, ModernMeta, PROTOCOL_VERSIONS};
use crate::naming;
use corral_events::{Event, Kind, Source};
use corral_supervisor::rpc::push_single_line;
use corral_supervisor::{CallError, RpcError, ServerState};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// One agent session.
pub struct Session {
    /// Itself, so a call can outlive the request that started it ([`crate::park`]).
    me: std::sync::Weak<Session>,
    hub: Arc<Hub>,
    shared: Arc<SessionShared>,
    /// Requests in flight by raw id text, for cancellation.
    inflight: Mutex<crate::FastMap<String, oneshot::Sender<()>>>,
}

/// Delivers the reply to one message (`None`: nothing to send back).
pub type Reply = Box<dyn FnOnce(Option<Vec<u8>>) + Send>;

impl Session {
    /// A new agent session of `hub`, writing through `out`; `transport` (`stdio`,
    /// `http`) names how the agent is connected, in its `agent.*` events; `profile`
    /// limits what it sees and calls (`None`: everything).
    pub fn open(
        hub: &Arc<Hub>,
        out: Arc<dyn Outbound>,
        transport: &'static str,
        profile: Option<&str>,
    ) -> Arc<Session> {
        let id = hub.next_id();
        let session = Arc::new_cyclic(|me| Session {
            me: me.clone(),
            hub: hub.clone(),
            shared: Arc::new(SessionShared::new(id, out, transport, profile)),
            inflight: Mutex::new(crate::FastMap::default()),
        });
        hub.register_session(session.shared.clone());
        session
    }

    /// What this agent sees: its profile's catalog.
    fn catalog(&self) -> Arc<crate::catalog::Catalog> {
        self.hub.catalog_for(self.shared.profile.as_deref())
    }

    /// Whether this agent may reach server `server`.
    fn reaches(&self, server: &str) -> bool {
        self.hub.in_profile(self.shared.profile.as_deref(), server)
    }

    /// Whether `get_errors` is offered to this agent (and with it
    /// [`crate::push::ERRORS_URI`]).
    fn offers_errors(&self) -> bool {
        self.catalog()
            .builtins
            .iter()
            .any(|(b, _)| *b == crate::tools::Builtin::GetErrors)
    }

    pub fn id(&self) -> u64 {
        self.shared.id
    }

    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    pub(crate) fn shared(&self) -> &Arc<SessionShared> {
        &self.shared
    }

    /// The protocol version agreed at initialize.
    pub fn protocol(&self) -> Option<String> {
        self.shared.protocol()
    }

    /// Handles one message from the agent. Notifications and responses are handled
    /// before this returns (so a `notifications/cancelled` can never overtake the request
    /// it cancels); requests run on their own task. `reply` gets the response, or `None`
    /// for notifications, responses and cancelled requests.
    pub fn receive(self: &Arc<Self>, message: &[u8], reply: Reply) {
        let Some(env) = Envelope::parse(message) else {
            reply(Some(jsonrpc::error(
                None,
                jsonrpc::PARSE_ERROR,
                "not a JSON-RPC message: MCP stdio is one JSON object per line",
            )));
            return;
        };
        let request = match (env.is_response(), env.method.as_deref(), env.id) {
            (true, _, Some(id)) => {
                self.hub.client_response(id, env.result, env.error);
                return reply(None);
            }
            (_, None, id) => {
                return reply(Some(jsonrpc::error(
                    id,
                    jsonrpc::INVALID_REQUEST,
                    "message has no method",
                )));
            }
            (_, Some(method), None) => {
                self.notification(method, env.params);
                return reply(None);
            }
            (_, Some(_), Some(_)) => env.to_request().expect("a request"),
        };
        let modern = match self.admit(&request) {
            Ok(modern) => modern,
            Err(refused) => return reply(Some(refused)),
        };
        let cancel = match self.register(&request) {
            Ok(cancel) => cancel,
            Err(duplicate) => return reply(Some(duplicate)),
        };
        let this = self.clone();
        tokio::spawn(async move { reply(this.run_cancellable(request, cancel, modern).await) });
    }

    /// Decides how `request` is served, from its own `_meta` and the session's era:
    /// `Some` = a stateless 2026-07-28 request, `None` = legacy; `Err` = the error
    /// response (the request is not run; the session goes on).
    ///
    /// `server/discover` does not decide the era; the first other complete modern
    /// request pins the session modern, `initialize` (or any request without a claim)
    /// pins it legacy. Pinned modern, a request without the claim is refused (a bare
    /// `initialize` too); pinned legacy, a modern claim is refused: a connection is one
    /// revision from its first request on, as the SDKs' stdio transports assume.
    fn admit(&self, request: &Request) -> Result<Option<ModernMeta>, Vec<u8>> {
        let id = &*request.id;
        let method = &*request.method;
        let era = self.shared.era.load(Ordering::Acquire);
        match modern::claim(id, method, request.params.as_deref()) {
            Claim::Invalid(error) => Err(error),
            Claim::Modern(meta) => {
                if era == ERA_LEGACY {
                    return Err(jsonrpc::error(
                        Some(id),
                        jsonrpc::INVALID_REQUEST,
                        "this connection began a 2025 session (initialize), so a 2026-07-28 \
                         request (with _meta protocolVersion) is not served on it: send it \
                         without the _meta claim, or open a new connection for stateless \
                         requests",
                    ));
                }
                match modern::method(method) {
                    modern::Method::Served => {}
                    kind => return Err(modern::method_error(id, method, kind)),
                }
                if method != "server/discover" && era == ERA_UNKNOWN {
                    if self.shared.pin(ERA_MODERN) != ERA_MODERN {
                        return Err(jsonrpc::error(
                            Some(id),
                            jsonrpc::INVALID_REQUEST,
                            "this connection began a 2025 session (initialize)",
                        ));
                    }
                    *self.shared.protocol.lock().unwrap() = Some(meta.version.to_owned());
                    let client = meta.client().unwrap_or_else(|| "unknown".into());
                    self.hello(client, meta.version);
                }
                Ok(Some(meta))
            }
            Claim::None if era == ERA_MODERN => Err(if method == "initialize" {
                jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_REQUEST,
                    "this connection speaks MCP 2026-07-28 (its first request said so), so \
                     initialize is refused: open a new connection for a 2025 session",
                )
            } else {
                missing_claim(id, method)
            }),
            Claim::None if method == "server/discover" && era == ERA_UNKNOWN => {
                Err(missing_claim(id, method))
            }
            Claim::None => {
                if era == ERA_UNKNOWN {
                    self.shared.pin(ERA_LEGACY);
                }
                Ok(None)
            }
        }
    }

    /// Makes `request` cancellable by `notifications/cancelled`; `Err` is the error
    /// response when a request with the same id is already in flight in this session
    /// (the first one goes on; the id is how its answer and cancellation find it).
    fn register(&self, request: &Request) -> Result<oneshot::Receiver<()>, Vec<u8>> {
        let (tx, rx) = oneshot::channel();
        let mut inflight = self.inflight.lock().unwrap();
        if inflight.contains_key(request.id.get()) {
            return Err(duplicate_id(&request.id));
        }
        inflight.insert(request.id.get().to_owned(), tx);
        Ok(rx)
    }

    /// Whether a request with this raw id is in flight in this session.
    pub fn in_flight(&self, id: &RawValue) -> bool {
        self.inflight.lock().unwrap().contains_key(id.get())
    }

    /// Runs a registered request until it answers or is cancelled (`None`).
    async fn run_cancellable(
        &self,
        request: Request,
        cancel: oneshot::Receiver<()>,
        modern: Option<ModernMeta>,
    ) -> Option<Vec<u8>> {
        let Request { id, method, params } = request;
        let out = tokio::select! {
            r = async {
                match &modern {
                    Some(meta) => self.request_modern(&id, &method, params, meta).await,
                    None => self.request(&id, &method, params).await,
                }
            } => Some(r),
            _ = cancel => None,
        };
        self.inflight.lock().unwrap().remove(id.get());
        out
    }

    /// Cancels every request in flight (their tasks end, their forwarded calls are
    /// cancelled on the servers): the agent is gone.
    pub fn cancel_all(&self) {
        // Dropping a request's sender wakes its `run_cancellable` as a cancellation.
        let cancelled = std::mem::take(&mut *self.inflight.lock().unwrap());
        drop(cancelled);
    }

    /// Handles one request inline and returns its response (`None` if it was
    /// cancelled). For transports that already run each request on its own task (HTTP:
    /// one per connection).
    pub async fn call(&self, request: Request) -> Option<Vec<u8>> {
        let modern = match self.admit(&request) {
            Ok(modern) => modern,
            Err(refused) => return Some(refused),
        };
        match self.register(&request) {
            Ok(cancel) => self.run_cancellable(request, cancel, modern).await,
            Err(duplicate) => Some(duplicate),
        }
    }

    /// Handles one stateless 2026-07-28 request whose claim the transport has already
    /// read and checked (HTTP: one session per POST).
    pub(crate) async fn call_modern(&self, request: Request, meta: ModernMeta) -> Option<Vec<u8>> {
        self.shared.pin(ERA_MODERN);
        match self.register(&request) {
            Ok(cancel) => self.run_cancellable(request, cancel, Some(meta)).await,
            Err(duplicate) => Some(duplicate),
        }
    }

    /// A stateless request: served like a 2025 one, answered in the 2026-07-28 shape.
    /// Its `meta` (capabilities, client info) is this request's alone. A server's
    /// question during a `tools/call`, `prompts/get` or `resources/read` becomes an
    /// `input_required` answer and the call waits for the retry ([`crate::park`]); no
    /// server request is ever sent to a modern session (see `Hub::server_request`).
    async fn request_modern(
        &self,
        id: &RawValue,
        method: &str,
        params: Option<Box<RawValue>>,
        meta: &ModernMeta,
    ) -> Vec<u8> {
        if method == "server/discover" {
            return jsonrpc::result(id, &modern::discover_result(&self.instructions()));
        }
        if method == "subscriptions/listen" {
            return self.listen(id, params.as_deref()).await;
        }
        // Server logs reach this request only if it asked (`_meta` logLevel).
        let _logs = meta.log_level.map(|level| self.scope_logs(id, level));
        if crate::park::carries(method)
            && let Some(me) = self.me.upgrade()
        {
            return crate::park::serve(self, me, id, method, params, meta).await;
        }
        let response = self.request(id, method, params).await;
        modern::stamp(response, id, modern::cacheable(method))
    }

    fn notification(&self, method: &str, params: Option<&RawValue>) {
        match method {
            // (A stateless connection gets nothing outside its requests.)
            "notifications/initialized" if !self.shared.is_modern() => {
                self.shared.initialized.store(true, Ordering::Release)
            }
            // A 2025 agent's roots changed: every legacy server asks `roots/list` again
            // (and gets the roots of whichever agent's call it serves then). A stateless
            // agent has no such notification: it states its capabilities per request.
            "notifications/roots/list_changed" if !self.shared.is_modern() => {
                for handle in self.hub.servers().values() {
                    handle.roots_changed();
                }
            }
            "notifications/cancelled" => {
                #[derive(Deserialize)]
                struct P<'a> {
                    #[serde(rename = "requestId", borrow)]
                    request_id: &'a RawValue,
                }
                if let Some(p) = params.and_then(|p| serde_json::from_str::<P<'_>>(p.get()).ok())
                    && let Some(tx) = self.inflight.lock().unwrap().remove(p.request_id.get())
                {
                    let _ = tx.send(());
                }
            }
            _ => {}
        }
    }

    pub(crate) async fn request(
        &self,
        id: &RawValue,
        method: &str,
        owned_params: Option<Box<RawValue>>,
    ) -> Vec<u8> {
        if method == "tools/call" {
            return self.call_tool(id, owned_params).await;
        }
        let params = owned_params.as_deref();
        match method {
            "initialize" => self.initialize(id, params),
            "ping" => jsonrpc::result(id, "{}"),
            "tools/list" => {
                self.hub.await_starting().await;
                jsonrpc::result(id, &self.catalog().list_json)
            }
            "resources/list" => {
                self.hub.await_starting().await;
                let mut merged = self.routed_items(method, "resources", "resources").await;
                if self.offers_errors() {
                    merged.insert(0, crate::push::errors_resource());
                }
                jsonrpc::result(id, &json!({ "resources": merged }).to_string())
            }
            "resources/templates/list" => {
                self.list_merged(id, method, "resources", "resourceTemplates")
                    .await
            }
            "prompts/list" => self.list_merged(id, method, "prompts", "prompts").await,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                self.resource_request(id, method, params).await
            }
            "prompts/get" => self.prompt_get(id, params).await,
            "completion/complete" => self.complete(id, params).await,
            "logging/setLevel" => self.set_level(id, params).await,
            _ => jsonrpc::error(
                Some(id),
                jsonrpc::METHOD_NOT_FOUND,
                &format!("method not found: {method}"),
            ),
        }
    }

    fn initialize(&self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let p: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let asked = p
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = if PROTOCOL_VERSIONS.contains(&asked) {
            asked
        } else {
            PROTOCOL_VERSIONS[0]
        };
        *self.shared.caps.lock().unwrap() = p.get("capabilities").cloned().unwrap_or(Value::Null);
        let info = &p["clientInfo"];
        let client = format!(
            "{} {}",
            info["name"].as_str().unwrap_or("unknown"),
            info["version"].as_str().unwrap_or("")
        )
        .trim_end()
        .to_owned();
        self.hello(client, version);
        *self.shared.protocol.lock().unwrap() = Some(version.to_owned());
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": modern::capabilities(),
            "serverInfo": modern::server_info_value(),
        });
        result["instructions"] = Value::String(self.instructions());
        jsonrpc::result(id, &result.to_string())
    }

    /// What `initialize` and `server/discover` say about Corral and its servers.
    fn instructions(&self) -> String {
        let instructions: Vec<String> = self
            .hub
            .servers()
            .values()
            .filter(|h| self.reaches(h.name()))
            .filter_map(|h| {
                let init = h.initialize_result()?;
                let text = init.get("instructions")?.as_str()?;
                Some(format!("[{}] {text}", h.name()))
            })
            .collect();
        let mut text = format!(
            "Corral aggregates several MCP servers. {}",
            self.catalog().where_to_look()
        );
        for i in &instructions {
            text.push('\n');
            text.push_str(i);
        }
        text
    }

    /// Records who the agent is and says so (`agent.connected`, once per session).
    fn hello(&self, client: String, version: &str) {
        if self
            .shared
            .client
            .lock()
            .unwrap()
            .replace(client.clone())
            .is_none()
        {
            self.hub.emit(
                Event::new(Kind::AgentConnected, Source::Corral)
                    .with("session", self.shared.id)
                    .with("transport", self.shared.transport)
                    .with_opt("profile", self.shared.profile.as_deref())
                    .with("client", client)
                    .with("protocol", version),
            );
        }
    }

    async fn call_tool(&self, id: &RawValue, params: Option<Box<RawValue>>) -> Vec<u8> {
        #[derive(Deserialize)]
        struct P<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
            #[serde(borrow, default)]
            arguments: Option<&'a RawValue>,
            #[serde(rename = "_meta", borrow, default)]
            meta: Option<&'a RawValue>,
            /// A 2026 agent's retry of an `input_required` round: passed to a modern
            /// server as they came.
            #[serde(rename = "inputResponses", borrow, default)]
            input_responses: Option<&'a RawValue>,
            #[serde(rename = "requestState", borrow, default)]
            request_state: Option<&'a RawValue>,
        }
        let Some(p) = params
            .as_deref()
            .and_then(|p| serde_json::from_str::<P<'_>>(p.get()).ok())
        else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "tools/call needs params {name, arguments}",
            );
        };
        let name = p.name.as_ref();
        let mut catalog = self.catalog();
        if !catalog.routes.contains_key(name) {
            // Its server may still be starting, or just became ready and the catalog
            // is not rebuilt yet: wait (bounded; this refreshes the catalog), look again.
            self.hub.await_starting_for_tool(name).await;
            catalog = self.catalog();
        }
        let (server, tool) = match catalog.routes.get(name) {
            Some(Route::Server { server, tool }) => (server.as_str(), tool.as_str()),
            Some(Route::Builtin(b)) => {
                let args: Value = p
                    .arguments
                    .and_then(|a| serde_json::from_str(a.get()).ok())
                    .unwrap_or(Value::Null);
                let caller = self
                    .shared
                    .client
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_else(|| format!("session {}", self.shared.id));
                let result = self.hub.call_builtin(*b, &args, &caller).await;
                return jsonrpc::result(id, &result);
            }
            None => return self.unknown_tool(id, name),
        };
        let servers = self.hub.servers();
        let Some(handle) = servers.get(server) else {
            return self.unknown_tool(id, name);
        };
        let _call = self.hub.begin_call(server, self.shared.id, id);
        let modern_server = handle.era() == Some(corral_supervisor::Era::Modern);
        // A 2025 agent calling a 2026 server: Corral answers its input_required rounds.
        let driven = modern_server && !self.shared.is_modern();
        // The forwarded params: the original tool name, the arguments as they are, and
        // `_meta` with a progress token unique across sessions. They are written straight
        // into the request line, and the agent's params are freed once it is built.
        let mut progress_id = None;
        // The common case — a `_meta` with no progress token, nothing to add — goes as it
        // came, unparsed (every 2026-07-28 request has a `_meta`).
        let as_is = p.meta.filter(|m| {
            !driven
                && !jsonrpc::mentions!(m.get().as_bytes(), "\"progressToken\"")
                && !crate::listen::adds_log_level(&self.shared, handle)
        });
        let mut meta = p
            .meta
            .filter(|_| as_is.is_none())
            .map(|meta| serde_json::from_str(meta.get()).unwrap_or_default());
        if driven {
            let meta: &mut serde_json::Map<String, Value> = meta.get_or_insert_default();
            meta.insert(
                modern::CLIENT_CAPABILITIES_KEY.to_owned(),
                drive::upstream_capabilities(&self.shared),
            );
        }
        let meta = meta.map(|mut meta: serde_json::Map<String, Value>| {
            if let Some(token) = meta.get("progressToken") {
                let raw = jsonrpc::raw(token.to_string());
                let n = self.hub.register_progress(self.shared.id, &raw, id);
                meta.insert(
                    "progressToken".into(),
                    Value::String(crate::hub::progress_token(n)),
                );
                progress_id = Some(n);
            }
            Value::Object(meta).to_string()
        });
        // A 2025 agent's logging/setLevel reaches a modern server as `_meta` logLevel.
        let meta = crate::listen::with_log_level(meta, &self.shared, handle);
        if driven {
            let mut upstream = String::with_capacity(64 + p.arguments.map_or(0, |a| a.get().len()));
            upstream.push_str(r#"{"name":"#);
            jsonrpc::push_str(&mut upstream, tool);
            if let Some(a) = p.arguments {
                upstream.push_str(r#","arguments":"#);
                push_single_line(&mut upstream, a.get());
            }
            if let Some(meta) = &meta {
                upstream.push_str(r#","_meta":"#);
                upstream.push_str(meta);
            }
            upstream.push('}');
            drop(params);
            let outcome =
                drive::request(&self.hub, &self.shared, handle, "tools/call", id, upstream).await;
            if let Some(n) = progress_id {
                self.hub.forget_progress(n);
            }
            return match outcome {
                drive::Outcome::Done(r) => jsonrpc::result(id, r.get()),
                drive::Outcome::Error(e) => reply(id, Err(e), |e| {
                    let msg = agent_message(&e, &self.catalog());
                    jsonrpc::result(id, &jsonrpc::tool_error_result(&msg))
                }),
                drive::Outcome::Failed(msg) => {
                    jsonrpc::result(id, &jsonrpc::tool_error_result(&msg))
                }
            };
        }
        let all = params.as_deref().map_or("", RawValue::get);
        // Where a member is in the agent's params (it was parsed from them).
        let span = |v: Option<&RawValue>| {
            v.map(|a| {
                let start = a.get().as_ptr() as usize - all.as_ptr() as usize;
                start..start + a.get().len()
            })
        };
        let args = span(p.arguments);
        let meta_as_is = span(as_is);
        // A retry's answers and state, for a modern server only (a 2025 server has no
        // such params; a modern agent's retry to one is not Corral's to complete here).
        let (answers, state) = if modern_server {
            (span(p.input_responses), span(p.request_state))
        } else {
            (None, None)
        };
        let len = [&args, &answers, &state, &meta_as_is]
            .iter()
            .map(|r| r.as_ref().map_or(0, |r| r.len()))
            .sum::<usize>();
        let owned_tool = tool.to_owned();
        let write = move |line: &mut String| {
            line.push_str(r#","params":{"name":"#);
            jsonrpc::push_str(line, &owned_tool);
            if let Some(params) = &params {
                for (key, range) in [
                    (r#","arguments":"#, args),
                    (r#","inputResponses":"#, answers),
                    (r#","requestState":"#, state),
                    (r#","_meta":"#, meta_as_is),
                ] {
                    if let Some(r) = range {
                        line.push_str(key);
                        push_single_line(line, &params.get()[r]);
                    }
                }
            }
            if let Some(meta) = meta {
                line.push_str(r#","_meta":"#);
                line.push_str(&meta);
            }
            line.push('}');
            drop(params);
        };
        // Every piece is JSON we parsed or built, so the server gets it without another
        // validating parse.
        let result = handle
            .request_with("tools/call", Some(tool), 64 + len, write)
            .await;
        if let Some(n) = progress_id {
            self.hub.forget_progress(n);
        }
        // A gateway-side failure of a tool call is a tool error the model can read.
        reply(id, result, |e| {
            let msg = agent_message(&e, &self.catalog());
            jsonrpc::result(id, &jsonrpc::tool_error_result(&msg))
        })
    }

    fn unknown_tool(&self, id: &RawValue, name: &str) -> Vec<u8> {
        if let Some(profile) = &self.shared.profile
            && self.hub.catalog().routes.contains_key(name)
        {
            let why = match self.hub.profile(profile) {
                Some(_) => format!(
                    "it connected with profile '{profile}', which leaves it out; \
                     `tools/list` shows what the profile offers (add the tool to \
                     [profiles.{profile}] in corral.toml, or connect without the profile, \
                     to call it)"
                ),
                None => format!(
                    "it connected with profile '{profile}', which is no longer in \
                     corral.toml; reconnect with a configured profile, or without one"
                ),
            };
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &format!("tool '{name}' is not offered to this agent: {why}"),
            );
        }
        // A tool of a server that is down is "unknown" now; say so instead.
        if let Some((server, _)) = name.split_once(naming::SEP)
            && self.reaches(server)
            && let Some(h) = self.hub.servers().get(server)
            && h.state() != ServerState::Ready
        {
            let msg = agent_message(&h.unavailable(), &self.catalog());
            return jsonrpc::result(id, &jsonrpc::tool_error_result(&msg));
        }
        jsonrpc::error(
            Some(id),
            jsonrpc::INVALID_PARAMS,
            &format!("unknown tool: {name}"),
        )
    }

    /// Sends `method` to every ready server that declared `capability`, and merges the
    /// `field` arrays of their results (renaming prompts, recording routes).
    async fn list_merged(
        &self,
        id: &RawValue,
        method: &str,
        capability: &str,
        field: &str,
    ) -> Vec<u8> {
        self.hub.await_starting().await;
        let merged = self.routed_items(method, capability, field).await;
        jsonrpc::result(id, &json!({ field: merged }).to_string())
    }

    /// The `field` items of every ready server with `capability` (answering `method`),
    /// renamed where needed, with their routes recorded.
    async fn routed_items(&self, method: &str, capability: &str, field: &str) -> Vec<Value> {
        let mut merged = Vec::new();
        for (server, result) in self.fan_out(method, capability).await {
            if let Ok(raw) = result
                && let Ok(mut v) = serde_json::from_str::<Value>(raw.get())
                && let Some(items) = v.get_mut(field).and_then(Value::as_array_mut)
            {
                for mut item in items.drain(..) {
                    self.record_route(&server, field, &mut item);
                    merged.push(item);
                }
            }
        }
        merged
    }

    fn record_route(&self, server: &str, field: &str, item: &mut Value) {
        match field {
            "resources" => {
                if let Some(uri) = item.get("uri").and_then(Value::as_str) {
                    self.hub
                        .resource_routes
                        .lock()
                        .unwrap()
                        .entry(uri.to_owned())
                        .or_insert_with(|| server.to_owned());
                }
            }
            "resourceTemplates" => {
                if let Some(t) = item.get("uriTemplate").and_then(Value::as_str) {
                    let prefix = t.split('{').next().unwrap_or(t).to_owned();
                    let mut routes = self.hub.template_routes.lock().unwrap();
                    if !routes.iter().any(|(p, s)| *p == prefix && s == server) {
                        routes.push((prefix, server.to_owned()));
                    }
                }
            }
            "prompts" => {
                if let Some(name) = item.get("name").and_then(Value::as_str).map(str::to_owned) {
                    let exposed = naming::exposed(self.hub.opts.tool_prefix, server, &name);
                    item["name"] = Value::String(exposed.clone());
                    self.hub
                        .prompt_routes
                        .lock()
                        .unwrap()
                        .insert(exposed, (server.to_owned(), name));
                }
            }
            _ => {}
        }
    }

    async fn fan_out(
        &self,
        method: &str,
        capability: &str,
    ) -> Vec<(String, Result<Box<RawValue>, CallError>)> {
        let mut tasks = tokio::task::JoinSet::new();
        for h in self.hub.servers().values() {
            if h.state() != ServerState::Ready
                || !self.hub.server_has(h.name(), capability)
                || !self.reaches(h.name())
            {
                continue;
            }
            let h = h.clone();
            let method = method.to_owned();
            tasks.spawn(async move {
                let r = tokio::time::timeout(FAN_OUT_LIMIT, h.request(&method, None)).await;
                let r = r.unwrap_or_else(|_| {
                    Err(CallError::Rpc {
                        server: h.name().to_owned(),
                        source: RpcError::Timeout {
                            method,
                            after: FAN_OUT_LIMIT,
                        },
                    })
                });
                (h.name().to_owned(), r)
            });
        }
        let mut out = Vec::new();
        while let Some(Ok(r)) = tasks.join_next().await {
            out.push(r);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The server owning resource `uri`: from listings, then templates, then the only
    /// server with resources; else it asks for a listing first.
    /// Corral's own resource ([`crate::push::ERRORS_URI`]) is owned by `""`, a name no
    /// server can have.
    pub(crate) async fn resource_server(&self, uri: &str) -> Option<String> {
        if uri == crate::push::ERRORS_URI && self.offers_errors() {
            return Some(String::new());
        }
        if let Some(s) = self.lookup_resource(uri) {
            return Some(s);
        }
        let candidates: Vec<String> = self
            .hub
            .servers()
            .keys()
            .filter(|n| self.hub.server_has(n, "resources") && self.reaches(n))
            .cloned()
            .collect();
        if candidates.len() == 1 {
            return candidates.into_iter().next();
        }
        // Learn the routes (from every server, those still starting too), then look
        // again.
        self.hub.await_starting().await;
        self.learn_routes("resources/list", "resources", "resources")
            .await;
        self.learn_routes("resources/templates/list", "resourceTemplates", "resources")
            .await;
        self.lookup_resource(uri)
    }

    /// The server whose listing had `uri` (or a template it fits), among those this
    /// agent reaches.
    fn lookup_resource(&self, uri: &str) -> Option<String> {
        if let Some(s) = self.hub.resource_routes.lock().unwrap().get(uri)
            && self.reaches(s)
        {
            return Some(s.clone());
        }
        let templates = self.hub.template_routes.lock().unwrap();
        templates
            .iter()
            .filter(|(prefix, s)| uri.starts_with(prefix.as_str()) && self.reaches(s))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, s)| s.clone())
    }

    async fn resource_request(
        &self,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<u8> {
        let Some(uri) = jsonrpc::str_member(params.map(RawValue::get), "uri") else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &format!("{method} needs params {{uri}}"),
            );
        };
        let Some(server) = self.resource_server(&uri).await else {
            return jsonrpc::error_with_data(
                Some(id),
                -32002,
                &format!("resource not found: {uri}"),
                Some(&json!({ "uri": uri }).to_string()),
            );
        };
        match method {
            // Held in the hub's refcounted set with the listens' subscriptions: the first
            // holder subscribes upstream (a modern server through Corral's listen to
            // it), the last one unsubscribes.
            "resources/subscribe" => {
                let new = self
                    .shared
                    .subscriptions
                    .lock()
                    .unwrap()
                    .insert(uri.clone());
                if new && let Err(e) = self.hub.hold_resource(&server, &uri).await {
                    self.shared.subscriptions.lock().unwrap().remove(&uri);
                    return reply(id, Err(e), |e| {
                        let msg = agent_message(&e, &self.catalog());
                        jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, &msg)
                    });
                }
                jsonrpc::result(id, "{}")
            }
            "resources/unsubscribe" => {
                if self.shared.subscriptions.lock().unwrap().remove(&uri) {
                    self.hub.release_resource(&uri);
                }
                jsonrpc::result(id, "{}")
            }
            _ if server.is_empty() => match self.hub.errors_report(&json!({})).await {
                Ok(report) => jsonrpc::result(
                    id,
                    &json!({"contents": [{
                        "uri": uri,
                        "mimeType": "text/plain",
                        "text": report.text(),
                    }]})
                    .to_string(),
                ),
                Err(e) => jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, &e),
            },
            _ => self.forward(id, &server, method, params).await,
        }
    }

    async fn prompt_get(&self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let mut p = match params_value(id, params, "prompts/get needs params {name}") {
            Ok(p) => p,
            Err(response) => return response,
        };
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let Some((server, original)) = self.prompt_route(&name).await else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &format!("unknown prompt: {name}"),
            );
        };
        p["name"] = Value::String(original);
        let raw = jsonrpc::raw(p.to_string());
        self.forward(id, &server, "prompts/get", Some(&raw)).await
    }

    async fn prompt_route(&self, name: &str) -> Option<(String, String)> {
        let known = || {
            let routes = self.hub.prompt_routes.lock().unwrap();
            routes.get(name).filter(|(s, _)| self.reaches(s)).cloned()
        };
        if let Some(r) = known() {
            return Some(r);
        }
        self.learn_routes("prompts/list", "prompts", "prompts")
            .await;
        known()
    }

    /// Lists `field` items of every server with `capability`, only to record routes.
    async fn learn_routes(&self, method: &str, field: &str, capability: &str) {
        self.routed_items(method, capability, field).await;
    }

    async fn complete(&self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let usage = "completion/complete needs params {ref, argument}";
        let mut p = match params_value(id, params, usage) {
            Ok(p) => p,
            Err(response) => return response,
        };
        let kind = p
            .pointer("/ref/type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let server = match kind.as_str() {
            "ref/prompt" => {
                let name = p
                    .pointer("/ref/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                match self.prompt_route(&name).await {
                    Some((server, original)) => {
                        p["ref"]["name"] = Value::String(original);
                        Some(server)
                    }
                    None => None,
                }
            }
            "ref/resource" => {
                let uri = p
                    .pointer("/ref/uri")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                self.resource_server(&uri).await
            }
            _ => None,
        };
        let Some(server) = server else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "completion/complete: unknown prompt or resource in `ref`",
            );
        };
        let raw = jsonrpc::raw(p.to_string());
        self.forward(id, &server, "completion/complete", Some(&raw))
            .await
    }

    async fn set_level(&self, id: &RawValue, params: Option<&RawValue>) -> Vec<u8> {
        let Some(level) = jsonrpc::str_member(params.map(RawValue::get), "level") else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "logging/setLevel needs params {level}",
            );
        };
        self.shared
            .log_level
            .store(level_rank(&level), Ordering::Relaxed);
        self.shared.level_asked.store(true, Ordering::Relaxed);
        // Servers filter at the source too; the most verbose level any session asked for
        // would be the precise choice, the latest request is the simple one.
        for h in self.hub.servers().values() {
            if h.state() == ServerState::Ready
                && self.hub.server_has(h.name(), "logging")
                && self.reaches(h.name())
            {
                let h = h.clone();
                let params = params.map(|p| p.to_owned());
                tokio::spawn(async move {
                    let _ = h.request("logging/setLevel", params.as_deref()).await;
                });
            }
        }
        jsonrpc::result(id, "{}")
    }

    /// Forwards a request to one server and maps the outcome to a response.
    async fn forward(
        &self,
        id: &RawValue,
        server: &str,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<u8> {
        let Some(h) = self
            .hub
            .servers()
            .get(server)
            .filter(|_| self.reaches(server))
            .cloned()
        else {
            return jsonrpc::error(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                &format!("no server '{server}'"),
            );
        };
        let _call = self.hub.begin_call(server, self.shared.id, id);
        // A 2025 agent's logging/setLevel reaches a modern server as `_meta` logLevel.
        let leveled = crate::listen::params_with_log_level(params, &self.shared, &h);
        let params = leveled.as_deref().or(params);
        let routed = self.route_progress(id, params);
        let params = routed.as_ref().map(|r| &*r.params).or(params);
        let failed = |e: CallError| {
            let msg = agent_message(&e, &self.catalog());
            jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, &msg)
        };
        if drive::drives(&self.shared, &h) {
            // A 2025 agent, a 2026 server: Corral answers the server's input_required
            // rounds through the agent, and the result loses its 2026-only members.
            if !matches!(method, "prompts/get" | "resources/read") {
                let result = h.request(method, params).await;
                return reply(id, result.map(drive::strip_modern), failed);
            }
            let caps = drive::upstream_capabilities(&self.shared);
            let params = drive::with_capabilities(params, caps);
            return match drive::request(&self.hub, &self.shared, &h, method, id, params).await {
                drive::Outcome::Done(r) => jsonrpc::result(id, r.get()),
                drive::Outcome::Error(e) => reply(id, Err(e), failed),
                drive::Outcome::Failed(msg) => {
                    jsonrpc::error(Some(id), jsonrpc::INTERNAL_ERROR, &msg)
                }
            };
        }
        // A 2026 agent gets a 2026 server's input_required as it is, to answer and retry.
        let result = if self.shared.is_modern() {
            h.request_relayed(method, params.map(RawValue::get)).await
        } else {
            h.request(method, params).await
        };
        reply(id, result, failed)
    }

    /// `params` routed for progress ([`RoutedProgress`]); `None` when they carry no
    /// `_meta.progressToken` (the common case: one substring search).
    fn route_progress(
        &self,
        id: &RawValue,
        params: Option<&RawValue>,
    ) -> Option<RoutedProgress<'_>> {
        let text = params?.get();
        if !jsonrpc::mentions!(text.as_bytes(), "\"progressToken\"") {
            return None;
        }
        let mut params: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
        let meta = params.get_mut("_meta")?.as_object_mut()?;
        let token = jsonrpc::raw(meta.get("progressToken")?.to_string());
        let route = self.hub.register_progress(self.shared.id, &token, id);
        meta.insert(
            "progressToken".into(),
            Value::String(crate::hub::progress_token(route)),
        );
        Some(RoutedProgress {
            params: jsonrpc::raw(Value::Object(params).to_string()),
            hub: &self.hub,
            route,
        })
    }
}

/// A forwarded request's params with the agent's progress token replaced by a route of
/// the hub's (`corral-p-N`: an agent's tokens are unique only among its own requests),
/// which is forgotten when this is dropped, however the request ends.
struct RoutedProgress<'h> {
    params: Box<RawValue>,
    hub: &'h Hub,
    route: u64,
}

impl Drop for RoutedProgress<'_> {
    fn drop(&mut self) {
        self.hub.forget_progress(self.route);
    }
}

/// A server's answer as the agent's response: results and the server's own JSON-RPC
/// errors pass through unchanged; gateway-side failures are worded by `failed`.
fn reply(
    id: &RawValue,
    result: Result<Box<RawValue>, CallError>,
    failed: impl FnOnce(CallError) -> Vec<u8>,
) -> Vec<u8> {
    match result {
        Ok(r) => jsonrpc::result(id, r.get()),
        // A server that rejects the revision or the headers Corral negotiated with it:
        // Corral's fault, not the agent's, and the raw code would tell the agent
        // that its own request was malformed.
        Err(CallError::Rpc {
            server,
            source: RpcError::Server { code, message, .. },
        }) if drive::is_corral_fault(code) => jsonrpc::error(
            Some(id),
            jsonrpc::INTERNAL_ERROR,
            &drive::corral_fault(&server, code, &message),
        ),
        Err(CallError::Rpc {
            source:
                RpcError::Server {
                    code,
                    message,
                    data,
                },
            ..
        }) => jsonrpc::error_with_data(Some(id), code, &message, data.as_deref()),
        Err(e) => failed(e),
    }
}

/// The `-32602` answer to a request without the 2026-07-28 `_meta` claim where one is
/// needed.
fn missing_claim(id: &RawValue, method: &str) -> Vec<u8> {
    jsonrpc::error(
        Some(id),
        jsonrpc::INVALID_PARAMS,
        &format!(
            "{method} needs params._meta with \"{}\" and \"{}\" (MCP 2026-07-28), or, \
             for a 2025 session, initialize on a new connection",
            modern::PROTOCOL_VERSION_KEY,
            modern::CLIENT_CAPABILITIES_KEY
        ),
    )
}

/// The answer to a request whose id is already in flight in the session.
pub(crate) fn duplicate_id(id: &RawValue) -> Vec<u8> {
    jsonrpc::error(
        Some(id),
        jsonrpc::INVALID_REQUEST,
        &format!(
            "request id {} is already in flight in this session; the first request \
             goes on, this one was not run (give every request in flight its own id)",
            id.get()
        ),
    )
}

/// `params` as a JSON object, or the invalid-params response naming what is expected.
fn params_value(id: &RawValue, params: Option<&RawValue>, usage: &str) -> Result<Value, Vec<u8>> {
    params
        .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        .ok_or_else(|| jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, usage))
}

/// A gateway-side failure worded for an agent: short, actionable, no raw stderr; the
/// advice names the tools the agent has, as it sees them.
fn agent_message(e: &CallError, catalog: &crate::catalog::Catalog) -> String {
    format!("{e}; {}", catalog.advice(e.server(), e.stopped()))
}
