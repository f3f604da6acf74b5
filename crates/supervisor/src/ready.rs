//! Readiness probes for dev processes: when a process counts as ready (`ready = …` in
//! its config), so what depends on it may start.
//!
//! - [`wait_tcp`]: a TCP connection to `HOST:PORT` succeeds.
//! - [`wait_http`]: a `GET` of an `http://` URL answers 2xx. Plain HTTP/1.1 only, no
//!   TLS: dev servers' health endpoints are on loopback, and a TLS stack (certificates
//!   a dev server makes up on the fly, a dependency the size of the rest) buys nothing
//!   there; the config refuses `https://`. The client is hyper's HTTP/1 connection over
//!   a tokio `TcpStream` (hyper is already in the tree for the gateway's server).
//! - [`wait_log`]: a new line of the process's [`OutputRing`] matches a regex.
//!
//! The network probes try again and again until the deadline: each attempt is bounded
//! by [`ATTEMPT_TIMEOUT`] (and the deadline), and the pause between attempts starts at
//! 50 ms and doubles up to 500 ms, so a fast server is seen fast and a slow one is not
//! hammered. Each returns an [`Outcome`] whose `Display` is the message a person reads:
//! "not ready after 60s: connection refused by 127.0.0.1:5173".
//!
//! The process dying while it is probed is the caller's to watch (it owns the child):
//! cancel the token, or drop the future.

use crate::output::{OutputRing, Query};
use corral_config::{Readiness, ReadyCheck};
use regex::Regex;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest one connection attempt or HTTP request may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// The first pause between attempts; it doubles up to [`MAX_INTERVAL`].
pub const FIRST_INTERVAL: Duration = Duration::from_millis(50);
/// The longest pause between attempts.
pub const MAX_INTERVAL: Duration = Duration::from_millis(500);

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Ready, this long after the probe started.
    Ready { after: Duration },
    /// The deadline passed; `last_error` says why the last attempt failed.
    TimedOut {
        after: Duration,
        last_error: Option<String>,
    },
    /// The cancellation token fired first.
    Cancelled,
    /// The probe cannot work at all (an address or URL that does not parse); no
    /// attempt was made.
    Invalid { error: String },
}

impl Outcome {
    pub fn is_ready(&self) -> bool {
        matches!(self, Outcome::Ready { .. })
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ready { after } => write!(f, "ready after {}", short(*after)),
            Outcome::TimedOut { after, last_error } => {
                write!(f, "not ready after {}", short(*after))?;
                match last_error {
                    Some(e) => write!(f, ": {e}"),
                    None => Ok(()),
                }
            }
            Outcome::Cancelled => f.write_str("readiness check cancelled"),
            Outcome::Invalid { error } => write!(f, "cannot check readiness: {error}"),
        }
    }
}

