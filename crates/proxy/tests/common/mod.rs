//! What the dev proxy's tests share: a target server on a real socket (hyper, with a
//! closure for a handler), a small HTTP/1.1 client, a proxy in front of a target, and
//! waiting on a condition with a deadline.
#![allow(dead_code)]

use bytes::Bytes;
use corral_events::EventBus;
use corral_proxy::{Proxy, ProxyBody, ProxySpec, full};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long anything in a test may take before it counts as hung: generous, as the
/// machine may be loaded.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Awaits `fut`, or panics naming `what` after [`DEADLINE`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// Waits until `cond` holds (checked every few milliseconds), or panics naming `what`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// The peer of a request a [`Target`] serves (a request extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// A dev server stand-in on `127.0.0.1:0`, serving each request with a closure. Dropping
/// it stops accepting.
pub struct Target {
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Target {
    pub async fn start<H, F>(handler: H) -> Target
    where
        H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Response<ProxyBody>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            let limits = corral_httpd::Limits::default();
            while let Ok((stream, peer)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                let limits = limits.clone();
                tokio::spawn(async move {
                    let handler = move |mut req: Request<Incoming>| {
                        req.extensions_mut().insert(Peer(peer));
                        handler(req)
                    };
                    corral_httpd::serve_connection(stream, &limits, handler).await;
                });
            }
        });
        Target {
            addr,
            connections,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A response with a status, a content type and a whole body.
pub fn response(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap(),
    );
    resp
}

/// A body sent chunk by chunk: each `send` is one chunk; it ends when the sender drops.
pub fn stream() -> (mpsc::UnboundedSender<Bytes>, ProxyBody) {
    let (tx, rx) = mpsc::unbounded_channel();
    let body = corral_httpd::Body::Stream(rx)
        .map_err(|never| match never {})
        .boxed_unsync();
    (tx, body)
}

/// The whole body of a request a target got.
pub async fn body_of(req: Request<Incoming>) -> Bytes {
    req.into_body().collect().await.unwrap().to_bytes()
}

/// A proxy named `web` in front of `target` on `127.0.0.1:0`, with `adjust` applied to
/// its spec; without the error script, so that responses pass byte for byte.
pub async fn proxy_with(target: &str, adjust: impl FnOnce(&mut ProxySpec)) -> (Proxy, EventBus) {
    let bus = EventBus::new(1024);
    let mut spec = ProxySpec::new("web", target, "127.0.0.1:0");
    spec.inject = false;
    adjust(&mut spec);
    let proxy = Proxy::start(spec, bus.clone()).await.unwrap();
    (proxy, bus)
}

pub async fn proxy(target: &str) -> (Proxy, EventBus) {
    proxy_with(target, |_| {}).await
}

/// One HTTP/1.1 client connection (keep-alive: several requests in turn).
pub struct Conn {
    pub addr: SocketAddr,
    send: hyper::client::conn::http1::SendRequest<ProxyBody>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = within("connect", TcpStream::connect(addr)).await.unwrap();
        let (send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn.with_upgrades());
        Conn { addr, send }
    }

    /// A request to this connection's server (`Host` set to it) to build on.
    pub fn request(&self, method: &str, path: &str) -> hyper::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.addr.to_string())
    }

    /// Sends `req`, returns the response head (its body still to read).
    pub async fn send(&mut self, req: Request<ProxyBody>) -> Response<Incoming> {
        within("the response head", async {
            self.send.ready().await.unwrap();
            self.send.send_request(req).await.unwrap()
        })
        .await
    }

    /// Sends `req` and reads the whole response.
    pub async fn fetch(&mut self, req: Request<ProxyBody>) -> Reply {
        let resp = self.send(req).await;
        read(resp).await
    }

    pub async fn get(&mut self, path: &str) -> Reply {
        let req = self.request("GET", path).body(full("")).unwrap();
        self.fetch(req).await
    }
}

/// A GET on a connection of its own.
pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    Conn::open(addr).await.get(path).await
}

/// A whole response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }
}

pub async fn read(resp: Response<Incoming>) -> Reply {
    let (parts, body) = resp.into_parts();
    let body = within("the response body", body.collect())
        .await
        .unwrap()
        .to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}
