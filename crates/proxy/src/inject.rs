//! Inserting the browser error script into HTML documents.
//!
//! [`request`] runs on every forwarded request before it leaves, [`response`] on every
//! response head from the target. A response that is not an HTML document to rewrite
//! passes untouched: same headers, same bytes.
//!
//! # Where the tag goes
//!
//! `<script src="/__corral/client.js"></script>` goes before `</head>`; without one,
//! right after `<head>`; without a head, right after `<body>`; then right after `<html>`;
//! and a fragment gets it prepended. The document streams through lol_html chunk by
//! chunk; only the output before the insertion point is held back (the fallbacks need to
//! know what does *not* follow), at most [`HOLD_LIMIT`] bytes, after which the best
//! place seen so far is taken. An empty body stays empty.
//!
//! # Encodings and caching
//!
//! A gzip, deflate or brotli document is decoded ([`crate::codec`]) and sent as identity:
//! re-encoding would cost CPU for nothing on loopback. Decoding goes in bounded steps
//! (a frame to the browser each), so a page's memory is bounded whatever its
//! compression ratio; and [`rewrite`] reads a document until the tag's place is decided
//! before the head goes out, so that one that trips a limit meanwhile (a bomb: over
//! [`RATIO`] times its coded size) is passed untouched, as the target sent it, with one
//! `proxy.error`. To keep HTML decodable,
//! [`request`] narrows `Accept-Encoding` to those codings on requests that may get HTML;
//! a document in any other coding (or stacked codings) passes untouched, without the
//! script. A rewritten response loses `Content-Length` (it is chunked), `ETag`,
//! `Last-Modified` and `Accept-Ranges`: the validators describe the target's bytes, not
//! ours, and without them the browser never revalidates into a copy cached before the
//! proxy injected (for the same reason [`request`] drops `If-None-Match` and
//! `If-Modified-Since` from navigations). Partial (206) responses are never rewritten.
//!
//! # Content Security Policy
//!
//! The script is external and same-origin, so `script-src 'self'` allows it. When the
//! response's policy names a nonce for scripts (`script-src-elem`, `script-src` or
//! `default-src`), the tag carries it. A policy that allows neither `'self'` nor a nonce
//! (hash-only, `'strict-dynamic'` without a nonce) blocks the script, and a `connect-src`
//! without `'self'` blocks its reports: the page's policy is never weakened, so such a
//! page reports no browser errors.

use crate::codec::{self, Coding, Decoder, over_limit};
use crate::{BoxError, ProxyBody, Shared};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::{request, response};
use lol_html::html_content::ContentType;
use lol_html::send::{HtmlRewriter, Settings};
use lol_html::{OutputSink, element};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

/// Where the proxy serves the script.
pub const SCRIPT_PATH: &str = "/__corral/client.js";

/// Output held back while looking for the insertion point.
pub const HOLD_LIMIT: usize = 256 * 1024;

/// While the place for the tag is searched, a document that has decoded to more than
/// [`RATIO_FLOOR`] bytes and more than this many times the coded bytes it took is given
/// up on (passed untouched): HTML compresses 5 to 20 times, a bomb a thousand.
pub const RATIO: usize = 100;

/// Decoded bytes before [`RATIO`] is checked (a short start may compress well).
pub const RATIO_FLOOR: usize = 64 * 1024;

/// The `proxy.error` reasons of a document passed untouched.
const TOO_COMPRESSED: &str = "an HTML page decoding to over 100 times its coded size was passed untouched, without the error script";
const REWRITER_LIMIT: &str =
    "an HTML page over lol_html's memory limit was passed untouched, without the error script";

/// lol_html buffers a tag split across chunks; a page with a bigger one is cut off with
/// an error rather than grow the proxy without bound.
const REWRITER_MEMORY: usize = 32 << 20;

/// Codings a rewritten document may come in.
const DECODABLE: [&str; 5] = ["gzip", "x-gzip", "deflate", "br", "identity"];

