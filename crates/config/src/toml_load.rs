//! `corral.toml` text → [`Node`] tree, keeping the position of every key and value.
//!
//! `toml::de::DeTable` is the toml crate's spanned document tree: it parses without
//! serde, so nothing is lost to serde's stop-at-first-error behaviour.

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::error::Problem;
use crate::tree::{Entry, LineIndex, Node, Pos, Value};

/// Parses `text`; a syntax error becomes the one problem reported for the file, since
/// nothing after it can be trusted.
pub(crate) fn parse(text: &str) -> Result<Node, Problem> {
    let lines = LineIndex::new(text);
    match DeTable::parse(text) {
        Ok(doc) => Ok(Node {
            pos: Pos::START,
            value: table(doc.get_ref(), &lines),
        }),
        Err(err) => {
            let pos = err
                .span()
                .map(|span| lines.pos(span.start))
                .unwrap_or(Pos::START);
            Err(Problem {
                line: pos.line,
                column: pos.column,
                key: String::new(),
                message: format!("TOML syntax error: {}", err.message().trim_end()),
            })
        }
    }
}

fn table(t: &DeTable<'_>, lines: &LineIndex<'_>) -> Value {
    let entries = t
        .iter()
        .map(|(key, value)| Entry {
            key: key.get_ref().to_string(),
            key_pos: lines.pos(key.span().start),
            node: node(value, lines),
        })
        .collect();
    Value::Table(entries)
}

fn node(v: &Spanned<DeValue<'_>>, lines: &LineIndex<'_>) -> Node {
    let value = match v.get_ref() {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => Value::Integer(i64::from_str_radix(i.as_str(), i.radix()).ok()),
        DeValue::Float(_) => Value::Float,
        DeValue::Boolean(b) => Value::Bool(*b),
        DeValue::Datetime(_) => Value::Datetime,
        DeValue::Array(items) => Value::Array(items.iter().map(|i| node(i, lines)).collect()),
        DeValue::Table(t) => table(t, lines),
    };
    Node {
        pos: lines.pos(v.span().start),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_keys_carry_positions() {
        let doc = parse("[servers.files]\ncommand = \"npx\"\nmax = 0x10\n").unwrap();
        let files = &doc.get("servers").unwrap().node.get("files").unwrap();
        assert_eq!(
            files.key_pos,
            Pos {
                line: 1,
                column: 10
            }
        );
        let command = files.node.get("command").unwrap();
        assert_eq!(command.key_pos, Pos { line: 2, column: 1 });
        assert_eq!(
            command.node.pos,
            Pos {
                line: 2,
                column: 11
            }
        );
        let max = files.node.get("max").unwrap();
        assert!(matches!(max.node.value, Value::Integer(Some(16))));
    }

    #[test]
    fn syntax_error_is_one_located_problem() {
        let err = parse("[gateway]\nlisten = \n").unwrap_err();
        assert_eq!(err.line, 2, "{err:?}");
        assert!(err.message.starts_with("TOML syntax error"), "{err:?}");
    }
}
