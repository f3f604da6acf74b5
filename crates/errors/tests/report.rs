//! The product text: a fixed set of recorded observations across every source, with a
//! fixed `now`, rendered for each kind of query. Every snapshot under `snapshots/` is
//! what an agent reads; review changes to them as such.

use std::time::SystemTime;

use corral_errors::{
    Exchange, Fix, FixKind, Http, NoiseFilter, Observation, Query, Scope, Severity, SourceFilter,
    SourceInfo, Status, TextFrom, parse_since, report,
};
use insta::assert_snapshot;
use serde_json::json;

/// `HH:MM:SS` on the fixture's day.
fn t(hms: &str) -> SystemTime {
    humantime::parse_rfc3339(&format!("2026-11-23T{hms}Z")).unwrap()
}

fn now() -> SystemTime {
    t("18:30:00")
}

fn request(
    severity: Severity,
    method: &str,
    path: &str,
    status: u16,
    at: SystemTime,
) -> Observation {
    Observation::new(
        "proxy:web",
        "http",
        severity,
        format!("{method} {path} → {status}"),
        at,
    )
    .http(Http::new(method, path, Some(status)))
    .raw(json!({ "method": method, "path": path, "status": status }))
}

/// What the sources know: the two servers that are down.
fn sources() -> Vec<SourceInfo> {
    vec![
        SourceInfo::new("server:files").down(
            Observation::new(
                "server:files",
                "crash",
                Severity::Error,
                "ValueError: config key 'root' is missing",
                t("18:20:00"),
            )
            .location("files_server.py:42")
            .context("exit", "code 1 after 20m")
            .raw(json!({ "event": "server.crashed", "exit_code": 1 })),
        ),
        SourceInfo::new("server:search").down(
            Observation::new(
                "server:search",
                "start_failed",
                Severity::Error,
                "failed to start: uvx: No such file or directory (os error 2)",
                t("18:25:01"),
            )
            .context("command", "uvx mcp-search --stdio")
            .text_from(TextFrom::Corral),
        ),
        SourceInfo::new("server:notes"),
        SourceInfo::new("process:web"),
        SourceInfo::new("process:worker"),
        SourceInfo::new("proxy:web"),
        SourceInfo::new("browser"),
    ]
}

/// What fixed things: process:web restarted on request at 18:15, the page /dashboard
/// reloaded at 18:27 (its TypeError came back at 18:29:40), and GET /api/orders went
/// through at 18:17 after failing at 18:16.
fn fixes() -> Vec<Fix> {
    vec![
        Fix {
            scope: Scope::Unit("process:web".into()),
            kind: FixKind::Restarted,
            at: t("18:15:00"),
        },
        Fix {
            scope: Scope::Page("/dashboard".into()),
            kind: FixKind::PageReloaded,
            at: t("18:27:00"),
        },
        Fix {
            scope: Scope::Request {
                method: "GET".into(),
                path: "/api/orders".into(),
            },
            kind: FixKind::RequestOk,
            at: t("18:17:00"),
        },
    ]
}

/// The proxy's request 18:29:47.9–18:29:48.2 (id `r-7`), served by process:web.
fn exchange() -> Exchange {
    Exchange {
        id: Some("r-7".into()),
        start: t("18:29:47.900"),
        end: t("18:29:48.200"),
    }
}

/// Everything recorded, noise and history included; the text of each as its source
/// wrote it (the page's, the request's, a program's output, Corral's for an exit).
fn observations() -> Vec<Observation> {
    recorded()
        .into_iter()
        .map(|o| {
            let from = match (o.source.as_str(), o.category.as_str()) {
                ("browser", _) => TextFrom::Page,
                (s, _) if s.starts_with("proxy:") => TextFrom::Http,
                (_, "exit") => TextFrom::Corral,
                _ => TextFrom::Output,
            };
            o.text_from(from)
        })
        .collect()
}

