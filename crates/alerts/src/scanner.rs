//! The per-stream state machine: lines in, alerts out.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use regex::Captures;

use crate::clean::clean;
use crate::frames::ThrowSite;
use crate::group::{Context, Group, Kind, Step};
use crate::model::{Alert, Severity, Stream, alert_id};
use crate::reload::{Reload, ReloadPhase, Signal};
use crate::rules::{Action, AlertRules, ReloadRule};
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
    /// Per stream: the error log line (a [`Kind::LogHeader`]) that the open group, a
    /// traceback, followed; one alert with it if the group is confirmed.
    headers: [Option<Group>; 2],
    /// Per stream: an error alert came since the last summary line or reload signal, so
    /// a summary (`compiled with 2 errors`) repeats it ([`Action::Summary`]).
    reported: [bool; 2],
    /// Per stream: the tool whose last build failed, whose next success is not one.
    failed: [Option<&'static str>; 2],
    /// Reload signals not yet taken, oldest first; at most [`MAX_RELOADS`].
    reloads: Vec<Reload>,
}

/// Reload signals kept for [`Scanner::take_reloads`]: a caller that never takes them
/// (or takes them rarely from a tool printing an `hmr update` per save) loses the
/// oldest, not memory.
const MAX_RELOADS: usize = 256;

/// A header waits this long at most for the traceback it may announce (whose lines are
/// written with it, in one record), before [`Scanner::tick`] reports it alone.
const HEADER_IDLE: Duration = Duration::from_millis(100);

/// The kinds of group a log line at error level may announce, whose alert is then the
/// header's too (`ERROR:    Exception in ASGI application` + `Traceback …`).
fn absorbs_header(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::PyTraceback
            | Kind::Java
            | Kind::JavaBare
            | Kind::JsError
            | Kind::Dotnet
            | Kind::Ruby
            | Kind::GoPanic
    )
}

