//! A minimal blocking HTTP/1.1 client for the gateway benchmarks: one keep-alive TCP
//! connection per MCP session, `TCP_NODELAY` on, JSON POSTs. Responses may carry a
//! `Content-Length` or be chunked; `text/event-stream` bodies are reduced to their
//! `data:` payloads. When the caller names the JSON-RPC id it waits for, an SSE body is
//! scanned as it arrives and the time its answer came is recorded; the rest of the
//! stream is still read (a server that keeps it open gets its connection dropped after
//! [`TAIL_TIMEOUT`]).

use crate::mcp::response_id;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Bound on every read of a response.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Once the awaited answer has arrived in an SSE stream, how long the rest of the stream
/// may take before the connection is dropped instead.
const TAIL_TIMEOUT: Duration = Duration::from_secs(2);

/// One HTTP response, read in full.
pub struct Response {
    pub status: u16,
    /// `Mcp-Session-Id`, if the response carried one.
    pub session_id: Option<String>,
    /// `Content-Type` (lower-cased), empty if absent.
    pub content_type: String,
    pub body: Vec<u8>,
    /// When the message with the awaited id was complete (SSE, scanned as it arrived);
    /// `None`: at the end of the response.
    pub answered: Option<Instant>,
}

impl Response {
    /// The JSON-RPC messages in the body: the body itself for `application/json`, the
    /// `data:` payloads for `text/event-stream`.
    pub fn messages(&self) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.body);
        if self.content_type.starts_with("text/event-stream") {
            let mut out = Vec::new();
            // An event's data lines are joined with newlines; events end at a blank line.
            let mut data: Option<String> = None;
            for line in text.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if line.is_empty() {
                    out.extend(data.take());
                } else if let Some(d) = line.strip_prefix("data:") {
                    let d = d.strip_prefix(' ').unwrap_or(d);
                    match &mut data {
                        Some(s) => {
                            s.push('\n');
                            s.push_str(d);
                        }
                        None => data = Some(d.to_owned()),
                    }
                }
            }
            out.extend(data);
            out
        } else if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![text.into_owned()]
        }
    }
}

/// A keep-alive connection to `http://<addr>/mcp` with the MCP session headers.
pub struct Conn {
    addr: SocketAddr,
    host: String,
    path: String,
    token: Option<String>,
    /// Sent as `Mcp-Session-Id` once set.
    pub session: Option<String>,
    /// Sent as `Mcp-Protocol-Version` once set.
    pub protocol: Option<String>,
    /// Further header lines (each ending in CRLF) sent with every POST: a stateless
    /// (2026-07-28) client's `Mcp-Method` and `Mcp-Name`.
    pub headers: String,
    io: Option<(TcpStream, BufReader<TcpStream>)>,
    request: Vec<u8>,
    line: Vec<u8>,
    want: Option<u64>,
}

impl Conn {
    pub fn new(addr: SocketAddr, path: &str, token: Option<String>) -> Conn {
        Conn {
            addr,
            host: addr.to_string(),
            path: path.to_owned(),
            token,
            session: None,
            protocol: None,
            headers: String::new(),
            io: None,
            request: Vec::with_capacity(1024),
            line: Vec::with_capacity(256),
            want: None,
        }
    }