fn recorded() -> Vec<Observation> {
    let traceback = |at: &str, n: u32| {
        Observation::new(
            "process:web",
            "python.traceback",
            Severity::Error,
            "ValueError: invalid literal for int() with base 10: 'abc'",
            t(at),
        )
        .location("app.py:12")
        .raw(json!({ "rule": "python.traceback", "seen": n }))
    };
    let js = |at: Observation| {
        at.location("src/components/UserList.tsx:28:12")
            .context("page", "http://app.localhost/dashboard")
            .page("http://app.localhost/dashboard")
    };
    vec![
        // A server alert (a warning).
        Observation::new(
            "server:notes",
            "python.warning",
            Severity::Warning,
            "DeprecationWarning: datetime.datetime.utcnow() is deprecated",
            t("18:29:00"),
        )
        .location("notes/store.py:88"),
        // History: before process:web's restart at 18:15.
        Observation::new(
            "process:web",
            "python.traceback",
            Severity::Error,
            "ModuleNotFoundError: No module named 'flask_cors'",
            t("18:05:00"),
        )
        .location("app.py:3"),
        // The same traceback three times, in separate observations.
        traceback("18:20:10", 1),
        traceback("18:24:30", 2),
        traceback("18:29:48", 3),
        Observation::new(
            "process:worker",
            "exit",
            Severity::Error,
            "exited with code 1",
            t("18:28:00"),
        )
        .context("command", "python worker.py"),
        // The browser: a JS error seen twice, then once more.
        js(Observation::new(
            "browser",
            "js",
            Severity::Error,
            "Uncaught TypeError: Cannot read properties of null (reading 'foo')",
            t("18:26:00"),
        )
        .repeated(2, t("18:22:00"))),
        js(Observation::new(
            "browser",
            "js",
            Severity::Error,
            "Uncaught TypeError: Cannot read properties of null (reading 'foo')",
            t("18:29:40"),
        )),
        Observation::new(
            "browser",
            "console",
            Severity::Error,
            "Failed to load users: Internal Server Error",
            t("18:29:50"),
        )
        .location("src/api/users.ts:14:5")
        .context("page", "http://app.localhost/users")
        .page("http://app.localhost/users"),
        Observation::new(
            "browser",
            "rejection",
            Severity::Error,
            "Uncaught (in promise) Error: Request failed with status code 500",
            t("18:29:50"),
        )
        .location("src/api/client.ts:31:11")
        .context("page", "http://app.localhost/users")
        .page("http://app.localhost/users"),
        Observation::new(
            "browser",
            "fetch",
            Severity::Error,
            "GET /api/users → 500",
            t("18:29:49"),
        )
        .http(Http::new("GET", "/api/users", Some(500)))
        .context("page", "http://app.localhost/users")
        .page("http://app.localhost/users")
        .exchange(Exchange {
            start: t("18:29:49"),
            end: t("18:29:49"),
            ..exchange()
        }),
        // The proxy: a 500 seen four times, a real 404, a transport error, and noise.
        request(Severity::Error, "GET", "/api/users", 500, t("18:29:47.900"))
            .repeated(4, t("18:20:12"))
            .context("upstream", "http://vite.localhost")
            .exchange(exchange())
            .unit("process:web"),
        request(
            Severity::Warning,
            "GET",
            "/api/avatars/42.png",
            404,
            t("18:27:00"),
        ),
        Observation::new(
            "proxy:web",
            "transport",
            Severity::Error,
            "GET /api/orders → connection refused",
            t("18:16:00"),
        )
        .http(Http::new("GET", "/api/orders", None))
        .context("upstream", "http://vite.localhost"),
        request(
            Severity::Warning,
            "GET",
            "/assets/app.js.map",
            404,
            t("18:29:41"),
        ),
        request(Severity::Warning, "POST", "/login", 302, t("18:21:00")).repeated(3, t("18:20:00")),
        request(
            Severity::Warning,
            "GET",
            "/assets/index.css",
            304,
            t("18:29:42"),
        )
        .repeated(5, t("18:15:30")),
        request(
            Severity::Warning,
            "GET",
            "/@vite/client",
            404,
            t("18:29:41"),
        ),
        request(Severity::Warning, "GET", "/favicon.ico", 404, t("18:29:41")),
    ]
}

fn run(query: &Query) -> corral_errors::Report {
    report(observations(), &sources(), &fixes(), query, now())
}

