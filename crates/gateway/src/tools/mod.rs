//! Corral's own tools, in one registry: [`Builtin`] names every tool, and each family
//! lives in its own file — [`errors`] (`get_errors`), [`servers`] (the MCP servers),
//! [`processes`] (the project's dev processes), [`proxies`] (its dev proxies). A family
//! knows its definitions and answers; what it works on comes in a [`Ctx`], and the names
//! agents see for the other tools (the catalog's, which depend on `tool_prefix`) come in
//! [`Ctx::names`], so no tool reaches back into the catalog or the hub.

pub mod errors;
pub mod history;
pub mod processes;
pub mod proxies;
pub mod servers;

pub use servers::{server_row, tail_of_file};

use crate::jsonrpc;
use corral_supervisor::{Processes, ServerHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// A built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// What is broken right now, over every source ([`errors`]): offered under
    /// the bare name `get_errors` whatever `tool_prefix` says, so agents can be told it.
    GetErrors,
    Servers,
    ServerLogs,
    RestartServer,
    /// The dev processes: offered only by a gateway with processes attached
    /// ([`crate::Hub::attach_processes`]); see [`processes`].
    Processes,
    ProcessStart,
    ProcessOutput,
    ProcessStop,
    ProcessRestart,
    ProcessWait,
    /// The dev proxies: offered with the process tools, answered with the attached
    /// proxies ([`crate::Hub::attach_proxies`]); see [`proxies`].
    Proxies,
    ProxyStart,
    ProxyStop,
    ProxyLog,
}

impl Builtin {
    pub const ALL: &'static [Builtin] = &[
        Builtin::GetErrors,
        Builtin::Servers,
        Builtin::ServerLogs,
        Builtin::RestartServer,
        Builtin::Processes,
        Builtin::ProcessStart,
        Builtin::ProcessOutput,
        Builtin::ProcessStop,
        Builtin::ProcessRestart,
        Builtin::ProcessWait,
        Builtin::Proxies,
        Builtin::ProxyStart,
        Builtin::ProxyStop,
        Builtin::ProxyLog,
    ];

    /// One of the tools that need the project's processes or proxies (the process and
    /// proxy tools), offered only by a gateway that runs them.
    pub fn is_process(self) -> bool {
        !matches!(
            self,
            Builtin::GetErrors | Builtin::Servers | Builtin::ServerLogs | Builtin::RestartServer
        )
    }

    /// One of the proxy tools ([`proxies`]).
    pub fn is_proxy(self) -> bool {
        matches!(
            self,
            Builtin::Proxies | Builtin::ProxyStart | Builtin::ProxyStop | Builtin::ProxyLog
        )
    }

    /// The unprefixed name.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::GetErrors => "get_errors",
            Builtin::Servers => "servers",
            Builtin::ServerLogs => "server_logs",
            Builtin::RestartServer => "restart_server",
            Builtin::Processes => "processes",
            Builtin::ProcessStart => "process_start",
            Builtin::ProcessOutput => "process_output",
            Builtin::ProcessStop => "process_stop",
            Builtin::ProcessRestart => "process_restart",
            Builtin::ProcessWait => "process_wait",
            Builtin::Proxies => "proxies",
            Builtin::ProxyStart => "proxy_start",
            Builtin::ProxyStop => "proxy_stop",
            Builtin::ProxyLog => "proxy_log",
        }
    }

    /// The family that defines and answers it.
    fn family(self) -> Family {
        match self {
            Builtin::GetErrors => Family::Errors,
            Builtin::Servers | Builtin::ServerLogs | Builtin::RestartServer => Family::Servers,
            b if b.is_proxy() => Family::Proxies,
            _ => Family::Processes,
        }
    }

    /// The tool object for `tools/list` (its name is set by the catalog). A `{NAME}` in a
    /// description (`{process_output}`) stands for the name agents see for that built-in
    /// tool; the catalog fills it in.
    pub fn definition(self) -> Value {
        match self.family() {
            Family::Errors => errors::definition(),
            Family::Servers => servers::definition(self),
            Family::Processes => processes::definition(self),
            Family::Proxies => proxies::definition(self),
        }
    }
}

enum Family {
    Errors,
    Servers,
    Processes,
    Proxies,
}

