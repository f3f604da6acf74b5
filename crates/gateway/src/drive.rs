//! Bridge B: a 2026-07-28 server's `input_required` result, answered by a 2025 agent.
//!
//! A stateless (modern) server cannot send requests to its client; when a `tools/call`,
//! `prompts/get` or `resources/read` needs input (an elicitation, a sampling, the roots),
//! it answers `input_required` with the requests it wants answered, and the client
//! retries the same request with the answers (`inputResponses`) and the server's opaque
//! `requestState`. A 2025 agent (an `initialize` session) knows nothing of that; it
//! answers ordinary `elicitation/create`, `sampling/createMessage` and `roots/list`
//! requests on its session. So Corral drives the loop for it (notes §4B):
//!
//! - upstream, every leg's `_meta.clientCapabilities` is what the agent declared at
//!   `initialize` (its `sampling`/`elicitation`/`roots`), so the server asks only for
//!   what the agent can answer;
//! - on `input_required`, each `inputRequests` entry becomes a real request on the
//!   agent's session, related to the agent's request (on HTTP it rides that POST's SSE
//!   stream), gated on the agent's capabilities and revision;
//! - all answers are awaited (human-paced: the same deadline as a parked call's,
//!   `CORRAL_INPUT_TTL_MS`, ten minutes by default), then the call is re-sent
//!   upstream with a new id, the original params, this round's answers only and the
//!   `requestState` byte for byte; up to [`MAX_ROUNDS`] rounds; a round that asks
//!   nothing (state only) is paced by [`STATE_ONLY_PAUSE`].
//!
//! The agent's request is held open throughout, its progress token spans every leg (the
//! caller registered it once), and nothing is synthesized. Cancelling the agent's
//! request drops the current upstream leg (which cancels it on the server) and
//! [`Outstanding`] tells the agent its requests from Corral are void.
//!
//! A 2026 agent needs none of this: its `input_required` passes through untouched and
//! its retry's `inputResponses`/`requestState` go upstream as they came (see
//! `Session::call_tool`).

use crate::agent::SessionShared;
use crate::hub::Hub;
use crate::jsonrpc;
use crate::modern::{CLIENT_CAPABILITIES_KEY, HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION};
use corral_supervisor::rpc::push_json_str;
use corral_supervisor::{CallError, RpcError, ServerHandle};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// How many `input_required` rounds Corral answers for one agent request before it
/// gives up (the TypeScript SDK's shim uses the same cap): a server that keeps asking is
/// looping, not waiting for a human.
pub(crate) const MAX_ROUNDS: usize = 8;
/// The pause before retrying a round that asked for nothing (only `requestState`): the
/// server is shedding load or working in steps; an immediate retry would spin.
pub(crate) const STATE_ONLY_PAUSE: Duration = Duration::from_millis(250);

/// An agent's answer to a request Corral sent it: its `result`, or (code, message) of
/// its error.
pub(crate) type AgentAnswer = Result<Box<RawValue>, (i64, String)>;

/// How a driven request ended.
pub(crate) enum Outcome {
    /// The server's final result, with the 2026-only members stripped.
    Done(Box<RawValue>),
    /// The server (or the way to it) failed as any request can.
    Error(CallError),
    /// The loop could not go on; the message says why and what to do.
    Failed(String),
}

/// Whether a request from a 2025 `session` to `handle` is driven here (the
/// `prompts/get` / `resources/read` path; `tools/call` decides inline).
pub(crate) fn drives(session: &SessionShared, handle: &ServerHandle) -> bool {
    !session.is_modern() && handle.era() == Some(corral_supervisor::Era::Modern)
}

/// The client capabilities a 2025 agent's requests carry upstream: what it declared at
/// `initialize` of what Corral can route to it (sampling, elicitation, roots), gated on
/// its revision (elicitation exists from 2025-06-18).
pub(crate) fn upstream_capabilities(session: &SessionShared) -> Value {
    let declared = session.client_capabilities();
    let mut caps = Map::new();
    for kind in ["sampling", "elicitation", "roots"] {
        if let Some(v) = declared.get(kind)
            && v.is_object()
            && (kind != "elicitation" || revision_at_least(session, "2025-06-18"))
        {
            caps.insert(kind.to_owned(), v.clone());
        }
    }
    Value::Object(caps)
}