/// Adjusts a request about to be forwarded: on a GET that may get HTML, `Accept-Encoding`
/// keeps only codings [`response`] can decode, and a navigation loses its validators.
pub(crate) fn request(shared: &Shared, parts: &mut request::Parts) {
    if !shared.spec.inject || parts.method != hyper::Method::GET {
        return;
    }
    let accept = joined(&parts.headers, header::ACCEPT).to_ascii_lowercase();
    let navigation = accept.contains("text/html");
    if !(accept.is_empty() || navigation || accept.contains("*/*")) {
        return;
    }
    if parts.headers.contains_key(header::ACCEPT_ENCODING) {
        let offered = joined(&parts.headers, header::ACCEPT_ENCODING);
        let kept = decodable_codings(&offered);
        let kept = if kept.is_empty() { "identity" } else { &kept };
        if let Ok(value) = HeaderValue::from_str(kept) {
            parts.headers.insert(header::ACCEPT_ENCODING, value);
        }
    }
    if navigation {
        parts.headers.remove(header::IF_NONE_MATCH);
        parts.headers.remove(header::IF_MODIFIED_SINCE);
    }
}

/// Whether the script is to go into this response from the target: injection is on, and
/// it is a non-empty HTML document [`rewrite`] takes (it may still pass it untouched if
/// a limit trips while the place is searched).
pub(crate) fn candidate(shared: &Shared, parts: &response::Parts, body: &impl Body) -> bool {
    shared.spec.inject && !body.is_end_stream() && rewritable(parts).is_some()
}

/// The body to send for a response from the target: `body` itself, or the rewritten
/// document (then `parts` is fixed up: encoding, length, validators); and whether the
/// script went in. `path` is the request's, for the event when a limit makes a document
/// pass without the tag.
pub(crate) async fn response(
    shared: &Shared,
    path: &str,
    parts: &mut response::Parts,
    body: ProxyBody,
) -> (ProxyBody, bool) {
    if !shared.spec.inject {
        return (body, false);
    }
    let (body, outcome) = rewrite(parts, body, &shared.key).await;
    if let Outcome::PassedUntouched(Some(reason)) = outcome {
        over_limit(shared, reason, path);
    }
    (body, outcome == Outcome::Injected)
}

/// What [`rewrite`] did with a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not an HTML document to rewrite (or an empty one): passed as it is.
    NotADocument,
    /// The script goes in.
    Injected,
    /// A document passed untouched after all, with the limit that tripped, if one did
    /// (none: the target's document did not decode).
    PassedUntouched(Option<&'static str>),
}

/// [`response`] with injection on: the rewritten document, or `body` itself when it is
/// not one to rewrite.
///
/// The document is read, decoded and rewritten until the place for the tag is decided,
/// before the response head goes out, keeping the target's frames read meanwhile. If a
/// limit trips first (the document decodes to over [`RATIO`] times its coded size, or
/// lol_html needs more than its memory limit), those frames and the rest of the body go
/// out as they came, with the target's headers (its `Content-Encoding` and
/// `Content-Length`), and the reason is returned for the event. Decoding is in bounded
/// steps throughout ([`codec::STEP`]), so however compressed a document is, the proxy
/// holds at most [`HOLD_LIMIT`] and a step of it.
pub(crate) async fn rewrite(
    parts: &mut response::Parts,
    body: ProxyBody,
    key: &str,
) -> (ProxyBody, Outcome) {
    if body.is_end_stream() {
        return (body, Outcome::NotADocument);
    }
    let Some(coding) = rewritable(parts) else {
        return (body, Outcome::NotADocument);
    };
    let tag = script_tag(csp_nonce(&parts.headers).as_deref(), key);
    let mut doc = Injecting::new(body, coding, tag);
    let mut kept: VecDeque<Result<Frame<Bytes>, BoxError>> = VecDeque::new();
    let given_up = loop {
        if doc.held.is_none() || doc.done {
            break None;
        }
        if doc.has_input() {
            match doc.pump() {
                Ok(out) if !out.is_empty() => doc.queue.push_back(out),
                Ok(_) => {}
                // A decoding error is the target's broken document: it goes as it is.
                Err(e) if e.is::<std::io::Error>() => break Some(None),
                Err(_) => break Some(Some(REWRITER_LIMIT)),
            }
            if doc.too_compressed() {
                break Some(Some(TOO_COMPRESSED));
            }
            continue;
        }
        match doc.inner.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    doc.pending = data.clone();
                }
                kept.push_back(Ok(frame));
            }
            Some(Err(e)) => {
                kept.push_back(Err(e));
                doc.ended = true;
                break Some(None);
            }
            None => doc.ended = true,
        }
    };
    if let Some(reason) = given_up {
        let rest = (!doc.ended).then_some(doc.inner);
        return (
            Replay { kept, rest }.boxed_unsync(),
            Outcome::PassedUntouched(reason),
        );
    }
    for name in [
        header::CONTENT_ENCODING,
        header::CONTENT_LENGTH,
        header::ETAG,
        header::LAST_MODIFIED,
        header::ACCEPT_RANGES,
    ] {
        parts.headers.remove(name);
    }
    (doc.boxed_unsync(), Outcome::Injected)
}

