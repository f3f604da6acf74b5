//! The traffic log: a bounded ring of what went through the proxy, and the error message
//! read out of an error response's first bytes.
//!
//! An entry is recorded when its exchange ends (the last byte of the response, a
//! transport error, or the client going away), so the ring is in order of completion and
//! an entry's `id` is its place in that order: a caller that polls with
//! [`Since::Id`] of the last id it saw misses nothing, even a long request that started
//! before ones recorded earlier. A response that never ends (an event stream, an
//! upgraded connection after its `101`) is recorded when it does.

use crate::codec::{Coding, Decoder};
pub use crate::headers::Headers;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// The default number of entries [`TrafficLog::query`] returns.
pub const DEFAULT_LIMIT: usize = 100;

/// How much of an error response's body is kept (coded, and again once decoded).
pub const EXCERPT_BYTES: usize = 8 * 1024;

/// The longest `message` drawn from an excerpt, in characters.
pub const MESSAGE_CHARS: usize = 300;

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TrafficEntry {
    /// Order of recording, from 1.
    pub id: u64,
    /// When the request came in (RFC 3339, UTC, milliseconds).
    pub ts: String,
    pub method: String,
    /// Path and query as the browser sent them.
    pub url: String,
    /// The target's status; none when it never answered (see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Milliseconds until the response head arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers_ms: Option<f64>,
    /// Milliseconds until the last byte (or the error, or the client leaving).
    pub total_ms: f64,
    /// Request body bytes forwarded.
    pub request_bytes: u64,
    /// Response body bytes received from the target (as coded on the wire).
    pub response_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The transport error: the target could not be reached, or the body broke off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The client went away before the response ended (not an error of the target's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
    /// For a status ≥ 400: the first bytes of the body, decoded, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    /// For a status ≥ 400: the error message read out of the excerpt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Another site's page sent it (`Sec-Fetch-Site` other than `same-origin` or `none`,
    /// and not a top-level navigation): an `<img>` or a `no-cors` fetch on any web page
    /// can make one, path and all, so it is not the app's own traffic.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cross_site: bool,
    /// The request's `Origin`, when it was cross-site and had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The proxy's id for this exchange, `<8 hex>-<n>` ([`TrafficLog::request_id_prefix`],
    /// then a number counting the requests the log's proxy took, in the order they came
    /// in). The browser gets it as `X-Corral-Request`, and the injected script sends it
    /// back with the error it reports about a failed fetch or XHR
    /// ([`crate::browser::BrowserEntry::request`]); the target gets it as `X-Request-Id`
    /// unless the request had one of its own (`client_request_id`). Empty in entries
    /// written before it existed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    /// The request's own `X-Request-Id`, which went to the target untouched in place of
    /// `request_id` (kept here cut to [`CLIENT_REQUEST_ID_MAX`] bytes). What the target
    /// saw is [`TrafficEntry::upstream_request_id`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    /// The response was an HTML document the proxy put its error script into: a page
    /// load (a document passed untouched, without the script, is not one).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub document: bool,
    /// The request's headers as the browser sent them, before the proxy's rewrites
    /// (`Host`, `X-Forwarded-*`, `X-Request-Id`, hop-by-hop headers): `[name, value]`
    /// pairs, bounded, credentials redacted ([`crate::headers`]). For the dashboard and
    /// `corral proxy NAME --log --json`; not in `get_errors`
    /// ([`TrafficEntry::without_headers`]). Empty in entries written before it existed.
    #[serde(skip_serializing_if = "Headers::is_empty")]
    pub request_headers: Headers,
    /// The response's headers as the target answered, before the proxy's own
    /// (`X-Corral-Request`) and its rewrites (`Location`, `Set-Cookie`, hop-by-hop);
    /// as `request_headers`. Empty when the target never answered (`error`).
    #[serde(skip_serializing_if = "Headers::is_empty")]
    pub response_headers: Headers,
}

impl TrafficEntry {
    /// Whether another site's page sent it (see `cross_site`): what it says (its path
    /// above all) is not to be taken as the app's.
    pub fn is_cross_site(&self) -> bool {
        self.cross_site
    }

    /// A response ≥ 400 or a transport error.
    pub fn is_error(&self) -> bool {
        self.status.is_some_and(|s| s >= 400) || self.error.is_some()
    }

    /// The entry for a reader that is not to get its headers (`get_errors`' `raw`):
    /// serializes as the entry without `request_headers` and `response_headers`.
    pub fn without_headers(&self) -> impl Serialize + '_ {
        WithoutHeaders(self)
    }

    /// The `X-Request-Id` the target got: the request's own when it had one, else the
    /// proxy's `request_id`.
    pub fn upstream_request_id(&self) -> &str {
        self.client_request_id
            .as_deref()
            .unwrap_or(&self.request_id)
    }
}

