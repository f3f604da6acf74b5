//! Verbatim output of real tools (scripts/capture-alert-fixtures.sh), fed line by line,
//! alone and interleaved with unrelated log lines, must give exactly the expected alerts
//! and reload signals.
//!
//! Captured with (versions as `capture-alert-fixtures.sh` printed them): rustc 1.95,
//! CPython 3.11.7, Node 20.20.2, TypeScript 5, Go 1.19.8, OpenJDK 17.0.15, npm 11.19.1 and
//! 9.9.4, yarn 1.22.22 and 4.18.1, nodemon 3.1.14, webpack 5.112.2 (webpack-cli 5,
//! webpack-dev-server 5), react-dev-utils 12.0.1 (Create React App's messages), Vite
//! 6.4.6, Django 5.2.19, Flask 3.1.3 (Werkzeug 3.1.9), FastAPI 0.165 on uvicorn 0.54.0,
//! Maven 3.8.7, Gradle 4.4.1 (Debian's), Ant 1.10.13, Ruby 3.1.2. The .NET fixtures
//! (`dotnet_*`) are not captured (no SDK installs here): see `documented_fixtures`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use corral_alerts::{Alert, Reload, ReloadPhase, Scanner, Severity, Stream};

mod common;
use common::{context, rules};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Lines a busy dev server prints, none of them an error.
const NOISE: &[&str] = &[
    r#"127.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /api/users HTTP/1.1" 200 2326"#,
    "2024-10-10T13:55:36.123Z INFO  http: request completed status=200 ms=3",
    "\x1b[32m✓\x1b[39m 412 modules transformed.",
];

/// Feeds `text` line by line (one line of noise after every `every` lines when
/// `every > 0`), then finishes, and returns the alerts.
fn scan(text: &str, every: usize) -> Vec<Alert> {
    scan_all(text, every).0
}

/// [`scan`], with the reload signals.
fn scan_all(text: &str, every: usize) -> (Vec<Alert>, Vec<Reload>) {
    let rules = rules();
    let mut scanner = Scanner::new(Arc::clone(&rules), "process:web");
    let mut out = Vec::new();
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (i, line) in text.lines().enumerate() {
        let now = t0 + Duration::from_millis(i as u64);
        scanner.feed(line, Stream::Stderr, now, &mut out);
        if every > 0 && i % every == every - 1 {
            scanner.feed(NOISE[i % NOISE.len()], Stream::Stderr, now, &mut out);
        }
    }
    scanner.finish(&mut out);
    (out, scanner.take_reloads())
}

/// Feeds `text` as the supervisor does: while no group is open, lines before the next
/// one with a rule's literal ([`AlertRules::next_candidate`]) are skipped unseen.
fn scan_candidates(text: &str) -> Vec<Alert> {
    scan_candidates_all(text).0
}

/// [`scan_candidates`], with the reload signals.
fn scan_candidates_all(text: &str) -> (Vec<Alert>, Vec<Reload>) {
    let rules = rules();
    let mut scanner = Scanner::new(Arc::clone(&rules), "process:web");
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if !scanner.pending() {
            let Some(at) = rules.next_candidate(rest.as_bytes()) else {
                break;
            };
            rest = &rest[rest[..at].rfind('\n').map_or(0, |i| i + 1)..];
        }
        let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        scanner.feed(line, Stream::Stderr, SystemTime::UNIX_EPOCH, &mut out);
        rest = tail;
    }
    scanner.finish(&mut out);
    (out, scanner.take_reloads())
}

#[derive(Clone, Copy)]
struct Expect<'a> {
    rule: &'a str,
    category: &'a str,
    severity: Severity,
    message: &'a str,
    location: Option<&'a str>,
    /// The rest of the alert, as [`context`] renders it.
    context: &'a [&'a str],
}

/// An error alert of `rule` (whose category is the part before the dot), with no
/// context beyond its message and location (see [`Expect::with`]).
fn err<'a>(rule: &'a str, message: &'a str, location: Option<&'a str>) -> Expect<'a> {
    Expect {
        rule,
        category: rule.split('.').next().unwrap_or(rule),
        severity: Severity::Error,
        message,
        location,
        context: &[],
    }
}

impl<'a> Expect<'a> {
    /// The same alert, with this context (as [`context`] renders it).
    fn with(self, context: &'a [&'a str]) -> Self {
        Expect { context, ..self }
    }
}

/// What a fixture must give.
struct Case<'a> {
    fixture: &'a str,
    /// After how many lines a noise line is inserted, per run (0: none); see
    /// [`scan`]. Tools that write a block in one go (the message on the line after
    /// the header) are not interleaved inside it.
    noise: &'a [usize],
    alerts: Vec<Expect<'a>>,
    /// Phase, tool and a piece of the line, in order.
    reloads: &'a [(ReloadPhase, &'a str, &'a str)],
}

const STARTED: ReloadPhase = ReloadPhase::Started;
const SUCCEEDED: ReloadPhase = ReloadPhase::Succeeded;

