//! A remote (url) MCP server, carried for Corral's supervisor: `corral __remote` reads
//! the supervisor's newline-delimited JSON-RPC on stdin and speaks it to the server over
//! Streamable HTTP, writing what the server sends back on stdout.
//!
//! So a remote server is supervised exactly like a stdio one — the same handshake (and
//! `server/discover` probe), deadlines, cancellation, restarts with backoff and the
//! crash-loop breaker, events, stderr tail — and this process is the only place that
//! knows HTTP. It is transparent to the messages and owns what HTTP adds:
//!
//! - the headers: `MCP-Protocol-Version` (the negotiated revision, or a 2026-07-28
//!   request's own claim), `Mcp-Session-Id`, a 2026 request's `Mcp-Method`/`Mcp-Name`,
//!   and the configured `headers`;
//! - each request's answer, as JSON or as an SSE stream that also carries the request's
//!   notifications and the server's requests; a stream broken before the answer is
//!   resumed with `Last-Event-ID` where the server numbered its events;
//! - the session's GET stream (server-initiated messages of a 2025 session), reopened
//!   when it drops;
//! - an expired session (404 on `Mcp-Session-Id`): initialized again with the
//!   supervisor's own `initialize`, and the request sent once more, unseen by Corral;
//! - failures in words (DNS, refused, which TLS problem, 401/403, 404, a body that is not
//!   MCP): the request gets a JSON-RPC error saying so, and when the server cannot be
//!   reached at all this process exits with the reason on stderr, so the supervisor
//!   reconnects with backoff and its death event carries the cause.

mod http;
pub mod oauth;

use bytes::Bytes;
use corral_httpd::sse;
use http::Http;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// The server's URL.
pub const ENV_URL: &str = "CORRAL_REMOTE_URL";
/// The configured headers, a JSON object of strings (secrets: never in argv).
pub const ENV_HEADERS: &str = "CORRAL_REMOTE_HEADERS";
/// The server's name, for messages.
pub const ENV_NAME: &str = "CORRAL_REMOTE_NAME";
/// The project's directory: with the name and URL, it finds the server's OAuth
/// credentials ([`oauth::store`]).
pub const ENV_PROJECT: &str = "CORRAL_REMOTE_PROJECT";
/// `http` (Streamable HTTP only), `sse` (the 2024-11-05 HTTP+SSE transport only), or
/// unset: Streamable HTTP, falling back to HTTP+SSE as the specification says (a 404 or
/// 405 to the first POST, then a GET that opens an event stream with an `endpoint`).
pub const ENV_TRANSPORT: &str = "CORRAL_REMOTE_TRANSPORT";

/// The largest message accepted either way (the supervisor's limit).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// How much of a body that is not MCP is quoted in an error.
const QUOTED: usize = 200;
/// The wait before reopening a dropped GET stream, unless the server said (`retry`).
const REOPEN: Duration = Duration::from_secs(1);

/// What the supervisor passes in the environment.
pub struct Config {
    pub name: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub transport: Transport,
    pub project: Option<std::path::PathBuf>,
}

/// Which HTTP transport the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP, else HTTP+SSE.
    Auto,
    Streamable,
    Sse,
}

impl Config {
    pub fn from_env() -> Result<Config, String> {
        let url = std::env::var(ENV_URL).map_err(|_| format!("{ENV_URL} is not set"))?;
        let name = std::env::var(ENV_NAME).unwrap_or_else(|_| "remote".to_owned());
        let headers = match std::env::var(ENV_HEADERS) {
            Ok(h) if !h.is_empty() => {
                serde_json::from_str::<std::collections::BTreeMap<String, String>>(&h)
                    .map_err(|e| format!("{ENV_HEADERS} is not a JSON object of strings: {e}"))?
                    .into_iter()
                    .collect()
            }
            _ => Vec::new(),
        };
        let transport = match std::env::var(ENV_TRANSPORT).as_deref() {
            Err(_) | Ok("" | "auto") => Transport::Auto,
            Ok("http" | "streamable-http") => Transport::Streamable,
            Ok("sse") => Transport::Sse,
            Ok(other) => {
                return Err(format!(
                    "{ENV_TRANSPORT}={other:?} is not one of auto, http, sse"
                ));
            }
        };
        Ok(Config {
            name,
            url,
            headers,
            transport,
            project: std::env::var_os(ENV_PROJECT).map(Into::into),
        })
    }
}

/// `corral __remote`: carries the traffic until stdin closes (the supervisor stops the
/// server) or the server cannot be reached (exit 1, the reason on stderr).
pub fn main() -> ExitCode {
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("corral: remote server: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("corral: remote server '{}': cannot start: {e}", cfg.name);
            return ExitCode::from(2);
        }
    };
    let code = rt.block_on(run(cfg));
    // Not waiting for the stdin reader: its blocking read ends only when the supervisor
    // closes the pipe, and an unreachable server must exit now.
    rt.shutdown_background();
    code
}

