//! Observations in, report out: window, noise, dedup, ranking, limit.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::model::{Detail, Exchange, Fix, Http, Observation, Severity, SourceInfo, TextFrom};
use crate::noise::NoiseFilter;
use crate::query::{Query, Status};

/// The stable id of an entry: [`corral_alerts::stable_id`] of its source, category,
/// message and location (nothing for a missing one), the same as an alert's id, so an
/// alert listed by `get_errors` (its rule as the category) keeps the id it has
/// everywhere else, across calls, runs and toolchains ("a1b2c3d4 is gone now").
pub fn entry_id(source: &str, category: &str, message: &str, location: Option<&str>) -> String {
    let mut parts = vec![source, category, message];
    parts.extend(location);
    corral_alerts::stable_id(&parts)
}

/// One distinct problem: every observation with the same source, category, message
/// and location, folded. The entries of one failure are one incident: the root cause's
/// entry, its symptoms folded under it ([`Entry::symptoms`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// See [`entry_id`]. An incident's id is its root cause's.
    pub id: String,
    pub source: String,
    pub category: String,
    /// The worst of the folded observations.
    pub severity: Severity,
    pub message: String,
    pub location: Option<String>,
    /// Of the most recent observation.
    pub context: Vec<(String, String)>,
    /// Who wrote the text (the same for every observation folded: it follows from the
    /// source and category).
    pub text_from: TextFrom,
    /// Of the most recent observation.
    pub http: Option<Http>,
    /// The sum of the observations' counts.
    pub count: u64,
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    /// The source is down right now and this is why.
    pub down: bool,
    /// The raw records of the folded observations, oldest first (`null`s left out).
    pub raw: Vec<serde_json::Value>,
    /// Of the most recent observation.
    pub detail: Detail,
    /// Of the incident (a symptom's is its incident's).
    pub state: State,
    /// The other entries of the same failure, most telling first (empty for a
    /// symptom).
    pub symptoms: Vec<Entry>,
}

/// Where an incident stands, like an error tracker's issue.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Seen, and nothing fixed it since.
    Active,
    /// Seen again after `fix` had resolved it.
    Regressed { fix: Fix },
    /// Not seen since `fix`.
    Resolved { fix: Fix },
}

impl State {
    /// `active`, `regressed` or `resolved`.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Active => "active",
            State::Regressed { .. } => "regressed",
            State::Resolved { .. } => "resolved",
        }
    }

    fn open(&self) -> bool {
        !matches!(self, State::Resolved { .. })
    }
}

impl Entry {
    /// The error's class when the message starts with one (`TypeError: …`,
    /// `Uncaught ValueError: …`, `panic: …`), and the rest of the message; `None`
    /// when it does not (then the message is its own title).
    pub fn class(&self) -> Option<(&str, &str)> {
        split_class(&self.message)
    }
}

fn split_class(message: &str) -> Option<(&str, &str)> {
    let m = message
        .strip_prefix("Uncaught (in promise) ")
        .or_else(|| message.strip_prefix("Uncaught "))
        .unwrap_or(message);
    let (head, rest) = m.split_once(": ")?;
    let rest = rest.trim();
    let is_name = head.len() <= 80
        && head.starts_with(|c: char| c.is_ascii_alphabetic())
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | ':'));
    let is_class = head == "panic"
        || [
            "Error",
            "Exception",
            "Warning",
            "Exit",
            "Interrupt",
            "Fault",
        ]
        .iter()
        .any(|suffix| head.ends_with(suffix));
    (is_name && is_class && !rest.is_empty()).then_some((head, rest))
}

