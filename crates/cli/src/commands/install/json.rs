//! Edits of a client's JSON or JSONC file through jsonc-parser's concrete syntax tree,
//! which keeps every comment, blank and the author's indentation: only the entries
//! touched change.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
use serde_json::Value;

/// Strict JSON, or JSONC (comments and trailing commas).
fn options(jsonc: bool) -> ParseOptions {
    ParseOptions {
        allow_comments: jsonc,
        allow_trailing_commas: jsonc,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// Parses `text`; an error reads `LINE:COLUMN: what`.
fn parse(text: &str, jsonc: bool) -> Result<CstRootNode, String> {
    CstRootNode::parse(text, &options(jsonc)).map_err(|e| {
        format!(
            "{}:{}: {}{}",
            e.line_display(),
            e.column_display(),
            e.kind(),
            if jsonc {
                ""
            } else {
                " (this file must be strict JSON: no comments, no trailing commas)"
            }
        )
    })
}

/// The object holding the servers, when the file has one.
fn servers(root: &CstRootNode, key: &str) -> Result<Option<CstObject>, String> {
    let Some(value) = root.value() else {
        return Ok(None);
    };
    let obj = value
        .as_object()
        .ok_or("the top level of the file is not an object")?;
    let Some(prop) = obj.get(key) else {
        return Ok(None);
    };
    prop.object_value()
        .map(Some)
        .ok_or_else(|| format!("`{key}` is not an object"))
}

/// Checks that `text` parses (an error reads `LINE:COLUMN: what`).
pub fn check(text: &str, jsonc: bool, key: &str) -> Result<(), String> {
    servers(&parse(text, jsonc)?, key).map(|_| ())
}

/// The server entries under `key`, by name, in file order.
pub fn entries(text: &str, jsonc: bool, key: &str) -> Result<Vec<(String, Value)>, String> {
    let root = parse(text, jsonc)?;
    let Some(servers) = servers(&root, key)? else {
        return Ok(Vec::new());
    };
    Ok(servers
        .properties()
        .into_iter()
        .filter_map(|p| Some((p.decoded_name()?, p.to_serde_value()?)))
        .collect())
}

/// `text` (none, or blank: a new file) with entry `name` under `key` set to `entry`. An
/// equal entry leaves the text as it is; a different one is updated key by key in place.
pub fn set_entry(
    text: Option<&str>,
    jsonc: bool,
    key: &str,
    name: &str,
    entry: &Value,
) -> Result<String, String> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        let fresh = serde_json::json!({ key: { name: entry } });
        return Ok(serde_json::to_string_pretty(&fresh).expect("a JSON value") + "\n");
    };
    let root = parse(text, jsonc)?;
    let obj = match servers(&root, key)? {
        Some(obj) => obj,
        None => root
            .object_value_or_create()
            .ok_or("the top level of the file is not an object")?
            .object_value_or_set(key),
    };
    match obj.get(name) {
        Some(prop) if prop.to_serde_value().as_ref() == Some(entry) => return Ok(text.to_owned()),
        Some(prop) => match (prop.object_value(), entry.as_object()) {
            (Some(existing), Some(fields)) => {
                for (k, v) in fields {
                    match existing.get(k) {
                        Some(p) => p.set_value(input(v)),
                        None => {
                            existing.append(k, input(v));
                        }
                    }
                }
            }
            _ => prop.set_value(input(entry)),
        },
        None => {
            obj.append(name, input(entry));
        }
    }
    Ok(root.to_string())
}

/// `text` without the entries `names` under `key` (the rest untouched).
pub fn remove_entries(
    text: &str,
    jsonc: bool,
    key: &str,
    names: &[String],
) -> Result<String, String> {
    let root = parse(text, jsonc)?;
    if let Some(obj) = servers(&root, key)? {
        for name in names {
            if let Some(prop) = obj.get(name) {
                prop.remove();
            }
        }
    }
    Ok(root.to_string())
}

fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}
