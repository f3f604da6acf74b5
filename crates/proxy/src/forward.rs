//! Forwarding one request to the target and its response back.
//!
//! Bodies stream both ways: the request's [`Incoming`] goes to the target as it arrives,
//! the target's response goes back frame by frame (an event stream flows unbuffered, a
//! download is never held whole). Both pass through thin wrappers that only count and,
//! for an error response, copy the first bytes aside ([`Watched`]); neither waits.
//!
//! What is rewritten, and why:
//!
//! * The request goes to `target base + path?query`, with `Host` the target's (a dev
//!   server often checks it; `preserve_host` keeps the browser's), `X-Forwarded-Host`
//!   and `-Proto` saying where it came from (not `X-Forwarded-For`: see
//!   [`rewrite_request`]), and `X-Request-Id`, the exchange's id, unless it has one.
//! * Every response carries the proxy's id of the exchange as `X-Corral-Request` (the
//!   injected script sends it back with the errors it reports about a failed fetch).
//! * Hop-by-hop headers (`Connection` and what it names, `Keep-Alive`, `TE`, …) belong
//!   to one connection and are dropped both ways: hyper frames each side itself.
//! * An upgrade (WebSocket, Vite's HMR) keeps `Connection: upgrade` and `Upgrade`; on
//!   `101` both connections are taken over and spliced byte for byte until either side
//!   closes or the proxy stops.
//! * A redirect to the target's own origin would take the browser past the proxy, so its
//!   `Location` is pointed back at the proxy; a cookie bound to the target's host by
//!   `Domain=` would not be sent to the proxy's, so the attribute is dropped.
//!
//! A transport error (refused, reset, timed out, a response hyper cannot parse) is a
//! `502` page that says so in plain words, and a `proxy.error` event. A client that goes
//! away is not an error: its exchange is logged as aborted.

use crate::headers::Headers;
use crate::traffic::{Excerpt, TrafficEntry};
use crate::{BoxError, ProxyBody, Shared, Target, full};
use bytes::Bytes;
use corral_events::{Event, Kind};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::request;
use hyper::{Request, Response, StatusCode, Uri};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant, SystemTime};

/// The HTTP client every request of a proxy shares (keep-alive pool to the target).
pub(crate) type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    ProxyBody,
>;

/// Time to open a connection to the target: a dev server on this machine answers at
/// once or not at all, but one on another host (or a firewall dropping packets) may
/// hang, and the browser should learn why before it gives up itself.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Time for the target's response head, counted from sending the request (its body
/// included): long enough for a dev server's first, compiling request or a long poll;
/// the response body may then take as long as it likes.
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn client() -> Client {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector)
}

/// Serves one request: for a `Host` the proxy does not serve a `403` ([`host_refused`]);
/// else `/__corral/…` by [`crate::browser`], anything else forwarded.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ProxyBody> {
    if let Some(refused) = host_refused(&shared, &req) {
        return refused;
    }
    if req.uri().path().starts_with(crate::browser::PREFIX) {
        return crate::browser::handle(shared, req).await;
    }
    forward(shared, req).await
}

