//! The proxy's own endpoints under `/__corral/`, and the log of the errors pages report.
//!
//! * `GET /__corral/client.js`: the reporting script ([`SCRIPT`]) that [`crate::inject`]
//!   puts into every HTML document.
//! * `POST /__corral/errors`: what the script sends, `{"page": URL, "errors": [{kind,
//!   message, stack, source, line, column, page, request}, …]}`, read leniently (unknown
//!   fields are ignored, a missing one is empty). It is answered 204 at once; each error
//!   is then source-mapped ([`crate::sourcemap`], within [`RESOLVE_TIMEOUT`] per batch):
//!   its position, and the frames of its stack and of a component stack in its message
//!   ([`crate::stack`], at most [`crate::stack::FRAMES_MAPPED`] per error); recorded in
//!   the [`BrowserLog`] and announced as a `browser.error` event with `proxy`,
//!   `error_kind` (`kind` is the event's own), `message`, `location`, `page`, `count`,
//!   and `request` when it has one.
//!
//! # Where an error is
//!
//! Its `location` is the first of these that is the app's own code (on the page's
//! origin, not under `node_modules`, `.vite/deps`, `/@vite/`, `/@react-refresh`, a
//! webpack runtime, or the proxy's own script): its own position (where it was thrown,
//! or where `console.error` was called), a frame of its stack, a frame of a component
//! stack in its message (React 18 logs one after a render error). The original's
//! `file:line:column` when mapped, else the browser's `URL:line:column`. When none is the
//! app's (an error inside a package with no caller of the app's on the stack), it is
//! its own position when that is on the origin, else its stack's first frame on the
//! origin, as mapped; else the position as the browser gave it.
//!
//! # Who may report
//!
//! What the agent reads must not be writable by anyone else: not by another web page the
//! user has open, nor by another local program or user. So a report is taken only with
//! the proxy's key: 256 random bits made when the proxy starts, carried by the tag
//! [`crate::inject`] puts into each document (`data-k`), which the script reads from its
//! own tag and sends back in the body (`"key"`). The key is in no URL and not in the
//! script: a page elsewhere may run `/__corral/client.js` with `<script src>`, but only a
//! reader of a document the proxy served (the page itself, same-origin) sees the key.
//! A report with an `Origin` must come from the proxy's own origin as well. And since
//! any local user can fetch a page through the proxy and read its key, a report from a
//! socket of another local user is refused too ([`corral_httpd::peer_user`]: the
//! kernel's socket table names the owner of the peer's end).
//!
//! # Floods
//!
//! A page in an error loop, or a hostile program with the key, must not push every real
//! error out of the ring:
//!
//! * Reports are rate limited ([`RATE`]): per proxy [`PROXY_RATE`] errors a second with
//!   bursts of [`PROXY_BURST`], per page URL [`PAGE_RATE`] with bursts of [`PAGE_BURST`];
//!   what is over is dropped (the request is answered 429), counted
//!   ([`BrowserLog::dropped`]), and said by a `proxy.error` event with `dropped` at most
//!   once per 10 s.
//! * The same error (kind, message, location, page) is one entry wherever it is in the
//!   ring: a repeat moves it to the end, counted, under a new id.
//! * The first `capacity / 2` distinct errors since start are kept for good; when the ring
//!   is full the oldest of the later ones goes. A flood of distinct errors rotates
//!   through the second half and never evicts the errors that came first.

use crate::{ProxyBody, Shared};
use corral_events::{Event, Kind, Source};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// Paths under this prefix are the proxy's, never forwarded.
pub const PREFIX: &str = "/__corral/";

/// Browser errors kept per proxy.
pub const RING: usize = 500;

/// The script pages run.
pub const SCRIPT: &str = include_str!("client.js");

/// Where pages report.
pub const ERRORS_PATH: &str = "/__corral/errors";

/// The largest report accepted (the script sends at most 20 errors of ≤ 10 KiB).
pub const BODY_LIMIT: usize = 256 * 1024;