/// See [`TrafficEntry::without_headers`].
struct WithoutHeaders<'a>(&'a TrafficEntry);

impl Serialize for WithoutHeaders<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Only when asked for (a `raw` report): a clone is cheaper to keep right than a
        // second list of the fields.
        TrafficEntry {
            request_headers: Headers::default(),
            response_headers: Headers::default(),
            ..self.0.clone()
        }
        .serialize(s)
    }
}

/// The most of a request's own `X-Request-Id` a [`TrafficEntry`] keeps.
pub const CLIENT_REQUEST_ID_MAX: usize = 200;

/// Where a query starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Entries recorded after the one with this id.
    Id(u64),
    /// Requests that came in at or after this time.
    Time(SystemTime),
}

/// Which entries [`TrafficLog::query`] returns; the default is the newest
/// [`DEFAULT_LIMIT`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrafficQuery {
    pub since: Option<Since>,
    /// Only responses with at least this status (transport errors have none).
    pub min_status: Option<u16>,
    /// Only responses ≥ 400 and transport errors.
    pub errors_only: bool,
    /// Only URLs containing this.
    pub path: Option<String>,
    /// Only this method (any case).
    pub method: Option<String>,
    /// At most this many, the newest; [`DEFAULT_LIMIT`] when unset.
    pub limit: Option<usize>,
}

impl TrafficQuery {
    fn matches(&self, started: SystemTime, e: &TrafficEntry) -> bool {
        let since = match self.since {
            None => true,
            Some(Since::Id(id)) => e.id > id,
            Some(Since::Time(t)) => started >= t,
        };
        since
            && self
                .min_status
                .is_none_or(|min| e.status.is_some_and(|s| s >= min))
            && (!self.errors_only || e.is_error())
            && self.path.as_deref().is_none_or(|p| e.url.contains(p))
            && self
                .method
                .as_deref()
                .is_none_or(|m| e.method.eq_ignore_ascii_case(m))
    }
}

/// The last N requests of one proxy, counts since the log was made, and the request ids
/// it hands out.
///
/// A [`crate::Proxies`] registry keeps one log per proxy name for the daemon's life: a
/// proxy started again under the same name goes on writing into it (ids and request ids
/// keep increasing).
pub struct TrafficLog {
    ring: Mutex<Ring>,
    /// 8 random hex digits, this log's alone: the first part of every request id.
    prefix: String,
    /// Request ids handed out.
    issued: AtomicU64,
}

struct Ring {
    capacity: usize,
    /// With each entry its start time, for [`Since::Time`].
    entries: VecDeque<(SystemTime, TrafficEntry)>,
    total: u64,
    errors: u64,
}

impl TrafficLog {
    pub fn new(capacity: usize) -> TrafficLog {
        let mut random = [0u8; 4];
        corral_httpd::random_bytes(&mut random);
        TrafficLog {
            ring: Mutex::new(Ring {
                capacity,
                entries: VecDeque::with_capacity(capacity.min(1024)),
                total: 0,
                errors: 0,
            }),
            prefix: random.iter().map(|b| format!("{b:02x}")).collect(),
            issued: AtomicU64::new(0),
        }
    }