async fn forward(shared: Arc<Shared>, mut req: Request<Incoming>) -> Response<ProxyBody> {
    // Dropped with this future when the client goes away: then it logs the exchange as
    // aborted.
    let mut exchange = Exchange::start(shared.clone(), &req);
    let request_id = exchange.request_id.clone();
    let client_upgrade = wants_upgrade(req.headers()).then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    rewrite_request(&shared, &mut parts, client_upgrade.is_some());
    if !parts.headers.contains_key(X_REQUEST_ID) {
        parts.headers.insert(X_REQUEST_ID, request_id.clone());
    }
    crate::inject::request(&shared, &mut parts);
    let body = Counted {
        inner: body,
        stats: exchange.request.clone(),
    };
    let out = Request::from_parts(parts, body.boxed_unsync());

    let sent = tokio::time::timeout(HEAD_TIMEOUT, shared.client.request(out)).await;
    let mut resp = match sent {
        Ok(Ok(resp)) => resp,
        Ok(Err(_)) if exchange.request.broke.load(Ordering::Relaxed) => {
            // The client stopped sending its body: it is gone, nobody reads this.
            exchange.finish(None, true);
            return plain(StatusCode::BAD_REQUEST, "the request body broke off\n");
        }
        Ok(Err(e)) => return exchange.fail(reason(&e)),
        Err(_) => {
            return exchange.fail(format!("no response within {} s", HEAD_TIMEOUT.as_secs()));
        }
    };
    exchange.head(resp.status(), resp.headers());

    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_upgrade) = client_upgrade else {
            return exchange.fail("bad response: 101 to a request that asked no upgrade".into());
        };
        let target_upgrade = hyper::upgrade::on(&mut resp);
        let idle = shared.spec.limits.upgraded_idle_timeout;
        tokio::spawn(splice(
            shared.stop.clone(),
            client_upgrade,
            target_upgrade,
            idle,
        ));
        exchange.finish(None, false);
        let (mut parts, _) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers, true);
        parts.headers.insert(X_CORRAL_REQUEST, request_id);
        return Response::from_parts(parts, full(Bytes::new()));
    }

    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers, false);
    rewrite_location(&shared, &mut parts.headers);
    rewrite_cookies(shared.target.authority.host(), &mut parts.headers);
    // Ours, whatever the target said (a proxy in front of another proxy: the outer one's).
    parts.headers.insert(X_CORRAL_REQUEST, request_id.clone());
    let path = exchange.entry.url.clone();
    let document = crate::inject::candidate(&shared, &parts, &body).then(|| {
        let given_up = Arc::new(AtomicBool::new(false));
        exchange.document = Some(given_up.clone());
        given_up
    });
    let body = Watched {
        inner: body,
        exchange,
    }
    .boxed_unsync();
    let (body, injected) = crate::inject::response(&shared, &path, &mut parts, body).await;
    if let Some(given_up) = document
        && !injected
    {
        // Passed untouched after all. Decided before the head goes out, but a small
        // document may have been read (and recorded) whole by then.
        given_up.store(true, Ordering::Relaxed);
        if let Ok(id) = request_id.to_str() {
            shared.traffic.not_a_document(id);
        }
    }
    Response::from_parts(parts, body)
}

/// The request id header the target gets (unless the request has its own).
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The proxy's request id of an exchange, on its response to the browser.
const X_CORRAL_REQUEST: HeaderName = HeaderName::from_static(crate::REQUEST_ID_HEADER);

/// The `403` for a request whose `Host` (or absolute-form authority) the proxy does not
/// serve, `None` for one it does.
///
/// DNS rebinding: a page on `evil.example`, its name re-pointed at 127.0.0.1, may read
/// whatever answers there as its own origin. A dev server guards against that by checking
/// `Host` (Vite answers 403), and the proxy, rewriting `Host` to the target's, would
/// switch that check off; so it checks in its stead. It serves loopback names
/// (`localhost`, `*.localhost`, 127.x IPs, `[::1]`), its own listen IP (any IP when it
/// listens on all addresses: an IP literal cannot be rebound) and the configured
/// `allowed_hosts`, on any port. A refused request is not forwarded and not in the
/// traffic log (what a hostile page sends is not the app's traffic); a `proxy.error`
/// event (one per [`ErrorGate::WINDOW`]) says requests were refused.
fn host_refused(shared: &Shared, req: &Request<Incoming>) -> Option<Response<ProxyBody>> {
    let host = req.headers().get(header::HOST).map(|h| h.to_str().ok());
    let authority = req.uri().authority().map(|a| a.as_str());
    let ok = |h: Option<&str>| h.is_some_and(|h| serves_host(shared, h));
    let refused = match (host, authority) {
        (Some(host), _) if !ok(host) => host.unwrap_or("?").to_owned(),
        (_, Some(authority)) if !ok(Some(authority)) => authority.to_owned(),
        (Some(_), _) => return None,
        (None, Some(_)) => return None,
        (None, None) => String::new(),
    };
    let name = &shared.spec.name;
    let what = match refused.is_empty() {
        true => "a request without a Host header".to_owned(),
        false => format!("a request for Host {refused:?}"),
    };
    let bare = host_name(&refused);
    let fix = match bare.is_empty() {
        true => String::new(),
        false => format!(
            " If you open the app under that name yourself, add it to the proxy's \
             config: [proxies.{name}] allowed_hosts = [{bare:?}]."
        ),
    };
    let text = format!(
        "Corral's dev proxy '{name}' refused {what}: it serves only localhost, 127.x, \
         [::1], its own address and the names in its allowed_hosts, so that a web page \
         under another name (DNS rebinding) cannot read your dev server.{fix}\n"
    );
    let why = "refused requests for a Host it does not serve (see allowed_hosts)";
    if let Some(repeats) = shared.error_gate.pass(why) {
        let mut event = Event::new(Kind::ProxyError, shared.source())
            .with("error", why)
            .with("host", refused.clone())
            .with(
                "url",
                req.uri().path().chars().take(200).collect::<String>(),
            );
        if repeats > 0 {
            event = event.with("repeats", repeats);
        }
        shared.bus.emit(event);
    }
    let mut resp = Response::new(full(text));
    *resp.status_mut() = StatusCode::FORBIDDEN;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Some(resp)
}