#[test]
fn default_view() {
    let r = run(&Query::default());
    // The ModuleNotFoundError from before process:web's restart is resolved; the
    // failed GET /api/orders went through later.
    assert!(!r.text().contains("ModuleNotFoundError"));
    assert!(!r.text().contains("/api/orders"));
    assert_eq!(r.hidden, 11);
    assert_snapshot!("default_view", r.text());
}

/// One failure seen from five places is one incident: the traceback process:web
/// printed while the proxy's request failed, with the request, the page's failed fetch
/// (joined by the request id), and the page's rejection and console.error after it.
#[test]
fn one_failure_is_one_incident_under_its_root_cause() {
    let r = run(&Query::default());
    let incident = r
        .entries
        .iter()
        .find(|e| e.category == "python.traceback")
        .unwrap();
    let symptoms: Vec<(&str, &str)> = incident
        .symptoms
        .iter()
        .map(|s| (s.source.as_str(), s.category.as_str()))
        .collect();
    assert_eq!(
        symptoms,
        [
            ("proxy:web", "http"),
            ("browser", "rejection"),
            ("browser", "fetch"),
            ("browser", "console")
        ]
    );
    // Not joined: the TypeError printed on the page before the fetch.
    assert!(r.entries.iter().any(|e| e.category == "js"));
}

#[test]
fn states_resolved_and_all() {
    let resolved = run(&Query {
        status: Status::Resolved,
        ..Query::default()
    });
    assert_snapshot!("resolved", resolved.text());
    let all = run(&Query {
        status: Status::All,
        ..Query::default()
    });
    assert_eq!(all.resolved, 2);
    assert_snapshot!("all", all.text());
    assert_snapshot!(
        "json_all",
        serde_json::to_string_pretty(&all.json(false)).unwrap()
    );
}

#[test]
fn the_default_view_counts_what_was_resolved_since_the_last_call() {
    let count = |last: &str| {
        run(&Query {
            last_call: Some(t(last)),
            ..Query::default()
        })
    };
    let r = count("18:16:30");
    assert_eq!(r.resolved_since_last_call, Some(1));
    assert!(
        r.text().starts_with(
            "5 errors, 2 warnings; 1 resolved since your last call (status \"resolved\" lists them)"
        ),
        "{}",
        r.text()
    );
    assert_eq!(count("18:10:00").resolved_since_last_call, Some(2));
    let r = count("18:20:00");
    assert_eq!(r.resolved_since_last_call, Some(0));
    assert!(!r.text().contains("since your last call"));
}

#[test]
fn since_covering_history() {
    let query = Query {
        since: Some(parse_since("1h", now()).unwrap()),
        status: Status::All,
        ..Query::default()
    };
    let r = run(&query);
    assert!(r.text().contains("ModuleNotFoundError"));
    assert_snapshot!("since_1h", r.text());
}

#[test]
fn without_warnings() {
    let query = Query {
        include_warnings: false,
        ..Query::default()
    };
    assert_snapshot!("without_warnings", run(&query).text());
}

#[test]
fn limit_3() {
    let query = Query {
        limit: 3,
        ..Query::default()
    };
    let r = run(&query);
    assert_eq!(r.truncated, 4);
    assert_snapshot!("limit_3", r.text());
}

#[test]
fn only_the_browser() {
    let query = Query {
        source: Some(SourceFilter::parse("browser").unwrap()),
        ..Query::default()
    };
    assert_snapshot!("source_browser", run(&query).text());
}

#[test]
fn only_process_web() {
    let query = Query {
        source: Some(SourceFilter::parse("process:web").unwrap()),
        ..Query::default()
    };
    let r = run(&query);
    assert_eq!(r.entries.len(), 1);
    assert_eq!(r.entries[0].count, 3);
    assert_eq!(r.entries[0].first_seen, t("18:20:10"));
    assert_eq!(r.entries[0].last_seen, t("18:29:48"));
    assert_snapshot!("source_process_web", r.text());
}

#[test]
fn down_servers_are_listed_outside_the_window() {
    // Both servers went down before this window; they are still down, so listed.
    let query = Query {
        since: Some(parse_since("90s", now()).unwrap()),
        ..Query::default()
    };
    let r = run(&query);
    assert!(r.entries[0].down && r.entries[1].down);
    assert_snapshot!("down_outside_window", r.text());
}

