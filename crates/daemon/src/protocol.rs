//! The control protocol between the CLI and the daemon: newline-delimited JSON over the
//! Unix socket. A client sends one [`Request`] line; the daemon answers with one
//! [`Reply`] line, or — for `events`/`logs` with `follow`, and for `mcp` — keeps the
//! connection as a stream (event lines, log lines, or MCP messages both ways).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest request line the daemon reads on its control socket; a longer one is
/// discarded as it streams and answered with an error.
pub const MAX_REQUEST: usize = 1024 * 1024;

/// Longest reply line a client reads from the daemon (a tool list or a tool result can
/// be large; a reply past this is refused, not buffered).
pub const MAX_REPLY: usize = 64 * 1024 * 1024;

/// What a client asks of the daemon.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Daemon identity: pid, endpoint, config.
    Status,
    /// Server and dev process states.
    Ps,
    /// Tool list, optionally of one server.
    Tools {
        server: Option<String>,
    },
    /// Call one tool: `tool` as `corral tools` lists it, or with `server`, also the
    /// server's own name for it. An unknown name is answered with [`Reply::usage`].
    Call {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        tool: String,
        arguments: Value,
    },
    /// The last `lines` log lines of a server or a dev process; with `follow`, then every
    /// new line.
    Logs {
        name: String,
        lines: usize,
        follow: bool,
    },
    /// Restart a server or a dev process (a name that is both is impossible: the config
    /// refuses it, and `run` refuses a server's name); answers with its row.
    Restart {
        name: String,
    },
    Stop {
        name: String,
    },
    Start {
        name: String,
    },
    /// Start an ad-hoc dev process `name` running `command` in `cwd`: one element is a
    /// shell line (`sh -c`), more are a program and its arguments. A name in use (a
    /// server or a process) is refused with [`NAME_TAKEN`]. Answers with the process's
    /// row and `log`, the path of its log file.
    Run {
        name: String,
        command: Vec<String>,
        cwd: std::path::PathBuf,
    },
    /// Start a dev proxy: the configured one of that name, or with `target` an ad-hoc
    /// one (listening on `listen`, default a free loopback port). Answers with its row
    /// (`url` is where the browser goes). A running name is refused with [`NAME_TAKEN`].
    ProxyStart {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        listen: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inject: Option<bool>,
    },
    /// Stop a running dev proxy; answers with the row it had.
    ProxyStop {
        name: String,
    },
    /// The last `limit` requests of a proxy's traffic log and the errors its pages
    /// reported (`errors`: only responses ≥ 400 and transport errors).
    ProxyLog {
        name: String,
        #[serde(default)]
        limit: Option<usize>,
        #[serde(default)]
        errors: bool,
    },
    /// `get_errors`: what is broken now, over every source of the daemon. `args` are the
    /// MCP tool's (`source`, `since`, `include_warnings`, `limit`, `raw`). Answers with
    /// `text` (for agents), `colored` (for a terminal) and `report` (the JSON).
    Errors {
        #[serde(default)]
        args: Value,
    },
    /// The last `lines` journal events; with `follow`, then every new event.
    Events {
        lines: usize,
        follow: bool,
    },
    /// Stop every server and exit.
    Shutdown,
    /// The dashboard's URL with a fresh one-time login secret, and the 0600 launch page
    /// that leads a browser there: `{"url": …, "launch": PATH}`.
    Dashboard,
    /// Re-read the config and apply the difference.
    Reload,
    /// Switch this connection to an MCP session (the `corral mcp` bridge relaying), of
    /// `profile` when one is named (`corral mcp --profile NAME`).
    Mcp {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
    },
    /// The bridge hands over its stdin/stdout: after the daemon's `{"ok":true}` line, the
    /// client sends the two descriptors (`SCM_RIGHTS`); the daemon serves MCP on them and
    /// writes one more `{"ok":true}` line when the session ends. A `profile` the daemon
    /// does not know is refused instead of the first `{"ok":true}`.
    McpHandoff {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<String>,
    },
}

/// Parses one request line (its line end and surrounding JSON whitespace allowed).
pub fn parse_request(line: &[u8]) -> Result<Request, serde_json::Error> {
    serde_json::from_slice(line)
}

