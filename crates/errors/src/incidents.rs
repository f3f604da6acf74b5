//! Incidents: the entries that are one failure joined under their root cause, and each
//! incident's state.
//!
//! # Joining
//!
//! One handler exception is seen from up to five places: the traceback the backend
//! printed, the log line before it, the proxy's failed request, the page's failed
//! fetch and the page's unhandled rejection. They are joined by what each side knows:
//!
//! | symptom | joined to | by |
//! |---|---|---|
//! | a failed request (5xx) | the errors the process behind the proxy printed meanwhile | the process serving the target's port ([`Observation::unit`](crate::Observation::unit)), printed from 50 ms before the request to 1 s after its answer; when that process printed nothing then, the one process that did, closest in time (a dev server that proxies on to the backend) |
//! | a transport error (no answer) | the crash, exit or failed start of a process | the same units, within 5 s either side, or any time while that process is down |
//! | a page's failed fetch | the proxy's failed request | the request id the proxy gave it and the page echoed; else method, path and status, answered within 3 s before the report |
//! | a page's error, rejection or `console.error` | the page's failed fetch | the same page, reported within 3 s of it, before or after (a rejection of the fetch's promise, React logging it again; the fetch's report waits for the response body, so it may come second) |
//!
//! The root is the most telling member: an error a process printed (with a location
//! before without), then a crash or exit, then the proxy's transport error, the failed
//! request, the page's error or rejection, its failed fetch, its `console.error`; ties
//! go to the earliest. The incident's id is the root's entry id, so it is stable as
//! long as the root is.
//!
//! # States
//!
//! Each member of an incident has scopes: its unit (a process's or server's own output,
//! and the unit behind a request or page), its request (method and path), its page. A
//! [`Fix`] of one of them — a restart asked for, a reload or rebuild the tool reported
//! as done, the same request succeeding, the page loaded again — counts when nothing of
//! the incident recurred within its grace ([`crate::FixKind::grace`]) and the grace is
//! over. An incident with a counting fix after its last occurrence is **resolved** (by
//! the first such fix); one seen again after a counting fix is **regressed**; else it is
//! **active**. A source that is down now is active whatever was fixed.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use crate::model::{Fix, Scope, Severity, url_path};
use crate::report::{Entry, Facts, State};

/// Output printed this long before a request came in still belongs to it (the line
/// read a little before the request's start was recorded).
const BEFORE_REQUEST: Duration = Duration::from_millis(50);
/// Output printed this long after a request's answer still belongs to it (Starlette
/// answers 500 before the exception is logged).
const AFTER_ANSWER: Duration = Duration::from_secs(1);
/// A transport error (connection refused, reset) belongs to a crash this close.
const AROUND_CRASH: Duration = Duration::from_secs(5);
/// A page reports a failed fetch within this of the proxy's answer (it batches its
/// reports for up to 250 ms; clocks are the same machine's).
const FETCH_REPORT: Duration = Duration::from_secs(3);
/// A page's error and the failed fetch it comes from are reported within this of each
/// other.
const AFTER_FETCH: Duration = Duration::from_secs(3);

/// How telling an entry is as a root cause: lower is better.
fn priority(e: &Entry) -> u8 {
    match kind(&e.source) {
        Kind::Unit => {
            if e.down || matches!(e.category.as_str(), "crash" | "start_failed" | "exit") {
                2
            } else if e.location.is_some() {
                0
            } else {
                1
            }
        }
        Kind::Proxy if e.category == "transport" => 3,
        Kind::Proxy => 4,
        Kind::Browser => match e.category.as_str() {
            "js" | "rejection" => 5,
            "fetch" => 6,
            _ => 7,
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unit,
    Proxy,
    Browser,
}

fn kind(source: &str) -> Kind {
    if source.starts_with("proxy:") {
        Kind::Proxy
    } else if source == "browser" {
        Kind::Browser
    } else {
        Kind::Unit
    }
}

/// Union-find over entry indices.
struct Sets(Vec<usize>);

impl Sets {
    fn find(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }

    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[b] = a;
        }
    }
}