async fn run(cfg: Config) -> ExitCode {
    let who = format!("remote server '{}' ({})", cfg.name, cfg.url);
    let bridge = match Bridge::new(cfg) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            eprintln!("corral: {who}: {e}");
            return ExitCode::from(2);
        }
    };
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let (fatal_tx, mut fatal_rx) = mpsc::unbounded_channel::<(String, u8)>();
    *bridge.out.lock().unwrap() = Some(out_tx);
    *bridge.fatal.lock().unwrap() = Some(fatal_tx);
    bridge.clone().keep_fresh();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = out_rx.recv().await {
            let mut buf = line.into_bytes();
            buf.push(b'\n');
            // More already queued goes in the same write.
            while let Ok(more) = out_rx.try_recv() {
                buf.extend_from_slice(more.as_bytes());
                buf.push(b'\n');
            }
            if stdout.write_all(&buf).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    // Lines from the supervisor, read on their own task (a read is not cancel-safe).
    let (in_tx, mut in_rx) = mpsc::channel::<Result<String, String>>(64);
    tokio::spawn(async move {
        let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = (&mut stdin)
                .take(MAX_MESSAGE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await;
            let item = match read {
                Ok(0) | Err(_) => return,
                Ok(_) if line.len() > MAX_MESSAGE => Err(format!(
                    "a message from the supervisor over {MAX_MESSAGE} bytes"
                )),
                Ok(_) => Ok(String::from_utf8_lossy(&line).trim().to_owned()),
            };
            let stop = item.is_err();
            if in_tx.send(item).await.is_err() || stop {
                return;
            }
        }
    });
    let code = loop {
        tokio::select! {
            line = in_rx.recv() => match line {
                // stdin closed: the supervisor stops the server.
                None => break ExitCode::SUCCESS,
                Some(Err(why)) => {
                    eprintln!("corral: {who}: {why}");
                    break ExitCode::from(1);
                }
                Some(Ok(text)) => {
                    if !text.is_empty() {
                        bridge.clone().dispatch(text);
                    }
                }
            },
            why = fatal_rx.recv() => {
                let (why, code) = why.unwrap_or_else(|| ("ended".into(), 1));
                eprintln!("corral: {who}: {why}");
                break ExitCode::from(code);
            }
        }
    };
    // What was answered before the end still reaches the supervisor.
    drop(bridge.out.lock().unwrap().take());
    let _ = tokio::time::timeout(Duration::from_millis(500), writer).await;
    code
}

/// The parts of a message the transport needs, read in one pass: a 2026-07-28
/// request's claim (`_meta`) and the name `Mcp-Name` repeats come with the envelope.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<String>,
}

/// The envelope of a message whose `params` are not an object (not MCP's, but passed on).
#[derive(Deserialize)]
struct Bare<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
}

/// What one outgoing message is, for its headers and its answer.
#[derive(Clone)]
struct Outgoing {
    body: Bytes,
    /// The request's id (raw JSON); `None` for a notification or a response.
    id: Option<String>,
    method: Option<String>,
    /// A 2026-07-28 request: its claimed revision, and the name `Mcp-Name` carries.
    modern: Option<(String, Option<String>)>,
}

impl Outgoing {
    fn of(line: String) -> Result<Outgoing, String> {
        let (id, method, params) = match serde_json::from_str::<Envelope<'_>>(&line) {
            Ok(e) => (e.id, e.method, e.params),
            Err(_) => {
                let b: Bare<'_> = serde_json::from_str(&line)
                    .map_err(|e| format!("not a JSON-RPC message from the supervisor: {e}"))?;
                (b.id, b.method, None)
            }
        };
        let modern = params.and_then(|p| {
            let version = p.meta?.version?;
            let name = match method.as_deref() {
                Some("tools/call" | "prompts/get") => p.name,
                Some("resources/read") => p.uri,
                _ => None,
            }
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
            Some((version, name))
        });
        Ok(Outgoing {
            id: id.map(|i| i.get().to_owned()),
            method,
            modern,
            body: Bytes::from(line),
        })
    }

    fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }
}

/// A header value as MCP 2026-07-28 sends one: as it is when it is visible ASCII, else
/// `=?base64?…?=`.
fn header_text(s: &str) -> Option<HeaderValue> {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) && s.trim() == s {
        return HeaderValue::from_str(s).ok();
    }
    HeaderValue::from_str(&format!("=?base64?{}?=", base64(s.as_bytes()))).ok()
}

pub(crate) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The session's state, as HTTP sees it.
#[derive(Default)]
struct Session {
    id: Option<HeaderValue>,
    /// The revision `initialize` agreed on.
    version: Option<String>,
    /// The supervisor's `initialize` and whether it said `initialized`, to begin a new
    /// session the same way when this one expires.
    initialize: Option<Outgoing>,
    initialized: bool,
    get_stream: bool,
    /// How many times the session was begun again.
    generation: u64,
}

struct Bridge {
    name: String,
    url: Uri,
    http: Http,
    headers: HeaderMap,
    session: Mutex<Session>,
    /// Serializes beginning a new session.
    renew: tokio::sync::Mutex<()>,
    /// Requests in flight by raw id: a 2026 request is cancelled by ending its HTTP
    /// exchange.
    inflight: Mutex<HashMap<String, (AbortHandle, bool)>>,
    out: Mutex<Option<mpsc::UnboundedSender<String>>>,
    fatal: Mutex<Option<mpsc::UnboundedSender<(String, u8)>>>,
    /// The server's OAuth credentials (none when `headers` set `Authorization`);
    /// `Err`: why they cannot be had (no place for a store, an untrusted record).
    creds: Result<Arc<oauth::credentials::Credentials>, String>,
    /// How the server is spoken to: [`MODE_UNKNOWN`] until its first answer decides.
    mode: std::sync::atomic::AtomicU8,
    /// HTTP+SSE: where messages are POSTed (the stream's `endpoint`); one opening at a
    /// time.
    endpoint: Mutex<Option<Uri>>,
    opening: tokio::sync::Mutex<()>,
    /// The server answered once: losing it now ends this process (the supervisor
    /// reconnects with backoff); before, each request is answered with the reason, so
    /// the handshake fails saying why.
    reached: std::sync::atomic::AtomicBool,
}

const MODE_UNKNOWN: u8 = 0;
const MODE_STREAMABLE: u8 = 1;
/// The 2024-11-05 HTTP+SSE transport.
const MODE_LEGACY: u8 = 2;

