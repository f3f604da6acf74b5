//! The state every agent session shares: the servers, the tool catalog, the routes of
//! resources and prompts, and the bookkeeping that lets messages flow back to the right
//! session (progress tokens, server→client requests, subscriptions).

use crate::agent::SessionShared;
use crate::catalog::Catalog;
use crate::drive::AgentAnswer;
use crate::jsonrpc;
use crate::tools::{self, Builtin};
use corral_config::{Profile, ToolPrefix};
use corral_events::{Event, EventBus, Kind, Source};
use corral_supervisor::rpc::Responder;
use corral_supervisor::{
    IncomingRequest, Notification, NotificationHook, ServerHandle, ServerState,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};

/// How the gateway presents itself.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    pub tool_prefix: ToolPrefix,
    pub builtin_tools: bool,
}

/// Where a rewritten progress token leads back to.
struct ProgressRoute {
    session: u64,
    token: Box<RawValue>,
    request: Box<RawValue>,
    /// The last `progress` value forwarded: MCP requires each to be above the one
    /// before, and a call that spans several upstream requests (a 2026 server's
    /// `input_required` rounds, `drive.rs`) may hear each leg count from the start.
    last: Option<f64>,
}

/// A forwarded call in flight, for routing what a server sends during it.
struct ActiveCall {
    seq: u64,
    session: u64,
    request: Box<RawValue>,
    /// Set when the call serves a 2026-07-28 request that can carry a question
    /// (`input_required`): the server's requests during it go there ([`crate::park`]).
    slot: Option<Arc<crate::park::Slot>>,
}

/// Shared gateway state; sessions hold an `Arc` of it.
pub struct Hub {
    pub(crate) opts: GatewayOptions,
    /// The servers, replaced whole when the config is reloaded.
    servers: RwLock<Arc<BTreeMap<String, ServerHandle>>>,
    /// What `hook`/pumps were set up for: a server added later gets a pump too.
    notification_pumps: bool,
    bus: EventBus,
    catalog: RwLock<Arc<Catalog>>,
    /// `[profiles]` ([`Hub::set_profiles`]) and the catalog of each, rebuilt with the
    /// full one.
    profiles: RwLock<Arc<BTreeMap<String, Profile>>>,
    profile_catalogs: RwLock<HashMap<String, Arc<Catalog>>>,
    sessions: Mutex<crate::FastMap<u64, Arc<SessionShared>>>,
    next_id: AtomicU64,
    progress: Mutex<HashMap<u64, ProgressRoute>>,
    client_requests: Mutex<HashMap<u64, (u64, Responder)>>,
    /// Requests the gateway itself sent an agent (the `input_required` rounds it drives
    /// for a 2025 agent, [`crate::drive`]): id → (session, who awaits the answer). Ids
    /// share `next_id` with `client_requests`, so one `corral-N` names one request.
    agent_answers: Mutex<HashMap<u64, (u64, oneshot::Sender<AgentAnswer>)>>,
    calls: Mutex<crate::FastMap<String, Vec<ActiveCall>>>,
    /// Resource URI → server, learned from `resources/list`.
    pub(crate) resource_routes: Mutex<HashMap<String, String>>,
    /// Template URI prefix (up to the first `{`) → server, from `resources/templates/list`.
    pub(crate) template_routes: Mutex<Vec<(String, String)>>,
    /// Exposed prompt name → (server, prompt name).
    pub(crate) prompt_routes: Mutex<HashMap<String, (String, String)>>,
    /// The project's dev processes, when this gateway fronts them too
    /// ([`Hub::attach_processes`]).
    processes: std::sync::OnceLock<ProcessTools>,
    /// The project's dev proxies, when this gateway runs them ([`Hub::attach_proxies`]).
    proxies: std::sync::OnceLock<corral_proxy::Proxies>,
    /// `[errors] ignore`, for `get_errors` ([`Hub::set_error_noise`]).
    error_noise: RwLock<Vec<String>>,
    /// When each caller last asked for `get_errors`.
    errors_last_calls: tools::errors::LastCalls,
    /// The journal and when this daemon began ([`Hub::set_history`]).
    history: std::sync::OnceLock<(std::path::PathBuf, std::time::SystemTime)>,
    /// Open `subscriptions/listen`s, resource subscriptions held upstream, and logs
    /// scoped to modern requests ([`crate::listen`]).
    pub(crate) listens: crate::listen::Listens,
    /// Calls parked on a server's question to a 2026-07-28 agent ([`crate::park`]).
    pub(crate) parked: crate::park::Store,
}

