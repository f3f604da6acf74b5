//! The HTTP/1.1 server under Corral's endpoints: hyper connections, with the limits a
//! local daemon needs to survive any local process.
//!
//! hyper does the protocol (keep-alive, pipelining, strict framing: a `Content-Length`
//! must be digits, `chunked` must be the final coding, sizes cannot overflow). This module
//! adds what hyper leaves to its user:
//!
//! * **A connection cap.** Past [`Limits::max_connections`] a new connection gets `503`
//!   at once and is closed, so idle connections cannot use up the daemon's descriptors.
//!   The cap counts descriptors, and it holds for upgraded connections too: a
//!   connection's slot (a semaphore permit) is owned by the IO object hyper serves, and
//!   hyper hands that very object to whoever takes the upgrade (`hyper::upgrade::on`),
//!   so the slot is held until the upgraded connection is dropped, whatever task holds
//!   it. A `101` response takes a second slot for the connection, for the descriptor of
//!   its other end (the dev proxy's connection to its target); when none is left the
//!   `101` becomes a `503` and nothing is upgraded. [`splice`] copies between the two
//!   ends and closes both after [`Limits::upgraded_idle_timeout`] without a byte.
//!   Each listener's cap is its own; a [`Budget`] is shared by every listener made with
//!   [`Limits::within_fd_limit`] (the MCP endpoint and every dev proxy of a daemon), so
//!   together they stay within a quarter of the open-files limit too.
//! * **Timeouts.** A request head must arrive within [`Limits::header_timeout`]; the same
//!   timer runs while a keep-alive connection waits for its next request, so an idle or
//!   slowloris connection is closed. Bodies are read by the handler with its own limit
//!   and deadline ([`read_body`]).
//! * **Accept errors backed off.** When `accept` fails for want of descriptors (EMFILE,
//!   ENFILE) or memory, the loop sleeps (5 ms doubling to 1 s) instead of spinning on a
//!   socket that stays readable.
//! * **A request-head limit, exact.** A head whose request line and headers take more
//!   than [`Limits::max_head`] bytes, counted as `METHOD SP TARGET SP HTTP/1.1 CRLF`
//!   plus `name: value CRLF` per header plus the final `CRLF` (the canonical form:
//!   optional whitespace around a value is not counted), gets `431` and the connection
//!   is closed. hyper's own read buffer limit (`max_buf_size`, set a little above) is
//!   not a head limit by itself: it bounds what hyper buffers, it lets heads well over
//!   it through, and past it hyper answers `431` itself and closes.
//! * `TCP_NODELAY` on every connection: without it a response waits out the peer's
//!   delayed ACK (44 ms per call, measured; ARCHITECTURE.md "Performance").
//!
//! The handler runs inline in the connection's task (no task per request), and a client
//! that closes its connection while its request runs drops the handler's future, which
//! cancels whatever the request started.

pub mod challenge;
mod peer;
pub mod sse;

pub use peer::{PeerUser, peer_user};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// What one listener allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most; the next one gets `503` and is closed.
    pub max_connections: usize,
    /// Time for a request head to arrive, and for an idle keep-alive connection to send
    /// its next request.
    pub header_timeout: Duration,
    /// Largest request head (request line and headers, counted as the module docs
    /// say); beyond it, `431`.
    pub max_head: usize,
    /// Time for a whole request body to arrive once its head is in ([`read_body`]).
    pub body_timeout: Duration,
    /// An upgraded connection (WebSocket) that carries no byte either way for this
    /// long is closed ([`splice`]).
    pub upgraded_idle_timeout: Duration,
    /// Connection slots shared with the other listeners of the process, taken besides
    /// the listener's own: `max_connections` caps one listener, the budget all of them,
    /// so the MCP endpoint and any number of dev proxies together cannot take the
    /// descriptors the control socket and the children need.
    pub budget: Option<Budget>,
}