/// How long a report may take to arrive.
const BODY_DEADLINE: Duration = Duration::from_secs(10);

/// How long the errors of one report wait for their source maps before they are
/// recorded with the locations the browser gave.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Errors a proxy takes per second from all its pages, and the burst it allows.
pub const PROXY_RATE: f64 = 50.0;
pub const PROXY_BURST: f64 = 200.0;
/// Errors a proxy takes per second from one page URL, and the burst it allows.
pub const PAGE_RATE: f64 = 20.0;
pub const PAGE_BURST: f64 = 100.0;
/// The rate limits, as (errors per second, burst): per proxy, per page.
pub const RATE: [(f64, f64); 2] = [(PROXY_RATE, PROXY_BURST), (PAGE_RATE, PAGE_BURST)];
/// Page buckets kept; past this, the full ones (idle pages) are forgotten.
const PAGE_BUCKETS: usize = 1024;
/// At most one `proxy.error` about dropped reports per this long.
const DROP_EVENT_WINDOW: Duration = Duration::from_secs(10);

/// A new report key: 256 bits from the OS, hex.
pub(crate) fn new_key() -> String {
    corral_httpd::new_token()
}

/// Whether `given` is `key`, in time that does not depend on where they differ.
fn key_matches(key: &str, given: &str) -> bool {
    corral_httpd::constant_time_eq(key.as_bytes(), given.as_bytes())
}

/// A token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    fn refill(&mut self, (rate, burst): (f64, f64), now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.at = now;
    }
}

/// Errors of one report beyond this are dropped (the script sends at most 20).
const BATCH_LIMIT: usize = 100;

const MESSAGE_MAX: usize = 2 * 1024;
const STACK_MAX: usize = 8 * 1024;
/// Short fields: kind, source URL, page URL.
const FIELD_MAX: usize = 2 * 1024;

/// One error a page reported.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BrowserEntry {
    /// Increases by one per entry of this proxy; a repeat gets a new one.
    pub id: u64,
    /// When it was recorded (RFC 3339, milliseconds).
    pub ts: String,
    pub proxy: String,
    /// `error`, `unhandledrejection`, `console.error`, `fetch` or `xhr`.
    pub kind: String,
    /// At most 2 KiB.
    pub message: String,
    /// At most 8 KiB.
    pub stack: String,
    /// The script URL the browser named.
    pub source: String,
    /// 1-based; 0 when unknown.
    pub line: u32,
    pub column: u32,
    /// The page's URL.
    pub page: String,
    /// `file:line:column` in the original source when a source map resolved it, else
    /// the browser's `source:line:column`.
    pub location: String,
    /// How many times in a row this error came (the same kind, message, location and
    /// page).
    pub count: u32,
    /// For a failed fetch or XHR: the proxy's id of that request
    /// ([`crate::traffic::TrafficEntry::request_id`]), which the page's script read from
    /// the response's `X-Corral-Request`. Only an id this proxy handed out is kept (a
    /// page cannot point at another proxy's requests); for a repeat, the latest one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl BrowserEntry {
    fn repeats(&self, other: &BrowserEntry) -> bool {
        self.kind == other.kind
            && self.message == other.message
            && self.location == other.location
            && self.page == other.page
    }
}

/// Which entries [`BrowserLog::query`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowserQuery {
    /// Only entries with a greater id.
    pub after: Option<u64>,
    /// Only entries recorded at or after this time.
    pub since: Option<SystemTime>,
    /// At most this many, the newest (still returned oldest first).
    pub limit: Option<usize>,
}

/// The last errors pages reported, in a bounded ring (see the module's "Floods").
pub struct BrowserLog {
    ring: Mutex<Ring>,
    limits: Mutex<Limits>,
    pub(crate) maps: crate::sourcemap::SourceMaps,
}