    /// Keeps at most `capacity` entries from now on (the oldest go at once when there
    /// are more): a proxy started again with another `traffic_ring`.
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut ring = self.ring.lock().unwrap();
        ring.capacity = capacity;
        let over = ring.entries.len().saturating_sub(capacity);
        ring.entries.drain(..over);
    }

    /// The first part of this log's request ids (`<prefix>-<n>`): 8 random hex digits,
    /// so that one proxy's ids are not another's, and not guessable from outside.
    pub fn request_id_prefix(&self) -> &str {
        &self.prefix
    }

    /// A new request id: `<prefix>-<n>`, n from 1.
    pub(crate) fn next_request_id(&self) -> String {
        let n = self.issued.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{n}", self.prefix)
    }

    /// Whether `id` is one this log handed out: its prefix, a dash, and a number (no
    /// leading zero) no greater than the ids issued so far.
    pub fn is_own_request_id(&self, id: &str) -> bool {
        let Some(n) = id
            .strip_prefix(self.prefix.as_str())
            .and_then(|rest| rest.strip_prefix('-'))
        else {
            return false;
        };
        let canonical = !n.is_empty()
            && n.len() <= 20
            && n.bytes().all(|b| b.is_ascii_digit())
            && !n.starts_with('0');
        canonical
            && n.parse::<u64>()
                .is_ok_and(|n| n <= self.issued.load(Ordering::Relaxed))
    }

    /// Requests recorded since start (more than the ring holds).
    pub fn total(&self) -> u64 {
        self.ring.lock().unwrap().total
    }

    /// Responses ≥ 400 and transport errors since start.
    pub fn errors(&self) -> u64 {
        self.ring.lock().unwrap().errors
    }

    /// Adds an entry, numbering it and dropping the oldest when full; returns its id.
    pub(crate) fn record(&self, started: SystemTime, mut entry: TrafficEntry) -> u64 {
        let mut ring = self.ring.lock().unwrap();
        ring.total += 1;
        ring.errors += u64::from(entry.is_error());
        entry.id = ring.total;
        let id = entry.id;
        if ring.capacity > 0 {
            if ring.entries.len() == ring.capacity {
                ring.entries.pop_front();
            }
            ring.entries.push_back((started, entry));
        }
        id
    }

    /// Marks the entry of `request_id`, if it is recorded, as no page load after all: its
    /// document was passed untouched, decided only after the whole of it had gone by
    /// (rare: a small document that is a compression bomb or does not decode).
    pub(crate) fn not_a_document(&self, request_id: &str) {
        let mut ring = self.ring.lock().unwrap();
        if let Some((_, entry)) = ring
            .entries
            .iter_mut()
            .rev()
            .find(|(_, e)| e.request_id == request_id)
        {
            entry.document = false;
        }
    }

    /// The newest entries that match, oldest first.
    pub fn query(&self, q: &TrafficQuery) -> Vec<TrafficEntry> {
        let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
        let ring = self.ring.lock().unwrap();
        let mut newest: Vec<TrafficEntry> = ring
            .entries
            .iter()
            .rev()
            .filter(|(started, e)| q.matches(*started, e))
            .take(limit)
            .map(|(_, e)| e.clone())
            .collect();
        drop(ring);
        newest.reverse();
        newest
    }
}

/// The first bytes of an error response's body, kept as they stream past.
pub(crate) struct Excerpt {
    coded: Vec<u8>,
    /// `None` for identity; `Err` for a coding that cannot be undone (then no excerpt).
    coding: Result<Option<Coding>, ()>,
}

impl Excerpt {
    /// For a body with this `Content-Encoding` value (if any).
    pub(crate) fn new(content_encoding: Option<&str>) -> Excerpt {
        let coding = match content_encoding.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("identity") => Ok(None),
            Some(v) => Coding::parse(v).map(Some).ok_or(()),
        };
        Excerpt {
            coded: Vec::new(),
            coding,
        }
    }

    /// Keeps what fits of `chunk`.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let room = EXCERPT_BYTES.saturating_sub(self.coded.len());
        self.coded
            .extend_from_slice(&chunk[..room.min(chunk.len())]);
    }

    /// The excerpt as text and the message read from it (`content_type` tells JSON and
    /// HTML apart when the bytes alone do not).
    pub(crate) fn finish(self, content_type: Option<&str>) -> (Option<String>, Option<String>) {
        let plain = match self.coding {
            Err(()) => return (None, None),
            Ok(None) => self.coded,
            Ok(Some(coding)) => decode_prefix(coding, &self.coded),
        };
        if plain.is_empty() {
            return (None, None);
        }
        let text = String::from_utf8_lossy(&plain).into_owned();
        let message = message(content_type.unwrap_or(""), &text);
        (Some(text), message)
    }
}

