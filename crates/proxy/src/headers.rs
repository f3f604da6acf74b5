//! The headers a traffic entry keeps: the request's as the browser sent them, the
//! response's as the target answered, bounded and with credentials redacted.
//!
//! * **Order.** As hyper's `HeaderMap` holds them: names in the order each first came,
//!   the values of a repeated name together, in their order (the wire's interleaving of
//!   two repeated names is not kept). Names are lower case (hyper's), values not valid
//!   UTF-8 are shown lossily.
//! * **Bounds.** At most [`MAX_HEADERS`] headers and [`MAX_BYTES`] of names and values
//!   (as recorded, after redaction) per direction. The header that crosses the byte
//!   bound keeps the part of its value that fits, ending in `… [N bytes not kept]`;
//!   the headers past either bound are dropped and counted in a last pair
//!   `["…", "N more headers not kept"]`. So a list never holds more than
//!   `MAX_BYTES` + two short marks, however the browser or the target fill it.
//! * **Secrets.** The values of `authorization`, `proxy-authorization` and of every
//!   header whose name contains `token`, `secret`, `api-key`, `apikey`, `api_key`,
//!   `session`, `csrf`, `xsrf` or `password` become `[redacted, N bytes]`. A `cookie`
//!   keeps its cookies' names (`sid=[redacted]; theme=[redacted]`); a `set-cookie` its
//!   name and its attributes (`sid=[redacted]; Path=/; HttpOnly`), the values of
//!   attributes other than the standard ones redacted too. Every other value goes
//!   through the credential shapes of [`corral_config::redact`] (`Bearer ***`,
//!   `sk-***`, `ghp_***`, …), as server output does. The values a config marks as
//!   secrets (a server's `env` and `headers`) are not known to a proxy and are not
//!   looked for.
//!
//! Capturing is once per exchange, off the body path: one pass over the map, two
//! allocations per direction (the text and the pair offsets), more only for a redacted
//! cookie or a value that matched a credential shape.

use hyper::header::HeaderMap;
use serde::de::{Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeSeq, Serializer};
use std::borrow::Cow;
use std::fmt::Write as _;

/// The most headers kept per direction.
pub const MAX_HEADERS: usize = 64;

/// The most bytes of names and values kept per direction.
pub const MAX_BYTES: usize = 8 * 1024;

/// The name of the last pair when headers were dropped.
pub const CUT_NAME: &str = "…";

/// A list of `[name, value]` pairs (in JSON, an array of two-string arrays), kept in one
/// string: names and values back to back, with where each ends.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Headers {
    text: String,
    /// Per pair: the end of its name and the end of its value in `text`.
    ends: Vec<(u32, u32)>,
}

impl Headers {
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Pairs, the final `["…", "N more headers not kept"]` included.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(name_end, value_end)| {
            let (n, v) = (name_end as usize, value_end as usize);
            let pair = (&self.text[start..n], &self.text[n..v]);
            start = v;
            pair
        })
    }

    /// The first value of `name` (lower case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Bytes of names and values held (the marks included).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Heap bytes this list holds (capacity, not length): what it adds to an entry's
    /// memory beyond its inline 48 bytes.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * std::mem::size_of::<(u32, u32)>()
    }

    fn push(&mut self, name: &str, value: &str) {
        self.text.push_str(name);
        let name_end = self.text.len() as u32;
        self.text.push_str(value);
        self.ends.push((name_end, self.text.len() as u32));
    }

    /// Captures `map` as the module says: bounded, redacted.
    pub(crate) fn capture(map: &HeaderMap) -> Headers {
        if map.is_empty() {
            return Headers::default();
        }
        // Sized for the common case (nothing redacted or cut) in one allocation each.
        let raw: usize = map
            .iter()
            .take(MAX_HEADERS)
            .map(|(n, v)| n.as_str().len() + v.len())
            .sum();
        let mut out = Headers {
            text: String::with_capacity(raw.min(MAX_BYTES) + 64),
            ends: Vec::with_capacity(map.len().min(MAX_HEADERS) + 1),
        };
        let total = map.len();
        let mut taken = 0;
        for (name, value) in map {
            if taken == MAX_HEADERS {
                break;
            }
            let name = name.as_str();
            let value = recorded_value(name, value.as_bytes());
            let room = MAX_BYTES - out.text.len();
            taken += 1;
            if name.len() + value.len() <= room {
                out.push(name, &value);
                continue;
            }
            // The header that crosses the bound: its value as far as it fits.
            if name.len() < room {
                let mut end = room - name.len();
                while !value.is_char_boundary(end) {
                    end -= 1;
                }
                let cut = format!("{}… [{} bytes not kept]", &value[..end], value.len() - end);
                out.push(name, &cut);
            } else {
                taken -= 1;
            }
            break;
        }
        if taken < total {
            let dropped = total - taken;
            let plural = if dropped == 1 { "header" } else { "headers" };
            out.push(CUT_NAME, &format!("{dropped} more {plural} not kept"));
        }
        // Redaction shortened it (a long token) or grew it past the first guess (many
        // short cookies): an entry keeps what it holds, not the slack, for as long as
        // the ring keeps it.
        if out.text.capacity() - out.text.len() > 256 {
            out.text.shrink_to_fit();
        }
        out
    }
}