struct Ring {
    /// Each entry, and whether it is one of the first distinct errors, kept for good.
    entries: VecDeque<(BrowserEntry, bool)>,
    capacity: usize,
    /// Entries kept for good so far (at most `capacity / 2`).
    pinned: usize,
    next_id: u64,
    total: u64,
}

/// The rate limits' state.
struct Limits {
    proxy: Bucket,
    pages: HashMap<String, Bucket>,
    dropped: u64,
    /// Dropped since the last event, and when that was.
    unannounced: u64,
    announced: Option<Instant>,
}

impl BrowserLog {
    pub fn new(capacity: usize) -> BrowserLog {
        BrowserLog {
            ring: Mutex::new(Ring {
                entries: VecDeque::new(),
                capacity: capacity.max(1),
                pinned: 0,
                next_id: 1,
                total: 0,
            }),
            limits: Mutex::new(Limits {
                proxy: Bucket::full(PROXY_BURST, Instant::now()),
                pages: HashMap::new(),
                dropped: 0,
                unannounced: 0,
                announced: None,
            }),
            maps: crate::sourcemap::SourceMaps::new(),
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Errors reported since start (repeats included; more than the ring holds).
    pub fn total(&self) -> u64 {
        self.ring().total
    }

    /// Errors dropped since start for going over the rate limits.
    pub fn dropped(&self) -> u64 {
        self.limits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped
    }

    /// How many of `n` errors from `page` the rate limits let in now (the first ones);
    /// the rest are counted as dropped. With the count to announce when an event about
    /// drops is due.
    fn admit(&self, page: &str, n: usize) -> (usize, Option<u64>) {
        let now = Instant::now();
        let mut limits = self.limits.lock().unwrap_or_else(|e| e.into_inner());
        let limits = &mut *limits;
        limits.proxy.refill(RATE[0], now);
        if limits.pages.len() >= PAGE_BUCKETS && !limits.pages.contains_key(page) {
            limits.pages.retain(|_, b| {
                b.refill(RATE[1], now);
                b.tokens < PAGE_BURST
            });
            if limits.pages.len() >= PAGE_BUCKETS {
                limits.pages.clear();
            }
        }
        let bucket = limits
            .pages
            .entry(page.to_owned())
            .or_insert_with(|| Bucket::full(PAGE_BURST, now));
        bucket.refill(RATE[1], now);
        let room = limits.proxy.tokens.min(bucket.tokens).max(0.0).floor() as usize;
        let admitted = n.min(room);
        limits.proxy.tokens -= admitted as f64;
        bucket.tokens -= admitted as f64;
        let dropped = (n - admitted) as u64;
        limits.dropped += dropped;
        limits.unannounced += dropped;
        let due = limits.unannounced > 0
            && limits
                .announced
                .is_none_or(|at| now.duration_since(at) >= DROP_EVENT_WINDOW);
        let announce = due.then(|| {
            limits.announced = Some(now);
            std::mem::take(&mut limits.unannounced)
        });
        (admitted, announce)
    }

    /// The entries `query` selects, oldest first.
    pub fn query(&self, query: &BrowserQuery) -> Vec<BrowserEntry> {
        // Timestamps are fixed-width UTC, so they compare as strings.
        let since = query.since.map(corral_events::rfc3339);
        let ring = self.ring();
        let mut selected: Vec<BrowserEntry> = ring
            .entries
            .iter()
            .map(|(e, _)| e)
            .filter(|e| query.after.is_none_or(|after| e.id > after))
            .filter(|e| since.as_ref().is_none_or(|since| e.ts >= *since))
            .cloned()
            .collect();
        if let Some(limit) = query.limit {
            selected.drain(..selected.len().saturating_sub(limit));
        }
        selected
    }

    /// Records an error (its `id`, `ts` and `count` are set here) and returns it as
    /// stored. The same error as an entry anywhere in the ring replaces it, counted, at
    /// the end under a new id, so a reader following ids sees the repeat. When the ring
    /// is full, the oldest entry that is not one of the first distinct errors goes.
    pub fn record(&self, mut entry: BrowserEntry) -> BrowserEntry {
        let mut ring = self.ring();
        let ring = &mut *ring;
        ring.total += 1;
        entry.count = 1;
        let mut pinned = false;
        if let Some(at) = ring.entries.iter().rposition(|(e, _)| e.repeats(&entry))
            && let Some((old, was_pinned)) = ring.entries.remove(at)
        {
            entry.count = old.count.saturating_add(1);
            pinned = was_pinned;
        } else if ring.pinned < ring.capacity / 2 {
            pinned = true;
            ring.pinned += 1;
        }
        entry.id = ring.next_id;
        ring.next_id += 1;
        entry.ts = corral_events::now_rfc3339();
        if ring.entries.len() >= ring.capacity {
            match ring.entries.iter().position(|(_, pinned)| !pinned) {
                Some(at) => {
                    ring.entries.remove(at);
                }
                None => {
                    ring.entries.pop_front();
                }
            }
        }
        ring.entries.push_back((entry.clone(), pinned));
        entry
    }
}

/// Serves `/__corral/…`.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ProxyBody> {
    let path = req.uri().path();
    if path == crate::inject::SCRIPT_PATH {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return not_allowed("GET, HEAD");
        }
        let mut response = Response::new(crate::full(SCRIPT));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        return response;
    }
    if path == ERRORS_PATH {
        if req.method() != Method::POST {
            return not_allowed("POST");
        }
        return errors(shared, req).await;
    }
    text(
        StatusCode::NOT_FOUND,
        format!("no such corral endpoint: {path}\n"),
    )
}

