//! JSON-RPC 2.0 envelopes, built and parsed without touching what they carry.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Whether the bytes `$haystack` contain the constant `$needle`, with a searcher built
/// once per call site: `memmem::find` builds one on every call, which on the per-request
/// path (every request's params are searched for the 2026 claim) was a measurable share
/// of a forwarded call.
macro_rules! mentions {
    ($haystack:expr, $needle:expr) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        FINDER.find($haystack).is_some()
    }};
}
pub(crate) use mentions;

/// Standard error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// Any JSON-RPC message, parsed as far as routing needs.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    /// (A newtype, because serde borrows a `Cow` only when it is not inside an `Option`.)
    #[serde(borrow, default)]
    pub method: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

/// A string borrowed from the message unless it had escapes.
#[derive(Debug, Deserialize)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a> Envelope<'a> {
    /// Parses one message; `None` when it is not a JSON object.
    pub fn parse(bytes: &'a [u8]) -> Option<Envelope<'a>> {
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        // One UTF-8 check of the whole message, instead of one per string and per raw
        // value that `from_slice` would make. Bad bytes somewhere (say, in a member we
        // ignore) are `from_slice`'s to judge, as before.
        match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::from_str(text).ok(),
            Err(_) => serde_json::from_slice(bytes).ok(),
        }
    }

    /// A request: method and id.
    pub fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    /// This message as an owned [`Request`], if it is one.
    pub fn to_request(&self) -> Option<Request> {
        Some(Request {
            id: self.id?.to_owned(),
            method: self.method.as_deref()?.into(),
            params: self.params.map(ToOwned::to_owned),
        })
    }

    /// A response to one of our requests: id, no method.
    pub fn is_response(&self) -> bool {
        self.method.is_none()
            && self.id.is_some()
            && (self.result.is_some() || self.error.is_some())
    }
}

/// A request from the agent, parsed once and owned, so that the message it came in can
/// be reused or dropped while the request runs.
#[derive(Debug)]
pub struct Request {
    pub id: Box<RawValue>,
    pub method: Box<str>,
    pub params: Option<Box<RawValue>>,
}

pub use corral_supervisor::rpc::push_json_str as push_str;

/// The string member `key` of a JSON object (say, a request's params).
pub fn str_member(json: Option<&str>, key: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json?).ok()?;
    v.get(key)?.as_str().map(str::to_owned)
}

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`.
pub fn result(id: &RawValue, result: &str) -> Vec<u8> {
    // Exactly the length needed: a full Vec becomes `Bytes` without another allocation.
    let mut out = Vec::with_capacity(33 + id.get().len() + result.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M}}` (id `null` when unknown).
pub fn error(id: Option<&RawValue>, code: i64, message: &str) -> Vec<u8> {
    error_with_data(id, code, message, None)
}

/// An error response with optional raw `data`.
pub fn error_with_data(
    id: Option<&RawValue>,
    code: i64,
    message: &str,
    data: Option<&str>,
) -> Vec<u8> {
    let id = id.map_or("null", RawValue::get);
    let msg = serde_json::to_string(message).expect("strings serialize");
    let data = data.map(|d| format!(r#","data":{d}"#)).unwrap_or_default();
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{msg}{data}}}}}"#)
        .into_bytes()
}

/// A notification with raw params.
pub fn notification(method: &str, params: Option<&str>) -> Vec<u8> {
    let method = serde_json::to_string(method).expect("strings serialize");
    match params {
        Some(p) => format!(r#"{{"jsonrpc":"2.0","method":{method},"params":{p}}}"#),
        None => format!(r#"{{"jsonrpc":"2.0","method":{method}}}"#),
    }
    .into_bytes()
}

/// A request we send to the agent.
pub fn request(id: &str, method: &str, params: Option<&str>) -> Vec<u8> {
    let method = serde_json::to_string(method).expect("strings serialize");
    let id = serde_json::to_string(id).expect("strings serialize");
    match params {
        Some(p) => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{p}}}"#),
        None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method}}}"#),
    }
    .into_bytes()
}

/// A tool result with one text block, as agents read tool failures best.
pub fn tool_error_result(text: &str) -> String {
    let text = serde_json::to_string(text).expect("strings serialize");
    format!(r#"{{"content":[{{"type":"text","text":{text}}}],"isError":true}}"#)
}

/// A tool result with one text block and structured content.
pub fn tool_text_result(text: &str, structured: Option<&serde_json::Value>) -> String {
    let mut v = serde_json::json!({"content": [{"type": "text", "text": text}], "isError": false});
    if let Some(s) = structured {
        v["structuredContent"] = s.clone();
    }
    v.to_string()
}

/// Raw JSON for text known to be one JSON value (say, an id read from a message).
/// `params` (an object's JSON text, or none) with `_meta[key]` set to `value`: a
/// missing or non-object `_meta` becomes an object; params that are not an object
/// become `{"_meta": {…}}`. Off the hot path: it parses and re-serializes.
pub fn with_meta_member(params: Option<&str>, key: &str, value: serde_json::Value) -> String {
    use serde_json::{Map, Value};
    let mut p: Map<String, Value> = params
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or_default();
    let meta = p
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(m) = meta.as_object_mut() {
        m.insert(key.to_owned(), value);
    }
    Value::Object(p).to_string()
}

pub fn raw_str(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap_or_else(|_| raw("null".into()))
}

/// Raw JSON for a value we built.
pub fn raw(json: String) -> Box<RawValue> {
    RawValue::from_string(json).expect("we only build valid JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_envelopes() {
        let id = raw("7".into());
        assert_eq!(
            result(&id, "{}"),
            br#"{"jsonrpc":"2.0","id":7,"result":{}}"#
        );
        assert_eq!(
            error(None, PARSE_ERROR, "bad \"json\""),
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"json\""}}"#
        );
        let v: serde_json::Value = serde_json::from_str(&tool_error_result("x\ny")).unwrap();
        assert_eq!(v["isError"], true);
    }

    #[test]
    fn classifies_messages() {
        let r = Envelope::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert!(r.is_response() && !r.is_request());
        let q = Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert!(q.is_request());
        assert!(Envelope::parse(b"[1]").is_none());
        assert!(Envelope::parse(b"garbage").is_none());
        assert!(Envelope::parse(b"{\"method\":\"a\xff\"}").is_none());
        // Bad bytes in a member nobody reads do not lose the message.
        let q = Envelope::parse(b"{\"x\":\"\xff\",\"id\":1,\"method\":\"ping\"}").unwrap();
        assert!(q.is_request());
    }

    #[test]
    fn an_escaped_method_is_unescaped_and_a_plain_one_borrowed() {
        let q = Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools\/call"}"#).unwrap();
        assert_eq!(q.method.as_deref(), Some("tools/call"));
        let q = Envelope::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#).unwrap();
        assert!(matches!(q.method.unwrap().0, Cow::Borrowed("tools/call")));
    }

    #[test]
    fn results_are_built_at_their_exact_length() {
        let r = result(&raw("\"req-12\"".into()), r#"{"a":[1,2]}"#);
        assert_eq!(r.len(), r.capacity());
    }

    #[test]
    fn push_str_escapes_like_serde() {
        for s in [
            "plain",
            "quo\"te",
            "back\\slash",
            "new\nline",
            "tab\t",
            "ünï",
            "\u{1}",
        ] {
            let mut out = String::new();
            push_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap());
        }
    }
}
