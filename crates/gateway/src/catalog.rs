//! The aggregated tool list: every ready server's tools (filtered, renamed) plus the
//! built-in tools, pre-serialized so `tools/list` is a copy, and a route per exposed name.

use crate::builtin::Builtin;
use crate::naming;
use corral_config::ToolPrefix;
use corral_supervisor::{ServerHandle, ServerState};
use serde_json::Value;
use std::collections::HashMap;

/// Where a tool call goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// To `tool` of server `server`.
    Server { server: String, tool: String },
    /// Answered by Corral itself.
    Builtin(Builtin),
}

/// One consistent view of every tool, rebuilt when a server's tools change.
#[derive(Debug, Default)]
pub struct Catalog {
    /// The `tools/list` result, serialized.
    pub list_json: String,
    pub routes: crate::FastMap<String, Route>,
    /// Exposed names that two servers both wanted (with `tool_prefix = "never"`): each
    /// entry names the tool and both servers. The later server's tool is exposed as
    /// `<server>__<tool>` instead, so nothing is lost or ambiguous.
    pub collisions: Vec<String>,
    /// What the catalog was built from (see [`fingerprint`]).
    pub fingerprint: Vec<(ServerState, usize)>,
}

/// Each server's state and the identity of its tool list: equal fingerprints mean an
/// equal catalog, so a rebuild can be skipped.
pub fn fingerprint<'a>(
    servers: impl Iterator<Item = &'a ServerHandle>,
) -> Vec<(ServerState, usize)> {
    servers
        .map(|h| (h.state(), std::sync::Arc::as_ptr(&h.tools()) as usize))
        .collect()
}

impl Catalog {
    /// Builds the catalog from the servers that are ready now.
    pub fn build<'a>(
        servers: impl Iterator<Item = &'a ServerHandle>,
        prefix: ToolPrefix,
        builtins: bool,
    ) -> Catalog {
        let servers: Vec<&ServerHandle> = servers.collect();
        let fingerprint = fingerprint(servers.iter().copied());
        let mut routes = crate::FastMap::default();
        let mut owners: HashMap<String, String> = HashMap::new();
        let mut tools = Vec::new();
        let mut collisions = Vec::new();
        for handle in servers {
            if handle.state() != ServerState::Ready {
                continue;
            }
            let server = handle.name();
            let filter = &handle.config().tools;
            for tool in handle.tools().iter().filter(|t| filter.permits(&t.name)) {
                let mut name = naming::exposed(prefix, server, &tool.name);
                if let Some(owner) = owners.get(&name) {
                    collisions.push(format!(
                        "tool '{}' is offered by servers '{owner}' and '{server}'; \
                         the one of '{server}' is exposed as '{server}__{}' \
                         (set tool_prefix = \"always\" or use tools.deny to choose)",
                        tool.name, tool.name
                    ));
                    name = naming::exposed(ToolPrefix::Always, server, &tool.name);
                }
                let mut value: Value = match serde_json::from_str(tool.raw.get()) {
                    Ok(v) => v,
                    Err(_) => continue,
                };
                value["name"] = Value::String(name.clone());
                tools.push(value);
                owners.insert(name.clone(), server.to_owned());
                routes.insert(
                    name,
                    Route::Server {
                        server: server.to_owned(),
                        tool: tool.name.clone(),
                    },
                );
            }
        }
        if builtins {
            for b in Builtin::ALL {
                let mut name = naming::exposed(prefix, "corral", b.name());
                if routes.contains_key(&name) {
                    name = naming::exposed(ToolPrefix::Always, "corral", b.name());
                }
                let mut def = b.definition();
                def["name"] = Value::String(name.clone());
                tools.push(def);
                routes.insert(name, Route::Builtin(*b));
            }
        }
        let list_json = serde_json::json!({ "tools": tools }).to_string();
        Catalog {
            list_json,
            routes,
            collisions,
            fingerprint,
        }
    }
}

/// One server's tools for listings (`corral tools`): each tool object as the server sent
/// it, with `name` set to the exposed name and `server` / `tool` added. Only ready
/// servers have tools; the `tools.allow` / `tools.deny` filter applies.
pub fn listing(handle: &ServerHandle, prefix: ToolPrefix) -> Vec<Value> {
    let filter = &handle.config().tools;
    handle
        .tools()
        .iter()
        .filter(|t| filter.permits(&t.name))
        .map(|t| {
            let mut v: Value = serde_json::from_str(t.raw.get()).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert(
                    "name".into(),
                    naming::exposed(prefix, handle.name(), &t.name).into(),
                );
                m.insert("server".into(), handle.name().into());
                m.insert("tool".into(), t.name.clone().into());
            }
            v
        })
        .collect()
}