/// What is broken right now. Render with [`Report::text`], [`Report::colored`] or
/// [`Report::json`].
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The incidents listed (each one's root cause, its symptoms under it), ranked:
    /// down sources first, then errors before warnings, then regressed before active,
    /// then most recent first, then by id.
    pub entries: Vec<Entry>,
    /// Distinct incidents the status asked for, errors and warnings (before
    /// `include_warnings` and the limit, so these are the true totals).
    pub errors: usize,
    pub warnings: usize,
    /// Incidents resolved (in the window), listed or not.
    pub resolved: usize,
    /// Incidents resolved after the query's `last_call`; `None` without one.
    pub resolved_since_last_call: Option<usize>,
    pub status: Status,
    /// The sources looked at: the `sources` given, then any other source an
    /// observation named, in that order, each only if the query's source filter
    /// admits it.
    pub consulted: Vec<String>,
    /// Sources that could not be consulted and why, e.g. `("proxy", "needs the
    /// daemon")`. [`report`] leaves it empty: the caller sets it.
    pub unavailable: Vec<(String, String)>,
    /// The query's `since`: what was last seen before it is left out.
    pub since: Option<SystemTime>,
    /// Occurrences (sums of counts) in the window hidden as noise.
    pub hidden: u64,
    /// The same by reason ([`NoiseFilter::REASONS`](crate::NoiseFilter::REASONS)
    /// order), only the reasons that hid something.
    pub hidden_by: Vec<(&'static str, u64)>,
    /// Warnings left out because the query's `include_warnings` is off.
    pub warnings_not_shown: usize,
    /// The query left warnings out: the header counts only errors.
    pub warnings_off: bool,
    /// Incidents beyond the limit.
    pub truncated: usize,
    /// The text lists each incident's reduced stack (the query's `verbose`).
    pub verbose: bool,
    /// When the report was made; ages in the text are relative to it.
    pub now: SystemTime,
}

/// Builds the report:
///
/// 1. Source filter: observations and down sources the query's filter does not admit
///    are left out (not counted anywhere).
/// 2. Noise: the query's [`NoiseFilter`](crate::NoiseFilter) hides observations (not
///    down ones), counted in [`Report::hidden`].
/// 3. Dedup by (source, category, message, location): counts summed, first seen the
///    earliest, last seen the latest, severity the worst, context and http of the
///    latest, raw records of all.
/// 4. Incidents ([`crate::incidents`]): entries that are one failure are joined, the
///    root cause first; each incident's state follows from its occurrences and the
///    `fixes`.
/// 5. Window: an incident is in when it was last seen at or after the query's
///    `since`; a down source's always.
/// 6. Status (a down incident is open), rank (see [`Report::entries`]), warnings if
///    `include_warnings` is off, then the limit. Down incidents survive the last two
///    (they are first, so the limit only grows when more sources are down than it
///    allows).
pub fn report(
    observations: Vec<Observation>,
    sources: &[SourceInfo],
    fixes: &[Fix],
    query: &Query,
    now: SystemTime,
) -> Report {
    let wanted = |source: &str| query.source.as_ref().is_none_or(|f| f.matches(source));

    let mut consulted: Vec<String> = Vec::new();
    for info in sources {
        if wanted(&info.source) && !consulted.contains(&info.source) {
            consulted.push(info.source.clone());
        }
    }
    for obs in &observations {
        if wanted(&obs.source) && !consulted.contains(&obs.source) {
            consulted.push(obs.source.clone());
        }
    }

    // Every source's observations take part in joining (a browser error under a
    // backend's traceback), the source filter applies to incidents by their root.
    let mut hidden_by: Vec<(&'static str, u64)> = Vec::new();
    let mut kept: Vec<(Observation, bool)> = Vec::new();
    for obs in observations {
        if let Some(reason) = query.noise.reason(&obs) {
            if wanted(&obs.source) {
                match hidden_by.iter_mut().find(|(r, _)| *r == reason) {
                    Some((_, n)) => *n += obs.count.max(1),
                    None => hidden_by.push((reason, obs.count.max(1))),
                }
            }
            continue;
        }
        kept.push((obs, false));
    }
    for info in sources {
        if let Some(down) = &info.down {
            kept.push((down.clone(), true));
        }
    }
    // Oldest first, so that folding leaves the latest context and raw records in order.
    kept.sort_by_key(|(obs, _)| obs.last_seen);

    type Key = (String, String, String, Option<String>);
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut facts: Vec<Facts> = Vec::new();
    for (mut obs, down) in kept {
        let key = (
            obs.source.clone(),
            obs.category.clone(),
            obs.message.clone(),
            obs.location.clone(),
        );
        let count = obs.count.max(1);
        let occurrence = Occurrence {
            first: obs.first_seen.min(obs.last_seen),
            last: obs.last_seen,
            exchange: obs.exchange.take(),
            page: obs.page.take(),
        };
        let i = match index.get(&key) {
            Some(&i) => {
                let e = &mut entries[i];
                e.count += count;
                e.first_seen = e.first_seen.min(obs.first_seen);
                e.last_seen = e.last_seen.max(obs.last_seen);
                e.severity = e.severity.max(obs.severity);
                e.context = obs.context;
                e.http = obs.http;
                e.detail = obs.detail;
                e.down |= down;
                if !obs.raw.is_null() {
                    e.raw.push(obs.raw);
                }
                i
            }
            None => {
                index.insert(key, entries.len());
                facts.push(Facts::default());
                entries.push(Entry {
                    id: entry_id(
                        &obs.source,
                        &obs.category,
                        &obs.message,
                        obs.location.as_deref(),
                    ),
                    source: obs.source,
                    category: obs.category,
                    severity: obs.severity,
                    message: obs.message,
                    location: obs.location,
                    context: obs.context,
                    text_from: obs.text_from,
                    http: obs.http,
                    count,
                    first_seen: occurrence.first,
                    last_seen: obs.last_seen,
                    down,
                    raw: if obs.raw.is_null() {
                        Vec::new()
                    } else {
                        vec![obs.raw]
                    },
                    detail: obs.detail,
                    state: State::Active,
                    symptoms: Vec::new(),
                });
                entries.len() - 1
            }
        };
        let f = &mut facts[i];
        f.units.extend(obs.unit);
        f.occurrences.push(occurrence);
    }

    let incidents = crate::incidents::join(entries, facts, fixes, now);

    hidden_by.sort_by_key(|(reason, _)| NoiseFilter::REASONS.iter().position(|r| r == reason));
    let hidden = hidden_by.iter().map(|(_, n)| n).sum();

    let mut entries: Vec<Entry> = incidents
        .into_iter()
        .filter(|e| wanted(&e.source) || e.symptoms.iter().any(|s| wanted(&s.source)))
        .filter(|e| e.down || query.since.is_none_or(|since| last_seen(e) >= since))
        .collect();
    let resolved_at = |e: &Entry| match &e.state {
        State::Resolved { fix } => Some(fix.at + fix.kind.grace()),
        _ => None,
    };
    let resolved = entries.iter().filter(|e| resolved_at(e).is_some()).count();
    let resolved_since_last_call = query.last_call.map(|last| {
        entries
            .iter()
            .filter(|e| resolved_at(e).is_some_and(|at| at > last))
            .count()
    });
    entries.retain(|e| match query.status {
        Status::Open => e.state.open(),
        Status::Resolved => !e.state.open(),
        Status::All => true,
    });

    let errors = entries
        .iter()
        .filter(|e| e.severity == Severity::Error)
        .count();
    let warnings = entries.len() - errors;
    rank(&mut entries);

    let before = entries.len();
    if !query.include_warnings {
        entries.retain(|e| e.down || e.severity == Severity::Error);
    }
    let warnings_not_shown = before - entries.len();
    let downs = entries.iter().filter(|e| e.down).count();
    let keep = query.limit.max(downs);
    let truncated = entries.len().saturating_sub(keep);
    entries.truncate(keep);

    Report {
        entries,
        errors,
        warnings,
        resolved,
        resolved_since_last_call,
        status: query.status,
        consulted,
        unavailable: Vec::new(),
        since: query.since,
        hidden,
        hidden_by,
        warnings_not_shown,
        warnings_off: !query.include_warnings,
        truncated,
        verbose: query.verbose,
        now,
    }
}

/// When an incident was last seen: its root's or a symptom's, the latest.
pub(crate) fn last_seen(e: &Entry) -> SystemTime {
    e.symptoms
        .iter()
        .map(|s| s.last_seen)
        .fold(e.last_seen, SystemTime::max)
}

/// What joining needs to know of an entry beyond what it shows.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// Each folded observation's times, request and page.
    pub occurrences: Vec<Occurrence>,
    /// The units behind it ([`Observation::unit`]).
    pub units: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct Occurrence {
    pub first: SystemTime,
    pub last: SystemTime,
    pub exchange: Option<Exchange>,
    pub page: Option<String>,
}

/// Down first, then errors before warnings, then regressed before active before
/// resolved, then most recent first, then by id (so equal entries come out in the same
/// order every time).
pub(crate) fn rank(entries: &mut [Entry]) {
    let state = |e: &Entry| match e.state {
        State::Regressed { .. } => 0,
        State::Active => 1,
        State::Resolved { .. } => 2,
    };
    entries.sort_by(|a, b| {
        b.down
            .cmp(&a.down)
            .then(b.severity.cmp(&a.severity))
            .then(state(a).cmp(&state(b)))
            .then(last_seen(b).cmp(&last_seen(a)))
            .then_with(|| a.id.cmp(&b.id))
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    #[test]
    fn entry_id_is_pinned() {
        // Pinned: ids are shown to agents and must never change. This is also what
        // corral_alerts::alert_id gives for the same four strings.
        assert_eq!(
            entry_id(
                "process:web",
                "python.traceback",
                "ValueError: x",
                Some("a.py:1")
            ),
            "e33d725a"
        );
        assert_eq!(entry_id("browser", "js", "TypeError: y", None), "010fa347");
    }

    #[test]
    fn entry_id_depends_on_every_part_and_their_boundaries() {
        let base = entry_id("a", "b", "c", Some("d"));
        assert_eq!(base, entry_id("a", "b", "c", Some("d")));
        assert_eq!(base.len(), 8);
        assert!(base.bytes().all(|b| b.is_ascii_hexdigit()));
        for other in [
            entry_id("x", "b", "c", Some("d")),
            entry_id("a", "x", "c", Some("d")),
            entry_id("a", "b", "x", Some("d")),
            entry_id("a", "b", "c", Some("x")),
            entry_id("a", "b", "c", None),
            entry_id("ab", "", "c", Some("d")),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn dedup_sums_counts_and_spans_times() {
        let obs = |secs, count| {
            Observation::new("process:web", "exit", Severity::Error, "exited 1", at(secs))
                .repeated(count, at(secs.saturating_sub(5)))
                .context("attempt", secs.to_string())
                .raw(serde_json::json!({ "at": secs }))
        };
        let r = report(
            vec![obs(50, 2), obs(10, 1), obs(30, 4)],
            &[],
            &[],
            &Query::default(),
            at(60),
        );
        assert_eq!(r.entries.len(), 1);
        let e = &r.entries[0];
        assert_eq!(e.count, 7);
        assert_eq!(e.first_seen, at(5));
        assert_eq!(e.last_seen, at(50));
        assert_eq!(e.context, vec![("attempt".into(), "50".into())]);
        assert_eq!(
            e.raw,
            vec![
                serde_json::json!({ "at": 10 }),
                serde_json::json!({ "at": 30 }),
                serde_json::json!({ "at": 50 })
            ]
        );
        assert_eq!((r.errors, r.warnings), (1, 0));
    }

    #[test]
    fn dedup_keeps_different_locations_apart() {
        let obs = |loc: &str| {
            Observation::new("browser", "js", Severity::Error, "TypeError: x", at(1)).location(loc)
        };
        let r = report(
            vec![obs("a.ts:1"), obs("b.ts:1"), obs("a.ts:1")],
            &[],
            &[],
            &Query::default(),
            at(2),
        );
        assert_eq!(r.entries.len(), 2);
        assert_eq!(r.entries.iter().map(|e| e.count).sum::<u64>(), 3);
    }

    #[test]
    fn ranking_puts_down_then_errors_then_recent_then_id() {
        let obs = |msg: &str, sev, secs| Observation::new("process:a", "c", sev, msg, at(secs));
        let down = Observation::new("server:s", "crash", Severity::Error, "died", at(1));
        let r = report(
            vec![
                obs("old error", Severity::Error, 10),
                obs("new warning", Severity::Warning, 40),
                obs("new error", Severity::Error, 30),
                obs("tie b", Severity::Error, 20),
                obs("tie a", Severity::Error, 20),
            ],
            &[SourceInfo::new("server:s").down(down)],
            &[],
            &Query::default(),
            at(50),
        );
        let order: Vec<&str> = r.entries.iter().map(|e| e.message.as_str()).collect();
        // Equal in everything but the id: the smaller id first.
        let tie_first = if entry_id("process:a", "c", "tie a", None)
            < entry_id("process:a", "c", "tie b", None)
        {
            ["tie a", "tie b"]
        } else {
            ["tie b", "tie a"]
        };
        assert_eq!(
            order,
            vec![
                "died",
                "new error",
                tie_first[0],
                tie_first[1],
                "old error",
                "new warning"
            ]
        );
    }

    #[test]
    fn class_splits_error_kinds_only() {
        let split = split_class;
        assert_eq!(
            split("TypeError: Cannot read properties of null"),
            Some(("TypeError", "Cannot read properties of null"))
        );
        assert_eq!(
            split("Uncaught (in promise) Error: Request failed"),
            Some(("Error", "Request failed"))
        );
        assert_eq!(
            split("json.decoder.JSONDecodeError: Expecting value"),
            Some(("json.decoder.JSONDecodeError", "Expecting value"))
        );
        assert_eq!(
            split("panic: runtime error"),
            Some(("panic", "runtime error"))
        );
        assert_eq!(split("GET /api/users → 500"), None);
        assert_eq!(split("note: something happened"), None);
        assert_eq!(split("ValueError:"), None);
        assert_eq!(split("Some Error: with spaces"), None);
    }
}