    fn connect(&mut self) -> Result<(), String> {
        let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("TCP_NODELAY: {e}"))?;
        // A bound on every read, so that a gateway that stops answering fails the bench
        // instead of hanging it.
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| format!("read timeout: {e}"))?;
        let reader = BufReader::with_capacity(
            64 * 1024,
            stream.try_clone().map_err(|e| format!("dup socket: {e}"))?,
        );
        self.io = Some((stream, reader));
        Ok(())
    }

    /// POSTs `body` (JSON) and reads the whole response. A connection the server closed
    /// while idle is reopened once.
    pub fn post(&mut self, body: &[u8]) -> Result<Response, String> {
        self.post_for(body, None)
    }

    /// Like [`Conn::post`]; with `want`, an SSE response is scanned as it arrives for the
    /// JSON-RPC response with that id, and [`Response::answered`] records when it came.
    pub fn post_for(&mut self, body: &[u8], want: Option<u64>) -> Result<Response, String> {
        self.want = want;
        self.request.clear();
        let _ = write!(
            self.request,
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        self.request.extend_from_slice(self.headers.as_bytes());
        self.finish_request(body);
        self.send()
    }

    /// `DELETE` on the endpoint: ends the session.
    pub fn delete(&mut self) -> Result<Response, String> {
        self.request.clear();
        let _ = write!(
            self.request,
            "DELETE {} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n",
            self.path, self.host
        );
        self.want = None;
        self.finish_request(b"");
        self.send()
    }

    fn finish_request(&mut self, body: &[u8]) {
        if let Some(t) = &self.token {
            let _ = write!(self.request, "Authorization: Bearer {t}\r\n");
        }
        if let Some(s) = &self.session {
            let _ = write!(self.request, "Mcp-Session-Id: {s}\r\n");
        }
        if let Some(p) = &self.protocol {
            let _ = write!(self.request, "Mcp-Protocol-Version: {p}\r\n");
        }
        self.request.extend_from_slice(b"\r\n");
        self.request.extend_from_slice(body);
    }

    fn send(&mut self) -> Result<Response, String> {
        let reused = self.io.is_some();
        match self.exchange() {
            Ok(r) => Ok(r),
            // The server may close an idle keep-alive connection: retry once on a new one.
            Err(Failure::Closed) if reused => {
                self.io = None;
                self.exchange().map_err(|e| e.into_message(self.addr))
            }
            Err(e) => {
                self.io = None;
                Err(e.into_message(self.addr))
            }
        }
    }

    fn exchange(&mut self) -> Result<Response, Failure> {
        if self.io.is_none() {
            self.connect().map_err(Failure::Other)?;
        }
        let (stream, reader) = self.io.as_mut().expect("connected");
        if let Err(e) = stream.write_all(&self.request) {
            return Err(match e.kind() {
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                    Failure::Closed
                }
                _ => Failure::Other(format!("sending the request: {e}")),
            });
        }
        let line = &mut self.line;
        // Status line; EOF here means the server had closed the connection.
        line.clear();
        match reader.read_until(b'\n', line) {
            Ok(0) => return Err(Failure::Closed),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(Failure::Closed);
            }
            Err(e) => return Err(Failure::Other(format!("reading the status line: {e}"))),
            Ok(_) => {}
        }
        let status_line = String::from_utf8_lossy(line).trim_end().to_owned();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Failure::Other(format!("bad status line {status_line:?}")))?;
        let mut resp = Response {
            status,
            session_id: None,
            content_type: String::new(),
            body: Vec::new(),
            answered: None,
        };
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut close = false;
        loop {
            read_line(reader, line)?;
            let h = std::str::from_utf8(line)
                .map_err(|_| Failure::Other("a header is not UTF-8".into()))?
                .trim_end();
            if h.is_empty() {
                break;
            }
            let Some((name, value)) = h.split_once(':') else {
                return Err(Failure::Other(format!("bad header line {h:?}")));
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = Some(
                        value
                            .parse()
                            .map_err(|_| Failure::Other(format!("bad Content-Length {value:?}")))?,
                    )
                }
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "content-type" => resp.content_type = value.to_ascii_lowercase(),
                "mcp-session-id" => resp.session_id = Some(value.to_owned()),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        // An SSE body is scanned as it arrives for the awaited answer.
        let mut scan = self
            .want
            .filter(|_| resp.content_type.starts_with("text/event-stream"))
            .map(|id| SseScan {
                id,
                from: 0,
                searched: 0,
            });
        let mut short_timeout = false;
        // After each piece of the body: was the answer in it? Then the rest of the
        // stream gets TAIL_TIMEOUT.
        let mut progress = |resp: &mut Response, stream: &TcpStream| {
            if let Some(s) = &mut scan
                && s.found(&resp.body)
            {
                resp.answered = Some(Instant::now());
                scan = None;
                short_timeout = true;
                let _ = stream.set_read_timeout(Some(TAIL_TIMEOUT));
            }
        };
        let body_result: Result<(), Failure> = (|| {
            if chunked {
                loop {
                    read_line(reader, line)?;
                    let text = String::from_utf8_lossy(line);
                    let size_text = text.trim().split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_text, 16)
                        .map_err(|_| Failure::Other(format!("bad chunk size {size_text:?}")))?;
                    if size == 0 {
                        // Trailers, up to the blank line.
                        loop {
                            read_line(reader, line)?;
                            if line.iter().all(|b| b.is_ascii_whitespace()) {
                                break;
                            }
                        }
                        return Ok(());
                    }
                    let start = resp.body.len();
                    resp.body.resize(start + size, 0);
                    reader
                        .read_exact(&mut resp.body[start..])
                        .map_err(|e| Failure::Other(format!("reading a chunk: {e}")))?;
                    progress(&mut resp, stream);
                    read_line(reader, line)?; // the CRLF after the chunk
                }
            } else if let Some(n) = length {
                resp.body.resize(n, 0);
                reader
                    .read_exact(&mut resp.body)
                    .map_err(|e| Failure::Other(format!("reading the body: {e}")))?;
                Ok(())
            } else if !matches!(status, 100..=199 | 204 | 304) {
                // No length: the body runs to the end of the connection.
                close = true;
                let mut piece = [0u8; 16 * 1024];
                loop {
                    match reader.read(&mut piece) {
                        Ok(0) => return Ok(()),
                        Ok(k) => {
                            resp.body.extend_from_slice(&piece[..k]);
                            progress(&mut resp, stream);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Failure::Other(format!("reading the body: {e}"))),
                    }
                }
            } else {
                Ok(())
            }
        })();
        if short_timeout {
            // The answer came; a stream that did not end within TAIL_TIMEOUT costs the
            // connection, not the call.
            if body_result.is_err() {
                close = true;
            } else {
                let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
            }
        } else {
            body_result?;
        }
        if close {
            self.io = None;
        }
        Ok(resp)
    }
}

