//! Typed access to tree values for the readers: each getter either returns the
//! value or records a problem that says what was expected and what was found, and
//! returns `None`, so the caller simply moves on to the next key.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use super::{MAX_NAME_LEN, Text};
use crate::Format;
use crate::error::Problem;
use crate::expand;
use crate::suggest::closest;
use crate::tree::{Entry, Node, Pos, Value};

/// Collects problems while the section readers walk the tree; `format` decides
/// how strict reading is and which words messages use (table or object).
pub(super) struct Reader {
    pub format: Format,
    pub problems: Vec<Problem>,
}

/// A dotted key path, quoting a key the way TOML would when it is not bare, so
/// `servers."a.b"` is not mistaken for `servers.a.b`.
pub(super) fn join(path: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    };
    if path.is_empty() {
        key
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn with_article(word: &str) -> String {
    let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {word}")
}

impl Reader {
    pub(super) fn problem(&mut self, pos: Pos, key: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            line: pos.line,
            column: pos.column,
            key: key.to_owned(),
            message: message.into(),
        });
    }

    pub(super) fn table_word(&self) -> &'static str {
        if self.format == Format::Toml {
            "table"
        } else {
            "object"
        }
    }

    pub(super) fn wrong_type(&mut self, node: &Node, key: &str, expected: &str) {
        let found = node.type_name(self.format);
        self.problem(
            node.pos,
            key,
            format!("expected {expected}, found {}", with_article(found)),
        );
    }

    /// The entries of `node`, or a problem if it is not a table.
    pub(super) fn entries<'n>(&mut self, node: &'n Node, key: &str) -> Option<&'n [Entry]> {
        match &node.value {
            Value::Table(entries) => Some(entries),
            _ => {
                let expected = with_article(self.table_word());
                self.wrong_type(node, key, &expected);
                None
            }
        }
    }

    /// Reports every key of `entries` that is not in `known`, suggesting the nearest
    /// known one. Only corral.toml is strict: JSON configs belong to other tools too,
    /// which add keys of their own.
    pub(super) fn check_keys(&mut self, entries: &[Entry], path: &str, known: &[&str]) {
        if self.format != Format::Toml {
            return;
        }
        for entry in entries {
            if known.contains(&entry.key.as_str()) {
                continue;
            }
            let place = if path.is_empty() {
                "at the top level".to_owned()
            } else {
                format!("in [{path}]")
            };
            let hint = match closest(&entry.key, known) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("expected one of: {}", known.join(", ")),
            };
            self.problem(
                entry.key_pos,
                &join(path, &entry.key),
                format!("unknown key `{}` {place}; {hint}", entry.key),
            );
        }
    }

    pub(super) fn string(&mut self, node: &Node, key: &str) -> Option<String> {
        match &node.value {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.wrong_type(node, key, "a string");
                None
            }
        }
    }

    /// A string that may contain `${…}` substitutions.
    pub(super) fn text(&mut self, node: &Node, key: &str) -> Option<Text> {
        let s = self.string(node, key)?;
        match expand::parse(&s, self.format) {
            Ok(segments) => Some(Text {
                segments,
                pos: node.pos,
                key: key.to_owned(),
            }),
            Err(messages) => {
                for message in messages {
                    self.problem(node.pos, key, message);
                }
                None
            }
        }
    }

    pub(super) fn texts(&mut self, node: &Node, key: &str) -> Vec<Text> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(node, key, "an array of strings");
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.text(item, &format!("{key}[{i}]")))
            .collect()
    }

    /// A table of name → string, e.g. `env` or `headers`; `check_name` explains what
    /// is wrong with a name, if anything.
    pub(super) fn text_map(
        &mut self,
        node: &Node,
        key: &str,
        check_name: fn(&str) -> Option<String>,
    ) -> Vec<(String, Text)> {
        let Some(entries) = self.entries(node, key) else {
            return Vec::new();
        };
        let mut map = Vec::new();
        for entry in entries {
            let entry_key = join(key, &entry.key);
            if let Some(message) = check_name(&entry.key) {
                self.problem(entry.key_pos, &entry_key, message);
            }
            if let Some(text) = self.text(&entry.node, &entry_key) {
                map.push((entry.key.clone(), text));
            }
        }
        map
    }

    pub(super) fn bool(&mut self, node: &Node, key: &str) -> Option<bool> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.wrong_type(node, key, "true or false");
                None
            }
        }
    }

    /// Durations are humantime strings only: a bare number would leave the unit to
    /// guesswork (seconds? milliseconds?).
    pub(super) fn duration(
        &mut self,
        node: &Node,
        key: &str,
        zero_allowed: bool,
    ) -> Option<Duration> {
        const EXAMPLES: &str = r#"write e.g. "30s", "500ms" or "2m""#;
        match &node.value {
            Value::String(s) => match humantime::parse_duration(s.trim()) {
                Ok(d) if d.is_zero() && !zero_allowed => {
                    self.problem(node.pos, key, "must be longer than zero");
                    None
                }
                Ok(d) => Some(d),
                Err(err) => {
                    self.problem(
                        node.pos,
                        key,
                        format!("invalid duration {s:?}: {err}; {EXAMPLES}"),
                    );
                    None
                }
            },
            Value::Integer(Some(n)) => {
                self.problem(
                    node.pos,
                    key,
                    format!(
                        r#"expected a duration string like "30s", found integer {n}; write "{n}s" for seconds"#
                    ),
                );
                None
            }
            _ => {
                self.wrong_type(node, key, r#"a duration string like "30s""#);
                None
            }
        }
    }

    /// A positive count; `zero_hint` says what to do instead of writing 0.
    pub(super) fn count(&mut self, node: &Node, key: &str, zero_hint: &str) -> Option<NonZeroU32> {
        match node.value {
            Value::Integer(Some(n)) if n < 1 => {
                self.problem(node.pos, key, format!("must be at least 1{zero_hint}"));
                None
            }
            Value::Integer(Some(n)) => match u32::try_from(n).ok().and_then(NonZeroU32::new) {
                Some(n) => Some(n),
                None => {
                    self.problem(node.pos, key, format!("{n} is too large"));
                    None
                }
            },
            Value::Integer(None) => {
                self.problem(node.pos, key, "number is too large");
                None
            }
            _ => {
                self.wrong_type(node, key, "a positive integer");
                None
            }
        }
    }

    pub(super) fn choice<T: Copy>(
        &mut self,
        node: &Node,
        key: &str,
        choices: &[(&str, T)],
    ) -> Option<T> {
        let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
        let names = names.join(", ");
        let Value::String(s) = &node.value else {
            self.wrong_type(node, key, &format!("a string (one of {names})"));
            return None;
        };
        match choices.iter().find(|(name, _)| name == s) {
            Some((_, value)) => Some(*value),
            None => {
                self.problem(
                    node.pos,
                    key,
                    format!("unknown value {s:?}; expected one of {names}"),
                );
                None
            }
        }
    }

    pub(super) fn socket_addr(&mut self, node: &Node, key: &str) -> Option<String> {
        let s = self.string(node, key)?;
        if s.parse::<SocketAddr>().is_ok() {
            Some(s)
        } else {
            self.problem(
                node.pos,
                key,
                format!(
                    r#"invalid listen address {s:?}; expected IP:PORT like "127.0.0.1:8080" (port 0 picks a free port)"#
                ),
            );
            None
        }
    }

    /// A regular expression, compiled now so a bad one is reported at load with where in
    /// the pattern it goes wrong. Written as is: no `${…}` expansion (`$` is an anchor).
    pub(super) fn regex(&mut self, node: &Node, key: &str) -> Option<crate::LogPattern> {
        let pattern = self.string(node, key)?;
        if pattern.is_empty() {
            self.problem(
                node.pos,
                key,
                r#"an empty pattern matches every line; write the text that means ready, e.g. "ready in|listening on""#,
            );
            return None;
        }
        if let Err(err) = regex_syntax::Parser::new().parse(&pattern) {
            let (what, offset) = match &err {
                regex_syntax::Error::Parse(e) => (e.kind().to_string(), e.span().start.offset),
                regex_syntax::Error::Translate(e) => (e.kind().to_string(), e.span().start.offset),
                other => (other.to_string(), 0),
            };
            let at = pattern[..offset.min(pattern.len())].chars().count() + 1;
            self.problem(
                node.pos,
                key,
                format!(
                    "invalid regular expression {pattern:?}: {what} at character {at}; \
                     escape characters meant literally with a backslash (in TOML, write \
                     '\\(' in a 'literal string' or \"\\\\(\" in a basic one)"
                ),
            );
            return None;
        }
        match regex::Regex::new(&pattern) {
            Ok(re) => Some(crate::LogPattern(re)),
            Err(err) => {
                self.problem(
                    node.pos,
                    key,
                    format!("invalid regular expression {pattern:?}: {err}; simplify it"),
                );
                None
            }
        }
    }

    /// `HOST:PORT` with a port from 1 to 65535 (`[::1]:80` for IPv6).
    pub(super) fn host_port(&mut self, node: &Node, key: &str) -> Option<String> {
        let s = self.string(node, key)?;
        let valid = s.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty()
                && !host.contains(char::is_whitespace)
                && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if valid {
            Some(s)
        } else {
            self.problem(
                node.pos,
                key,
                format!(
                    r#"expected HOST:PORT like "127.0.0.1:5173", found {s:?} (or write port = 5173 for 127.0.0.1)"#
                ),
            );
            None
        }
    }

    /// A TCP port, 1 to 65535.
    pub(super) fn port(&mut self, node: &Node, key: &str) -> Option<u16> {
        match node.value {
            Value::Integer(Some(n)) => match u16::try_from(n) {
                Ok(p) if p > 0 => Some(p),
                _ => {
                    self.problem(
                        node.pos,
                        key,
                        format!("port {n} is not between 1 and 65535"),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(node, key, "a port number like 5173");
                None
            }
        }
    }

    /// An `http://` URL (readiness probes speak plain HTTP only).
    pub(super) fn http_url(&mut self, node: &Node, key: &str) -> Option<String> {
        let s = self.string(node, key)?;
        let lower = s.to_ascii_lowercase();
        let message = if lower.starts_with("https://") {
            "readiness probes speak plain HTTP only (no TLS); probe a http:// address, or use tcp"
        } else if !lower.starts_with("http://") || s.len() <= "http://".len() {
            r#"expected a URL like "http://127.0.0.1:5173/health""#
        } else {
            return Some(s);
        };
        self.problem(node.pos, key, format!("{message}; found {s:?}"));
        None
    }

    /// A size in bytes: an integer, or a string with a binary unit (`"512KiB"`, `"1MiB"`),
    /// within `min..=max`.
    pub(super) fn size(&mut self, node: &Node, key: &str, min: u64, max: u64) -> Option<u64> {
        const EXAMPLES: &str = r#"write e.g. "256KiB", "1MiB" or a number of bytes"#;
        let bytes = match &node.value {
            Value::Integer(Some(n)) => u64::try_from(*n).ok(),
            Value::String(s) => match parse_size(s) {
                Ok(n) => n,
                Err(message) => {
                    self.problem(
                        node.pos,
                        key,
                        format!("invalid size {s:?}: {message}; {EXAMPLES}"),
                    );
                    return None;
                }
            },
            _ => {
                self.wrong_type(node, key, r#"a size like "256KiB" or a number of bytes"#);
                return None;
            }
        };
        match bytes {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.problem(
                    node.pos,
                    key,
                    format!(
                        "must be between {} and {}",
                        format_size(min),
                        format_size(max)
                    ),
                );
                None
            }
        }
    }

    /// Host names a dev proxy answers besides its own (`allowed_hosts`): each a bare
    /// name or IP as a browser sends it in `Host`, without a port; kept lower case.
    pub(super) fn host_names(&mut self, node: &Node, key: &str) -> Vec<String> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(node, key, "an array of host names");
            return Vec::new();
        };
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            let Some(name) = self.string(item, &item_key) else {
                continue;
            };
            let ok = !name.is_empty()
                && name.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':')
                })
                && (!name.contains(':') || name.starts_with('['));
            if ok {
                names.push(name.to_ascii_lowercase());
            } else {
                self.problem(
                    item.pos,
                    &item_key,
                    format!(
                        "{name:?} is not a host name: write the name a browser puts in the \
                         URL, without scheme or port (e.g. \"myapp.test\")"
                    ),
                );
            }
        }
        names
    }

    /// Tool name globs: kept as written, but an empty pattern is surely a mistake.
    pub(super) fn patterns(&mut self, node: &Node, key: &str) -> Vec<String> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(node, key, "an array of glob patterns");
            return Vec::new();
        };
        let mut patterns = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            match self.string(item, &item_key) {
                Some(p) if p.trim().is_empty() => {
                    self.problem(item.pos, &item_key, "a pattern must not be empty");
                }
                Some(p) => patterns.push(p),
                None => {}
            }
        }
        patterns
    }

    /// Reports a name that cannot be used, explaining why the rule exists.
    pub(super) fn check_name(&mut self, what: &str, entry: &Entry, key: &str) {
        let name = &entry.key;
        let message = if let Some(problem) = name_problem(what, name) {
            problem
        } else if what == "server" && name.contains("__") {
            format!(
                "server name {name:?} must not contain \"__\": Corral names tools \
                 \"<server>__<tool>\", so a \"__\" in the server name would make \
                 that split ambiguous; rename it"
            )
        } else if what == "server" && name == "corral" && !runs_corral_mcp(&entry.node) {
            // An entry that runs `corral mcp` is reported (or skipped) as Corral itself
            // later, with the fix that applies; renaming it would only hide the loop.
            "server name \"corral\" is reserved for Corral's built-in tools \
             (corral__servers, …); rename it"
                .to_owned()
        } else {
            return;
        };
        self.problem(entry.key_pos, key, message);
    }
}