/// Decodes at most [`EXCERPT_BYTES`] of plain text from the start of a coded body, with
/// the decoder's output budget: a highly compressed body never decodes further than
/// that. A body cut short (the usual case: only its start was kept) yields what decoded.
fn decode_prefix(coding: Coding, coded: &[u8]) -> Vec<u8> {
    let mut decoder = Decoder::new(coding);
    let mut plain = Vec::new();
    let mut used = 0;
    while plain.len() < EXCERPT_BYTES {
        let room = EXCERPT_BYTES - plain.len();
        let step = if used < coded.len() || decoder.has_pending() {
            decoder.decode(&coded[used..], room, &mut plain).map(|n| {
                used += n;
                false
            })
        } else {
            decoder.finish(room, &mut plain)
        };
        if !matches!(step, Ok(false)) {
            break;
        }
    }
    plain
}

/// The error message in an error body: a JSON error field, an HTML page's heading or
/// text, or the text itself.
pub(crate) fn message(content_type: &str, text: &str) -> Option<String> {
    let ct = content_type.to_ascii_lowercase();
    let start = text.trim_start();
    if (ct.contains("json") || start.starts_with('{'))
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
        && let Some(m) = json_message(&value)
    {
        return shorten(m);
    }
    if ct.contains("html") || start.starts_with('<') {
        return html_message(text);
    }
    shorten(text)
}

/// `message`, `error`, `detail` or `title` at the top (the first that is a string), or
/// `error.message`, or a GraphQL `errors[0].message`.
fn json_message(v: &serde_json::Value) -> Option<&str> {
    use serde_json::Value;
    for key in ["message", "error", "detail", "title"] {
        let found = match v.get(key) {
            Some(s @ Value::String(_)) => nonblank(s),
            Some(Value::Object(inner)) if key == "error" => inner.get("message").and_then(nonblank),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    v.get("errors")?.get(0)?.get("message").and_then(nonblank)
}

fn nonblank(v: &serde_json::Value) -> Option<&str> {
    v.as_str().filter(|s| !s.trim().is_empty())
}

/// The page's first `<h1>`, else its `<title>`, else its text. A one-word heading
/// ("Error", as Express's page has) says less than the text, so it is passed over.
fn html_message(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    for tag in ["h1", "title"] {
        if let Some(inner) = element(html, &lower, tag) {
            let text = collapse(&decode_entities(&strip_tags(inner)));
            if text.contains(' ') {
                return shorten(&text);
            }
        }
    }
    shorten(&collapse(&decode_entities(&strip_tags(html))))
}

/// The inside of the first `<tag …>…</tag>` (to the end of the text when unclosed).
/// `lower` is `html` in ASCII lower case: the same byte offsets.
fn element<'a>(html: &'a str, lower: &str, tag: &str) -> Option<&'a str> {
    let open = find_tag(lower, tag, 0)?;
    let start = open + lower[open..].find('>')? + 1;
    let end = lower[start..]
        .find(&format!("</{tag}"))
        .map_or(html.len(), |i| start + i);
    Some(&html[start..end])
}