/// `POST /__corral/errors`.
async fn errors(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ProxyBody> {
    // The origin the page is on as the browser spells it (`localhost` or an IP).
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Err(why) = same_origin(&shared, host.as_deref(), req.headers()) {
        return text(StatusCode::FORBIDDEN, format!("{why}\n"));
    }
    let peer = req
        .extensions()
        .get::<corral_httpd::RemoteAddr>()
        .map(|a| a.0);
    let body = match corral_httpd::read_body(req.into_body(), BODY_LIMIT, BODY_DEADLINE).await {
        Ok(body) => body,
        Err(corral_httpd::BodyError::TooLarge) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("an error report is at most {BODY_LIMIT} bytes\n"),
            );
        }
        Err(corral_httpd::BodyError::TimedOut) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                "the error report did not arrive in time\n".into(),
            );
        }
        Err(corral_httpd::BodyError::Broken) => {
            return text(
                StatusCode::BAD_REQUEST,
                "the error report was cut off\n".into(),
            );
        }
    };
    let (key, mut reports) = match parse(&body) {
        Ok(parsed) => parsed,
        Err(why) => return text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    };
    if !key.is_some_and(|k| key_matches(&shared.key, &k)) {
        return text(
            StatusCode::FORBIDDEN,
            "reports are accepted only from pages served through this proxy, with the key \
             of the script it put into them\n"
                .into(),
        );
    }
    // The key is in every page the proxy serves, and any local user can fetch one: the
    // socket's owner tells the user's browser from another user's program.
    if let Some(corral_httpd::PeerUser::Other(uid)) =
        peer.map(|p| corral_httpd::peer_user(p, shared.addr.port()))
    {
        return text(
            StatusCode::FORBIDDEN,
            format!("reports are accepted only from the user running Corral, not from uid {uid}\n"),
        );
    }
    let page = reports.first().map(|r| r.page.clone()).unwrap_or_default();
    let (admitted, announce) = shared.browser.admit(&page, reports.len());
    let over = admitted < reports.len();
    reports.truncate(admitted);
    if let Some(dropped) = announce {
        shared.bus.emit(
            Event::new(Kind::ProxyError, shared.source())
                .with(
                    "error",
                    format!(
                        "browser error reports over the rate limit were dropped \
                         ({PROXY_RATE}/s per proxy, {PAGE_RATE}/s per page)"
                    ),
                )
                .with("dropped", dropped)
                .with("dropped_total", shared.browser.dropped()),
        );
    }
    let mut origins = vec![shared.addr.to_string()];
    origins.extend(host);
    if !reports.is_empty() {
        tokio::spawn(record_reports(shared, origins, reports));
    }
    if over {
        return text(
            StatusCode::TOO_MANY_REQUESTS,
            "too many error reports: the rest were dropped\n".into(),
        );
    }
    let mut response = Response::new(crate::full(""));
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
}