/// Why `name` cannot name a server, process or proxy (`what`), or `None` when it can:
/// 1 to 64 letters, digits, `_` and `-`. The one rule for names from a config file, the
/// command line and agents alike: a name becomes part of tool names, file names, events
/// and terminal output, so it must not carry anything a terminal would act on.
pub fn name_problem(what: &str, name: &str) -> Option<String> {
    if name.is_empty() {
        Some(format!("{what} name must not be empty"))
    } else if name.chars().count() > MAX_NAME_LEN {
        Some(format!(
            "{what} name is {} characters long; the limit is {MAX_NAME_LEN}",
            name.chars().count()
        ))
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Some(format!(
            "{what} name {name:?} may only contain letters, digits, '_' and '-' \
             (it becomes part of tool names, file names and events); rename it"
        ))
    } else {
        None
    }
}

/// A server table whose literal `command` and `args` are `corral … mcp`.
fn runs_corral_mcp(node: &Node) -> bool {
    let string = |n: &Node| match &n.value {
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    let Some(command) = node.get("command").and_then(|e| string(&e.node)) else {
        return false;
    };
    let args: Vec<String> = match node.get("args").map(|e| &e.node.value) {
        Some(Value::Array(items)) => items.iter().filter_map(string).collect(),
        _ => Vec::new(),
    };
    crate::itself::named_corral_mcp(&command, &args)
}

pub(super) fn env_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("environment variable name must not be empty".to_owned())
    } else if name.contains(['=', '\0']) {
        Some(format!(
            "environment variable name {name:?} must not contain '=' or NUL"
        ))
    } else {
        None
    }
}

