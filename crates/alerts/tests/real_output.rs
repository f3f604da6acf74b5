//! Verbatim output of real tools (scripts/capture-alert-fixtures.sh), fed line by line,
//! alone and interleaved with unrelated log lines, must give exactly the expected alerts.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use corral_alerts::{Alert, AlertRules, Scanner, Severity, Stream};

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

fn rules() -> &'static Arc<AlertRules> {
    static RULES: std::sync::OnceLock<Arc<AlertRules>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| Arc::new(AlertRules::defaults()))
}

/// Feeds `text` line by line (one line of noise after every `every` lines when
/// `every > 0`), then finishes, and returns the alerts.
fn scan(text: &str, every: usize) -> Vec<Alert> {
    let rules = rules();
    let mut scanner = Scanner::new(Arc::clone(rules), "process:web");
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
    out
}

/// Feeds `text` as the supervisor does: while no group is open, lines before the next
/// one with a rule's literal ([`AlertRules::next_candidate`]) are skipped unseen.
fn scan_candidates(text: &str) -> Vec<Alert> {
    let rules = rules();
    let mut scanner = Scanner::new(Arc::clone(rules), "process:web");
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
    out
}

struct Expect<'a> {
    rule: &'a str,
    category: &'a str,
    severity: Severity,
    message: &'a str,
    location: Option<&'a str>,
    /// The rest of the alert, as [`context`] renders it.
    context: &'a [&'a str],
}

/// What an alert says beyond message and location, a line per field: `function: …`,
/// `code: …`, `cause: …`, then `frame: …` for each of its frames.
fn context(a: &Alert) -> Vec<String> {
    let fields = [
        ("function", &a.function),
        ("code", &a.code),
        ("cause", &a.cause),
    ];
    let mut lines: Vec<String> = fields
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}: {v}")))
        .collect();
    lines.extend(a.frames.iter().map(|f| format!("frame: {f}")));
    lines
}

fn check(name: &str, expected: &[Expect<'_>]) {
    check_with(name, &[0, 1, 3], expected);
}

fn check_with(name: &str, noise_every: &[usize], expected: &[Expect<'_>]) {
    let text = fixture(name);
    // Interleaving must change nothing but the noise (which raises no alert).
    for &every in noise_every {
        let alerts = scan(&text, every);
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
