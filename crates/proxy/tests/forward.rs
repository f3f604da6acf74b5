//! The dev proxy's forwarding path and traffic log, over real sockets: a target server,
//! the proxy in front of it, and a client.

mod common;

use common::*;
use corral_events::{Event, Kind};
use corral_proxy::{ProxyBody, full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::sync::broadcast;

/// What an [`echo`] target saw, as it wrote it back.
struct Seen {
    request_line: String,
    peer_port: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn parse(text: &str) -> Seen {
        let (head, body) = text.split_once("\n\n").expect("an echo");
        let mut lines = head.lines();
        let request_line = lines.next().unwrap().to_owned();
        let peer_port = lines
            .next()
            .unwrap()
            .strip_prefix("peer: ")
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .map(|l| {
                let (k, v) = l.split_once(": ").unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect();
        Seen {
            request_line,
            peer_port,
            headers,
            body: body.to_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(k, _)| k == name);
        let first = values.next().map(|(_, v)| v.as_str());
        assert!(values.next().is_none(), "{name} once");
        first
    }
}

/// A target that answers with what it got: the request line, its peer's port, the
/// headers and the body; with a header of its own and a hop-by-hop one.
async fn echo(req: Request<Incoming>) -> Response<ProxyBody> {
    let peer = req.extensions().get::<Peer>().unwrap().0;
    let mut text = format!("{} {}\npeer: {}\n", req.method(), req.uri(), peer.port());
    for (k, v) in req.headers() {
        text += &format!("{k}: {}\n", v.to_str().unwrap());
    }
    text += "\n";
    text += std::str::from_utf8(&body_of(req).await).unwrap();
    let mut resp = response(200, "text/plain", text);
    let h = resp.headers_mut();
    h.insert("x-from-target", "yes".parse().unwrap());
    h.insert("connection", "x-secret".parse().unwrap());
    h.insert("x-secret", "1".parse().unwrap());
    resp
}

/// The `proxy.error` events in `rx` so far.
fn proxy_errors(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.is(Kind::ProxyError) {
            out.push(e);
        }
    }
    out
}

#[tokio::test]
async fn requests_reach_the_target_rewritten_over_one_kept_alive_connection() {
    let target = Target::start(echo).await;
    let (proxy, bus) = proxy(&target.url()).await;
    let mut events = bus.subscribe();
    let mut conn = Conn::open(proxy.addr()).await;

    let req = conn
        .request("POST", "/api/items?q=1&r=%20")
        .header("x-custom", "abc")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "must not pass")
        .header("keep-alive", "timeout=5")
        .header("x-forwarded-for", "10.0.0.7")
        .header("content-type", "application/json")
        .body(full(r#"{"a":1}"#))
        .unwrap();
    let reply = conn.fetch(req).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-from-target"), Some("yes"));
    assert_eq!(reply.header("x-secret"), None, "named by Connection");
    assert_eq!(reply.header("connection"), None);
    let seen = Seen::parse(reply.text());
    assert_eq!(seen.request_line, "POST /api/items?q=1&r=%20");
    assert_eq!(seen.header("host"), Some(target.addr.to_string().as_str()));
    assert_eq!(seen.header("x-custom"), Some("abc"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("content-length"), Some("7"));
    assert_eq!(seen.header("x-hop"), None);
    assert_eq!(seen.header("keep-alive"), None);
    assert_eq!(seen.header("x-forwarded-for"), Some("10.0.0.7, 127.0.0.1"));
    assert_eq!(
        seen.header("x-forwarded-host"),
        Some(proxy.addr().to_string().as_str())
    );
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
    assert_eq!(seen.body, r#"{"a":1}"#);

    let second = Seen::parse(conn.get("/second").await.text());
    assert_eq!(second.request_line, "GET /second");
    assert_eq!(second.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(second.peer_port, seen.peer_port, "the pooled connection");
    assert_eq!(target.connections(), 1);
    assert!(proxy_errors(&mut events).is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn preserve_host_keeps_the_browsers_host_and_a_base_path_prefixes_the_path() {
    let target = Target::start(echo).await;
    let url = format!("{}/app/", target.url());
    let (proxy, _bus) = proxy_with(&url, |s| s.preserve_host = true).await;
    let seen = Seen::parse(get(proxy.addr(), "/x/y?z=1").await.text());
    assert_eq!(seen.request_line, "GET /app/x/y?z=1");
    let browser_host = proxy.addr().to_string();
    assert_eq!(seen.header("host"), Some(browser_host.as_str()));
    assert_eq!(seen.header("x-forwarded-host"), Some(browser_host.as_str()));
    proxy.stop().await;
}

#[tokio::test]
async fn a_target_that_is_down_gets_a_502_page_and_one_proxy_error() {
    // A port that was just free: nothing listens there, so connecting is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let target = format!("http://127.0.0.1:{port}");
    let (proxy, bus) = proxy(&target).await;
    let mut events = bus.subscribe();

    let reply = get(proxy.addr(), "/page?x=1").await;
    assert_eq!(reply.status, 502);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let page = reply.text();
    let headline = format!("Corral's dev proxy 'web' could not reach {target}: connection refused");
    assert!(page.contains(&headline), "{page}");
    assert!(page.contains("<code>corral ps</code>"), "{page}");

    let errors = proxy_errors(&mut events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let e = &errors[0];
    assert_eq!(e.source, "proxy:web");
    assert_eq!(e.str("error"), Some("connection refused"));
    assert_eq!(e.str("method"), Some("GET"));
    assert_eq!(e.str("url"), Some("/page?x=1"));
    assert_eq!(e.str("target"), Some(target.as_str()));

    let entries = proxy.traffic().query(&Default::default());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].status, None);
    assert_eq!(entries[0].error.as_deref(), Some("connection refused"));
    assert_eq!(proxy.traffic().errors(), 1);
    proxy.stop().await;
}
