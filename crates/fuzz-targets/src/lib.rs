//! The bodies of the fuzz targets in `fuzz/` (run with `scripts/fuzz.sh`, cargo-fuzz):
//! each takes the fuzzer's bytes, drives one of Corral's parsers of untrusted input, and
//! panics when an invariant breaks. They live here, in the main workspace, so that the
//! committed corpus (`fuzz/corpus/<target>/`) also replays as a plain stable-Rust test
//! (`tests/corpus.rs`) and a regression is caught without cargo-fuzz.
//!
//! | target | input | asserts |
//! |---|---|---|
//! | [`stdout_line`] | a server's stdout | no panic; the decoded parts are valid JSON, noise stays bounded |
//! | [`stderr_lines`] | a server's stderr, in chunks the fuzzer chooses | the lines equal a whole-input model (only the documented truncation loses bytes), none over its bound; no configured secret survives redaction |
//! | [`config`] | `corral.toml`, `.mcp.json`, VS Code `mcp.json` | no panic; problems point into the file (1-based) |
//! | [`control_request`] | a control-socket request line | parse → serialize → parse gives the same request |
//! | [`http_request`] | bytes on an HTTP connection to `/mcp` | hyper + the gateway's route answer with a valid status or close, and the connection ends |
//! | [`proxy_report`] | a browser error report, a source map and its script with positions, a coded body with a limit | a report parses or is refused, its locations are on the origin; a map decodes or not, lookups never panic, its estimate covers its tokens; bounded decoding never returns more than its limit |
//! | [`www_authenticate`] | a server's `WWW-Authenticate` headers | no panic; a `Bearer` challenge only when the input names one, its values no longer than the input; the same answer twice |
//! | [`proxy_body`] | what a dev proxy's target or page sends: an HTML document in chunks, an error body, a browser error report | the document comes out as it went in plus exactly one script tag; an error message is short and never empty; a report parses or is refused, never panics |

use corral_config::redact::Redactor;
use corral_supervisor::lines::{LineSplitter, TRUNCATION_MARKER};
use corral_supervisor::rpc::{Decoded, decode_line};
use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target, by the name of its file in `fuzz/fuzz_targets/` and its corpus folder.
pub const TARGETS: &[(&str, Target)] = &[
    ("stdout_line", stdout_line),
    ("stderr_lines", stderr_lines),
    ("config", config),
    ("control_request", control_request),
    ("http_request", http_request),
    ("proxy_body", proxy_body),
    ("proxy_report", proxy_report),
    ("sse", sse),
    ("www_authenticate", www_authenticate),
];

/// The stdout decoder ([`decode_line`]) on each line of `data`, as the reader cuts them
/// (each with its `\n`), and on the whole input as one line.
pub fn stdout_line(data: &[u8]) {
    for line in data.split_inclusive(|&b| b == b'\n') {
        check_decoded(line, decode_line(line));
    }
    check_decoded(data, decode_line(data));
}

fn check_decoded(line: &[u8], decoded: Decoded<'_>) {
    let valid_json = |raw: &str| serde_json::from_str::<serde::de::IgnoredAny>(raw).is_ok();
    match decoded {
        Decoded::Blank => assert!(
            line.iter().all(u8::is_ascii_whitespace),
            "a line with text decoded as blank"
        ),
        Decoded::Response { reply, .. } => {
            if let Ok(result) = reply {
                assert!(valid_json(result.get()), "result is not JSON");
            }
        }
        Decoded::Request { method, id, params } => {
            assert!(valid_json(id.get()), "request id is not JSON");
            assert!(
                params.is_none_or(|p| valid_json(p.get())),
                "params not JSON"
            );
            drop(method);
        }
        Decoded::Notification { params, .. } => {
            assert!(
                params.is_none_or(|p| valid_json(p.get())),
                "params not JSON"
            );
        }
        Decoded::Framing => {}
        Decoded::StrayAnswer { id, shown } => {
            assert!(valid_json(id.get()), "answer id is not JSON");
            assert!(shown.len() <= 3 * 1024 + TRUNCATION_MARKER.len());
        }
        Decoded::Unreadable(text) => {
            assert!(
                text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'),
                "only object-like lines are unreadable answers"
            );
        }
        Decoded::Noise(shown) => {
            // At most 1 KiB of the line, each byte at most one U+FFFD (3 bytes), and the
            // marker: a line of a gigabyte never becomes a gigabyte of log.
            assert!(
                shown.len() <= 3 * 1024 + TRUNCATION_MARKER.len(),
                "noise of {} bytes",
                shown.len()
            );
        }
    }
}