/// Whether a report comes from a page served through this proxy. What the agent reads
/// must not be writable by any other web page the user has open: a cross-site form or
/// `sendBeacon` to `127.0.0.1:PORT/__corral/errors` carries its own `Origin`, and a
/// DNS-rebound name (`evil.example` resolving to 127.0.0.1) carries its own `Host`.
/// Browsers send `Origin` with every POST (a `sendBeacon` from the page too); one
/// without must still carry the key (see the module's "Who may report").
fn same_origin(shared: &Shared, host: Option<&str>, headers: &HeaderMap) -> Result<(), String> {
    let host = host.unwrap_or("");
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let local = matches!(name, "localhost" | "127.0.0.1" | "[::1]")
        || name.ends_with(".localhost")
        || name == shared.addr.ip().to_string();
    if !local {
        return Err(format!(
            "reports are accepted only for this proxy's own address, not Host {host:?}"
        ));
    }
    match headers.get(header::ORIGIN).map(|o| o.to_str()) {
        None => Ok(()),
        Some(Ok(origin)) if origin.strip_prefix("http://") == Some(host) => Ok(()),
        Some(origin) => Err(format!(
            "reports are accepted only from pages served through this proxy (origin http://{host}), not from {:?}",
            origin.unwrap_or("?")
        )),
    }
}

/// One error as the script reports it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    kind: String,
    message: String,
    stack: String,
    source: String,
    line: u32,
    column: u32,
    page: String,
    /// The `X-Corral-Request` of the failed request it is about, as the page sent it.
    request: String,
}

/// The longest `request` read from a report (an id is `<8 hex>-<up to 20 digits>`).
const REQUEST_MAX: usize = 64;

/// Reads a report: `{"page": URL, "errors": [...]}`. Only a body that is not JSON, or
/// has no `errors` array, is refused; an error that is not an object is skipped, a field
/// of the wrong type is empty.
pub(crate) fn parse_reports(body: &[u8]) -> Result<Vec<Report>, String> {
    parse(body).map(|(_, reports)| reports)
}

/// [`parse_reports`], and the report's `key`.
fn parse(body: &[u8]) -> Result<(Option<String>, Vec<Report>), String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the error report is not JSON: {e}"))?;
    let key = value.get("key").and_then(Value::as_str).map(str::to_owned);
    let errors = value
        .get("errors")
        .and_then(Value::as_array)
        .ok_or("the error report has no \"errors\" array")?;
    let page = string(&value, "page", FIELD_MAX);
    let reports = errors
        .iter()
        .filter(|e| e.is_object())
        .take(BATCH_LIMIT)
        .map(|e| {
            let kind = string(e, "kind", 64);
            Report {
                kind: if kind.is_empty() {
                    "error".into()
                } else {
                    kind
                },
                message: string(e, "message", MESSAGE_MAX),
                stack: string(e, "stack", STACK_MAX),
                source: string(e, "source", FIELD_MAX),
                line: number(e, "line"),
                column: number(e, "column"),
                page: Some(string(e, "page", FIELD_MAX))
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| page.clone()),
                request: string(e, "request", REQUEST_MAX),
            }
        })
        .collect();
    Ok((key, reports))
}