/// The target's frames read while deciding, then the rest of its body: a document
/// passed untouched.
struct Replay {
    kept: VecDeque<Result<Frame<Bytes>, BoxError>>,
    rest: Option<ProxyBody>,
}

impl Body for Replay {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(frame) = self.kept.pop_front() {
            return Poll::Ready(Some(frame));
        }
        match &mut self.rest {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.kept.is_empty() && self.rest.as_ref().is_none_or(|r| r.is_end_stream())
    }
}

/// Whether a response is an HTML document to rewrite, and in which coding it comes
/// (`Some(None)` for identity).
fn rewritable(parts: &response::Parts) -> Option<Option<Coding>> {
    let status = parts.status.as_u16();
    // Not 204/205 (no body) nor 206 (a slice of the target's bytes).
    if !matches!(status, 200..=299 | 400..=599) || matches!(status, 204..=206) {
        return None;
    }
    let content_type = parts.headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let mut params = content_type.split(';');
    let essence = params.next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("text/html") {
        return None;
    }
    // lol_html reads ASCII-compatible encodings only; UTF-16 pages pass untouched.
    let utf16 = params.any(|p| {
        let p = p.trim().to_ascii_lowercase();
        p.strip_prefix("charset=")
            .is_some_and(|c| c.trim_matches('"').starts_with("utf-16"))
    });
    let download = parts
        .headers
        .get(header::CONTENT_DISPOSITION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("attachment")
        });
    if utf16 || download {
        return None;
    }
    let mut codings = parts.headers.get_all(header::CONTENT_ENCODING).iter();
    match (codings.next(), codings.next()) {
        (None, _) => Some(None),
        (Some(value), None) => {
            let value = value.to_str().ok()?;
            if value.trim().eq_ignore_ascii_case("identity") {
                Some(None)
            } else {
                Coding::parse(value).map(Some)
            }
        }
        (Some(_), Some(_)) => None,
    }
}