/// Where an SSE body has been scanned to, for the response with `id`.
struct SseScan {
    id: u64,
    /// The start of the first incomplete line.
    from: usize,
    /// How far that line has been searched for its newline.
    searched: usize,
}

impl SseScan {
    /// Scans the complete lines of `body` after the last call for a `data:` line that is
    /// the JSON-RPC response with the id.
    fn found(&mut self, body: &[u8]) -> bool {
        loop {
            let start = self.searched.max(self.from);
            let Some(nl) = body[start..].iter().position(|&b| b == b'\n') else {
                self.searched = body.len();
                return false;
            };
            let line = &body[self.from..start + nl];
            self.from = start + nl + 1;
            if let Some(data) = line.strip_prefix(b"data:")
                && let Ok(text) = std::str::from_utf8(data)
                && response_id(text) == Some(self.id)
            {
                return true;
            }
        }
    }
}

enum Failure {
    /// The connection was closed before any of the response arrived.
    Closed,
    Other(String),
}

impl Failure {
    fn into_message(self, addr: SocketAddr) -> String {
        match self {
            Failure::Closed => format!("{addr} closed the connection without answering"),
            Failure::Other(m) => format!("{addr}: {m}"),
        }
    }
}

fn read_line(reader: &mut BufReader<TcpStream>, line: &mut Vec<u8>) -> Result<(), Failure> {
    line.clear();
    match reader.read_until(b'\n', line) {
        Ok(0) => Err(Failure::Other("the connection closed mid-response".into())),
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::Other(format!("reading the response: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Serves `replies` in order on one accepted connection, after reading each request.
    fn server(replies: Vec<&'static str>) -> SocketAddr {
        server_then(replies, Duration::ZERO)
    }

    /// Like [`server`], then keeps the connection open for `linger`.
    fn server_then(replies: Vec<&'static str>, linger: Duration) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            for reply in replies {
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                w.write_all(reply.as_bytes()).unwrap();
            }
            std::thread::sleep(linger);
        });
        addr
    }

    #[test]
    fn sse_answers_are_found_across_chunks() {
        let addr = server(vec![
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n\
             1f\r\nevent: message\ndata: {\"id\":1,\"r\r\n\
             e\r\nesult\":true}\n\n\r\n0\r\n\r\n",
        ]);
        let mut c = Conn::new(addr, "/mcp", None);
        let r = c.post_for(b"{}", Some(1)).unwrap();
        assert!(r.answered.is_some());
        assert_eq!(r.messages(), vec![r#"{"id":1,"result":true}"#.to_owned()]);
        // Another id: no answer time, the whole body is still read.
        let addr = server(vec![
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 22\r\n\r\n\
             data: {\"id\":2,\"x\":1}\n\n",
        ]);
        let mut c = Conn::new(addr, "/mcp", None);
        let r = c.post_for(b"{}", Some(1)).unwrap();
        assert!(r.answered.is_none());
        assert_eq!(r.messages().len(), 1);
    }

    #[test]
    fn an_sse_stream_left_open_after_the_answer_costs_the_connection_not_the_call() {
        let addr = server_then(
            vec![
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                 transfer-encoding: chunked\r\n\r\n\
                 17\r\ndata: {\"id\":5,\"ok\":1}\n\n\r\n",
            ],
            TAIL_TIMEOUT + Duration::from_secs(2),
        );
        let mut c = Conn::new(addr, "/mcp", None);
        let t0 = Instant::now();
        let r = c.post_for(b"{}", Some(5)).unwrap();
        assert!(r.answered.is_some());
        assert!(t0.elapsed() < TAIL_TIMEOUT + Duration::from_secs(1));
        assert!(c.io.is_none(), "the connection is dropped");
    }

    #[test]
    fn reads_content_length_and_chunked_bodies_on_one_connection() {
        let addr = server(vec![
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nmcp-session-id: abc\r\n\
             Content-Length: 7\r\n\r\n{\"a\":1}",
            "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n\
             1a\r\nevent: message\ndata: {\"b\":\r\n4\r\n2}\n\n\r\n0\r\n\r\n",
        ]);
        let mut c = Conn::new(addr, "/mcp", Some("t".into()));
        let r = c.post(b"{}").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.session_id.as_deref(), Some("abc"));
        assert_eq!(r.messages(), vec![r#"{"a":1}"#.to_owned()]);
        c.session = r.session_id;
        let r = c.post(b"{}").unwrap();
        assert_eq!(r.status, 202);
        assert!(r.messages().is_empty());
        let r = c.post(b"{}").unwrap();
        assert_eq!(r.content_type, "text/event-stream");
        assert_eq!(r.messages(), vec![r#"{"b":2}"#.to_owned()]);
    }
}