/// What the process tools work on.
struct ProcessTools {
    processes: corral_supervisor::Processes,
    /// The project root: an ad-hoc process's `cwd` is relative to it, and alert
    /// locations are shown relative to it.
    root: std::path::PathBuf,
}

impl Hub {
    /// Starts the gateway over `servers`: watches their events, takes their
    /// server→client requests from `requests`, and their notifications through `hook`
    /// (the supervisor's [`NotificationHook`], which runs in order with responses, so a
    /// progress notification reaches the agent before the result it precedes); without a
    /// hook, notifications are read from each server's broadcast, in no particular order
    /// relative to responses.
    pub fn start(
        servers: BTreeMap<String, ServerHandle>,
        opts: GatewayOptions,
        bus: EventBus,
        requests: Option<mpsc::UnboundedReceiver<IncomingRequest>>,
        hook: Option<NotificationHook>,
    ) -> Arc<Hub> {
        let events = bus.subscribe();
        let catalog = Catalog::build(servers.values(), opts.tool_prefix, opts.builtin_tools);
        let hub = Arc::new_cyclic(|weak: &std::sync::Weak<Hub>| {
            let weak = weak.clone();
            let installed = hook.is_some_and(|h| {
                h.set(Box::new(move |server: &str, note: &Notification| {
                    if let Some(hub) = weak.upgrade() {
                        hub.server_notification(server, note.clone());
                    }
                }))
                .is_ok()
            });
            Hub {
                opts,
                servers: RwLock::new(Arc::new(servers)),
                notification_pumps: !installed,
                bus,
                catalog: RwLock::new(Arc::new(catalog)),
                profiles: RwLock::default(),
                profile_catalogs: RwLock::default(),
                sessions: Mutex::new(crate::FastMap::default()),
                next_id: AtomicU64::new(1),
                progress: Mutex::new(HashMap::new()),
                client_requests: Mutex::new(HashMap::new()),
                agent_answers: Mutex::new(HashMap::new()),
                calls: Mutex::new(crate::FastMap::default()),
                resource_routes: Mutex::new(HashMap::new()),
                template_routes: Mutex::new(Vec::new()),
                prompt_routes: Mutex::new(HashMap::new()),
                processes: std::sync::OnceLock::new(),
                proxies: std::sync::OnceLock::new(),
                error_noise: RwLock::new(Vec::new()),
                errors_last_calls: Default::default(),
                history: std::sync::OnceLock::new(),
                listens: Default::default(),
                parked: crate::park::Store::from_env(),
            }
        });
        tokio::spawn(watch_events(Arc::downgrade(&hub), events));
        tokio::spawn(crate::push::watch(
            Arc::downgrade(&hub),
            hub.bus.subscribe(),
        ));
        if hub.notification_pumps {
            // Without the in-order hook, read each server's broadcast instead.
            for handle in hub.servers().values() {
                hub.pump(handle);
            }
        }
        if let Some(rx) = requests {
            tokio::spawn(pump_requests(Arc::downgrade(&hub), rx));
        }
        hub
    }

    /// Lets agents see and run the project's dev processes (the process tools, listed
    /// from now on); `root` is the project root. Set once, after start; a second call is
    /// ignored.
    pub fn attach_processes(
        &self,
        processes: corral_supervisor::Processes,
        root: std::path::PathBuf,
    ) {
        if self.processes.set(ProcessTools { processes, root }).is_ok() {
            self.rebuild();
        }
    }

    /// Lets agents start, list, stop and read the project's dev proxies (the proxy
    /// tools are listed with the process tools). Set once; a second call is ignored.
    pub fn attach_proxies(&self, proxies: corral_proxy::Proxies) {
        let _ = self.proxies.set(proxies);
    }

    /// What `get_errors` hides as noise besides its built-in rules (`[errors] ignore`;
    /// a reload sets it again).
    pub fn set_error_noise(&self, patterns: Vec<String>) {
        *self.error_noise.write().unwrap() = patterns;
    }

    /// The dev proxies, when attached.
    pub fn proxies(&self) -> Option<&corral_proxy::Proxies> {
        self.proxies.get()
    }