fn check(name: &str, expected: &[Expect<'_>]) {
    check_with(name, &[0, 1, 3], expected);
}

fn check_with(name: &str, noise_every: &[usize], expected: &[Expect<'_>]) {
    check_case(&Case {
        fixture: name,
        noise: noise_every,
        alerts: expected.to_vec(),
        reloads: &[],
    });
}

fn check_case(case: &Case<'_>) {
    let name = case.fixture;
    let expected = &case.alerts;
    let text = fixture(name);
    // Interleaving must change nothing but the noise (which raises no alert).
    for &every in case.noise {
        let (alerts, reloads) = scan_all(&text, every);
        let summary: Vec<String> = alerts
            .iter()
            .map(|a| {
                format!(
                    "{} {} {:?} @ {:?}",
                    a.rule,
                    a.severity.as_str(),
                    a.message,
                    a.location.as_ref().map(|l| l.to_string())
                )
            })
            .collect();
        assert_eq!(
            alerts.len(),
            expected.len(),
            "{name}, noise every {every}: {summary:#?}"
        );
        for (alert, want) in alerts.iter().zip(expected) {
            let at = format!("{name}, noise every {every}: {alert:#?}");
            assert_eq!(alert.rule, want.rule, "{at}");
            assert_eq!(alert.category, want.category, "{at}");
            assert_eq!(alert.severity, want.severity, "{at}");
            assert_eq!(alert.message, want.message, "{at}");
            assert_eq!(
                alert.location.as_ref().map(|l| l.to_string()).as_deref(),
                want.location,
                "{at}"
            );
            // Node prints its throw site (whence `code`) before the error line, in one
            // write: noise put inside it loses the source line, and never gives a wrong one.
            let mut want_context = want.context.to_vec();
            if every > 0 && alert.category == "node" && alert.code.is_none() {
                want_context.retain(|l| !l.starts_with("code: "));
            }
            assert_eq!(context(alert), want_context, "{at}");
            assert_eq!(alert.count, 1, "{at}");
            assert_eq!(alert.source, "process:web", "{at}");
            assert!(
                !alert
                    .lines
                    .iter()
                    .any(|l| NOISE.iter().any(|n| l.contains(&n[..20]))),
                "noise in the group: {at}"
            );
        }
        let got: Vec<(ReloadPhase, &str, &str)> = reloads
            .iter()
            .map(|r| (r.phase, r.tool.as_str(), r.line.as_str()))
            .collect();
        assert_eq!(
            got.len(),
            case.reloads.len(),
            "{name}, noise every {every}: {got:#?}"
        );
        for (reload, &(phase, tool, piece)) in reloads.iter().zip(case.reloads) {
            let at = format!("{name}, noise every {every}: {reload:#?}");
            assert_eq!((reload.phase, reload.tool.as_str()), (phase, tool), "{at}");
            assert!(reload.line.contains(piece), "{at}");
            assert_eq!(reload.stream, Stream::Stderr, "{at}");
        }
    }
}

const E: Severity = Severity::Error;

#[test]
fn rust_type_errors_are_one_alert_each_at_their_arrow_line() {
    check(
        "rust_type_error",
        &[
            Expect {
                rule: "rust.compile_error",
                category: "rust",
                severity: E,
                message: "mismatched types",
                location: Some("src/main.rs:2:21"),
                context: &[],
            },
            Expect {
                rule: "rust.compile_error",
                category: "rust",
                severity: E,
                message: "mismatched types",
                location: Some("src/main.rs:3:21"),
                context: &[],
            },
        ],
    );
}

#[test]
fn rust_panic_with_backtrace_reports_the_message_line_and_the_panic_site() {
    // The line after the header is the message: Rust writes both under the stderr lock,
    // so no other line of the process comes between them (noise every 1 or 3 would).
    check_with(
        "rust_panic",
        &[0, 4, 5],
        &[Expect {
            rule: "rust.panic",
            category: "rust",
            severity: E,
            message: "PORT must be a number: ParseIntError { kind: InvalidDigit }",
            location: Some("src/main.rs:2:18"),
            context: &[
                "function: boom::parse_port",
                "frame: ./src/main.rs:2:18 in boom::parse_port",
                "frame: ./src/main.rs:7:16 in boom::main",
            ],
        }],
    );
    let alerts = scan(&fixture("rust_panic"), 0);
    assert!(
        alerts[0]
            .lines
            .last()
            .unwrap()
            .starts_with("note: Some details"),
        "{:#?}",
        alerts[0].lines
    );
}

#[test]
fn python_traceback_reports_the_exception_and_the_innermost_user_frame() {
    check(
        "python_traceback",
        &[Expect {
            rule: "python.traceback",
            category: "python",
            severity: E,
            message: "ValueError: time data '31/01/2024' does not match format '%Y-%m-%d'",
            // Not _strptime.py (stdlib, innermost) and not line 18 (outermost).
            location: Some("/tmp/corral-fixtures/python_traceback/app.py:9"),
            context: &[
                "function: parse_event",
                r#"code: obj["at"] = datetime.strptime(obj["at"], "%Y-%m-%d")"#,
                "frame: /tmp/corral-fixtures/python_traceback/app.py:9 in parse_event",
                "frame: /tmp/corral-fixtures/python_traceback/app.py:14 in load",
                "frame: /tmp/corral-fixtures/python_traceback/app.py:18 in <module>",
            ],
        }],
    );
}

#[test]
fn python_syntax_error_without_traceback_header() {
    check(
        "python_syntax_error",
        &[Expect {
            rule: "python.syntax_error",
            category: "python",
            severity: E,
            message: "SyntaxError: '{' was never closed",
            location: Some("/tmp/corral-fixtures/python_syntax_error/app.py:2"),
            context: &[
                r#"code: return {"ok": True"#,
                "frame: /tmp/corral-fixtures/python_syntax_error/app.py:2",
            ],
        }],
    );
}

#[test]
fn node_type_error_points_at_the_first_user_frame() {
    check(
        "node_type_error",
        &[Expect {
            rule: "node.error",
            category: "node",
            severity: E,
            message: "TypeError: Cannot read properties of undefined (reading 'name')",
            location: Some("/tmp/corral-fixtures/node_type_error/server.js:2:23"),
            context: &[
                "function: userName",
                "code: return user.profile.name.toUpperCase();",
                "frame: /tmp/corral-fixtures/node_type_error/server.js:2:23 in userName",
                "frame: /tmp/corral-fixtures/node_type_error/server.js:7:7 in Object.<anonymous>",
            ],
        }],
    );
}

#[test]
fn node_unhandled_rejections() {
    check(
        "node_unhandled_rejection",
        &[Expect {
            rule: "node.error",
            category: "node",
            severity: E,
            message: "Error: job 42 not found",
            location: Some("/tmp/corral-fixtures/node_unhandled_rejection/worker.js:3:9"),
            context: &[
                "function: fetchJob",
                "code: throw new Error(`job ${id} not found`);",
                "frame: /tmp/corral-fixtures/node_unhandled_rejection/worker.js:3:9 in fetchJob",
            ],
        }],
    );
    let alerts = scan(&fixture("node_rejection_value"), 0);
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].rule, "node.unhandled_rejection");
    assert!(
        alerts[0].message.contains(r#"reason "config missing""#),
        "{}",
        alerts[0].message
    );
}

#[test]
fn node_module_not_found_skips_node_internal_frames() {
    check(
        "node_module_not_found",
        &[Expect {
            rule: "node.module_not_found",
            category: "node",
            severity: E,
            message: "Error: Cannot find module './lib/missing-helper'",
            location: Some("/tmp/corral-fixtures/node_module_not_found/index.js:1:11"),
            context: &[
                // The throw site Node printed is its own loader's: no source line.
                "function: Object.<anonymous>",
                "frame: /tmp/corral-fixtures/node_module_not_found/index.js:1:11 in Object.<anonymous>",
            ],
        }],
    );
}

#[test]
fn tsc_errors_plain_and_pretty() {
    let want = [Expect {
        rule: "typescript.error",
        category: "typescript",
        severity: E,
        message: "Type 'string' is not assignable to type 'number'.",
        location: Some("app.ts:5:26"),
        context: &[],
    }];
    check("tsc_error", &want);
    check("tsc_error_pretty", &want);
}

#[test]
fn go_panic_points_at_user_code_not_sort_or_runtime() {
    check(
        "go_panic",
        &[Expect {
            rule: "go.panic",
            category: "go",
            severity: E,
            message: "runtime error: index out of range [6] with length 3",
            location: Some("/tmp/corral-fixtures/go_panic/main.go:9"),
            context: &[
                "function: main.pick",
                "frame: /tmp/corral-fixtures/go_panic/main.go:9 in main.pick",
                "frame: /tmp/corral-fixtures/go_panic/main.go:14 in main.main.func1",
                "frame: /tmp/corral-fixtures/go_panic/main.go:14 in main.main",
            ],
        }],
    );
}

#[test]
fn go_build_error() {
    check(
        "go_build_error",
        &[Expect {
            rule: "go.build_error",
            category: "go",
            severity: E,
            message: r#"cannot use "8080" (untyped string constant) as int value in variable declaration"#,
            location: Some("./main.go:6:17"),
            context: &[],
        }],
    );
}

#[test]
fn java_exception_reports_top_and_root_cause_at_the_cause_user_frame() {
    check(
        "java_exception",
        &[Expect {
            rule: "java.exception",
            category: "java",
            severity: E,
            message: "java.lang.IllegalStateException: cannot start server (caused by java.lang.NumberFormatException: For input string: \"eighty\")",
            location: Some("Main.java:5"),
            context: &[
                "function: Main.parsePort",
                r#"cause: java.lang.NumberFormatException: For input string: "eighty""#,
                "frame: Main.java:5 in Main.parsePort",
                "frame: Main.java:10 in Main.start",
                // From `... 1 more`: the frame it shares with the top trace.
                "frame: Main.java:17 in Main.main",
            ],
        }],
    );
}

// ---- Chained exceptions: the message is the exception that ended the program (so ids do
// not move), the location, function and frames the root cause's (where the bug is).

#[test]
fn python_raise_from_points_at_the_root_cause_in_the_data_function() {
    let p = "/tmp/corral-fixtures/python_chained_cause";
    check(
        "python_chained_cause",
        &[Expect {
            rule: "python.traceback",
            category: "python",
            severity: E,
            message: "web.HTTPException: 404: no user 2",
            location: Some(&format!("{p}/data.py:5")),
            context: &[
                "function: get_user",
                // Under it, Python 3.11's `~~~~~^^^^^^^^^` markers: skipped.
                "code: return USERS[user_id]",
                "cause: KeyError: 2",
                &format!("frame: {p}/data.py:5 in get_user"),
                &format!("frame: {p}/data.py:9 in get_stats"),
                &format!("frame: {p}/app.py:7 in handler"),
                // Above the frame that caught it: from the traceback of the `raise … from e`.
                &format!("frame: {p}/app.py:14 in main"),
                &format!("frame: {p}/app.py:17 in <module>"),
            ],
        }],
    );
}

#[test]
fn python_during_handling_points_at_the_first_exception() {
    let p = "/tmp/corral-fixtures/python_chained_context";
    check(
        "python_chained_context",
        &[Expect {
            rule: "python.traceback",
            category: "python",
            severity: E,
            message: "KeyError: 'dev'",
            location: Some(&format!("{p}/settings.py:5")),
            context: &[
                "function: load_settings",
                r#"code: with open(path, "rb") as f:"#,
                "cause: FileNotFoundError: [Errno 2] No such file or directory: 'dev.toml'",
                &format!("frame: {p}/settings.py:5 in load_settings"),
                &format!("frame: {p}/app.py:8 in settings_for"),
                &format!("frame: {p}/app.py:14 in <module>"),
            ],
        }],
    );
}

#[test]
fn node_error_cause_points_at_the_cause_frame() {
    let p = "/tmp/corral-fixtures/node_error_cause";
    check(
        "node_error_cause",
        &[Expect {
            rule: "node.error",
            category: "node",
            severity: E,
            message: "Error: cannot load user 7",
            location: Some(&format!("{p}/users.js:8:16")),
            context: &[
                // No code: the throw site Node printed is the outer error's (line 16).
                "function: UserStore.find",
                "cause: TypeError: Cannot read properties of undefined (reading 'name')",
                &format!("frame: {p}/users.js:8:16 in UserStore.find"),
                &format!("frame: {p}/users.js:14:18 in loadUser"),
                &format!("frame: {p}/server.js:4:18 in handler"),
                &format!("frame: {p}/server.js:8:1 in Object.<anonymous>"),
            ],
        }],
    );
}

#[test]
fn node_nested_causes_point_at_the_innermost_one() {
    let p = "/tmp/corral-fixtures/node_error_cause_nested/main.mjs";
    check(
        "node_error_cause_nested",
        &[Expect {
            rule: "node.error",
            category: "node",
            severity: E,
            message: "Error: boot failed",
            location: Some(&format!("{p}:3:25")),
            context: &[
                // `at new Repo (…)`, `at async boot (…)`, `at async file:///…` (anonymous).
                "function: Repo",
                "cause: TypeError: repo needs a url",
                &format!("frame: {p}:3:25 in Repo"),
                &format!("frame: {p}:10:12 in connect"),
                &format!("frame: {p}:18:5 in boot"),
                &format!("frame: {p}:24:1"),
            ],
        }],
    );
}

#[test]
fn java_caused_by_chain_points_at_the_last_cause_with_its_shared_frames() {
    check(
        "java_caused_by_chain",
        &[Expect {
            rule: "java.exception",
            category: "java",
            severity: E,
            message: r#"java.lang.IllegalStateException: cannot load user 7 (caused by java.lang.NumberFormatException: For input string: "x7")"#,
            location: Some("UserRepo.java:9"),
            context: &[
                "function: com.acme.UserRepo.parseId",
                r#"cause: java.lang.NumberFormatException: For input string: "x7""#,
                "frame: UserRepo.java:9 in com.acme.UserRepo.parseId",
                "frame: UserRepo.java:14 in com.acme.UserRepo.find",
                // `... 2 more`: the last two of the enclosing cause's stack, whose own
                // `... 1 more` is the top trace's last frame.
                "frame: Api.java:8 in com.acme.Api.load",
                "frame: Api.java:16 in com.acme.Api.main",
            ],
        }],
    );
}

#[test]
fn ruby_error_points_at_the_raising_line_with_its_source() {
    let p = "/tmp/corral-fixtures/ruby_no_method_error";
    check(
        "ruby_no_method_error",
        &[Expect {
            rule: "ruby.exception",
            category: "ruby",
            severity: E,
            message: "NoMethodError: undefined method `[]' for nil:NilClass",
            location: Some(&format!("{p}/lib/users.rb:7")),
            context: &[
                "function: display_name",
                // Ruby 3.1's error_highlight prints it under the message.
                "code: @rows[id][:name].strip",
                &format!("frame: {p}/lib/users.rb:7 in display_name"),
                // As Ruby printed them: relative to where `ruby app.rb` ran.
                "frame: app.rb:5 in handler",
                "frame: app.rb:8 in block in <main>",
                "frame: app.rb:8 in each",
                "frame: app.rb:8 in <main>",
            ],
        }],
    );
}

#[test]
fn go_goroutine_panic_names_the_method_and_where_the_goroutine_started() {
    let p = "/tmp/corral-fixtures/go_goroutine_panic/main.go";
    check(
        "go_goroutine_panic",
        &[Expect {
            rule: "go.panic",
            category: "go",
            severity: E,
            message: "assignment to entry in nil map",
            location: Some(&format!("{p}:11")),
            context: &[
                "function: main.(*Server).handle",
                &format!("frame: {p}:11 in main.(*Server).handle"),
                &format!("frame: {p}:20 in main.main.func1"),
                // `created by main.main`: where the goroutine was started.
                &format!("frame: {p}:18 in main.main"),
            ],
        }],
    );
}

/// The supervisor feeds a line only from one with a rule's literal on (or while a group
/// is open): Node's throw site, printed before the error line, must still be seen.
#[test]
fn node_throw_sites_are_seen_when_only_candidate_lines_are_fed() {
    for (name, code) in [
        (
            "node_type_error",
            Some("return user.profile.name.toUpperCase();"),
        ),
        (
            "node_unhandled_rejection",
            Some("throw new Error(`job ${id} not found`);"),
        ),
        ("node_error_cause", None),
        ("node_module_not_found", None),
    ] {
        let all = scan(&fixture(name), 0);
        let fed = scan_candidates(&fixture(name));
        assert_eq!(fed.len(), 1, "{name}: {fed:#?}");
        assert_eq!(fed[0].code.as_deref(), code, "{name}");
        assert_eq!(
            (&fed[0].id, context(&fed[0])),
            (&all[0].id, context(&all[0])),
            "{name}"
        );
    }
}

/// Every fixture, fed as the supervisor feeds it, gives what it gives fed whole: the
/// alerts with their context, and the reload signals (whose lines are candidates too,
/// stepping back to a throw site before them like an error line).
#[test]
fn every_fixture_gives_the_same_when_only_candidate_lines_are_fed() {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let text = fixture(name.trim_end_matches(".txt"));
        let (all, all_reloads) = scan_all(&text, 0);
        let (fed, fed_reloads) = scan_candidates_all(&text);
        let alerts = |alerts: &[Alert]| -> Vec<(String, Vec<String>, Vec<String>)> {
            alerts
                .iter()
                .map(|a| (a.id.clone(), context(a), a.lines.clone()))
                .collect()
        };
        assert_eq!(alerts(&fed), alerts(&all), "{name}");
        let reloads = |reloads: &[Reload]| -> Vec<(ReloadPhase, String, String)> {
            reloads
                .iter()
                .map(|r| (r.phase, r.tool.clone(), r.line.clone()))
                .collect()
        };
        assert_eq!(reloads(&fed_reloads), reloads(&all_reloads), "{name}");
    }
}