/// The name of `host` (`name[:port]`, `[v6][:port]`), lower case, without the port or a
/// trailing dot.
fn host_name(host: &str) -> String {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            match name.starts_with('[') || !name.contains(':') {
                true => name,
                false => host,
            }
        }
        _ => host,
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether the proxy answers requests for `host` (see [`host_refused`]).
fn serves_host(shared: &Shared, host: &str) -> bool {
    let name = host_name(host);
    if name.is_empty() {
        return false;
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let ip = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(std::net::IpAddr::V6),
        None => name
            .parse::<std::net::Ipv4Addr>()
            .ok()
            .map(std::net::IpAddr::V4),
    };
    if let Some(ip) = ip {
        let listen = shared.addr.ip();
        if ip.is_loopback() || ip == listen || listen.is_unspecified() {
            return true;
        }
    }
    shared.spec.allowed_hosts.contains(&name)
}

/// Copies between the browser's and the target's upgraded connections until either
/// closes, neither sends a byte for `idle`, or the proxy stops. The browser's upgraded
/// connection holds its slots under the connection cap (two: its descriptor and the
/// target's) until it is dropped here ([`corral_httpd`]).
async fn splice(
    stop: tokio_util::sync::CancellationToken,
    client: hyper::upgrade::OnUpgrade,
    target: hyper::upgrade::OnUpgrade,
    idle: Duration,
) {
    use hyper_util::rt::TokioIo;
    tokio::select! {
        _ = stop.cancelled() => {}
        joined = async { tokio::try_join!(client, target) } => {
            let Ok((client, target)) = joined else { return };
            let (client, target) = (TokioIo::new(client), TokioIo::new(target));
            tokio::select! {
                _ = corral_httpd::splice(client, target, idle) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}

/// Whether a request asks to switch protocols (`Connection: upgrade` and `Upgrade`).
fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE) && connection_tokens(headers).any(|t| t == "upgrade")
}

/// The tokens of every `Connection` header, lower case.
fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = String> + '_ {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
}

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1).
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Drops the hop-by-hop headers; on an upgrade, `Connection: upgrade` and `Upgrade`
/// stay, as the switch is the message's point.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = connection_tokens(headers)
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect();
    let protocols: Vec<HeaderValue> = match upgrade {
        true => headers.get_all(header::UPGRADE).iter().cloned().collect(),
        false => Vec::new(),
    };
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
    if !protocols.is_empty() {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        for p in protocols {
            headers.append(header::UPGRADE, p);
        }
    }
}

/// Points the request at the target and says where it came from.
fn rewrite_request(shared: &Shared, parts: &mut request::Parts, upgrade: bool) {
    let target = &shared.target;
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .filter(|p| p.starts_with('/'))
        .unwrap_or("/");
    let mut uri = hyper::http::uri::Parts::default();
    uri.scheme = Some(hyper::http::uri::Scheme::HTTP);
    uri.authority = Some(target.authority.clone());
    // The base is a parsed URI's path and `path` a parsed request's: together they
    // parse, and the URI they make is whole.
    uri.path_and_query = format!("{}{path}", target.base).parse().ok();
    if let Ok(uri) = Uri::from_parts(uri) {
        parts.uri = uri;
    }
    parts.version = hyper::Version::HTTP_11;

    let headers = &mut parts.headers;
    let browser_host = headers.get(header::HOST).cloned();
    strip_hop_by_hop(headers, upgrade);
    if (!shared.spec.preserve_host || browser_host.is_none())
        && let Ok(host) = HeaderValue::from_str(target.authority.as_str())
    {
        headers.insert(header::HOST, host);
    }
    if let Some(host) = browser_host {
        headers.insert("x-forwarded-host", host);
    }
    // No `X-Forwarded-For`: the browser is on this machine, and a target that trusts the
    // header from loopback (uvicorn does by default) would log the client as
    // `127.0.0.1:0` instead of the proxy's connection, whose port ties the target's
    // access line to the proxy's record. One the request brings passes untouched.
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
}

