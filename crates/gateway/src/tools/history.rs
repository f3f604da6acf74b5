//! `get_errors` over the journal: what went wrong before this daemon started (a query's
//! `since` reaches back across restarts), and the whole answer when no daemon runs
//! (`corral errors` reads the journal and starts nothing).
//!
//! The journal (`.corral/events.jsonl`, rotated to `.1`) holds an event for each new
//! alert (`alert`: rule, message, location), each page error (`browser.error`), each
//! failed request (`proxy.request_failed`, `proxy.error`, rate-limited per endpoint),
//! and each crash, exit and failed start of a server or process. They become
//! observations as live state would give them, at the event's time. A daemon's start
//! restarted everything: it is a [`FixKind::Restarted`] fix of every unit the journal
//! names, so what was broken before it is resolved, and listed with `status` resolved
//! or all.

use corral_errors::{
    Exchange, Fix, FixKind, Http, Observation, Scope, Severity, SourceInfo, TextFrom,
};
use corral_events::{Event, Kind};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::SystemTime;

/// The last `n` events of the journal at `path` (and its rotated predecessor when the
/// current file has fewer), oldest first. Lines that do not parse are skipped.
pub fn journal_tail(path: &Path, n: usize) -> Vec<Event> {
    let mut events = read_tail(path, n);
    if events.len() < n {
        let mut old = path.to_owned().into_os_string();
        old.push(".1");
        let mut earlier = read_tail(Path::new(&old), n - events.len());
        earlier.append(&mut events);
        events = earlier;
    }
    events
}

fn read_tail(path: &Path, n: usize) -> Vec<Event> {
    // The last 4 MiB hold far more lines than are ever asked for.
    let text = super::tail_of_file(path).unwrap_or_default();
    let mut events: Vec<Event> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let skip = events.len().saturating_sub(n);
    events.drain(..skip);
    events
}

/// Events of the journal read for one answer at most.
pub const MAX_EVENTS: usize = 50_000;

/// What the journal says, as `get_errors` takes it.
#[derive(Default)]
pub struct History {
    pub observations: Vec<Observation>,
    pub fixes: Vec<Fix>,
    /// The units and proxies the journal names (none of them down: the journal cannot
    /// say what is down now).
    pub sources: Vec<SourceInfo>,
}

/// The journal's events before `before` (all when `None`) as observations and fixes;
/// locations inside `root` relative to it.
pub fn from_journal(events: &[Event], before: Option<SystemTime>, root: Option<&Path>) -> History {
    let mut h = History::default();
    let mut units: BTreeSet<String> = BTreeSet::new();
    let mut sources: Vec<String> = Vec::new();
    let mut starts: Vec<SystemTime> = Vec::new();
    for ev in events {
        let Ok(at) = humantime::parse_rfc3339_weak(&ev.ts) else {
            continue;
        };
        if before.is_some_and(|b| at >= b) {
            break;
        }
        let str_of = |key: &str| ev.str(key).unwrap_or_default().to_owned();
        let obs = match ev.kind() {
            Some(Kind::DaemonStarted) => {
                starts.push(at);
                None
            }
            Some(Kind::Alert) => {
                let severity = match ev.str("severity") {
                    Some("warning") => Severity::Warning,
                    _ => Severity::Error,
                };
                let mut o = Observation::new(
                    ev.source.clone(),
                    str_of("rule"),
                    severity,
                    str_of("message"),
                    at,
                );
                if let Some(loc) = ev.str("location") {
                    o = o.location(relative(loc, root));
                }
                Some(o)
            }
            Some(Kind::BrowserError) => {
                let (category, severity) =
                    super::errors::browser_category(ev.str("error_kind").unwrap_or(""));
                let mut o = Observation::new("browser", category, severity, str_of("message"), at)
                    .text_from(TextFrom::Page);
                if let Some(loc) = ev.str("location").filter(|l| !l.is_empty()) {
                    o = o.location(loc);
                }
                if let Some(page) = ev.str("page").filter(|p| !p.is_empty()) {
                    o = o.context("page", page).page(page);
                }
                if category == "fetch"
                    && let Some(http) = super::errors::failed_fetch(&str_of("message"))
                {
                    o = o.http(http);
                }
                let count = ev.data.get("count").and_then(|c| c.as_u64()).unwrap_or(1);
                Some(o.repeated(count, at))
            }
            Some(Kind::ProxyRequestFailed) => {
                let path = corral_errors::url_path(&str_of("url")).to_owned();
                let status = ev
                    .data
                    .get("status")
                    .and_then(|s| s.as_u64())
                    .unwrap_or(500) as u16;
                // Emitted as the answer ended.
                let took = ev
                    .data
                    .get("total_ms")
                    .and_then(|t| t.as_f64())
                    .unwrap_or(0.0);
                let start = at
                    .checked_sub(std::time::Duration::from_secs_f64(took.max(0.0) / 1000.0))
                    .unwrap_or(at);
                let method = str_of("method");
                let why = ev
                    .str("message")
                    .map_or_else(|| format!("status {status}"), str::to_owned);
                Some(
                    Observation::new(
                        ev.source.clone(),
                        "http",
                        Severity::Error,
                        format!("{method} {path} → {status}: {why}"),
                        at,
                    )
                    .text_from(TextFrom::Http)
                    .http(Http::new(method, path, Some(status)))
                    .exchange(Exchange {
                        id: None,
                        start,
                        end: at,
                    }),
                )
            }
            Some(Kind::ProxyError) if ev.str("method").is_some() => {
                let path = corral_errors::url_path(&str_of("url")).to_owned();
                let method = str_of("method");
                Some(
                    Observation::new(
                        ev.source.clone(),
                        "transport",
                        Severity::Error,
                        format!("{method} {path} → {}", str_of("error")),
                        at,
                    )
                    .text_from(TextFrom::Http)
                    .http(Http::new(method, path, None)),
                )
            }
            Some(Kind::ServerCrashed | Kind::ProcessCrashed) => Some(unit_event(ev, "crash", at)),
            Some(Kind::ServerStartFailed | Kind::ProcessStartFailed) => {
                Some(unit_event(ev, "start_failed", at))
            }
            Some(Kind::ProcessExited)
                if ev.data.get("exit_code").and_then(|c| c.as_i64()) != Some(0) =>
            {
                Some(unit_event(ev, "exit", at))
            }
            _ => None,
        };
        let Some(o) = obs else { continue };
        if o.source.starts_with("server:") || o.source.starts_with("process:") {
            units.insert(o.source.clone());
        }
        if !sources.contains(&o.source) {
            sources.push(o.source.clone());
        }
        h.observations.push(o);
    }
    // This daemon's start restarted every unit too.
    starts.extend(before);
    for at in starts {
        h.fixes.extend(units.iter().map(|unit| Fix {
            scope: Scope::Unit(unit.clone()),
            kind: FixKind::Restarted,
            at,
        }));
    }
    h.sources = sources.into_iter().map(SourceInfo::new).collect();
    h
}