/// How an exchange failed.
enum Failure {
    /// The server answered, but not with MCP (or refused): the request gets this error.
    Answer(String),
    /// The server could not be reached at all: this process ends.
    Unreachable(String),
    /// The session expired (404 on `Mcp-Session-Id`).
    Expired,
    /// The server wants OAuth credentials Corral does not have (why): `corral auth`.
    NeedsAuth(String),
    /// The first POST was refused with 404 or 405 (why, in words): maybe a server of the
    /// HTTP+SSE transport.
    NotStreamable(String),
}

impl Bridge {
    fn new(cfg: Config) -> Result<Bridge, String> {
        let url: Uri = cfg
            .url
            .parse()
            .map_err(|e| format!("the url is not a valid URL: {e}"))?;
        let http = Http::new(&url)?;
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("header name {k:?} is not a valid HTTP header name"))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| format!("the value of header {k:?} is not valid in HTTP"))?;
            headers.append(name, value);
        }
        // Configured credentials win: OAuth only for a server without them.
        let creds = if headers.contains_key(hyper::header::AUTHORIZATION) {
            Err("its `headers` set Authorization, which Corral sends as it is".to_owned())
        } else {
            let project = cfg.project.clone().unwrap_or_default();
            oauth::store::Store::of(&project, &cfg.name, &cfg.url)
                .and_then(oauth::credentials::Credentials::open)
                .map(Arc::new)
        };
        Ok(Bridge {
            creds,
            name: cfg.name,
            url,
            http,
            headers,
            session: Mutex::default(),
            renew: tokio::sync::Mutex::new(()),
            inflight: Mutex::default(),
            out: Mutex::new(None),
            fatal: Mutex::new(None),
            reached: std::sync::atomic::AtomicBool::new(false),
            mode: std::sync::atomic::AtomicU8::new(match cfg.transport {
                Transport::Auto => MODE_UNKNOWN,
                Transport::Streamable => MODE_STREAMABLE,
                Transport::Sse => MODE_LEGACY,
            }),
            endpoint: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        })
    }

    fn emit(&self, line: String) {
        if let Some(out) = &*self.out.lock().unwrap() {
            let _ = out.send(line);
        }
    }

    fn die(&self, why: String) {
        self.exit(why, 1);
    }

    fn exit(&self, why: String, code: u8) {
        if let Some(f) = &*self.fatal.lock().unwrap() {
            let _ = f.send((why, code));
        }
    }

    /// The server needs `corral auth NAME`: every request waiting is answered so, and this
    /// process ends with [`oauth::EXIT_NEEDS_AUTH`] (the supervisor holds the server in
    /// `needs_auth` rather than restarting it). The handshake is not answered: the exit
    /// says it.
    fn needs_auth(&self, why: &str) {
        let sentence = oauth::needs_auth_sentence(&self.name, why);
        let waiting: Vec<(String, (AbortHandle, bool))> =
            self.inflight.lock().unwrap().drain().collect();
        let init = self
            .session
            .lock()
            .unwrap()
            .initialize
            .as_ref()
            .and_then(|i| i.id.clone());
        for (id, (task, _)) in waiting {
            task.abort();
            if Some(&id) != init.as_ref() {
                let error = serde_json::json!({"code": -32000, "message": sentence});
                self.emit(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#));
            }
        }
        self.exit(sentence, oauth::EXIT_NEEDS_AUTH);
    }

    /// Sends one message from the supervisor on its way.
    fn dispatch(self: Arc<Self>, line: String) {
        let msg = match Outgoing::of(line) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("corral: remote server '{}': {e}", self.name);
                return;
            }
        };
        match msg.method.as_deref() {
            Some("initialize") if msg.is_request() => {
                self.session.lock().unwrap().initialize = Some(msg.clone());
            }
            Some("notifications/initialized") => {
                self.session.lock().unwrap().initialized = true;
            }
            Some("notifications/cancelled") => {
                // A 2026 request is cancelled by ending its exchange; a 2025 one is told
                // (and its answer is no longer awaited).
                if let Some(target) = cancelled_id(&msg.body)
                    && let Some((task, modern)) = self.inflight.lock().unwrap().remove(&target)
                {
                    task.abort();
                    if modern {
                        return;
                    }
                }
            }
            _ => {}
        }
        let id = msg.id.clone().filter(|_| msg.is_request());
        let modern = msg.modern.is_some();
        let me = self.clone();
        let task = tokio::spawn(async move {
            let id = msg.id.clone().filter(|_| msg.is_request());
            me.clone().carry(msg).await;
            if let Some(id) = id {
                me.inflight.lock().unwrap().remove(&id);
            }
        });
        if let Some(id) = id {
            self.inflight
                .lock()
                .unwrap()
                .insert(id, (task.abort_handle(), modern));
        }
    }

    /// One message's exchange, answered to the supervisor however it ends.
    async fn carry(self: Arc<Self>, msg: Outgoing) {
        let generation = self.session.lock().unwrap().generation;
        let mut result = if self.mode() == MODE_LEGACY {
            match self.open_legacy().await {
                Ok(()) => self.legacy_exchange(&msg).await,
                Err(f) => Err(f),
            }
        } else {
            self.exchange(&msg).await
        };
        if let Err(Failure::NotStreamable(post)) = result {
            result = match self.open_legacy().await {
                Ok(()) => self.legacy_exchange(&msg).await,
                Err(Failure::Answer(get)) => Err(Failure::Answer(format!(
                    "neither MCP transport answers at {}: a POST got {post}, and a GET for \
                     the older HTTP+SSE transport {get}",
                    self.url
                ))),
                Err(f) => Err(f),
            };
        }
        if matches!(result, Err(Failure::Expired)) {
            // Once: a session that expires again at once is not coming back.
            result = match self.renew(generation).await {
                Ok(()) => self.exchange(&msg).await,
                Err(f) => Err(f),
            };
        }
        let why = match result {
            Ok(()) => {
                if msg.method.as_deref() == Some("notifications/initialized") {
                    self.clone().open_get_stream();
                }
                return;
            }
            Err(Failure::Answer(why)) => why,
            Err(Failure::Expired) => {
                "the server ended the session (404 on Mcp-Session-Id) again right after a new \
                 one began"
                    .to_owned()
            }
            Err(Failure::NotStreamable(why)) => why,
            Err(Failure::NeedsAuth(why)) => {
                self.needs_auth(&why);
                return;
            }
            Err(Failure::Unreachable(why)) => {
                self.answer_error(&msg, &why);
                if self.reached.load(std::sync::atomic::Ordering::Acquire) {
                    self.die(why);
                }
                return;
            }
        };
        if msg.is_request() {
            self.answer_error(&msg, &why);
        } else {
            eprintln!(
                "corral: remote server '{}': {} not delivered: {why}",
                self.name,
                msg.method.as_deref().unwrap_or("a response")
            );
        }
    }

    fn answer_error(&self, msg: &Outgoing, why: &str) {
        if let Some(id) = msg.id.as_ref().filter(|_| msg.is_request()) {
            let error = serde_json::json!({"code": -32000, "message": why});
            self.emit(format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#));
        }
    }

    /// The POST of one message, and its answer passed on.
    async fn exchange(&self, msg: &Outgoing) -> Result<(), Failure> {
        let mut req = self.post(self.url.clone());
        let (session, version) = {
            let s = self.session.lock().unwrap();
            (s.id.clone(), s.version.clone())
        };
        match &msg.modern {
            Some((claimed, name)) => {
                req = req.header("mcp-protocol-version", claimed.as_str());
                if let Some(m) = msg.method.as_deref().and_then(header_text) {
                    req = req.header("mcp-method", m);
                }
                if let Some(n) = name.as_deref().and_then(header_text) {
                    req = req.header("mcp-name", n);
                }
            }
            None => {
                if let Some(v) = &version {
                    req = req.header("mcp-protocol-version", v.as_str());
                }
                if let Some(s) = &session {
                    req = req.header("mcp-session-id", s.clone());
                }
            }
        }
        let req = req
            .body(Full::new(msg.body.clone()))
            .expect("a request from valid parts");
        let resp = self.send(req).await?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && session.is_some() && msg.modern.is_none() {
            return Err(Failure::Expired);
        }
        if self.mode() == MODE_UNKNOWN {
            if matches!(status.as_u16(), 404 | 405) {
                let why = self.refusal(msg, resp).await;
                return Err(Failure::NotStreamable(why));
            }
            self.mode
                .store(MODE_STREAMABLE, std::sync::atomic::Ordering::Release);
        }
        if msg.method.as_deref() == Some("initialize") && status.is_success() {
            let mut s = self.session.lock().unwrap();
            s.id = resp.headers().get("mcp-session-id").cloned();
        }
        if !status.is_success() {
            return Err(Failure::Answer(self.refusal(msg, resp).await));
        }
        if !msg.is_request() {
            return Ok(());
        }
        let id = msg.id.as_deref().unwrap_or("null");
        if is_sse(&resp) {
            let init = msg.method.as_deref() == Some("initialize");
            self.pump(resp, Some(id), init).await
        } else if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            Err(Failure::Answer(format!(
                "the server answered {} to a request, with no response ({})",
                status.as_u16(),
                self.url
            )))
        } else {
            let body = read_body(resp.into_body(), MAX_MESSAGE).await?;
            self.pass_json(&body, msg)
        }
    }

    /// A JSON answer: one message (or a batch), passed on; the negotiated revision is
    /// read from an `initialize` result.
    fn pass_json(&self, body: &[u8], msg: &Outgoing) -> Result<(), Failure> {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
            Failure::Answer(format!(
                "the server's answer is not JSON: {} ({}; is {} an MCP endpoint?)",
                quote(body),
                self.url,
                self.url
            ))
        })?;
        let messages = match v {
            serde_json::Value::Array(a) => a,
            one => vec![one],
        };
        for m in messages {
            if m.get("jsonrpc").is_none() {
                return Err(Failure::Answer(format!(
                    "the server's answer is JSON but not JSON-RPC: {} (is {} an MCP endpoint?)",
                    quote(body),
                    self.url
                )));
            }
            let m = m.to_string();
            if msg.method.as_deref() == Some("initialize") {
                self.note_version(&m);
            }
            self.emit(m);
        }
        Ok(())
    }

    /// The revision an `initialize` result agreed on, for the later requests' header.
    fn note_version(&self, result: &str) {
        let v: Option<serde_json::Value> = serde_json::from_str(result).ok();
        if let Some(v) = v
            .as_ref()
            .and_then(|v| v.pointer("/result/protocolVersion"))
            .and_then(|v| v.as_str())
        {
            self.session.lock().unwrap().version = Some(v.to_owned());
        }
    }

    /// An SSE answer: every message event passed on, until the answer to `id` came (or,
    /// for the GET stream, until the stream ends). A stream broken before the answer is
    /// resumed with `Last-Event-ID` where the server numbered its events.
    async fn pump(
        &self,
        resp: Response<Incoming>,
        id: Option<&str>,
        init: bool,
    ) -> Result<(), Failure> {
        let mut parser = sse::Parser::new(MAX_MESSAGE);
        let mut body = resp.into_body();
        let mut events = Vec::new();
        let mut resumes = 0;
        loop {
            let frame = body.frame().await;
            match frame {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data()
                        && parser.feed(&data, &mut events).is_err()
                    {
                        return Err(Failure::Answer(format!(
                            "the server sent an event over {MAX_MESSAGE} bytes"
                        )));
                    }
                    let mut answered = false;
                    for e in events.drain(..) {
                        if e.event != "message" || e.data.trim().is_empty() {
                            continue;
                        }
                        if id.is_some_and(|id| answers(&e.data, id)) {
                            answered = true;
                            if init {
                                self.note_version(&e.data);
                            }
                        }
                        self.emit(single_line(e.data));
                    }
                    if answered {
                        return Ok(());
                    }
                }
                Some(Err(e)) if id.is_none() => {
                    return Err(Failure::Answer(format!(
                        "the event stream broke: {}",
                        http::describe(&e)
                    )));
                }
                None if id.is_none() => return Ok(()),
                // A request's stream ended or broke before its answer.
                end => {
                    let Some(last) = parser.last_id.clone().filter(|_| resumes < 3) else {
                        let how = match end {
                            Some(Err(e)) => format!("broke ({})", http::describe(&e)),
                            _ => "ended".to_owned(),
                        };
                        return Err(Failure::Answer(format!(
                            "the server's event stream {how} before the response"
                        )));
                    };
                    resumes += 1;
                    body = self.resume(&last).await?.into_body();
                }
            }
        }
    }

    /// Reopens a broken stream after event `last` (a GET with `Last-Event-ID`).
    async fn resume(&self, last: &str) -> Result<Response<Incoming>, Failure> {
        let resp = self.get(Some(last)).await?;
        if !resp.status().is_success() || !is_sse(&resp) {
            return Err(Failure::Answer(format!(
                "the stream broke and the server did not resume it (GET with Last-Event-ID \
                 answered {})",
                resp.status().as_u16()
            )));
        }
        Ok(resp)
    }

    async fn get(&self, last: Option<&str>) -> Result<Response<Incoming>, Failure> {
        let (session, version) = {
            let s = self.session.lock().unwrap();
            (s.id.clone(), s.version.clone())
        };
        let mut req = self
            .request(Method::GET, self.url.clone())
            .header("accept", "text/event-stream");
        if let Some(v) = &version {
            req = req.header("mcp-protocol-version", v.as_str());
        }
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(l) = last.and_then(|l| HeaderValue::from_str(l).ok()) {
            req = req.header("last-event-id", l);
        }
        self.send(req.body(Full::default()).expect("valid parts"))
            .await
    }

    /// A request to the server with the configured headers.
    fn request(&self, method: Method, uri: Uri) -> hyper::http::request::Builder {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(h) = req.headers_mut() {
            for (k, v) in &self.headers {
                h.append(k, v.clone());
            }
        }
        req
    }

    /// The POST of one JSON-RPC message, which may be answered in JSON or as a stream.
    fn post(&self, uri: Uri) -> hyper::http::request::Builder {
        self.request(Method::POST, uri)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
    }

    /// Sends `req` with the server's OAuth token when it has one. A 401 with an OAuth
    /// challenge gets newer tokens (one refresh, shared with every other request) and
    /// one retry; without tokens, or when the grant is gone, the server needs
    /// `corral auth`. A 403 `insufficient_scope` is remembered for the next `corral
    /// auth` and refuses this request only.
    async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, Failure> {
        let creds = match &self.creds {
            Ok(c) if same_origin(req.uri(), &self.url) => Some(c),
            _ => None,
        };
        let Some(creds) = creds else {
            let resp = self.send_once(req).await?;
            if let Err(why) = &self.creds
                && resp.status() == StatusCode::UNAUTHORIZED
                && bearer_challenge(&resp).is_some()
                && !self.headers.contains_key(hyper::header::AUTHORIZATION)
            {
                return Err(Failure::NeedsAuth(why.clone()));
            }
            return Ok(resp);
        };
        let (bearer, generation) = creds.bearer();
        // Kept for the one retry after a refresh (a server without a token has none).
        let again = bearer.is_some().then(|| copy(&req));
        let resp = self.send_once(with_bearer(req, bearer.clone())).await?;
        match resp.status() {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::FORBIDDEN => {
                if let Some(c) = bearer_challenge(&resp)
                    && c.error.as_deref() == Some("insufficient_scope")
                {
                    let scope = c.scope.unwrap_or_default();
                    creds.want_scope(&scope).await;
                    return Err(Failure::Answer(format!(
                        "server '{}' needs more authorization for this (scope \"{scope}\"): run                          `corral auth {}` to grant it",
                        self.name, self.name
                    )));
                }
                return Ok(resp);
            }
            _ => return Ok(resp),
        }
        if bearer_challenge(&resp).is_none() {
            return Ok(resp); // not OAuth: the refusal says what the server wants
        }
        let Some(again) = again else {
            return Err(Failure::NeedsAuth("no credentials yet".into()));
        };
        match creds.renew(generation).await {
            Ok(()) => {}
            Err(oauth::Refused::Rejected(why)) => return Err(Failure::NeedsAuth(why)),
            Err(oauth::Refused::Transient(why)) => {
                return Err(Failure::Answer(format!(
                    "server '{}' refused its token, and getting a new one failed: {why} (tried \
                     again on the next request)",
                    self.name
                )));
            }
        }
        let resp = self.send_once(with_bearer(again, creds.bearer().0)).await?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            return Err(Failure::NeedsAuth(
                "the server refused a freshly refreshed token".into(),
            ));
        }
        Ok(resp)
    }

    /// Sends `req` once; a server that cannot be reached is said so with its URL.
    async fn send_once(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, Failure> {
        match self.http.send(req).await {
            Ok(r) => {
                self.reached
                    .store(true, std::sync::atomic::Ordering::Release);
                Ok(r)
            }
            Err(why) => Err(Failure::Unreachable(format!(
                "cannot reach {}: {why}",
                self.url
            ))),
        }
    }

    /// Refreshes the server's tokens before they expire, while this process carries its
    /// traffic; a refresh that fails for a while is tried again (1 s doubling to 60 s),
    /// a grant that is gone ends in `needs_auth`.
    fn keep_fresh(self: Arc<Self>) {
        let Ok(creds) = self.creds.clone() else {
            return;
        };
        tokio::spawn(async move {
            let mut wait = Duration::from_secs(1);
            while let Some(at) = creds.refresh_due() {
                let now = oauth::store::now();
                let pause = Duration::from_secs(at.saturating_sub(now)).max(Duration::from_secs(1));
                tokio::time::sleep(pause).await;
                if creds.refresh_due().is_none_or(|a| a > oauth::store::now()) {
                    continue; // refreshed meanwhile (a 401, another process)
                }
                match creds.renew(creds.bearer().1).await {
                    Ok(()) => wait = Duration::from_secs(1),
                    Err(oauth::Refused::Rejected(why)) => return self.needs_auth(&why),
                    Err(oauth::Refused::Transient(why)) => {
                        eprintln!(
                            "corral: remote server '{}': refreshing its token failed: {why}; \
                             trying again in {} s",
                            self.name,
                            wait.as_secs()
                        );
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(60));
                    }
                }
            }
        });
    }

    /// The session's GET stream (server-initiated messages), kept open while the
    /// session lives; a server without one (405) is fine.
    fn open_get_stream(self: Arc<Self>) {
        {
            let mut s = self.session.lock().unwrap();
            if s.get_stream || s.id.is_none() {
                return;
            }
            s.get_stream = true;
        }
        tokio::spawn(async move {
            let mut last: Option<String> = None;
            loop {
                let generation = self.session.lock().unwrap().generation;
                let resp = match self.get(last.as_deref()).await {
                    Ok(r) => r,
                    Err(Failure::Unreachable(why)) => return self.die(why),
                    Err(_) => return,
                };
                let status = resp.status();
                if status == StatusCode::NOT_FOUND {
                    if self.renew(generation).await.is_err() {
                        return;
                    }
                    last = None;
                    continue;
                }
                if !status.is_success() || !is_sse(&resp) {
                    // No stream offered (405): the server speaks only in answers.
                    self.session.lock().unwrap().get_stream = false;
                    return;
                }
                let mut parser = sse::Parser::new(MAX_MESSAGE);
                let mut body = resp.into_body();
                let mut events = Vec::new();
                while let Some(Ok(f)) = body.frame().await {
                    if let Ok(data) = f.into_data()
                        && parser.feed(&data, &mut events).is_err()
                    {
                        break;
                    }
                    for e in events.drain(..) {
                        if e.event == "message" && !e.data.trim().is_empty() {
                            self.emit(single_line(e.data));
                        }
                    }
                }
                last = parser.last_id.clone();
                let wait = parser.retry_ms.map_or(REOPEN, Duration::from_millis);
                tokio::time::sleep(wait).await;
            }
        });
    }

    /// Begins a new session after `generation` expired: the supervisor's own
    /// `initialize` (its answer kept here) and `initialized`, then the GET stream.
    async fn renew(self: &Arc<Self>, generation: u64) -> Result<(), Failure> {
        let _one = self.renew.lock().await;
        let (init, initialized) = {
            let mut s = self.session.lock().unwrap();
            if s.generation != generation {
                return Ok(()); // another request already began one
            }
            s.generation += 1;
            s.id = None;
            s.get_stream = false;
            (s.initialize.clone(), s.initialized)
        };
        let Some(init) = init else {
            return Err(Failure::Answer(
                "the server ended the session before it began".to_owned(),
            ));
        };
        let version = self.session.lock().unwrap().version.clone();
        let req = self
            .post(self.url.clone())
            .body(Full::new(init.body.clone()))
            .expect("valid parts");
        let resp = self.send(req).await?;
        if !resp.status().is_success() {
            let why = self.refusal(&init, resp).await;
            return Err(Failure::Answer(format!(
                "the session expired and a new one could not begin: {why}"
            )));
        }
        let id = resp.headers().get("mcp-session-id").cloned();
        // The answer is the one the supervisor already had: read and dropped.
        let _ = read_body(resp.into_body(), MAX_MESSAGE).await;
        {
            let mut s = self.session.lock().unwrap();
            s.id = id;
            s.version = version;
        }
        eprintln!(
            "corral: remote server '{}': the session expired; a new one began",
            self.name
        );
        if initialized {
            let note = Outgoing::of(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            )
            .expect("a valid message");
            self.exchange(&note).await?;
            self.clone().open_get_stream();
        }
        Ok(())
    }

    fn mode(&self) -> u8 {
        self.mode.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The HTTP+SSE transport (2024-11-05): a GET on the URL opens the event stream, whose
    /// first event names the endpoint messages are POSTed to; every answer comes on the
    /// stream. Opened once; the stream's end is the session's end (this process exits:
    /// the supervisor reconnects).
    async fn open_legacy(self: &Arc<Self>) -> Result<(), Failure> {
        let _one = self.opening.lock().await;
        if self.endpoint.lock().unwrap().is_some() {
            return Ok(());
        }
        let resp = self.get(None).await?;
        let status = resp.status();
        if !status.is_success() || !is_sse(&resp) {
            return Err(Failure::Answer(format!(
                "answered {}{}",
                status.as_u16(),
                if status.is_success() {
                    " without an event stream"
                } else {
                    ""
                }
            )));
        }
        let mut parser = sse::Parser::new(MAX_MESSAGE);
        let mut body = resp.into_body();
        let mut events = Vec::new();
        let first = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match body.frame().await {
                    Some(Ok(f)) => {
                        if let Ok(data) = f.into_data() {
                            parser.feed(&data, &mut events).map_err(|_| {
                                Failure::Answer("sent an event over the size limit".into())
                            })?;
                        }
                        if let Some(i) = events.iter().position(|e| e.event == "endpoint") {
                            let endpoint = events.remove(i).data;
                            return Ok(endpoint);
                        }
                    }
                    _ => {
                        return Err(Failure::Answer(
                            "opened an event stream that ended before its `endpoint` event".into(),
                        ));
                    }
                }
            }
        })
        .await
        .map_err(|_| {
            Failure::Answer(
                "opened an event stream but sent no `endpoint` event within 10 s".into(),
            )
        })??;
        let endpoint = resolve_endpoint(&self.url, &first).map_err(Failure::Answer)?;
        *self.endpoint.lock().unwrap() = Some(endpoint);
        self.mode
            .store(MODE_LEGACY, std::sync::atomic::Ordering::Release);
        // Whatever came with the endpoint, then the rest of the stream.
        for e in events.drain(..) {
            if e.event == "message" && !e.data.trim().is_empty() {
                self.emit(single_line(e.data));
            }
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                match body.frame().await {
                    Some(Ok(f)) => {
                        if let Ok(data) = f.into_data()
                            && parser.feed(&data, &mut events).is_err()
                        {
                            return me.die("the server sent an event over the size limit".into());
                        }
                        for e in events.drain(..) {
                            if e.event == "message" && !e.data.trim().is_empty() {
                                me.emit(single_line(e.data));
                            }
                        }
                    }
                    Some(Err(e)) => {
                        return me.die(format!(
                            "the server's event stream (HTTP+SSE) broke: {}",
                            http::describe(&e)
                        ));
                    }
                    None => {
                        return me.die(
                            "the server closed its event stream (HTTP+SSE), which ends the \
                             session"
                                .into(),
                        );
                    }
                }
            }
        });
        Ok(())
    }

    /// One message POSTed to the HTTP+SSE endpoint; its answer comes on the stream.
    async fn legacy_exchange(&self, msg: &Outgoing) -> Result<(), Failure> {
        let Some(endpoint) = self.endpoint.lock().unwrap().clone() else {
            return Err(Failure::Answer("the HTTP+SSE stream is not open".into()));
        };
        let req = self
            .post(endpoint)
            .body(Full::new(msg.body.clone()))
            .expect("valid parts");
        let resp = self.send(req).await?;
        if !resp.status().is_success() {
            return Err(Failure::Answer(self.refusal(msg, resp).await));
        }
        let _ = read_body(resp.into_body(), 64 * 1024).await;
        Ok(())
    }

    /// Why a non-2xx answer refused `msg`, in words; a JSON-RPC error in the body is
    /// passed on as the answer itself when it answers the request.
    async fn refusal(&self, msg: &Outgoing, resp: Response<Incoming>) -> String {
        let status = resp.status();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let challenge = header("www-authenticate");
        let location = header("location");
        let body = read_body(resp.into_body(), 64 * 1024)
            .await
            .unwrap_or_default();
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
            && v.get("jsonrpc").is_some()
            && let Some(e) = v.get("error")
        {
            let message = e.get("message").and_then(|m| m.as_str()).unwrap_or("");
            let code = e.get("code").and_then(|c| c.as_i64()).unwrap_or(0);
            if msg.is_request() && v.get("id").map(|i| i.to_string()) == msg.id {
                // The server's own JSON-RPC error: the supervisor reads its code.
                self.emit(v.to_string());
            }
            return format!("{message} ({code}; HTTP {})", status.as_u16());
        }
        match status.as_u16() {
            401 => format!(
                "401 Unauthorized from {}: the server needs credentials{}",
                self.url,
                challenge.map_or_else(String::new, |c| format!(" ({c})"))
            ),
            403 => format!(
                "403 Forbidden from {}: the credentials do not allow this",
                self.url
            ),
            404 => format!(
                "404 Not Found: no MCP endpoint at {} (check the url's path)",
                self.url
            ),
            s @ 300..=399 => format!(
                "HTTP {s} from {}: a redirect to {}, not followed (the headers, credentials \
                 among them, must not follow it elsewhere): put the final URL in `url`",
                self.url,
                location.as_deref().unwrap_or("nowhere")
            ),
            s => format!("HTTP {s} from {}: {}", self.url, quote(&body)),
        }
    }
}

