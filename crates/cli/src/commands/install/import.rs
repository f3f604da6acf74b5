//! `corral install --import`: a client's server entries become `[servers.NAME]` tables of
//! the project's `corral.toml`, converted the way `corral init` imports `.mcp.json`
//! ([`corral_config::import_servers`]). Each entry is first put in the `.mcp.json` shape
//! (or VS Code's, for VS Code) with its variable references in a form that dialect
//! reads, so `${env:…}` references come out the other side; literal values stay literal.

use super::clients::{Client, Syntax, Vars};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// What importing one client's entries does.
pub struct Import {
    /// The new `corral.toml` text.
    pub toml: String,
    /// The entries moved (to remove from the client's file).
    pub moved: Vec<String>,
    /// Entries left in the client's file, and why.
    pub kept: Vec<String>,
    /// Literal secrets now in corral.toml (the key, never the value).
    pub warnings: Vec<String>,
}

/// Appends the importable entries of `entries` (from `client`'s file `source`) to the
/// `corral.toml` text `toml`. A name `corral.toml` has is left alone and reported.
pub fn import(
    client: &Client,
    source: &Path,
    entries: &[(String, Value)],
    toml: &str,
    project: &Path,
) -> Result<Import, String> {
    let doc = toml
        .parse::<toml_edit::DocumentMut>()
        .map_err(|e| format!("corral.toml: {}", e.message()))?;
    let existing: BTreeSet<String> = doc
        .get("servers")
        .and_then(|s| s.as_table_like())
        .map(|t| t.iter().map(|(k, _)| k.to_owned()).collect())
        .unwrap_or_default();
    let mut out = Import {
        toml: toml.to_owned(),
        moved: Vec::new(),
        kept: Vec::new(),
        warnings: Vec::new(),
    };
    let mut tables = String::new();
    for (name, entry) in entries {
        if name == "corral" {
            continue;
        }
        if existing.contains(name) {
            out.kept.push(format!(
                "server '{name}' is in corral.toml already: not imported (its entry in {} stays)",
                source.display()
            ));
            continue;
        }
        let Some(canonical) = normalize(client, entry) else {
            out.kept.push(format!(
                "server '{name}': neither a command nor a URL Corral understands; left in {}",
                source.display()
            ));
            continue;
        };
        let (key, file) = match client.vars {
            Vars::VsCode => ("servers", ".vscode/mcp.json"),
            _ => ("mcpServers", ".mcp.json"),
        };
        let json = serde_json::json!({ key: { name.as_str(): canonical } }).to_string();
        let converted = match corral_config::import_servers(&project.join(file), &json) {
            Ok(c) => c,
            Err(e) => {
                let why = match &e {
                    corral_config::ConfigError::Invalid { problems, .. } => problems
                        .iter()
                        .map(|p| p.message.clone())
                        .collect::<Vec<_>>()
                        .join("; "),
                    other => other.to_string(),
                };
                out.kept.push(format!(
                    "server '{name}' not imported ({why}); left in {}",
                    source.display()
                ));
                continue;
            }
        };
        match converted.into_iter().next() {
            None => out.kept.push(format!(
                "server '{name}' is disabled: not imported; left in {}",
                source.display()
            )),
            Some(server) => match server.skipped {
                Some(note) => out.kept.push(format!("not imported: {note}")),
                None => {
                    warn_literals(name, &canonical, source, &mut out.warnings);
                    tables.push_str(&server.toml);
                    out.moved.push(name.clone());
                }
            },
        }
    }
    if !tables.is_empty() {
        if !out.toml.is_empty() && !out.toml.ends_with('\n') {
            out.toml.push('\n');
        }
        let from = source.display();
        out.toml
            .push_str(&format!("\n# ---- Servers imported from {from}. ----\n"));
        out.toml.push_str(&tables);
        out.toml
            .parse::<toml_edit::DocumentMut>()
            .map_err(|e| format!("the imported servers do not fit in corral.toml: {e}"))?;
    }
    Ok(out)
}