/// The ids of the alerts the fixtures give, pinned: ids are shown to users and agents,
/// and what an alert carries beyond source, rule, message and location must not move them.
#[test]
fn alert_ids_of_the_fixtures_are_pinned() {
    for (name, ids) in [
        ("go_build_error", &["98087db1"][..]),
        ("go_panic", &["2fb6013f"]),
        ("java_exception", &["913a28bf"]),
        ("node_module_not_found", &["3dbc554a"]),
        ("node_rejection_value", &["67eb3eae"]),
        ("node_type_error", &["aa4c9b83"]),
        ("node_unhandled_rejection", &["ac2d6753"]),
        ("python_syntax_error", &["6a6a6459"]),
        ("python_traceback", &["aed86124"]),
        ("rust_panic", &["730a323f"]),
        ("rust_type_error", &["cadee5d2", "3676988d"]),
        ("tsc_error", &["fd076cb2"]),
        ("tsc_error_pretty", &["fd076cb2"]),
    ] {
        let got: Vec<String> = scan(&fixture(name), 0).into_iter().map(|a| a.id).collect();
        assert_eq!(got, ids, "{name}");
    }
}

/// Every noise interval of `check`.
const ANY: &[usize] = &[0, 1, 3];

#[test]
fn npm_yarn_and_nodemon_failures_are_one_alert_each() {
    let npm_missing = || vec![err("node.npm", "Missing script: \"dev\"", None)];
    let npm_failed = || {
        vec![err(
            "node.npm",
            "command failed (exit code 3): sh -c node setup.js",
            None,
        )]
    };
    let cases = [
        // npm 10+ (`npm error …`) and npm 9 (`npm ERR! …`): one alert per block.
        Case {
            fixture: "npm_missing_script",
            noise: ANY,
            alerts: npm_missing(),
            reloads: &[],
        },
        Case {
            fixture: "npm9_missing_script",
            noise: ANY,
            alerts: npm_missing(),
            reloads: &[],
        },
        Case {
            fixture: "npm_script_failed",
            noise: ANY,
            alerts: npm_failed(),
            reloads: &[],
        },
        Case {
            fixture: "npm9_script_failed",
            noise: ANY,
            alerts: npm_failed(),
            reloads: &[],
        },
        Case {
            fixture: "yarn1_errors",
            noise: ANY,
            alerts: vec![
                err("node.yarn", "Command failed with exit code 2.", None),
                err("node.yarn", "Command \"dev\" not found.", None),
            ],
            reloads: &[],
        },
        Case {
            // An install that failed (the successful one after it is no alert), then
            // clipanion's usage error.
            fixture: "yarn_berry_errors",
            noise: ANY,
            alerts: vec![
                err(
                    "node.yarn",
                    "Error: helper@file:./missing-helper::locator=web%40workspace%3A.: ENOENT: no such file or directory, lstat '/tmp/corral-fixtures/yarn_berry_errors/missing-helper'",
                    None,
                ),
                err("node.yarn", "Couldn't find a script named \"dev\".", None),
            ],
            reloads: &[],
        },
        Case {
            // The app's error, and nodemon saying it is down; the restarts around it.
            fixture: "nodemon_crash",
            noise: ANY,
            alerts: vec![
                err(
                    "node.module_not_found",
                    "Error: Cannot find module './config.json'",
                    Some("/tmp/corral-fixtures/nodemon_crash/server.js:1:16"),
                )
                // The throw site Node printed is its own loader's: no source line.
                .with(&[
                    "function: Object.<anonymous>",
                    "frame: /tmp/corral-fixtures/nodemon_crash/server.js:1:16 in Object.<anonymous>",
                ]),
                err(
                    "node.nodemon_crashed",
                    "app crashed - waiting for file changes before starting...",
                    None,
                ),
            ],
            reloads: &[
                (SUCCEEDED, "nodemon", "starting `node server.js`"),
                (STARTED, "nodemon", "restarting due to changes"),
                (SUCCEEDED, "nodemon", "starting `node server.js`"),
                (STARTED, "nodemon", "restarting due to changes"),
                (SUCCEEDED, "nodemon", "starting `node server.js`"),
            ],
        },
    ];
    for case in &cases {
        check_case(case);
    }
}