/// Points a `Location` at the target's own origin back at the proxy.
fn rewrite_location(shared: &Shared, headers: &mut HeaderMap) {
    let Some(location) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok()) else {
        return;
    };
    if let Some(new) = proxied_location(&shared.target, &shared.origin(), location)
        && let Ok(v) = HeaderValue::from_str(&new)
    {
        headers.insert(header::LOCATION, v);
    }
}

/// The `Location` the browser should get for `location`, when it must change: an
/// absolute `http://` URL at the target's authority (or at `localhost` / a loopback IP
/// with the target's port) moves to `origin`, less the target's base path; a path
/// under the base loses the base (the proxy serves the base at `/`).
fn proxied_location(target: &Target, origin: &str, location: &str) -> Option<String> {
    if location.starts_with('/') && !location.starts_with("//") {
        return below_base(&target.base, location);
    }
    let scheme = location.get(..7)?;
    if !scheme.eq_ignore_ascii_case("http://") {
        return None;
    }
    let rest = &location[7..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority: hyper::http::uri::Authority = rest[..end].parse().ok()?;
    let port = |a: &hyper::http::uri::Authority| a.port_u16().unwrap_or(80);
    let host = authority.host();
    let loopback = matches!(
        host.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "[::1]"
    );
    let same_host = host.eq_ignore_ascii_case(target.authority.host());
    if !((same_host || loopback) && port(&authority) == port(&target.authority)) {
        return None;
    }
    let path = match &rest[end..] {
        "" => "/".to_owned(),
        p if p.starts_with('/') => p.to_owned(),
        p => format!("/{p}"),
    };
    let path = below_base(&target.base, &path).unwrap_or(path);
    Some(format!("{origin}{path}"))
}

/// `path` without the base path it starts with; `None` when there is no base or
/// `path` is not under it.
fn below_base(base: &str, path: &str) -> Option<String> {
    if base.is_empty() {
        return None;
    }
    let rest = path.strip_prefix(base)?;
    match rest.as_bytes().first() {
        None => Some("/".to_owned()),
        Some(b'/') => Some(rest.to_owned()),
        Some(b'?' | b'#') => Some(format!("/{rest}")),
        Some(_) => None,
    }
}

/// Drops the `Domain` attribute of cookies bound to the target's host, so that they
/// bind to the proxy's host instead; other cookies pass as they are.
fn rewrite_cookies(target_host: &str, headers: &mut HeaderMap) {
    let cookies: Vec<HeaderValue> = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .cloned()
        .collect();
    let rewritten: Vec<Option<String>> = cookies
        .iter()
        .map(|c| without_domain(c.to_str().ok()?, target_host))
        .collect();
    if rewritten.iter().all(Option::is_none) {
        return;
    }
    headers.remove(header::SET_COOKIE);
    for (cookie, new) in cookies.into_iter().zip(rewritten) {
        let value = new
            .and_then(|n| HeaderValue::from_str(&n).ok())
            .unwrap_or(cookie);
        headers.append(header::SET_COOKIE, value);
    }
}

/// `cookie` without a `Domain=host` (or `.host`) attribute; `None` when it has none.
fn without_domain(cookie: &str, host: &str) -> Option<String> {
    let mut parts = cookie.split(';');
    let mut kept = vec![parts.next()?];
    let mut dropped = false;
    for attr in parts {
        let names_host = attr.split_once('=').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("domain")
                && v.trim().trim_start_matches('.').eq_ignore_ascii_case(host)
        });
        if names_host {
            dropped = true;
        } else {
            kept.push(attr);
        }
    }
    dropped.then(|| kept.join(";"))
}

