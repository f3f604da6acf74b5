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

use corral_alerts::{Alert, AlertRules, Reload, ReloadPhase, Scanner, Severity, Stream};

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
    static RULES: std::sync::OnceLock<Arc<AlertRules>> = std::sync::OnceLock::new();
    let rules = RULES.get_or_init(|| Arc::new(AlertRules::defaults()));
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
    (out, scanner.take_reloads())
}

#[derive(Clone, Copy)]
struct Expect<'a> {
    rule: &'a str,
    category: &'a str,
    severity: Severity,
    message: &'a str,
    location: Option<&'a str>,
}

/// An error alert of `rule` (whose category is the part before the dot).
fn err<'a>(rule: &'a str, message: &'a str, location: Option<&'a str>) -> Expect<'a> {
    Expect {
        rule,
        category: rule.split('.').next().unwrap_or(rule),
        severity: Severity::Error,
        message,
        location,
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
            },
            Expect {
                rule: "rust.compile_error",
                category: "rust",
                severity: E,
                message: "mismatched types",
                location: Some("src/main.rs:3:21"),
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
        }],
    );
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
                ),
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
            )],
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
            )],
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
            )],
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
            )],
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
            )],
            reloads: &[],
        },
        Case {
            fixture: "ruby_enoent",
            noise: ANY,
            alerts: vec![err(
                "ruby.exception",
                "Errno::ENOENT: No such file or directory @ rb_sysopen - config/missing.yml",
                Some("-e:1"),
            )],
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