fn revision_at_least(session: &SessionShared, version: &str) -> bool {
    // Revisions are dates: their text orders as they do.
    session.protocol().is_some_and(|v| v.as_str() >= version)
}

/// `params` (a JSON object's text, or none) with the agent's capabilities in `_meta`:
/// the first leg's params of a driven `prompts/get` or `resources/read`.
pub(crate) fn with_capabilities(params: Option<&RawValue>, caps: Value) -> String {
    jsonrpc::with_meta_member(params.map(RawValue::get), CLIENT_CAPABILITIES_KEY, caps)
}

/// What an `input_required` result asks.
struct Ask {
    /// Key → (method, params) of each request, in key order.
    requests: Vec<(String, String, Option<Box<RawValue>>)>,
    /// The `requestState` as its raw JSON string, echoed byte for byte.
    state: Option<Box<RawValue>>,
}

/// The request of an `input_required` result, or `None` for a complete one. Parses
/// only a result that mentions `input_required`.
fn asks(result: &RawValue) -> Option<Ask> {
    if !jsonrpc::mentions!(result.get().as_bytes(), "input_required") {
        return None;
    }
    #[derive(Deserialize)]
    struct R<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<Cow<'a, str>>,
        #[serde(rename = "inputRequests", default)]
        requests: Option<BTreeMap<String, Req>>,
        #[serde(rename = "requestState", default)]
        state: Option<Box<RawValue>>,
    }
    #[derive(Deserialize)]
    struct Req {
        method: String,
        #[serde(default)]
        params: Option<Box<RawValue>>,
    }
    let r: R<'_> = serde_json::from_str(result.get()).ok()?;
    if r.result_type.as_deref() != Some("input_required") {
        return None;
    }
    Some(Ask {
        requests: r
            .requests
            .unwrap_or_default()
            .into_iter()
            .map(|(k, q)| (k, q.method, q.params))
            .collect(),
        state: r.state,
    })
}

/// `params` (the first leg's, a JSON object's text) with this round's answers and the
/// server's state appended: the retry's params.
fn retry_params(params: &str, answers: Option<&str>, state: Option<&RawValue>) -> String {
    let body = params.trim_end();
    let Some(open) = body.strip_suffix('}') else {
        return params.to_owned();
    };
    let mut out = String::with_capacity(body.len() + answers.map_or(0, str::len) + 128);
    out.push_str(open.trim_end());
    let mut sep = !out.trim_end().ends_with('{');
    let mut member = |out: &mut String, key: &str, value: &str| {
        if sep {
            out.push(',');
        }
        sep = true;
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        out.push_str(value);
    };
    if let Some(a) = answers {
        member(&mut out, "inputResponses", a);
    }
    if let Some(s) = state {
        member(&mut out, "requestState", s.get());
    }
    out.push('}');
    out
}