/// Connection slots several listeners share ([`Limits::budget`]).
#[derive(Clone)]
pub struct Budget(Arc<Semaphore>);

impl Budget {
    pub fn new(slots: usize) -> Budget {
        Budget(Arc::new(Semaphore::new(slots)))
    }

    /// The process's budget: a quarter of its open-files limit (at least 4, at most
    /// 4096) when first asked for (after the daemon raised the soft limit).
    pub fn process() -> Budget {
        static PROCESS: std::sync::OnceLock<Budget> = std::sync::OnceLock::new();
        PROCESS
            .get_or_init(|| Budget::new((open_files_limit() / 4).clamp(4, 4096) as usize))
            .clone()
    }

    /// Slots free now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Budget({} free)", self.available())
    }
}

impl PartialEq for Budget {
    fn eq(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Budget {}

/// This process's soft open-files limit (1024 when it cannot be read).
fn open_files_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct passed.
    match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } {
        0 => lim.rlim_cur,
        _ => 1024,
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 512,
            header_timeout: Duration::from_secs(30),
            max_head: 64 * 1024,
            body_timeout: Duration::from_secs(30),
            upgraded_idle_timeout: Duration::from_secs(600),
            budget: None,
        }
    }
}

impl Limits {
    /// The defaults, with the connection cap at most a quarter of this process's
    /// open-files limit, and that quarter also the [`Budget::process`] every listener
    /// made this way shares: HTTP connections, however many listeners, can then never
    /// take the descriptors the daemon needs for its children, its agents and its
    /// control socket.
    pub fn within_fd_limit() -> Limits {
        let defaults = Limits::default();
        Limits {
            max_connections: (open_files_limit() / 4).clamp(4, defaults.max_connections as u64)
                as usize,
            budget: Some(Budget::process()),
            ..defaults
        }
    }
}

/// A response body: whole, or a stream of chunks (server-sent events) that ends when
/// its sender is dropped: unbounded, or bounded (a sender waits while the client
/// reads slowly).
pub enum Body {
    Full(Option<Bytes>),
    Stream(mpsc::UnboundedReceiver<Bytes>),
    Bounded(mpsc::Receiver<Bytes>),
}

impl Body {
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        let bytes = bytes.into();
        Body::Full((!bytes.is_empty()).then_some(bytes))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(rx) => rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b)))),
            Body::Bounded(rx) => rx.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream(_) | Body::Bounded(_) => SizeHint::default(),
        }
    }
}

/// Fills `buf` from `/dev/urandom`.
pub fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/urandom").expect("open /dev/urandom");
    f.read_exact(buf).expect("read /dev/urandom");
}

/// A new secret for a bearer token or a key (256 bits, hex).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    random_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether secret `a` is `b`, in time that does not depend on where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `text` made safe inside HTML text and attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The peer of the connection a request came on: a request extension [`serve`] sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr(pub std::net::SocketAddr);

/// Accepts connections on `listener` and serves each with `handler` until `shutdown`
/// resolves; connections still open then are left to finish on their own. Each request
/// carries its connection's peer as a [`RemoteAddr`] extension.
pub async fn serve<H, F, B>(
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::pin!(shutdown);
    let mut permits = vec![Arc::new(Semaphore::new(limits.max_connections))];
    permits.extend(limits.budget.as_ref().map(|b| b.0.clone()));
    let permits: Arc<[Arc<Semaphore>]> = permits.into();
    let mut backoff = AcceptBackoff::new("HTTP");
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    backoff.reset();
                    (stream, peer)
                }
                Err(e) => {
                    backoff.wait(&e).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let slot = Arc::new(Slot {
            permits: permits.clone(),
            held: std::sync::Mutex::new(Vec::new()),
        });
        if !slot.take_another() {
            tokio::spawn(refuse_busy(stream));
            continue;
        }
        let _ = stream.set_nodelay(true);
        let io = Slotted {
            io: stream,
            _slot: slot.clone(),
        };
        let handler = handler.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let handler = move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(RemoteAddr(peer));
                handler(req)
            };
            serve_io(io, &limits, handler, Some(slot)).await;
        });
    }
}