#[test]
fn user_noise_patterns() {
    let query = Query {
        source: Some(SourceFilter::parse("proxy").unwrap()),
        noise: NoiseFilter::with_patterns(vec!["/api/avatars/*".into()]),
        ..Query::default()
    };
    let r = run(&query);
    assert_eq!(r.hidden, 12);
    assert_snapshot!("proxy_with_noise_pattern", r.text());
}

#[test]
fn clean_since_each_start() {
    let mut r = report(Vec::new(), &sources()[2..], &[], &Query::default(), now());
    assert_snapshot!("clean_since_each_start", r.text());
    r.unavailable
        .push(("proxy".into(), "needs the daemon".into()));
    assert_snapshot!("clean_unavailable", r.text());
}

#[test]
fn clean_since_a_time() {
    let query = Query {
        since: Some(parse_since("2026-11-23T18:00:00Z", now()).unwrap()),
        ..Query::default()
    };
    let r = report(Vec::new(), &sources()[3..], &[], &query, now());
    assert_snapshot!("clean_since_time", r.text());
}

#[test]
fn clean_without_sources() {
    let r = report(Vec::new(), &[], &[], &Query::default(), now());
    assert_eq!(r.text(), "No errors (sources: none).\n");
}

#[test]
fn clean_but_warnings_off() {
    let query = Query {
        source: Some(SourceFilter::parse("server:notes").unwrap()),
        include_warnings: false,
        ..Query::default()
    };
    assert_snapshot!("clean_warnings_off", run(&query).text());
}

fn process_web(raw: bool) -> String {
    let query = Query {
        source: Some(SourceFilter::parse("process:web").unwrap()),
        ..Query::default()
    };
    serde_json::to_string_pretty(&run(&query).json(raw)).unwrap()
}

#[test]
fn json_without_raw() {
    assert_snapshot!("json_process_web", process_web(false));
}

#[test]
fn json_with_raw() {
    assert_snapshot!("json_process_web_raw", process_web(true));
}

#[test]
fn json_default_view() {
    let mut r = run(&Query {
        limit: 6,
        ..Query::default()
    });
    r.unavailable
        .push(("proxy".into(), "needs the daemon".into()));
    assert_snapshot!(
        "json_default_limit_6",
        serde_json::to_string_pretty(&r.json(false)).unwrap()
    );
}

#[test]
fn colored_marks_severity_and_dims_ids() {
    let query = Query {
        source: Some(SourceFilter::parse("proxy:web").unwrap()),
        ..Query::default()
    };
    let colored = run(&query).colored();
    assert!(colored.contains("\x1b[1;31m[proxy:web:http]\x1b[0m GET /api/users → 500"));
    assert!(colored.contains("\x1b[33m[proxy:web:http]\x1b[0m GET /api/avatars/42.png → 404"));
    assert!(colored.contains("\x1b[2m#"));
    // Without the escapes it is the text.
    let mut plain = String::new();
    let mut rest = colored.as_str();
    while let Some(i) = rest.find('\x1b') {
        plain.push_str(&rest[..i]);
        rest = &rest[i + rest[i..].find('m').unwrap() + 1..];
    }
    plain.push_str(rest);
    assert_eq!(plain, run(&query).text());
}

/// Regression (issue "14. Hardening", item 6): text a page, a request or a program wrote
/// is marked as such, and the answer says it is data, never instructions; Corral's own
/// sentences are not marked.
#[test]
fn quoted_text_is_marked_as_data() {
    let text = run(&Query::default()).text();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
            .to_owned()
    };
    assert!(line("[browser:js]").contains("text from the page"));
    assert!(line("[proxy:web:http] GET /api/users").contains("text from HTTP"));
    assert!(line("[process:web:python.traceback]").contains("text from its output"));
    assert!(!line("[process:worker:exit]").contains("text from"));
    assert!(
        text.trim_end().ends_with(corral_errors::QUOTED_NOTE),
        "{text}"
    );
    let json = run(&Query::default()).json(false);
    let from: Vec<(&str, &str)> = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["source"].as_str().unwrap(),
                e["text_from"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(from.contains(&("browser", "page")), "{from:?}");
    assert!(from.contains(&("proxy:web", "http")), "{from:?}");
    assert!(from.contains(&("process:worker", "corral")), "{from:?}");
}

