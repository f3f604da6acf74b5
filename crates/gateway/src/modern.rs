//! MCP 2026-07-28 ("modern", stateless) on the agent hop: what a request's `_meta`
//! claims, how it is validated, and what a modern result carries.
//!
//! A request whose params carry `_meta["io.modelcontextprotocol/protocolVersion"]` is a
//! modern request: it is served without a session, with the client capabilities and
//! client info of that request alone. Everything else is legacy (2024-11-05 …
//! 2025-11-25, `initialize` sessions) and untouched. Which era a connection or POST is
//! in is decided by the transports and [`crate::Session`] (ARCHITECTURE.md, "MCP
//! revisions on the agent hop").
//!
//! Kept off the hot path: a request is looked at for a claim only when its params
//! contain the key's bytes, and a result is stamped by splicing text into it, parsing
//! (without allocating) only a result that already mentions a field being added.

use crate::jsonrpc;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Protocol versions served after `initialize` (2025 sessions), newest first; the
/// agent's choice is echoed when listed.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revisions Corral serves.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";

/// A header disagrees with the body, or is missing or malformed.
pub const HEADER_MISMATCH: i64 = -32020;
/// The requested revision is not served.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Every revision Corral serves, newest first: the stateless ones, then those with
/// `initialize`.
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(PROTOCOL_VERSIONS)
        .copied()
        .collect()
}

/// What a modern request said about its client, for this request only.
#[derive(Debug, Clone)]
pub struct ModernMeta {
    /// The claimed revision (one of [`MODERN_VERSIONS`]).
    pub version: &'static str,
    /// `clientCapabilities`, as sent (a JSON object).
    pub capabilities: Box<RawValue>,
    /// `clientInfo`, as sent; read only where it is shown ([`ModernMeta::client`]).
    client_info: Option<Box<RawValue>>,
    /// `logLevel` ranked ([`crate::agent::level_rank`]): the request asked for the
    /// server logs of its call at and above it; `None`: no logs.
    pub log_level: Option<u8>,
    /// The tool or prompt `name` (`uri` for `resources/read`), which `Mcp-Name` repeats.
    pub name: Option<String>,
    /// The params carry `requestState` or `inputResponses`: a retry of an
    /// `input_required` round.
    pub retry: bool,
}

impl ModernMeta {
    /// `clientInfo` as "name version", when sent.
    pub fn client(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct I {
            name: String,
            #[serde(default)]
            version: String,
        }
        let i: I = serde_json::from_str(self.client_info.as_deref()?.get()).ok()?;
        Some(format!("{} {}", i.name, i.version).trim_end().to_owned())
    }
}

/// What a request's params claim about its era.
#[derive(Debug)]
pub enum Claim {
    /// No `protocolVersion` in `_meta`: a legacy request.
    None,
    Modern(ModernMeta),
    /// A modern claim that is malformed or names a revision Corral does not serve: the
    /// error response (with the request's id).
    Invalid(Vec<u8>),
}

impl Claim {
    pub fn is_none(&self) -> bool {
        matches!(self, Claim::None)
    }
}

