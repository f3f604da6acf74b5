//! A small value tree with source positions, the common shape TOML and JSON are
//! parsed into.
//!
//! Serde stops at the first error and forgets where values came from; walking this
//! tree by hand lets the readers report every problem with its line and column, and
//! lets one reader serve all three config dialects.

use crate::Format;

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    /// The start of the file: where problems about the file as a whole point.
    pub const START: Pos = Pos { line: 1, column: 1 };
}

/// Maps byte offsets to positions.
pub(crate) struct LineIndex<'t> {
    text: &'t str,
    line_starts: Vec<usize>,
}

impl<'t> LineIndex<'t> {
    pub fn new(text: &'t str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, line_starts }
    }

    pub fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        // An offset inside a multi-byte character counts as that character.
        let column = self.text[start..]
            .char_indices()
            .take_while(|&(i, _)| start + i < offset)
            .count()
            + 1;
        Pos {
            line: line + 1,
            column,
        }
    }
}

/// A value and where it starts.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub pos: Pos,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    String(String),
    /// `None` when the literal does not fit in an `i64`.
    Integer(Option<i64>),
    Float,
    Bool(bool),
    /// TOML only.
    Datetime,
    /// JSON only.
    Null,
    Array(Vec<Node>),
    Table(Vec<Entry>),
}

/// A key of a table, with where the key itself is written: unknown-key problems and
/// problems about the table as a whole (a missing key) point there.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub node: Node,
}

impl Node {
    /// The type as the file's own language calls it, for "expected X, found Y".
    pub fn type_name(&self, format: Format) -> &'static str {
        let json = format != Format::Toml;
        match &self.value {
            Value::String(_) => "string",
            Value::Integer(_) if json => "number",
            Value::Integer(_) => "integer",
            Value::Float if json => "number",
            Value::Float => "float",
            Value::Bool(_) => "boolean",
            Value::Datetime => "datetime",
            Value::Null => "null",
            Value::Array(_) => "array",
            Value::Table(_) if json => "object",
            Value::Table(_) => "table",
        }
    }

    /// The entry for `key`, if this is a table that has it. JSON allows repeated keys;
    /// the last one wins, as in JavaScript.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        match &self.value {
            Value::Table(entries) => entries.iter().rev().find(|e| e.key == key),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let idx = LineIndex::new("ab\nçd = 1\n");
        assert_eq!(idx.pos(0), Pos { line: 1, column: 1 });
        assert_eq!(idx.pos(3), Pos { line: 2, column: 1 });
        // 'ç' is two bytes; 'd' is the second character.
        assert_eq!(idx.pos(5), Pos { line: 2, column: 2 });
        assert_eq!(idx.pos(100), Pos { line: 3, column: 1 });
    }
}