/// Whether a header's value is a credential by its name alone (`name` is lower case).
/// By hand, not `str::contains` per word: that sets up a searcher per call, and nine
/// calls per header made this the capture's largest cost.
fn secret_name(name: &str) -> bool {
    if matches!(name, "authorization" | "proxy-authorization") {
        return true;
    }
    let b = name.as_bytes();
    (0..b.len()).any(|i| {
        let rest = &b[i..];
        match b[i] {
            b't' => rest.starts_with(b"token"),
            b's' => rest.starts_with(b"secret") || rest.starts_with(b"session"),
            b'a' => {
                rest.starts_with(b"api-key")
                    || rest.starts_with(b"apikey")
                    || rest.starts_with(b"api_key")
            }
            b'c' => rest.starts_with(b"csrf"),
            b'x' => rest.starts_with(b"xsrf"),
            b'p' => rest.starts_with(b"password"),
            _ => false,
        }
    })
}

/// `[redacted, N bytes]`.
fn redacted(bytes: usize) -> String {
    format!("[redacted, {bytes} bytes]")
}

/// The value as the entry keeps it: lossy text, redacted.
fn recorded_value<'a>(name: &str, value: &'a [u8]) -> Cow<'a, str> {
    if name == "cookie" {
        return Cow::Owned(cookie_names(&String::from_utf8_lossy(value)));
    }
    if name == "set-cookie" {
        return Cow::Owned(set_cookie_shape(&String::from_utf8_lossy(value)));
    }
    if secret_name(name) {
        return Cow::Owned(redacted(value.len()));
    }
    match String::from_utf8_lossy(value) {
        // A header value has no line breaks: one line for the redactor.
        Cow::Borrowed(text) => corral_config::redact::Redactor::default().line(text),
        Cow::Owned(text) => Cow::Owned(
            corral_config::redact::Redactor::default()
                .line(&text)
                .into_owned(),
        ),
    }
}

/// A `Cookie` value with every cookie's value redacted: `sid=[redacted]; theme=[redacted]`.
/// A pair without `=` is a value without a name (as browsers read it): `[redacted]`.
fn cookie_names(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(256));
    for (i, pair) in value.split(';').enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        match pair.split_once('=') {
            Some((name, _)) => {
                out.push_str(name.trim());
                out.push_str("=[redacted]");
            }
            None if pair.trim().is_empty() => {}
            None => out.push_str("[redacted]"),
        }
    }
    out
}

/// The attributes of a `Set-Cookie` whose values say nothing secret.
const COOKIE_ATTRIBUTES: [&str; 9] = [
    "path",
    "domain",
    "expires",
    "max-age",
    "secure",
    "httponly",
    "samesite",
    "partitioned",
    "priority",
];

