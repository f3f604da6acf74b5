//! A lean JSON-RPC 2.0 client over a child's stdin/stdout (MCP's stdio transport).
//!
//! This is the hot path of every forwarded tool call, so it parses only the envelope
//! (`id`, `method`, `result`/`error`) and carries params and results as raw JSON text.
//! Requests are matched to responses by id in a pending map, so any number of calls may
//! be in flight; each has a deadline, and a call that times out (or whose caller goes
//! away) sends `notifications/cancelled` to the server.
//!
//! Anything on stdout that is not a JSON object — a banner, a debug print, a
//! `Content-Length:` header of a server speaking LSP framing — never kills the session:
//! it is handed to [`StdoutSink`] as noise and the stream goes on.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{Notify, Semaphore, mpsc, oneshot};

/// Longest stdout line accepted (a large tool result is one line); longer lines are
/// discarded as noise so a runaway writer cannot exhaust memory.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// A failed request, as seen by the caller.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RpcError {
    /// The server answered with a JSON-RPC error object.
    #[error("{message} (JSON-RPC error {code})")]
    Server {
        code: i64,
        message: String,
        data: Option<String>,
    },
    /// No answer within the deadline.
    #[error("no answer to {method} within {}", humanize(*.after))]
    Timeout { method: String, after: Duration },
    /// The connection is gone (the child exited, was stopped or broke the protocol).
    #[error("{0}")]
    Closed(Arc<str>),
    /// The server answered something that is not a valid response.
    #[error("invalid response to {method}: {detail}")]
    Invalid { method: String, detail: String },
    /// The server's answer to this request could not be read: what it "sent …" (not
    /// UTF-8, not JSON, over the size limit, an id that matches nothing).
    #[error("{0}")]
    Unreadable(String),
}