/// The items of an `Accept-Encoding` whose coding is one we decode, in order.
fn decodable_codings(offered: &str) -> String {
    offered
        .split(',')
        .map(str::trim)
        .filter(|item| {
            let coding = item.split(';').next().unwrap_or("").trim();
            DECODABLE.iter().any(|d| coding.eq_ignore_ascii_case(d))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// All values of a header, comma-joined (a header may be repeated).
fn joined(headers: &HeaderMap, name: header::HeaderName) -> String {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tag inserted into each document; `key` (hex) is the proxy's report key
/// ([`crate::browser`]), in the document only, where only the page itself can read it.
pub fn script_tag(nonce: Option<&str>, key: &str) -> String {
    match nonce {
        Some(nonce) => {
            format!(r#"<script src="{SCRIPT_PATH}" nonce="{nonce}" data-k="{key}"></script>"#)
        }
        None => format!(r#"<script src="{SCRIPT_PATH}" data-k="{key}"></script>"#),
    }
}

/// The nonce the response's Content Security Policy allows scripts by, if any: from the
/// directive that governs `<script src>` (`script-src-elem`, else `script-src`, else
/// `default-src`) of the enforced policies, else of the report-only ones.
///
/// A nonce is base64 (or base64url), so it is safe in an attribute; anything else is
/// ignored rather than escaped.
pub fn csp_nonce(headers: &HeaderMap) -> Option<String> {
    [
        "content-security-policy",
        "content-security-policy-report-only",
    ]
    .into_iter()
    .flat_map(|name| headers.get_all(name).iter())
    .filter_map(|v| v.to_str().ok())
    .flat_map(|v| v.split(','))
    .find_map(policy_nonce)
}

fn policy_nonce(policy: &str) -> Option<String> {
    let directives: Vec<(String, &str)> = policy
        .split(';')
        .filter_map(|d| {
            let d = d.trim();
            let (name, value) = d.split_once(char::is_whitespace).unwrap_or((d, ""));
            (!name.is_empty()).then(|| (name.to_ascii_lowercase(), value))
        })
        .collect();
    let governing = ["script-src-elem", "script-src", "default-src"]
        .into_iter()
        .find_map(|name| directives.iter().find(|(n, _)| n == name))?;
    governing.1.split_whitespace().find_map(|source| {
        let nonce = source.strip_prefix("'nonce-")?.strip_suffix('\'')?;
        let base64 = |c: char| c.is_ascii_alphanumeric() || "+/=-_".contains(c);
        (!nonce.is_empty() && nonce.chars().all(base64)).then(|| nonce.to_owned())
    })
}

/// Where the tag goes, as far as the document read so far tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not decided: output is held.
    Searching,
    /// lol_html inserted it (before `</head>`, after `<body>`).
    Inserted,
    /// At the marker after `<head>` (a head without `</head>`).
    AfterHead,
    /// At the marker after `<html>` (no head, no body).
    AfterHtml,
    /// Before everything (a fragment).
    Prepend,
}

/// What the rewriter's handlers and its output sink share with the body.
struct Scan {
    /// Output not yet taken by the body.
    out: Vec<u8>,
    place: Place,
    seen_head: bool,
    seen_html: bool,
}

impl Scan {
    /// The best place when no better one can come (the end, or too much held).
    fn fallback(&self) -> Place {
        if self.seen_head {
            Place::AfterHead
        } else if self.seen_html {
            Place::AfterHtml
        } else {
            Place::Prepend
        }
    }
}

type ScanRef = Arc<Mutex<Scan>>;

fn lock(scan: &ScanRef) -> MutexGuard<'_, Scan> {
    // Nothing panics while holding it; a poisoned lock still holds consistent bytes.
    scan.lock().unwrap_or_else(|e| e.into_inner())
}

struct Sink(ScanRef);

impl OutputSink for Sink {
    fn handle_chunk(&mut self, chunk: &[u8]) {
        lock(&self.0).out.extend_from_slice(chunk);
    }
}

/// Comments put after `<head>` and `<html>` while the place is open: the fallbacks need
/// to insert where those tags were, long after lol_html emitted them. Unique per
/// document, so page content cannot look like one; all are removed once the place is
/// known.
struct Markers {
    head: String,
    html: String,
}

impl Markers {
    fn new() -> Markers {
        use std::hash::BuildHasher;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let id = std::collections::hash_map::RandomState::new()
            .hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
        Markers {
            head: format!("<!--corral-{id:016x}-head-->"),
            html: format!("<!--corral-{id:016x}-html-->"),
        }
    }
}

/// The rewriting body: decodes in bounded steps, feeds lol_html, yields what it writes,
/// a frame per step (leftover coded input is decoded before the target is polled
/// again).
struct Injecting {
    inner: ProxyBody,
    decoder: Option<Decoder>,
    /// Coded input not decoded yet.
    pending: Bytes,
    /// The target's body ended.
    ended: bool,
    /// Coded bytes the decoder took, and the plain bytes it gave, for [`RATIO`].
    coded_in: usize,
    plain_out: usize,
    /// Output made while [`rewrite`] decided, to send first.
    queue: VecDeque<Bytes>,
    /// `None` once ended.
    rewriter: Option<HtmlRewriter<'static, Sink>>,
    scan: ScanRef,
    markers: Markers,
    tag: String,
    /// The output before the insertion point; `None` once it is sent.
    held: Option<Vec<u8>>,
    done: bool,
}

impl Injecting {
    fn new(inner: ProxyBody, coding: Option<Coding>, tag: String) -> Injecting {
        let scan: ScanRef = Arc::new(Mutex::new(Scan {
            out: Vec::new(),
            place: Place::Searching,
            seen_head: false,
            seen_html: false,
        }));
        let markers = Markers::new();
        let (html_scan, head_scan, body_scan) = (scan.clone(), scan.clone(), scan.clone());
        let (html_marker, head_marker) = (markers.html.clone(), markers.head.clone());
        let (head_tag, body_tag) = (tag.clone(), tag.clone());
        let mut settings = Settings::new_send();
        settings.strict = false;
        settings.memory_settings.max_allowed_memory_usage = REWRITER_MEMORY;
        settings.element_content_handlers = vec![
            element!("html", move |el| {
                let mut scan = lock(&html_scan);
                if scan.place == Place::Searching && !scan.seen_html {
                    scan.seen_html = true;
                    el.prepend(&html_marker, ContentType::Html);
                }
                Ok(())
            }),
            element!("head", move |el| {
                let mut scan = lock(&head_scan);
                if scan.place != Place::Searching || scan.seen_head {
                    return Ok(());
                }
                scan.seen_head = true;
                el.prepend(&head_marker, ContentType::Html);
                let (end_scan, tag) = (head_scan.clone(), head_tag.clone());
                let at_end: lol_html::send::EndTagHandler<'static> = Box::new(move |end| {
                    let mut scan = lock(&end_scan);
                    if scan.place == Place::Searching {
                        end.before(&tag, ContentType::Html);
                        scan.place = Place::Inserted;
                    }
                    Ok(())
                });
                if let Some(handlers) = el.end_tag_handlers() {
                    handlers.push(at_end);
                }
                Ok(())
            }),
            element!("body", move |el| {
                let mut scan = lock(&body_scan);
                if scan.place == Place::Searching {
                    // A head left open ends here: "after <head>" beats "after <body>".
                    if scan.seen_head {
                        scan.place = Place::AfterHead;
                    } else {
                        el.prepend(&body_tag, ContentType::Html);
                        scan.place = Place::Inserted;
                    }
                }
                Ok(())
            }),
        ];
        let rewriter = HtmlRewriter::new(settings, Sink(scan.clone()));
        Injecting {
            inner,
            decoder: coding.map(Decoder::new),
            pending: Bytes::new(),
            ended: false,
            coded_in: 0,
            plain_out: 0,
            queue: VecDeque::new(),
            rewriter: Some(rewriter),
            scan,
            markers,
            tag,
            held: Some(Vec::new()),
            done: false,
        }
    }

    /// Whether [`Injecting::pump`] has work without polling the target.
    fn has_input(&self) -> bool {
        !self.pending.is_empty()
            || self.decoder.as_ref().is_some_and(Decoder::has_pending)
            || (self.ended && !self.done)
    }

    /// Whether the document decodes to more than [`RATIO`] times its coded size.
    fn too_compressed(&self) -> bool {
        self.decoder.is_some()
            && self.plain_out > RATIO_FLOOR
            && self.plain_out > RATIO.saturating_mul(self.coded_in)
    }

    /// One bounded step: decodes at most [`codec::STEP`] plain bytes of the pending
    /// input (at the end, of what the decoder still holds), rewrites them, and returns
    /// the output to send now. Once the tag is in, lol_html is ended (it writes out what
    /// it still buffers, a tag cut at the chunk's end, as it is) and the rest of the
    /// document passes untouched: parsing a page's body for nothing was a quarter of the
    /// cost of injecting.
    fn pump(&mut self) -> Result<Bytes, BoxError> {
        let (plain, last) = match &mut self.decoder {
            None => (std::mem::take(&mut self.pending), self.ended),
            Some(decoder) => {
                let mut plain = Vec::new();
                let last = if !self.pending.is_empty() || decoder.has_pending() {
                    let used = decoder.decode(&self.pending, codec::STEP, &mut plain)?;
                    self.coded_in += used;
                    let _ = self.pending.split_to(used);
                    false
                } else {
                    decoder.finish(codec::STEP, &mut plain)?
                };
                (Bytes::from(plain), last)
            }
        };
        self.plain_out += plain.len();
        self.done = last;
        let Some(rewriter) = &mut self.rewriter else {
            return Ok(plain);
        };
        rewriter.write(&plain)?;
        if last {
            if let Some(rewriter) = self.rewriter.take() {
                rewriter.end()?;
            }
            return Ok(self.take(true));
        }
        let out = self.take(false);
        if self.held.is_some() {
            return Ok(out);
        }
        if let Some(rewriter) = self.rewriter.take() {
            rewriter.end()?;
        }
        Ok(join(out, self.take(false)))
    }

    /// Takes what the rewriter wrote: held while the place is open, else sent.
    fn take(&mut self, at_end: bool) -> Bytes {
        let (out, place) = {
            let mut scan = lock(&self.scan);
            let held = self.held.as_ref().map_or(0, Vec::len);
            if scan.place == Place::Searching && (at_end || held + scan.out.len() > HOLD_LIMIT) {
                scan.place = scan.fallback();
            }
            (std::mem::take(&mut scan.out), scan.place)
        };
        let Some(mut held) = self.held.take() else {
            return out.into();
        };
        held.extend_from_slice(&out);
        if place == Place::Searching {
            self.held = Some(held);
            return Bytes::new();
        }
        if held.is_empty() {
            // An empty document is no document to script.
            return Bytes::new();
        }
        // Each marker was put in once, near the top: the tag takes the chosen one's
        // place, the other goes.
        let (head, html) = (self.markers.head.as_bytes(), self.markers.html.as_bytes());
        let tag = self.tag.as_bytes();
        let (head_with, html_with): (&[u8], &[u8]) = match place {
            Place::AfterHead => (tag, b""),
            Place::AfterHtml => (b"", tag),
            _ => (b"", b""),
        };
        let mut doc = replace_once(&held, head, head_with);
        doc = replace_once(&doc, html, html_with);
        if place == Place::Prepend {
            doc.splice(0..0, self.tag.bytes());
        }
        doc.into()
    }
}

/// `haystack` with its first `needle` (if any) replaced by `with`.
fn replace_once(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len() + with.len());
    match memchr::memmem::find(haystack, needle) {
        Some(at) => {
            out.extend_from_slice(&haystack[..at]);
            out.extend_from_slice(with);
            out.extend_from_slice(&haystack[at + needle.len()..]);
        }
        None => out.extend_from_slice(haystack),
    }
    out
}

/// `a` then `b`, copied only when both have bytes.
fn join(a: Bytes, b: Bytes) -> Bytes {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b,
        (_, true) => a,
        _ => [a, b].concat().into(),
    }
}