#[test]
fn bundler_errors_and_rebuilds() {
    let parse_failed = "Module parse failed: Unexpected token (3:17)";
    let vite_message = "Failed to parse source for import analysis because the content contains invalid JS syntax. If you are using JSX, make sure to name the file with the .jsx or .tsx extension.";
    let vite_at = Some("/tmp/corral-fixtures/vite_transform_error/src/greet.js:3:3");
    let cases = [
        Case {
            // The summary (`compiled with 1 error`) repeats the `ERROR in` block.
            fixture: "webpack_error",
            noise: &[0, 3, 6],
            alerts: vec![err(
                "bundler.webpack",
                parse_failed,
                Some("./src/index.js:3:17"),
            )],
            reloads: &[],
        },
        Case {
            fixture: "webpack_dev_server",
            noise: &[0, 5, 6],
            alerts: vec![err(
                "bundler.webpack",
                parse_failed,
                Some("./src/index.js:3:17"),
            )],
            reloads: &[
                (SUCCEEDED, "webpack", "compiled successfully in"),
                (SUCCEEDED, "webpack", "compiled successfully in"),
            ],
        },
        Case {
            // CRA prints the first error after `Failed to compile.` and a blank line.
            fixture: "cra_failed_to_compile",
            noise: &[0, 5, 7],
            alerts: vec![err("bundler.nextjs", parse_failed, None)],
            reloads: &[
                (SUCCEEDED, "webpack", "Compiled successfully!"),
                (STARTED, "webpack", "Compiling..."),
                (STARTED, "webpack", "Compiling..."),
                (SUCCEEDED, "webpack", "Compiled successfully!"),
            ],
        },
        Case {
            // `vite` serving a module with a syntax error: the request's pre-transform
            // and its transform fail alike (one id: the alert log counts the second),
            // and the dependency scan reports esbuild's error (its `Error:   Failed to
            // scan` wrapper is no alert of its own).
            fixture: "vite_transform_error",
            noise: &[0, 3, 5],
            alerts: vec![
                err("bundler.vite", vite_message, vite_at),
                err(
                    "bundler.esbuild",
                    "Unterminated string literal",
                    Some("src/greet.js:4:0"),
                ),
                err("bundler.vite", vite_message, vite_at),
            ],
            reloads: &[],
        },
        Case {
            // HMR of an edited module, a page reload, a config change restarting it.
            fixture: "vite_hmr",
            noise: ANY,
            alerts: vec![],
            reloads: &[
                (SUCCEEDED, "vite", "(client) hmr update /src/main.js"),
                (SUCCEEDED, "vite", "(client) page reload index.html"),
                (
                    STARTED,
                    "vite",
                    "vite.config.js changed, restarting server...",
                ),
                (SUCCEEDED, "vite", "server restarted."),
            ],
        },
        Case {
            // `Found 1 error. Watching for file changes.` is neither alert nor success.
            fixture: "tsc_watch",
            noise: ANY,
            alerts: vec![err(
                "typescript.error",
                "Type 'string' is not assignable to type 'number'.",
                Some("app.ts:1:7"),
            )],
            reloads: &[
                (STARTED, "tsc", "Starting compilation in watch mode..."),
                (SUCCEEDED, "tsc", "Found 0 errors."),
                (STARTED, "tsc", "Starting incremental compilation..."),
                (STARTED, "tsc", "Starting incremental compilation..."),
                (SUCCEEDED, "tsc", "Found 0 errors."),
            ],
        },
    ];
    for case in &cases {
        check_case(case);
    }
}

