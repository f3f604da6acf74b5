//! Edits of Codex's `config.toml` through toml_edit, which keeps comments, ordering and
//! formatting of everything it is not asked to change.

use serde_json::Value;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table};

/// Parses `text`; an error reads `LINE:COLUMN: what`.
fn parse(text: &str) -> Result<DocumentMut, String> {
    text.parse::<DocumentMut>().map_err(|e| {
        let at = e.span().map_or(0, |s| s.start).min(text.len());
        let before = &text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("{line}:{column}: {}", e.message().trim())
    })
}

/// Checks that `text` parses and that `key`, if present, is a table.
pub fn check(text: &str, key: &str) -> Result<(), String> {
    let doc = parse(text)?;
    match doc.get(key) {
        Some(item) if item.as_table_like().is_none() => Err(format!("`{key}` is not a table")),
        _ => Ok(()),
    }
}

/// The server tables under `key`, by name, in file order, as JSON values.
pub fn entries(text: &str, key: &str) -> Result<Vec<(String, Value)>, String> {
    check(text, key)?;
    let doc = parse(text)?;
    let Some(servers) = doc.get(key).and_then(Item::as_table_like) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, item)| (name.to_owned(), to_json(item)))
        .collect())
}

/// `text` (none: a new file) with `[key.name]` set to `entry` (an object of strings,
/// string arrays and string maps). An equal entry leaves the text as it is; a different
/// one is updated key by key in place.
pub fn set_entry(
    text: Option<&str>,
    key: &str,
    name: &str,
    entry: &Value,
) -> Result<String, String> {
    let original = text.unwrap_or("");
    check(original, key)?;
    let mut doc = parse(original)?;
    let servers = doc.entry(key).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    if servers.get(name).map(to_json).as_ref() == Some(entry) {
        return Ok(original.to_owned());
    }
    let fields = entry.as_object().cloned().unwrap_or_default();
    if let Some(table) = servers.as_table_mut() {
        match table.get_mut(name).and_then(Item::as_table_like_mut) {
            Some(existing) => {
                for (k, v) in &fields {
                    existing.insert(k, Item::Value(value(v)));
                }
            }
            None => {
                let mut t = Table::new();
                for (k, v) in &fields {
                    t.insert(k, Item::Value(value(v)));
                }
                table.insert(name, Item::Table(t));
            }
        }
    } else if let Some(inline) = servers.as_inline_table_mut() {
        inline.insert(name, value(entry));
    } else {
        return Err(format!("`{key}` is not a table"));
    }
    Ok(doc.to_string())
}

/// `text` without the tables `names` under `key`.
pub fn remove_entries(text: &str, key: &str, names: &[String]) -> Result<String, String> {
    let mut doc = parse(text)?;
    if let Some(servers) = doc.get_mut(key).and_then(Item::as_table_like_mut) {
        for name in names {
            servers.remove(name);
        }
    }
    Ok(doc.to_string())
}

fn value(v: &Value) -> toml_edit::Value {
    match v {
        Value::String(s) => s.as_str().into(),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or(0.0).into(),
        },
        Value::Array(a) => toml_edit::Value::Array(a.iter().map(value).collect::<Array>()),
        Value::Object(o) => {
            let mut t = InlineTable::new();
            for (k, v) in o {
                t.insert(k, value(v));
            }
            toml_edit::Value::InlineTable(t)
        }
        Value::Null => "".into(),
    }
}

fn to_json(item: &Item) -> Value {
    match item {
        Item::Value(v) => value_json(v),
        Item::Table(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_owned(), to_json(v))).collect())
        }
        Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| Value::Object(t.iter().map(|(k, v)| (k.to_owned(), to_json(v))).collect()))
                .collect(),
        ),
        Item::None => Value::Null,
    }
}

fn value_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as V;
    match v {
        V::String(s) => Value::String(s.value().clone()),
        V::Integer(i) => Value::from(*i.value()),
        V::Float(f) => Value::from(*f.value()),
        V::Boolean(b) => Value::Bool(*b.value()),
        V::Datetime(d) => Value::String(d.value().to_string()),
        V::Array(a) => Value::Array(a.iter().map(value_json).collect()),
        V::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_owned(), value_json(v)))
                .collect(),
        ),
    }
}