impl Body for Injecting {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if let Some(out) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            if this.has_input() {
                match this.pump() {
                    Ok(out) if out.is_empty() => continue,
                    Ok(out) => return Poll::Ready(Some(Ok(Frame::data(out)))),
                    Err(e) => {
                        this.done = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
            match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                // Trailers of a rewritten document are dropped: any digest in them is
                // of the target's bytes.
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.pending = data;
                    }
                }
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                None => this.ended = true,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const TAG: &str = r#"<script src="/__corral/client.js"></script>"#;

    /// Runs `doc` through the rewriter in chunks of `size` bytes.
    async fn rewrite(doc: &[u8], size: usize, coding: Option<Coding>) -> Vec<u8> {
        let chunks: Vec<Result<Frame<Bytes>, BoxError>> = doc
            .chunks(size)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let body = frames(chunks).boxed_unsync();
        let out = Injecting::new(body, coding, TAG.to_owned())
            .collect()
            .await
            .unwrap()
            .to_bytes();
        out.to_vec()
    }

    /// A body yielding `items`, one per poll.
    fn frames(
        items: Vec<Result<Frame<Bytes>, BoxError>>,
    ) -> impl hyper::body::Body<Data = Bytes, Error = BoxError> + Send + 'static {
        struct Iter(std::vec::IntoIter<Result<Frame<Bytes>, BoxError>>);
        impl Body for Iter {
            type Data = Bytes;
            type Error = BoxError;
            fn poll_frame(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
                Poll::Ready(self.0.next())
            }
        }
        Iter(items.into_iter())
    }