/// Whether `e` is a request that failed (a status ≥ 500 or no answer) through the proxy.
fn failed_request(e: &Entry) -> bool {
    kind(&e.source) == Kind::Proxy
        && (e.category == "transport" || e.http.as_ref().and_then(|h| h.status) >= Some(500))
}

/// Every time an entry was seen at (each occurrence's first and last).
fn instants(f: &Facts) -> impl Iterator<Item = SystemTime> + '_ {
    f.occurrences.iter().flat_map(|o| [o.first, o.last])
}

fn within(t: SystemTime, lo: SystemTime, hi: SystemTime) -> bool {
    lo <= t && t <= hi
}

/// Gap between `t` and the span `lo..=hi` (zero inside it).
fn distance(t: SystemTime, lo: SystemTime, hi: SystemTime) -> Duration {
    if t < lo {
        lo.duration_since(t).unwrap_or_default()
    } else {
        t.duration_since(hi).unwrap_or_default()
    }
}

/// Joins the entries that are one failure and sets each incident's state: the
/// incidents, each its root with the rest as symptoms.
pub(crate) fn join(
    entries: Vec<Entry>,
    facts: Vec<Facts>,
    fixes: &[Fix],
    now: SystemTime,
) -> Vec<Entry> {
    let mut sets = Sets((0..entries.len()).collect());
    link(&entries, &facts, &mut sets);

    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..entries.len() {
        let root = sets.find(i);
        groups.entry(root).or_default().push(i);
    }
    let mut members: Vec<Vec<usize>> = groups.into_values().collect();
    // The most telling first, then the earliest, then by id.
    for m in &mut members {
        m.sort_by(|&a, &b| {
            let (a, b) = (&entries[a], &entries[b]);
            priority(a)
                .cmp(&priority(b))
                .then(a.first_seen.cmp(&b.first_seen))
                .then_with(|| a.id.cmp(&b.id))
        });
    }
    let states: Vec<State> = members
        .iter()
        .map(|m| state(&entries, &facts, m, fixes, now))
        .collect();

    let mut slots: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    members
        .into_iter()
        .zip(states)
        .map(|(m, state)| {
            let mut root = slots[m[0]].take().expect("each entry is in one incident");
            root.down = m.iter().any(|&i| slots[i].as_ref().is_some_and(|e| e.down)) || root.down;
            root.severity = m
                .iter()
                .filter_map(|&i| slots[i].as_ref().map(|e| e.severity))
                .fold(root.severity, Severity::max);
            root.symptoms = m[1..]
                .iter()
                .map(|&i| {
                    let mut s = slots[i].take().expect("each entry is in one incident");
                    s.state = state.clone();
                    s
                })
                .collect();
            root.state = state;
            root
        })
        .collect()
}