/// Secrets the stderr target's redactor is configured with (the corpus holds lines
/// that contain them).
pub const SECRETS: [&str; 3] = ["hunter2-secret", "s3cr3t", "abcd"];

/// A server's stderr through the drain's two stages: [`LineSplitter`] (the fuzzer picks
/// the line limit and every chunk boundary) and a [`Redactor`] per stream.
///
/// Input: `[max_line, n, len_1 … len_n, stream …]`: chunk lengths cycle through the
/// `len_i` (0 is an empty read); with `n = 0` the stream is one chunk.
pub fn stderr_lines(data: &[u8]) {
    let Some((&max, rest)) = data.split_first() else {
        return;
    };
    let max = max as usize;
    let (lens, stream) = match rest.split_first() {
        Some((&n, rest)) => rest.split_at((n as usize % 16).min(rest.len())),
        None => (&[][..], rest),
    };

    // All-zero lengths would never advance: then the stream is one chunk.
    let sizes: Vec<usize> = match lens.iter().all(|&l| l == 0) {
        true => vec![stream.len()],
        false => lens.iter().map(|&l| l as usize).collect(),
    };
    let mut splitter = LineSplitter::new(max);
    let mut lines = Vec::new();
    let mut at = 0;
    for &len in sizes.iter().cycle() {
        if at >= stream.len() {
            break;
        }
        let end = (at + len).min(stream.len());
        splitter.push(&stream[at..end], |l| lines.push(l));
        at = end;
    }
    splitter.finish(|l| lines.push(l));

    assert_eq!(lines, expected_lines(stream, max), "max_line {max}");
    for line in &lines {
        assert!(
            line.len() <= max + TRUNCATION_MARKER.len(),
            "a line of {} bytes with max_line {max}",
            line.len()
        );
    }

    let secrets: Vec<String> = SECRETS.iter().map(|s| s.to_string()).collect();
    let mut redactor = Redactor::new(&secrets);
    for line in &lines {
        let out = redactor.line(line);
        if let Cow::Borrowed(b) = out {
            assert_eq!(b, line.as_str(), "borrowed means unchanged");
        }
        for secret in SECRETS {
            assert!(
                !out.contains(secret),
                "secret {secret:?} survived in {out:?} (from {line:?})"
            );
        }
        assert!(!out.contains('\n'));
    }
}

/// What [`LineSplitter`] must emit for `stream`, whatever the chunks: each line (split at
/// `\n`; the last one only when not empty) without a final `\r`, lossy UTF-8; one longer
/// than `max` cut to its first `max` bytes (`\r` kept) with the marker; and one whose
/// lossy text is longer than `max` bytes cut to a character boundary with the marker.
pub fn expected_lines(stream: &[u8], max: usize) -> Vec<String> {
    let mut segments: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    if segments.last().is_some_and(|l| l.is_empty()) {
        segments.pop();
    }
    segments
        .into_iter()
        .map(|l| {
            let (mut s, mut cut) = if l.len() > max {
                (String::from_utf8_lossy(&l[..max]).into_owned(), true)
            } else {
                let l = l.strip_suffix(b"\r").unwrap_or(l);
                (String::from_utf8_lossy(l).into_owned(), false)
            };
            if s.len() > max {
                s.truncate(corral_supervisor::lines::floor_char_boundary(&s, max));
                cut = true;
            }
            if cut {
                s.push_str(TRUNCATION_MARKER);
            }
            s
        })
        .collect()
}

