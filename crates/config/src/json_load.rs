//! `.mcp.json` / VS Code `mcp.json` text → [`Node`] tree with positions.
//!
//! serde_json keeps no positions, and problems in these files need a line number like
//! any other. So serde_json only *validates* the text (and decodes strings and
//! numbers), and a small walker over the now known-valid text records where each key
//! and value starts. VS Code's files are JSONC (comments, trailing commas); those are
//! blanked out first, byte for byte, so every offset still points into the original.

use crate::Format;
use crate::error::Problem;
use crate::tree::{Entry, LineIndex, Node, Value};

/// Parses `text` and tells which dialect it is: a file with `mcpServers` is
/// `.mcp.json`/Claude Desktop, otherwise one with `servers` is VS Code. A file with
/// neither is reported by the reader; [`Format::McpJson`] is assumed for it.
pub(crate) fn parse(text: &str) -> Result<(Node, Format), Problem> {
    let clean = strip_jsonc(text);
    if let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(&clean) {
        return Err(Problem {
            line: err.line().max(1),
            column: err.column().max(1),
            key: String::new(),
            message: format!("JSON syntax error: {}", strip_location(&err.to_string())),
        });
    }
    let lines = LineIndex::new(text);
    let mut walker = Walker {
        text: &clean,
        bytes: clean.as_bytes(),
        at: 0,
        lines: &lines,
    };
    let root = walker.value();
    let format = if root.get("mcpServers").is_some() || root.get("servers").is_none() {
        Format::McpJson
    } else {
        Format::VsCode
    };
    Ok((root, format))
}

/// serde_json appends " at line L column C", which the problem already carries.
fn strip_location(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |i| &message[..i])
}

/// Blanks `//` and `/* */` comments and trailing commas with spaces, keeping byte
/// offsets and newlines, and leaving strings alone.
fn strip_jsonc(text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    let mut i = 0;
    // Offsets of the last two significant (non-blank) bytes before `i`. A comma is
    // trailing if `}` or `]` follows it and a value precedes it: `{,}` stays invalid.
    let (mut last, mut before_last): (Option<usize>, Option<usize>) = (None, None);
    while i < b.len() {
        let start = i;
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    b[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                for byte in &mut b[i..end] {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
                i = end;
                continue;
            }
            b'}' | b']' => {
                let comma = last.filter(|&l| b[l] == b',');
                let after_value = before_last.is_some_and(|p| !matches!(b[p], b'{' | b'[' | b','));
                if let (Some(comma), true) = (comma, after_value) {
                    b[comma] = b' ';
                    last = before_last;
                }
            }
            c if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            _ => {}
        }
        (before_last, last) = (last, Some(start));
        i += 1;
    }
    // Only whole comments (which start and end at ASCII bytes) and commas were
    // replaced, so the bytes are still UTF-8.
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Walks text that serde_json has already accepted, so it can assume well-formed input
/// and needs no error handling of its own.
struct Walker<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    lines: &'a LineIndex<'a>,
}

impl Walker<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Node {
        self.skip_ws();
        let start = self.at;
        let value = match self.bytes.get(start) {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Value::String(self.string()),
            Some(b't') => self.literal(4, Value::Bool(true)),
            Some(b'f') => self.literal(5, Value::Bool(false)),
            Some(b'n') => self.literal(4, Value::Null),
            _ => self.number(),
        };
        Node {
            pos: self.lines.pos(start),
            value,
        }
    }

    fn literal(&mut self, len: usize, value: Value) -> Value {
        self.at += len;
        value
    }

    fn number(&mut self) -> Value {
        let start = self.at;
        while self.at < self.bytes.len()
            && matches!(
                self.bytes[self.at],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.at += 1;
        }
        let literal = &self.text[start..self.at];
        if literal.contains(['.', 'e', 'E']) {
            Value::Float
        } else {
            Value::Integer(literal.parse().ok())
        }
    }

    fn string(&mut self) -> String {
        let start = self.at;
        self.at += 1;
        while self.at < self.bytes.len() && self.bytes[self.at] != b'"' {
            self.at += if self.bytes[self.at] == b'\\' { 2 } else { 1 };
        }
        self.at += 1;
        serde_json::from_str(&self.text[start..self.at.min(self.text.len())]).unwrap_or_default()
    }

    fn array(&mut self) -> Value {
        self.at += 1; // [
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.bytes.get(self.at) {
                Some(b']') | None => break,
                Some(b',') => self.at += 1,
                Some(_) => items.push(self.value()),
            }
        }
        self.at += 1;
        Value::Array(items)
    }

    fn object(&mut self) -> Value {
        self.at += 1; // {
        let mut entries = Vec::new();
        loop {
            self.skip_ws();
            match self.bytes.get(self.at) {
                Some(b'}') | None => break,
                Some(b',') => self.at += 1,
                Some(_) => {
                    let key_pos = self.lines.pos(self.at);
                    let key = self.string();
                    self.skip_ws();
                    self.at += 1; // :
                    let node = self.value();
                    entries.push(Entry { key, key_pos, node });
                }
            }
        }
        self.at += 1;
        Value::Table(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Pos;

    #[test]
    fn keys_and_values_carry_positions() {
        let text = "{\n  \"mcpServers\": {\n    \"files\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", 3]\n    }\n  }\n}\n";
        let (root, format) = parse(text).unwrap();
        assert_eq!(format, Format::McpJson);
        let files = root.get("mcpServers").unwrap().node.get("files").unwrap();
        assert_eq!(files.key_pos, Pos { line: 3, column: 5 });
        let command = files.node.get("command").unwrap();
        assert_eq!(command.key_pos, Pos { line: 4, column: 7 });
        assert_eq!(
            command.node.pos,
            Pos {
                line: 4,
                column: 18
            }
        );
        let Value::Array(args) = &files.node.get("args").unwrap().node.value else {
            panic!("args is an array");
        };
        assert!(matches!(&args[0].value, Value::String(s) if s == "-y"));
        assert!(matches!(args[1].value, Value::Integer(Some(3))));
        assert_eq!(
            args[1].pos,
            Pos {
                line: 5,
                column: 22
            }
        );
    }

    #[test]
    fn jsonc_comments_and_trailing_commas_are_accepted() {
        let text =
            "// VS Code\n{ /* c */ \"servers\": { \"a\": { \"url\": \"http://x//y\", }, },\n}";
        let (root, format) = parse(text).unwrap();
        assert_eq!(format, Format::VsCode);
        let url = root.get("servers").unwrap().node.get("a").unwrap();
        let url = url.node.get("url").unwrap();
        assert!(matches!(&url.node.value, Value::String(s) if s == "http://x//y"));
        assert_eq!(
            url.key_pos,
            Pos {
                line: 2,
                column: 31
            }
        );
    }

    #[test]
    fn escaped_strings_are_decoded() {
        let (root, _) = parse(r#"{"mcpServers": {"a\"b": {"command": "x\\y\u00e9"}}}"#).unwrap();
        let server = root.get("mcpServers").unwrap().node.get("a\"b").unwrap();
        let command = server.node.get("command").unwrap();
        assert!(matches!(&command.node.value, Value::String(s) if s == "x\\yé"));
    }

    #[test]
    fn syntax_error_is_one_located_problem() {
        let err = parse("{\n  \"mcpServers\": {\n    \"a\": }\n}").unwrap_err();
        assert_eq!(err.line, 3, "{err:?}");
        assert!(err.message.starts_with("JSON syntax error: "), "{err:?}");
        assert!(!err.message.contains(" at line "), "{err:?}");
    }
}
