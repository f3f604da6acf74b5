//! The HTTP/1.1 server under `/mcp`: one connection, requests in order, on `httparse`.
//!
//! It does what the MCP endpoint needs and no more, which on a forwarded call costs a
//! fraction of a general-purpose server (BENCHMARKS.md, "HTTP/1.1 layer"):
//!
//! * keep-alive (HTTP/1.1 by default, HTTP/1.0 on `Connection: keep-alive`), pipelined
//!   requests answered in order;
//! * request bodies by `Content-Length` or `Transfer-Encoding: chunked`, up to a limit
//!   (`413` beyond it); `Expect: 100-continue` is answered before the body is read;
//! * responses with a whole body (`Content-Length`) or a stream of chunks
//!   (`Transfer-Encoding: chunked`; close-delimited for HTTP/1.0), for SSE;
//! * a client that closes its connection while its request is running cancels it: the
//!   handler's future is dropped, exactly as when the request is abandoned in any other
//!   way;
//! * malformed requests get `400` (`431` for an oversized head, `501` for a transfer
//!   coding other than chunked) and the connection is closed, since the framing of what
//!   follows cannot be trusted.

use bytes::{Buf, Bytes, BytesMut};
use std::future::Future;
use std::io::Write as _;
use std::ops::Range;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Largest request head (request line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// Most headers in one request.
const MAX_HEADERS: usize = 64;
/// The read buffer's usual size; one grown for a large body is dropped after it.
const READ_BUF: usize = 8 * 1024;
/// A whole body up to this size goes out in the same write as the head.
const COALESCE_BODY: usize = 16 * 1024;

/// The request methods the endpoint tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
    Other,
}

/// One request: its head (kept as received) and its whole body.
#[derive(Debug)]
pub struct Request {
    head: Bytes,
    method: Method,
    /// `HEAD`: the response goes out without its body.
    head_only: bool,
    path: Range<usize>,
    headers: Vec<(Range<usize>, Range<usize>)>,
    /// For each of [`KNOWN`], the index in `headers` of its first occurrence, plus one.
    known: [u8; KNOWN.len()],
    pub body: Bytes,
}

/// Headers looked up on every request: found once, while the head is parsed.
const KNOWN: [&str; 10] = [
    "host",
    "origin",
    "authorization",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "connection",
    "content-length",
    "transfer-encoding",
    "expect",
];

impl Request {
    pub fn method(&self) -> Method {
        self.method
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        let target = std::str::from_utf8(&self.head[self.path.clone()]).unwrap_or("");
        // An absolute-form target (`http://host/mcp`) names the path after the authority.
        let target = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        target.split(['?', '#']).next().unwrap_or("")
    }

    /// The first value of header `name` (ASCII case-insensitive), if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        let value = match KNOWN.iter().position(|k| *k == name) {
            Some(k) => {
                let i = usize::from(self.known[k]).checked_sub(1)?;
                &self.headers[i].1
            }
            None => {
                let (_, v) = self
                    .headers
                    .iter()
                    .find(|(n, _)| self.head[n.clone()].eq_ignore_ascii_case(name.as_bytes()))?;
                v
            }
        };
        std::str::from_utf8(&self.head[value.clone()]).ok()
    }

    /// Every value of header `name` (one of [`KNOWN`]), in order.
    fn header_bytes<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        let first = KNOWN
            .iter()
            .position(|k| *k == name)
            .map_or(0, |k| usize::from(self.known[k]));
        // Absent (the usual case for these): nothing to scan.
        let from = if first == 0 {
            self.headers.len()
        } else {
            first - 1
        };
        self.headers[from..]
            .iter()
            .filter(move |(n, _)| self.head[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| &self.head[v.clone()])
    }
}

/// A response body: whole, or a stream of pieces that ends when the sender is dropped.
pub enum Body {
    Full(Bytes),
    Stream(mpsc::UnboundedReceiver<Bytes>),
}

