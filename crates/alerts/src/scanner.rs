//! The per-stream state machine: lines in, alerts out.

use std::sync::Arc;
use std::time::SystemTime;

use regex::Captures;

use crate::clean::clean;
use crate::frames::ThrowSite;
use crate::group::{Context, Group, Kind, Step};
use crate::model::{Alert, Severity, Stream, alert_id};
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
    /// Each stream's watch for Node's throw site, printed before its error line.
    sites: [ThrowSite; 2],
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
            sites: Default::default(),
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether a group is open (or the lines before one may be coming: Node's throw
    /// site): the caller should feed every line and [`tick`](Self::tick) until it is not.
    pub fn pending(&self) -> bool {
        self.groups.iter().any(Option::is_some) || self.sites.iter().any(ThrowSite::armed)
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
        self.sites[slot].observe(&scan, now);
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
                let context = Context {
                    location: frames::location(&caps),
                    ..Context::default()
                };
                let lines = vec![cap(&text, limits.max_line_bytes).into_owned()];
                let alert = self.alert(
                    (&rule.id, &rule.category, rule.severity),
                    message,
                    context,
                    lines,
                    stream,
                    (now, now),
                );
                out.push(alert);
            }
            Action::Group(kind) => {
                self.close(slot, out);
                if let Some(mut group) = Group::start(kind, index, &caps, stream, now) {
                    if kind == Kind::JsError {
                        group.set_throw_site(self.sites[slot].take());
                    }
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
            self.sites[slot].expire(now, idle);
        }
    }

    /// Completes every open group: at EOF, when the process exits.
    pub fn finish(&mut self, out: &mut Vec<Alert>) {
        for slot in 0..self.groups.len() {
            self.close(slot, out);
            self.sites[slot].reset();
        }
    }

    fn close(&mut self, slot: usize, out: &mut Vec<Alert>) {
        let Some(mut group) = self.groups[slot].take() else {
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
        let context = if group.confirmed {
            group.conclude()
        } else {
            Context::default()
        };
        let mut lines = group.lines;
        if group.omitted > 0 {
            lines.pop();
            lines.push(format!("[… {} more lines]", group.omitted + 1));
        }
        let alert = self.alert(
            (id, category, rule.severity),
            message,
            context,
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
        context: Context,
        lines: Vec<String>,
        stream: Stream,
        (first_seen, last_seen): (SystemTime, SystemTime),
    ) -> Alert {
        let limits = &self.rules.limits;
        let message = cap(&message, limits.max_message_bytes).into_owned();
        let Context {
            location,
            function,
            code,
            cause,
            frames,
        } = context;
        Alert {
            // The rest of the context stays out of the id: an alert's id must not move
            // when what it carries beside its message and location grows.
            id: alert_id(&self.source, rule, &message, location.as_ref()),
            source: self.source.clone(),
            rule: rule.to_owned(),
            category: category.to_owned(),
            severity,
            message,
            location,
            function,
            code,
            cause: cause.map(|c| cap(&c, limits.max_message_bytes).into_owned()),
            frames: frames
                .into_iter()
                .map(|f| cap(&f, limits.max_line_bytes).into_owned())
                .collect(),
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