/// Runs `method` on a modern server for a 2025 agent, answering its `input_required`
/// rounds through the agent's session. `params` is the first leg's params (a JSON
/// object's text, with the agent's capabilities in `_meta`); `agent_id` is the agent's
/// request, which Corral's requests to the agent are related to.
pub(crate) async fn request(
    hub: &Hub,
    session: &Arc<SessionShared>,
    handle: &ServerHandle,
    method: &str,
    agent_id: &RawValue,
    params: String,
) -> Outcome {
    let server = handle.name();
    let mut outstanding = Outstanding {
        hub,
        session,
        ids: Vec::new(),
    };
    let mut answers: Option<String> = None;
    let mut state: Option<Box<RawValue>> = None;
    let mut round = 0;
    loop {
        let leg = if round == 0 {
            Cow::Borrowed(params.as_str())
        } else {
            Cow::Owned(retry_params(&params, answers.as_deref(), state.as_deref()))
        };
        let result = match handle.request_relayed(method, Some(&leg)).await {
            Ok(r) => r,
            Err(e) => return upstream_error(server, e),
        };
        let Some(ask) = asks(&result) else {
            return Outcome::Done(strip_modern(result));
        };
        if round == MAX_ROUNDS {
            return Outcome::Failed(format!(
                "server '{server}' still asked for input after {MAX_ROUNDS} rounds of \
                 answers to {method}; corral gave up (a server that keeps asking is \
                 looping): check the server"
            ));
        }
        round += 1;
        state = ask.state;
        if ask.requests.is_empty() {
            // State only: the server works in steps (or sheds load); retry, paced.
            answers = None;
            tokio::time::sleep(STATE_ONLY_PAUSE).await;
            continue;
        }
        // Gate every entry before asking anything: a round is answered whole or not at all.
        let mut prepared = Vec::with_capacity(ask.requests.len());
        for (key, kind, params) in ask.requests {
            match prepare(session, server, &kind, params) {
                Ok(params) => prepared.push((key, kind, params)),
                Err(why) => return Outcome::Failed(why),
            }
        }
        let mut waiting = Vec::with_capacity(prepared.len());
        for (key, kind, params) in prepared {
            let (n, rx) = outstanding.ask(&kind, params.as_deref(), agent_id);
            waiting.push((key, kind, n, rx));
        }
        // A person may be typing: as long as a parked call waits for its retry.
        let leg_timeout = hub.parked.ttl();
        let collected = tokio::time::timeout(leg_timeout, async {
            let mut out = String::from("{");
            for (key, kind, n, rx) in waiting {
                let answer = rx.await;
                outstanding.done(n);
                let result = match answer {
                    Ok(Ok(r)) => r,
                    Ok(Err((code, message))) => {
                        return Err(format!(
                            "the client answered {kind} (asked for server '{server}') with \
                             an error: {message} ({code})"
                        ));
                    }
                    Err(_) => {
                        return Err(format!(
                            "the client's session closed before it answered {kind}"
                        ));
                    }
                };
                if out.len() > 1 {
                    out.push(',');
                }
                push_json_str(&mut out, &key);
                out.push(':');
                out.push_str(result.get());
            }
            out.push('}');
            Ok(out)
        })
        .await;
        answers = match collected {
            Ok(Ok(a)) => Some(a),
            Ok(Err(why)) => return Outcome::Failed(why),
            Err(_) => {
                return Outcome::Failed(format!(
                    "the client did not answer what server '{server}' asked (for {method}) \
                     within {leg_timeout:?}; call again when someone can answer"
                ));
            }
        };
    }
}

/// Checks that the agent can answer a request of `kind` and returns the params to send
/// it (URL-mode elicitation gets an `elicitationId`, which 2025-11-25 requires and 2026
/// dropped); `Err` names what is missing.
fn prepare(
    session: &SessionShared,
    server: &str,
    kind: &str,
    params: Option<Box<RawValue>>,
) -> Result<Option<String>, String> {
    let caps = session.client_capabilities();
    let lacks = |cap: &str, what: &str| {
        format!(
            "server '{server}' asked for {what} ({kind}), which needs the client \
             capability '{cap}'; this client did not declare it at initialize, so the \
             call cannot complete: use a client that supports {what}"
        )
    };
    let declared = |pointer: &str| caps.pointer(pointer).is_some_and(Value::is_object);
    let text = params.as_deref().map(RawValue::get);
    let mentions = |k: &str| text.is_some_and(|t| t.contains(k));
    match kind {
        "elicitation/create" => {
            if !declared("/elicitation") {
                return Err(lacks("elicitation", "user input"));
            }
            if !revision_at_least(session, "2025-06-18") {
                return Err(format!(
                    "server '{server}' asked for user input (elicitation/create), which \
                     MCP {} (this client's revision) does not have: use a client of \
                     2025-06-18 or later",
                    session.protocol().unwrap_or_default()
                ));
            }
            let url_mode = mentions("\"url\"")
                && text
                    .and_then(|t| serde_json::from_str::<Value>(t).ok())
                    .is_some_and(|v| v.get("mode").and_then(Value::as_str) == Some("url"));
            if url_mode {
                if !declared("/elicitation/url") {
                    return Err(lacks("elicitation.url", "a URL to be opened"));
                }
                let mut v: Map<String, Value> = text
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or_default();
                v.entry("elicitationId")
                    .or_insert_with(|| Value::String(uuid()));
                return Ok(Some(Value::Object(v).to_string()));
            }
        }
        "sampling/createMessage" => {
            if !declared("/sampling") {
                return Err(lacks("sampling", "an LLM completion"));
            }
            if mentions("\"tools\"") && !declared("/sampling/tools") {
                return Err(lacks("sampling.tools", "an LLM completion with tools"));
            }
        }
        "roots/list" => {
            if !declared("/roots") {
                return Err(lacks("roots", "the client's roots"));
            }
        }
        other => {
            return Err(format!(
                "server '{server}' asked for input with {other}, which is not a request an \
                 MCP client answers (elicitation/create, sampling/createMessage, \
                 roots/list): check the server"
            ));
        }
    }
    Ok(params.map(|p| p.get().to_owned()))
}