/// Where the next `<tag` starts (followed by `>`, `/` or white space, so `<h1` does not
/// match `<h10`, nor `<title` `<titles`).
fn find_tag(lower: &str, tag: &str, from: usize) -> Option<usize> {
    let needle = format!("<{tag}");
    let mut at = from;
    while let Some(i) = lower[at..].find(&needle) {
        let i = at + i;
        let next = lower.as_bytes().get(i + needle.len());
        if matches!(
            next,
            None | Some(b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r')
        ) {
            return Some(i);
        }
        at = i + needle.len();
    }
    None
}

/// The text of an HTML fragment: tags become spaces, comments and the contents of
/// `<head>`, `<script>` and `<style>` are dropped.
fn strip_tags(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len());
    let mut at = 0;
    while let Some(i) = html[at..].find('<') {
        let i = at + i;
        out.push_str(&html[at..i]);
        out.push(' ');
        if lower[i..].starts_with("<!--") {
            at = lower[i..].find("-->").map_or(html.len(), |e| i + e + 3);
            continue;
        }
        let Some(close) = lower[i..].find('>') else {
            at = html.len();
            break;
        };
        at = i + close + 1;
        if let Some(skipped) = ["head", "script", "style"]
            .into_iter()
            .find(|t| find_tag(&lower[i..], t, 0) == Some(0))
        {
            at = lower[at..]
                .find(&format!("</{skipped}"))
                .and_then(|e| lower[at + e..].find('>').map(|g| at + e + g + 1))
                .unwrap_or(html.len());
        }
    }
    out.push_str(&html[at..]);
    out
}

/// The common named entities and numeric references; anything else stays as written.
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        // An entity is short: look for its `;` in the next few bytes (by bytes, as a
        // character may straddle the window's end).
        let Some(end) = rest.as_bytes()[..rest.len().min(12)]
            .iter()
            .position(|&b| b == b';')
        else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let decoded = match name {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            "nbsp" => Some(' '),
            _ => name.strip_prefix('#').and_then(|n| {
                let code = match n.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => n.parse().ok(),
                };
                code.and_then(char::from_u32)
            }),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs of white space as one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most [`MESSAGE_CHARS`] characters of `text` with white space collapsed; `None`
