//! The `[alerts]` table: how Corral scans dev-process and server output for errors.
//!
//! Plain data only. The rules themselves (and the compiled regexes) live in the
//! `corral-alerts` crate, which depends on this one; here user regexes are only checked
//! to compile, so `corral check` reports a bad one with its position.

use std::time::Duration;

/// How long a repeat of the same alert is counted instead of reported again.
pub const DEFAULT_ALERT_WINDOW: Duration = Duration::from_secs(60);
/// How many alerts the daemon keeps for queries.
pub const DEFAULT_ALERT_RING: usize = 200;

/// `[alerts]` in corral.toml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    /// User patterns, in the order written; they are tried before the built-in rules.
    pub patterns: Vec<AlertPattern>,
    /// Built-in rule ids (`python.traceback`) or whole categories (`generic`) to turn
    /// off, as written. Unknown names are reported by `corral_alerts::AlertRules`,
    /// which knows the built-in rules.
    pub disable: Vec<String>,
    /// Dedup window: a repeat within it bumps a count instead of raising a new alert.
    /// Zero turns dedup off.
    pub window: Duration,
    /// How many alerts are kept for queries (the oldest go first).
    pub ring: usize,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            patterns: Vec::new(),
            disable: Vec::new(),
            window: DEFAULT_ALERT_WINDOW,
            ring: DEFAULT_ALERT_RING,
        }
    }
}

/// One `[[alerts.patterns]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertPattern {
    /// The rule id alerts carry: as written, or `custom.N` (N counting patterns from 1).
    pub id: String,
    /// A Rust `regex` that compiled when the config was loaded. Named groups `msg`,
    /// `file`, `line` and `col` become the alert's message and location.
    pub regex: String,
    pub severity: AlertSeverity,
    /// As written, or `custom`.
    pub category: String,
}

/// How bad a matched line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlertSeverity {
    #[default]
    Error,
    Warning,
}