/// The config loader on any text: the first byte picks the file name (and so the
/// dialect), the rest is the text (lossy UTF-8, as a file read would be refused
/// otherwise).
pub fn config(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let name = match which % 4 {
        0 => "corral.toml",
        1 => ".mcp.json",
        2 => ".vscode/mcp.json",
        _ => "config",
    };
    let path = Path::new("/nonexistent/corral-fuzz").join(name);
    let text = String::from_utf8_lossy(rest);
    let env = |name: &str| {
        name.len()
            .is_multiple_of(2)
            .then(|| format!("value-of-{name}"))
    };
    match corral_config::load_str(&path, &text, &env) {
        Ok(cfg) => {
            let _ = format!("{cfg:?}");
        }
        Err(corral_config::ConfigError::Invalid { problems, .. }) => {
            assert!(!problems.is_empty(), "invalid without a problem");
            let lines = text.split('\n').count();
            for p in &problems {
                assert!(
                    p.line >= 1 && p.column >= 1 && p.line <= lines + 1,
                    "problem outside the file ({lines} lines): {p}"
                );
                assert!(!p.message.is_empty(), "problem without a message");
            }
        }
        Err(e) => panic!("load_str gave {e}"),
    }
}

/// The control request parser, as the daemon calls it on the first line of a
/// connection, and on the whole input; a request that parses must survive
/// serialize → parse unchanged.
pub fn control_request(data: &[u8]) {
    use corral_daemon::protocol::parse_request;
    let first = data.split(|&b| b == b'\n').next().unwrap_or_default();
    for input in [data, first] {
        let Ok(request) = parse_request(input) else {
            continue;
        };
        let line = serde_json::to_vec(&request).expect("a request serializes");
        let again = parse_request(&line)
            .unwrap_or_else(|e| panic!("{request:?} serialized to a line that fails: {e}"));
        if again != request {
            // serde_json's default float parsing is best effort: a literal may land one
            // ulp off the nearest double (`444444e40`), and the exact text of the
            // re-serialized value then parses to its neighbour. Nothing else may move.
            let (a, b) = (to_value(&again), to_value(&request));
            assert!(
                same_within_an_ulp(&a, &b),
                "round trip through {}:\n{again:?}\n!= {request:?}",
                lossy(&line)
            );
        }
    }
}

fn to_value(r: &corral_daemon::protocol::Request) -> serde_json::Value {
    serde_json::to_value(r).expect("a request converts")
}

/// Equal JSON, but for floats one ulp apart.
pub fn same_within_an_ulp(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) if x != y => {
            (x.is_f64() || y.is_f64())
                && x.as_f64()
                    .zip(y.as_f64())
                    .is_some_and(|(x, y)| x.to_bits().abs_diff(y.to_bits()) <= 1)
        }
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_within_an_ulp(x, y))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, x), (ky, y))| kx == ky && same_within_an_ulp(x, y))
        }
        _ => a == b,
    }
}

fn lossy(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// The bearer token of the HTTP target's gateway (the corpus sends it, so the fuzzer
/// gets past authentication).
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// Turns of the runtime the server gets between the input and the end of it.
const SETTLE_TURNS: usize = 64;

/// How long one input may keep its connection open: hyper and the route must end it at
/// once when the client has sent everything and closed its side.
const HTTP_DEADLINE: Duration = Duration::from_secs(5);

/// Bytes from a client through hyper's HTTP/1.1 server and the gateway's `/mcp` route
/// ([`HttpGateway::serve_io`], the connection set-up `serve` uses, over an in-memory
/// pipe), on a hub with no servers. The client sends the input, closes its side and
/// reads until the server closes. The answer must be nothing (closed) or start with a
/// complete response head with a valid status; the connection must end, unless it
/// became an event stream.
///
/// [`HttpGateway::serve_io`]: corral_gateway::http::HttpGateway::serve_io
pub fn http_request(data: &[u8]) {
    check_http_answer(&http_exchange(data));
}

/// What the server answered to `data` on one connection, until it closed (or the
/// deadline, for an event stream).
pub fn http_exchange(data: &[u8]) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let out = rt.block_on(async {
        use corral_gateway::http::{HttpGateway, HttpOptions};
        use corral_gateway::{GatewayOptions, Hub};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let opts = GatewayOptions {
            tool_prefix: corral_config::ToolPrefix::Always,
            builtin_tools: true,
        };
        let hub = Hub::start(
            Default::default(),
            opts,
            corral_events::EventBus::default(),
            None,
            None,
        );
        let gateway = HttpGateway::new(
            hub,
            HttpOptions {
                token: Some(TOKEN.into()),
                token_file: "/p/.corral/token".into(),
                local_addr: "127.0.0.1:4242".parse().unwrap(),
                limits: Default::default(),
            },
        );
        let (client, server) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn(async move { gateway.serve_io(server).await });
        let (mut rd, mut wr) = tokio::io::split(client);
        let input = data.to_vec();
        let writer = async move {
            let _ = wr.write_all(&input).await;
            // Let the server take in and answer what it can before it sees the end:
            // hyper (without half-close, as `serve` sets it up) drops a request it is
            // still working on when the client's side closes, as a peer that is gone.
            // Nothing on the way waits for a timer, so turns of the one-thread runtime
            // are enough; truncated requests still meet the end in every state.
            for _ in 0..SETTLE_TURNS {
                tokio::task::yield_now().await;
            }
            let _ = wr.shutdown().await;
            wr
        };
        let mut out = Vec::new();
        let reader = rd.read_to_end(&mut out);
        let ended = tokio::time::timeout(HTTP_DEADLINE, async {
            let (_wr, _) = tokio::join!(writer, reader);
        })
        .await
        .is_ok();
        if !ended {
            let head = lossy(&out).to_ascii_lowercase();
            assert!(
                head.contains("content-type: text/event-stream"),
                "the connection did not end within {HTTP_DEADLINE:?} after the input; \
                 answered so far: {head:?}"
            );
        }
        serving.abort();
        out
    });
    drop(rt);
    out
}