/// One response.
pub struct Response {
    pub status: u16,
    headers: Vec<(&'static str, String)>,
    pub body: Body,
}

impl Response {
    pub fn new(status: u16, body: Body) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// Adds a header (names are written as given; values must be valid header text).
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

/// Why a connection stops reading requests.
enum Stop {
    /// The peer closed or the socket failed: nothing more to say.
    Gone,
    /// A broken request: answer with this status and message, then close.
    Reject(u16, &'static str),
}

/// Serves requests on `io` with `handler` until the peer closes the connection, a
/// request is malformed, or a response ends it. `reject` words the body of an error
/// response the layer makes itself (status, message).
pub async fn serve_connection<IO, H, F>(
    mut io: IO,
    max_body: usize,
    handler: H,
    reject: fn(u16, &str) -> Response,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
    H: Fn(Request) -> F,
    F: Future<Output = Response>,
{
    let mut buf = BytesMut::with_capacity(READ_BUF);
    let mut out = Vec::with_capacity(1024);
    loop {
        // Memory taken by one large request or response is not kept for the next.
        if buf.is_empty() && buf.capacity() > 8 * READ_BUF {
            buf = BytesMut::with_capacity(READ_BUF);
        }
        if out.capacity() > 8 * READ_BUF {
            out = Vec::with_capacity(1024);
        }
        let (req, keep_alive, http10) = match read_request(&mut io, &mut buf, max_body).await {
            Ok(r) => r,
            Err(Stop::Gone) => return,
            Err(Stop::Reject(status, why)) => {
                let resp = reject(status, why);
                let _ = write_response(&mut io, &mut out, resp, false, false).await;
                return;
            }
        };
        let head_only = req.head_only;
        // Run the request, watching the socket: EOF means the client gave up on it.
        let fut = handler(req);
        tokio::pin!(fut);
        let mut peer_open = true;
        let resp = loop {
            tokio::select! {
                resp = &mut fut => break resp,
                n = read_more(&mut io, &mut buf), if peer_open => match n {
                    // Closed (or broken) while its request runs: drop the request.
                    Ok(0) | Err(_) => return,
                    // A pipelined request: kept for later. Stop reading past the limit.
                    Ok(_) => peer_open = buf.len() < MAX_HEAD + max_body,
                },
            }
        };
        // A response to HEAD has no body (the endpoint answers HEAD with 405 anyway).
        let resp = if head_only {
            Response {
                body: Body::Full(Bytes::new()),
                ..resp
            }
        } else {
            resp
        };
        match write_response(&mut io, &mut out, resp, keep_alive, http10).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
    }
}

/// Reads more bytes into `buf`; `Ok(0)` at EOF.
async fn read_more<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_BUF);
    }
    io.read_buf(buf).await
}

/// Reads one whole request: (request, keep the connection open after it, HTTP/1.0).
async fn read_request<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    max_body: usize,
) -> Result<(Request, bool, bool), Stop> {
    // The head.
    let (head_len, method, head_only, path, version, headers, known) = loop {
        if !buf.is_empty() {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Request::new(&mut slots);
            match parsed.parse(buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let base = buf.as_ptr() as usize;
                    let range = |s: &[u8]| {
                        let start = s.as_ptr() as usize - base;
                        start..start + s.len()
                    };
                    let head_only = parsed.method == Some("HEAD");
                    let method = match parsed.method.unwrap_or("") {
                        "GET" => Method::Get,
                        "POST" => Method::Post,
                        "DELETE" => Method::Delete,
                        _ => Method::Other,
                    };
                    let path = range(parsed.path.unwrap_or("").as_bytes());
                    let headers = parsed
                        .headers
                        .iter()
                        .map(|h| (range(h.name.as_bytes()), range(h.value)))
                        .collect::<Vec<_>>();
                    let mut known = [0u8; KNOWN.len()];
                    for (i, h) in parsed.headers.iter().enumerate() {
                        let name = h.name.as_bytes();
                        if let Some(k) = KNOWN.iter().position(|k| {
                            k.len() == name.len() && name.eq_ignore_ascii_case(k.as_bytes())
                        }) && known[k] == 0
                        {
                            // At most 64 headers: the index fits.
                            known[k] = i as u8 + 1;
                        }
                    }
                    let version = parsed.version.unwrap_or(1);
                    break (len, method, head_only, path, version, headers, known);
                }
                Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                    return Err(Stop::Reject(431, "request head larger than 64 KiB"));
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(Stop::Reject(431, "more than 64 request headers"));
                }
                Err(_) => return Err(Stop::Reject(400, "malformed HTTP request")),
            }
        }
        match read_more(io, buf).await {
            Ok(0) | Err(_) => return Err(Stop::Gone),
            Ok(_) => {}
        }
    };
    let head = buf.split_to(head_len).freeze();
    let mut req = Request {
        head,
        method,
        head_only,
        path,
        headers,
        known,
        body: Bytes::new(),
    };
    let http10 = version == 0;
    let connection = req.header("connection").unwrap_or("");
    let has_token = |t: &str| {
        connection
            .split(',')
            .any(|c| c.trim().eq_ignore_ascii_case(t))
    };
    let keep_alive = if http10 {
        has_token("keep-alive")
    } else {
        !has_token("close")
    };

    // The body's framing (RFC 9112 §6): chunked, or one valid Content-Length, or none.
    let chunked = match req.header_bytes("transfer-encoding").last() {
        None => false,
        Some(te) if te.trim_ascii().eq_ignore_ascii_case(b"chunked") => true,
        Some(_) => {
            return Err(Stop::Reject(
                501,
                "only the chunked transfer coding is supported",
            ));
        }
    };
    let lengths: Vec<&[u8]> = req.header_bytes("content-length").collect();
    if chunked && !lengths.is_empty() {
        return Err(Stop::Reject(
            400,
            "both Transfer-Encoding and Content-Length",
        ));
    }
    let length = match lengths.as_slice() {
        [] => None,
        // One value, or the same value repeated (RFC 9112 §6.3 allows that).
        [first, rest @ ..] if rest.iter().all(|l| l == first) => Some(
            std::str::from_utf8(first)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(Stop::Reject(400, "invalid Content-Length"))?,
        ),
        _ => return Err(Stop::Reject(400, "conflicting Content-Length headers")),
    };
    if length.is_some_and(|n| n > max_body as u64) {
        return Err(Stop::Reject(
            413,
            "request body too large (the limit is 64 MiB)",
        ));
    }
    let expects_body = chunked || length.is_some_and(|n| n > 0);
    if expects_body
        && req
            .header("expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        && buf.is_empty()
        && !http10
    {
        io.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|_| Stop::Gone)?;
    }
    if chunked {
        req.body = read_chunked(io, buf, max_body).await?;
    } else if let Some(n) = length {
        let n = n as usize;
        // Room for the whole body at once: no regrowth (and copy) per read.
        if buf.len() < n {
            buf.reserve(n - buf.len() + 1024);
        }
        while buf.len() < n {
            match read_more(io, buf).await {
                Ok(0) | Err(_) => return Err(Stop::Gone),
                Ok(_) => {}
            }
        }
        req.body = buf.split_to(n).freeze();
    }
    Ok((req, keep_alive, http10))
}