    /// The `get_errors` answer to `args` over what this gateway has (for
    /// [`crate::push`] and the [`crate::push::ERRORS_URI`] resource).
    pub async fn errors_report(&self, args: &Value) -> Result<corral_errors::Report, String> {
        let servers = self.servers();
        let noise = self.error_noise.read().unwrap().clone();
        let processes = self.processes.get();
        let src = tools::errors::Sources {
            servers: &servers,
            root: processes.map(|p| p.root.as_path()),
            noise: &noise,
            processes: processes.map(|p| &p.processes),
            proxies: self.proxies.get(),
            last_call: None,
            history: self.history(),
        };
        tools::errors::answer(&src, args).await.map(|(r, _)| r)
    }

    /// Lets `get_errors` reach back before `began` (this daemon's start) through the
    /// journal at `journal`. Set once.
    pub fn set_history(&self, journal: std::path::PathBuf, began: std::time::SystemTime) {
        let _ = self.history.set((journal, began));
    }

    /// The journal and when the live state begins, when set.
    pub fn history(&self) -> Option<(&std::path::Path, Option<std::time::SystemTime>)> {
        self.history.get().map(|(p, t)| (p.as_path(), Some(*t)))
    }

    /// The sessions open now.
    pub(crate) fn sessions(&self) -> Vec<Arc<SessionShared>> {
        self.sessions.lock().unwrap().values().cloned().collect()
    }

    /// When `caller` last asked for `get_errors` (remembering now); see
    /// [`tools::errors::LastCalls`].
    pub fn errors_last_call(&self, caller: &str) -> Option<std::time::SystemTime> {
        self.errors_last_calls
            .swap(caller, std::time::SystemTime::now())
    }

    /// The dev processes, when attached.
    pub fn processes(&self) -> Option<&corral_supervisor::Processes> {
        self.processes.get().map(|p| &p.processes)
    }

    /// Runs built-in tool `b` (what `tools/call` of a [`crate::catalog::Route::Builtin`]
    /// does) for `caller` (an agent's client name, `corral call`) with what this gateway
    /// has: its servers, and the project's processes and proxies when attached.
    pub async fn call_builtin(&self, b: Builtin, args: &Value, caller: &str) -> String {
        let servers = self.servers();
        let catalog = self.catalog();
        let noise = self.error_noise.read().unwrap().clone();
        let last_call = (b == Builtin::GetErrors)
            .then(|| {
                self.errors_last_calls
                    .swap(caller, std::time::SystemTime::now())
            })
            .flatten();
        let ctx = tools::Ctx {
            servers: &servers,
            names: &catalog.builtins,
            project: self.processes.get().map(|p| tools::Project {
                processes: &p.processes,
                root: &p.root,
            }),
            proxies: self.proxies.get(),
            noise: &noise,
            last_call,
            history: self.history(),
        };
        tools::call(b, &ctx, args).await
    }

    /// Makes a new session reachable for what servers send back (progress, requests,
    /// logs, list changes); [`crate::Session::open`] does it.
    pub(crate) fn register_session(&self, shared: Arc<SessionShared>) {
        self.sessions.lock().unwrap().insert(shared.id(), shared);
    }

    /// Forgets a session (again: a no-op); what it had in flight is dropped by its owner.
    /// `reason` says why it ended, in the `agent.disconnected` event.
    pub fn close_session(&self, id: u64, reason: &str) {
        let Some(shared) = self.sessions.lock().unwrap().remove(&id) else {
            return;
        };
        if let Some(ev) = shared.disconnected_event(reason) {
            self.bus.emit(ev);
        }
        // Its listens are answered (so a stdio session's writer can finish), and the
        // resources it subscribed to are let go.
        self.end_listens(Some(id), reason_static(reason));
        for uri in shared.take_subscriptions() {
            self.release_resource(&uri);
        }
        self.progress.lock().unwrap().retain(|_, r| r.session != id);
        // Dropping the senders tells the drivers the session is gone.
        self.agent_answers
            .lock()
            .unwrap()
            .retain(|_, (s, _)| *s != id);
        let orphaned: Vec<Responder> = {
            let mut reqs = self.client_requests.lock().unwrap();
            let ids: Vec<u64> = reqs
                .iter()
                .filter(|(_, (s, _))| *s == id)
                .map(|(k, _)| *k)
                .collect();
            ids.into_iter()
                .filter_map(|k| reqs.remove(&k).map(|(_, r)| r))
                .collect()
        };
        for r in orphaned {
            r.error(
                jsonrpc::INTERNAL_ERROR,
                "the client session that was asked has closed",
            );
        }
    }

