//! Loads and validates Corral's configuration: `corral.toml`, or an existing
//! `.mcp.json` / Claude Desktop / VS Code MCP config accepted as it is.
//!
//! # Theory of operation
//!
//! Loading runs in stages, each collecting problems instead of stopping at the first,
//! so `corral check` can list everything wrong in one go:
//!
//! 1. **parse** (`toml_load.rs`, `json_load.rs`): text → a small tree (`tree.rs`) in which
//!    every key and value knows its line and column. Only a syntax error stops here.
//! 2. **read** (`read.rs`): tree → raw sections. Key names (with "did you mean"),
//!    types, durations, choices, names and the shape of each server are checked;
//!    `${…}` forms are parsed but not yet expanded.
//! 3. **resolve** (`resolve.rs`): `[defaults]` and built-in defaults applied, `${…}`
//!    expanded against the environment, paths made absolute, URLs checked.
//!
//! Problems from stages 2 and 3 are reported together, sorted by position, as
//! [`ConfigError::Invalid`]. The environment is a parameter ([`load_str`]) so tests
//! need not touch the process environment.
//!
//! # Dialects
//!
//! * `corral.toml` is strict: an unknown key is an error. `[defaults]` holds the
//!   timing and policy keys (`startup_timeout`, `call_timeout`, `stop_grace`,
//!   `restart`, `max_concurrency`, `tools`, `quiet`, `crash_loop_max`,
//!   `crash_loop_window`); a server's own value replaces the default whole (a `tools`
//!   filter is not merged). The keys that describe one server (`command`, `args`,
//!   `env`, `cwd`, `url`, `headers`) are errors there.
//!   `[alerts]` ([`AlertSettings`]) holds user alert patterns (regexes, compiled once
//!   at load so a bad one is a problem with its position), the built-in rules or
//!   categories to disable (checked against the rules by `corral_alerts`), the dedup
//!   `window` and the `ring` size.
//! * `.mcp.json` (`{"mcpServers": …}`) and VS Code `mcp.json` (`{"servers": …}`,
//!   JSONC) belong to other tools as well, so only the server entries are read, and
//!   only their `command`, `args`, `env`, `cwd`, `type`, `url`, `headers` and
//!   `disabled` keys; anything else (`inputs`, `alwaysAllow`, …) is ignored, and an
//!   entry with `"disabled": true` is skipped. Timing and policy keys take their
//!   defaults. Root-relative paths of a VS Code `.vscode/mcp.json` resolve against
//!   the workspace folder above `.vscode`.
//!
//! Each dialect keeps the `${…}` syntax its own tools use (a fallback applies when the
//! variable is unset or empty); any other `${…}` is an error:
//!
//! | dialect     | forms                                                         |
//! |-------------|---------------------------------------------------------------|
//! | corral.toml | `${env:NAME}`, `${env:NAME:-fallback}`; `$$` is a literal `$` |
//! | .mcp.json   | `${NAME}`, `${NAME:-fallback}` (Claude Code's), `${env:NAME}` |
//! | VS Code     | `${env:NAME}`, `${env:NAME:-fallback}`, `${workspaceFolder}`  |
//!
//! # Secrets
//!
//! [`ServerConfig::secrets`] holds every expanded `headers` value (and the credential
//! after a scheme word like `Bearer`), and the `env` values that came from `${…}` or
//! whose variable name looks like a credential (`TOKEN`, `KEY`, `SECRET`, `PASS`,
//! `AUTH`, …). [`Config::redact`] hides them in text that leaves the process, and
//! [`redact::Redactor`] in a server's output, with anything shaped like a credential.

mod alerts;
mod deps;
mod discover;
mod error;
mod expand;
pub mod itself;
mod json_load;
mod model;
mod read;
pub use read::name_problem;
pub mod redact;
mod resolve;
mod suggest;
mod template;
mod toml_load;
mod tree;
pub mod trust;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use alerts::{
    AlertPattern, AlertSettings, AlertSeverity, DEFAULT_ALERT_RING, DEFAULT_ALERT_WINDOW,
};
pub use discover::{discover, discover_with};
pub use error::{ConfigError, Problem};
pub use model::{
    Config, CrashLoop, DEFAULT_OUTPUT_RING, DEFAULT_READY_TIMEOUT, Format, GatewayConfig, HttpAuth,
    Listen, LogPattern, MAX_OUTPUT_RING, MIN_OUTPUT_RING, OAuthClient, ProcessCommand,
    ProcessConfig, Profile, ProxyConfig, Readiness, ReadyCheck, RemoteTransport, RestartPolicy,
    ServerConfig, ToolFilter, ToolPrefix, Transport,
};
pub use suggest::closest;
pub use template::{ImportedServer, InitTemplate, import_servers, init_template};