/// `Reply::code` of a request that named a server the daemon does not run.
pub const UNKNOWN_SERVER: &str = "unknown_server";

/// `Reply::code` of a request that named something else that does not exist (a tool).
pub const NOT_FOUND: &str = "not_found";

/// `Reply::code` of a request to create something under a name already in use (`run`).
pub const NAME_TAKEN: &str = "name_taken";

/// `Reply::code` of a request whose arguments cannot be used (a name with a `/`).
pub const INVALID: &str = "invalid";

/// A one-line answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With an error, what kind it is, for programs (added later; absent on older
    /// daemons and on errors without a kind): [`UNKNOWN_SERVER`], [`NOT_FOUND`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
}

impl Reply {
    pub fn ok(data: Value) -> Reply {
        Reply {
            ok: true,
            error: None,
            code: None,
            data,
        }
    }

    /// A success carrying one of the typed rows (`corral_events::rows`).
    pub fn ok_of(data: &impl Serialize) -> Reply {
        Reply::ok(serde_json::to_value(data).expect("rows serialize"))
    }

    pub fn err(message: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            error: Some(message.into()),
            code: None,
            data: Value::Null,
        }
    }

    /// An error of a kind programs can tell apart ([`UNKNOWN_SERVER`]).
    pub fn err_code(code: &str, message: impl Into<String>) -> Reply {
        Reply {
            code: Some(code.to_owned()),
            ..Reply::err(message)
        }
    }

    /// Whether this is an error naming a server the daemon does not run.
    pub fn is_unknown_server(&self) -> bool {
        self.code.as_deref() == Some(UNKNOWN_SERVER)
    }

    /// A refusal because the request named something that does not exist (exit 2 in
    /// the CLI, like any usage error).
    pub fn usage(message: impl Into<String>) -> Reply {
        Reply::err_code(NOT_FOUND, message)
    }

    /// Whether this refusal is a usage error: it named a server, process or tool that
    /// does not exist, or a name already in use.
    pub fn is_usage(&self) -> bool {
        !self.ok
            && matches!(
                self.code.as_deref(),
                Some(UNKNOWN_SERVER | NOT_FOUND | NAME_TAKEN | INVALID)
            )
    }

    pub fn line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("replies serialize");
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_by_op() {
        let r: Request =
            serde_json::from_str(r#"{"op":"logs","name":"a","lines":5,"follow":true}"#).unwrap();
        assert_eq!(
            r,
            Request::Logs {
                name: "a".into(),
                lines: 5,
                follow: true
            }
        );
        assert_eq!(
            serde_json::to_string(&Request::Ps).unwrap(),
            r#"{"op":"ps"}"#
        );
    }

    /// A float in a call's arguments reaches the tool exactly as typed: serde_json's
    /// default float parsing was best effort (`444444e40` parsed one ulp off 4.44444e45,
    /// found by fuzzing); the workspace enables `float_roundtrip`.
    #[test]
    fn call_arguments_round_trip_with_floats_exact() {
        let line = br#"{"op":"call","tool":"t","arguments":{"n":25,"x":[true,444444e40]}}"#;
        let first = parse_request(line).unwrap();
        let again = parse_request(&serde_json::to_vec(&first).unwrap()).unwrap();
        let float = |r: &Request| match r {
            Request::Call { arguments, .. } => arguments["x"][1].as_f64().unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(float(&first), 4.44444e45);
        assert_eq!(float(&again), 4.44444e45);
        let Request::Call {
            tool, arguments, ..
        } = again
        else {
            unreachable!()
        };
        assert_eq!((tool.as_str(), &arguments["n"]), ("t", &Value::from(25)));
    }

    #[test]
    fn error_codes_are_additive() {
        assert_eq!(
            Reply::err("x").line(),
            "{\"ok\":false,\"error\":\"x\"}\n",
            "an error without a kind reads as before"
        );
        let r = Reply::err_code(UNKNOWN_SERVER, "no server named 'a'");
        let back: Reply = serde_json::from_str(r.line().trim()).unwrap();
        assert!(back.is_unknown_server());
        let old: Reply = serde_json::from_str(r#"{"ok":false,"error":"x"}"#).unwrap();
        assert!(!old.is_unknown_server());
    }
}