#[test]
fn python_servers_give_one_alert_per_exception_header_and_all() {
    let cases = [
        Case {
            // `ERROR:    Exception in ASGI application` + the traceback: one alert.
            fixture: "uvicorn_asgi_error",
            noise: ANY,
            alerts: vec![err(
                "python.traceback",
                "KeyError: 'owner'",
                Some("/tmp/corral-fixtures/uvicorn_asgi_error/main.py:10"),
            )
            .with(&[
                "function: get_item",
                r#"code: return {"id": item_id, "owner": item["owner"]}"#,
                "frame: /tmp/corral-fixtures/uvicorn_asgi_error/main.py:10 in get_item",
            ])],
            reloads: &[(SUCCEEDED, "uvicorn", "Application startup complete.")],
        },
        Case {
            // `[…] ERROR in app: Exception on /orders [GET]` + the traceback.
            fixture: "flask_request_error",
            noise: ANY,
            alerts: vec![err(
                "python.traceback",
                "ValueError: invalid literal for int() with base 10: 'ten'",
                Some("/tmp/corral-fixtures/flask_request_error/app.py:8"),
            )
            .with(&[
                "function: orders",
                r#"code: limit = int(request.args["limit"])"#,
                "frame: /tmp/corral-fixtures/flask_request_error/app.py:8 in orders",
            ])],
            reloads: &[],
        },
        Case {
            // `Internal Server Error: /cart` + the traceback.
            fixture: "django_request_error",
            noise: ANY,
            alerts: vec![err(
                "python.traceback",
                "AttributeError: 'WSGIRequest' object has no attribute 'session_items'",
                Some("/tmp/corral-fixtures/django_request_error/shop/urls.py:6"),
            )
            .with(&[
                "function: cart",
                "code: items = request.session_items",
                "frame: /tmp/corral-fixtures/django_request_error/shop/urls.py:6 in cart",
            ])],
            reloads: &[(SUCCEEDED, "django", "System check identified no issues")],
        },
        Case {
            // runserver's start-up, failing in Django's own code: the last chained
            // exception, at the innermost frame (no frame is the project's). Python
            // writes the chain at once: no noise right after an exception line.
            fixture: "django_improperly_configured",
            noise: &[0, 4, 5],
            alerts: vec![err(
                "python.traceback",
                "django.core.exceptions.ImproperlyConfigured: Error loading psycopg2 or psycopg module",
                Some(
                    "/tmp/corral-fixtures/.tools/py/lib/python3.11/site-packages/django/db/backends/postgresql/base.py:29",
                ),
            )
            // The root cause is the first exception of the chain; no frame is the
            // project's, so no frames.
            .with(&[
                "function: <module>",
                r#"code: raise ImproperlyConfigured("Error loading psycopg2 or psycopg module")"#,
                "cause: ModuleNotFoundError: No module named 'psycopg'",
            ])],
            reloads: &[],
        },
        Case {
            fixture: "django_reload",
            noise: ANY,
            alerts: vec![],
            reloads: &[
                (SUCCEEDED, "django", "System check identified no issues"),
                (STARTED, "django", "shop/urls.py changed, reloading."),
                (SUCCEEDED, "django", "System check identified no issues"),
            ],
        },
        Case {
            fixture: "flask_reload",
            noise: ANY,
            alerts: vec![],
            reloads: &[
                (STARTED, "flask", "* Restarting with stat"),
                (SUCCEEDED, "flask", "* Debugger is active!"),
                (
                    STARTED,
                    "flask",
                    "* Detected change in '/tmp/corral-fixtures/flask_reload/app.py', reloading",
                ),
                (STARTED, "flask", "* Restarting with stat"),
                (SUCCEEDED, "flask", "* Debugger is active!"),
            ],
        },
        Case {
            fixture: "uvicorn_reload",
            noise: ANY,
            alerts: vec![],
            reloads: &[
                (SUCCEEDED, "uvicorn", "Application startup complete."),
                (
                    STARTED,
                    "uvicorn",
                    "WatchFiles detected changes in 'main.py'. Reloading...",
                ),
                (SUCCEEDED, "uvicorn", "Application startup complete."),
            ],
        },
    ];
    for case in &cases {
        check_case(case);
    }
    // The header is the alert's first line: it names the request.
    let (alerts, _) = scan_all(&fixture("flask_request_error"), 0);
    assert!(
        alerts[0].lines[0].ends_with("ERROR in app: Exception on /orders [GET]"),
        "{:#?}",
        alerts[0].lines
    );
}