/// Links the entries of one failure (see the module docs).
fn link(entries: &[Entry], facts: &[Facts], sets: &mut Sets) {
    // Errors of each unit, to find what a process printed while a request failed; and
    // its deaths (crashes, exits, failed starts), which alone explain a transport error.
    let mut printed: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut died: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if kind(&e.source) == Kind::Unit && e.severity == Severity::Error {
            printed.entry(e.source.as_str()).or_default().push(i);
            if priority(e) == 2 {
                died.entry(e.source.as_str()).or_default().push(i);
            }
        }
    }
    let mut by_request_id: HashMap<&str, usize> = HashMap::new();

    for (i, e) in entries.iter().enumerate() {
        if !failed_request(e) {
            continue;
        }
        let transport = e.category == "transport";
        let (before, after) = if transport {
            (AROUND_CRASH, AROUND_CRASH)
        } else {
            (BEFORE_REQUEST, AFTER_ANSWER)
        };
        for o in &facts[i].occurrences {
            let Some(x) = &o.exchange else { continue };
            if let Some(id) = &x.id {
                by_request_id.insert(id.as_str(), i);
            }
            let lo = x.start.checked_sub(before).unwrap_or(x.start);
            let hi = x.end + after;
            // A transport error (nobody answered) is explained by a unit that died, not
            // by whatever it printed while alive.
            let candidates = if transport { &died } else { &printed };
            let in_window = |j: usize| {
                let e = &entries[j];
                instants(&facts[j]).any(|t| within(t, lo, hi))
                    || (transport && e.down && e.first_seen <= x.end)
            };
            // The unit serving the target first; else the one unit that printed an
            // error closest to the request.
            let owner = facts[i].units.iter().find(|u| {
                candidates
                    .get(u.as_str())
                    .is_some_and(|js| js.iter().any(|&j| in_window(j)))
            });
            let unit = owner.map(String::as_str).or_else(|| {
                candidates
                    .iter()
                    .filter_map(|(unit, js)| {
                        js.iter()
                            .filter(|&&j| in_window(j))
                            .flat_map(|&j| instants(&facts[j]))
                            .filter(|&t| within(t, lo, hi))
                            .map(|t| distance(t, x.start, x.end))
                            .min()
                            .map(|d| (d, *unit))
                    })
                    .min()
                    .map(|(_, unit)| unit)
            });
            if let Some(js) = unit.and_then(|u| candidates.get(u)) {
                for &j in js {
                    if in_window(j) {
                        sets.join(i, j);
                    }
                }
            }
        }
    }

    // A page's failed fetch → the proxy's failed request.
    let requests: Vec<usize> = (0..entries.len())
        .filter(|&i| failed_request(&entries[i]))
        .collect();
    for (i, e) in entries.iter().enumerate() {
        if e.source != "browser" || e.category != "fetch" {
            continue;
        }
        for o in &facts[i].occurrences {
            let exact = o
                .exchange
                .as_ref()
                .and_then(|x| x.id.as_deref())
                .and_then(|id| by_request_id.get(id));
            if let Some(&j) = exact {
                sets.join(j, i);
                continue;
            }
            let Some(h) = &e.http else { continue };
            let lo = o.last.checked_sub(FETCH_REPORT).unwrap_or(o.last);
            let same = requests.iter().copied().filter(|&j| {
                entries[j].http.as_ref().is_some_and(|r| {
                    r.method.eq_ignore_ascii_case(&h.method)
                        && url_path(&r.path) == url_path(&h.path)
                        && (h.status.is_none() || r.status == h.status)
                })
            });
            let nearest = same
                .filter_map(|j| {
                    facts[j]
                        .occurrences
                        .iter()
                        .filter_map(|r| r.exchange.as_ref())
                        .filter(|x| within(x.end, lo, o.last + AFTER_ANSWER))
                        .map(|x| distance(x.end, o.last, o.last))
                        .min()
                        .map(|d| (d, j))
                })
                .min();
            if let Some((_, j)) = nearest {
                sets.join(j, i);
            }
        }
    }

    // A page's error, rejection or console.error → its failed fetch just before.
    let fetches: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].source == "browser" && entries[i].category == "fetch")
        .collect();
    for (i, e) in entries.iter().enumerate() {
        if e.source != "browser" || e.category == "fetch" {
            continue;
        }
        for o in &facts[i].occurrences {
            let Some(page) = &o.page else { continue };
            let lo = o.first.checked_sub(AFTER_FETCH).unwrap_or(o.first);
            let nearest = fetches
                .iter()
                .filter_map(|&j| {
                    facts[j]
                        .occurrences
                        .iter()
                        .filter(|f| f.page.as_ref() == Some(page))
                        // The fetch's report may come after the error's: it waits for
                        // the response's body, the error does not.
                        .filter(|f| within(f.last, lo, o.last + AFTER_FETCH))
                        .map(|f| distance(f.last, o.first, o.first))
                        .min()
                        .map(|d| (d, j))
                })
                .min();
            if let Some((_, j)) = nearest {
                sets.join(j, i);
            }
        }
    }
}