/// Reads the modern claim of a request's `params` (`id` is for the error response), and
/// in the same parse what else a stateless request needs of them: the name `Mcp-Name`
/// repeats (per `method`) and whether it is a retry.
pub fn claim(id: &RawValue, method: &str, params: Option<&RawValue>) -> Claim {
    let Some(params) = params else {
        return Claim::None;
    };
    // The hot path of a legacy request: one substring search, no parse.
    if !jsonrpc::mentions!(params.get().as_bytes(), PROTOCOL_VERSION_KEY) {
        return Claim::None;
    }
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "_meta", borrow, default)]
        meta: Option<M<'a>>,
        // Raw, so that a mistyped one is the handler's error (-32602), not the claim's.
        #[serde(borrow, default)]
        name: Option<&'a RawValue>,
        #[serde(borrow, default)]
        uri: Option<&'a RawValue>,
        #[serde(rename = "requestState", default)]
        request_state: Option<IgnoredAny>,
        #[serde(rename = "inputResponses", default)]
        input_responses: Option<IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct M<'a> {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
        version: Option<&'a RawValue>,
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
        capabilities: Option<&'a RawValue>,
        #[serde(rename = "io.modelcontextprotocol/clientInfo", borrow, default)]
        client: Option<&'a RawValue>,
        #[serde(rename = "io.modelcontextprotocol/logLevel", borrow, default)]
        log_level: Option<Cow<'a, str>>,
    }
    let invalid =
        |msg: String| Claim::Invalid(jsonrpc::error(Some(id), jsonrpc::INVALID_PARAMS, &msg));
    let p = match serde_json::from_str::<P<'_>>(params.get()) {
        Ok(p) if p.meta.as_ref().is_some_and(|m| m.version.is_some()) => p,
        Ok(_) => return Claim::None,
        Err(e) => {
            return invalid(format!(
                "params are not a JSON object with an object _meta: {e}"
            ));
        }
    };
    let meta = p.meta.as_ref().expect("checked above");
    let claimed = meta
        .version
        .and_then(|v| serde_json::from_str::<Cow<'_, str>>(v.get()).ok());
    let Some(claimed) = claimed else {
        return invalid(format!(
            "_meta[\"{PROTOCOL_VERSION_KEY}\"] must be a string"
        ));
    };
    let Some(version) = MODERN_VERSIONS.iter().copied().find(|v| *v == claimed) else {
        let supported = supported_versions();
        let hint = if PROTOCOL_VERSIONS.contains(&&*claimed) {
            " (that revision is served only after initialize; omit the _meta claim and initialize)"
        } else {
            ""
        };
        let data = serde_json::json!({"supported": supported, "requested": claimed});
        return Claim::Invalid(jsonrpc::error_with_data(
            Some(id),
            UNSUPPORTED_PROTOCOL_VERSION,
            &format!(
                "Unsupported protocol version {claimed:?}{hint}; supported: {}",
                supported.join(", ")
            ),
            Some(&data.to_string()),
        ));
    };
    let Some(capabilities) = meta
        .capabilities
        .filter(|c| c.get().trim_start().starts_with('{'))
    else {
        return invalid(format!(
            "_meta[\"{CLIENT_CAPABILITIES_KEY}\"] is required on every 2026-07-28 request (an \
             object, `{{}}` when the client offers none)"
        ));
    };
    let name = match method {
        "tools/call" | "prompts/get" => p.name,
        "resources/read" => p.uri,
        _ => None,
    }
    .and_then(|n| serde_json::from_str::<String>(n.get()).ok());
    Claim::Modern(ModernMeta {
        version,
        capabilities: capabilities.to_owned(),
        client_info: meta.client.map(ToOwned::to_owned),
        log_level: meta.log_level.as_deref().map(crate::agent::level_rank),
        name,
        retry: p.request_state.is_some() || p.input_responses.is_some(),
    })
}

/// How Corral treats a method named in a modern request.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Method {
    /// Served.
    Served,
    /// Exists only in the legacy revisions.
    Removed,
    /// A 2026-07-28 method Corral does not serve yet.
    NotYet,
    Unknown,
}

pub fn method(name: &str) -> Method {
    match name {
        "server/discover"
        | "tools/list"
        | "tools/call"
        | "resources/list"
        | "resources/templates/list"
        | "resources/read"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete"
        | "subscriptions/listen" => Method::Served,
        "initialize"
        | "ping"
        | "logging/setLevel"
        | "resources/subscribe"
        | "resources/unsubscribe" => Method::Removed,
        _ => Method::Unknown,
    }
}

/// The `-32601` answer to a modern request for a method Corral does not serve to it.
pub fn method_error(id: &RawValue, name: &str, kind: Method) -> Vec<u8> {
    let msg = match kind {
        Method::Removed => format!(
            "method not found: {name} does not exist in MCP 2026-07-28 (it is served only in \
             an initialize session)"
        ),
        Method::NotYet => format!("method not found: Corral does not serve {name} yet"),
        _ => format!("method not found: {name}"),
    };
    jsonrpc::error(Some(id), jsonrpc::METHOD_NOT_FOUND, &msg)
}