/// The answer on a connection: empty, or a response head with a valid status first.
fn check_http_answer(out: &[u8]) {
    if out.is_empty() {
        return;
    }
    let text = lossy(out);
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse::<u16>().ok());
    assert!(
        status.is_some_and(|s| (100..=599).contains(&s)),
        "not a valid status line: {:?}",
        &text[..text.len().min(200)]
    );
    assert!(
        out.windows(4).any(|w| w == b"\r\n\r\n"),
        "an incomplete response head: {:?}",
        &text[..text.len().min(400)]
    );
}

/// The dev proxy's readers of untrusted bytes. The first byte picks one:
///
/// * `0`: the rest is an HTML document, cut into chunks at each `0xFF` byte (dropped),
///   rewritten as the proxy rewrites a page: the output is the input with one script tag
///   inserted, nothing else changed, whatever the chunking.
/// * `1`: the rest is an error response body, its content type picked by the next byte:
///   the message read out of it is never empty and at most 300 characters (and `…`).
/// * otherwise: the rest is a `POST /__corral/errors` body.
pub fn proxy_body(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode {
        0 => {
            let chunks: Vec<bytes::Bytes> = rest
                .split(|&b| b == 0xFF)
                .map(bytes::Bytes::copy_from_slice)
                .collect();
            let document: Vec<u8> = chunks.concat();
            let out = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime")
                .block_on(corral_proxy::fuzzing::inject(chunks));
            let out = out.unwrap_or_else(|e| panic!("a small document was refused: {e}"));
            if document.is_empty() {
                assert!(out.is_empty(), "an empty document got content");
                return;
            }
            let tag = corral_proxy::fuzzing::tag().into_bytes();
            assert_eq!(
                out.len(),
                document.len() + tag.len(),
                "not one tag inserted"
            );
            let inserted = (0..=document.len()).any(|at| {
                out[..at] == document[..at]
                    && out[at..at + tag.len()] == tag[..]
                    && out[at + tag.len()..] == document[at..]
            });
            assert!(inserted, "the document changed beyond the inserted tag");
        }
        1 => {
            let Some((&which, body)) = rest.split_first() else {
                return;
            };
            let content_type =
                ["application/json", "text/html", "text/plain", ""][usize::from(which) % 4];
            if let Some(m) = corral_proxy::fuzzing::error_message(content_type, body) {
                assert!(!m.trim().is_empty(), "an empty message");
                assert!(
                    m.chars().count() <= 301,
                    "a message of {} chars",
                    m.chars().count()
                );
            }
        }
        _ => {
            let _ = corral_proxy::fuzzing::parse_reports(rest);
        }
    }
}