/// Decodes a chunked body (extensions and trailers are read and ignored).
async fn read_chunked<IO: AsyncRead + Unpin>(
    io: &mut IO,
    buf: &mut BytesMut,
    max_body: usize,
) -> Result<Bytes, Stop> {
    let mut body = BytesMut::new();
    loop {
        // The size line.
        let line = read_line(io, buf).await?;
        let size_text = line.split(|&b| b == b';').next().unwrap_or(&[]);
        let size = std::str::from_utf8(size_text)
            .ok()
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= 16)
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or(Stop::Reject(400, "invalid chunk size"))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(io, buf).await?.is_empty() {}
            return Ok(body.freeze());
        }
        if body.len() + size > max_body {
            return Err(Stop::Reject(
                413,
                "request body too large (the limit is 64 MiB)",
            ));
        }
        while buf.len() < size + 2 {
            match read_more(io, buf).await {
                Ok(0) | Err(_) => return Err(Stop::Gone),
                Ok(_) => {}
            }
        }
        body.extend_from_slice(&buf[..size]);
        if &buf[size..size + 2] != b"\r\n" {
            return Err(Stop::Reject(400, "chunk not followed by CRLF"));
        }
        buf.advance(size + 2);
    }
}

/// One CRLF-terminated line of a chunked body, without the CRLF.
async fn read_line<IO: AsyncRead + Unpin>(io: &mut IO, buf: &mut BytesMut) -> Result<Bytes, Stop> {
    loop {
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = buf.split_to(i).freeze();
            buf.advance(2);
            return Ok(line);
        }
        if buf.len() > 4096 {
            return Err(Stop::Reject(400, "chunk header line too long"));
        }
        match read_more(io, buf).await {
            Ok(0) | Err(_) => return Err(Stop::Gone),
            Ok(_) => {}
        }
    }
}