/// The name of Corral's own config file.
pub const CONFIG_FILE: &str = "corral.toml";
/// The project MCP config of Claude Code, accepted when there is no `corral.toml`.
pub const MCP_JSON: &str = ".mcp.json";
/// The environment variable that names the config file.
pub const CONFIG_ENV: &str = "CORRAL_CONFIG";
/// The per-project state directory, beside the config file.
pub const STATE_DIR: &str = ".corral";

/// Reads and validates the config at `path`, expanding `${env:…}` from the process
/// environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    load_str(path, &text, &|name| std::env::var(name).ok())
}

/// Validates `text` as the config at `path`, looking variables up with `env`.
///
/// The dialect follows the extension (`.toml`, `.json`); with any other extension a
/// text starting with `{` is taken as JSON. Problems name `path` as given, so a
/// caller that wants shorter messages can pass a relative path; [`Config::path`] is
/// always absolute.
pub fn load_str(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let invalid = |mut problems: Vec<Problem>| {
        problems.sort_by_key(|p| (p.line, p.column));
        ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        }
    };
    let is_json = match path.extension().and_then(|e| e.to_str()) {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    };
    let (tree, format) = if is_json {
        json_load::parse(text).map_err(|p| invalid(vec![p]))?
    } else {
        let tree = toml_load::parse(text).map_err(|p| invalid(vec![p]))?;
        (tree, Format::Toml)
    };

    let abs_path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = model::project_root(&abs_path, format);
    let (raw, mut problems) = read::read(&tree, format);
    let (mut resolved, more) = resolve::resolve(&raw, env, &root);
    problems.extend(more);
    let notes = refuse_itself(&raw, &mut resolved.servers, format, env, &mut problems);
    deps::check(&tree, &raw, &mut problems);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    Ok(Config {
        path: abs_path,
        state_dir: root.join(STATE_DIR),
        root,
        format,
        gateway: raw.gateway,
        servers: resolved.servers,
        processes: resolved.processes,
        proxies: resolved.proxies,
        profiles: raw.profiles,
        alerts: raw.alerts,
        error_noise: raw.error_noise,
        notes,
        access_keys: raw.access_keys,
    })
}

/// Servers that are Corral itself (see [`itself`]): a problem in `corral.toml`; in an
/// `.mcp.json` / VS Code file (the agent's own file, where `corral mcp` belongs) the
/// entry is dropped and a note returned.
fn refuse_itself(
    raw: &read::RawConfig,
    servers: &mut std::collections::BTreeMap<String, ServerConfig>,
    format: Format,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let self_exe = std::env::current_exe().ok();
    let mut notes = Vec::new();
    for raw_server in &raw.servers {
        let name = &raw_server.name;
        let Some(ServerConfig {
            transport:
                Transport::Stdio {
                    command,
                    args,
                    env: server_env,
                    cwd,
                    ..
                },
            ..
        }) = servers.get(name)
        else {
            continue;
        };
        if !itself::runs_corral(command, args, cwd, server_env, env, self_exe.as_deref()) {
            continue;
        }
        let what = itself::message(name, command, args);
        match (format, &raw_server.transport) {
            (Format::Toml, read::RawTransport::Stdio { command, .. }) => problems.push(Problem {
                line: command.pos.line,
                column: command.pos.column,
                key: command.key.clone(),
                message: format!(
                    "{what}; remove the [servers.{name}] table (agents start `corral mcp` \
                     themselves, from their own MCP config)"
                ),
            }),
            _ => {
                servers.remove(name);
                notes.push(format!(
                    "{what}; skipped (it stays in the file for the agents that read it)"
                ));
            }
        }
    }
    notes
}