/// A transport error in plain words, from the most telling error in its chain.
fn reason(err: &(dyn std::error::Error + 'static)) -> String {
    use std::io::ErrorKind as K;
    let mut last = err;
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            let words = match io.kind() {
                K::ConnectionRefused => Some("connection refused"),
                K::ConnectionReset => Some("connection reset"),
                K::ConnectionAborted => Some("connection aborted"),
                K::BrokenPipe | K::UnexpectedEof => Some("connection closed early"),
                K::TimedOut => Some("connection timed out"),
                K::HostUnreachable => Some("host unreachable"),
                K::NetworkUnreachable => Some("network unreachable"),
                K::AddrNotAvailable => Some("address not available"),
                _ => None,
            };
            if let Some(words) = words {
                return words.to_owned();
            }
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return "connection closed before the response".into();
            }
            if h.is_parse() || h.is_parse_status() || h.is_parse_too_large() {
                return format!("bad response: {h}");
            }
        }
        last = e;
        cur = e.source();
    }
    last.to_string()
}

/// The longest path and query the traffic log keeps of a request (cut on a character
/// boundary).
const URL_MAX: usize = 2 * 1024;

/// Whether another site's page sent the request: its `Sec-Fetch-Site` is `cross-site` or
/// `same-site` (another origin), unless it is a top-level navigation (a link the user
/// followed is the app's traffic). A request without the header (an old browser, curl)
/// counts as the app's own.
fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let site = text("sec-fetch-site").unwrap_or("");
    let elsewhere =
        site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site");
    elsewhere && !text("sec-fetch-mode").is_some_and(|m| m.eq_ignore_ascii_case("navigate"))
}

/// What one request and its response amount to, recorded in the traffic log once (when
/// the response ends, fails, or is dropped).
struct Exchange {
    shared: Arc<Shared>,
    started: Instant,
    started_at: SystemTime,
    entry: TrafficEntry,
    /// `entry.request_id` as a header value.
    request_id: HeaderValue,
    /// For an HTML document the script is to go into: set when it was passed untouched
    /// after all (then it is no page load).
    document: Option<Arc<AtomicBool>>,
    request: Arc<RequestStats>,
    /// For a response ≥ 400: its first bytes.
    excerpt: Option<Excerpt>,
    recorded: bool,
}