/// Writes `resp`; `Ok(true)` if the connection stays open for another request.
async fn write_response<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
    out: &mut Vec<u8>,
    resp: Response,
    keep_alive: bool,
    http10: bool,
) -> std::io::Result<bool> {
    out.clear();
    out.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
    let _ = write!(out, "{}", resp.status);
    out.push(b' ');
    out.extend_from_slice(reason(resp.status).as_bytes());
    out.extend_from_slice(b"\r\ndate: ");
    date::now(out);
    out.extend_from_slice(b"\r\n");
    for (name, value) in &resp.headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    match resp.body {
        Body::Full(body) => {
            out.extend_from_slice(b"content-length: ");
            let _ = write!(out, "{}", body.len());
            out.extend_from_slice(b"\r\n");
            if !keep_alive {
                out.extend_from_slice(b"connection: close\r\n");
            } else if http10 {
                out.extend_from_slice(b"connection: keep-alive\r\n");
            }
            out.extend_from_slice(b"\r\n");
            if body.len() <= COALESCE_BODY {
                out.extend_from_slice(&body);
                io.write_all(out).await?;
            } else {
                io.write_all(out).await?;
                io.write_all(&body).await?;
            }
            Ok(keep_alive)
        }
        Body::Stream(mut rx) => {
            // HTTP/1.0 has no chunks: the stream ends with the connection.
            let chunked = !http10;
            if chunked {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            }
            if !keep_alive || !chunked {
                out.extend_from_slice(b"connection: close\r\n");
            }
            out.extend_from_slice(b"\r\n");
            io.write_all(out).await?;
            let mut probe = [0u8; 1];
            let mut peer_open = true;
            loop {
                tokio::select! {
                    piece = rx.recv() => match piece {
                        Some(p) => {
                            out.clear();
                            push_piece(out, &p, chunked);
                            // Everything already queued goes in the same write.
                            while let Ok(p) = rx.try_recv() {
                                push_piece(out, &p, chunked);
                            }
                            io.write_all(out).await?;
                        }
                        None => break,
                    },
                    // A client does not send while it reads a stream; a read that ends
                    // is the client leaving (or a pipelined request, which would need
                    // the stream to end first: the connection is closed after it).
                    n = io.read(&mut probe), if peer_open => match n {
                        Ok(0) | Err(_) => return Ok(false),
                        Ok(_) => peer_open = false,
                    },
                }
            }
            if chunked {
                io.write_all(b"0\r\n\r\n").await?;
            }
            Ok(keep_alive && chunked && peer_open)
        }
    }
}

