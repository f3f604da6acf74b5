//! The dev proxy: a reverse proxy in front of a dev server that records the traffic and
//! captures the errors of the pages it serves.
//!
//! # Theory of operation
//!
//! A [`Proxy`] listens on its own loopback port and serves every connection with the same
//! hyper stack as the MCP endpoint ([`corral_httpd`]). Each request goes one of two ways:
//!
//! * `/__corral/…` is the proxy's own: the browser error script and the endpoint it
//!   reports to ([`browser`]).
//! * Everything else is forwarded to the target ([`forward`]): bodies stream both ways,
//!   upgrades (WebSocket) are spliced, `Host` becomes the target's unless
//!   `preserve_host`, `X-Forwarded-Host` and `-Proto` are added (not `-For`), the
//!   exchange's request id goes up as `X-Request-Id` (unless the request has one) and
//!   back as [`REQUEST_ID_HEADER`], and redirects and cookies that point at the target
//!   are pointed back at the proxy. A transport error becomes a 502 page and a
//!   `proxy.error` event.
//!
//! On the way back an HTML document gets the error script ([`inject`], streaming with
//! lol_html, decoding gzip/br/deflate); every other response passes byte for byte, through
//! a body wrapper that times it, counts it, and keeps the first bytes of an error
//! response for the [`traffic`] log.
//!
//! The logs (traffic and browser errors) belong to the proxy's name, not to one run of
//! it: [`Proxies`] keeps them for the daemon's life, through stops and restarts, and
//! [`Proxies::logs`] hands them out, the stopped proxies' too.

pub mod browser;
pub mod codec;
mod forward;
pub mod headers;
pub mod inject;
mod sourcemap;
mod stack;
pub mod traffic;

pub use stack::FRAMES_MAPPED;

use bytes::Bytes;
use corral_events::rows::ProxyRow;
use corral_events::{Event, EventBus, Kind, Source};
use http_body_util::combinators::UnsyncBoxBody;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The response header that carries the proxy's id of the exchange to the browser
/// ([`traffic::TrafficEntry::request_id`]); the injected script sends it back with the
/// error it reports about that request ([`browser::BrowserEntry::request`]).
pub const REQUEST_ID_HEADER: &str = "x-corral-request";

/// An error inside a body stream (the target's, a decoder's, the rewriter's).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every response body the proxy sends: the target's, rewritten, or its own.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A whole body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    use http_body_util::BodyExt;
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// What a proxy is told to be: a `[proxies.NAME]` table or `corral proxy NAME --target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySpec {
    pub name: String,
    /// `http://host:port[/base]`.
    pub target: String,
    /// `IP:PORT`; port 0 picks a free one.
    pub listen: String,
    /// Send the browser's `Host` to the target instead of the target's own.
    pub preserve_host: bool,
    /// Insert the error script into HTML documents.
    pub inject: bool,
    /// Requests kept in the traffic log.
    pub traffic_ring: usize,
    /// Host names (lower case, no port) served besides loopback names and the listen IP;
    /// see [`forward`]'s host check.
    pub allowed_hosts: Vec<String>,
    /// Its connections' limits ([`proxy_limits`] unless a test or an embedder sets
    /// others): the cap (an upgraded connection takes two slots, for its descriptor and
    /// its target's), timeouts, the head limit, and how long an upgraded connection may
    /// stay silent.
    pub limits: corral_httpd::Limits,
}

impl ProxySpec {
    /// A spec with the defaults for everything but the name, target and listen address.
    pub fn new(name: &str, target: &str, listen: &str) -> ProxySpec {
        ProxySpec {
            name: name.to_owned(),
            target: target.to_owned(),
            listen: listen.to_owned(),
            preserve_host: false,
            inject: true,
            traffic_ring: 1000,
            allowed_hosts: Vec::new(),
            limits: proxy_limits(),
        }
    }
}

impl From<&corral_config::ProxyConfig> for ProxySpec {
    fn from(c: &corral_config::ProxyConfig) -> ProxySpec {
        ProxySpec {
            name: c.name.clone(),
            target: c.target.clone(),
            listen: c.listen.clone(),
            preserve_host: c.preserve_host,
            inject: c.inject,
            traffic_ring: c.traffic_ring as usize,
            allowed_hosts: c.allowed_hosts.clone(),
            limits: proxy_limits(),
        }
    }
}

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("proxy '{name}': target {target:?} is not an http:// URL ({why})")]
    Target {
        name: String,
        target: String,
        why: String,
    },
    #[error("proxy '{name}': cannot listen on {listen}: {source}")]
    Listen {
        name: String,
        listen: String,
        source: std::io::Error,
    },
}