impl Exchange {
    fn start(shared: Arc<Shared>, req: &Request<Incoming>) -> Exchange {
        let started_at = SystemTime::now();
        let mut url = req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().to_string(), |p| p.to_string());
        if url.len() > URL_MAX {
            let mut end = URL_MAX;
            while !url.is_char_boundary(end) {
                end -= 1;
            }
            url.truncate(end);
        }
        let cross_site = cross_site(req.headers());
        let request_id = shared.traffic.next_request_id();
        // Hex, a dash and digits: always a valid header value.
        let request_header = HeaderValue::from_str(&request_id)
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        let client_request_id = req.headers().get(X_REQUEST_ID).map(|v| {
            let mut id = String::from_utf8_lossy(v.as_bytes()).into_owned();
            if id.len() > crate::traffic::CLIENT_REQUEST_ID_MAX {
                let mut end = crate::traffic::CLIENT_REQUEST_ID_MAX;
                while !id.is_char_boundary(end) {
                    end -= 1;
                }
                id.truncate(end);
            }
            id
        });
        let entry = TrafficEntry {
            ts: corral_events::rfc3339(started_at),
            method: req.method().to_string(),
            url,
            cross_site,
            origin: req
                .headers()
                .get(header::ORIGIN)
                .and_then(|o| o.to_str().ok())
                .filter(|_| cross_site)
                .map(|o| o.chars().take(200).collect()),
            request_id,
            client_request_id,
            request_headers: Headers::capture(req.headers()),
            ..TrafficEntry::default()
        };
        Exchange {
            shared,
            started: Instant::now(),
            started_at,
            entry,
            request_id: request_header,
            document: None,
            request: Arc::default(),
            excerpt: None,
            recorded: false,
        }
    }

    /// The response head arrived.
    fn head(&mut self, status: StatusCode, headers: &HeaderMap) {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        self.entry.status = Some(status.as_u16());
        self.entry.headers_ms = Some(ms(self.started.elapsed()));
        self.entry.content_type = text(header::CONTENT_TYPE).map(str::to_owned);
        self.entry.response_headers = Headers::capture(headers);
        if status.as_u16() >= 400 {
            self.excerpt = Some(Excerpt::new(text(header::CONTENT_ENCODING)));
        }
    }

    /// A chunk of the response body went by.
    fn chunk(&mut self, data: &[u8]) {
        self.entry.response_bytes += data.len() as u64;
        if let Some(excerpt) = &mut self.excerpt {
            excerpt.push(data);
        }
    }

    /// A transport error before the response head: logged, reported, and a `502`.
    fn fail(mut self, why: String) -> Response<ProxyBody> {
        let mut page = bad_gateway(&self.shared, &why);
        page.headers_mut()
            .insert(X_CORRAL_REQUEST, self.request_id.clone());
        self.finish(Some(why), false);
        page
    }

    /// Records the exchange (once); an `error` is also a `proxy.error` event.
    fn finish(&mut self, error: Option<String>, aborted: bool) {
        if std::mem::replace(&mut self.recorded, true) {
            return;
        }
        let mut entry = std::mem::take(&mut self.entry);
        entry.total_ms = ms(self.started.elapsed());
        entry.request_bytes = self.request.bytes.load(Ordering::Relaxed);
        entry.aborted = aborted;
        entry.document = self
            .document
            .as_ref()
            .is_some_and(|given_up| !given_up.load(Ordering::Relaxed));
        if let Some(excerpt) = self.excerpt.take() {
            (entry.excerpt, entry.message) = excerpt.finish(entry.content_type.as_deref());
        }
        if let Some(why) = &error
            && let Some(repeats) = self.shared.error_gate.pass(why)
        {
            let shared = &self.shared;
            let mut event = Event::new(Kind::ProxyError, shared.source())
                .with("error", why.clone())
                .with("method", entry.method.clone())
                .with("url", entry.url.clone())
                .with("target", shared.target.url.clone());
            if let Some(status) = entry.status {
                event = event.with("status", status);
            }
            if repeats > 0 {
                event = event.with("repeats", repeats);
            }
            shared.bus.emit(event);
        }
        // A 5xx from the target: what `get_errors` lists, live in `events -f` too.
        if error.is_none()
            && let Some(status) = entry.status.filter(|s| *s >= 500)
        {
            let path = entry.url.split('?').next().unwrap_or("");
            let key = format!("{} {path} {status}", entry.method);
            if let Some(repeats) = self.shared.failed_gate.pass(&key) {
                let shared = &self.shared;
                let mut event = Event::new(Kind::ProxyRequestFailed, shared.source())
                    .with("method", entry.method.clone())
                    .with("url", entry.url.clone())
                    .with("status", status)
                    .with("total_ms", entry.total_ms);
                if let Some(m) = &entry.message {
                    event = event.with("message", m.clone());
                }
                if repeats > 0 {
                    event = event.with("repeats", repeats);
                }
                shared.bus.emit(event);
            }
        }
        entry.error = error;
        self.shared.traffic.record(self.started_at, entry);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.finish(None, true);
    }
}

/// Milliseconds to a tenth.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}

/// What the request body did on its way to the target.
#[derive(Default)]
struct RequestStats {
    bytes: AtomicU64,
    /// Reading it from the client failed: the client went away mid-upload.
    broke: AtomicBool,
}