/// What the tools work on. The servers are always there; the project (its processes and
/// root) and the proxies only in a gateway that runs the project (the daemon's, `corral
/// mcp --standalone`).
pub struct Ctx<'a> {
    pub servers: &'a BTreeMap<String, ServerHandle>,
    /// The built-in tools offered, by the names agents see: an answer that points at
    /// another tool names it so.
    pub names: &'a [(Builtin, String)],
    pub project: Option<Project<'a>>,
    pub proxies: Option<&'a corral_proxy::Proxies>,
    /// `[errors] ignore`, for `get_errors`.
    pub noise: &'a [String],
    /// When the caller last asked for `get_errors`.
    pub last_call: Option<std::time::SystemTime>,
    /// The journal and when the live state begins, for `get_errors`' `since`.
    pub history: Option<(&'a Path, Option<std::time::SystemTime>)>,
}

/// The project a gateway runs.
#[derive(Clone, Copy)]
pub struct Project<'a> {
    pub processes: &'a Processes,
    /// The project root: an ad-hoc process's `cwd` is relative to it, and locations in
    /// answers are shown relative to it.
    pub root: &'a Path,
}

impl<'a> Ctx<'a> {
    /// The servers alone (`corral call` without a daemon): the process and proxy tools
    /// answer that they need the daemon.
    pub fn servers(servers: &'a BTreeMap<String, ServerHandle>) -> Ctx<'a> {
        Ctx {
            servers,
            names: &[],
            project: None,
            proxies: None,
            noise: &[],
            last_call: None,
            history: None,
        }
    }

    /// The name agents see for built-in tool `b`.
    pub fn name(&self, b: Builtin) -> &str {
        self.names
            .iter()
            .find(|(x, _)| *x == b)
            .map_or(b.name(), |(_, n)| n.as_str())
    }
}

/// Runs built-in tool `b`; returns a `tools/call` result (tool failures are `isError`).
pub async fn call(b: Builtin, ctx: &Ctx<'_>, args: &Value) -> String {
    match b.family() {
        Family::Errors => {
            let src = errors::Sources {
                servers: ctx.servers,
                noise: ctx.noise,
                root: ctx.project.map(|p| p.root),
                processes: ctx.project.map(|p| p.processes),
                proxies: ctx.proxies,
                last_call: ctx.last_call,
                history: ctx.history,
            };
            match errors::answer(&src, args).await {
                Ok((report, raw)) => {
                    jsonrpc::tool_text_result(&report.text(), Some(&report.json(raw)))
                }
                Err(e) => jsonrpc::tool_error_result(&e),
            }
        }
        Family::Servers => servers::call(b, ctx.servers, args).await,
        Family::Proxies => match ctx.proxies {
            Some(proxies) => proxies::call(b, proxies, ctx, args).await,
            None => jsonrpc::tool_error_result(
                "this gateway runs no dev proxies (start Corral's daemon with `corral up`)",
            ),
        },
        Family::Processes => match ctx.project {
            Some(project) => processes::call(b, project, ctx, args).await,
            None => jsonrpc::tool_error_result(&format!(
                "'{}' is one of Corral's process tools: it is answered in an agent's session \
                 of the project's daemon (`corral mcp`), where the processes run",
                b.name()
            )),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Arguments shared by the families

/// Most lines or entries a tool answers with.
pub(crate) const MAX_COUNT: usize = 1000;

pub(crate) fn string_arg<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

/// A count (`lines`, `entries`): 1 or more, capped at [`MAX_COUNT`].
pub(crate) fn count_arg(args: &Value, key: &str) -> Result<Option<usize>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some((n as usize).min(MAX_COUNT))),
            _ => Err(format!(
                "`{key}` must be a whole number from 1 to {MAX_COUNT}, not {v}"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every agent pays for these definitions on every turn (`corral tools --tokens`): they
    /// were 10.6 KB (≈ 2650 tokens; 6.5 KB after) before they were cut to what an agent needs to pick
    /// the tool and fill its arguments; what each tool answers says the rest. The budget
    /// keeps them from growing back unnoticed.
    #[test]
    fn builtin_definitions_stay_within_their_context_budget() {
        const BUDGET: usize = 6_800;
        let mut total = 0;
        for b in Builtin::ALL {
            let mut def = b.definition();
            def["name"] = Value::String(format!("corral__{}", b.name()));
            let desc = def["description"].as_str().unwrap_or_default();
            assert!(desc.starts_with("Corral: "), "{}: {desc}", b.name());
            let schema = &def["inputSchema"];
            assert_eq!(schema["type"], "object", "{}", b.name());
            for r in schema["required"].as_array().into_iter().flatten() {
                let r = r.as_str().unwrap_or_default();
                assert!(schema["properties"].get(r).is_some(), "{}: {r}", b.name());
            }
            total += def.to_string().len();
        }
        assert!(
            total <= BUDGET,
            "the built-in definitions take {total} bytes"
        );
    }
}