/// A random version-4 UUID, for a URL elicitation's `elicitationId`.
fn uuid() -> String {
    let hex = crate::httpd::new_token();
    let (a, rest) = hex.split_at(8);
    let (b, rest) = rest.split_at(4);
    let (c, rest) = rest.split_at(4);
    let (d, rest) = rest.split_at(4);
    // The version nibble is 4; the variant's top bits are 10 (8, 9, a or b).
    let variant = ['8', '9', 'a', 'b'][usize::from(d.as_bytes()[0]) % 4];
    format!("{a}-{b}-4{}-{variant}{}-{}", &c[1..], &d[1..], &rest[..12])
}

/// An error of one leg, worded for a 2025 agent where the code is a 2026 one it cannot
/// know: `-32021` (the server needs a capability the agent did not declare) names the
/// capability; `-32022`/`-32020` from a server Corral already negotiated with are
/// Corral's fault, and the message says so rather than blame the agent.
fn upstream_error(server: &str, e: CallError) -> Outcome {
    let CallError::Rpc {
        source:
            RpcError::Server {
                code,
                message,
                data,
            },
        ..
    } = &e
    else {
        return Outcome::Error(e);
    };
    match *code {
        MISSING_CAPABILITY => {
            let needed = data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
                .and_then(|d| d.get("requiredCapabilities").cloned())
                .and_then(|c| c.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()))
                .filter(|k| !k.is_empty())
                .map_or_else(|| "a client capability".to_owned(), |k| k.join(", "));
            Outcome::Failed(format!(
                "server '{server}' needs the client capability {needed} for this, which \
                 this client did not declare at initialize ({message}): use a client \
                 that supports it"
            ))
        }
        c if is_corral_fault(c) => Outcome::Failed(corral_fault(server, c, message)),
        _ => Outcome::Error(e),
    }
}

/// Whether a server's error code says Corral's own request was malformed for the
/// revision it negotiated (`-32022` unsupported version, `-32020` header mismatch).
pub(crate) fn is_corral_fault(code: i64) -> bool {
    matches!(code, UNSUPPORTED_PROTOCOL_VERSION | HEADER_MISMATCH)
}

/// The message for [`is_corral_fault`] errors.
pub(crate) fn corral_fault(server: &str, code: i64, message: &str) -> String {
    format!(
        "server '{server}' refused corral's request as malformed MCP ({message}, {code}): \
         this is a bug in corral, not in the client; please report it (restarting the \
         server makes corral negotiate its revision again)"
    )
}

/// `-32021`: the request lacks a client capability the server needs.
const MISSING_CAPABILITY: i64 = -32021;