/// A duration as a person would say it: whole seconds from 1 s up, else milliseconds.
fn short(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{}s", d.as_secs_f64().round() as u64)
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Runs the check `ready` describes, within its timeout from now. `ring` and
/// `after_seq` are for a log check: only lines after `after_seq` (the ring's
/// [`OutputRing::latest_seq`] when the run started) count.
pub async fn wait_ready(
    ready: &Readiness,
    ring: &OutputRing,
    after_seq: u64,
    cancel: &CancellationToken,
) -> Outcome {
    let deadline = Instant::now() + ready.timeout;
    match &ready.check {
        ReadyCheck::Log(pattern) => wait_log(ring, after_seq, &pattern.0, deadline, cancel).await,
        ReadyCheck::Tcp(addr) => wait_tcp(addr, deadline, cancel).await,
        ReadyCheck::Http(url) => wait_http(url, deadline, cancel).await,
    }
}

/// Until `deadline`: connects to `addr` (`HOST:PORT`, looked up on every attempt) until
/// a connection succeeds (it is closed at once).
pub async fn wait_tcp(addr: &str, deadline: Instant, cancel: &CancellationToken) -> Outcome {
    if let Err(error) = split_host_port(addr) {
        return Outcome::Invalid { error };
    }
    poll(deadline, cancel, || async { connect(addr).await.map(drop) }).await
}

/// Until `deadline`: `GET url` until it answers 2xx. Redirects are not followed (a
/// 3xx is not ready: point the check at the health URL itself).
pub async fn wait_http(url: &str, deadline: Instant, cancel: &CancellationToken) -> Outcome {
    let target = match HttpTarget::parse(url) {
        Ok(t) => t,
        Err(error) => return Outcome::Invalid { error },
    };
    poll(deadline, cancel, || get(&target)).await
}

/// Until `deadline`: waits for a line of `ring` after `after_seq` that `pattern`
/// matches.
pub async fn wait_log(
    ring: &OutputRing,
    after_seq: u64,
    pattern: &Regex,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Outcome {
    let start = Instant::now();
    let query = Query {
        grep: Some(pattern.clone()),
        ..Query::default()
    };
    tokio::select! {
        _ = ring.wait_for(after_seq, &query) => Outcome::Ready { after: start.elapsed() },
        () = cancel.cancelled() => Outcome::Cancelled,
        () = tokio::time::sleep_until(deadline) => {
            let last = ring.query(&Query {
                after_seq: Some(after_seq),
                limit: crate::output::Limit::Last(1),
                ..Query::default()
            });
            let seen = match last.first() {
                Some(line) => format!("the last line was {:?}", line.text),
                None => "there was no output".to_owned(),
            };
            Outcome::TimedOut {
                after: start.elapsed(),
                last_error: Some(format!("no line of output matched /{pattern}/; {seen}")),
            }
        }
    }
}

/// Calls `attempt` until it succeeds, the deadline passes or `cancel` fires, pausing
/// between attempts with backoff.
async fn poll<F, Fut>(deadline: Instant, cancel: &CancellationToken, mut attempt: F) -> Outcome
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let start = Instant::now();
    let mut interval = FIRST_INTERVAL;
    let mut last_error = None;
    loop {
        let bound = (Instant::now() + ATTEMPT_TIMEOUT).min(deadline);
        let result = tokio::select! {
            r = tokio::time::timeout_at(bound, attempt()) => r,
            () = cancel.cancelled() => return Outcome::Cancelled,
        };
        match result {
            Ok(Ok(())) => {
                return Outcome::Ready {
                    after: start.elapsed(),
                };
            }
            Ok(Err(e)) => last_error = Some(e),
            Err(_) if bound < deadline => {
                last_error = Some(format!("no answer within {}", short(ATTEMPT_TIMEOUT)));
            }
            // Cut short by the deadline itself: the previous error still says more.
            Err(_) => {
                last_error = last_error.or_else(|| Some("no answer yet".to_owned()));
            }
        }
        let next = Instant::now() + interval;
        if next >= deadline {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = cancel.cancelled() => return Outcome::Cancelled,
            }
            return Outcome::TimedOut {
                after: start.elapsed(),
                last_error,
            };
        }
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = cancel.cancelled() => return Outcome::Cancelled,
        }
        interval = (interval * 2).min(MAX_INTERVAL);
    }
}

/// `HOST:PORT` split; the host may be `[v6]`.
fn split_host_port(addr: &str) -> Result<(&str, u16), String> {
    addr.rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse().ok()?)))
        .filter(|(host, _)| !host.is_empty())
        .ok_or_else(|| format!("{addr:?} is not HOST:PORT"))
}

/// Connects to `addr`, trying each address it resolves to.
async fn connect(addr: &str) -> Result<tokio::net::TcpStream, String> {
    let addrs = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?;
    let mut last = format!("{addr} resolves to no address");
    for a in addrs {
        match tokio::net::TcpStream::connect(a).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = describe(&e, addr),
        }
    }
    Err(last)
}

/// "connection refused by 127.0.0.1:5173" rather than "Connection refused (os error 111)".
fn describe(e: &std::io::Error, addr: &str) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => format!("connection refused by {addr}"),
        ConnectionReset => format!("connection reset by {addr}"),
        TimedOut => format!("connecting to {addr} timed out"),
        _ => format!("cannot connect to {addr}: {e}"),
    }
}

/// Where an HTTP probe goes.
#[derive(Debug, Clone)]
struct HttpTarget {
    url: String,
    /// `host:port` to connect to.
    addr: String,
    /// The `Host` header.
    host: String,
    /// Path and query.
    path: String,
}