/// A string field, at most `max` bytes (cut on a character boundary); a number is
/// written out, anything else is empty.
fn string(object: &Value, key: &str, max: usize) -> String {
    let mut s = match object.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// A line or column: a number or a numeric string; 0 otherwise.
fn number(object: &Value, key: &str) -> u32 {
    match object.get(key) {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    }
}

/// Source-maps, records and announces the errors of one report, in order.
async fn record_reports(shared: Arc<Shared>, origins: Vec<String>, reports: Vec<Report>) {
    let deadline = tokio::time::Instant::now() + RESOLVE_TIMEOUT;
    for report in reports {
        let resolved = resolve(&shared, &origins, &report, deadline).await;
        let request = Some(report.request)
            .filter(|id| !id.is_empty() && shared.traffic.is_own_request_id(id));
        let entry = shared.browser.record(BrowserEntry {
            proxy: shared.spec.name.clone(),
            kind: report.kind,
            message: resolved.message,
            stack: resolved.stack,
            source: report.source,
            line: report.line,
            column: report.column,
            page: report.page,
            location: resolved.location,
            request,
            ..BrowserEntry::default()
        });
        let mut event = Event::new(Kind::BrowserError, Source::Browser)
            .with("proxy", entry.proxy)
            .with("error_kind", entry.kind)
            .with("message", entry.message)
            .with("location", entry.location)
            .with("page", entry.page)
            .with("count", entry.count);
        if let Some(request) = entry.request {
            event = event.with("request", request);
        }
        shared.bus.emit(event);
    }
}

/// An error's message, stack and location, source-mapped.
struct Resolved {
    message: String,
    stack: String,
    location: String,
}

/// Maps what of `report` is on the origin (see the module's "Where an error is"): its
/// own position, then its stack's frames and its message's, at most
/// [`crate::stack::FRAMES_MAPPED`] frames, each lookup only while `deadline` has not
/// passed (then the frames left are shown unmapped, without the origin).
async fn resolve(
    shared: &Shared,
    origins: &[String],
    report: &Report,
    deadline: tokio::time::Instant,
) -> Resolved {
    use crate::stack::{Shown, cut, display_path, map_text};
    let base = crate::sourcemap::on_origin(&report.page, origins, "/").unwrap_or("/".into());
    let on_origin = |url: &str| {
        crate::sourcemap::on_origin(url, origins, &base).filter(|path| !path.starts_with(PREFIX))
    };
    let lookup = |path: String, line: u32, column: u32| async move {
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        let found = shared.browser.maps.original(shared, &path, line, column);
        tokio::time::timeout_at(deadline, found)
            .await
            .ok()
            .flatten()
    };

    let raw = raw_location(report);
    let own = match on_origin(&report.source) {
        Some(path) if report.line > 0 => {
            let mapped = lookup(path.clone(), report.line, report.column).await;
            let shown = mapped.clone().unwrap_or_else(|| {
                format!("{}:{}:{}", display_path(&path), report.line, report.column)
            });
            Some(Shown {
                shown,
                raw: raw.clone(),
                mapped: mapped.is_some(),
                on_origin: true,
            })
        }
        _ => None,
    };
    let mut budget = crate::stack::FRAMES_MAPPED;
    let (stack, stack_frames) = map_text(&report.stack, &mut budget, on_origin, lookup).await;
    let (message, message_frames) = map_text(&report.message, &mut budget, on_origin, lookup).await;

    let user = own
        .iter()
        .chain(&stack_frames)
        .chain(&message_frames)
        .find(|f| f.is_user_code());
    let location = match (user, &own) {
        (Some(user), _) => user.location().to_owned(),
        // No frame of the app's: its own position, else its first frame on the origin.
        (None, Some(own)) => own.location().to_owned(),
        (None, None) => stack_frames
            .iter()
            .find(|f| f.on_origin)
            .filter(|f| f.mapped)
            .map_or(raw, |f| f.shown.clone()),
    };
    Resolved {
        message: cut(message, MESSAGE_MAX),
        stack: cut(stack, STACK_MAX),
        location,
    }
}

/// `source:line:column` as the browser gave it (fewer parts when it gave fewer).
fn raw_location(report: &Report) -> String {
    match (report.line, report.column) {
        _ if report.source.is_empty() => String::new(),
        (0, _) => report.source.clone(),
        (line, 0) => format!("{}:{line}", report.source),
        (line, column) => format!("{}:{line}:{column}", report.source),
    }
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(crate::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn not_allowed(allow: &'static str) -> Response<ProxyBody> {
    let mut response = text(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("this corral endpoint takes {allow}\n"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(message: &str) -> BrowserEntry {
        BrowserEntry {
            kind: "error".into(),
            message: message.into(),
            ..BrowserEntry::default()
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_and_counts_repeats() {
        let log = BrowserLog::new(3);
        for m in ["a", "b", "b", "c", "d"] {
            log.record(entry(m));
        }
        assert_eq!(log.total(), 5);
        let all = log.query(&BrowserQuery::default());
        let seen: Vec<_> = all
            .iter()
            .map(|e| (e.id, e.message.as_str(), e.count))
            .collect();
        // The first distinct error (of capacity / 2 = 1) stays; the later ones rotate.
        assert_eq!(seen, [(1, "a", 1), (4, "c", 1), (5, "d", 1)]);
        let after = log.query(&BrowserQuery {
            after: Some(4),
            limit: Some(1),
            ..BrowserQuery::default()
        });
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].message, "d");
        let future = SystemTime::now() + Duration::from_secs(60);
        assert!(
            log.query(&BrowserQuery {
                since: Some(future),
                ..BrowserQuery::default()
            })
            .is_empty()
        );
    }

    #[test]
    fn a_repeat_anywhere_in_the_ring_is_counted_and_a_flood_keeps_the_first_errors() {
        let log = BrowserLog::new(4);
        for m in ["a", "b", "c", "a", "x1", "x2", "x3", "b"] {
            log.record(entry(m));
        }
        let seen: Vec<_> = log
            .query(&BrowserQuery::default())
            .into_iter()
            .map(|e| (e.message, e.count))
            .collect();
        let seen: Vec<_> = seen.iter().map(|(m, c)| (m.as_str(), *c)).collect();
        // a and b came first (capacity / 2 = 2 kept for good), each once, counted.
        assert_eq!(seen, [("a", 2), ("x2", 1), ("x3", 1), ("b", 2)]);
    }

    #[test]
    fn the_key_compares_whole() {
        let key = new_key();
        assert_eq!(key.len(), 64);
        assert_ne!(key, new_key());
        assert!(key_matches(&key, &key.clone()));
        assert!(!key_matches(&key, &key[..63]));
        assert!(!key_matches(&key, ""));
    }

    #[test]
    fn reports_parse_leniently() {
        let body = br#"{"page":"http://h/p","extra":1,"errors":[
            {"kind":"console.error","message":"boom","line":"12","column":3.0,"source":"http://h/a.js","x":[]},
            7,
            {"message":{"not":"a string"},"page":"http://h/q"}
        ]}"#;
        let reports = parse_reports(body).unwrap();
        assert_eq!(
            reports,
            [
                Report {
                    kind: "console.error".into(),
                    message: "boom".into(),
                    source: "http://h/a.js".into(),
                    line: 12,
                    column: 3,
                    page: "http://h/p".into(),
                    ..Report::default()
                },
                Report {
                    kind: "error".into(),
                    page: "http://h/q".into(),
                    ..Report::default()
                },
            ]
        );
        assert!(parse_reports(b"{nope").unwrap_err().contains("not JSON"));
        assert!(parse_reports(b"{}").unwrap_err().contains("errors"));
    }

    #[test]
    fn long_fields_are_cut_on_character_boundaries() {
        let long = "é".repeat(MESSAGE_MAX);
        let body = serde_json::json!({"errors": [{"message": long}]}).to_string();
        let message = &parse_reports(body.as_bytes()).unwrap()[0].message;
        assert_eq!(message.len(), MESSAGE_MAX);
        assert!(message.chars().all(|c| c == 'é'));
    }
}
