//! The per-stream state machine: lines in, alerts out.

use std::sync::Arc;
use std::time::SystemTime;

use regex::Captures;

use crate::clean::clean;
use crate::group::{Group, Kind, Step};
use crate::model::{Alert, Location, Severity, Stream, alert_id};
use crate::rules::{Action, AlertRules};
use crate::{cap, frames};

/// Recognises alerts in one source's output.
///
/// Make one per drain task, that is per (source, stream): it then needs no lock, and
/// a traceback on stderr is never mixed with stdout. Feeding both streams of a source
/// to one scanner also works (each stream has its own open group), for a caller that
/// reads them in one task.
#[derive(Debug)]
pub struct Scanner {
    rules: Arc<AlertRules>,
    source: String,
    /// The open group of each stream, indexed by [`Stream`].
    groups: [Option<Group>; 2],
}

fn slot(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

impl Scanner {
    /// `source` names who prints the lines, e.g. `process:web` or `server:files`; it is
    /// part of every alert and of its id.
    pub fn new(rules: Arc<AlertRules>, source: impl Into<String>) -> Self {
        Scanner {
            rules,
            source: source.into(),
            groups: [None, None],
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether a group is open: the caller should [`tick`](Self::tick) until it is not.
    pub fn pending(&self) -> bool {
        self.groups.iter().any(Option::is_some)
    }

    /// Scans one line (with or without its line ending) printed at `now`, appending any
    /// alert it completes to `out`. Most lines complete none and cost one pass of the
    /// prefilter with no allocation.
    pub fn feed(&mut self, line: &str, stream: Stream, now: SystemTime, out: &mut Vec<Alert>) {
        let rules = Arc::clone(&self.rules);
        let limits = rules.limits;
        let text = clean(line);
        let scan = cap(&text, limits.max_scan_bytes);
        let slot = slot(stream);
        if let Some(group) = &mut self.groups[slot] {
            let step = group.offer(&scan, &rules.frames);
            match step {
                Step::Take | Step::TakeEnd => {
                    group.push(&text, limits.max_group_lines, limits.max_line_bytes);
                    group.last_seen = now;
                    if step == Step::TakeEnd || group.span >= limits.max_group_span {
                        self.close(slot, out);
                    }
                    return;
                }
                Step::Skip => return,
                Step::Stray => {
                    if group.stray() {
                        self.close(slot, out);
                    }
                }
                Step::End => self.close(slot, out),
            }
        }
        let Some((index, caps)) = rules.find(&scan) else {
            return;
        };
        let rule = &rules.rules[index];
        match rule.action {
            Action::Line => {
                let message = line_message(&caps, &scan);
                let location = frames::location(&caps);
                let lines = vec![cap(&text, limits.max_line_bytes).into_owned()];
                let alert = self.alert(
                    (&rule.id, &rule.category, rule.severity),
                    message,
                    location,
                    lines,
                    stream,
                    (now, now),
                );
                out.push(alert);
            }
            Action::Group(kind) => {
                self.close(slot, out);
                if let Some(mut group) = Group::start(kind, index, &caps, stream, now) {
                    group.push(&text, limits.max_group_lines, limits.max_line_bytes);
                    self.groups[slot] = Some(group);
                }
            }
        }
    }

    /// Completes every group that has had no line for
    /// [`Limits::group_idle`](crate::Limits): the caller calls this periodically
    /// (e.g. every 250 ms while [`pending`](Self::pending)).
    pub fn tick(&mut self, now: SystemTime, out: &mut Vec<Alert>) {
        let idle = self.rules.limits.group_idle;
        for slot in 0..self.groups.len() {
            let expired = self.groups[slot].as_ref().is_some_and(|g| {
                now.duration_since(g.last_seen)
                    .is_ok_and(|quiet| quiet >= idle)
            });
            if expired {
                self.close(slot, out);
            }
        }
    }

    /// Completes every open group: at EOF, when the process exits.
    pub fn finish(&mut self, out: &mut Vec<Alert>) {
        for slot in 0..self.groups.len() {
            self.close(slot, out);
        }
    }

    fn close(&mut self, slot: usize, out: &mut Vec<Alert>) {
        let Some(group) = self.groups[slot].take() else {
            return;
        };
        let rules = Arc::clone(&self.rules);
        let rule = &rules.rules[group.rule];
        let header = group.lines.first().cloned().unwrap_or_default();
        let message = group.message().unwrap_or_else(|| header.trim().to_owned());
        let module_not_found = [
            "Cannot find module",
            "Cannot find package",
            "ERR_MODULE_NOT_FOUND",
        ];
        // A tentative group that was not confirmed is a plain error line, or nothing.
        let id: &str = match (group.kind, group.confirmed) {
            (Kind::JsError, true) if module_not_found.iter().any(|m| message.contains(m)) => {
                if rules.enabled("node.module_not_found") {
                    "node.module_not_found"
                } else {
                    &rule.id
                }
            }
            (Kind::JsError, false) | (Kind::RustDiag, false)
                if rule.severity == Severity::Error =>
            {
                "generic.error_line"
            }
            (_, false) => return,
            _ => &rule.id,
        };
        if id != rule.id && !rules.enabled(id) {
            return;
        }
        let category = crate::rules::category_of(id);
        let location = if group.confirmed {
            group.location()
        } else {
            None
        };
        let mut lines = group.lines;
        if group.omitted > 0 {
            lines.pop();
            lines.push(format!("[… {} more lines]", group.omitted + 1));
        }
        let alert = self.alert(
            (id, category, rule.severity),
            message,
            location,
            lines,
            group.stream,
            (group.first_seen, group.last_seen),
        );
        out.push(alert);
    }

    fn alert(
        &self,
        (rule, category, severity): (&str, &str, Severity),
        message: String,
        location: Option<Location>,
        lines: Vec<String>,
        stream: Stream,
        (first_seen, last_seen): (SystemTime, SystemTime),
    ) -> Alert {
        let message = cap(&message, self.rules.limits.max_message_bytes).into_owned();
        Alert {
            id: alert_id(&self.source, rule, &message, location.as_ref()),
            source: self.source.clone(),
            rule: rule.to_owned(),
            category: category.to_owned(),
            severity,
            message,
            location,
            lines,
            stream,
            count: 1,
            first_seen,
            last_seen,
        }
    }
}

/// A one-line alert's message: its `msg` group, else the whole line.
fn line_message(caps: &Captures<'_>, line: &str) -> String {
    ["msg", "m2"]
        .iter()
        .filter_map(|name| caps.name(name))
        .map(|m| m.as_str().trim())
        .find(|m| !m.is_empty())
        .unwrap_or(line.trim())
        .to_owned()
}
