//! The `[alerts]` table reader. User regexes are compiled here once, only to report a
//! bad one at load time with its position and the likely fix; the scanner compiles
//! them again (the config stays plain data).

use super::fields::{Reader, join};
use crate::alerts::{AlertPattern, AlertSettings, AlertSeverity};
use crate::tree::{Node, Value};

const ALERTS_KEYS: &[&str] = &["patterns", "disable", "window", "ring"];
const PATTERN_KEYS: &[&str] = &["regex", "severity", "category", "id"];
const SEVERITY_CHOICES: &[(&str, AlertSeverity)] = &[
    ("error", AlertSeverity::Error),
    ("warning", AlertSeverity::Warning),
];
/// More would only cost memory in the daemon; the ring is for recent alerts.
const MAX_RING: u32 = 100_000;
/// The category of a user pattern that names none.
const DEFAULT_CATEGORY: &str = "custom";

/// Whether `name` is a usable rule id (`dotted` allowed) or category: lowercase ASCII
/// letters, digits, `_` and `-`, so ids stay easy to type in `disable` and in queries.
fn valid_name(name: &str, dotted: bool) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && name.chars().all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '_'
                || c == '-'
                || (dotted && c == '.')
        })
}

/// The first line of a `regex` error that says what is wrong (its Display repeats the
/// pattern and draws a caret over several lines, which a one-line problem cannot hold).
pub(crate) fn regex_error(err: &regex::Error) -> String {
    match err {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or(text.trim())
            .to_owned(),
        other => other.to_string(),
    }
}

impl Reader {
    pub(super) fn alerts(&mut self, node: &Node) -> AlertSettings {
        let mut settings = AlertSettings::default();
        let Some(entries) = self.entries(node, "alerts") else {
            return settings;
        };
        self.check_keys(entries, "alerts", ALERTS_KEYS);
        if let Some(e) = node.get("window")
            && let Some(window) = self.duration(&e.node, "alerts.window", true)
        {
            settings.window = window;
        }
        if let Some(e) = node.get("ring") {
            let hint = "; it is how many recent alerts are kept";
            match self.count(&e.node, "alerts.ring", hint) {
                Some(n) if n.get() > MAX_RING => self.problem(
                    e.node.pos,
                    "alerts.ring",
                    format!("{n} is more than the limit of {MAX_RING} alerts"),
                ),
                Some(n) => settings.ring = n.get() as usize,
                None => {}
            }
        }
        if let Some(e) = node.get("disable") {
            settings.disable = self.alert_disable(&e.node, "alerts.disable");
        }
        if let Some(e) = node.get("patterns") {
            settings.patterns = self.alert_patterns(&e.node, "alerts.patterns");
        }
        settings
    }

    fn alert_disable(&mut self, node: &Node, key: &str) -> Vec<String> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(
                node,
                key,
                r#"an array of rule ids or categories like ["python.traceback", "generic"]"#,
            );
            return Vec::new();
        };
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            let Some(name) = self.string(item, &item_key) else {
                continue;
            };
            if valid_name(&name, true) {
                names.push(name);
            } else {
                self.problem(
                    item.pos,
                    &item_key,
                    format!(
                        "{name:?} is not a rule id or category; they are lowercase, \
                         like \"python.traceback\" or \"generic\""
                    ),
                );
            }
        }
        names
    }

    fn alert_patterns(&mut self, node: &Node, key: &str) -> Vec<AlertPattern> {
        let Value::Array(items) = &node.value else {
            let expected =
                r#"an array of tables like [{ regex = "panic: (?P<msg>.+)", severity = "error" }]"#;
            self.wrong_type(node, key, expected);
            return Vec::new();
        };
        let mut patterns: Vec<AlertPattern> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = format!("{key}[{i}]");
            let Some(entries) = self.entries(item, &path) else {
                continue;
            };
            self.check_keys(entries, &path, PATTERN_KEYS);
            let field = |k: &str| item.get(k).map(|e| (&e.node, join(&path, k)));
            let severity = match field("severity") {
                Some((n, k)) => self.choice(n, &k, SEVERITY_CHOICES),
                None => Some(AlertSeverity::Error),
            };
            let category = match field("category") {
                Some((n, k)) => self.alert_name(n, &k, false, "category", "\"myapp\""),
                None => Some(DEFAULT_CATEGORY.to_owned()),
            };
            let id = match field("id") {
                Some((n, k)) => self.alert_name(n, &k, true, "id", "\"myapp.db_down\""),
                None => Some(format!("{DEFAULT_CATEGORY}.{}", i + 1)),
            };
            if let (Some(id), Some((n, k))) = (&id, field("id"))
                && patterns.iter().any(|p| &p.id == id)
            {
                self.problem(
                    n.pos,
                    &k,
                    format!("id {id:?} is already used by an earlier pattern; ids must be unique"),
                );
            }
            let Some((regex_node, regex_key)) = field("regex") else {
                self.problem(
                    item.pos,
                    &path,
                    r#"missing `regex`: the pattern a line must match, e.g. regex = 'FATAL: (?P<msg>.+)'"#,
                );
                continue;
            };
            let regex =
                self.string(regex_node, &regex_key)
                    .and_then(|r| match regex::Regex::new(&r) {
                        Ok(_) if r.is_empty() => {
                            self.problem(
                                regex_node.pos,
                                &regex_key,
                                "an empty regex matches every line; write the text to look for",
                            );
                            None
                        }
                        Ok(_) => Some(r),
                        Err(err) => {
                            let why = regex_error(&err);
                            self.problem(
                                regex_node.pos,
                                &regex_key,
                                format!(
                                    "invalid regex {r:?}: {why}; it is Rust regex syntax \
                                 (https://docs.rs/regex/latest/regex/#syntax): escape a literal \
                                 ( [ . * + ? with a backslash, and write the pattern in a \
                                 '…' literal string so TOML keeps the backslashes"
                                ),
                            );
                            None
                        }
                    });
            if let (Some(regex), Some(severity), Some(category), Some(id)) =
                (regex, severity, category, id)
            {
                patterns.push(AlertPattern {
                    id,
                    regex,
                    severity,
                    category,
                });
            }
        }
        patterns
    }

    fn alert_name(
        &mut self,
        node: &Node,
        key: &str,
        dotted: bool,
        what: &str,
        example: &str,
    ) -> Option<String> {
        let name = self.string(node, key)?;
        if valid_name(&name, dotted) {
            return Some(name);
        }
        let allowed = if dotted {
            "lowercase letters, digits, '_', '-' and '.'"
        } else {
            "lowercase letters, digits, '_' and '-'"
        };
        self.problem(
            node.pos,
            key,
            format!("{what} {name:?} may only contain {allowed}, e.g. {example}"),
        );
        None
    }
}