/// Serves one connection on `io` with `handler` until it closes: what [`serve`] runs
/// for each accepted connection (the cap aside), for any byte stream. Upgrades
/// (`101 Switching Protocols`, e.g. WebSocket through the dev proxy) are served: the
/// handler takes the request's upgrade with `hyper::upgrade::on`.
pub async fn serve_connection<IO, H, F, B>(io: IO, limits: &Limits, handler: H)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_io(io, limits, handler, None).await
}

/// [`serve_connection`], with the connection's [`Slot`] when it is counted: a `101`
/// takes a second permit from it.
async fn serve_io<IO, H, F, B>(io: IO, limits: &Limits, handler: H, slot: Option<Arc<Slot>>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let max_head = limits.max_head;
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let too_large = head_size(&req) > max_head;
        let response = (!too_large).then(|| handler(req));
        let slot = slot.clone();
        async move {
            let Some(response) = response else {
                return Ok::<_, Infallible>(refusal(
                    hyper::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "request head too large\n",
                ));
            };
            let response = response.await;
            if response.status() == hyper::StatusCode::SWITCHING_PROTOCOLS
                && let Some(slot) = slot
                && !slot.take_another()
            {
                // Not upgraded: the handler's ends of the upgrade fail and close.
                return Ok(refusal(
                    hyper::StatusCode::SERVICE_UNAVAILABLE,
                    "too many open connections; retry soon\n",
                ));
            }
            Ok(response.map(Answer::Handler))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // What hyper buffers while it reads a head: above the head limit (enforced
        // exactly in the service), so that every head within it reaches the service.
        .max_buf_size((max_head + max_head / 4).max(8192))
        .keep_alive(true)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .with_upgrades()
        .await;
}

/// The size of a request's head in its canonical form: `METHOD SP TARGET SP
/// HTTP/1.1 CRLF`, `name: value CRLF` per header, and the final `CRLF`.
fn head_size(req: &Request<Incoming>) -> usize {
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().to_string().len(), |p| p.as_str().len());
    let line = req.method().as_str().len() + 1 + target + 1 + "HTTP/1.1\r\n".len();
    let headers: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 2 + value.len() + 2)
        .sum();
    line + headers + 2
}