#[test]
fn jvm_builds_report_the_compiler_error_not_the_build_summary() {
    let symbol =
        |file: &'static str, at: &'static str| vec![err("java.compile_error", file, Some(at))];
    let cases = [
        Case {
            // javac's error; the goal's failure repeats it (`Compilation failure`).
            fixture: "maven_compile_error",
            noise: ANY,
            alerts: symbol(
                "cannot find symbol: method parsePort(java.lang.String[])",
                "/tmp/corral-fixtures/maven_compile_error/src/main/java/com/example/App.java:5:20",
            ),
            reloads: &[],
        },
        Case {
            fixture: "maven_dependency_error",
            noise: ANY,
            alerts: vec![err(
                "java.build_failed",
                "Failed to execute goal on project app: Could not resolve dependencies for project com.example:app:jar:1.0: Cannot access central (https://repo.maven.apache.org/maven2) in offline mode and the artifact com.acme:billing-client:jar:2.1.0 has not been downloaded from it before.",
                None,
            )],
            reloads: &[],
        },
        Case {
            // Gradle 4 glues `:compileJava` to javac's first line; `FAILURE: Build
            // failed` then says only `Compilation failed; see the compiler error output`.
            fixture: "gradle_build_failed",
            noise: ANY,
            alerts: symbol(
                "cannot find symbol: method parsePort(String[])",
                "/tmp/corral-fixtures/gradle_build_failed/src/main/java/com/example/App.java:5",
            ),
            reloads: &[],
        },
        Case {
            // Ant's `[javac]` lines; `BUILD FAILED` + `Compile failed; see …` sums up.
            fixture: "ant_build_failed",
            noise: &[0, 2, 3],
            alerts: symbol(
                "cannot find symbol: method parsePort(String[])",
                "/tmp/corral-fixtures/ant_build_failed/src/main/java/com/example/App.java:5",
            ),
            reloads: &[],
        },
        Case {
            fixture: "javac_error",
            noise: ANY,
            alerts: symbol(
                "cannot find symbol: method parsePort(String[])",
                "App.java:3",
            ),
            reloads: &[],
        },
        Case {
            // A JVM run with -XX:-StackTraceInThrowable: no `at` lines.
            fixture: "java_no_stack",
            noise: ANY,
            alerts: vec![err(
                "java.exception",
                "java.lang.IllegalStateException: PORT is not set",
                None,
            )],
            reloads: &[],
        },
        Case {
            fixture: "java_main_class",
            noise: ANY,
            alerts: vec![err(
                "java.launcher",
                "Could not find or load main class com.example.Missing",
                None,
            )],
            reloads: &[],
        },
    ];
    for case in &cases {
        check_case(case);
    }
}