/// The target, parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// `host:port` as written (the `Host` header the target expects).
    pub authority: hyper::http::uri::Authority,
    /// The path prefix every request is sent under (`""` for none, never ending in `/`).
    pub base: String,
    /// The URL as given, for display.
    pub url: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let uri: hyper::Uri = url.parse().map_err(|e| format!("{e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err("only http:// targets can be proxied".into());
        }
        let authority = uri.authority().cloned().ok_or("no host")?;
        if uri.query().is_some() {
            return Err("a target cannot have a query".into());
        }
        let base = uri.path().trim_end_matches('/').to_owned();
        Ok(Target {
            authority,
            base,
            url: url.to_owned(),
        })
    }
}

/// What every request of one proxy shares.
pub(crate) struct Shared {
    pub spec: ProxySpec,
    pub target: Target,
    /// Where the proxy listens (the address redirects and cookies are pointed back at).
    pub addr: SocketAddr,
    pub bus: EventBus,
    pub traffic: Arc<traffic::TrafficLog>,
    pub browser: Arc<browser::BrowserLog>,
    pub client: forward::Client,
    /// Ends the proxy's upgraded connections (WebSocket) when it stops.
    pub stop: CancellationToken,
    /// Holds back `proxy.error` events that repeat the last one.
    pub error_gate: forward::ErrorGate,
    /// The same for `proxy.request_failed` (by method, path and status).
    pub failed_gate: forward::FailedGate,
    /// The secret the injected tag carries (`data-k`) and reports must send back: only a
    /// page the proxy served (a reader of its documents) knows it ([`browser`]).
    pub key: String,
    /// Holds back `proxy.error` events of a limit that tripped within its window.
    pub limits: codec::LimitGate,
}

impl Shared {
    pub(crate) fn source(&self) -> Source {
        Source::Proxy(self.spec.name.clone())
    }

    /// `http://ADDR`, the proxy's own origin.
    pub(crate) fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// One running dev proxy. Dropping it does not stop it: call [`Proxy::stop`].
pub struct Proxy {
    shared: Arc<Shared>,
    started: Instant,
    started_at: SystemTime,
    /// The logs' counts when this run started (they may hold earlier runs'), for its row.
    counted_before: (u64, u64, u64),
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Binds the listen address and serves until [`Proxy::stop`]; emits `proxy.started`.
    /// Its logs are new (see [`Proxies`] for logs that outlive a run).
    pub async fn start(spec: ProxySpec, bus: EventBus) -> Result<Proxy, StartError> {
        let traffic = Arc::new(traffic::TrafficLog::new(spec.traffic_ring));
        let browser = Arc::new(browser::BrowserLog::new(browser::RING));
        Proxy::start_with_logs(spec, bus, traffic, browser).await
    }