    async fn check(doc: &str, expected: &str) {
        for size in [doc.len().max(1), 1, 7] {
            let out = rewrite(doc.as_bytes(), size, None).await;
            assert_eq!(
                String::from_utf8(out).unwrap(),
                expected,
                "chunks of {size}"
            );
        }
    }

    #[tokio::test]
    async fn the_tag_goes_before_the_end_of_head() {
        check(
            "<!doctype html><html><head><title>t</title></head><body><p>x</p></body></html>",
            &format!("<!doctype html><html><head><title>t</title>{TAG}</head><body><p>x</p></body></html>"),
        )
        .await;
        check(
            "<HTML><HEAD><TITLE>t</TITLE></HEAD><BODY>x</BODY></HTML>",
            &format!("<HTML><HEAD><TITLE>t</TITLE>{TAG}</HEAD><BODY>x</BODY></HTML>"),
        )
        .await;
    }

    #[tokio::test]
    async fn fallbacks_after_head_body_html_or_first() {
        check(
            "<html><head><title>t</title><body>x</body></html>",
            &format!("<html><head>{TAG}<title>t</title><body>x</body></html>"),
        )
        .await;
        check(
            "<html><head><title>t</title>",
            &format!("<html><head>{TAG}<title>t</title>"),
        )
        .await;
        check(
            "<html><body class=a><p>x</p></body></html>",
            &format!("<html><body class=a>{TAG}<p>x</p></body></html>"),
        )
        .await;
        check(
            "<html><p>x</p></html>",
            &format!("<html>{TAG}<p>x</p></html>"),
        )
        .await;
        check("<p>a fragment</p>", &format!("{TAG}<p>a fragment</p>")).await;
        check("", "").await;
    }