/// A `Set-Cookie` value with the cookie's value redacted and its attributes kept:
/// `sid=[redacted]; Path=/; HttpOnly`. An attribute of another name keeps its name only.
fn set_cookie_shape(value: &str) -> String {
    let mut parts = value.split(';');
    let mut out = String::with_capacity(value.len().min(256));
    if let Some(first) = parts.next() {
        out.push_str(&cookie_names(first));
    }
    for attr in parts {
        let attr = attr.trim();
        if attr.is_empty() {
            continue;
        }
        out.push_str("; ");
        let (name, val) = match attr.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (attr, None),
        };
        let known = COOKIE_ATTRIBUTES
            .iter()
            .any(|a| a.eq_ignore_ascii_case(name));
        match (known, val) {
            (true, Some(v)) => {
                let _ = write!(out, "{name}={v}");
            }
            (false, Some(_)) => {
                let _ = write!(out, "{name}=[redacted]");
            }
            (_, None) if known => out.push_str(name),
            (_, None) => out.push_str("[redacted]"),
        }
    }
    out
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Headers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for pair in self.iter() {
            seq.serialize_element(&pair)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Headers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Headers, D::Error> {
        let pairs = Vec::<(String, String)>::deserialize(d)?;
        let mut out = Headers::default();
        for (name, value) in &pairs {
            out.push(name, value);
        }
        Ok(out)
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Headers {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Headers {
        let mut out = Headers::default();
        for (name, value) in pairs {
            out.push(name, value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderName, HeaderValue};

    fn map(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (n, v) in pairs {
            m.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        m
    }

    fn pairs(h: &Headers) -> Vec<(String, String)> {
        h.iter().map(|(n, v)| (n.into(), v.into())).collect()
    }

    #[test]
    fn headers_keep_their_order_and_values_lossily() {
        let h = Headers::capture(&map(&[
            ("Accept", b"text/html"),
            ("x-b", b"1"),
            ("accept", b"*/*"),
            ("x-latin1", b"caf\xe9"),
        ]));
        assert_eq!(
            pairs(&h),
            [
                ("accept".into(), "text/html".into()),
                ("accept".into(), "*/*".into()),
                ("x-b".into(), "1".into()),
                ("x-latin1".into(), "caf\u{fffd}".into()),
            ]
        );
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            r#"[["accept","text/html"],["accept","*/*"],["x-b","1"],["x-latin1","caf�"]]"#
        );
        assert_eq!(serde_json::from_str::<Headers>(&json).unwrap(), h);
        assert!(Headers::capture(&HeaderMap::new()).is_empty());
    }

    #[test]
    fn credentials_are_redacted_and_cookie_names_kept() {
        let h = Headers::capture(&map(&[
            ("authorization", b"Basic dXNlcjpodW50ZXIy"),
            ("x-csrf-token", b"abc123"),
            ("x-api-key", b"k-1"),
            ("cookie", b"sid=s3cr3t; theme=dark; lone"),
            ("x-note", b"sent Bearer abcdefgh12345678"),
            ("x-plain", b"hello"),
        ]));
        assert_eq!(h.get("authorization"), Some("[redacted, 22 bytes]"));
        assert_eq!(h.get("x-csrf-token"), Some("[redacted, 6 bytes]"));
        assert_eq!(h.get("x-api-key"), Some("[redacted, 3 bytes]"));
        assert_eq!(
            h.get("cookie"),
            Some("sid=[redacted]; theme=[redacted]; [redacted]")
        );
        assert_eq!(h.get("x-note"), Some("sent Bearer ***"));
        assert_eq!(h.get("x-plain"), Some("hello"));

        // A long token leaves no slack behind in the entry.
        let h = Headers::capture(&map(&[("authorization", &[b'a'; 4096])]));
        assert_eq!(h.get("authorization"), Some("[redacted, 4096 bytes]"));
        assert!(h.heap_bytes() < 512, "{}", h.heap_bytes());

        assert_eq!(
            set_cookie_shape("sid=s3cr3t; Path=/; HttpOnly; SameSite=Lax; X-Odd=v; flag"),
            "sid=[redacted]; Path=/; HttpOnly; SameSite=Lax; X-Odd=[redacted]; [redacted]"
        );
    }

    /// A Chrome navigation to a dev server, and a Vite answer: the typical entry.
    fn typical() -> (HeaderMap, HeaderMap) {
        let request = map(&[
            ("host", b"localhost:5173"),
            ("connection", b"keep-alive"),
            ("sec-ch-ua", b"\"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""),
            ("sec-ch-ua-mobile", b"?0"),
            ("sec-ch-ua-platform", b"\"Linux\""),
            ("upgrade-insecure-requests", b"1"),
            ("user-agent", b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"),
            ("accept", b"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"),
            ("sec-fetch-site", b"same-origin"),
            ("sec-fetch-mode", b"navigate"),
            ("sec-fetch-user", b"?1"),
            ("sec-fetch-dest", b"document"),
            ("referer", b"http://localhost:5173/users?page=2"),
            ("accept-encoding", b"gzip, deflate, br, zstd"),
            ("accept-language", b"en-US,en;q=0.9"),
            ("cookie", b"sessionid=7a1c0e6f2b9d4c3e8f5a6b7c8d9e0f1a; csrftoken=Q2x1c3RlcnMgb2YgY2hhcmFjdGVycw; theme=dark"),
        ]);
        let response = map(&[
            ("vary", b"Origin"),
            ("content-type", b"text/html"),
            ("cache-control", b"no-cache"),
            ("etag", b"W/\"2f1-abcdefghijklmnopqrstuvwxyz\""),
            ("date", b"Tue, 25 Nov 2026 12:00:00 GMT"),
            ("connection", b"keep-alive"),
            ("keep-alive", b"timeout=5"),
            ("content-length", b"753"),
        ]);
        (request, response)
    }

    /// `cargo test --release -p corral-proxy typical_headers -- --ignored --nocapture`:
    /// what capturing a typical exchange's headers costs, in time and memory
    /// (BENCHMARKS.md, "Dev proxy").
    #[test]
    #[ignore = "a measurement: run it in release"]
    fn typical_headers_cost() {
        let (request, response) = typical();
        let (req, resp) = (Headers::capture(&request), Headers::capture(&response));
        let raw =
            |m: &HeaderMap| -> usize { m.iter().map(|(n, v)| n.as_str().len() + v.len()).sum() };
        println!(
            "request: {} headers, {} bytes sent, {} kept, {} heap bytes",
            req.len(),
            raw(&request),
            req.text_len(),
            req.heap_bytes()
        );
        println!(
            "response: {} headers, {} bytes sent, {} kept, {} heap bytes",
            resp.len(),
            raw(&response),
            resp.text_len(),
            resp.heap_bytes()
        );
        let rounds = 200_000;
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(Headers::capture(std::hint::black_box(&request)));
            std::hint::black_box(Headers::capture(std::hint::black_box(&response)));
        }
        let each = started.elapsed().as_secs_f64() * 1e9 / f64::from(rounds);
        println!("both captured: {each:.0} ns per exchange");
    }

    #[test]
    fn two_hundred_headers_keep_64_and_say_how_many_went() {
        let names: Vec<String> = (0..200).map(|i| format!("x-h{i:03}")).collect();
        let m = map(&names
            .iter()
            .map(|n| (n.as_str(), b"v".as_slice()))
            .collect::<Vec<_>>());
        let h = Headers::capture(&m);
        assert_eq!(h.len(), MAX_HEADERS + 1);
        let last = h.iter().last().unwrap();
        assert_eq!(last, (CUT_NAME, "136 more headers not kept"));
        assert_eq!(h.iter().nth(63).unwrap(), ("x-h063", "v"));
    }

    #[test]
    fn a_20_kib_value_is_cut_at_8_kib_and_marked() {
        let big = vec![b'a'; 20 * 1024];
        let h = Headers::capture(&map(&[
            ("x-small", b"1"),
            ("x-big", &big),
            ("x-after", b"2"),
        ]));
        let got = pairs(&h);
        assert_eq!(
            got.len(),
            3,
            "{:?}",
            h.iter().map(|(n, _)| n).collect::<Vec<_>>()
        );
        let kept = MAX_BYTES - "x-small1x-big".len();
        assert_eq!(
            got[1].1,
            format!(
                "{}… [{} bytes not kept]",
                "a".repeat(kept),
                20 * 1024 - kept
            )
        );
        assert_eq!(got[2], (CUT_NAME.into(), "1 more header not kept".into()));
        assert!(h.text_len() <= MAX_BYTES + 64);
    }
}
