//! The gateway on Streamable HTTP (MCP 2025-03-26 … 2025-11-25) at `/mcp`.
//!
//! * `POST /mcp` carries one JSON-RPC message. Notifications and responses get `202`.
//!   A request gets `application/json` with its response — unless something related to
//!   it (progress, a log line, a server's sampling request) has to reach the agent before
//!   the response does; then the reply switches to `text/event-stream` and carries those
//!   messages followed by the response. So the common call costs no SSE framing.
//! * `GET /mcp` opens the session's stream for messages not tied to a request
//!   (`list_changed`, log lines between calls). Messages that arrive while no stream is
//!   open wait in a bounded backlog.
//! * `DELETE /mcp` ends the session.
//! * `initialize` creates a session; its id comes back in `Mcp-Session-Id` and must be
//!   sent with every later request (400 without it, 404 for an unknown one).
//!
//! Security: the endpoint requires `Authorization: Bearer <token>` unless configured
//! otherwise; `Host` must name a loopback address (or the configured listen address)
//! and a browser's `Origin` must be a loopback origin, which defeats DNS rebinding.
//! These checks run on the request head, before a byte of the body is read (and before
//! `100 Continue` is sent). Duplicated `Host`, `Origin`, `Authorization` or
//! `Mcp-Session-Id` headers and absolute-form targets are refused: a proxy or a smuggler
//! is not a client this endpoint serves. HTTP/1.1 itself, the connection cap and the
//! timeouts are [`crate::httpd`].

use crate::agent::Outbound;
use crate::httpd::{self, Body, BodyError, Limits};
use crate::hub::Hub;
use crate::jsonrpc::{self, Envelope};
use crate::modern::PROTOCOL_VERSIONS;
use crate::modern::{self, Claim, ModernMeta};
use crate::session::Session;
use bytes::Bytes;
use corral_events::{Event, Kind, Source};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, StatusCode};
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

type Request = hyper::Request<Incoming>;
type Response = hyper::Response<Body>;