    #[tokio::test]
    async fn tags_in_scripts_and_comments_are_not_landmarks() {
        check(
            "<html><head><script>var s = '</head><body>';</script><!-- <body> --></head><body></body></html>",
            &format!("<html><head><script>var s = '</head><body>';</script><!-- <body> -->{TAG}</head><body></body></html>"),
        )
        .await;
    }

    #[tokio::test]
    async fn a_long_document_without_landmarks_is_not_held_whole() {
        let doc = "<p>line</p>\n".repeat(HOLD_LIMIT / 8);
        let out = rewrite(doc.as_bytes(), 4096, None).await;
        assert_eq!(out, format!("{TAG}{doc}").into_bytes());
    }

    #[tokio::test]
    async fn gzip_and_brotli_documents_are_decoded() {
        let doc = format!(
            "<html><head><title>t</title></head><body>{}</body></html>",
            "<p>é</p>".repeat(2000)
        );
        let expected = doc.replace("</head>", &format!("{TAG}</head>"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(doc.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(
            rewrite(&gz, 7, Some(Coding::Gzip)).await,
            expected.as_bytes()
        );
        let mut br = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        br.write_all(doc.as_bytes()).unwrap();
        let br = br.into_inner();
        assert_eq!(
            rewrite(&br, 1, Some(Coding::Brotli)).await,
            expected.as_bytes()
        );
    }

    /// A compressed document given in one chunk comes out a bounded step at a time
    /// (each frame at most a step and the tag), never decoded whole at once.
    #[tokio::test]
    async fn a_compressed_document_streams_in_bounded_frames() {
        let doc = format!(
            "<html><head></head><body>{}</body></html>",
            "<p>row</p>".repeat(200_000)
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(doc.as_bytes()).unwrap();
        let body = frames(vec![Ok(Frame::data(gz.finish().unwrap().into()))]).boxed_unsync();
        let mut body = Injecting::new(body, Some(Coding::Gzip), TAG.to_owned());
        let (mut out, mut frames_seen) = (Vec::new(), 0);
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(
                data.len() <= codec::STEP + TAG.len(),
                "a frame of {}",
                data.len()
            );
            out.extend_from_slice(&data);
            frames_seen += 1;
        }
        assert!(
            frames_seen > doc.len() / codec::STEP,
            "{frames_seen} frames"
        );
        assert_eq!(
            out,
            doc.replace("</head>", &format!("{TAG}</head>")).as_bytes()
        );
    }

    #[test]
    fn nonce_from_the_directive_that_governs_scripts() {
        let mut h = HeaderMap::new();
        h.insert(
            "content-security-policy",
            "default-src 'self'; script-src 'nonce-abc+/=' 'strict-dynamic'"
                .parse()
                .unwrap(),
        );
        assert_eq!(csp_nonce(&h).as_deref(), Some("abc+/="));
        h.insert(
            "content-security-policy",
            "script-src 'self'; default-src 'nonce-x'".parse().unwrap(),
        );
        assert_eq!(csp_nonce(&h), None);
        h.insert(
            "content-security-policy",
            "img-src *, default-src 'nonce-r2'".parse().unwrap(),
        );
        assert_eq!(csp_nonce(&h).as_deref(), Some("r2"));
        h.insert(
            "content-security-policy",
            r#"script-src 'nonce-"><x'"#.parse().unwrap(),
        );
        assert_eq!(csp_nonce(&h), None);
    }

    #[test]
    fn accept_encoding_keeps_decodable_codings() {
        assert_eq!(
            decodable_codings("gzip, deflate, br, zstd"),
            "gzip, deflate, br"
        );
        assert_eq!(decodable_codings("zstd;q=1.0, br;q=0.9"), "br;q=0.9");
        assert_eq!(decodable_codings("zstd, *"), "");
    }
}