/// A short plain-text refusal that closes the connection.
fn refusal<B>(status: hyper::StatusCode, text: &'static str) -> Response<Answer<B>> {
    let mut resp = Response::new(Answer::Refusal(Body::full(text)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    h.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    resp
}

/// A response body: the handler's, or a refusal of [`serve_io`]'s own.
enum Answer<B> {
    Handler(B),
    Refusal(Body),
}

impl<B: hyper::body::Body<Data = Bytes>> hyper::body::Body for Answer<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        // SAFETY: a structural projection: the variant's field is never moved out of
        // the pinned `Answer`, and `Answer` has no `Drop` or `Unpin` impl of its own.
        match unsafe { self.get_unchecked_mut() } {
            Answer::Handler(b) => unsafe { Pin::new_unchecked(b) }.poll_frame(cx),
            Answer::Refusal(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(|never| match never {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Handler(b) => b.is_end_stream(),
            Answer::Refusal(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Handler(b) => b.size_hint(),
            Answer::Refusal(b) => b.size_hint(),
        }
    }
}

/// The permits one connection of [`serve`] holds, of its listener and of the shared
/// budget: one of each while it is open, a second once it is upgraded. Dropped
/// (released) with the last of the connection's IO and service.
struct Slot {
    permits: Arc<[Arc<Semaphore>]>,
    held: std::sync::Mutex<Vec<OwnedSemaphorePermit>>,
}

impl Slot {
    /// Takes one more permit of each for the connection; `false` (and nothing taken)
    /// when one of them has none left.
    fn take_another(&self) -> bool {
        let taken: Option<Vec<OwnedSemaphorePermit>> = self
            .permits
            .iter()
            .map(|p| p.clone().try_acquire_owned().ok())
            .collect();
        match taken {
            Some(taken) => {
                self.held
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(taken);
                true
            }
            None => false,
        }
    }
}

/// A connection's IO that holds its [`Slot`]: hyper hands this object over on an
/// upgrade, so the slot lives as long as the upgraded connection.
struct Slotted<IO> {
    io: IO,
    _slot: Arc<Slot>,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Slotted<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Slotted<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Copies bytes both ways between two upgraded connections until either closes, an
/// error, or `idle` passes without a byte either way; then both are dropped (closed).
pub async fn splice<A, B>(a: A, b: B, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let last = std::sync::atomic::AtomicU64::new(0);
    let start = tokio::time::Instant::now();
    let (mut a, mut b) = (
        Active {
            io: a,
            last: &last,
            start,
        },
        Active {
            io: b,
            last: &last,
            start,
        },
    );
    let watchdog = async {
        loop {
            let since = Duration::from_millis(last.load(std::sync::atomic::Ordering::Relaxed));
            let deadline = start + since + idle;
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
        _ = watchdog => {}
    }
}

/// An IO that notes when bytes last moved (milliseconds since `start`).
struct Active<'a, IO> {
    io: IO,
    last: &'a std::sync::atomic::AtomicU64,
    start: tokio::time::Instant,
}

impl<IO> Active<'_, IO> {
    fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last
            .fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Active<'_, IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.touch();
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Active<'_, IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.touch();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Answers a connection over the cap with `503` and closes it (bounded in time, so a
/// peer that does not read cannot hold the task).
async fn refuse_busy(mut stream: TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\
        content-type: text/plain\r\ncontent-length: 38\r\nconnection: close\r\n\r\n\
        too many open connections; retry soon\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(BUSY)).await;
}

/// Sleeps after an `accept` error that will repeat at once (no descriptors, no memory)
/// instead of spinning on a listener that stays readable; errors that concern only the
/// one connection (it was reset before we took it) do not wait. For every accept loop.
pub struct AcceptBackoff {
    what: &'static str,
    delay: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    /// `what` names the listener in the one line logged when backing off starts.
    pub fn new(what: &'static str) -> AcceptBackoff {
        AcceptBackoff { what, delay: None }
    }

    /// After a successful `accept`.
    pub fn reset(&mut self) {
        self.delay = None;
    }

    /// After a failed `accept`.
    pub async fn wait(&mut self, e: &std::io::Error) {
        if !is_resource_error(e) {
            return;
        }
        let delay = self.delay.map_or(Self::FIRST, |d| (d * 2).min(Self::MAX));
        if self.delay.is_none() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "corral: cannot accept {} connections ({e}); backing off until it can",
                self.what
            );
        }
        self.delay = Some(delay);
        tokio::time::sleep(delay).await;
    }
}

/// Errors that say the process (or system) is out of something, not that one connection
/// went wrong.
pub fn is_resource_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Why a request body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Longer than the limit (checked against `Content-Length` before reading, then
    /// while reading).
    TooLarge,
    /// Not complete within the deadline.
    TimedOut,
    /// The client went away, or the framing broke.
    Broken,
}

/// Reads a whole request body of at most `limit` bytes within `deadline`. Call it only
/// after the request was authorized: reading is what sends `100 Continue`.
pub async fn read_body(
    body: Incoming,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, BodyError> {
    use hyper::body::Body as _;
    if body.size_hint().lower() > limit as u64 {
        return Err(BodyError::TooLarge);
    }
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(deadline, limited.collect()).await {
        Err(_) => Err(BodyError::TimedOut),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Ok(Err(_)) => Err(BodyError::Broken),
    }
}