/// What fixes can reach an entry (see the module docs).
fn scopes(e: &Entry, f: &Facts) -> HashSet<Scope> {
    let mut out = HashSet::new();
    if kind(&e.source) == Kind::Unit {
        out.insert(Scope::Unit(e.source.clone()));
    }
    for unit in &f.units {
        out.insert(Scope::Unit(unit.clone()));
    }
    if let Some(h) = &e.http {
        out.insert(Scope::Request {
            method: h.method.to_ascii_uppercase(),
            path: url_path(&h.path).to_owned(),
        });
    }
    for o in &f.occurrences {
        if let Some(page) = &o.page {
            out.insert(Scope::Page(url_path(page).to_owned()));
        }
    }
    out
}

/// An incident's state from its members' occurrences and the fixes of their scopes.
fn state(
    entries: &[Entry],
    facts: &[Facts],
    members: &[usize],
    fixes: &[Fix],
    now: SystemTime,
) -> State {
    if members.iter().any(|&i| entries[i].down) {
        return State::Active;
    }
    let mut seen: Vec<SystemTime> = members.iter().flat_map(|&i| instants(&facts[i])).collect();
    seen.sort();
    let (Some(&first), Some(&last)) = (seen.first(), seen.last()) else {
        return State::Active;
    };
    // Most incidents have no fix after they began: nothing more to look at.
    if !fixes.iter().any(|f| f.at > first) {
        return State::Active;
    }
    let mut scope = HashSet::new();
    for &i in members {
        scope.extend(scopes(&entries[i], &facts[i]));
    }
    let counts = |fix: &Fix| {
        let until = fix.at + fix.kind.grace();
        now >= until && !seen.iter().any(|&t| t > fix.at && t <= until)
    };
    let mut relevant: Vec<&Fix> = fixes
        .iter()
        .filter(|f| f.at > first && scope.contains(&f.scope) && counts(f))
        .collect();
    relevant.sort_by_key(|f| f.at);
    if let Some(fix) = relevant.iter().find(|f| f.at > last) {
        return State::Resolved {
            fix: (*fix).clone(),
        };
    }
    match relevant.last() {
        Some(fix) => State::Regressed {
            fix: (*fix).clone(),
        },
        None => State::Active,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::model::{Exchange, FixKind, Http, Observation, SourceInfo};
    use crate::query::{Query, Status};
    use crate::report::report;

    use super::*;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_millis(ms)
    }

    fn traceback(ms: u64, unit: &str) -> Observation {
        Observation::new(
            unit,
            "python.traceback",
            Severity::Error,
            "KeyError: 'x'",
            at(ms),
        )
        .location("app.py:3")
    }

    fn failed_request(start: u64, end: u64, unit: Option<&str>) -> Observation {
        let o = Observation::new(
            "proxy:web",
            "http",
            Severity::Error,
            "GET /api → 500",
            at(start),
        )
        .http(Http::new("GET", "/api", Some(500)))
        .exchange(Exchange {
            id: Some(format!("r{start}")),
            start: at(start),
            end: at(end),
        });
        match unit {
            Some(u) => o.unit(u),
            None => o,
        }
    }

    fn fix(scope: Scope, kind: FixKind, ms: u64) -> Fix {
        Fix {
            scope,
            kind,
            at: at(ms),
        }
    }

    fn all(obs: Vec<Observation>, fixes: &[Fix], now: u64) -> Vec<Entry> {
        let q = Query {
            status: Status::All,
            ..Query::default()
        };
        report(obs, &[], fixes, &q, at(now)).entries
    }

    fn shape(entries: &[Entry]) -> Vec<(String, Vec<String>)> {
        entries
            .iter()
            .map(|e| {
                (
                    e.source.clone(),
                    e.symptoms.iter().map(|s| s.source.clone()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_failed_request_joins_what_its_server_printed_meanwhile() {
        type Case<'a> = (&'a str, Vec<Observation>, Vec<(&'a str, Vec<&'a str>)>);
        let cases: &[Case] = &[
            (
                "the target's owner printed it during the request",
                vec![
                    failed_request(0, 300, Some("process:api")),
                    traceback(250, "process:api"),
                ],
                vec![("process:api", vec!["proxy:web"])],
            ),
            (
                "after the answer, within a second (Starlette answers first)",
                vec![
                    failed_request(0, 300, Some("process:api")),
                    traceback(1200, "process:api"),
                ],
                vec![("process:api", vec!["proxy:web"])],
            ),
            (
                "too late: two incidents",
                vec![
                    failed_request(0, 300, Some("process:api")),
                    traceback(1400, "process:api"),
                ],
                vec![("process:api", vec![]), ("proxy:web", vec![])],
            ),
            (
                "the owner (a dev server) printed nothing: the backend that did",
                vec![
                    failed_request(0, 300, Some("process:web")),
                    traceback(200, "process:api"),
                ],
                vec![("process:api", vec!["proxy:web"])],
            ),
            (
                "the owner printed something: another unit's error is not taken",
                vec![
                    failed_request(0, 300, Some("process:web")),
                    traceback(200, "process:api"),
                    Observation::new(
                        "process:web",
                        "generic.error_log",
                        Severity::Error,
                        "ERROR proxy",
                        at(100),
                    ),
                ],
                vec![("process:api", vec![]), ("process:web", vec!["proxy:web"])],
            ),
        ];
        for (what, obs, want) in cases {
            let got = shape(&all(obs.clone(), &[], 10_000));
            let want: Vec<(String, Vec<String>)> = want
                .iter()
                .map(|(r, s)| (r.to_string(), s.iter().map(|s| s.to_string()).collect()))
                .collect();
            let mut got_sorted = got.clone();
            got_sorted.sort();
            let mut want_sorted = want.clone();
            want_sorted.sort();
            assert_eq!(got_sorted, want_sorted, "{what}");
        }
    }

    #[test]
    fn a_pages_error_joins_the_failed_fetch_reported_near_it() {
        let fetch = |ms| {
            Observation::new(
                "browser",
                "fetch",
                Severity::Error,
                "GET /api → 500",
                at(ms),
            )
            .http(Http::new("GET", "/api", Some(500)))
            .page("http://app.localhost/users")
        };
        let error = |ms, page: &str| {
            Observation::new("browser", "js", Severity::Error, "Error: no stats", at(ms)).page(page)
        };
        let users = "http://app.localhost/users";
        let cases = [
            // Reported after the fetch, or before it (the fetch's report waits for the
            // body): one incident, the page's error its root.
            (vec![fetch(1_000), error(1_200, users)], 1),
            (vec![fetch(1_300), error(1_100, users)], 1),
            // Too far apart, or another page: two.
            (vec![fetch(1_000), error(5_000, users)], 2),
            (vec![fetch(1_000), error(1_100, "http://app.localhost/")], 2),
        ];
        for (i, (obs, want)) in cases.into_iter().enumerate() {
            let got = all(obs, &[], 10_000);
            assert_eq!(got.len(), want, "case {i}: {:?}", shape(&got));
        }
    }

    #[test]
    fn a_transport_error_joins_the_crash_of_the_unit_behind_it() {
        let down = Observation::new("process:api", "crash", Severity::Error, "exited 1", at(0));
        let refused = Observation::new(
            "proxy:web",
            "transport",
            Severity::Error,
            "GET /api → connection refused",
            at(60_000),
        )
        .http(Http::new("GET", "/api", None))
        .exchange(Exchange {
            id: None,
            start: at(60_000),
            end: at(60_001),
        })
        .unit("process:api");
        let r = report(
            vec![refused],
            &[SourceInfo::new("process:api").down(down)],
            &[],
            &Query::default(),
            at(61_000),
        );
        assert_eq!(
            shape(&r.entries),
            [("process:api".into(), vec!["proxy:web".into()])]
        );
        assert!(r.entries[0].down);
        // A traceback printed nearby by a unit that did not die explains nothing.
        let refused = Observation::new(
            "proxy:web",
            "transport",
            Severity::Error,
            "GET /api → connection refused",
            at(1_000),
        )
        .http(Http::new("GET", "/api", None))
        .exchange(Exchange {
            id: None,
            start: at(1_000),
            end: at(1_001),
        });
        let got = shape(&all(
            vec![refused, traceback(1_200, "process:api")],
            &[],
            9_000,
        ));
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn states_follow_fixes_their_grace_and_recurrences() {
        let unit = || Scope::Unit("process:api".into());
        let reload = |ms| fix(unit(), FixKind::Reloaded("uvicorn".into()), ms);
        let state = |seen: &[u64], fixes: &[Fix], now: u64| {
            let obs = seen
                .iter()
                .map(|&ms| traceback(ms, "process:api"))
                .collect();
            all(obs, fixes, now)[0].state.as_str()
        };
        // No fix: active.
        assert_eq!(state(&[0], &[], 60_000), "active");
        // A restart after the last occurrence: resolved at once.
        assert_eq!(
            state(&[0], &[fix(unit(), FixKind::Restarted, 500)], 600),
            "resolved"
        );
        // A reload counts once its grace (2 s) is over with nothing recurring.
        assert_eq!(state(&[0], &[reload(1_000)], 2_500), "active");
        assert_eq!(state(&[0], &[reload(1_000)], 3_000), "resolved");
        // Recurring within the grace: the reload did not fix it.
        assert_eq!(state(&[0, 2_000], &[reload(1_000)], 60_000), "active");
        // Recurring after it counted: regressed; a later fix resolves it again.
        assert_eq!(state(&[0, 5_000], &[reload(1_000)], 60_000), "regressed");
        assert_eq!(
            state(&[0, 5_000], &[reload(1_000), reload(9_000)], 60_000),
            "resolved"
        );
        // A fix of another unit, or before the first occurrence, changes nothing.
        let other = fix(Scope::Unit("process:web".into()), FixKind::Restarted, 500);
        assert_eq!(state(&[1_000], &[other, reload(0)], 60_000), "active");
    }

    #[test]
    fn a_symptom_fixed_fixes_the_incident_and_down_stays_active() {
        // The request went through after the failure: the joined traceback is resolved.
        let ok = fix(
            Scope::Request {
                method: "GET".into(),
                path: "/api".into(),
            },
            FixKind::RequestOk,
            5_000,
        );
        let entries = all(
            vec![
                failed_request(0, 300, Some("process:api")),
                traceback(250, "process:api"),
            ],
            std::slice::from_ref(&ok),
            6_000,
        );
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].state, State::Resolved { fix: ok.clone() });
        // A source down now is active whatever fixed it.
        let down = Observation::new("process:api", "crash", Severity::Error, "exited 1", at(0));
        let r = report(
            vec![],
            &[SourceInfo::new("process:api").down(down)],
            &[fix(
                Scope::Unit("process:api".into()),
                FixKind::Restarted,
                1_000,
            )],
            &Query::default(),
            at(9_000),
        );
        assert_eq!(r.entries[0].state, State::Active);
    }

    #[test]
    fn a_page_reload_resolves_only_after_the_page_ran_without_it() {
        let js = |ms| {
            Observation::new("browser", "js", Severity::Error, "TypeError: x", at(ms))
                .page("http://app.localhost/users?tab=2")
        };
        let reload = fix(Scope::Page("/users".into()), FixKind::PageReloaded, 10_000);
        let state = |seen: Vec<Observation>, now| {
            all(seen, std::slice::from_ref(&reload), now)[0]
                .state
                .as_str()
        };
        assert_eq!(state(vec![js(0)], 12_000), "active");
        assert_eq!(state(vec![js(0)], 15_000), "resolved");
        assert_eq!(state(vec![js(0), js(10_400)], 60_000), "active");
        // Another page's reload does not count.
        let other = fix(
            Scope::Page("/settings".into()),
            FixKind::PageReloaded,
            10_000,
        );
        assert_eq!(
            all(vec![js(0)], &[other], 60_000)[0].state.as_str(),
            "active"
        );
    }
}