    /// The agents connected now, oldest first.
    pub fn agents(&self) -> Vec<corral_events::rows::AgentRow> {
        let mut rows: Vec<_> = self
            .sessions()
            .iter()
            .map(|s| corral_events::rows::AgentRow {
                id: s.id,
                transport: s.transport.to_owned(),
                client: s.client.lock().unwrap().clone(),
                protocol: s.protocol.lock().unwrap().clone(),
                connected_s: s.opened.elapsed().as_secs(),
                profile: s.profile.as_deref().map(str::to_owned),
            })
            .collect();
        rows.sort_by_key(|r| r.id);
        rows
    }

    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }

    pub(crate) fn emit(&self, ev: Event) {
        self.bus.emit(ev);
    }

    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap().clone()
    }

    /// The catalog an agent of `profile` sees (`None`: everything). A profile no longer
    /// in the config (removed by a reload) offers nothing.
    pub fn catalog_for(&self, profile: Option<&str>) -> Arc<Catalog> {
        let Some(name) = profile else {
            return self.catalog();
        };
        let found = self.profile_catalogs.read().unwrap().get(name).cloned();
        found.unwrap_or_else(|| Arc::new(Catalog::nothing(self.opts.tool_prefix)))
    }

    /// Replaces the profiles (at start, and on a config reload); each one's catalog is
    /// built, and agents are told if their list changed.
    pub fn set_profiles(&self, profiles: BTreeMap<String, Profile>) {
        *self.profiles.write().unwrap() = Arc::new(profiles);
        self.rebuild();
    }

    /// The profile called `name`, if configured.
    pub fn profile(&self, name: &str) -> Option<Profile> {
        self.profiles.read().unwrap().get(name).cloned()
    }

    /// The configured profiles' names, for messages.
    pub fn profile_names(&self) -> Vec<String> {
        self.profiles.read().unwrap().keys().cloned().collect()
    }

    /// Whether an agent of `profile` may reach server `server` (its resources, prompts
    /// and tools).
    pub(crate) fn in_profile(&self, profile: Option<&str>, server: &str) -> bool {
        profile.is_none_or(|p| self.profile(p).is_some_and(|p| p.has_server(server)))
    }

    /// The catalog, rebuilt first if a server changed state or tools since it was built.
    pub fn fresh_catalog(&self) -> Arc<Catalog> {
        self.refresh();
        self.catalog()
    }

    /// The servers, by name (a snapshot: a reload replaces the whole map).
    pub fn servers(&self) -> Arc<BTreeMap<String, ServerHandle>> {
        self.servers.read().unwrap().clone()
    }

    /// Replaces the set of servers (config reload): the catalog is rebuilt, routes are
    /// forgotten, and agents are told what changed.
    pub fn set_servers(self: &Arc<Self>, servers: BTreeMap<String, ServerHandle>) {
        if self.notification_pumps {
            let old = self.servers();
            for (name, h) in &servers {
                if !old.contains_key(name) {
                    self.pump(h);
                }
            }
        }
        *self.servers.write().unwrap() = Arc::new(servers);
        self.resource_routes.lock().unwrap().clear();
        self.template_routes.lock().unwrap().clear();
        self.prompt_routes.lock().unwrap().clear();
        self.rebuild();
        self.list_changed("notifications/resources/list_changed");
        self.list_changed("notifications/prompts/list_changed");
    }

    fn pump(self: &Arc<Self>, handle: &ServerHandle) {
        tokio::spawn(pump_notifications(
            Arc::downgrade(self),
            handle.name().to_owned(),
            handle.notifications(),
        ));
    }

    /// Resolves a tool named on the command line (`corral call`), after waiting for the
    /// servers still starting (see [`crate::catalog::resolve`]).
    pub async fn resolve_tool(&self, server: Option<&str>, name: &str) -> crate::catalog::Lookup {
        self.await_starting().await;
        crate::catalog::resolve(&self.catalog(), &self.servers(), server, name)
    }

    /// Rebuilds the catalog; tells every session when the tool list changed.
    pub(crate) fn rebuild(&self) {
        let servers = self.servers();
        let processes = self.processes.get().is_some();
        let build = |profile| {
            Catalog::build_for(
                servers.values(),
                self.opts.tool_prefix,
                self.opts.builtin_tools,
                processes,
                profile,
            )
        };
        let next = build(None);
        let profiles = self.profiles.read().unwrap().clone();
        let mut profiled_changed = false;
        if !profiles.is_empty() || !self.profile_catalogs.read().unwrap().is_empty() {
            let built: HashMap<String, Arc<Catalog>> = profiles
                .values()
                .map(|p| (p.name.clone(), Arc::new(build(Some(p)))))
                .collect();
            let mut cur = self.profile_catalogs.write().unwrap();
            profiled_changed = built.len() != cur.len()
                || built
                    .iter()
                    .any(|(n, c)| cur.get(n).is_none_or(|o| o.list_json != c.list_json));
            *cur = built;
        }
        let main_changed = {
            let mut cur = self.catalog.write().unwrap();
            let changed = cur.list_json != next.list_json;
            if next.collisions != cur.collisions {
                for c in &next.collisions {
                    self.bus.emit(
                        Event::new(Kind::GatewayToolCollision, Source::Gateway)
                            .with("reason", c.as_str()),
                    );
                }
            }
            // Kept even when the list is the same: its fingerprint is new, and a stale
            // one would make every `refresh` rebuild again.
            *cur = Arc::new(next);
            changed
        };
        if main_changed || profiled_changed {
            self.list_changed("notifications/tools/list_changed");
        }
    }

    /// Waits (each at most its startup timeout) for servers that are still starting, so an
    /// agent listing tools right after connecting sees them.
    pub(crate) async fn await_starting(&self) {
        let starting: Vec<ServerHandle> = self
            .servers()
            .values()
            .filter(|h| h.state() == ServerState::Starting)
            .cloned()
            .collect();
        if starting.is_empty() {
            self.refresh();
            return;
        }
        let waits = starting.iter().map(|h| {
            let h = (*h).clone();
            tokio::spawn(async move {
                let _ = h.wait_ready(h.config().startup_timeout).await;
            })
        });
        for w in waits.collect::<Vec<_>>() {
            let _ = w.await;
        }
        self.refresh();
    }

    /// Waits for the servers still starting that may serve the tool `name`. A prefixed
    /// name names its server: only that one is waited for, so a call to a server that is
    /// ready (but not yet in the catalog) is not held up for the whole startup timeout of
    /// another server that hangs in its start-up. Bare names may be anyone's: all of them.
    pub(crate) async fn await_starting_for_tool(&self, name: &str) {
        let servers = self.servers();
        let own = match self.opts.tool_prefix {
            ToolPrefix::Always => name
                .split_once(crate::naming::SEP)
                .and_then(|(server, _)| servers.get(server)),
            ToolPrefix::Never => None,
        };
        let Some(h) = own else {
            return self.await_starting().await;
        };
        if h.state() == ServerState::Starting {
            let _ = h.wait_ready(h.config().startup_timeout).await;
        }
        self.refresh();
    }

    /// Rebuilds the catalog if any server changed state or tools since it was built
    /// (the event watcher does this too, but a request must not see a stale list).
    pub(crate) fn refresh(&self) {
        let current = crate::catalog::fingerprint(self.servers().values());
        if self.catalog.read().unwrap().fingerprint != current {
            self.rebuild();
        }
    }

    /// Sends a message to every initialized session.
    pub(crate) fn broadcast(&self, msg: &[u8]) {
        let sessions: Vec<Arc<SessionShared>> =
            self.sessions.lock().unwrap().values().cloned().collect();
        for s in sessions {
            if s.is_initialized() {
                s.send(msg.to_vec(), None);
            }
        }
    }

    /// Rewrites a call's progress token to one unique across sessions; returns the new
    /// token (a string) to put in the forwarded `_meta`.
    pub(crate) fn register_progress(
        &self,
        session: u64,
        token: &RawValue,
        request: &RawValue,
    ) -> u64 {
        let id = self.next_id();
        if let Some(slot) = crate::park::current_slot() {
            slot.set_progress(id);
        }
        self.progress.lock().unwrap().insert(
            id,
            ProgressRoute {
                session,
                token: token.to_owned(),
                request: request.to_owned(),
                last: None,
            },
        );
        id
    }

    pub(crate) fn forget_progress(&self, id: u64) {
        self.progress.lock().unwrap().remove(&id);
    }

    /// Points progress route `id` at another request — `(session, token, request)` —
    /// or at nobody (`None`: a parked call has no request to report to).
    pub(crate) fn rebind_progress(&self, id: u64, to: Option<(u64, &RawValue, &RawValue)>) {
        let mut progress = self.progress.lock().unwrap();
        let Some(route) = progress.get_mut(&id) else {
            return;
        };
        match to {
            Some((session, token, request)) => {
                route.session = session;
                route.token = token.to_owned();
                route.request = request.to_owned();
            }
            // No session has id 0.
            None => route.session = 0,
        }
    }

    /// Records that `session` has a call in flight on `server`; the guard removes it.
    pub(crate) fn begin_call<'a>(
        &'a self,
        server: &'a str,
        session: u64,
        request: &RawValue,
    ) -> CallGuard<'a> {
        let seq = self.next_id();
        let call = ActiveCall {
            seq,
            session,
            request: request.to_owned(),
            slot: crate::park::current_slot(),
        };
        let mut calls = self.calls.lock().unwrap();
        match calls.get_mut(server) {
            Some(list) => list.push(call),
            None => {
                calls.insert(server.to_owned(), vec![call]);
            }
        }
        CallGuard {
            hub: self,
            server,
            seq,
        }
    }

    /// The most recent call in flight on `server`: (session, agent request id).
    fn latest_call(&self, server: &str) -> Option<(u64, Box<RawValue>)> {
        let calls = self.calls.lock().unwrap();
        let c = calls.get(server)?.last()?;
        Some((c.session, c.request.clone()))
    }

    /// The slot of the most recent call in flight on `server`, when that call can be
    /// parked.
    fn latest_slot(&self, server: &str) -> Option<Arc<crate::park::Slot>> {
        let calls = self.calls.lock().unwrap();
        calls.get(server)?.last()?.slot.clone()
    }

    fn session(&self, id: u64) -> Option<Arc<SessionShared>> {
        self.sessions.lock().unwrap().get(&id).cloned()
    }

    /// An agent answered one of the requests we forwarded from a server.
    pub(crate) fn client_response(
        &self,
        id: &RawValue,
        result: Option<&RawValue>,
        error: Option<&RawValue>,
    ) {
        let Some(n) = serde_json::from_str::<String>(id.get()).ok().and_then(|s| {
            s.strip_prefix("corral-")
                .and_then(|n| n.parse::<u64>().ok())
        }) else {
            return;
        };
        if let Some((_, tx)) = self.agent_answers.lock().unwrap().remove(&n) {
            let _ = tx.send(agent_answer(result, error));
            return;
        }
        let Some((_, responder)) = self.client_requests.lock().unwrap().remove(&n) else {
            return;
        };
        match (result, error) {
            (Some(r), _) => responder.result(r),
            (None, Some(e)) => {
                #[derive(serde::Deserialize)]
                struct E {
                    code: i64,
                    message: String,
                }
                match serde_json::from_str::<E>(e.get()) {
                    Ok(e) => responder.error(e.code, &e.message),
                    Err(_) => responder.error(
                        jsonrpc::INTERNAL_ERROR,
                        "the client answered with a malformed error",
                    ),
                }
            }
            (None, None) => {
                responder.error(jsonrpc::INTERNAL_ERROR, "empty response from the client")
            }
        }
    }

    /// Registers a request the gateway sends to `session` itself; its number `N` (the
    /// request's id is `corral-N`). The answer goes to `tx`.
    pub(crate) fn await_agent(&self, session: u64, tx: oneshot::Sender<AgentAnswer>) -> u64 {
        let n = self.next_id();
        self.agent_answers.lock().unwrap().insert(n, (session, tx));
        n
    }

    /// Withdraws request `N` of [`Hub::await_agent`]; whether it was still unanswered.
    pub(crate) fn forget_agent_answer(&self, n: u64) -> bool {
        self.agent_answers.lock().unwrap().remove(&n).is_some()
    }

    /// Routes a server's request to the agent whose call it is serving.
    fn server_request(&self, incoming: IncomingRequest) {
        let IncomingRequest { server, request } = incoming;
        if let Some(slot) = self.latest_slot(&server) {
            // A 2026-07-28 request's call: the question becomes its `input_required`.
            slot.ask(request);
            return;
        }
        let capability = match request.method.as_str() {
            "sampling/createMessage" => "sampling",
            "elicitation/create" => "elicitation",
            "roots/list" => "roots",
            _ => "",
        };
        let target = self
            .latest_call(&server)
            .and_then(|(sid, req)| self.session(sid).map(|s| (s, Some(req))))
            .or_else(|| {
                // Not during a call (e.g. roots/list after a change): any capable agent.
                let sessions = self.sessions.lock().unwrap();
                sessions
                    .values()
                    .find(|s| s.is_initialized() && s.supports(capability))
                    .map(|s| (s.clone(), None))
            });
        let Some((session, related)) = target else {
            request.responder.error(
                jsonrpc::METHOD_NOT_FOUND,
                &format!("corral: no connected client to answer {}", request.method),
            );
            return;
        };
        if session.is_modern() {
            // A stateless 2026-07-28 request that cannot carry a question (only
            // tools/call, prompts/get and resources/read can, see `crate::park`).
            // Answer at once rather than let the server wait.
            let what = if capability.is_empty() {
                request.method.clone()
            } else {
                format!("the '{capability}' capability ({})", request.method)
            };
            request.responder.error(
                jsonrpc::METHOD_NOT_FOUND,
                &format!(
                    "corral: the client's call came as a stateless MCP 2026-07-28 request, \
                     which cannot be asked for {what}: only tools/call, prompts/get and \
                     resources/read can carry a question (input_required); a client in a \
                     2025 session (initialize) that declares '{capability}' can answer it"
                ),
            );
            return;
        }
        if !capability.is_empty() && !session.supports(capability) {
            request.responder.error(
                jsonrpc::METHOD_NOT_FOUND,
                &format!("corral: the client did not declare the '{capability}' capability"),
            );
            return;
        }
        let n = self.next_id();
        let params = request.params.as_ref().map(|p| p.get());
        let msg = jsonrpc::request(&format!("corral-{n}"), &request.method, params);
        self.client_requests
            .lock()
            .unwrap()
            .insert(n, (session.id(), request.responder));
        session.send(msg, related.as_deref());
    }

    /// Routes one notification from `server`.
    fn server_notification(&self, server: &str, note: Notification) {
        let params = note.params.as_ref().map(|p| p.get());
        match note.method.as_str() {
            "notifications/progress" => self.route_progress(params),
            "notifications/message" => self.route_log(server, params),
            "notifications/resources/updated" => self.route_resource_updated(params),
            "notifications/resources/list_changed" | "notifications/prompts/list_changed" => {
                self.list_changed(&note.method);
            }
            // tools/list_changed: the supervisor re-reads the tools and emits
            // server.tools_changed, which rebuilds the catalog.
            _ => {}
        }
    }

    fn route_progress(&self, params: Option<&str>) {
        let Some(mut p) = params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
        else {
            return;
        };
        let Some(id) = p
            .get("progressToken")
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix(PROGRESS_PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return;
        };
        let value = p.get("progress").and_then(Value::as_f64);
        let route = {
            let mut progress = self.progress.lock().unwrap();
            progress.get_mut(&id).and_then(|r| {
                // Not above the last one: dropped, so the agent sees progress only grow.
                if let (Some(v), Some(last)) = (value, r.last)
                    && v <= last
                {
                    return None;
                }
                r.last = value.or(r.last);
                Some((r.session, r.token.clone(), r.request.clone()))
            })
        };
        let Some((sid, token, request)) = route else {
            return;
        };
        let Some(session) = self.session(sid) else {
            return;
        };
        p.insert(
            "progressToken".into(),
            serde_json::from_str(token.get()).unwrap_or(Value::Null),
        );
        let msg = jsonrpc::notification(
            "notifications/progress",
            Some(&Value::Object(p).to_string()),
        );
        session.send(msg, Some(&request));
    }

    fn route_log(&self, server: &str, params: Option<&str>) {
        let Some(mut p) = params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
        else {
            return;
        };
        let level = p
            .get("level")
            .and_then(Value::as_str)
            .map(crate::agent::level_rank)
            .unwrap_or(0);
        let logger = match p.get("logger").and_then(Value::as_str) {
            Some(l) => format!("{server}/{l}"),
            None => server.to_owned(),
        };
        p.insert("logger".into(), Value::String(logger));
        let msg =
            jsonrpc::notification("notifications/message", Some(&Value::Object(p).to_string()));
        let call = self.latest_call(server);
        // A modern request gets the logs of its call when it asked for them (`_meta`
        // logLevel), on its own stream only; modern sessions get nothing else.
        if let Some((sid, request)) = &call
            && self.log_wanted(*sid, request, level)
            && let Some(s) = self.session(*sid)
        {
            s.send(msg.clone(), Some(request));
        }
        let sessions: Vec<Arc<SessionShared>> =
            self.sessions.lock().unwrap().values().cloned().collect();
        for s in sessions {
            if !s.is_initialized() || level < s.log_level() {
                continue;
            }
            let related = call
                .as_ref()
                .filter(|(sid, _)| *sid == s.id())
                .map(|(_, r)| &**r);
            s.send(msg.clone(), related);
        }
    }

    fn route_resource_updated(&self, params: Option<&str>) {
        let Some(uri) = jsonrpc::str_member(params, "uri") else {
            return;
        };
        self.listens_resource_updated(&uri, params);
        // What came on Corral's listen to a modern server carries that listen's id.
        let params = crate::listen::untagged(params);
        let msg = jsonrpc::notification("notifications/resources/updated", params.as_deref());
        let sessions: Vec<Arc<SessionShared>> =
            self.sessions.lock().unwrap().values().cloned().collect();
        for s in sessions {
            if s.is_subscribed(&uri) {
                s.send(msg.clone(), None);
            }
        }
    }

    /// Whether server `name` declared capability `cap` (`resources`, `prompts`, …).
    pub(crate) fn server_has(&self, name: &str, cap: &str) -> bool {
        self.servers()
            .get(name)
            .and_then(|h| h.initialize_result())
            .is_some_and(|init| init.get("capabilities").and_then(|c| c.get(cap)).is_some())
    }
}