/// A crash, failed start or exit of a server or process: its reason (Corral's words,
/// which may quote the unit).
fn unit_event(ev: &Event, category: &str, at: SystemTime) -> Observation {
    let why = ev
        .str("reason")
        .or_else(|| ev.str("error"))
        .map_or_else(|| ev.kind.clone(), str::to_owned);
    let mut o = Observation::new(ev.source.clone(), category, Severity::Error, why, at);
    if let Some(code) = ev.data.get("exit_code").and_then(|c| c.as_i64()) {
        o = o.context("exit", format!("code {code}"));
    } else if let Some(sig) = ev.str("signal_name") {
        o = o.context("exit", sig.to_owned());
    }
    o
}

/// `file:line[:col]` relative to `root` when inside it.
fn relative(location: &str, root: Option<&Path>) -> String {
    root.and_then(|r| {
        let prefix = r.to_str()?;
        let rest = location.strip_prefix(prefix)?;
        rest.strip_prefix('/').map(str::to_owned)
    })
    .unwrap_or_else(|| location.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_errors::{Query, Status, report};
    use corral_events::Source;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn event(kind: Kind, source: Source, secs: u64, fields: &[(&str, serde_json::Value)]) -> Event {
        let mut ev = Event::new(kind, source);
        ev.ts = corral_events::rfc3339(at(secs));
        for (k, v) in fields {
            ev = ev.with(k, v.clone());
        }
        ev
    }

    #[test]
    fn a_journal_gives_the_errors_of_past_runs_resolved_by_the_next_start() {
        use serde_json::json;
        let events = vec![
            event(Kind::DaemonStarted, Source::Corral, 0, &[]),
            event(
                Kind::Alert,
                Source::Process("api".into()),
                10,
                &[
                    ("rule", json!("python.traceback")),
                    ("severity", json!("error")),
                    ("message", json!("KeyError: 'owner'")),
                    ("location", json!("/p/backend/app.py:29")),
                ],
            ),
            event(
                Kind::ProxyRequestFailed,
                Source::Proxy("web".into()),
                10,
                &[
                    ("method", json!("GET")),
                    ("url", json!("/api/stats?x=1")),
                    ("status", json!(500)),
                ],
            ),
            event(
                Kind::ProcessCrashed,
                Source::Process("worker".into()),
                20,
                &[
                    ("reason", json!("exited with code 1")),
                    ("exit_code", json!(1)),
                ],
            ),
            event(Kind::DaemonStarted, Source::Corral, 30, &[]),
            event(
                Kind::Alert,
                Source::Process("api".into()),
                40,
                &[
                    ("rule", json!("generic.error_log")),
                    ("message", json!("ERROR now")),
                ],
            ),
        ];
        // Before the second start (this daemon's): it resolves what came before it,
        // the failed request with the traceback printed meanwhile.
        let h = from_journal(&events, Some(at(30)), Some(Path::new("/p")));
        assert_eq!(h.observations.len(), 3);
        assert_eq!(
            h.observations[0].location.as_deref(),
            Some("backend/app.py:29")
        );
        assert_eq!(
            h.observations[1].message,
            "GET /api/stats → 500: status 500"
        );
        let q = Query {
            status: Status::All,
            ..Query::default()
        };
        let r = report(h.observations, &h.sources, &h.fixes, &q, at(60));
        let shape: Vec<(&str, usize, &str)> = r
            .entries
            .iter()
            .map(|e| (e.message.as_str(), e.symptoms.len(), e.state.as_str()))
            .collect();
        assert_eq!(
            shape,
            [
                ("exited with code 1", 0, "resolved"),
                ("KeyError: 'owner'", 1, "resolved")
            ]
        );
        // The whole journal, no daemon now: the second start resolved what came before
        // it, and what came after is open.
        let h = from_journal(&events, None, Some(Path::new("/p")));
        let r = report(h.observations, &h.sources, &h.fixes, &q, at(60));
        let states: Vec<(&str, &str)> = r
            .entries
            .iter()
            .map(|e| (e.message.as_str(), e.state.as_str()))
            .collect();
        assert!(states.contains(&("ERROR now", "active")), "{states:?}");
        assert!(
            states.contains(&("KeyError: 'owner'", "resolved")),
            "{states:?}"
        );
        assert!(
            states.contains(&("exited with code 1", "resolved")),
            "{states:?}"
        );
    }
}