/// What answers the requests under a path prefix of this listener other than `/mcp`
/// (the daemon's dashboard). It gets a request whose `Host` passed the endpoint's
/// DNS-rebinding check and whose security headers are single; everything else — its
/// own authentication, `Origin`, CSRF — is its to check.
pub trait Mount: Send + Sync {
    fn handle(
        &self,
        req: Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'static>>;
}

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Messages kept for a session while it has no GET stream open (at most
/// [`STREAM_LIMIT`] bytes of them; the oldest go first).
const BACKLOG: usize = 1000;

/// Bytes a session's GET stream may hold unread (sent to the client's connection and not
/// yet written to it). A client that stops reading its stream while messages keep coming
/// has the stream ended at this limit (`agent.dropped`); what follows waits in the
/// backlog for its next GET. A single message of any size always fits an empty stream.
pub const STREAM_LIMIT: usize = 32 * 1024 * 1024;

/// How the endpoint authenticates and which hosts it answers to.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `None`: no token required.
    pub token: Option<String>,
    /// Where the token is kept, named in a 401 so a person or client can act on it.
    pub token_file: std::path::PathBuf,
    /// The address actually bound (its host is accepted in `Host`).
    pub local_addr: SocketAddr,
    /// Connection cap and timeouts.
    pub limits: Limits,
}

fn full(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Response {
    let mut r = hyper::Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(status).expect("a valid status");
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `r`, after which the connection is closed.
fn closing(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// `r` with one more header (values Corral makes are always valid).
fn with_header(mut r: Response, name: &'static str, value: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
    r
}

/// The headers the security checks read, each sent at most once, as text.
struct SecurityHeaders<'a> {
    host: Option<&'a str>,
    origin: Option<&'a str>,
    authorization: Option<&'a str>,
}

/// Finds the security headers in one pass over the head; `Err` when one of them, or a
/// header the endpoint reads later (`Mcp-Session-Id`, `MCP-Protocol-Version`, `Accept`),
/// is sent more than once or is not visible ASCII.
// The error is the response to send: built once, returned once, not worth a box.
#[allow(clippy::result_large_err)]
fn security_headers(req: &Request) -> Result<SecurityHeaders<'_>, Response> {
    const NAMES: [&str; 8] = [
        "host",
        "origin",
        "authorization",
        "mcp-session-id",
        "mcp-protocol-version",
        "accept",
        "mcp-method",
        "mcp-name",
    ];
    let mut found: [Option<&str>; 8] = [None; 8];
    for (name, value) in req.headers() {
        let Some(i) = NAMES.iter().position(|n| *n == name.as_str()) else {
            continue;
        };
        let refuse = |why: &str| {
            rpc_error(
                400,
                jsonrpc::INVALID_REQUEST,
                &format!("header {} {why}", NAMES[i]),
            )
        };
        if found[i].is_some() {
            return Err(refuse("sent more than once"));
        }
        found[i] = Some(value.to_str().map_err(|_| refuse("is not visible ASCII"))?);
    }
    Ok(SecurityHeaders {
        host: found[0],
        origin: found[1],
        authorization: found[2],
    })
}

/// The value of a header that was checked to be single and text in `check_security`.
fn header<'a, B>(req: &'a hyper::Request<B>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A plain JSON-RPC error response with an HTTP status.
fn rpc_error(status: u16, code: i64, message: &str) -> Response {
    full(
        status,
        "application/json",
        jsonrpc::error(None, code, message),
    )
}

/// A response streaming SSE events; `session_id` when it answers `initialize`.
fn sse_reply(session_id: Option<&str>, rx: mpsc::UnboundedReceiver<Bytes>) -> Response {
    with_session_id(sse_stream(rx), session_id)
}

fn sse_stream(rx: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let mut r = hyper::Response::new(Body::Stream(rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The JSON response to a request (`None`: it was cancelled, nothing to say).
fn json_reply(session_id: Option<&str>, reply: Option<Vec<u8>>) -> Response {
    let r = match reply {
        Some(body) => full(200, "application/json", body),
        None => full(202, "application/json", Bytes::new()),
    };
    with_session_id(r, session_id)
}

fn with_session_id(r: Response, session_id: Option<&str>) -> Response {
    match session_id {
        Some(id) => with_header(r, "mcp-session-id", id),
        None => r,
    }
}

/// Per-session delivery of messages to the agent.
#[derive(Default)]
struct Streams {
    /// Open POST replies waiting for messages related to their request, by raw id.
    per_request: crate::FastMap<String, mpsc::UnboundedSender<Vec<u8>>>,
    /// The GET stream, if open, and the bytes it holds unread.
    general: Option<(mpsc::UnboundedSender<Bytes>, Arc<AtomicUsize>)>,
    /// What arrived while no GET stream was open.
    backlog: VecDeque<Vec<u8>>,
    backlog_bytes: usize,
    next_event: u64,
    /// The session these streams belong to, for events.
    session: u64,
}

impl Streams {
    fn push_backlog(&mut self, message: Vec<u8>) {
        self.backlog_bytes += message.len();
        self.backlog.push_back(message);
        while self.backlog.len() > BACKLOG
            || (self.backlog_bytes > STREAM_LIMIT && self.backlog.len() > 1)
        {
            if let Some(old) = self.backlog.pop_front() {
                self.backlog_bytes -= old.len();
            }
        }
    }
}

struct HttpOutbound {
    streams: Mutex<Streams>,
    hub: std::sync::Weak<Hub>,
}

/// An SSE event on a GET stream, counted in its stream's unread bytes until the HTTP
/// layer has written it (and drops it).
struct Counted {
    event: Vec<u8>,
    unread: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.event
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.unread.fetch_sub(self.event.len(), Ordering::Relaxed);
    }
}

/// Queues `event` on a GET stream; `false` (and nothing queued) when the stream would
/// hold more than [`STREAM_LIMIT`] unread bytes, or is closed.
fn send_counted(
    tx: &mpsc::UnboundedSender<Bytes>,
    unread: &Arc<AtomicUsize>,
    event: Vec<u8>,
) -> bool {
    let len = event.len();
    let before = unread.fetch_add(len, Ordering::Relaxed);
    if before > 0 && before + len > STREAM_LIMIT {
        unread.fetch_sub(len, Ordering::Relaxed);
        return false;
    }
    let counted = Counted {
        event,
        unread: unread.clone(),
    };
    tx.send(Bytes::from_owner(counted)).is_ok()
}

impl Outbound for HttpOutbound {
    fn send(&self, message: Vec<u8>, related: Option<&RawValue>) {
        let mut s = self.streams.lock().unwrap();
        if let Some(tx) = related.and_then(|r| s.per_request.get(r.get()))
            && tx.send(message.clone()).is_ok()
        {
            return;
        }
        s.next_event += 1;
        let id = s.next_event;
        if let Some((tx, unread)) = &s.general {
            if send_counted(tx, unread, sse_event_vec(&message, Some(id))) {
                return;
            }
            if !tx.is_closed() {
                // Open but not read: end the stream rather than buffer for it.
                let unread = unread.load(Ordering::Relaxed) as u64;
                if let Some(hub) = self.hub.upgrade() {
                    hub.emit(
                        Event::new(Kind::AgentDropped, Source::Corral)
                            .with("session", s.session)
                            .with("transport", "http")
                            .with("stream", "GET")
                            .with(
                                "reason",
                                format!(
                                    "the client did not read its GET stream: over {} MiB \
                                     unread; the stream was ended, later messages wait for \
                                     the next GET",
                                    STREAM_LIMIT >> 20
                                ),
                            )
                            .with("unread_bytes", unread)
                            .with("limit_bytes", STREAM_LIMIT as u64),
                    );
                }
            }
        }
        s.general = None;
        s.push_backlog(message);
    }
}

fn sse_event(message: &[u8], id: Option<u64>) -> Bytes {
    Bytes::from(sse_event_vec(message, id))
}

fn sse_event_vec(message: &[u8], id: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 32);
    if let Some(id) = id {
        out.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    out
}

struct HttpSession {
    session: Arc<Session>,
    out: Arc<HttpOutbound>,
    /// Last request, for expiring sessions whose client vanished without DELETE.
    last_used: Mutex<Instant>,
}

/// A session unused this long, with no stream open, is forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(3600);

/// The HTTP side of the gateway.
pub struct HttpGateway {
    hub: Arc<Hub>,
    opts: HttpOptions,
    sessions: Mutex<crate::FastMap<String, Arc<HttpSession>>>,
    counter: AtomicU64,
    /// Another handler and the path it serves (everything under `/PREFIX/`).
    mounted: OnceLock<(&'static str, Arc<dyn Mount>)>,
}

impl HttpGateway {
    pub fn new(hub: Arc<Hub>, opts: HttpOptions) -> Arc<HttpGateway> {
        Arc::new(HttpGateway {
            hub,
            opts,
            sessions: Mutex::new(crate::FastMap::default()),
            counter: AtomicU64::new(0),
            mounted: OnceLock::new(),
        })
    }

    /// Serves `prefix` (`/dashboard`: that path and everything under `/dashboard/`) with
    /// `handler` from now on; once per gateway.
    pub fn mount(&self, prefix: &'static str, handler: Arc<dyn Mount>) {
        let _ = self.mounted.set((prefix, handler));
    }

    /// The local address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.opts.local_addr
    }

    fn mounted_for(&self, path: &str) -> Option<&Arc<dyn Mount>> {
        let (prefix, handler) = self.mounted.get()?;
        let rest = path.strip_prefix(prefix)?;
        (rest.is_empty() || rest.starts_with('/')).then_some(handler)
    }

    /// Accepts connections on `listener` until `shutdown` resolves.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let sweeper = {
            let this = Arc::downgrade(&self);
            tokio::spawn(async move {
                let mut sweep = tokio::time::interval(Duration::from_secs(60));
                loop {
                    sweep.tick().await;
                    let Some(this) = this.upgrade() else { return };
                    this.expire_idle(SESSION_IDLE);
                }
            })
        };
        let this = self.clone();
        httpd::serve(listener, self.opts.limits.clone(), shutdown, move |req| {
            let this = this.clone();
            async move { this.route(req).await }
        })
        .await;
        sweeper.abort();
        let sessions: Vec<Arc<HttpSession>> = self
            .sessions
            .lock()
            .unwrap()
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in sessions {
            self.hub.close_session(s.session.id(), "shutdown");
        }
    }

    /// Serves one HTTP connection on `io` (any byte stream) as [`HttpGateway::serve`]
    /// serves each accepted one, until it closes; for tests and fuzzing without a socket.
    pub async fn serve_io(
        self: &Arc<Self>,
        io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    ) {
        let this = self.clone();
        httpd::serve_connection(io, &self.opts.limits, move |req| {
            let this = this.clone();
            async move { this.route(req).await }
        })
        .await;
    }

    async fn route(&self, req: Request) -> Response {
        if req.uri().scheme().is_some() {
            return closing(rpc_error(
                400,
                jsonrpc::INVALID_REQUEST,
                "absolute-form request target: this is not a proxy; request /mcp",
            ));
        }
        if let Some(mounted) = self.mounted_for(req.uri().path()) {
            let checked = match security_headers(&req) {
                Ok(h) => self.check_host(h.host),
                Err(denied) => Err(denied),
            };
            if let Err(denied) = checked {
                return closing(denied);
            }
            return mounted.handle(req).await;
        }
        // A refused request's body is never read: the connection cannot carry another.
        if let Err(denied) = self.check_security(&req) {
            return closing(denied);
        }
        let profile = match self.profile_of(req.uri().path()) {
            Ok(p) => p,
            Err(why) => return full(404, "text/plain", why),
        };
        let profile = profile.as_deref();
        match *req.method() {
            Method::POST => self.post(req, profile).await,
            Method::GET => self.get(req, profile),
            Method::DELETE => self.delete(req, profile),
            _ => with_header(
                full(405, "text/plain", "use POST, GET or DELETE\n"),
                "allow",
                "GET, POST, DELETE",
            ),
        }
    }

    /// DNS-rebinding and token checks, on the head alone; `Err` is the refusal.
    // The error is the response to send: built once, returned once, not worth a box.
    #[allow(clippy::result_large_err)]
    fn check_security(&self, req: &Request) -> Result<(), Response> {
        let SecurityHeaders {
            host,
            origin,
            authorization,
        } = security_headers(req)?;
        self.check_host(host)?;
        if let Some(origin) = origin
            && !origin_allowed(origin)
        {
            return Err(rpc_error(
                403,
                jsonrpc::INVALID_REQUEST,
                &format!(
                    "Origin {origin:?} is not allowed: only loopback origins may call this endpoint"
                ),
            ));
        }
        if let Some(token) = &self.opts.token {
            let given = authorization.map(|h| match h.split_once(' ') {
                Some((scheme, t)) if scheme.eq_ignore_ascii_case("bearer") => t.trim(),
                _ => "",
            });
            if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
                // RFC 6750: no credentials → a bare challenge; wrong ones → invalid_token.
                let (what, challenge) = match given {
                    None => ("missing bearer token", r#"Bearer realm="corral""#),
                    Some(_) => (
                        "wrong bearer token",
                        r#"Bearer realm="corral", error="invalid_token""#,
                    ),
                };
                let r = rpc_error(
                    401,
                    jsonrpc::INVALID_REQUEST,
                    &format!(
                        "{what}: send `Authorization: Bearer <token>` with the token from {} \
                         (`corral up` in the foreground prints it; `[gateway] auth = \"none\"` \
                         turns it off)",
                        self.opts.token_file.display()
                    ),
                );
                return Err(with_header(r, "www-authenticate", challenge));
            }
        }
        Ok(())
    }

    /// The DNS-rebinding check: `Host` must name a loopback address or the bound one.
    #[allow(clippy::result_large_err)]
    fn check_host(&self, host: Option<&str>) -> Result<(), Response> {
        let host = host.unwrap_or("");
        if self.host_allowed(host) {
            return Ok(());
        }
        Err(rpc_error(
            403,
            jsonrpc::INVALID_REQUEST,
            &format!("Host {host:?} is not allowed: this endpoint answers only to loopback names"),
        ))
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = match host.rsplit_once(':') {
            Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) && !n.ends_with(':') => n,
            _ => host,
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let bound = self.opts.local_addr.ip();
        matches!(name, "localhost" | "127.0.0.1" | "::1")
            || (!bound.is_unspecified() && name == bound.to_string())
    }

    /// The profile a path names: `/mcp` is everything (`None`), `/mcp/NAME` the
    /// profile NAME of `[profiles]`; `Err` is the 404's text.
    fn profile_of(&self, path: &str) -> Result<Option<String>, String> {
        let rest = match path.strip_prefix("/mcp") {
            Some("" | "/") => return Ok(None),
            Some(rest) => rest.strip_prefix('/'),
            None => None,
        };
        let name = rest.map(|r| r.strip_suffix('/').unwrap_or(r));
        match name {
            Some(name) if self.hub.profile(name).is_some() => Ok(Some(name.to_owned())),
            Some(name) => {
                let names = self.hub.profile_names();
                let list = if names.is_empty() {
                    "none is configured ([profiles.NAME] in corral.toml)".to_owned()
                } else {
                    format!("profiles: {}", names.join(", "))
                };
                // The name came from the client: shown escaped, never as markup.
                Err(format!(
                    "not found: no profile {name:?}; the MCP endpoint is /mcp (everything) \
                     or /mcp/PROFILE; {list}\n"
                ))
            }
            None => Err("not found: the MCP endpoint is /mcp\n".to_owned()),
        }
    }

    // The error is the response to send: built once, returned once, not worth a box.
    #[allow(clippy::result_large_err)]
    fn session_for<B>(
        &self,
        req: &hyper::Request<B>,
        profile: Option<&str>,
    ) -> Result<Arc<HttpSession>, Response> {
        let Some(id) = header(req, "mcp-session-id") else {
            return Err(rpc_error(
                400,
                jsonrpc::INVALID_REQUEST,
                "missing Mcp-Session-Id header: send initialize first and echo its Mcp-Session-Id",
            ));
        };
        let found = self.sessions.lock().unwrap().get(id).cloned();
        // A session is used at the path it began on: its profile is what it sees.
        let found = found.filter(|hs| hs.session.shared().profile.as_deref() == profile);
        if let Some(hs) = &found {
            *hs.last_used.lock().unwrap() = Instant::now();
        }
        found.ok_or_else(|| {
            rpc_error(
                404,
                jsonrpc::INVALID_REQUEST,
                "unknown or expired session: initialize a new one",
            )
        })
    }

    async fn post(&self, req: Request, profile: Option<&str>) -> Response {
        let accepts_sse = header(&req, "accept")
            .is_some_and(|a| a.contains("text/event-stream") || a.contains("*/*"));
        // The body decides the era (a 2026-07-28 claim in `_meta`), so the version header
        // is judged once the body is read.
        let (head, body) = req.into_parts();
        let req = hyper::Request::from_parts(head, ());
        let deadline = self.opts.limits.body_timeout;
        let body = match httpd::read_body(body, MAX_BODY, deadline).await {
            Ok(b) => b,
            Err(e) => {
                let (status, why) = match e {
                    BodyError::TooLarge => {
                        (413, format!("request body over {} MiB", MAX_BODY >> 20))
                    }
                    BodyError::TimedOut => (
                        408,
                        format!("request body not complete within {deadline:?}"),
                    ),
                    BodyError::Broken => (400, "request body broken off".to_owned()),
                };
                return closing(rpc_error(status, jsonrpc::INVALID_REQUEST, &why));
            }
        };
        let Some(env) = Envelope::parse(&body) else {
            return rpc_error(
                400,
                jsonrpc::PARSE_ERROR,
                "body is not one JSON-RPC message (batches are not supported)",
            );
        };
        let request = env.to_request();
        drop(env);
        let version = header(&req, "mcp-protocol-version");
        let mut stateless = None;
        if let Some(request) = &request {
            let bad = |code, msg: &str| {
                full(
                    400,
                    "application/json",
                    jsonrpc::error(Some(&request.id), code, msg),
                )
            };
            match modern::claim(&request.id, &request.method, request.params.as_deref()) {
                Claim::Invalid(error) => return full(400, "application/json", error),
                Claim::Modern(meta) => stateless = Some(meta),
                Claim::None
                    if version.is_some_and(|v| modern::MODERN_VERSIONS.contains(&v))
                        || &*request.method == "server/discover" =>
                {
                    return bad(
                        jsonrpc::INVALID_PARAMS,
                        &format!(
                            "a 2026-07-28 request carries params._meta with \"{}\" and \"{}\"; \
                             for a 2025 session, initialize without them",
                            modern::PROTOCOL_VERSION_KEY,
                            modern::CLIENT_CAPABILITIES_KEY
                        ),
                    );
                }
                Claim::None => {}
            }
        }
        if let Some(meta) = stateless {
            let request = request.expect("a claim is read from a request");
            return self
                .post_modern(&req, version, accepts_sse, request, meta, profile)
                .await;
        }
        if let Some(v) = version
            && !PROTOCOL_VERSIONS.contains(&v)
        {
            return rpc_error(
                400,
                jsonrpc::INVALID_REQUEST,
                &format!(
                    "unsupported MCP-Protocol-Version {v:?}; supported: {}",
                    PROTOCOL_VERSIONS.join(", ")
                ),
            );
        }
        let session_header = header(&req, "mcp-session-id").is_some();
        let is_initialize = request.as_ref().is_some_and(|r| &*r.method == "initialize");

        // A new session's id goes back in the reply's `Mcp-Session-Id`.
        let (hs, new_id) = if is_initialize {
            if session_header {
                // Re-initializing inside a session is not allowed; a new session is made
                // by omitting the header.
                return rpc_error(
                    400,
                    jsonrpc::INVALID_REQUEST,
                    "initialize must not carry Mcp-Session-Id",
                );
            }
            let (id, hs) = self.new_session(profile);
            (hs, Some(id))
        } else {
            match self.session_for(&req, profile) {
                Ok(s) => (s, None),
                Err(r) => return r,
            }
        };
        let new_id = new_id.as_deref();

        let Some(request) = request else {
            hs.session.receive(&body, Box::new(|_| {}));
            return full(202, "application/json", Bytes::new());
        };
        self.answer(hs, request, None, accepts_sse, new_id).await
    }

    /// A stateless 2026-07-28 request: its headers checked against its body, then served
    /// in a session of its own that ends with it. `Mcp-Session-Id` is ignored and none
    /// is minted.
    async fn post_modern(
        &self,
        req: &hyper::Request<()>,
        version: Option<&str>,
        accepts_sse: bool,
        request: jsonrpc::Request,
        meta: ModernMeta,
        profile: Option<&str>,
    ) -> Response {
        let id = &*request.id;
        let method = &*request.method;
        match modern::method(method) {
            modern::Method::Served => {}
            kind => {
                return full(
                    404,
                    "application/json",
                    modern::method_error(id, method, kind),
                );
            }
        }
        if method == "subscriptions/listen" && !accepts_sse {
            return full(
                400,
                "application/json",
                jsonrpc::error(
                    Some(id),
                    jsonrpc::INVALID_REQUEST,
                    "subscriptions/listen streams its notifications: send Accept: \
                     application/json, text/event-stream",
                ),
            );
        }
        if let Err(why) = modern::check_headers(
            version,
            header(req, "mcp-method"),
            header(req, "mcp-name"),
            &meta,
            method,
        ) {
            let msg = format!("Header mismatch: {why}");
            return full(
                400,
                "application/json",
                jsonrpc::error(Some(id), modern::HEADER_MISMATCH, &msg),
            );
        }
        self.answer(
            self.open_session(profile),
            request,
            Some(meta),
            accepts_sse,
            None,
        )
        .await
    }

    /// Runs `request` in `hs` and makes the response: JSON, or SSE once something related
    /// to the request comes first. `modern`: a stateless request, whose one-off session
    /// is closed when it is answered.
    async fn answer(
        &self,
        hs: Arc<HttpSession>,
        request: jsonrpc::Request,
        modern: Option<ModernMeta>,
        accepts_sse: bool,
        new_id: Option<&str>,
    ) -> Response {
        // Closes a stateless request's session however the request ends.
        struct OneOff(Option<(Arc<Hub>, u64)>);
        impl Drop for OneOff {
            fn drop(&mut self) {
                if let Some((hub, id)) = self.0.take() {
                    hub.close_session(id, "answered");
                }
            }
        }
        let one_off = OneOff(
            modern
                .is_some()
                .then(|| (self.hub.clone(), hs.session.id())),
        );
        let key = request.id.get().to_owned();
        // Closing a 2026-07-28 request's stream cancels it (how a listen ends); a 2025
        // client's disconnect is not a cancellation (its call runs to the end).
        let cancel_on_close = modern.is_some();
        let (related_tx, mut related_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        if accepts_sse {
            let mut streams = hs.out.streams.lock().unwrap();
            if streams.per_request.contains_key(&key) {
                // Its first request goes on; this one is refused, not lost.
                return json_reply(new_id, Some(crate::session::duplicate_id(&request.id)));
            }
            streams.per_request.insert(key.clone(), related_tx);
        }
        // The request runs right here, in this connection's task: no extra task, no
        // hand-off to another worker for the common case of a plain JSON reply.
        let session = hs.session.clone();
        let mut reply_rx = Box::pin(async move {
            match modern {
                Some(meta) => session.call_modern(request, meta).await,
                None => session.call(request).await,
            }
        });

        // Whichever comes first decides the response type.
        let first_related = tokio::select! {
            biased;
            m = related_rx.recv(), if accepts_sse => m,
            reply = &mut reply_rx => {
                hs.out.streams.lock().unwrap().per_request.remove(&key);
                // Related messages routed just before the reply still go first.
                let mut queued = Vec::new();
                while let Ok(m) = related_rx.try_recv() {
                    queued.push(m);
                }
                if queued.is_empty() {
                    return json_reply(new_id, reply);
                }
                let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
                for m in queued.iter().chain(reply.as_ref()) {
                    let _ = tx.send(sse_event(m, None));
                }
                return sse_reply(new_id, rx);
            }
        };
        // Something related came first: stream it, then the rest, then the response.
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        if let Some(m) = first_related {
            let _ = tx.send(sse_event(&m, None));
        }
        let out = hs.out.clone();
        tokio::spawn(async move {
            let _one_off = one_off;
            loop {
                tokio::select! {
                    biased;
                    // The client closed the stream of a 2026-07-28 request: its
                    // cancellation. Dropping the request's future cancels what it
                    // forwarded. (A 2025 client's closed stream is not a cancellation:
                    // that revision cancels with notifications/cancelled only.)
                    () = tx.closed(), if cancel_on_close => break,
                    m = related_rx.recv() => match m {
                        Some(m) => { let _ = tx.send(sse_event(&m, None)); }
                        None => break,
                    },
                    reply = &mut reply_rx => {
                        while let Ok(m) = related_rx.try_recv() {
                            let _ = tx.send(sse_event(&m, None));
                        }
                        if let Some(r) = reply {
                            let _ = tx.send(sse_event(&r, None));
                        }
                        break;
                    }
                }
            }
            out.streams.lock().unwrap().per_request.remove(&key);
        });
        sse_reply(new_id, rx)
    }

    /// A session of the hub with its HTTP outbound, not registered under an id (what a
    /// stateless request is served in).
    fn open_session(&self, profile: Option<&str>) -> Arc<HttpSession> {
        let out = Arc::new(HttpOutbound {
            streams: Mutex::new(Streams::default()),
            hub: Arc::downgrade(&self.hub),
        });
        let session = Session::open(&self.hub, out.clone(), "http", profile);
        out.streams.lock().unwrap().session = session.id();
        Arc::new(HttpSession {
            session,
            out,
            last_used: Mutex::new(Instant::now()),
        })
    }

    /// A new session and its id.
    fn new_session(&self, profile: Option<&str>) -> (String, Arc<HttpSession>) {
        let hs = self.open_session(profile);
        let id = session_id(self.counter.fetch_add(1, Ordering::Relaxed));
        self.sessions.lock().unwrap().insert(id.clone(), hs.clone());
        (id, hs)
    }

    fn get(&self, req: Request, profile: Option<&str>) -> Response {
        let accepts_sse = header(&req, "accept").is_some_and(|a| a.contains("text/event-stream"));
        if !accepts_sse {
            return rpc_error(
                406,
                jsonrpc::INVALID_REQUEST,
                "GET /mcp opens an event stream: send Accept: text/event-stream",
            );
        }
        let hs = match self.session_for(&req, profile) {
            Ok(s) => s,
            Err(r) => return r,
        };
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        {
            let mut s = hs.out.streams.lock().unwrap();
            // A comment first, so the client sees the stream open at once.
            let _ = tx.send(Bytes::from_static(b": corral event stream\n\n"));
            let unread = Arc::new(AtomicUsize::new(0));
            s.backlog_bytes = 0;
            while let Some(m) = s.backlog.pop_front() {
                s.next_event += 1;
                let _ = send_counted(&tx, &unread, sse_event_vec(&m, Some(s.next_event)));
            }
            s.general = Some((tx, unread));
        }
        sse_stream(rx)
    }

    fn delete(&self, req: Request, profile: Option<&str>) -> Response {
        let Some(id) = header(&req, "mcp-session-id") else {
            return rpc_error(
                400,
                jsonrpc::INVALID_REQUEST,
                "missing Mcp-Session-Id header",
            );
        };
        let mut sessions = self.sessions.lock().unwrap();
        let mine = sessions
            .get(id)
            .is_some_and(|hs| hs.session.shared().profile.as_deref() == profile);
        let removed = if mine { sessions.remove(id) } else { None };
        match removed {
            Some(hs) => {
                drop(sessions);
                self.hub.close_session(hs.session.id(), "deleted");
                full(200, "application/json", Bytes::new())
            }
            None => rpc_error(404, jsonrpc::INVALID_REQUEST, "unknown session"),
        }
    }

    /// Forgets sessions idle for `idle` with no stream open (clients that went away
    /// without DELETE), so their state does not pile up.
    fn expire_idle(&self, idle: Duration) {
        let expired: Vec<Arc<HttpSession>> = {
            let mut sessions = self.sessions.lock().unwrap();
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, hs)| {
                    let streams = hs.out.streams.lock().unwrap();
                    let streaming = streams.general.as_ref().is_some_and(|g| !g.0.is_closed())
                        || !streams.per_request.is_empty();
                    !streaming && hs.last_used.lock().unwrap().elapsed() > idle
                })
                .map(|(k, _)| k.clone())
                .collect();
            ids.iter().filter_map(|k| sessions.remove(k)).collect()
        };
        for hs in expired {
            self.hub.close_session(hs.session.id(), "expired");
        }
    }

    /// Open HTTP sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }
}

/// A loopback origin: `http(s)://localhost|127.0.0.1|[::1][:port]`.
fn origin_allowed(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split(':').next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// An unguessable session id: 128 random bits (from the OS) plus a counter, hex.
fn session_id(n: u64) -> String {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes);
    let mut s = String::with_capacity(48);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s.push_str(&format!("{n:x}"));
    s
}

pub use corral_httpd::{constant_time_eq, new_token, random_bytes};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        assert!(origin_allowed("http://localhost:3000"));
        assert!(origin_allowed("https://127.0.0.1"));
        assert!(origin_allowed("http://[::1]:8080"));
        assert!(!origin_allowed("http://evil.example"));
        assert!(!origin_allowed("http://localhost.evil.example"));
        assert!(!origin_allowed("null"));
    }

    #[test]
    fn tokens_are_random_hex() {
        let a = new_token();
        assert_eq!(a.len(), 64);
        assert_ne!(a, new_token());
        assert!(constant_time_eq(a.as_bytes(), a.clone().as_bytes()));
        assert!(!constant_time_eq(b"abc", b"abd"));
    }
}