/// A client's entry in the `.mcp.json` (or VS Code) shape Corral's importer reads.
fn normalize(client: &Client, entry: &Value) -> Option<Value> {
    let o = entry.as_object()?;
    let mut out = Map::new();
    let strings = |v: Option<&Value>| -> Option<Value> { v.filter(|v| !v.is_null()).cloned() };
    if client.syntax == Syntax::Toml {
        return codex(o);
    }
    match o.get("command") {
        // Zed's older form: "command": {"path", "args", "env"}.
        Some(Value::Object(c)) => {
            out.insert("command".into(), c.get("path")?.clone());
            for k in ["args", "env"] {
                if let Some(v) = strings(c.get(k)) {
                    out.insert(k.into(), v);
                }
            }
        }
        Some(command @ Value::String(_)) => {
            out.insert("command".into(), command.clone());
            for k in ["args", "env", "cwd"] {
                if let Some(v) = strings(o.get(k)) {
                    out.insert(k.into(), v);
                }
            }
            if client.stdio_type {
                out.insert("type".into(), "stdio".into());
            }
        }
        _ => {
            let (url, transport) = client
                .url_keys
                .iter()
                .find_map(|(k, t)| Some((o.get(*k)?.clone(), *t)))?;
            out.insert("url".into(), url);
            match (transport, o.get("type")) {
                ("auto", Some(t @ Value::String(s))) if s == "http" || s == "sse" => {
                    out.insert("type".into(), t.clone());
                }
                ("auto", _) => {
                    if client.stdio_type {
                        out.insert("type".into(), "http".into());
                    }
                }
                (t, _) => {
                    out.insert("type".into(), t.into());
                }
            }
            if let Some(h) = strings(o.get("headers")) {
                out.insert("headers".into(), h);
            }
        }
    }
    if o.get("disabled") == Some(&Value::Bool(true)) {
        out.insert("disabled".into(), true.into());
    }
    if client.vars == Vars::Dollar {
        for k in ["env", "headers"] {
            if let Some(Value::Object(m)) = out.get_mut(k) {
                for v in m.values_mut() {
                    if let Value::String(s) = v {
                        *s = braces(s);
                    }
                }
            }
        }
    }
    Some(Value::Object(out))
}

/// Codex's `[mcp_servers.NAME]`: `env` values are literal, `env_vars` names variables
/// passed through, `bearer_token_env_var` and `env_http_headers` name variables.
fn codex(o: &Map<String, Value>) -> Option<Value> {
    let mut out = Map::new();
    if let Some(command) = o.get("command") {
        out.insert("command".into(), command.clone());
        if let Some(args) = o.get("args") {
            out.insert("args".into(), args.clone());
        }
        let mut env = o
            .get("env")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for var in o
            .get("env_vars")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = match var {
                Value::String(s) => s.clone(),
                Value::Object(m) => m.get("name")?.as_str()?.to_owned(),
                _ => continue,
            };
            env.insert(name.clone(), format!("${{{name}}}").into());
        }
        if !env.is_empty() {
            out.insert("env".into(), Value::Object(env));
        }
        if let Some(cwd) = o.get("cwd") {
            out.insert("cwd".into(), cwd.clone());
        }
    } else {
        out.insert("url".into(), o.get("url")?.clone());
        out.insert("type".into(), "http".into());
        let mut headers = o
            .get("http_headers")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(Value::Object(m)) = o.get("env_http_headers") {
            for (h, var) in m {
                if let Some(var) = var.as_str() {
                    headers.insert(h.clone(), format!("${{{var}}}").into());
                }
            }
        }
        if let Some(var) = o.get("bearer_token_env_var").and_then(Value::as_str) {
            headers.insert("Authorization".into(), format!("Bearer ${{{var}}}").into());
        }
        if !headers.is_empty() {
            out.insert("headers".into(), Value::Object(headers));
        }
    }
    if o.get("enabled") == Some(&Value::Bool(false)) {
        out.insert("disabled".into(), true.into());
    }
    Some(Value::Object(out))
}

/// `$NAME` → `${NAME}` (Gemini CLI expands both in env values).
fn braces(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if len > 0 && !after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(&format!("${{{}}}", &after[..len]));
            rest = &after[len..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Warns about each literal (non-`${…}`) value that looks like a secret: every header,
/// and env values whose name says credential.
fn warn_literals(name: &str, entry: &Value, source: &Path, warnings: &mut Vec<String>) {
    let secretish = |k: &str| {
        let k = k.to_ascii_uppercase();
        [
            "TOKEN",
            "KEY",
            "SECRET",
            "PASS",
            "AUTH",
            "CREDENTIAL",
            "COOKIE",
        ]
        .iter()
        .any(|w| k.contains(w))
    };
    for (field, all) in [("env", false), ("headers", true)] {
        let Some(Value::Object(m)) = entry.get(field) else {
            continue;
        };
        for (k, v) in m {
            let literal = v.as_str().is_some_and(|s| !s.contains("${"));
            if literal && (all || secretish(k)) {
                warnings.push(format!(
                    "server '{name}': {field}.{k} is a literal value (as it was in {}), now \
                     written in corral.toml; keep secrets out of the file with \
                     \"${{env:VARIABLE}}\"",
                    source.display()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::braces;

    #[test]
    fn dollar_names_get_braces() {
        assert_eq!(braces("$TOKEN"), "${TOKEN}");
        assert_eq!(braces("Bearer $A_B!"), "Bearer ${A_B}!");
        assert_eq!(braces("${X} $ $1"), "${X} $ $1");
    }
}