/// Regression (issue "14. Hardening", item 8): one raw answer over a ring of requests
/// with 60 KB paths was 60 MB. Texts are capped and raw records share one budget.
#[test]
fn a_raw_answer_is_bounded_in_bytes() {
    let long = format!("/nf/{}", "A".repeat(60 * 1024));
    let at = now() - std::time::Duration::from_secs(5);
    let observations: Vec<Observation> = (0..60)
        .map(|i| {
            let path = format!("{long}{i}");
            Observation::new(
                "proxy:web",
                "http",
                Severity::Warning,
                format!("GET {path} → 404"),
                at,
            )
            .http(Http::new("GET", path.clone(), Some(404)))
            .context("page", path.clone())
            .raw(json!({ "url": path }))
            .text_from(TextFrom::Http)
        })
        .collect();
    let query = Query {
        limit: 500,
        ..Query::default()
    };
    let r = report(
        observations,
        &[SourceInfo::new("proxy:web")],
        &[],
        &query,
        now(),
    );
    assert_eq!(r.entries.len(), 60);
    let answer = serde_json::to_string(&r.json(true)).unwrap();
    let budget = 60 * 4 * (corral_errors::MAX_JSON_TEXT + 512) + corral_errors::RAW_BUDGET;
    assert!(
        answer.len() <= budget,
        "{} bytes, budget {budget}",
        answer.len()
    );
    let json = r.json(true);
    assert!(
        json["raw_left_out"].as_u64().unwrap() > 40,
        "{}",
        json["raw_left_out"]
    );
    let first = &json["entries"][0];
    assert!(first["message"].as_str().unwrap().ends_with('…'));
    assert!(first["message"].as_str().unwrap().len() <= corral_errors::MAX_JSON_TEXT);
    assert_eq!(first["raw"].as_array().unwrap().len(), 1);
    assert!(r.text().len() < 60 * 4 * 250, "{}", r.text().len());
}

/// The text of chained exceptions, from the real runtimes' output (the alert scanner's
/// fixtures): the outer exception as the title, its root cause, and where the root
/// cause was raised with the function and its source line; with `verbose`, the reduced
/// stack.
#[test]
fn chained_exceptions_show_their_root_cause() {
    use corral_alerts::{AlertRules, Scanner, Stream};
    use corral_errors::Detail;
    use std::sync::Arc;
    let rules = Arc::new(AlertRules::defaults());
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../alerts/tests/fixtures");
    let mut observations = Vec::new();
    for (i, name) in [
        "python_chained_cause",
        "java_caused_by_chain",
        "node_error_cause",
    ]
    .iter()
    .enumerate()
    {
        let text = std::fs::read_to_string(fixtures.join(format!("{name}.txt"))).unwrap();
        let mut scanner = Scanner::new(rules.clone(), format!("process:{name}"));
        let mut alerts = Vec::new();
        for line in text.lines() {
            scanner.feed(line, Stream::Stderr, t("18:29:00"), &mut alerts);
        }
        scanner.finish(&mut alerts);
        let a = alerts
            .into_iter()
            .find(|a| a.cause.is_some())
            .unwrap_or_else(|| panic!("{name}: no chained alert"));
        observations.push(
            Observation::new(
                &a.source,
                &a.rule,
                a.severity,
                &a.message,
                t(&format!("18:29:1{i}")),
            )
            .location(a.location.as_ref().unwrap().to_string())
            .detail(Detail {
                function: a.function.clone(),
                code: a.code.clone(),
                cause: a.cause.clone(),
                frames: a.frames.clone(),
            }),
        );
    }
    let r = report(observations.clone(), &[], &[], &Query::default(), now());
    assert_snapshot!("chained_exceptions", r.text());
    let verbose = report(
        observations,
        &[],
        &[],
        &Query {
            verbose: true,
            ..Query::default()
        },
        now(),
    );
    assert_snapshot!("chained_exceptions_verbose", verbose.text());
}