/// Removes a call from the in-flight set when dropped.
pub(crate) struct CallGuard<'a> {
    hub: &'a Hub,
    server: &'a str,
    seq: u64,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let mut calls = self.hub.calls.lock().unwrap();
        if let Some(list) = calls.get_mut(self.server) {
            list.retain(|c| c.seq != self.seq);
        }
    }
}

/// Events that change what agents can see: rebuild the catalog, and tell agents about
/// resources and prompts of servers that came or went.
async fn watch_events(hub: std::sync::Weak<Hub>, mut events: broadcast::Receiver<Event>) {
    loop {
        let ev = match events.recv().await {
            Ok(ev) => ev,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if let Some(hub) = hub.upgrade() {
                    hub.rebuild();
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(hub) = hub.upgrade() else { return };
        let Some(server) = ev.server() else {
            continue;
        };
        let Some(
            kind @ (Kind::ServerReady
            | Kind::ServerCrashed
            | Kind::ServerStopped
            | Kind::ServerGaveUp
            | Kind::ServerToolsChanged),
        ) = ev.kind()
        else {
            continue;
        };
        hub.rebuild();
        if kind == Kind::ServerReady {
            // A new instance knows nothing of the subscriptions agents hold.
            hub.resubscribe(server);
        }
        if kind != Kind::ServerToolsChanged {
            for (cap, method) in [
                ("resources", "notifications/resources/list_changed"),
                ("prompts", "notifications/prompts/list_changed"),
            ] {
                if hub.server_has(server, cap) {
                    hub.list_changed(method);
                }
            }
        }
    }
}

async fn pump_notifications(
    hub: std::sync::Weak<Hub>,
    server: String,
    mut rx: broadcast::Receiver<Notification>,
) {
    loop {
        let note = match rx.recv().await {
            Ok(n) => n,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(hub) = hub.upgrade() else { return };
        hub.server_notification(&server, note);
    }
}

async fn pump_requests(
    hub: std::sync::Weak<Hub>,
    mut rx: mpsc::UnboundedReceiver<IncomingRequest>,
) {
    while let Some(req) = rx.recv().await {
        let Some(hub) = hub.upgrade() else { return };
        hub.server_request(req);
    }
}

/// How long a fan-out to every server may take at most, whatever their call timeouts.
pub(crate) const FAN_OUT_LIMIT: Duration = Duration::from_secs(30);

/// The reason a session closed, as the `'static` text a listen's end carries.
fn reason_static(reason: &str) -> &'static str {
    match reason {
        "shutdown" => "shutdown",
        "deleted" => "the session was deleted",
        "expired" => "the session expired",
        _ => "the session closed",
    }
}

/// An agent's response as the gateway's drivers take it.
fn agent_answer(result: Option<&RawValue>, error: Option<&RawValue>) -> AgentAnswer {
    #[derive(serde::Deserialize)]
    struct E {
        code: i64,
        message: String,
    }
    match (result, error) {
        (Some(r), _) => Ok(r.to_owned()),
        (None, Some(e)) => Err(serde_json::from_str::<E>(e.get()).map_or_else(
            |_| (jsonrpc::INTERNAL_ERROR, "a malformed error".to_owned()),
            |e| (e.code, e.message),
        )),
        (None, None) => Err((jsonrpc::INTERNAL_ERROR, "an empty response".to_owned())),
    }
}

/// What a progress token Corral sends a server starts with; the route's number follows.
const PROGRESS_PREFIX: &str = "corral-p-";

/// The token that stands for progress route `route` upstream.
pub(crate) fn progress_token(route: u64) -> String {
    format!("{PROGRESS_PREFIX}{route}")
}