/// when nothing is left.
fn shorten(text: &str) -> Option<String> {
    let text = collapse(text);
    if text.is_empty() {
        return None;
    }
    Some(match text.char_indices().nth(MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", text[..cut].trim_end()),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (`proxy_body`): a multi-byte character within an entity's
    /// look-ahead window cut a `str` inside it.
    #[test]
    fn an_entity_window_ending_inside_a_character_is_no_panic() {
        assert_eq!(decode_entities("&nbsp;at fo\u{fffd}x"), " at fo\u{fffd}x");
        assert_eq!(decode_entities("&abcdefghi\u{fffd}"), "&abcdefghi\u{fffd}");
        assert_eq!(decode_entities("&#x41;&"), "A&");
    }

    fn entry(method: &str, url: &str, status: Option<u16>) -> TrafficEntry {
        TrafficEntry {
            method: method.into(),
            url: url.into(),
            status,
            error: status.is_none().then(|| "connection refused".into()),
            ..TrafficEntry::default()
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_and_counts_everything() {
        let log = TrafficLog::new(3);
        let t0 = SystemTime::UNIX_EPOCH;
        for (i, status) in [Some(200), Some(404), None, Some(200), Some(500)]
            .into_iter()
            .enumerate()
        {
            let at = t0 + std::time::Duration::from_secs(i as u64);
            log.record(at, entry("GET", &format!("/r{i}"), status));
        }
        assert_eq!(log.total(), 5);
        assert_eq!(log.errors(), 3);
        let all = log.query(&TrafficQuery::default());
        let ids: Vec<u64> = all.iter().map(|e| e.id).collect();
        assert_eq!(ids, [3, 4, 5]);
        let q = |q: TrafficQuery| -> Vec<u64> { log.query(&q).iter().map(|e| e.id).collect() };
        assert_eq!(
            q(TrafficQuery {
                since: Some(Since::Id(3)),
                ..Default::default()
            }),
            [4, 5]
        );
        let at3 = t0 + std::time::Duration::from_secs(3);
        assert_eq!(
            q(TrafficQuery {
                since: Some(Since::Time(at3)),
                ..Default::default()
            }),
            [4, 5]
        );
        assert_eq!(
            q(TrafficQuery {
                errors_only: true,
                ..Default::default()
            }),
            [3, 5]
        );
        assert_eq!(
            q(TrafficQuery {
                min_status: Some(500),
                ..Default::default()
            }),
            [5]
        );
        assert_eq!(
            q(TrafficQuery {
                path: Some("/r3".into()),
                method: Some("get".into()),
                ..Default::default()
            }),
            [4]
        );
        assert_eq!(
            q(TrafficQuery {
                limit: Some(2),
                ..Default::default()
            }),
            [4, 5]
        );
    }

    #[test]
    fn a_ring_of_none_still_counts() {
        let log = TrafficLog::new(0);
        log.record(SystemTime::now(), entry("GET", "/", Some(500)));
        assert_eq!((log.total(), log.errors()), (1, 1));
        assert!(log.query(&TrafficQuery::default()).is_empty());
    }

    #[test]
    fn entries_serialize_without_empty_fields() {
        let e = TrafficEntry {
            id: 7,
            ts: "2026-01-01T00:00:00.000Z".into(),
            ..entry("GET", "/x", Some(200))
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"id":7,"ts":"2026-01-01T00:00:00.000Z","method":"GET","url":"/x","status":200,"total_ms":0.0,"request_bytes":0,"response_bytes":0}"#
        );
        assert_eq!(serde_json::from_str::<TrafficEntry>(&json).unwrap(), e);
    }

    #[test]
    fn json_messages_are_found_where_apis_put_them() {
        let m = |ct: &str, s: &str| message(ct, s);
        assert_eq!(
            m("application/json", r#"{"error":{"message":"db down"}}"#),
            Some("db down".into())
        );
        assert_eq!(
            m("", r#"{"status":500,"detail":"no such user"}"#),
            Some("no such user".into())
        );
        assert_eq!(
            m(
                "application/json",
                r#"{"message":"first","error":"second"}"#
            ),
            Some("first".into())
        );
        assert_eq!(
            m(
                "application/json",
                r#"{"errors":[{"message":"bad query"}]}"#
            ),
            Some("bad query".into())
        );
        // No known field: the text itself.
        assert_eq!(
            m("application/json", r#"{"code": 7}"#),
            Some(r#"{"code": 7}"#.into())
        );
    }

    #[test]
    fn html_messages_are_a_heading_or_the_text() {
        let express = "<!DOCTYPE html><html><head><meta charset=utf-8><title>Error</title>\
            <style>pre { color: red }</style></head><body><pre>Error: db down<br> &nbsp; \
            &nbsp;at handler (/app/x.js:3:9)</pre><script>alert(1)</script></body></html>";
        assert_eq!(
            message("text/html", express),
            Some("Error: db down at handler (/app/x.js:3:9)".into())
        );
        let django = "<html><head><title>OperationalError at /</title></head>\
            <body><h1 class=x>OperationalError at /users</h1><p>db down</p></body></html>";
        assert_eq!(
            message("text/html; charset=utf-8", django),
            Some("OperationalError at /users".into())
        );
        assert_eq!(
            message("", "<!-- c --><p>a &lt;b&gt; &amp; &#x41;&#66;</p>"),
            Some("a <b> & AB".into())
        );
    }

    #[test]
    fn plain_messages_are_collapsed_and_shortened() {
        assert_eq!(
            message("text/plain", "  Internal\n\n error  "),
            Some("Internal error".into())
        );
        let long = "x".repeat(1000);
        let m = message("text/plain", &long).unwrap();
        assert_eq!(m.chars().count(), MESSAGE_CHARS + 1);
        assert!(m.ends_with('…'));
        assert_eq!(message("text/plain", " \n "), None);
    }

    #[test]
    fn excerpts_are_bounded_and_decoded() {
        use std::io::Write;
        let mut x = Excerpt::new(None);
        x.push(&[b'a'; 5000]);
        x.push(&[b'b'; 5000]);
        let (text, _) = x.finish(Some("text/plain"));
        let text = text.unwrap();
        assert_eq!(text.len(), EXCERPT_BYTES);
        assert!(text.ends_with('b'));

        // A gzip bomb keeps to the bound once decoded.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![b'z'; 4 << 20]).unwrap();
        let mut x = Excerpt::new(Some("gzip"));
        x.push(&gz.finish().unwrap());
        assert_eq!(x.finish(None).0.unwrap().len(), EXCERPT_BYTES);

        let mut x = Excerpt::new(Some("zstd"));
        x.push(b"\x28\xb5\x2f\xfd");
        assert_eq!(x.finish(None), (None, None));
    }
}