/// One piece of a streamed body: a chunk, or (HTTP/1.0) the bytes as they are.
fn push_piece(out: &mut Vec<u8>, piece: &[u8], chunked: bool) {
    if chunked {
        let _ = write!(out, "{:x}\r\n", piece.len());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(piece);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        _ => "",
    }
}

/// The `Date` header's value, formatted once per second.
mod date {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        static CACHE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }

    pub fn now(out: &mut Vec<u8>) {
        let now = SystemTime::now();
        let secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.0 != secs {
                *c = (secs, httpdate::fmt_http_date(now));
            }
            out.extend_from_slice(c.1.as_bytes());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::net::{TcpListener, TcpStream};

    fn reject(status: u16, why: &str) -> Response {
        Response::new(status, Body::Full(Bytes::from(why.to_owned())))
    }

    /// A server on 127.0.0.1 whose handler echoes method, path, a header and the body.
    async fn echo_server(max_body: usize) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                tokio::spawn(serve_connection(
                    s,
                    max_body,
                    |req: Request| async move {
                        let text = format!(
                            "{:?} {} x={} accept={} body={}",
                            req.method(),
                            req.path(),
                            req.header("X-Test").unwrap_or("-"),
                            req.header("accept").unwrap_or("-"),
                            String::from_utf8_lossy(&req.body)
                        );
                        Response::new(200, Body::Full(Bytes::from(text)))
                            .header("content-type", "text/plain")
                    },
                    reject,
                ));
            }
        });
        addr
    }

    /// Sends `raw`, then reads until `responses` complete responses (by Content-Length)
    /// arrived or the peer closed.
    async fn exchange(addr: std::net::SocketAddr, raw: &[u8], responses: usize) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(raw).await.unwrap();
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = String::from_utf8_lossy(&got).into_owned();
            if complete_responses(&text) >= responses {
                return text;
            }
            let mut chunk = [0u8; 4096];
            match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return text,
                Ok(Ok(n)) => got.extend_from_slice(&chunk[..n]),
                Err(_) => panic!("no complete answer in 10 s; got {text:?}"),
            }
        }
    }

    fn complete_responses(text: &str) -> usize {
        let mut n = 0;
        let mut rest = text;
        while let Some(i) = rest.find("\r\n\r\n") {
            let head = &rest[..i];
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if rest.len() < i + 4 + len {
                break;
            }
            n += 1;
            rest = &rest[i + 4 + len..];
        }
        n
    }

    #[tokio::test]
    async fn keep_alive_and_pipelined_requests_are_answered_in_order() {
        let addr = echo_server(1024).await;
        let raw = b"POST /mcp HTTP/1.1\r\nHost: x\r\nx-test: one\r\nContent-Length: 3\r\n\r\nabc\
GET /mcp?q=1 HTTP/1.1\r\nHost: x\r\nX-TEST: two\r\naCCEPT: a/b\r\nAccept: c/d\r\n\r\n";
        let text = exchange(addr, raw, 2).await;
        let first = text.find("Post /mcp x=one accept=- body=abc").expect(&text);
        let second = text.find("Get /mcp x=two accept=a/b body=").expect(&text);
        assert!(first < second, "{text}");
        assert!(text.starts_with("HTTP/1.1 200 OK\r\ndate: "), "{text}");
    }

    #[tokio::test]
    async fn chunked_bodies_and_expect_continue() {
        let addr = echo_server(1024).await;
        // The body already sent with the head: no 100 Continue needed.
        let raw = b"POST /mcp HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n\
3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n";
        let text = exchange(addr, raw, 1).await;
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("body=abcde"), "{text}");
        // The head alone: the client waits for 100 Continue before sending the body.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
            .await
            .unwrap();
        let mut got = [0u8; 25];
        tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut got))
            .await
            .expect("100 Continue in time")
            .unwrap();
        assert_eq!(&got, b"HTTP/1.1 100 Continue\r\n\r\n");
        s.write_all(b"hi").await.unwrap();
        let mut rest = Vec::new();
        while !String::from_utf8_lossy(&rest).contains("body=hi") {
            let mut chunk = [0u8; 1024];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
                .await
                .expect("answer in time")
                .unwrap();
            assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&rest));
            rest.extend_from_slice(&chunk[..n]);
        }
    }

    #[tokio::test]
    async fn broken_framing_is_refused_and_closes() {
        let addr = echo_server(8).await;
        for (raw, status) in [
            (
                &b"POST /mcp HTTP/1.1\r\nContent-Length: 9\r\n\r\n123456789"[..],
                "413",
            ),
            (
                b"POST /mcp HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                "400",
            ),
            (
                b"POST /mcp HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400",
            ),
            (
                b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                "501",
            ),
            (
                b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "400",
            ),
            (b"\x01\x02 garbage\r\n\r\n", "400"),
        ] {
            let text = exchange(addr, raw, 2).await;
            assert!(
                text.starts_with(&format!("HTTP/1.1 {status} ")),
                "{raw:?}: {text}"
            );
            assert!(text.contains("connection: close"), "{text}");
            assert_eq!(
                complete_responses(&text),
                1,
                "closed after one answer: {text}"
            );
        }
    }

    #[tokio::test]
    async fn head_gets_no_body() {
        let addr = echo_server(64).await;
        let text = exchange(
            addr,
            b"HEAD /mcp HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n",
            2,
        )
        .await;
        assert!(
            text.contains("content-length: 0\r\n\r\nHTTP/1.1 200 OK"),
            "{text}"
        );
        assert!(text.ends_with("Get /x x=- accept=- body="), "{text}");
    }

    #[tokio::test]
    async fn http10_closes_unless_asked_to_keep_alive() {
        let addr = echo_server(64).await;
        let text = exchange(
            addr,
            b"GET /mcp HTTP/1.0\r\n\r\nGET /mcp HTTP/1.0\r\n\r\n",
            2,
        )
        .await;
        assert!(text.starts_with("HTTP/1.0 200 OK"), "{text}");
        assert_eq!(complete_responses(&text), 1, "{text}");
        let text = exchange(
            addr,
            b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
            2,
        )
        .await;
        assert_eq!(complete_responses(&text), 2, "{text}");
    }

    #[tokio::test]
    async fn a_client_that_goes_away_cancels_its_request() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            serve_connection(
                s,
                64,
                move |_req| {
                    let flag = flag.clone();
                    async move {
                        struct Guard(Arc<AtomicBool>);
                        impl Drop for Guard {
                            fn drop(&mut self) {
                                self.0.store(true, Ordering::SeqCst);
                            }
                        }
                        let _g = Guard(flag);
                        std::future::pending::<Response>().await
                    }
                },
                reject,
            )
            .await;
        });
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /mcp HTTP/1.1\r\n\r\n").await.unwrap();
        // The request is running (it never answers); then the client leaves.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!dropped.load(Ordering::SeqCst));
        drop(s);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "request not cancelled"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn streams_are_chunked_and_end_when_the_sender_goes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            serve_connection(
                s,
                64,
                |_req| async {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(async move {
                        for piece in ["data: a\n\n", "data: bc\n\n"] {
                            let _ = tx.send(Bytes::from_static(piece.as_bytes()));
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    });
                    Response::new(200, Body::Stream(rx)).header("content-type", "text/event-stream")
                },
                reject,
            )
            .await;
        });
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /mcp HTTP/1.1\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&got).ends_with("0\r\n\r\n") {
            let mut chunk = [0u8; 1024];
            let n = tokio::time::timeout_at(deadline, s.read(&mut chunk))
                .await
                .expect("stream ended in time")
                .unwrap();
            assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&chunk[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.contains("transfer-encoding: chunked"), "{text}");
        assert!(text.contains("9\r\ndata: a\n\n\r\n"), "{text}");
        assert!(text.contains("a\r\ndata: bc\n\n\r\n"), "{text}");
    }
}