/// The request body, counted as it streams to the target.
struct Counted {
    inner: Incoming,
    stats: Arc<RequestStats>,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                let n = f.data_ref().map_or(0, Bytes::len) as u64;
                self.stats.bytes.fetch_add(n, Ordering::Relaxed);
            }
            Some(Err(_)) => self.stats.broke.store(true, Ordering::Relaxed),
            None => {}
        }
        Poll::Ready(frame.map(|f| f.map_err(BoxError::from)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The target's response body on its way to the browser: passed on frame by frame,
/// counted, an error response's first bytes kept, and the exchange recorded when it
/// ends (or the browser drops it).
struct Watched {
    inner: Incoming,
    exchange: Exchange,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.exchange.chunk(data);
                }
                // hyper stops polling a body that says it has ended.
                if this.inner.is_end_stream() {
                    this.exchange.finish(None, false);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                let why = format!("the response broke off: {}", reason(&e));
                this.exchange.finish(Some(why), false);
                Poll::Ready(Some(Err(e.into())))
            }
            None => {
                this.exchange.finish(None, false);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let ended = self.inner.is_end_stream();
        self.exchange.finish(None, !ended);
    }
}

/// The `502` page for a transport error: what happened, that Corral answered (not the
/// app), and what to check.
fn bad_gateway(shared: &Shared, why: &str) -> Response<ProxyBody> {
    let headline = corral_httpd::escape_html(&format!(
        "Corral's dev proxy '{}' could not reach {}: {why}",
        shared.spec.name, shared.target.url
    ));
    let target = corral_httpd::escape_html(&shared.target.url);
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>502 Bad Gateway</title>\n<style>body{{font:16px/1.5 system-ui,sans-serif;\
         max-width:44rem;margin:4rem auto;padding:0 1rem;color:#222}}\
         code{{background:#eee;padding:0 .3em}}</style></head>\n<body>\n\
         <h1>502 Bad Gateway</h1>\n<p><strong>{headline}</strong></p>\n\
         <p>This page is Corral's, not your app's: Corral proxied the request and the \
         dev server did not answer it.</p>\n\
         <p>Is the dev server running and listening at {target}? \
         <code>corral ps</code> shows what runs; its output says why it stopped.</p>\n\
         </body></html>\n"
    );
    let mut resp = Response::new(full(page));
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn plain(status: StatusCode, text: &'static str) -> Response<ProxyBody> {
    let mut resp = Response::new(full(text));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn locations_at_the_target_point_at_the_proxy() {
        let t = target("http://127.0.0.1:5173");
        let o = "http://127.0.0.1:4000";
        let p = |l| proxied_location(&t, o, l);
        assert_eq!(
            p("http://127.0.0.1:5173/a?b=1#c").as_deref(),
            Some("http://127.0.0.1:4000/a?b=1#c")
        );
        assert_eq!(
            p("HTTP://localhost:5173").as_deref(),
            Some("http://127.0.0.1:4000/")
        );
        assert_eq!(
            p("http://[::1]:5173?x").as_deref(),
            Some("http://127.0.0.1:4000/?x")
        );
        assert_eq!(p("http://localhost:5174/a"), None);
        assert_eq!(p("https://127.0.0.1:5173/a"), None);
        assert_eq!(p("http://example.com/a"), None);
        assert_eq!(p("/a"), None);
        assert_eq!(p("//example.com/a"), None);
    }

    #[test]
    fn locations_under_the_base_lose_it() {
        let t = target("http://localhost:8080/app/");
        let o = "http://127.0.0.1:4000";
        let p = |l| proxied_location(&t, o, l);
        assert_eq!(
            p("http://localhost:8080/app/login?n=1").as_deref(),
            Some("http://127.0.0.1:4000/login?n=1")
        );
        assert_eq!(
            p("http://localhost/app").as_deref(),
            None,
            "port 80 is not the target's"
        );
        assert_eq!(
            p("http://localhost:8080/other").as_deref(),
            Some("http://127.0.0.1:4000/other")
        );
        assert_eq!(p("/app/login").as_deref(), Some("/login"));
        assert_eq!(p("/app?x").as_deref(), Some("/?x"));
        assert_eq!(p("/application"), None);
    }

    #[test]
    fn only_cookies_for_the_target_host_lose_their_domain() {
        assert_eq!(
            without_domain("a=1; Domain=.LOCALHOST; Path=/; HttpOnly", "localhost").as_deref(),
            Some("a=1; Path=/; HttpOnly")
        );
        assert_eq!(without_domain("a=1; Domain=example.com", "localhost"), None);
        assert_eq!(
            without_domain("domain=localhost; Path=/", "localhost"),
            None
        );
    }

    #[test]
    fn hop_by_hop_headers_go_and_the_ones_connection_names() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, "keep-alive, X-Hop".parse().unwrap());
        h.insert("x-hop", "1".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert(header::TE, "trailers".parse().unwrap());
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        h.insert("x-end", "2".parse().unwrap());
        let mut up = h.clone();
        strip_hop_by_hop(&mut h, false);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-end"]);

        up.append(header::CONNECTION, "Upgrade".parse().unwrap());
        up.insert(header::UPGRADE, "websocket".parse().unwrap());
        assert!(wants_upgrade(&up));
        strip_hop_by_hop(&mut up, true);
        assert_eq!(up.get(header::CONNECTION).unwrap(), "upgrade");
        assert_eq!(up.get(header::UPGRADE).unwrap(), "websocket");
        assert_eq!(up.len(), 3);
    }
}

/// Lets one `proxy.error` per reason through per [`ErrorGate::WINDOW`]: a page polling a
/// dev server that is down would otherwise write an event per poll into the journal. The
/// traffic log still records every request; the event that opens the next window says
/// how many were held back (`repeats`).
#[derive(Default)]
pub(crate) struct ErrorGate {
    last: std::sync::Mutex<Option<(String, Instant, u64)>>,
}

impl ErrorGate {
    const WINDOW: Duration = Duration::from_secs(10);

    /// `Some(held back since the last event)` when an event for `why` is to be emitted
    /// now, `None` when it repeats the last one within the window.
    pub(crate) fn pass(&self, why: &str) -> Option<u64> {
        let mut last = self.last.lock().unwrap();
        let now = Instant::now();
        match last.as_mut() {
            Some((reason, since, held)) if reason == why && now - *since < Self::WINDOW => {
                *held += 1;
                None
            }
            Some((reason, _, held)) if reason == why => {
                let repeats = std::mem::take(held);
                *last = Some((why.to_owned(), now, 0));
                Some(repeats)
            }
            _ => {
                *last = Some((why.to_owned(), now, 0));
                Some(0)
            }
        }
    }
}

/// Lets one `proxy.request_failed` per request (method, path, status) through per
/// [`ErrorGate::WINDOW`], for any number of such requests at once (a page polling two
/// failing endpoints): each key has its own window; at most [`FailedGate::KEYS`] are
/// remembered, the stalest forgotten first.
#[derive(Default)]
pub(crate) struct FailedGate {
    seen: std::sync::Mutex<std::collections::HashMap<String, (Instant, u64)>>,
}

impl FailedGate {
    const KEYS: usize = 256;

    /// As [`ErrorGate::pass`], per key.
    pub(crate) fn pass(&self, key: &str) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap();
        let now = Instant::now();
        if let Some((since, held)) = seen.get_mut(key) {
            if now - *since < ErrorGate::WINDOW {
                *held += 1;
                return None;
            }
            let repeats = std::mem::take(held);
            *since = now;
            return Some(repeats);
        }
        if seen.len() >= Self::KEYS {
            seen.retain(|_, (since, _)| now - *since < ErrorGate::WINDOW);
            if seen.len() >= Self::KEYS
                && let Some(stalest) = seen
                    .iter()
                    .min_by_key(|(_, (t, _))| *t)
                    .map(|(k, _)| k.clone())
            {
                seen.remove(&stalest);
            }
        }
        seen.insert(key.to_owned(), (now, 0));
        Some(0)
    }
}

#[cfg(test)]
mod gate_tests {
    use super::{ErrorGate, FailedGate};

    #[test]
    fn each_failing_request_has_its_own_window_and_the_keys_are_bounded() {
        let gate = FailedGate::default();
        assert_eq!(gate.pass("GET /a 500"), Some(0));
        assert_eq!(gate.pass("GET /b 500"), Some(0));
        assert_eq!(gate.pass("GET /a 500"), None);
        assert_eq!(gate.pass("GET /b 500"), None);
        gate.seen.lock().unwrap().get_mut("GET /a 500").unwrap().0 -= ErrorGate::WINDOW;
        assert_eq!(gate.pass("GET /a 500"), Some(1));
        for i in 0..1000 {
            gate.pass(&format!("GET /{i} 500"));
        }
        assert!(gate.seen.lock().unwrap().len() <= FailedGate::KEYS);
    }

    #[test]
    fn a_repeated_reason_passes_once_per_window_and_another_reason_at_once() {
        let gate = ErrorGate::default();
        assert_eq!(gate.pass("connection refused"), Some(0));
        assert_eq!(gate.pass("connection refused"), None);
        assert_eq!(gate.pass("connection refused"), None);
        assert_eq!(gate.pass("connection reset"), Some(0));
        // The window of a reason seen again after another one starts afresh.
        assert_eq!(gate.pass("connection refused"), Some(0));
        // An expired window lets the next one through with the count held back.
        *gate.last.lock().unwrap() = Some((
            "connection refused".into(),
            std::time::Instant::now() - ErrorGate::WINDOW,
            4,
        ));
        assert_eq!(gate.pass("connection refused"), Some(4));
        assert_eq!(gate.pass("connection refused"), None);
    }
}