/// A key of `[servers.NAME.oauth]`.
pub(super) fn oauth_key_problem(name: &str) -> Option<String> {
    const KEYS: [&str; 3] = ["client_id", "client_secret", "scope"];
    (!KEYS.contains(&name)).then(|| {
        format!(
            "unknown OAuth setting {name:?}; the settings are {}",
            KEYS.join(", ")
        )
    })
}

pub(super) fn header_name_problem(name: &str) -> Option<String> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b));
    (!valid).then(|| {
        format!(
            "{name:?} is not a valid HTTP header name (letters, digits and -, no spaces or ':')"
        )
    })
}

/// `"512KiB"` → bytes (`Ok(None)`: too large to count). Units: B, KiB, MiB, GiB (any
/// case); decimal ones (KB, MB) are refused, since which one was meant is a guess.
pub(super) fn parse_size(s: &str) -> Result<Option<u64>, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err("it does not start with a number".into());
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kib" => 10,
        "mib" => 20,
        "gib" => 30,
        "k" | "kb" | "m" | "mb" | "g" | "gb" => {
            return Err(format!(
                "write a binary unit ({}iB) to say 1024-based",
                unit.trim()[..1].to_ascii_uppercase()
            ));
        }
        other => return Err(format!("unknown unit {other:?} (B, KiB, MiB, GiB)")),
    };
    Ok(digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift)))
}

/// Bytes as the largest binary unit that divides them (`262144` → `"256KiB"`).
pub(super) fn format_size(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
}