/// A response's OAuth (`Bearer`) challenge, if it has one.
fn bearer_challenge(resp: &Response<Incoming>) -> Option<corral_httpd::challenge::Bearer> {
    let values = resp
        .headers()
        .get_all(hyper::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    corral_httpd::challenge::bearer(values).ok()
}

/// Whether `a` and `b` are on one origin (the token's audience is the server's origin).
fn same_origin(a: &Uri, b: &Uri) -> bool {
    a.scheme() == b.scheme() && a.authority() == b.authority()
}

fn with_bearer(mut req: Request<Full<Bytes>>, bearer: Option<HeaderValue>) -> Request<Full<Bytes>> {
    if let Some(b) = bearer {
        req.headers_mut().insert(hyper::header::AUTHORIZATION, b);
    }
    req
}

/// A request again (its body is in memory), for the one retry after a refresh.
fn copy(req: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut c = Request::new(req.body().clone());
    *c.method_mut() = req.method().clone();
    *c.uri_mut() = req.uri().clone();
    *c.version_mut() = req.version();
    *c.headers_mut() = req.headers().clone();
    c
}

/// The HTTP+SSE `endpoint` event's URI, resolved against the server's URL; one on
/// another origin is refused (the configured headers, credentials among them, must not
/// go there).
fn resolve_endpoint(base: &Uri, data: &str) -> Result<Uri, String> {
    let data = data.trim();
    let uri: Uri = if data.starts_with("http://") || data.starts_with("https://") {
        data.parse()
            .map_err(|e| format!("its `endpoint` event is not a URL ({data:?}: {e})"))?
    } else {
        let path = if data.starts_with('/') {
            data.to_owned()
        } else {
            let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
            format!("{dir}/{data}")
        };
        let mut parts = base.clone().into_parts();
        parts.path_and_query = Some(
            path.parse()
                .map_err(|e| format!("its `endpoint` event is not a path ({data:?}: {e})"))?,
        );
        Uri::from_parts(parts).map_err(|e| format!("its `endpoint` event ({data:?}): {e}"))?
    };
    if uri.scheme() != base.scheme() || uri.authority() != base.authority() {
        return Err(format!(
            "its `endpoint` event names another origin ({uri}); refused, so that the \
             configured headers are not sent there"
        ));
    }
    Ok(uri)
}

fn is_sse(resp: &Response<Incoming>) -> bool {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.trim_start().starts_with("text/event-stream"))
}