#[test]
fn go_module_and_ruby_errno_errors() {
    let cases = [
        Case {
            // No go.mod; then a go.mod with a syntax error, whose place is on the line
            // after `go: errors parsing go.mod:` (written with it, so not interleaved).
            fixture: "go_module_error",
            noise: &[0, 3],
            alerts: vec![
                err(
                    "go.module_error",
                    "go.mod file not found in current directory or any parent directory; see 'go help modules'",
                    None,
                ),
                err(
                    "go.module_error",
                    "syntax error (unterminated block started at /tmp/corral-fixtures/go_module_error/go.mod:5:1)",
                    Some("/tmp/corral-fixtures/go_module_error/go.mod:6"),
                ),
            ],
            reloads: &[],
        },
        Case {
            // Ruby 3.1 prints the cause (`Connection refused … (Errno::ECONNREFUSED)`)
            // after the frames: one alert, at the caller in user code.
            fixture: "ruby_errno",
            noise: ANY,
            alerts: vec![err(
                "ruby.exception",
                "Errno::ECONNREFUSED: Failed to open TCP connection to 127.0.0.1:9 (Connection refused - connect(2) for 127.0.0.1:9)",
                Some("client.rb:5"),
            )
            // The cause's `from` frames (the same calls again) are not the exception's.
            .with(&[
                "function: fetch_status",
                "cause: Errno::ECONNREFUSED: Connection refused - connect(2) for 127.0.0.1:9",
                "frame: client.rb:5 in fetch_status",
                "frame: client.rb:8 in <main>",
            ])],
            reloads: &[],
        },
        Case {
            fixture: "ruby_enoent",
            noise: ANY,
            alerts: vec![err(
                "ruby.exception",
                "Errno::ENOENT: No such file or directory @ rb_sysopen - config/missing.yml",
                Some("-e:1"),
            )
            .with(&["function: read", "frame: -e:1 in read", "frame: -e:1 in <main>"])],
            reloads: &[],
        },
    ];
    for case in &cases {
        check_case(case);
    }
}