/// Package prefixes of the JVM world: a dotted `…Exception: x` line without frames
/// under them is not reported (a JVM prints frames); others are Python's.
const JVM_PACKAGES: &[&str] = &[
    "java.",
    "javax.",
    "jakarta.",
    "jdk.",
    "sun.",
    "com.",
    "org.",
    "net.",
    "io.",
    "kotlin.",
    "kotlinx.",
    "scala.",
    "android.",
    "androidx.",
    "groovy.",
];

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
            headers: [None, None],
            reported: [false, false],
            failed: [None, None],
            reloads: Vec::new(),
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

    /// The reload signals recognised since the last call, oldest first (at most the
    /// last 256). Cheap when there are none.
    pub fn take_reloads(&mut self) -> Vec<Reload> {
        std::mem::take(&mut self.reloads)
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
        let found = rules.candidates(&scan);
        if let Some(reload) = rules.reload(&scan, found) {
            // Never an alert, nor part of one: to an open group, an unrelated line. The
            // throw-site watch does not see it: another tool printed it, so it is not
            // taken for a throw site's source line, nor does it break a throw site it
            // is printed into (and no signal matches a bare `/app/x.js:12`, which
            // starts one).
            if let Some(group) = &mut self.groups[slot]
                && group.stray()
            {
                self.close(slot, out);
            }
            self.signal(reload, &scan, stream, now);
            return;
        }
        // Every other line goes through the throw-site watch first: an open group's
        // lines too, and the error line that takes the throw site below (it is one of
        // the lines a complete throw site waits through).
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
        let Some((index, caps)) = rules.find(&scan, found) else {
            return;
        };
        let rule = &rules.rules[index];
        let open = self.groups[slot].as_ref().map(|g| g.kind);
        let action = match rule.action {
            // Inside another group (a traceback), an error log line is reported as it
            // comes, and the group goes on.
            Action::Group(Kind::LogHeader) if open.is_some_and(|k| k != Kind::LogHeader) => {
                Action::Line
            }
            action => action,
        };
        match action {
            // A wrapper line (Vite's dependency scan failure) begins something new.
            Action::Ignore => self.close(slot, out),
            // A summary of errors reported already.
            Action::Summary if std::mem::take(&mut self.reported[slot]) => {}
            Action::Line | Action::Summary => {
                // A header before this line is over: reported first, in order.
                if open == Some(Kind::LogHeader) {
                    self.close(slot, out);
                }
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
                self.emit(alert, out);
                if action == Action::Summary {
                    self.reported[slot] = false;
                }
            }
            Action::Group(kind) => {
                let header = if open == Some(Kind::LogHeader) && absorbs_header(kind) {
                    self.groups[slot].take()
                } else {
                    None
                };
                self.close(slot, out);
                match Group::start(kind, index, &caps, stream, now) {
                    Some(mut group) => {
                        if kind == Kind::JsError {
                            group.set_throw_site(self.sites[slot].take());
                        }
                        group.push(&text, limits.max_group_lines, limits.max_line_bytes);
                        self.groups[slot] = Some(group);
                        self.headers[slot] = header;
                    }
                    None => {
                        if let Some(header) = header {
                            self.conclude(header, None, out);
                        }
                    }
                }
            }
        }
    }

    fn signal(&mut self, reload: &ReloadRule, line: &str, stream: Stream, now: SystemTime) {
        let slot = slot(stream);
        // A new build: a summary after it sums up its own errors only.
        self.reported[slot] = false;
        let phase = match reload.signal {
            Signal::Failed => {
                self.failed[slot] = Some(reload.tool);
                return;
            }
            Signal::Phase(phase) => phase,
        };
        if self.failed[slot] == Some(reload.tool) {
            self.failed[slot] = None;
            if phase == ReloadPhase::Succeeded {
                return;
            }
        }
        if self.reloads.len() >= MAX_RELOADS {
            self.reloads.drain(..MAX_RELOADS / 2);
        }
        let max = self.rules.limits.max_message_bytes;
        self.reloads.push(Reload {
            phase,
            tool: reload.tool.to_owned(),
            line: cap(line.trim(), max).into_owned(),
            stream,
            at: now,
        });
    }

    /// Completes every group that has had no line for
    /// [`Limits::group_idle`](crate::Limits): the caller calls this periodically
    /// (e.g. every 250 ms while [`pending`](Self::pending)).
    pub fn tick(&mut self, now: SystemTime, out: &mut Vec<Alert>) {
        let idle = self.rules.limits.group_idle;
        for slot in 0..self.groups.len() {
            let expired = self.groups[slot].as_ref().is_some_and(|g| {
                let idle = if g.kind == Kind::LogHeader {
                    idle.min(HEADER_IDLE)
                } else {
                    idle
                };
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
        let Some(group) = self.groups[slot].take() else {
            return;
        };
        let header = self.headers[slot].take();
        self.conclude(group, header, out);
    }

    /// The alert of a complete group, if it is one; with the error log line that came
    /// before it, if any (reported alone when the group is not an alert).
    fn conclude(&mut self, mut group: Group, header: Option<Group>, out: &mut Vec<Alert>) {
        let rules = Arc::clone(&self.rules);
        let rule = &rules.rules[group.rule];
        let first = group.lines.first().cloned().unwrap_or_default();
        let message = group.message().unwrap_or_else(|| first.trim().to_owned());
        let module_not_found = [
            "Cannot find module",
            "Cannot find package",
            "ERR_MODULE_NOT_FOUND",
        ];
        // A tentative group that was not confirmed is a plain error line, or nothing.
        let id: Option<&str> = match (group.kind, group.confirmed) {
            (Kind::JsError, true) if module_not_found.iter().any(|m| message.contains(m)) => {
                if rules.enabled("node.module_not_found") {
                    Some("node.module_not_found")
                } else {
                    Some(&rule.id)
                }
            }
            (Kind::JsError, false) | (Kind::RustDiag, false)
                if rule.severity == Severity::Error =>
            {
                Some("generic.error_line")
            }
            // A dotted exception line without frames: Python's (a JVM prints frames).
            (Kind::JavaBare, false) if !JVM_PACKAGES.iter().any(|p| message.starts_with(p)) => {
                Some("python.exception")
            }
            (_, false) => None,
            _ => Some(&rule.id),
        };
        let id = id.filter(|&id| id == rule.id || rules.enabled(id));
        // The header begins the group's alert; when the group is none, it is one alone.
        let header = match (id, header) {
            (Some(_), Some(header)) if group.confirmed => Some(header),
            (_, Some(header)) => {
                self.conclude(header, None, out);
                None
            }
            (_, None) => None,
        };
        let Some(id) = id else {
            return;
        };
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
        let mut first_seen = group.first_seen;
        if let Some(header) = header {
            first_seen = header.first_seen;
            lines.splice(0..0, header.lines);
        }
        let alert = self.alert(
            (id, category, rule.severity),
            message,
            context,
            lines,
            group.stream,
            (first_seen, group.last_seen),
        );
        self.emit(alert, out);
    }

    fn emit(&mut self, alert: Alert, out: &mut Vec<Alert>) {
        if alert.severity == Severity::Error {
            self.reported[slot(alert.stream)] = true;
        }
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