impl HttpTarget {
    fn parse(url: &str) -> Result<HttpTarget, String> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !uri
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("http"))
        {
            return Err(format!("{url:?}: only http:// URLs are probed (no TLS)"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{url:?} has no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        Ok(HttpTarget {
            url: url.to_owned(),
            addr: format!("{}:{port}", authority.host()),
            host: authority.as_str().to_owned(),
            path: uri
                .path_and_query()
                .map_or("/".to_owned(), |p| p.as_str().to_owned()),
        })
    }
}

/// One `GET`: `Ok` on a 2xx.
async fn get(target: &HttpTarget) -> Result<(), String> {
    let stream = connect(&target.addr).await?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake with {} failed: {e}", target.addr))?;
    // The connection is driven by its own task while the request is in flight; it
    // ends when `sender` is dropped, and is aborted in any case.
    let conn = tokio::spawn(conn);
    let _abort = AbortOnDrop(conn.abort_handle());
    let request = hyper::Request::get(target.path.as_str())
        .header(hyper::header::HOST, target.host.as_str())
        .header(hyper::header::USER_AGENT, "corral-ready")
        .header(hyper::header::CONNECTION, "close")
        .body(http_body_util::Empty::<&'static [u8]>::new())
        .map_err(|e| format!("cannot build a request for {}: {e}", target.url))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("GET {} failed: {e}", target.url))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("GET {} answered {status}", target.url))
    }
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Stream;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpSocket};

    /// A port of ours that refuses connections until `listen` is called on the socket:
    /// bound (so no one else gets it) but not listening. No fixed port, no race.
    fn refusing_socket() -> (TcpSocket, String) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap().to_string();
        (socket, addr)
    }

    fn in_secs(n: u64) -> Instant {
        Instant::now() + Duration::from_secs(n)
    }

    #[tokio::test]
    async fn tcp_becomes_ready_when_the_port_starts_listening() {
        let (socket, addr) = refusing_socket();
        let cancel = CancellationToken::new();
        let probe = {
            let (addr, cancel) = (addr.clone(), cancel.clone());
            tokio::spawn(async move { wait_tcp(&addr, in_secs(20), &cancel).await })
        };
        // The scenario: a dev server that takes a while to open its port.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!probe.is_finished(), "ready before the port listened");
        let listener = socket.listen(8).unwrap();
        let outcome = probe.await.unwrap();
        let Outcome::Ready { after } = outcome else {
            panic!("{outcome}")
        };
        assert!(after >= Duration::from_millis(250), "{after:?}");
        // The probe's connection reached the listener.
        let accepted = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await;
        assert!(accepted.is_ok());
    }

    #[tokio::test]
    async fn tcp_times_out_with_the_last_error() {
        let (_socket, addr) = refusing_socket();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(400);
        let outcome = wait_tcp(&addr, deadline, &CancellationToken::new()).await;
        let Outcome::TimedOut { after, last_error } = &outcome else {
            panic!("{outcome}")
        };
        assert!(*after >= Duration::from_millis(400), "{after:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            last_error.as_deref(),
            Some(format!("connection refused by {addr}").as_str())
        );
        let message = outcome.to_string();
        assert!(message.starts_with("not ready after "), "{message}");
        assert!(
            message.ends_with(&format!(": connection refused by {addr}")),
            "{message}"
        );
    }

    #[test]
    fn outcomes_read_well() {
        let timed_out = |ms, e: Option<&str>| Outcome::TimedOut {
            after: Duration::from_millis(ms),
            last_error: e.map(str::to_owned),
        };
        assert_eq!(
            timed_out(60_002, Some("connection refused by 127.0.0.1:5173")).to_string(),
            "not ready after 60s: connection refused by 127.0.0.1:5173"
        );
        assert_eq!(timed_out(250, None).to_string(), "not ready after 250ms");
        let ready = Outcome::Ready {
            after: Duration::from_millis(1_600),
        };
        assert_eq!(ready.to_string(), "ready after 2s");
    }

    #[tokio::test]
    async fn a_cancelled_probe_stops_at_once() {
        let (_socket, addr) = refusing_socket();
        let cancel = CancellationToken::new();
        let probe = {
            let cancel = cancel.clone();
            tokio::spawn(async move { wait_tcp(&addr, in_secs(60), &cancel).await })
        };
        cancel.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(5), probe)
            .await
            .expect("stops promptly")
            .unwrap();
        assert_eq!(outcome, Outcome::Cancelled);
    }

    #[tokio::test]
    async fn bad_addresses_are_invalid_without_trying() {
        let cancel = CancellationToken::new();
        let o = wait_tcp("5173", in_secs(5), &cancel).await;
        assert_eq!(
            o,
            Outcome::Invalid {
                error: "\"5173\" is not HOST:PORT".into()
            }
        );
        let o = wait_http("https://127.0.0.1:1/", in_secs(5), &cancel).await;
        assert_eq!(
            o.to_string(),
            "cannot check readiness: \"https://127.0.0.1:1/\": only http:// URLs are probed (no TLS)"
        );
    }

    /// A raw HTTP server: answers 503 to the first `failures` requests, then 200.
    /// Returns its address and the request heads it saw.
    async fn flaky_server(failures: usize) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                let (log, count) = (log.clone(), count.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    log.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).into_owned());
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let status = if n < failures {
                        "503 Service Unavailable"
                    } else {
                        "200 OK"
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                    );
                    let _ = conn.write_all(response.as_bytes()).await;
                });
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn http_is_ready_on_the_first_2xx() {
        let (addr, seen) = flaky_server(2).await;
        let url = format!("http://{addr}/health?x=1");
        let outcome = wait_http(&url, in_secs(20), &CancellationToken::new()).await;
        assert!(outcome.is_ready(), "{outcome}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3, "two 503s, then the 200");
        assert!(
            seen[0].starts_with("GET /health?x=1 HTTP/1.1\r\n"),
            "{}",
            seen[0]
        );
        assert!(
            seen[0]
                .to_ascii_lowercase()
                .contains(&format!("host: {addr}\r\n")),
            "{}",
            seen[0]
        );
    }

    #[tokio::test]
    async fn http_times_out_with_the_last_status() {
        let (addr, _) = flaky_server(usize::MAX).await;
        let url = format!("http://{addr}/");
        let deadline = Instant::now() + Duration::from_millis(400);
        let outcome = wait_http(&url, deadline, &CancellationToken::new()).await;
        let Outcome::TimedOut { last_error, .. } = &outcome else {
            panic!("{outcome}")
        };
        assert_eq!(
            last_error.as_deref(),
            Some(format!("GET {url} answered 503 Service Unavailable").as_str())
        );
    }

    #[tokio::test]
    async fn http_to_a_closed_port_says_refused() {
        let (_socket, addr) = refusing_socket();
        let deadline = Instant::now() + Duration::from_millis(200);
        let outcome = wait_http(
            &format!("http://{addr}/"),
            deadline,
            &CancellationToken::new(),
        )
        .await;
        assert!(
            outcome
                .to_string()
                .ends_with(&format!(": connection refused by {addr}")),
            "{outcome}"
        );
    }

    #[tokio::test]
    async fn log_readiness_waits_for_a_new_matching_line() {
        let ring = OutputRing::new(1 << 20);
        ring.push(1, Stream::Stdout, "ready in 10 ms (previous run)".into());
        let after = ring.latest_seq();
        let re = Regex::new(r"ready in \d+ ms").unwrap();
        let cancel = CancellationToken::new();
        let probe = {
            let (ring, re, cancel) = (ring.clone(), re.clone(), cancel.clone());
            tokio::spawn(async move { wait_log(&ring, after, &re, in_secs(20), &cancel).await })
        };
        ring.push(2, Stream::Stdout, "compiling".into());
        ring.push(2, Stream::Stderr, "ready in 25 ms".into());
        let outcome = tokio::time::timeout(Duration::from_secs(10), probe)
            .await
            .expect("wakes on the line")
            .unwrap();
        assert!(outcome.is_ready(), "{outcome}");
    }

    #[tokio::test]
    async fn log_readiness_times_out_naming_the_pattern_and_the_last_line() {
        let ring = OutputRing::new(1 << 20);
        ring.push(1, Stream::Stdout, "compiling".into());
        let re = Regex::new("ready").unwrap();
        let deadline = Instant::now() + Duration::from_millis(100);
        let outcome = wait_log(&ring, 0, &re, deadline, &CancellationToken::new()).await;
        let message = outcome.to_string();
        assert!(message.starts_with("not ready after "), "{message}");
        assert!(
            message
                .ends_with(": no line of output matched /ready/; the last line was \"compiling\""),
            "{message}"
        );
    }

    #[tokio::test]
    async fn wait_ready_runs_the_configured_check() {
        let (socket, addr) = refusing_socket();
        let _listener = socket.listen(8).unwrap();
        let ready = Readiness {
            check: ReadyCheck::Tcp(addr),
            timeout: Duration::from_secs(20),
        };
        let ring = OutputRing::new(1 << 20);
        let outcome = wait_ready(&ready, &ring, 0, &CancellationToken::new()).await;
        assert!(outcome.is_ready(), "{outcome}");
    }
}