/// `30s`, `1.5s`, `250ms`.
pub fn humanize(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A message the server sent us on its own initiative.
#[derive(Debug, Clone)]
pub struct Notification {
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

/// Where the reader reports what is not a response.
pub trait StdoutSink: Send + Sync + 'static {
    /// A line that is not a JSON-RPC message (already truncated for display).
    fn noise(&self, line: &str);
    /// The server speaks `Content-Length:` framing; reported once per connection.
    fn framing_mismatch(&self);
    /// A notification from the server.
    fn notification(&self, note: Notification);
    /// A request from the server (sampling, elicitation, roots …) other than `ping`.
    /// Return it back (`Err`) to have it answered "method not found".
    fn request(&self, request: ServerRequest) -> Result<(), ServerRequest> {
        Err(request)
    }
}

/// A request the server sent us, to be answered through its [`Responder`].
#[derive(Debug)]
pub struct ServerRequest {
    pub method: String,
    pub params: Option<Box<RawValue>>,
    pub responder: Responder,
}

/// Answers one server→client request. Dropping it unanswered answers with an error, so
/// the server is never left waiting.
#[derive(Debug)]
pub struct Responder {
    conn: std::sync::Weak<Connection>,
    id: Box<RawValue>,
    done: bool,
}

impl Responder {
    /// Answers with a result.
    pub fn result(mut self, result: &RawValue) {
        self.send("result", result.get());
    }

    /// Answers with a JSON-RPC error.
    pub fn error(mut self, code: i64, message: &str) {
        let mut err = format!("{{\"code\":{code},\"message\":");
        push_json_str(&mut err, message);
        err.push('}');
        self.send("error", &err);
    }

    fn send(&mut self, field: &str, value: &str) {
        self.done = true;
        if let Some(conn) = self.conn.upgrade() {
            let mut line = String::with_capacity(48 + value.len());
            let _ = write!(
                line,
                r#"{{"jsonrpc":"2.0","id":{},"{field}":"#,
                self.id.get()
            );
            push_single_line(&mut line, value);
            line.push_str("}\n");
            let _ = conn.out.send(Outgoing::Line(line.into_bytes()));
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.done {
            self.send(
                "error",
                r#"{"code":-32603,"message":"corral: no connected client answered this request"}"#,
            );
        }
    }
}

type Reply = Result<Box<RawValue>, RpcError>;

#[derive(Default)]
struct Pending {
    waiters: HashMap<u64, oneshot::Sender<Reply>, foldhash::fast::RandomState>,
    closed: Option<Arc<str>>,
}

enum Outgoing {
    Line(Vec<u8>),
    CloseStdin,
}

/// One JSON-RPC session with one child instance. Cheap to share (`Arc`), used
/// concurrently by every caller.
pub struct Connection {
    next_id: AtomicU64,
    pending: Mutex<Pending>,
    out: mpsc::UnboundedSender<Outgoing>,
    permits: Option<Semaphore>,
    /// Signalled when a request times out, so the owner can check liveness.
    timed_out: Notify,
    framing_reported: AtomicBool,
    /// Signalled by [`Connection::close`].
    closed_notify: Notify,
    me: std::sync::Weak<Connection>,
    /// The `_meta` object (JSON text) stamped on every request once the server was found
    /// to speak a stateless revision (2026-07-28): see [`Connection::stamp_requests`].
    meta: std::sync::OnceLock<Box<str>>,
    /// Flushes to the child's stdin that succeeded (whatever was queued is in the pipe).
    flushed: Arc<AtomicU64>,
    /// [`Connection::long_lived`] requests open: not counted as calls in flight.
    long_lived: AtomicU64,
}

/// How long a request that found the connection broken waits for the reason.
const CLOSE_SETTLE: Duration = Duration::from_secs(1);

impl Connection {
    /// A connection over the child's pipes, with its writer and reader: the caller runs
    /// both for the life of the instance (they end when the pipes close; see
    /// [`Instance::drain`](crate::instance::Instance)).
    pub fn new(
        stdin: impl AsyncWrite + Unpin + Send + 'static,
        stdout: impl AsyncRead + Unpin + Send + 'static,
        max_concurrency: Option<usize>,
        sink: Arc<dyn StdoutSink>,
    ) -> (
        Arc<Connection>,
        impl Future<Output = ()> + Send + 'static,
        impl Future<Output = ()> + Send + 'static,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let flushed = Arc::new(AtomicU64::new(0));
        let conn = Arc::new_cyclic(|me| Connection {
            flushed: flushed.clone(),
            me: me.clone(),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(Pending::default()),
            out: tx,
            permits: max_concurrency.map(Semaphore::new),
            timed_out: Notify::new(),
            framing_reported: AtomicBool::new(false),
            closed_notify: Notify::new(),
            meta: std::sync::OnceLock::new(),
            long_lived: AtomicU64::new(0),
        });
        let writer = write_loop(stdin, rx, flushed);
        let reader = read_loop(stdout, conn.clone(), sink);
        (conn, writer, reader)
    }

    /// [`Connection::new`] with its writer and reader spawned, for tests and tools that
    /// do not own an instance.
    pub fn start(
        stdin: impl AsyncWrite + Unpin + Send + 'static,
        stdout: impl AsyncRead + Unpin + Send + 'static,
        max_concurrency: Option<usize>,
        sink: Arc<dyn StdoutSink>,
    ) -> Arc<Connection> {
        let (conn, writer, reader) = Connection::new(stdin, stdout, max_concurrency, sink);
        tokio::spawn(writer);
        tokio::spawn(reader);
        conn
    }

    /// Sends a request and waits for its result, at most `timeout` (which includes the
    /// wait for a concurrency permit). `params` is JSON text: a [`RawValue`]'s, or JSON
    /// the caller built (it is sent as it is, not parsed again).
    pub async fn request(
        &self,
        method: &str,
        params: Option<&str>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, RpcError> {
        let len = params.map_or(0, str::len);
        self.request_with(method, len, timeout, |line| {
            if let Some(p) = params {
                line.push_str(r#","params":"#);
                push_single_line(line, p);
            }
        })
        .await
    }

    /// [`request`](Self::request) whose params are written straight into the request
    /// line by `write_params` (which appends `,"params":…` or nothing; `len` is a size
    /// hint): a large message is not copied once more on its way, and whatever the
    /// closure owns is freed as soon as the line is built.
    pub async fn request_with(
        &self,
        method: &str,
        len: usize,
        timeout: Duration,
        write_params: impl FnOnce(&mut String),
    ) -> Result<Box<RawValue>, RpcError> {
        self.request_inner(method, len, timeout, false, write_params)
            .await
    }

    /// A probe (`server/discover` before the era is known): a [`request`](Self::request)
    /// whose timeout is an answer, not a fault: the server gets no
    /// `notifications/cancelled` (a legacy server expects nothing before `initialize`)
    /// and no liveness check follows. A late answer is dropped.
    pub async fn probe(
        &self,
        method: &str,
        params: &str,
        timeout: Duration,
    ) -> Result<Box<RawValue>, RpcError> {
        self.request_inner(method, params.len(), timeout, true, |line| {
            line.push_str(r#","params":"#);
            push_single_line(line, params);
        })
        .await
    }

    /// A long-lived request (`subscriptions/listen`): it takes no concurrency permit —
    /// it would hold one for its whole life and starve the calls of a server with
    /// `max_concurrency` — and has no deadline, since it is answered only when the
    /// server ends it. Its notifications reach the [`StdoutSink`] like any other.
    /// Dropping the future withdraws it: the server gets `notifications/cancelled`,
    /// which is how a stdio client ends a listen.
    pub async fn long_lived(&self, method: &str, params: &str) -> Result<Box<RawValue>, RpcError> {
        struct Open<'a>(&'a AtomicU64);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let write = |line: &mut String| {
            line.push_str(r#","params":"#);
            push_single_line(line, params);
        };
        let (rx, mut guard) = self
            .send_request(method, 64 + params.len(), write, true)
            .await?;
        let _open = Open(&self.long_lived);
        let reply = rx.await;
        guard.done = true;
        match reply {
            Ok(reply) => reply,
            Err(_) => Err(self.closed_error_settled().await),
        }
    }

    async fn request_inner(
        &self,
        method: &str,
        len: usize,
        timeout: Duration,
        quiet: bool,
        write_params: impl FnOnce(&mut String),
    ) -> Result<Box<RawValue>, RpcError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timeout_err = || RpcError::Timeout {
            method: method.to_owned(),
            after: timeout,
        };
        let _permit = match &self.permits {
            Some(sem) => match tokio::time::timeout_at(deadline, sem.acquire()).await {
                Ok(Ok(p)) => Some(p),
                Ok(Err(_)) => return Err(self.closed_error()),
                Err(_) => return Err(timeout_err()),
            },
            None => None,
        };
        let (rx, mut guard) = self.send_request(method, len, write_params, false).await?;
        let id = guard.id;
        // (A parked call's clock is moved by its caller: see `patience`.)
        let result = crate::patience::wait(deadline, timeout, rx).await.ok_or(());
        guard.done = true;
        match result {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(self.closed_error_settled().await),
            Err(_) if quiet => {
                self.pending.lock().unwrap().waiters.remove(&id);
                Err(timeout_err())
            }
            Err(_) => {
                self.abandon(id, "timeout");
                self.timed_out.notify_one();
                Err(timeout_err())
            }
        }
    }

    /// Sends a request: a new id whose answer is waited for (counted as `long_lived`,
    /// outside [`Connection::in_flight`], when it is one), the line with `write_params`
    /// appending `,"params":…` and the stamp merged in. The answer's receiver, and the
    /// guard that abandons the request if the caller stops waiting before it says `done`.
    async fn send_request(
        &self,
        method: &str,
        len: usize,
        write_params: impl FnOnce(&mut String),
        long_lived: bool,
    ) -> Result<(oneshot::Receiver<Reply>, InFlight<'_>), RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap();
            if let Some(reason) = &pending.closed {
                return Err(RpcError::Closed(reason.clone()));
            }
            pending.waiters.insert(id, tx);
            if long_lived {
                self.long_lived.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut guard = InFlight {
            conn: self,
            id,
            done: false,
        };
        let mut line = String::with_capacity(64 + len);
        let _ = write!(line, r#"{{"jsonrpc":"2.0","id":{id},"method":"#);
        push_json_str(&mut line, method);
        let params_at = line.len();
        write_params(&mut line);
        if let Some(meta) = self.meta.get() {
            stamp_meta(&mut line, params_at, meta);
        }
        line.push_str("}\n");
        if self.out.send(Outgoing::Line(line.into_bytes())).is_err() {
            guard.done = true;
            self.pending.lock().unwrap().waiters.remove(&id);
            if long_lived {
                self.long_lived.fetch_sub(1, Ordering::Relaxed);
            }
            return Err(self.closed_error_settled().await);
        }
        Ok((rx, guard))
    }

    /// From now on every request carries `meta` (a JSON object's text) as its
    /// `params._meta`, merged into any `_meta` the caller's params already have (the
    /// caller's keys win, except `protocolVersion`, which is always ours: see
    /// `stamp_meta`). A modern (2026-07-28) server is
    /// stateless: the protocol version and the client's capabilities travel on each
    /// request. Set once, after the handshake chose the revision.
    pub fn stamp_requests(&self, meta: String) {
        let _ = self.meta.set(meta.into_boxed_str());
    }

    /// Whether the first message sent was written into the child's stdin (not just
    /// queued): the pipe held it while the child could still read it.
    pub fn first_written(&self) -> bool {
        self.flushed.load(Ordering::Acquire) > 0
    }

    /// Whether requests are stamped with a modern `_meta` (the server speaks 2026-07-28).
    pub fn is_stamped(&self) -> bool {
        self.meta.get().is_some()
    }

    /// Sends a notification (no response expected).
    pub fn notify(&self, method: &str, params: Option<&str>) {
        let mut line = String::from(r#"{"jsonrpc":"2.0","method":"#);
        push_json_str(&mut line, method);
        if let Some(p) = params {
            line.push_str(r#","params":"#);
            push_single_line(&mut line, p);
        }
        line.push_str("}\n");
        let _ = self.out.send(Outgoing::Line(line.into_bytes()));
    }

    /// Fails every pending and future request with `reason`.
    pub fn close(&self, reason: &str) {
        let waiters = {
            let mut pending = self.pending.lock().unwrap();
            if pending.closed.is_none() {
                pending.closed = Some(reason.into());
            }
            std::mem::take(&mut pending.waiters)
        };
        let reason: Arc<str> = reason.into();
        for (_, tx) in waiters {
            let _ = tx.send(Err(RpcError::Closed(reason.clone())));
        }
        if let Some(sem) = &self.permits {
            sem.close();
        }
        self.closed_notify.notify_waiters();
    }

    /// Closes the child's stdin (after everything already queued is written): the polite
    /// way to ask an MCP stdio server to exit.
    pub fn close_stdin(&self) {
        let _ = self.out.send(Outgoing::CloseStdin);
    }

    /// Resolves when some request has timed out since the last call.
    pub async fn timed_out(&self) {
        self.timed_out.notified().await
    }

    fn weak_self(&self) -> std::sync::Weak<Connection> {
        self.me.clone()
    }

    /// Number of requests waiting for an answer (a long-lived listen is not a call in
    /// flight).
    pub fn in_flight(&self) -> usize {
        let waiting = self.pending.lock().unwrap().waiters.len();
        waiting.saturating_sub(self.long_lived.load(Ordering::Relaxed) as usize)
    }

    fn closed_error(&self) -> RpcError {
        let reason = self.pending.lock().unwrap().closed.clone();
        RpcError::Closed(reason.unwrap_or_else(|| "connection closed".into()))
    }

    /// The reason the connection closed, once its owner says it ([`Connection::close`],
    /// with the exit status): a request that found the pipe to the server broken got
    /// there first, and "connection closed" would tell the caller less than "killed by
    /// signal 9". Waits at most [`CLOSE_SETTLE`].
    async fn closed_error_settled(&self) -> RpcError {
        let notified = self.closed_notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.pending.lock().unwrap().closed.is_none() {
            let _ = tokio::time::timeout(CLOSE_SETTLE, notified).await;
        }
        let reason = self.pending.lock().unwrap().closed.clone();
        RpcError::Closed(reason.unwrap_or_else(|| {
            "the server closed its end of the connection without exiting".into()
        }))
    }

    /// Forgets request `id` and tells the server we no longer want its answer.
    fn abandon(&self, id: u64, reason: &str) {
        let removed = self.pending.lock().unwrap().waiters.remove(&id).is_some();
        if removed {
            let params = format!(r#"{{"requestId":{id},"reason":"{reason}"}}"#);
            self.notify("notifications/cancelled", Some(&params));
        }
    }

    /// The pending request an unreadable answer with this raw id belongs to, if any.
    fn pending_id(&self, raw_id: &str) -> Option<u64> {
        let id = raw_id.parse::<u64>().ok()?;
        self.pending
            .lock()
            .unwrap()
            .waiters
            .contains_key(&id)
            .then_some(id)
    }

    /// An answer whose id we never issued: it belongs to the one request in flight, if
    /// there is exactly one (else nobody can tell which).
    fn sole_pending_for_stray(&self, raw_id: &str) -> Option<u64> {
        let issued = raw_id
            .parse::<u64>()
            .is_ok_and(|n| n > 0 && n < self.next_id.load(Ordering::Relaxed));
        if issued {
            return None; // An answer to a request given up on: dropped silently.
        }
        let pending = self.pending.lock().unwrap();
        let mut ids = pending.waiters.keys();
        match (ids.next(), ids.next()) {
            (Some(&id), None) => Some(id),
            _ => None,
        }
    }

    fn deliver(&self, id: u64, reply: Reply) -> bool {
        let waiter = self.pending.lock().unwrap().waiters.remove(&id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }
}

/// Sends `notifications/cancelled` if the caller's future is dropped before the answer.
struct InFlight<'a> {
    conn: &'a Connection,
    id: u64,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.conn
                .abandon(self.id, "request cancelled by the client");
        }
    }
}

/// The one `_meta` key the stamp always sets: the revision is the connection's, whatever
/// the caller's params say.
const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// Puts `"_meta":META` into the params that `line[at..]` holds (`,"params":{…}` or
/// nothing). The usual case — params without a `_meta` of their own — is a splice after
/// the object's `{`; params that have one are parsed and merged (an agent's call with a
/// progress token, or a 2026 agent's own `_meta`).
///
/// The merge: the stamp forces only `protocolVersion` (the revision this connection
/// negotiated); every other key the request's own `_meta` has wins — the agent's
/// `clientCapabilities` (what it can answer in an `input_required` round), `clientInfo`,
/// `logLevel`, `progressToken` — and the stamp fills in what is missing. A stateless
/// server must judge each request by what that request's client declared, not by
/// Corral's default.
fn stamp_meta(line: &mut String, at: usize, meta: &str) {
    let written = &line[at..];
    let Some(params) = written.strip_prefix(r#","params":"#) else {
        line.truncate(at);
        line.push_str(r#","params":{"_meta":"#);
        line.push_str(meta);
        line.push('}');
        return;
    };
    let trimmed = params.trim_start();
    if !trimmed.starts_with('{') {
        return; // Not an object (positional params): nothing we can add to; sent as is.
    }
    if !params.contains(r#""_meta""#) {
        let brace = at + r#","params":"#.len() + (params.len() - trimmed.len());
        let empty = trimmed[1..].trim_start().starts_with('}');
        let mut insert = String::with_capacity(meta.len() + 10);
        insert.push_str(r#""_meta":"#);
        insert.push_str(meta);
        if !empty {
            insert.push(',');
        }
        line.insert_str(brace + 1, &insert);
        return;
    }
    let (Ok(mut value), Ok(ours)) = (
        serde_json::from_str::<serde_json::Value>(params),
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(meta),
    ) else {
        return;
    };
    if let Some(obj) = value.as_object_mut() {
        let slot = obj
            .entry("_meta")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        match slot.as_object_mut() {
            Some(theirs) => {
                for (key, value) in ours {
                    if key == PROTOCOL_VERSION_KEY {
                        theirs.insert(key, value);
                    } else {
                        theirs.entry(key).or_insert(value);
                    }
                }
            }
            None => *slot = serde_json::Value::Object(ours),
        }
    }
    line.truncate(at);
    line.push_str(r#","params":"#);
    line.push_str(&value.to_string());
}

/// Appends `s` as a JSON string (quoted, escaped where needed), without going through
/// serde for the usual string that needs no escape.
pub fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(s).expect("strings serialize"));
    }
}

/// Appends raw JSON keeping it on one line: a newline in JSON text can only be
/// insignificant whitespace (strings cannot hold raw control characters), so it is
/// replaced by a space.
pub fn push_single_line(out: &mut String, json: &str) {
    // memchr, not `str::contains` with a char set: that walks char by char, and this
    // runs over every forwarded request's params.
    if memchr::memchr2(b'\n', b'\r', json.as_bytes()).is_some() {
        out.extend(
            json.chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
    } else {
        out.push_str(json);
    }
}

async fn write_loop(
    stdin: impl AsyncWrite + Unpin,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    flushed: Arc<AtomicU64>,
) {
    let mut w = BufWriter::with_capacity(64 * 1024, stdin);
    while let Some(msg) = rx.recv().await {
        let mut next = Some(msg);
        // Write everything already queued, then flush once: one syscall for a burst.
        while let Some(msg) = next.take() {
            match msg {
                Outgoing::Line(bytes) => {
                    if w.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Outgoing::CloseStdin => {
                    let _ = w.flush().await;
                    let _ = w.shutdown().await;
                    return;
                }
            }
            next = rx.try_recv().ok();
        }
        if w.flush().await.is_err() {
            return;
        }
        flushed.fetch_add(1, Ordering::Release);
    }
}

/// The envelope of any JSON-RPC message; everything else stays raw.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Deserialize)]
struct ErrorObject {
    code: i64,
    message: String,
    #[serde(default)]
    data: Option<Box<RawValue>>,
}

/// Reads the child's stdout to EOF, dispatching each message.
async fn read_loop(
    stdout: impl AsyncRead + Unpin,
    conn: Arc<Connection>,
    sink: Arc<dyn StdoutSink>,
) {
    use crate::lines::{LineRead, read_line_bounded};
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::with_capacity(4096);
    loop {
        // A large message's buffer is not kept for the connection's life.
        if line.capacity() > KEEP_BUFFER {
            line = Vec::with_capacity(4096);
        }
        line.clear();
        match read_line_bounded(&mut reader, &mut line, MAX_MESSAGE).await {
            Ok(LineRead::Eof) | Err(_) => break,
            Ok(LineRead::TooLong { len }) => {
                too_long(&conn, &line, len, &*sink);
                continue;
            }
            Ok(LineRead::Line) => {}
        }
        dispatch(&conn, &mut line, &*sink);
    }
}

/// Line buffers grown beyond this by a large message are given back after it.
const KEEP_BUFFER: usize = 1024 * 1024;

/// `n` bytes as MiB for messages: `64 MiB`, `200.5 MiB`.
fn mib(n: u64) -> String {
    let m = n as f64 / (1024.0 * 1024.0);
    if m.fract() == 0.0 {
        format!("{m:.0} MiB")
    } else {
        format!("{m:.1} MiB")
    }
}

/// An over-long stdout line, already discarded: the request it answers (its id is in
/// the head that was kept) fails at once; the line is reported as noise either way.
fn too_long(conn: &Connection, head: &[u8], len: u64, sink: &dyn StdoutSink) {
    if let Some(id) = answer_id(head).and_then(|id| conn.pending_id(id)) {
        conn.deliver(
            id,
            Err(RpcError::Unreadable(format!(
                "sent an answer of {}, over the {} limit on one message (it was discarded)",
                mib(len),
                mib(MAX_MESSAGE as u64)
            ))),
        );
    }
    sink.noise(&format!(
        "<discarded a {len}-byte stdout line: longer than {MAX_MESSAGE} bytes>"
    ));
}

/// The raw id of what looks like an answer (an id and no method), read from as much of
/// it as can be read.
fn answer_id(text: &[u8]) -> Option<&str> {
    let id = crate::lines::top_level_id(text)?;
    (crate::lines::top_level_member(text, b"method").is_none()).then_some(id)
}

/// A line that starts like a JSON object but does not parse: if it is an answer to a
/// pending request, that request fails at once with the reason; the line is reported as
/// noise either way.
fn unreadable(conn: &Connection, text: &[u8], sink: &dyn StdoutSink) {
    if let Some(id) = answer_id(text).and_then(|id| conn.pending_id(id)) {
        let why = match std::str::from_utf8(text) {
            Err(e) => format!(
                "sent an answer that is not valid UTF-8 (bad byte at offset {})",
                e.valid_up_to()
            ),
            Ok(t) => match serde_json::from_str::<serde::de::IgnoredAny>(t) {
                Err(e) => format!("sent an answer that is not valid JSON: {e}"),
                Ok(_) => "sent an answer that is not a JSON-RPC response".to_owned(),
            },
        };
        conn.deliver(id, Err(RpcError::Unreadable(why)));
    }
    act(conn, not_json(text), sink);
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// What one stdout line is: the pure half of the stdout reader, which [`dispatch`] acts
/// on. Borrowed from the line, so the hot path copies nothing it did not copy before.
#[derive(Debug)]
pub enum Decoded<'a> {
    /// Empty or whitespace only: skipped.
    Blank,
    /// An answer to request `id`: its result (raw JSON), or the error.
    Response {
        id: u64,
        reply: Result<&'a RawValue, RpcError>,
    },
    /// An answer whose id is not one we could have sent (not a number): it may fail the
    /// one request in flight; `shown` is the line for logs and events.
    StrayAnswer { id: &'a RawValue, shown: String },
    /// A line that starts like a JSON object but does not parse (bad UTF-8, bad JSON):
    /// if it answers a request in flight, that request fails with the reason.
    Unreadable(&'a [u8]),
    /// A request from the server (`ping` included), to be answered with `id`.
    Request {
        method: Cow<'a, str>,
        id: &'a RawValue,
        params: Option<&'a RawValue>,
    },
    /// A notification from the server.
    Notification {
        method: Cow<'a, str>,
        params: Option<&'a RawValue>,
    },
    /// A `Content-Length:` header: the server speaks LSP framing, not MCP's stdio.
    Framing,
    /// Not a JSON-RPC message for us: the line as shown in logs and events (lossy UTF-8,
    /// at most 1 KiB of it).
    Noise(String),
}

/// Classifies one stdout line as read (with or without its line end): the whole stdout
/// decoder but the reading and the acting, so it can be tested and fuzzed on its own.
pub fn decode_line(line: &[u8]) -> Decoded<'_> {
    let text = trim_line_end(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Blank;
    }
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return not_json(text);
    }
    // One UTF-8 check of the whole line, instead of one per string and per raw value;
    // bad bytes somewhere (say, in a member we ignore) are `from_slice`'s to judge.
    let parsed = match std::str::from_utf8(text) {
        Ok(t) => serde_json::from_str(t),
        Err(_) => serde_json::from_slice(text),
    };
    let env: Envelope<'_> = match parsed {
        Ok(env) => env,
        Err(_) => return Decoded::Unreadable(text),
    };
    match (env.method, env.id) {
        (None, Some(raw)) => {
            let Ok(id) = serde_json::from_str::<u64>(raw.get()) else {
                return Decoded::StrayAnswer {
                    id: raw,
                    shown: display_line(text),
                };
            };
            let reply = match (env.result, env.error) {
                (_, Some(e)) => Err(RpcError::Server {
                    code: e.code,
                    message: e.message,
                    data: e.data.map(|d| d.get().to_owned()),
                }),
                (Some(r), None) => Ok(r),
                (None, None) => Err(RpcError::Invalid {
                    method: format!("request {id}"),
                    detail: "response has neither result nor error".into(),
                }),
            };
            Decoded::Response { id, reply }
        }
        (Some(method), Some(id)) => Decoded::Request {
            method,
            id,
            params: env.params,
        },
        (Some(method), None) => Decoded::Notification {
            method,
            params: env.params,
        },
        (None, None) => Decoded::Noise(display_line(text)),
    }
}

/// Acts on one stdout line. An answer to one of our requests is delivered after the
/// line's buffer is given back if it was large, so a big result is not held twice while
/// its caller builds on it.
fn dispatch(conn: &Connection, line: &mut Vec<u8>, sink: &dyn StdoutSink) {
    let (id, reply) = match decode_line(line) {
        Decoded::Response { id, reply } => (id, reply.map(|r| r.to_owned())),
        other => return act(conn, other, sink),
    };
    if line.capacity() > KEEP_BUFFER {
        *line = Vec::new();
    }
    if !conn.deliver(id, reply) {
        stray_answer(conn, &id.to_string());
    }
}

/// Acts on every kind of line but an answer with a numeric id.
fn act(conn: &Connection, decoded: Decoded<'_>, sink: &dyn StdoutSink) {
    match decoded {
        Decoded::Blank => {}
        Decoded::Response { id, reply } => {
            if !conn.deliver(id, reply.map(|r| r.to_owned())) {
                stray_answer(conn, &id.to_string());
            }
        }
        Decoded::StrayAnswer { id, shown } => {
            stray_answer(conn, id.get());
            sink.noise(&shown);
        }
        Decoded::Unreadable(text) => unreadable(conn, text, sink),
        Decoded::Request { method, id, .. } if method == "ping" => {
            answer_server_request(conn, &method, id)
        }
        Decoded::Request { method, id, params } => {
            let request = ServerRequest {
                method: method.into_owned(),
                params: params.map(|p| p.to_owned()),
                responder: Responder {
                    conn: conn.weak_self(),
                    id: id.to_owned(),
                    done: false,
                },
            };
            if let Err(mut unhandled) = sink.request(request) {
                unhandled.responder.done = true;
                answer_server_request(conn, &unhandled.method, id);
            }
        }
        Decoded::Notification { method, params } => sink.notification(Notification {
            method: method.into_owned(),
            params: params.map(|p| p.to_owned()),
        }),
        Decoded::Framing => {
            if !conn.framing_reported.swap(true, Ordering::Relaxed) {
                sink.framing_mismatch();
            }
        }
        Decoded::Noise(shown) => sink.noise(&shown),
    }
}

/// An answer that matches no request in flight: if it has an id we never sent, it
/// fails the one request in flight (when there is exactly one); an answer to a request
/// we already gave up on is dropped silently.
fn stray_answer(conn: &Connection, raw_id: &str) {
    if let Some(only) = conn.sole_pending_for_stray(raw_id) {
        conn.deliver(
            only,
            Err(RpcError::Unreadable(format!(
                "sent an answer with id {}, which matches no request in flight (the one \
                 in flight has id {only})",
                display_line(raw_id.as_bytes())
            ))),
        );
    }
}

/// Requests from the server that nobody takes: `ping` is answered, everything else is
/// "method not found".
fn answer_server_request(conn: &Connection, method: &str, id: &RawValue) {
    let line = if method == "ping" {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{}}}}\n",
            id.get()
        )
    } else {
        let mut msg = String::new();
        push_json_str(
            &mut msg,
            &format!("method not supported by corral: {method}"),
        );
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32601,\"message\":{msg}}}}}\n",
            id.get()
        )
    };
    let _ = conn.out.send(Outgoing::Line(line.into_bytes()));
}

fn not_json(text: &[u8]) -> Decoded<'static> {
    let shown = display_line(text);
    if shown
        .get(..15)
        .is_some_and(|p| p.eq_ignore_ascii_case("content-length:"))
    {
        return Decoded::Framing;
    }
    Decoded::Noise(shown)
}

/// A stdout line made fit for logs and events: lossy UTF-8, at most 1 KiB.
fn display_line(text: &[u8]) -> String {
    const SHOWN: usize = 1024;
    let cut = text.len().min(SHOWN);
    let mut s = String::from_utf8_lossy(&text[..cut]).into_owned();
    if text.len() > SHOWN {
        s.push_str(crate::lines::TRUNCATION_MARKER);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamp_meta_adds_merges_and_creates_params() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        let stamp = |params: &str| {
            let mut line = format!("{{\"id\":1{params}");
            super::stamp_meta(&mut line, 7, meta);
            line.push('}');
            serde_json::from_str::<serde_json::Value>(&line).unwrap()["params"].clone()
        };
        let v = stamp("");
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        let v = stamp(r#","params":{}"#);
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        let v = stamp(r#","params":{"name":"echo","arguments":{"_meta":1}}"#);
        assert_eq!(v["name"], "echo");
        assert_eq!(v["arguments"]["_meta"], 1);
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        let v = stamp(r#","params":{"name":"x","_meta":{"progressToken":7}}"#);
        assert_eq!(v["_meta"]["progressToken"], 7);
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }

    #[test]
    fn stamp_meta_forces_only_the_version_and_keeps_the_requests_own_keys() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"corral"}}"#;
        let mut line = r#"{"id":1,"params":{"name":"x","requestState":"s\u00e9","_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/logLevel":"debug"}}"#.to_owned();
        super::stamp_meta(&mut line, 7, meta);
        line.push('}');
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let m = &v["params"]["_meta"];
        assert_eq!(m["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(
            m["io.modelcontextprotocol/clientCapabilities"],
            serde_json::json!({"elicitation": {}})
        );
        assert_eq!(m["io.modelcontextprotocol/logLevel"], "debug");
        assert_eq!(m["io.modelcontextprotocol/clientInfo"]["name"], "corral");
        assert_eq!(v["params"]["requestState"], "s\u{e9}");
    }

    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    #[derive(Default)]
    struct Recorder {
        noise: Mutex<Vec<String>>,
        framing: AtomicU64,
        notes: Mutex<Vec<String>>,
    }

    impl StdoutSink for Recorder {
        fn noise(&self, line: &str) {
            self.noise.lock().unwrap().push(line.to_owned());
        }
        fn framing_mismatch(&self) {
            self.framing.fetch_add(1, Ordering::Relaxed);
        }
        fn notification(&self, note: Notification) {
            self.notes.lock().unwrap().push(note.method);
        }
    }

    /// A fake peer over in-memory pipes: answers each request with its own id after
    /// writing whatever `before` lines it is given.
    async fn echo_peer(
        server_in: tokio::io::DuplexStream,
        mut server_out: tokio::io::DuplexStream,
        before: Vec<&'static str>,
    ) {
        let mut lines = tokio::io::BufReader::new(server_in).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let Some(id) = v.get("id") else { continue };
            for b in &before {
                server_out.write_all(b.as_bytes()).await.unwrap();
                server_out.write_all(b"\n").await.unwrap();
            }
            let method = v["method"].as_str().unwrap();
            let reply = if method == "hang" {
                continue;
            } else {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"m":"{method}"}}}}"#)
            };
            server_out.write_all(reply.as_bytes()).await.unwrap();
            server_out.write_all(b"\n").await.unwrap();
        }
    }

    fn pair(before: Vec<&'static str>) -> (Arc<Connection>, Arc<Recorder>) {
        let (client_w, server_r) = tokio::io::duplex(1 << 16);
        let (server_w, client_r) = tokio::io::duplex(1 << 16);
        tokio::spawn(echo_peer(server_r, server_w, before));
        let rec = Arc::new(Recorder::default());
        (
            Connection::start(client_w, client_r, None, rec.clone()),
            rec,
        )
    }

    #[tokio::test]
    async fn noise_lines_do_not_break_the_session() {
        let (conn, rec) = pair(vec!["Starting server...", "{\"not\":\"rpc\"}", "[1,2]"]);
        let r = conn
            .request("a", None, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(r.get(), r#"{"m":"a"}"#);
        assert_eq!(rec.noise.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn content_length_header_is_reported_once() {
        let (conn, rec) = pair(vec!["Content-Length: 42", ""]);
        conn.request("a", None, Duration::from_secs(5))
            .await
            .unwrap();
        conn.request("b", None, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(rec.framing.load(Ordering::Relaxed), 1);
        assert!(rec.noise.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn concurrent_requests_are_matched_by_id() {
        let (conn, _) = pair(vec![]);
        let calls = (0..50).map(|i| {
            let conn = conn.clone();
            async move {
                let m = format!("m{i}");
                let r = conn
                    .request(&m, None, Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(r.get(), format!(r#"{{"m":"{m}"}}"#));
            }
        });
        futures_join_all(calls).await;
        assert_eq!(conn.in_flight(), 0);
    }

    #[tokio::test]
    async fn timeout_is_bounded_and_close_fails_pending() {
        let (conn, _) = pair(vec![]);
        let err = conn
            .request("hang", None, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "no answer to hang within 50ms");
        assert_eq!(conn.in_flight(), 0);
        let c2 = conn.clone();
        let waiting =
            tokio::spawn(async move { c2.request("hang", None, Duration::from_secs(30)).await });
        while conn.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        conn.close("server 'x' exited with code 3");
        let err = waiting.await.unwrap().unwrap_err();
        assert_eq!(
            err,
            RpcError::Closed("server 'x' exited with code 3".into())
        );
        let err = conn
            .request("a", None, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(err, RpcError::Closed(_)));
    }

    #[tokio::test]
    async fn bad_bytes_in_an_ignored_member_do_not_lose_the_answer() {
        let (client_w, server_r) = tokio::io::duplex(1 << 16);
        let (mut server_w, client_r) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(server_r).lines();
            while let Ok(Some(_)) = lines.next_line().await {
                let reply =
                    b"{\"jsonrpc\":\"2.0\",\"x\":\"\xff\",\"id\":1,\"result\":{\"ok\":1}}\n";
                server_w.write_all(reply).await.unwrap();
            }
        });
        let rec = Arc::new(Recorder::default());
        let conn = Connection::start(client_w, client_r, None, rec.clone());
        let r = conn
            .request("a", None, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(r.get(), r#"{"ok":1}"#);
        assert!(rec.noise.lock().unwrap().is_empty());
    }

    /// Builds a peer's answer line to request `id`.
    type Answer = fn(u64) -> Vec<u8>;

    /// A peer that answers every request with `answer(id)`.
    fn bad_peer(answer: Answer) -> (Arc<Connection>, Arc<Recorder>) {
        let (client_w, server_r) = tokio::io::duplex(1 << 16);
        let (mut server_w, client_r) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(server_r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                let Some(id) = v["id"].as_u64() else { continue };
                server_w.write_all(&answer(id)).await.unwrap();
            }
        });
        let rec = Arc::new(Recorder::default());
        (
            Connection::start(client_w, client_r, None, rec.clone()),
            rec,
        )
    }

    #[tokio::test]
    async fn an_unreadable_answer_fails_its_request_at_once_with_the_reason() {
        let cases: [(Answer, &str); 3] = [
            (
                |id| {
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"a\":}}}}\n")
                        .into_bytes()
                },
                "not valid JSON",
            ),
            (
                |id| {
                    let mut l = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":""#).into_bytes();
                    l.extend_from_slice(b"\xff\"}\n");
                    l
                },
                "not valid UTF-8",
            ),
            (
                |_| b"{\"jsonrpc\":\"2.0\",\"id\":\"nope\",\"result\":{}}\n".to_vec(),
                "with id \"nope\", which matches no request in flight",
            ),
        ];
        for (answer, why) in cases {
            let (conn, rec) = bad_peer(answer);
            let err = conn
                .request("a", None, Duration::from_secs(30))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, RpcError::Unreadable(m) if m.contains(why)),
                "{err:?} should say {why:?}"
            );
            assert_eq!(rec.noise.lock().unwrap().len(), 1, "still logged as noise");
        }
    }

    #[test]
    fn multi_line_params_are_flattened() {
        let mut s = String::new();
        push_single_line(&mut s, "{\n  \"a\": \"x\\ny\"\r\n}");
        assert_eq!(s, "{   \"a\": \"x\\ny\"  }");
        let _: serde_json::Value = serde_json::from_str(&s).unwrap();
    }

    async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(
        futs: impl Iterator<Item = F>,
    ) {
        let handles: Vec<_> = futs.map(tokio::spawn).collect();
        for h in handles {
            h.await.unwrap();
        }
    }
}