/// Whether a complete result of `method` carries `ttlMs` and `cacheScope`.
pub fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// Corral's cache hint: its catalog changes whenever a server comes, goes or changes
/// its lists, and the lists are filtered per project — so nothing may be reused
/// (`ttlMs: 0`) and nothing shared across auth contexts (`private`).
const CACHE_HINT: &str = r#""ttlMs":0,"cacheScope":"private""#;

/// The `_meta` member naming Corral, spliced into every modern result (built once).
fn server_info() -> &'static str {
    static INFO: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!(r#""{SERVER_INFO_KEY}":{}"#, server_info_value()));
    &INFO
}

/// Turns the response to a modern request into its 2026-07-28 shape: a result gets
/// `resultType: "complete"`, the server info in `_meta` and, if `cacheable`, the cache
/// hint (never on an `input_required` result); a `-32002` (resource not found, 2025)
/// becomes `-32602`. Fields the result already has are kept.
pub fn stamp(response: Vec<u8>, id: &RawValue, cacheable: bool) -> Vec<u8> {
    let head_len = r#"{"jsonrpc":"2.0","id":"#.len() + id.get().len();
    let ok = |tail: &[u8]| {
        response.len() > head_len + tail.len()
            && response.starts_with(br#"{"jsonrpc":"2.0","id":"#)
            && &response[head_len - id.get().len()..head_len] == id.get().as_bytes()
            && &response[head_len..head_len + tail.len()] == tail
    };
    if ok(br#","error":{"code":-32002,"#) {
        let mut out = response;
        let at = head_len + br#","error":{"code":"#.len();
        out.splice(at..at + 6, b"-32602".iter().copied());
        return out;
    }
    let prefix = br#","result":{"#;
    if !ok(prefix) || response.last() != Some(&b'}') {
        return response;
    }
    let start = head_len + prefix.len() - 1; // the result's `{`
    let end = response.len() - 1; // the envelope's `}`
    let result = &response[start..end];
    let (mut has_type, mut has_hint, mut meta) = (false, false, None);
    if jsonrpc::mentions!(result, "\"_meta\"")
        || jsonrpc::mentions!(result, "\"resultType\"")
        || jsonrpc::mentions!(result, "\"ttlMs\"")
    {
        // Only now: a scan of the result's top level, borrowing, allocating nothing.
        #[derive(Deserialize)]
        struct Head<'a> {
            #[serde(rename = "resultType", borrow, default)]
            result_type: Option<Cow<'a, str>>,
            #[serde(rename = "ttlMs", default)]
            ttl: Option<IgnoredAny>,
            #[serde(rename = "_meta", borrow, default)]
            meta: Option<&'a RawValue>,
        }
        let Some(head) = std::str::from_utf8(result)
            .ok()
            .and_then(|r| serde_json::from_str::<Head<'_>>(r).ok())
        else {
            return response;
        };
        has_type = head.result_type.is_some();
        // An `input_required` result (a multi round-trip request, passed through from a
        // 2026 server) must never be cached: it gets no cache hint.
        has_hint = head.ttl.is_some() || head.result_type.as_deref() == Some("input_required");
        meta = head.meta.map(|m| {
            (
                m.get().as_ptr() as usize - result.as_ptr() as usize,
                m.get(),
            )
        });
    }
    let info = server_info();
    let mut added = String::with_capacity(96 + info.len());
    if !has_type {
        added.push_str(r#""resultType":"complete","#);
    }
    if cacheable && !has_hint {
        added.push_str(CACHE_HINT);
        added.push(',');
    }
    let mut out = Vec::with_capacity(response.len() + added.len() + info.len() + 16);
    out.extend_from_slice(&response[..=start]);
    match meta {
        None => {
            added.push_str(r#""_meta":{"#);
            added.push_str(info);
            added.push('}');
            out.extend_from_slice(added.as_bytes());
            if !result[1..result.len() - 1]
                .iter()
                .all(u8::is_ascii_whitespace)
            {
                out.push(b',');
            }
            out.extend_from_slice(&result[1..]);
        }
        Some((at, text)) => {
            // `added` is empty or ends in a comma, and the result has members.
            out.extend_from_slice(added.as_bytes());
            let inner = at + 1; // after `_meta`'s `{`, relative to `result`
            let has_info = jsonrpc::mentions!(text.as_bytes(), SERVER_INFO_KEY);
            if text.starts_with('{') && !has_info {
                // Splice the server info into the result's own `_meta`.
                out.extend_from_slice(&result[1..inner]);
                out.extend_from_slice(info.as_bytes());
                if !text[1..].trim_start().starts_with('}') {
                    out.push(b',');
                }
                out.extend_from_slice(&result[inner..]);
            } else {
                out.extend_from_slice(&result[1..]);
            }
        }
    }
    out.extend_from_slice(&response[end..]);
    out
}

/// What Corral serves an agent of any revision (`initialize`'s and `server/discover`'s
/// capabilities): list changes (unsolicited to a 2025 session, on
/// `subscriptions/listen` to a 2026 agent), resource subscriptions, logs (per session;
/// per request with `_meta` logLevel) and completions.
pub fn capabilities() -> serde_json::Value {
    serde_json::json!({
        "tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
        "logging": {},
        "completions": {},
    })
}

/// Corral's `serverInfo`.
pub fn server_info_value() -> serde_json::Value {
    serde_json::json!({"name": "corral", "title": "Corral", "version": env!("CARGO_PKG_VERSION")})
}

/// The result of `server/discover`.
pub fn discover_result(instructions: &str) -> String {
    serde_json::json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": capabilities(),
        "serverInfo": server_info_value(),
        "instructions": instructions,
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {SERVER_INFO_KEY: server_info_value()},
    })
    .to_string()
}

/// A header value, decoded from `=?base64?…?=` when it is so encoded; `None` when the
/// encoding is malformed.
pub fn decode_header(value: &str) -> Option<Cow<'_, str>> {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(Cow::Borrowed(value));
    };
    String::from_utf8(base64_decode(inner)?)
        .ok()
        .map(Cow::Owned)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    (bits < 6).then_some(out)
}