    /// [`Proxy::start`], writing into logs that may hold an earlier run's records (the
    /// traffic ring takes the spec's size).
    pub(crate) async fn start_with_logs(
        spec: ProxySpec,
        bus: EventBus,
        traffic: Arc<traffic::TrafficLog>,
        browser: Arc<browser::BrowserLog>,
    ) -> Result<Proxy, StartError> {
        let target = Target::parse(&spec.target).map_err(|why| StartError::Target {
            name: spec.name.clone(),
            target: spec.target.clone(),
            why,
        })?;
        let listener =
            TcpListener::bind(&spec.listen)
                .await
                .map_err(|source| StartError::Listen {
                    name: spec.name.clone(),
                    listen: spec.listen.clone(),
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen {
            name: spec.name.clone(),
            listen: spec.listen.clone(),
            source,
        })?;
        let stop = CancellationToken::new();
        traffic.set_capacity(spec.traffic_ring);
        // Maps read from an earlier run's target are not this one's.
        browser.maps.clear();
        let counted_before = (traffic.total(), traffic.errors(), browser.total());
        let shared = Arc::new(Shared {
            traffic,
            browser,
            client: forward::client(),
            spec,
            target,
            addr,
            bus,
            stop: stop.clone(),
            error_gate: forward::ErrorGate::default(),
            failed_gate: forward::FailedGate::default(),
            key: browser::new_key(),
            limits: codec::LimitGate::default(),
        });
        shared.bus.emit(
            Event::new(Kind::ProxyStarted, shared.source())
                .with("listen", addr.to_string())
                .with("url", shared.origin())
                .with("target", shared.target.url.clone()),
        );
        let handler_shared = shared.clone();
        let task = tokio::spawn(corral_httpd::serve(
            listener,
            shared.spec.limits.clone(),
            stop.cancelled_owned(),
            move |req| forward::handle(handler_shared.clone(), req),
        ));
        Ok(Proxy {
            shared,
            started: Instant::now(),
            started_at: whole_milliseconds(SystemTime::now()),
            counted_before,
            task,
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.spec.name
    }

    pub fn spec(&self) -> &ProxySpec {
        &self.shared.spec
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://ADDR`, what a browser opens.
    pub fn url(&self) -> String {
        self.shared.origin()
    }

    /// When it started listening: what its logs hold from before is an earlier run's
    /// (under [`Proxies`], a proxy started again under the same name writes on into the
    /// same logs). In whole milliseconds, as its records' timestamps are: a request in its
    /// first millisecond is not before it.
    pub fn started_at(&self) -> SystemTime {
        self.started_at
    }

    pub fn traffic(&self) -> &traffic::TrafficLog {
        &self.shared.traffic
    }

    pub fn browser(&self) -> &browser::BrowserLog {
        &self.shared.browser
    }

    /// The key pages of this proxy send with their error reports (it is in the tag the
    /// proxy injects); for tests and in-process tools.
    pub fn report_key(&self) -> &str {
        &self.shared.key
    }

    /// Its row in `corral ps`: the counts are this run's.
    pub fn row(&self) -> ProxyRow {
        let (requests, errors, browser_errors) = self.counted_before;
        ProxyRow {
            name: self.shared.spec.name.clone(),
            url: self.url(),
            target: self.shared.target.url.clone(),
            uptime_s: self.started.elapsed().as_secs(),
            started_at: corral_events::rfc3339(self.started_at),
            requests: self.shared.traffic.total().saturating_sub(requests),
            errors: self.shared.traffic.errors().saturating_sub(errors),
            browser_errors: self.shared.browser.total().saturating_sub(browser_errors),
        }
    }

    /// Stops listening, ends its connections (upgraded ones included), and emits
    /// `proxy.stopped`.
    pub async fn stop(self) {
        self.shared.stop.cancel();
        let _ = self.task.await;
        self.shared
            .bus
            .emit(Event::new(Kind::ProxyStopped, self.shared.source()));
    }
}

/// `t` without its sub-millisecond part.
fn whole_milliseconds(t: SystemTime) -> SystemTime {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(d.as_millis() as u64),
        Err(_) => t,
    }
}

/// Connection limits for a proxy: the MCP endpoint's, but an idle keep-alive connection
/// may wait as long as a browser keeps one (a dev page polls, HMR reconnects).
pub fn proxy_limits() -> corral_httpd::Limits {
    corral_httpd::Limits {
        header_timeout: std::time::Duration::from_secs(120),
        ..corral_httpd::Limits::within_fd_limit()
    }
}

/// The proxies of a daemon: the configured ones (`[proxies.NAME]`, replaced by a reload),
/// the running ones, and the logs of every proxy that ran, by name. Cloning shares them.
///
/// # Logs outlive runs
///
/// A proxy's traffic and browser logs belong to its name for the daemon's life: stopping
/// it keeps them (still queryable through [`Proxies::logs`]), and a proxy started again
/// under the same name writes on into them, its ids (entry ids and request ids) going on
/// from where they were. Memory stays bounded by the rings' caps, per name; the logs of
/// at most [`STOPPED_LOGS_KEPT`] stopped proxies are kept, those stopped longest ago
/// going first.
#[derive(Clone)]
pub struct Proxies {
    inner: Arc<Registry>,
}

/// How many stopped proxies' logs [`Proxies`] keeps (ad-hoc proxies under ever new names
/// must not grow the daemon without bound).
pub const STOPPED_LOGS_KEPT: usize = 32;

struct Registry {
    bus: EventBus,
    running: Mutex<BTreeMap<String, Arc<Proxy>>>,
    configured: Mutex<BTreeMap<String, ProxySpec>>,
    /// Locked after `running` when both are.
    logs: Mutex<BTreeMap<String, Kept>>,
}

/// The logs of one proxy name, and what its last run was.
struct Kept {
    traffic: Arc<traffic::TrafficLog>,
    browser: Arc<browser::BrowserLog>,
    target: String,
    url: String,
    started_at: SystemTime,
    stopped_at: Option<SystemTime>,
}

/// The logs of one proxy, running or stopped, from [`Proxies::logs`].
#[derive(Clone)]
pub struct ProxyLogs {
    pub name: String,
    /// Its traffic, across its runs under this name.
    pub traffic: Arc<traffic::TrafficLog>,
    /// The errors its pages reported, across its runs under this name.
    pub browser: Arc<browser::BrowserLog>,
    /// Whether it runs now.
    pub running: bool,
    /// When it (last) started listening, in whole milliseconds ([`Proxy::started_at`]):
    /// what the logs hold from before is an earlier run's.
    pub started_at: SystemTime,
    /// When it was last stopped; `None` while it runs.
    pub stopped_at: Option<SystemTime>,
    /// Its (last) target, as configured.
    pub target: String,
    /// Where it (last) listened: `http://ADDR`.
    pub url: String,
}

impl Proxies {
    /// No proxies yet; each one started emits its events on `bus`.
    pub fn new(bus: EventBus) -> Proxies {
        Proxies {
            inner: Arc::new(Registry {
                bus,
                running: Mutex::default(),
                configured: Mutex::default(),
                logs: Mutex::default(),
            }),
        }
    }

    /// Replaces the configured proxies (what `start_configured` starts by name).
    pub fn set_configured(&self, specs: impl IntoIterator<Item = ProxySpec>) {
        *self.inner.configured.lock().unwrap() =
            specs.into_iter().map(|s| (s.name.clone(), s)).collect();
    }

    /// The configured proxy of that name.
    pub fn configured(&self, name: &str) -> Option<ProxySpec> {
        self.inner.configured.lock().unwrap().get(name).cloned()
    }

    /// The names of the configured proxies.
    pub fn configured_names(&self) -> Vec<String> {
        self.inner
            .configured
            .lock()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    /// Starts `spec` unless a proxy of that name runs; it writes on into the logs an
    /// earlier proxy of that name left, if any.
    pub async fn start(&self, spec: ProxySpec) -> Result<Arc<Proxy>, String> {
        if self.get(&spec.name).is_some() {
            return Err(format!(
                "a proxy named '{}' runs already; stop it first or pick another name",
                spec.name
            ));
        }
        let name = spec.name.clone();
        let (traffic, browser) = {
            let logs = self.inner.logs.lock().unwrap();
            match logs.get(&name) {
                Some(kept) => (kept.traffic.clone(), kept.browser.clone()),
                None => (
                    Arc::new(traffic::TrafficLog::new(spec.traffic_ring)),
                    Arc::new(browser::BrowserLog::new(browser::RING)),
                ),
            }
        };
        let proxy = Proxy::start_with_logs(spec, self.inner.bus.clone(), traffic, browser)
            .await
            .map_err(|e| e.to_string())?;
        let proxy = Arc::new(proxy);
        let raced = {
            let mut running = self.inner.running.lock().unwrap();
            match running.contains_key(&name) {
                true => true,
                false => {
                    running.insert(name.clone(), proxy.clone());
                    self.inner.logs.lock().unwrap().insert(
                        name.clone(),
                        Kept {
                            traffic: proxy.shared.traffic.clone(),
                            browser: proxy.shared.browser.clone(),
                            target: proxy.shared.target.url.clone(),
                            url: proxy.url(),
                            started_at: proxy.started_at,
                            stopped_at: None,
                        },
                    );
                    false
                }
            }
        };
        if raced {
            stop_shared(proxy).await;
            return Err(format!("a proxy named '{name}' was started meanwhile"));
        }
        Ok(proxy)
    }

    /// Starts the configured proxy `name`.
    pub async fn start_configured(&self, name: &str) -> Result<Arc<Proxy>, String> {
        match self.configured(name) {
            Some(spec) => self.start(spec).await,
            None => Err(self.unknown(name)),
        }
    }

    /// Starts every configured proxy not running yet; each one that cannot start is a
    /// `proxy.error` event and a message in the answer (the rest start regardless).
    pub async fn start_all_configured(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for name in self.configured_names() {
            if self.get(&name).is_some() {
                continue;
            }
            if let Err(e) = self.start_configured(&name).await {
                self.inner.bus.emit(
                    Event::new(Kind::ProxyError, Source::Proxy(name.clone()))
                        .with("error", e.clone()),
                );
                problems.push(e);
            }
        }
        problems
    }

    /// The refusal for a name that is neither running nor configured.
    pub fn unknown(&self, name: &str) -> String {
        let mut names = self.configured_names();
        for n in self.names() {
            if !names.contains(&n) {
                names.push(n);
            }
        }
        match names.is_empty() {
            true => format!("no proxy named '{name}'; no proxies are configured or running"),
            false => format!("no proxy named '{name}'; proxies: {}", names.join(", ")),
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<Proxy>> {
        self.inner.running.lock().unwrap().get(name).cloned()
    }

    /// The running proxies' names.
    pub fn names(&self) -> Vec<String> {
        self.inner.running.lock().unwrap().keys().cloned().collect()
    }

    /// The running proxies.
    pub fn list(&self) -> Vec<Arc<Proxy>> {
        self.inner
            .running
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }

    /// The logs of every proxy that ran in this registry, running or stopped, by name:
    /// what `get_errors` gathers from, so that stopping or restarting a proxy does not
    /// make its pages' errors vanish.
    pub fn logs(&self) -> Vec<ProxyLogs> {
        let running = self.inner.running.lock().unwrap();
        let logs = self.inner.logs.lock().unwrap();
        logs.iter()
            .map(|(name, kept)| ProxyLogs {
                name: name.clone(),
                traffic: kept.traffic.clone(),
                browser: kept.browser.clone(),
                running: running.contains_key(name),
                started_at: kept.started_at,
                stopped_at: kept.stopped_at,
                target: kept.target.clone(),
                url: kept.url.clone(),
            })
            .collect()
    }

    /// The logs of the proxy `name`, running or stopped ([`Proxies::logs`]).
    pub fn logs_of(&self, name: &str) -> Option<ProxyLogs> {
        self.logs().into_iter().find(|l| l.name == name)
    }

    /// Stops the named proxy (its logs stay); `false` when none runs by that name.
    pub async fn stop(&self, name: &str) -> bool {
        let Some(proxy) = self.inner.running.lock().unwrap().remove(name) else {
            return false;
        };
        self.stopped(&proxy);
        stop_shared(proxy).await;
        true
    }

    /// Stops every proxy (their logs stay).
    pub async fn stop_all(&self) {
        let all: Vec<_> = std::mem::take(&mut *self.inner.running.lock().unwrap())
            .into_values()
            .collect();
        for proxy in all {
            self.stopped(&proxy);
            stop_shared(proxy).await;
        }
    }

    /// Notes in its logs' record that `proxy` stopped, and forgets the logs of the
    /// stopped proxies past [`STOPPED_LOGS_KEPT`], those stopped longest ago first.
    fn stopped(&self, proxy: &Proxy) {
        // Decoded source maps are memory a stopped proxy has no use for.
        proxy.shared.browser.maps.clear();
        let mut logs = self.inner.logs.lock().unwrap();
        if let Some(kept) = logs.get_mut(proxy.name())
            && Arc::ptr_eq(&kept.traffic, &proxy.shared.traffic)
        {
            kept.stopped_at = Some(SystemTime::now());
        }
        let mut stopped: Vec<(SystemTime, String)> = logs
            .iter()
            .filter_map(|(name, kept)| Some((kept.stopped_at?, name.clone())))
            .collect();
        if stopped.len() > STOPPED_LOGS_KEPT {
            stopped.sort();
            for (_, name) in stopped.iter().take(stopped.len() - STOPPED_LOGS_KEPT) {
                logs.remove(name);
            }
        }
    }
}

/// Stops a proxy another holder may still reference (a request in flight on a tool call):
/// cancelling is shared, so it stops at once either way.
async fn stop_shared(proxy: Arc<Proxy>) {
    match Arc::try_unwrap(proxy) {
        Ok(p) => p.stop().await,
        Err(shared) => {
            shared.shared.stop.cancel();
            shared
                .shared
                .bus
                .emit(Event::new(Kind::ProxyStopped, shared.shared.source()));
        }
    }
}

/// Entry points for the fuzz targets (`crates/fuzz-targets`): the parsers of what a
/// target or a page sends, without a running proxy. Not an API.
#[doc(hidden)]
pub mod fuzzing {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use hyper::body::{Body, Frame};
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// The error message the traffic log reads out of an error body.
    pub fn error_message(content_type: &str, body: &[u8]) -> Option<String> {
        crate::traffic::message(content_type, &String::from_utf8_lossy(body))
    }

    /// How many errors a `POST /__corral/errors` body holds, or why it is refused.
    pub fn parse_reports(body: &[u8]) -> Result<usize, String> {
        crate::browser::parse_reports(body).map(|r| r.len())
    }

    /// The script locations of a `POST /__corral/errors` body that the source mapper
    /// would look up on the origin `127.0.0.1:5173` (path, line, column): each error's
    /// `source` (at its `line`, `column`), then the frames of its stack and of its
    /// message; `Err` when the endpoint refuses the body. The fields are read as the
    /// endpoint reads them ([`crate::browser`] keeps its reports' fields private).
    pub fn report_locations(body: &[u8]) -> Result<Vec<(String, u32, u32)>, String> {
        use crate::sourcemap::on_origin;
        crate::browser::parse_reports(body)?;
        let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key).and_then(|s| s.as_str()).unwrap_or("").to_owned()
        };
        let number = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_u64)
                .map_or(0, |n| n.min(u64::from(u32::MAX)) as u32)
        };
        let origins = ["127.0.0.1:5173".to_owned()];
        let base = on_origin(&text(&value, "page"), &origins, "/").unwrap_or("/".into());
        let mut found = Vec::new();
        let errors = value.get("errors").and_then(|e| e.as_array());
        for error in errors.into_iter().flatten().take(100) {
            if let Some(path) = on_origin(&text(error, "source"), &origins, &base) {
                found.push((path, number(error, "line"), number(error, "column")));
            }
            for field in ["stack", "message"] {
                for line in text(error, field).lines() {
                    if let Some(frame) = crate::stack::parse(line)
                        && let Some(path) = on_origin(frame.url, &origins, &base)
                    {
                        // What is replaced when the frame is shown: the URL and its position.
                        assert!(line[frame.start..frame.end].starts_with(frame.url));
                        let _ = crate::stack::display_path(&path);
                        found.push((path, frame.line, frame.column));
                    }
                }
            }
        }
        Ok(found)
    }

    /// A source map's JSON decoded as the mapper decodes a fetched one, positions looked
    /// up in it, and the reference a script names: (reference, locations, the map's
    /// estimated bytes).
    pub fn source_map(
        map: &[u8],
        script: &[u8],
        positions: &[(u32, u32)],
    ) -> (Option<String>, Vec<Option<String>>, usize) {
        crate::sourcemap::map_and_lookup(map, script, positions)
    }

    /// A body in `coding` (0 gzip, 1 deflate, 2 brotli) decoded with a limit, as
    /// scripts and maps are: `Ok(None)` over the limit.
    pub fn decode_within(
        coding: u8,
        coded: &[u8],
        limit: usize,
    ) -> std::io::Result<Option<Vec<u8>>> {
        use crate::codec::Coding;
        let coding = [Coding::Gzip, Coding::Deflate, Coding::Brotli][usize::from(coding % 3)];
        crate::codec::decode_within(coding, coded, limit)
    }

    /// The tag [`inject`] inserts.
    pub fn tag() -> String {
        crate::inject::script_tag(None, &"0".repeat(64))
    }

    /// The `text/html` document `chunks` make (as the target sends them), as the proxy
    /// passes it on, or the error that ended the rewritten body.
    pub async fn inject(chunks: Vec<Bytes>) -> Result<Vec<u8>, String> {
        let mut parts = hyper::Response::new(()).into_parts().0;
        parts.headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
        );
        let body = Chunks(chunks.into()).boxed_unsync();
        crate::inject::rewrite(&mut parts, body, &"0".repeat(64))
            .await
            .0
            .collect()
            .await
            .map(|c| c.to_bytes().to_vec())
            .map_err(|e| e.to_string())
    }

    /// A body of the given chunks, one frame each.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = crate::BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, crate::BoxError>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }

        fn is_end_stream(&self) -> bool {
            self.0.is_empty()
        }
    }
}