/// A modern server's complete result for a 2025 agent, without the 2026-only members
/// (`resultType`, `ttlMs`, `cacheScope`); untouched (not parsed) when it has none.
pub(crate) fn strip_modern(result: Box<RawValue>) -> Box<RawValue> {
    let text = result.get().as_bytes();
    if !(jsonrpc::mentions!(text, "\"resultType\"")
        || jsonrpc::mentions!(text, "\"ttlMs\"")
        || jsonrpc::mentions!(text, "\"cacheScope\""))
    {
        return result;
    }
    let Ok(mut members) = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(result.get())
    else {
        return result;
    };
    for k in ["resultType", "ttlMs", "cacheScope"] {
        members.remove(k);
    }
    match serde_json::to_string(&members) {
        Ok(s) => jsonrpc::raw(s),
        Err(_) => result,
    }
}

/// Corral's requests to the agent that are still unanswered: if the agent's request ends
/// first (cancelled, its session gone), they are withdrawn and the agent is told with
/// `notifications/cancelled`.
struct Outstanding<'a> {
    hub: &'a Hub,
    session: &'a Arc<SessionShared>,
    ids: Vec<u64>,
}

impl Outstanding<'_> {
    /// Sends `method` to the agent (id `corral-N`), related to `agent_id`.
    fn ask(
        &mut self,
        method: &str,
        params: Option<&str>,
        agent_id: &RawValue,
    ) -> (u64, oneshot::Receiver<AgentAnswer>) {
        let (tx, rx) = oneshot::channel();
        let n = self.hub.await_agent(self.session.id(), tx);
        self.ids.push(n);
        let msg = jsonrpc::request(&format!("corral-{n}"), method, params);
        self.session.send(msg, Some(agent_id));
        (n, rx)
    }

    fn done(&mut self, n: u64) {
        self.ids.retain(|i| *i != n);
    }
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        for n in self.ids.drain(..) {
            if self.hub.forget_agent_answer(n) {
                let params = format!(
                    r#"{{"requestId":"corral-{n}","reason":"the request it was for ended"}}"#
                );
                self.session.send(
                    jsonrpc::notification("notifications/cancelled", Some(&params)),
                    None,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        jsonrpc::raw(s.to_owned())
    }

    #[test]
    fn retries_carry_the_answers_and_the_state_byte_for_byte() {
        let state = raw(r#""a\u00e9\"b""#);
        let p = retry_params(
            r#"{"name":"t","arguments":{}}"#,
            Some(r#"{"k":{"action":"accept"}}"#),
            Some(&state),
        );
        assert_eq!(
            p,
            r#"{"name":"t","arguments":{},"inputResponses":{"k":{"action":"accept"}},"requestState":"a\u00e9\"b"}"#
        );
        assert_eq!(
            retry_params("{}", None, Some(&state)),
            r#"{"requestState":"a\u00e9\"b"}"#
        );
    }

    #[test]
    fn reads_what_an_input_required_result_asks() {
        assert!(asks(&raw(r#"{"content":[]}"#)).is_none());
        assert!(asks(&raw(r#"{"resultType":"complete","x":"input_required"}"#)).is_none());
        let a = asks(&raw(
            r#"{"resultType":"input_required","inputRequests":{"b":{"method":"roots/list"},"a":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s"}"#,
        ))
        .unwrap();
        assert_eq!(a.requests.len(), 2);
        assert_eq!(a.requests[0].0, "a");
        assert_eq!(a.state.unwrap().get(), r#""s""#);
    }

    #[test]
    fn strips_the_2026_members_only() {
        let r = strip_modern(raw(
            r#"{"resultType":"complete","content":[{"type":"text","text":"x"}],"ttlMs":0,"cacheScope":"private"}"#,
        ));
        assert_eq!(r.get(), r#"{"content":[{"type":"text","text":"x"}]}"#);
        let plain = r#"{"content":[]}"#;
        assert_eq!(strip_modern(raw(plain)).get(), plain);
    }

    #[test]
    fn uuids_look_like_uuids() {
        let u = uuid();
        assert_eq!(u.len(), 36, "{u}");
        assert_eq!(u.as_bytes()[14], b'4', "{u}");
        assert_ne!(uuid(), u);
    }
}