/// The report endpoint and the source-map path, what a page (any page, by one POST)
/// makes the proxy do. The first byte picks:
///
/// * 0: a `POST /__corral/errors` body: parsed or refused, never a panic; every location
///   the mapper would look up is a path on the origin (`/…`).
/// * 1: `map JSON 0xFF script 0xFF positions`: the map decoded as a fetched one is, each
///   position (4 bytes: line, column as u16s) looked up; a location found is
///   `source:line:column` with 1-based numbers.
/// * 2: `[coding, limit (u16, KiB / 16)] coded…`: the body decoded with a limit never
///   comes back longer than the limit.
pub fn proxy_report(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Ok(found) = corral_proxy::fuzzing::report_locations(rest) {
                for (path, _, _) in found {
                    assert!(path.starts_with('/'), "a location off the origin: {path:?}");
                }
            }
        }
        1 => {
            let mut parts = rest.splitn(3, |&b| b == 0xFF);
            let (map, script) = (parts.next().unwrap_or(b""), parts.next().unwrap_or(b""));
            let positions: Vec<(u32, u32)> = parts
                .next()
                .unwrap_or(b"")
                .chunks_exact(4)
                .take(64)
                .map(|c| {
                    (
                        u32::from(u16::from_le_bytes([c[0], c[1]])),
                        u32::from(u16::from_le_bytes([c[2], c[3]])),
                    )
                })
                .collect();
            let (_, found, _) = corral_proxy::fuzzing::source_map(map, script, &positions);
            for location in found.into_iter().flatten() {
                let mut numbers = location.rsplitn(3, ':');
                let column: u64 = numbers.next().unwrap().parse().expect("a column");
                let line: u64 = numbers.next().expect("a line").parse().expect("a line");
                assert!(line >= 1 && column >= 1, "{location}");
            }
        }
        _ => {
            let [coding, a, b, coded @ ..] = rest else {
                return;
            };
            let limit = usize::from(u16::from_le_bytes([*a, *b])) * 64;
            if let Ok(Some(plain)) = corral_proxy::fuzzing::decode_within(*coding, coded, limit) {
                assert!(
                    plain.len() <= limit,
                    "{} bytes over a limit of {limit}",
                    plain.len()
                );
            }
        }
    }
}

/// The SSE parser ([`corral_httpd::sse::Parser`]) on `data` cut into chunks at the points
/// its first bytes choose: the events do not depend on where the chunks were cut (nor the
/// last id and retry), and none is over the limit.
pub fn sse(data: &[u8]) {
    use corral_httpd::sse::Parser;
    const LIMIT: usize = 4096;
    let (cuts, body) = data.split_at(data.len().min(4));
    let parse = |chunks: &mut dyn Iterator<Item = &[u8]>| {
        let mut p = Parser::new(LIMIT);
        let mut events = Vec::new();
        for c in chunks {
            if p.feed(c, &mut events).is_err() {
                return None;
            }
        }
        Some((events, p.last_id.clone(), p.retry_ms))
    };
    let whole = parse(&mut std::iter::once(body));
    let mut at = 0;
    let mut pieces = Vec::new();
    for &c in cuts {
        let next = (at + usize::from(c)).min(body.len());
        pieces.push(&body[at..next]);
        at = next;
    }
    pieces.push(&body[at..]);
    let chunked = parse(&mut pieces.into_iter());
    match (&whole, &chunked) {
        (Some(w), Some(c)) => {
            assert_eq!(w, c, "the events depend on where the input was cut");
            assert!(
                w.0.iter().all(|e| e.data.len() <= LIMIT),
                "an event over the limit"
            );
        }
        // Over the limit: refused however it was cut (a line's length does not depend
        // on the cuts; the chunked side may notice only at a later point, never not).
        (None, None) => {}
        _ => panic!("the limit was hit in one reading only: {whole:?} / {chunked:?}"),
    }
}

/// The `WWW-Authenticate` reader of remote servers' OAuth ([`corral_httpd::challenge`]):
/// the input split at NUL bytes into header values.
pub fn www_authenticate(data: &[u8]) {
    use corral_httpd::challenge::bearer;
    let text = String::from_utf8_lossy(data);
    let values: Vec<&str> = text.split('\0').collect();
    let first = bearer(values.iter().copied());
    assert_eq!(first, bearer(values.iter().copied()), "not deterministic");
    match first {
        Ok(b) => {
            assert!(
                text.to_ascii_lowercase().contains("bearer"),
                "a Bearer challenge from an input without one"
            );
            for v in [&b.resource_metadata, &b.scope, &b.error]
                .into_iter()
                .flatten()
            {
                assert!(v.len() <= text.len(), "a value longer than the input");
            }
        }
        Err(schemes) => {
            assert!(
                schemes
                    .iter()
                    .all(|s| !s.is_empty() && text.contains(s.as_str()))
            );
        }
    }
}