async fn read_body(mut body: Incoming, limit: usize) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Failure::Answer(format!("the answer broke off: {}", http::describe(&e)))
        })?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(Failure::Answer(format!(
                    "the server's answer is over {limit} bytes"
                )));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Whether message `data` is the response to request `id`.
fn answers(data: &str, id: &str) -> bool {
    #[derive(Deserialize)]
    struct M<'a> {
        #[serde(borrow, default)]
        id: Option<&'a RawValue>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<M<'_>>(data)
        .is_ok_and(|m| m.method.is_none() && m.id.is_some_and(|i| i.get() == id))
}

/// The `requestId` a `notifications/cancelled` names, as raw JSON.
fn cancelled_id(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct N<'a> {
        #[serde(borrow)]
        params: P<'a>,
    }
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: &'a RawValue,
    }
    serde_json::from_slice::<N<'_>>(body)
        .ok()
        .map(|n| n.params.request_id.get().to_owned())
}

/// A message on one line: a newline in JSON text is whitespace.
fn single_line(mut data: String) -> String {
    if memchr::memchr2(b'\n', b'\r', data.as_bytes()).is_some() {
        data = data.replace(['\n', '\r'], " ");
    }
    data
}

/// The start of a body, for an error message.
pub(crate) fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED)]);
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if body.len() > QUOTED {
        format!("{text:?}…")
    } else {
        format!("{text:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sse_endpoint_resolves_on_the_same_origin_only() {
        let base: Uri = "http://127.0.0.1:8/a/sse".parse().unwrap();
        let r = |d: &str| resolve_endpoint(&base, d).map(|u| u.to_string());
        assert_eq!(
            r("/messages/?s=1").unwrap(),
            "http://127.0.0.1:8/messages/?s=1"
        );
        assert_eq!(
            r("messages?s=1").unwrap(),
            "http://127.0.0.1:8/a/messages?s=1"
        );
        assert_eq!(r("http://127.0.0.1:8/m").unwrap(), "http://127.0.0.1:8/m");
        assert!(
            r("http://evil.example/m")
                .unwrap_err()
                .contains("another origin")
        );
        assert!(
            r("https://127.0.0.1:8/m")
                .unwrap_err()
                .contains("another origin")
        );
    }

    #[test]
    fn header_values_of_2026_requests() {
        assert_eq!(header_text("tools/call").unwrap(), "tools/call");
        assert_eq!(header_text("für").unwrap(), "=?base64?ZsO8cg==?=");
        assert_eq!(base64(b"hi"), "aGk=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[test]
    fn what_an_outgoing_message_is() {
        let m = Outgoing::of(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#
                .into(),
        )
        .unwrap();
        assert!(m.is_request());
        assert_eq!(m.id.as_deref(), Some("3"));
        assert_eq!(m.modern, Some(("2026-07-28".into(), Some("t".into()))));
        let n = Outgoing::of(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .unwrap();
        assert!(!n.is_request() && n.modern.is_none());
        // A name with escapes is read as the string it is; a 2025 request has no claim.
        let e = Outgoing::of(
            r#"{"jsonrpc":"2.0","id":"x","method":"resources/read","params":{"uri":"a\u00e9\"b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","other":[1]}}}"#
                .into(),
        )
        .unwrap();
        assert_eq!(
            e.modern,
            Some(("2026-07-28".into(), Some("a\u{e9}\"b".into())))
        );
        let old = Outgoing::of(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1}}}"#
                .into(),
        )
        .unwrap();
        assert!(old.modern.is_none() && old.is_request());
        // Params that are not an object (not MCP's) still pass, without a claim.
        let a =
            Outgoing::of(r#"{"jsonrpc":"2.0","id":2,"method":"m","params":[1,{"a":2}]}"#.into())
                .unwrap();
        assert!(a.is_request() && a.modern.is_none());
        assert!(Outgoing::of("[nonsense".into()).is_err());
        assert!(answers(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, "3"));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":3,"method":"x"}"#, "3"));
        assert_eq!(
            cancelled_id(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#)
                .as_deref(),
            Some("\"a\"")
        );
    }
}