/// Checks the standard headers of a modern POST against its body: `Err` is the reason
/// for a `-32020`.
pub fn check_headers(
    version: Option<&str>,
    method_header: Option<&str>,
    name_header: Option<&str>,
    meta: &ModernMeta,
    method: &str,
) -> Result<(), String> {
    let check = |header: &str, value: Option<&str>, body: &str| -> Result<(), String> {
        let Some(value) = value else {
            return Err(format!(
                "missing {header} header: a 2026-07-28 request sends it, equal to the body's {body:?}"
            ));
        };
        let Some(decoded) = decode_header(value) else {
            return Err(format!(
                "{header} header {value:?} is not valid =?base64?…?= text"
            ));
        };
        if decoded != body {
            return Err(format!(
                "{header} header {decoded:?} does not match the body's {body:?}"
            ));
        }
        Ok(())
    };
    check("MCP-Protocol-Version", version, meta.version)?;
    check("Mcp-Method", method_header, method)?;
    if matches!(method, "tools/call" | "prompts/get" | "resources/read") {
        let Some(name) = meta.name.as_deref() else {
            // The body lacks the name: the handler answers -32602 for it.
            return Ok(());
        };
        check("Mcp-Name", name_header, name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    fn modern(params: &str) -> Claim {
        claim(&raw("1"), "tools/call", Some(&raw(params)))
    }

    #[test]
    fn claims() {
        assert!(modern(r#"{"name":"x","_meta":{"progressToken":1}}"#).is_none());
        let Claim::Modern(m) = modern(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":{},
                "io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}"#,
        ) else {
            panic!()
        };
        assert_eq!(m.client().as_deref(), Some("t 1"));
        assert_eq!(m.log_level, None);
        assert_eq!((m.name, m.retry), (None, false));
        // What else a stateless request needs of its params, read in the same parse: the
        // name `Mcp-Name` repeats, and whether it is a retry.
        let Claim::Modern(m) = modern(
            r#"{"name":"t","requestState":"s","_meta":{
                "io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":{}}}"#,
        ) else {
            panic!()
        };
        assert_eq!((m.name.as_deref(), m.retry), (Some("t"), true));
        // The level the request asks its call's logs at, read in the same parse.
        let Claim::Modern(m) = modern(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":{},
                "io.modelcontextprotocol/logLevel":"warning"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(m.log_level, Some(crate::agent::level_rank("warning")));
        let Claim::Invalid(e) =
            modern(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#)
        else {
            panic!()
        };
        let e: Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(e["error"]["code"], -32602);
        assert_eq!(e["id"], 1);
        let Claim::Invalid(e) = modern(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01",
                "io.modelcontextprotocol/clientCapabilities":{}}}"#,
        ) else {
            panic!()
        };
        let e: Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(e["error"]["code"], -32022);
        assert_eq!(e["error"]["data"]["requested"], "1900-01-01");
        assert_eq!(e["error"]["data"]["supported"][0], "2026-07-28");
    }

    fn stamped(result: &str, cacheable: bool) -> Value {
        let id = raw("\"a\"");
        let out = stamp(jsonrpc::result(&id, result), &id, cacheable);
        let v: Value = serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)));
        assert_eq!(v["id"], "a");
        v["result"].clone()
    }

    #[test]
    fn stamps_results() {
        let info =
            json!({"name": "corral", "title": "Corral", "version": env!("CARGO_PKG_VERSION")});
        let r = stamped("{}", false);
        assert_eq!(
            r,
            json!({"resultType": "complete", "_meta": {SERVER_INFO_KEY: info}})
        );
        let r = stamped(r#"{"tools":[{"name":"a","_meta":{"x":1}}]}"#, true);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "private");
        assert_eq!(r["_meta"][SERVER_INFO_KEY], info);
        assert_eq!(r["tools"][0]["_meta"], json!({"x": 1}));
        let r = stamped(r#"{"content":[],"_meta":{"k":"v"}}"#, false);
        assert_eq!(r["_meta"], json!({"k": "v", SERVER_INFO_KEY: info}));
        assert_eq!(r["resultType"], "complete");
        let r = stamped(r#"{"_meta":{},"resultType":"complete"}"#, false);
        assert_eq!(
            r,
            json!({"resultType": "complete", "_meta": {SERVER_INFO_KEY: info}})
        );
        let r = stamped(
            r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}},"requestState":"s"}"#,
            true,
        );
        assert_eq!(r["resultType"], "input_required");
        assert!(
            r.get("ttlMs").is_none() && r.get("cacheScope").is_none(),
            "{r}"
        );
        assert_eq!(r["requestState"], "s");
        let r = stamped(
            r#"{"resultType":"complete","ttlMs":5,"cacheScope":"public"}"#,
            true,
        );
        assert_eq!(r["ttlMs"], 5);
        assert_eq!(r["cacheScope"], "public");
        let id = raw("3");
        let e = jsonrpc::error(Some(&id), -32002, "resource not found");
        let v: Value = serde_json::from_slice(&stamp(e, &id, true)).unwrap();
        assert_eq!(v["error"]["code"], -32602);
    }

    #[test]
    fn headers() {
        assert_eq!(decode_header("=?base64?aGk=?=").as_deref(), Some("hi"));
        assert_eq!(decode_header("plain").as_deref(), Some("plain"));
        assert!(decode_header("=?base64?!!?=").is_none());
        let named = |name: &str| ModernMeta {
            version: "2026-07-28",
            capabilities: raw("{}"),
            client_info: None,
            log_level: None,
            name: Some(name.to_owned()),
            retry: false,
        };
        let ok = check_headers(
            Some("2026-07-28"),
            Some("tools/call"),
            Some("=?base64?ZsO8cg==?="),
            &named("für"),
            "tools/call",
        );
        assert_eq!(ok, Ok(()));
        let meta = named("a");
        for (v, m, n) in [
            (None, Some("tools/call"), Some("a")),
            (Some("2026-07-28"), Some("tools/list"), Some("a")),
            (Some("2026-07-28"), Some("tools/call"), None),
            (Some("2026-07-28"), Some("tools/call"), Some("=?base64?*?=")),
        ] {
            assert!(check_headers(v, m, n, &meta, "tools/call").is_err());
        }
    }
}