/// Fixtures written from the tools' documented output, not captured: no .NET SDK
/// installs on this machine.
/// - `dotnet_build_error`: MSBuild's console logger, which `dotnet build` uses when its
///   output is redirected: `file(line,col): error CODE: message [project]`, then
///   `Build FAILED.` repeating the errors, the counts and `Time Elapsed` (as quoted in
///   dotnet/core#6219 and the .NET docs' build-error examples).
/// - `dotnet_sdk_errors`: NETSDK1045 as the SDK's targets print it, and MSBuild's own
///   `MSBUILD : error MSB1009: Project file does not exist.` with its `Switch:` line.
/// - `dotnet_watch`: `dotnet watch <emoji> message`, the messages of dotnet/sdk's
///   `MessageDescriptor` (src/BuiltInTools/Watch), `--verbose` for the build lines.
#[test]
fn documented_fixtures() {
    let cs1002 = || {
        err(
            "dotnet.build_error",
            "CS1002: ; expected",
            Some("/app/Api/Program.cs:8:31"),
        )
    };
    let cases = [
        Case {
            fixture: "dotnet_build_error",
            noise: ANY,
            alerts: vec![
                cs1002(),
                err(
                    "dotnet.build_error",
                    "CS0246: The type or namespace name 'OrderDto' could not be found (are you missing a using directive or an assembly reference?)",
                    Some("/app/Api/Services/OrderService.cs:42:17"),
                ),
            ],
            reloads: &[],
        },
        Case {
            fixture: "dotnet_sdk_errors",
            noise: ANY,
            alerts: vec![
                err(
                    "dotnet.build_error",
                    "NETSDK1045: The current .NET SDK does not support targeting .NET 9.0.  Either target .NET 8.0 or lower, or use a version of the .NET SDK that supports .NET 9.0. Download the .NET SDK from https://aka.ms/dotnet/download",
                    Some(
                        "/usr/share/dotnet/sdk/8.0.404/Sdks/Microsoft.NET.Sdk/targets/Microsoft.NET.TargetFrameworkInference.targets:166:5",
                    ),
                ),
                err(
                    "dotnet.build_error",
                    "MSB1009: Project file does not exist.",
                    None,
                ),
            ],
            reloads: &[],
        },
        Case {
            fixture: "dotnet_watch",
            noise: ANY,
            alerts: vec![
                cs1002(),
                err("dotnet.watch", "Exited with error code 134", None),
            ],
            reloads: &[
                (STARTED, "dotnet-watch", "Building /app/Api/Api.csproj ..."),
                (
                    SUCCEEDED,
                    "dotnet-watch",
                    "Build succeeded: /app/Api/Api.csproj",
                ),
                (
                    SUCCEEDED,
                    "dotnet-watch",
                    "C# and Razor changes applied in 23ms.",
                ),
                (
                    SUCCEEDED,
                    "dotnet-watch",
                    "C# and Razor changes applied in 41ms.",
                ),
                (
                    STARTED,
                    "dotnet-watch",
                    "Restarting application to apply changes ...",
                ),
            ],
        },
    ];
    for case in &cases {
        check_case(case);
    }
}

#[test]
fn every_fixture_is_tested() {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let source = include_str!("real_output.rs");
    for name in names {
        let stem = name.trim_end_matches(".txt");
        assert!(
            source.contains(&format!("\"{stem}\"")),
            "fixture {name} has no test"
        );
    }
}
