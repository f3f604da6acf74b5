//! Behaviour of the scanner and the alert log, line by line.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use corral_alerts::{
    Alert, AlertLog, AlertQuery, AlertRules, Limits, Recorded, Reload, ReloadPhase, Scanner,
    Severity, Stream,
};
use corral_config::{AlertPattern, AlertSettings, AlertSeverity};

mod common;
use common::port;

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn defaults() -> Arc<AlertRules> {
    static RULES: OnceLock<Arc<AlertRules>> = OnceLock::new();
    Arc::clone(RULES.get_or_init(|| Arc::new(AlertRules::defaults())))
}

fn scan_with(rules: Arc<AlertRules>, lines: &[&str]) -> Vec<Alert> {
    let mut scanner = Scanner::new(rules, "process:web");
    let mut out = Vec::new();
    for line in lines {
        scanner.feed(line, Stream::Stderr, t(0), &mut out);
    }
    scanner.finish(&mut out);
    out
}

fn scan(lines: &[&str]) -> Vec<Alert> {
    scan_with(defaults(), lines)
}

/// The one alert `lines` give.
fn one(lines: &[&str]) -> Alert {
    let mut alerts = scan(lines);
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    alerts.remove(0)
}

fn loc(a: &Alert) -> String {
    a.location
        .as_ref()
        .map(|l| l.to_string())
        .unwrap_or_default()
}

/// Lines of busy dev servers and builds that say nothing went wrong, some of them
/// reload signals.
fn ordinary() -> Vec<String> {
    let port = port();
    [
        &format!("Server listening on port {port}"),
        "webpack 5.97.1 compiled successfully in 312 ms",
        "Compiling...",
        &format!(r#"INFO:     127.0.0.1:{port} - "GET /api HTTP/1.1" 500 Internal Server Error"#),
        "[nodemon] restarting due to changes...",
        "[nodemon] clean exit - waiting for changes before restart",
        "  VITE v5.4.0  ready in 300 ms",
        "INFO Started server process [12]",
        "npm notice New major version of npm available! 10.8.2 -> 11.0.0",
        "npm notice Changelog: https://github.com/npm/cli/releases/tag/v11.0.0",
        "npm warn deprecated inflight@1.0.6: This module is not supported, and leaks memory.",
        "Watching for file changes with StatReloader",
        "Performing system checks...",
        "System check identified no issues (0 silenced).",
        &format!("Starting development server at http://127.0.0.1:{port}/"),
        "INFO:     Application startup complete.",
        " * Debugger is active!",
        // Builds starting and succeeding.
        "building...",
        "running...",
        "[Running 'cargo run']",
        "   Compiling corral v0.1.0 (/app)",
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.52s",
        "> web@1.0.0 dev",
        "> vite",
        "yarn run v1.22.22",
        "$ node build.js",
        "➤ YN0000: ┌ Resolution step",
        "➤ YN0000: · Done in 0s 76ms",
        "info Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.",
        "Starting the development server...",
        "[INFO] Building app 1.0",
        "[INFO] BUILD SUCCESS",
        "> Task :compileJava",
        "BUILD SUCCESSFUL in 2s",
        "  Determining projects to restore...",
        "Build succeeded.",
        "    0 Warning(s)",
        "    0 Error(s)",
        "dotnet watch 🔨 Building /app/Api.csproj ...",
        "8:24:08 AM - File change detected. Starting incremental compilation...",
        "8:24:12 AM - Found 0 errors. Watching for file changes.",
        "10:32:11 AM [vite] (client) hmr update /src/App.tsx",
        "go: downloading github.com/acme/billing v1.2.3",
        "go: finding module for package github.com/acme/billing",
        // The word error, or a dot and a colon, in lines that are no error.
        "INFO retrying after error budget check",
        "DEBUG error_count=0 warnings=0",
        "WARN error rate above 1% (1.2%) for /api/orders",
        "2024-05-05 14:06:59 INFO worker: 0 errors, 3 warnings",
        "app.config.settings: loaded from env",
        "user.profile.updated: id=3",
        "logging.handlers.RotatingFileHandler: rotated app.log",
        "error budget: 99.9% left",
        "See https://webpack.js.org/concepts#loaders",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect()
}

#[test]
fn ordinary_lines_raise_nothing() {
    let alerts = scan(&[
        r#"127.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /errors HTTP/1.1" 200 12"#,
        "2024-10-10 INFO worker: processed 12 jobs, 0 errors",
        "error_count=0 warnings=none",
        "  VITE v5.4.0  ready in 312 ms",
        "",
    ]);
    assert!(alerts.is_empty(), "{alerts:#?}");
    // Each alone (a line may be judged by the one before it), and all in a row.
    let ordinary = ordinary();
    let ordinary: Vec<&str> = ordinary.iter().map(String::as_str).collect();
    for line in &ordinary {
        let alerts = scan(&[line]);
        assert!(alerts.is_empty(), "{line}: {alerts:#?}");
    }
    let alerts = scan(&ordinary);
    assert!(alerts.is_empty(), "{alerts:#?}");
}

#[test]
fn an_access_log_line_inside_a_traceback_neither_splits_nor_joins_it() {
    let alerts = scan(&[
        "Traceback (most recent call last):",
        r#"  File "/app/main.py", line 3, in <module>"#,
        r#"127.0.0.1 - - [10/Oct/2024] "GET / HTTP/1.1" 500 -"#,
        "    run()",
        "2024-10-10 12:00:00 ERROR db: pool exhausted",
        r#"  File "/app/jobs.py", line 8, in run"#,
        "    raise KeyError(name)",
        "KeyError: 'job'",
        "next line",
    ]);
    assert_eq!(alerts.len(), 2, "{alerts:#?}");
    // The interleaved ERROR line is an alert of its own, reported as it came.
    assert_eq!(alerts[0].rule, "generic.error_log");
    assert_eq!(alerts[0].message, "db: pool exhausted");
    let tb = &alerts[1];
    assert_eq!(tb.rule, "python.traceback");
    assert_eq!(tb.message, "KeyError: 'job'");
    assert_eq!(loc(tb), "/app/jobs.py:8");
    assert_eq!(tb.lines.len(), 6, "{:#?}", tb.lines);
    assert!(
        !tb.lines
            .iter()
            .any(|l| l.contains("GET /") || l.contains("pool"))
    );
}

#[test]
fn chained_python_exceptions_are_one_alert_with_the_last_exception() {
    let a = one(&[
        "Traceback (most recent call last):",
        r#"  File "/app/a.py", line 2, in <module>"#,
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        r#"  File "/app/a.py", line 4, in <module>"#,
        "ValueError: bad",
    ]);
    assert_eq!(a.message, "ValueError: bad");
    // The location is the root cause's (the first exception of the chain), named too.
    assert_eq!(loc(&a), "/app/a.py:2");
    assert_eq!(a.cause.as_deref(), Some("KeyError: 'x'"));
}

#[test]
fn ansi_colours_are_stripped_before_matching() {
    let a = one(&[
        "\x1b[0m\x1b[1m\x1b[38;5;9merror[E0425]\x1b[0m\x1b[0m\x1b[1m: cannot find value `x` in this scope\x1b[0m",
        "\x1b[0m \x1b[0m\x1b[0m\x1b[1m\x1b[38;5;12m--> \x1b[0m\x1b[0msrc/lib.rs:4:5\x1b[0m",
        "",
    ]);
    assert_eq!(a.rule, "rust.compile_error");
    assert_eq!(a.message, "cannot find value `x` in this scope");
    assert_eq!(loc(&a), "src/lib.rs:4:5");
    assert!(
        a.lines.iter().all(|l| !l.contains('\x1b')),
        "{:#?}",
        a.lines
    );
}

#[test]
fn a_progress_bar_line_is_judged_by_its_last_text() {
    let alerts = scan(&["building 10%\rbuilding 50%\rERROR build failed: out of disk"]);
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].message, "build failed: out of disk");
    assert_eq!(alerts[0].lines, vec!["ERROR build failed: out of disk"]);
    // An error overwritten by a later progress frame is gone from the screen.
    assert!(scan(&["ERROR transient\rbuilding 60%"]).is_empty());
}

#[test]
fn single_line_rules_of_every_ecosystem() {
    // The port in the address lines is a free one read back from the OS: nothing fixed.
    let port = port();
    let ruby_refused = format!(
        "E, [2024-05-05T14:06:59.123 #42] ERROR -- : Connection refused - connect(2) for 127.0.0.1:{port} (Errno::ECONNREFUSED)"
    );
    let ruby_in_use =
        format!("Errno::EADDRINUSE: Address already in use - bind(2) for \"0.0.0.0\" port {port}");
    let in_use = format!("Error: listen EADDRINUSE: address already in use :::{port}");
    let server_in_use = format!("[server] listen EADDRINUSE :::{port}");
    let refused = format!("connect ECONNREFUSED 127.0.0.1:{port}");
    let cases: &[(&str, &str, Severity, &str, &str)] = &[
        (
            "src/a.ts(3,7): error TS2322: Type 'x' is not assignable.",
            "typescript.error",
            Severity::Error,
            "Type 'x' is not assignable.",
            "src/a.ts:3:7",
        ),
        (
            "./main.go:12:5: undefined: foo",
            "go.build_error",
            Severity::Error,
            "undefined: foo",
            "./main.go:12:5",
        ),
        (
            "FAIL\texample.com/m/pkg\t0.012s",
            "go.package_fail",
            Severity::Error,
            "example.com/m/pkg",
            "",
        ),
        (
            "main.c:3:5: error: expected ';' before '}' token",
            "c.compile_error",
            Severity::Error,
            "expected ';' before '}' token",
            "main.c:3:5",
        ),
        (
            "main.c:9:1: warning: unused variable 'x'",
            "c.warning",
            Severity::Warning,
            "unused variable 'x'",
            "main.c:9:1",
        ),
        (
            "/app/x.py:3: DeprecationWarning: the imp module is deprecated",
            "python.warning",
            Severity::Warning,
            "DeprecationWarning: the imp module is deprecated",
            "/app/x.py:3",
        ),
        (
            "(node:4242) [DEP0005] DeprecationWarning: Buffer() is deprecated",
            "node.warning",
            Severity::Warning,
            "DeprecationWarning: Buffer() is deprecated",
            "",
        ),
        (
            "(node:4242) UnhandledPromiseRejectionWarning: Error: boom",
            "node.unhandled_rejection",
            Severity::Error,
            "Error: boom",
            "",
        ),
        (&in_use, "generic.error_line", Severity::Error, &in_use, ""),
        (
            &server_in_use,
            "generic.address_in_use",
            Severity::Error,
            &server_in_use,
            "",
        ),
        (
            &refused,
            "generic.connection_refused",
            Severity::Error,
            &refused,
            "",
        ),
        (
            "Segmentation fault (core dumped)",
            "generic.segfault",
            Severity::Error,
            "Segmentation fault (core dumped)",
            "",
        ),
        (
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
            "generic.out_of_memory",
            Severity::Error,
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
            "",
        ),
        (
            "2024-01-01 12:00:00 FATAL: database is down",
            "generic.fatal",
            Severity::Error,
            "database is down",
            "",
        ),
        (
            "fatal: not a git repository",
            "generic.fatal",
            Severity::Error,
            "not a git repository",
            "",
        ),
        (
            "[2024-01-01T00:00:00Z ERROR api::db] connection lost",
            "generic.error_log",
            Severity::Error,
            "api::db] connection lost",
            "",
        ),
        (
            "ERROR:root:could not send mail",
            "generic.error_log",
            Severity::Error,
            "root:could not send mail",
            "",
        ),
        (
            "time=2024-01-01 level=error msg=\"cache miss storm\" n=3",
            "generic.error_log",
            Severity::Error,
            "cache miss storm",
            "",
        ),
        (
            r#"{"level":"error","ts":1,"msg":"payment failed"}"#,
            "generic.error_log",
            Severity::Error,
            "payment failed",
            "",
        ),
        // The tools of the recall rules, from their documented output.
        (
            "go: cannot find main module, but found .git/config in /app",
            "go.module_error",
            Severity::Error,
            "cannot find main module, but found .git/config in /app",
            "",
        ),
        (
            "go: error loading module requirements",
            "go.module_error",
            Severity::Error,
            "error loading module requirements",
            "",
        ),
        (
            "django.core.exceptions.ImproperlyConfigured: The SECRET_KEY setting must not be empty.",
            "python.exception",
            Severity::Error,
            "django.core.exceptions.ImproperlyConfigured: The SECRET_KEY setting must not be empty.",
            "",
        ),
        (
            "werkzeug.exceptions.BadRequestKeyError: 400 Bad Request: The browser (or proxy) sent a request that this server could not understand.",
            "python.exception",
            Severity::Error,
            "werkzeug.exceptions.BadRequestKeyError: 400 Bad Request: The browser (or proxy) sent a request that this server could not understand.",
            "",
        ),
        (
            "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection refused",
            "python.exception",
            Severity::Error,
            "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) connection refused",
            "",
        ),
        (
            &ruby_refused,
            "ruby.errno",
            Severity::Error,
            &ruby_refused,
            "",
        ),
        (
            &ruby_in_use,
            "ruby.errno",
            Severity::Error,
            &ruby_in_use,
            "",
        ),
        (
            "Error: Unable to access jarfile build/libs/app.jar",
            "java.launcher",
            Severity::Error,
            "Unable to access jarfile build/libs/app.jar",
            "",
        ),
        (
            "[ERROR] /app/src/main/java/com/example/App.java:[3,5] cannot find symbol",
            "java.compile_error",
            Severity::Error,
            "cannot find symbol",
            "/app/src/main/java/com/example/App.java:3:5",
        ),
        (
            "error Couldn't find package \"left-pad@^9.9.9\" on the \"npm\" registry.",
            "node.yarn",
            Severity::Error,
            "Couldn't find package \"left-pad@^9.9.9\" on the \"npm\" registry.",
            "",
        ),
        (
            "webpack 5.97.1 compiled with 2 errors in 30 ms",
            "bundler.webpack_failed",
            Severity::Error,
            "webpack 5.97.1 compiled with 2 errors",
            "",
        ),
        (
            "10:32:11 AM [vite] (ssr) Internal server error: Transform failed with 1 error:",
            "bundler.vite",
            Severity::Error,
            "Transform failed with 1 error:",
            "",
        ),
        (
            "10:32:11 AM [vite] (client) Pre-transform error (/app/index.html): Unable to parse HTML",
            "bundler.vite",
            Severity::Error,
            "Unable to parse HTML",
            "",
        ),
        (
            "10:32:11 AM [vite] server restart failed",
            "bundler.vite",
            Severity::Error,
            "server restart failed",
            "",
        ),
        (
            "Program.cs(3,5): error CS1002: ; expected [/p/x.csproj]",
            "dotnet.build_error",
            Severity::Error,
            "CS1002: ; expected",
            "Program.cs:3:5",
        ),
        (
            "error NETSDK1045: The current .NET SDK does not support targeting .NET 9.0.",
            "dotnet.build_error",
            Severity::Error,
            "NETSDK1045: The current .NET SDK does not support targeting .NET 9.0.",
            "",
        ),
        (
            "/app/Api.csproj : error NU1101: Unable to find package Acme.Billing. No packages exist with this id in source(s): nuget.org",
            "dotnet.build_error",
            Severity::Error,
            "NU1101: Unable to find package Acme.Billing. No packages exist with this id in source(s): nuget.org",
            "",
        ),
        (
            "dotnet watch ❌ [Api (net8.0)] Exited with error code 1",
            "dotnet.watch",
            Severity::Error,
            "Exited with error code 1",
            "",
        ),
    ];
    for &(line, rule, severity, message, location) in cases {
        let a = one(&[line]);
        assert_eq!(
            (
                a.rule.as_str(),
                a.severity,
                a.message.as_str(),
                loc(&a).as_str()
            ),
            (rule, severity, message, location),
            "{line}"
        );
        assert_eq!(a.category, rule.split('.').next().unwrap());
    }
}

#[test]
fn multi_line_groups_of_other_ecosystems() {
    let ruby = one(&[
        "/usr/lib/ruby/gems/3.1.0/gems/rack-2.2.8/lib/rack/lint.rb:17:in `assert': env missing (Rack::Lint::LintError)",
        "\tfrom /usr/lib/ruby/gems/3.1.0/gems/rack-2.2.8/lib/rack/lint.rb:40:in `call'",
        "\tfrom /app/config.ru:5:in `block in <main>'",
    ]);
    assert_eq!(
        (ruby.rule.as_str(), ruby.message.as_str()),
        ("ruby.exception", "Rack::Lint::LintError: env missing")
    );
    assert_eq!(loc(&ruby), "/app/config.ru:5");

    let dotnet = one(&[
        "Unhandled exception. System.InvalidOperationException: Sequence contains no elements",
        "   at System.Linq.ThrowHelper.ThrowNoElementsException()",
        "   at System.Linq.Enumerable.First[TSource](IEnumerable`1 source)",
        "   at Api.Program.Main(String[] args) in /src/Api/Program.cs:line 14",
        "",
    ]);
    assert_eq!(dotnet.rule, "dotnet.exception");
    assert_eq!(
        dotnet.message,
        "System.InvalidOperationException: Sequence contains no elements"
    );
    assert_eq!(loc(&dotnet), "/src/Api/Program.cs:14");

    let vite = one(&[
        "12:00:01 PM [vite] Internal server error: Failed to resolve import \"./Missing\" from \"src/App.tsx\". Does the file exist?",
        "  Plugin: vite:import-analysis",
        "  File: /app/src/App.tsx:3:20",
        "  1  |  import React from 'react'",
        "12:00:02 PM [vite] page reload src/main.tsx",
    ]);
    assert_eq!(vite.rule, "bundler.vite");
    assert!(
        vite.message.starts_with("Failed to resolve import"),
        "{}",
        vite.message
    );
    assert_eq!(loc(&vite), "/app/src/App.tsx:3:20");

    let webpack = one(&[
        "ERROR in ./src/index.js 3:10",
        "Module parse failed: Unexpected token (3:10)",
        "You may need an appropriate loader to handle this file type.",
        "",
        "webpack 5.89.0 compiled with 1 error in 210 ms",
    ]);
    assert_eq!(
        (webpack.rule.as_str(), webpack.message.as_str()),
        (
            "bundler.webpack",
            "Module parse failed: Unexpected token (3:10)"
        )
    );
    assert_eq!(loc(&webpack), "./src/index.js:3:10");

    let esbuild = one(&[
        "✘ [ERROR] Could not resolve \"left-pad\"",
        "",
        "    src/index.ts:1:20:",
        "      1 │ import pad from \"left-pad\";",
        "",
        "1 error",
    ]);
    assert_eq!(
        (esbuild.rule.as_str(), esbuild.message.as_str()),
        ("bundler.esbuild", "Could not resolve \"left-pad\"")
    );
    assert_eq!(loc(&esbuild), "src/index.ts:1:20");

    let next = one(&[
        "Failed to compile.",
        "",
        "./src/app/page.tsx:4:7",
        "Type error: Type 'number' is not assignable to type 'string'.",
        "",
    ]);
    assert_eq!(
        (next.rule.as_str(), next.message.as_str()),
        (
            "bundler.nextjs",
            "Type error: Type 'number' is not assignable to type 'string'."
        )
    );
    assert_eq!(loc(&next), "./src/app/page.tsx:4:7");

    let gotest = one(&[
        "--- FAIL: TestParse (0.00s)",
        "    parse_test.go:12: got 3, want 4",
        "FAIL",
    ]);
    assert_eq!(
        (gotest.rule.as_str(), gotest.message.as_str()),
        ("go.test_fail", "TestParse: got 3, want 4")
    );
    assert_eq!(loc(&gotest), "parse_test.go:12");

    let old_panic = one(&["thread 'main' panicked at 'boom', src/main.rs:2:5"]);
    assert_eq!(
        (old_panic.message.as_str(), loc(&old_panic).as_str()),
        ("boom", "src/main.rs:2:5")
    );

    let warn = one(&[
        "warning: unused variable: `x`",
        " --> src/main.rs:2:9",
        "  |",
        "",
    ]);
    assert_eq!(
        (warn.rule.as_str(), warn.severity),
        ("rust.warning", Severity::Warning)
    );
    // cargo's summaries repeat the diagnostics and are not alerts.
    assert!(
        scan(&[
            "warning: `app` (bin \"app\") generated 1 warning",
            "error: could not compile `app` (bin \"app\") due to 1 previous error"
        ])
        .is_empty()
    );
}

/// The alerts and reload signals of `lines`.
fn scan_reloads(lines: &[&str]) -> (Vec<Alert>, Vec<Reload>) {
    let mut scanner = Scanner::new(defaults(), "process:web");
    let mut out = Vec::new();
    for line in lines {
        scanner.feed(line, Stream::Stdout, t(0), &mut out);
    }
    scanner.finish(&mut out);
    (out, scanner.take_reloads())
}

#[test]
fn reload_signals_per_tool_and_the_failures_that_are_none() {
    use ReloadPhase::{Started, Succeeded};
    // (line, the signal it is); `None`: a failure, or neither.
    let cases: &[(&str, Option<(ReloadPhase, &str)>)] = &[
        (
            "10:32:11 AM [vite] (client) hmr update /src/App.tsx, /src/App.css",
            Some((Succeeded, "vite")),
        ),
        (
            "10:32:11 AM [vite] hmr update /src/App.tsx (x2)",
            Some((Succeeded, "vite")),
        ),
        (
            "10:32:11 AM [vite] (ssr) page reload src/routes/+page.svelte",
            Some((Succeeded, "vite")),
        ),
        (
            "10:32:11 AM [vite] server restarted.",
            Some((Succeeded, "vite")),
        ),
        (
            "10:32:11 AM [vite] vite.config.ts changed, restarting server...",
            Some((Started, "vite")),
        ),
        (
            "10:32:11 AM [vite] (client) Pre-transform error: Failed to resolve import",
            None,
        ),
        (
            "10:32:11 AM [vite] error while updating dependencies:",
            None,
        ),
        (
            "There is a new version of the pre-bundle for \"react\", a page reload is going to ask for it.",
            None,
        ),
        (
            "webpack 5.97.1 compiled successfully in 312 ms",
            Some((Succeeded, "webpack")),
        ),
        (
            "client (webpack 5.97.1) compiled successfully in 40 ms",
            Some((Succeeded, "webpack")),
        ),
        (
            "webpack 5.97.1 compiled with 1 warning in 30 ms",
            Some((Succeeded, "webpack")),
        ),
        ("webpack 5.97.1 compiled with 2 errors in 30 ms", None),
        (
            "webpack 5.97.1 compiled with 1 error and 1 warning in 30 ms",
            None,
        ),
        ("Compiling...", Some((Started, "webpack"))),
        ("Compiled successfully!", Some((Succeeded, "webpack"))),
        ("Compiled with warnings.", Some((Succeeded, "webpack"))),
        ("Failed to compile.", None),
        (" ○ Compiling /about ...", Some((Started, "nextjs"))),
        (
            " ✓ Compiled /about in 1.2s (512 modules)",
            Some((Succeeded, "nextjs")),
        ),
        (" ✓ Compiled in 300ms", Some((Succeeded, "nextjs"))),
        (" ⨯ ./app/page.tsx:3:1", None),
        (
            "[8:24:03 AM] Starting compilation in watch mode...",
            Some((Started, "tsc")),
        ),
        (
            "8:24:08 AM - File change detected. Starting incremental compilation...",
            Some((Started, "tsc")),
        ),
        (
            "8:24:12 AM - Found 0 errors. Watching for file changes.",
            Some((Succeeded, "tsc")),
        ),
        (
            "8:24:11 AM - Found 1 error. Watching for file changes.",
            None,
        ),
        (
            "[8:24:11 AM] Found 3 errors. Watching for file changes.",
            None,
        ),
        (
            "WARNING:  StatReload detected changes in 'app/main.py'. Reloading...",
            Some((Started, "uvicorn")),
        ),
        (
            "WARNING:  WatchFiles detected changes in 'main.py', 'db.py'. Reloading...",
            Some((Started, "uvicorn")),
        ),
        (
            "INFO:     Application startup complete.",
            Some((Succeeded, "uvicorn")),
        ),
        ("INFO:     Application shutdown complete.", None),
        ("ERROR:    Application startup failed. Exiting.", None),
        (
            "/app/shop/views.py changed, reloading.",
            Some((Started, "django")),
        ),
        (
            "System check identified no issues (0 silenced).",
            Some((Succeeded, "django")),
        ),
        ("System check identified 1 issue (0 silenced).", None),
        (
            " * Detected change in '/app/app.py', reloading",
            Some((Started, "flask")),
        ),
        (" * Restarting with stat", Some((Started, "flask"))),
        (
            " * Restarting with watchdog (inotify)",
            Some((Started, "flask")),
        ),
        (" * Debugger is active!", Some((Succeeded, "flask"))),
        (
            "[nodemon] restarting due to changes...",
            Some((Started, "nodemon")),
        ),
        (
            "[nodemon] starting `node server.js`",
            Some((Succeeded, "nodemon")),
        ),
        (
            "[nodemon] app crashed - waiting for file changes before starting...",
            None,
        ),
        (
            "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.52s",
            Some((Succeeded, "cargo")),
        ),
        (
            "    Finished release [optimized] target(s) in 12.04s",
            Some((Succeeded, "cargo")),
        ),
        ("   Compiling corral v0.1.0 (/app)", None),
        (
            "error: could not compile `app` (bin \"app\") due to 1 previous error",
            None,
        ),
        ("[Running 'cargo run']", Some((Started, "cargo-watch"))),
        (
            "[Finished running. Exit status: 0]",
            Some((Succeeded, "cargo-watch")),
        ),
        ("[Finished running. Exit status: 101]", None),
        ("building...", Some((Started, "air"))),
        ("[15:04:05] building...", Some((Started, "air"))),
        ("running...", Some((Succeeded, "air"))),
        (
            "dotnet watch 🔥 Hot reload succeeded.",
            Some((Succeeded, "dotnet-watch")),
        ),
        (
            "dotnet watch 🔥 [Api (net8.0)] C# and Razor changes applied in 23ms.",
            Some((Succeeded, "dotnet-watch")),
        ),
        (
            "dotnet watch 🔥 Static asset changes applied in 5ms.",
            Some((Succeeded, "dotnet-watch")),
        ),
        (
            "dotnet watch ⌚ File changed: ./Program.cs.",
            Some((Started, "dotnet-watch")),
        ),
        (
            "dotnet watch ⌚ Restarting application to apply changes ...",
            Some((Started, "dotnet-watch")),
        ),
        (
            "dotnet watch 🔥 Unable to apply changes due to compilation errors.",
            None,
        ),
        ("dotnet watch ❌ Exited with error code 1", None),
    ];
    for &(line, want) in cases {
        let (alerts, reloads) = scan_reloads(&[line]);
        let got: Vec<(ReloadPhase, &str)> =
            reloads.iter().map(|r| (r.phase, r.tool.as_str())).collect();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{line}");
        if want.is_some() {
            // A reload line is never an alert; it is cleaned and trimmed like one.
            assert!(alerts.is_empty(), "{line}: {alerts:#?}");
            assert_eq!(reloads[0].line, line.trim(), "{line}");
            assert_eq!((reloads[0].stream, reloads[0].at), (Stream::Stdout, t(0)));
        }
    }
}

#[test]
fn a_failed_air_build_is_not_followed_by_a_success() {
    let (_, reloads) = scan_reloads(&[
        "main.go has changed",
        "building...",
        "./main.go:6:17: undefined: port",
        "failed to build, error: exit status 1",
        // air without stop_on_error runs the old binary anyway.
        "running...",
        "building...",
        "running...",
    ]);
    let got: Vec<ReloadPhase> = reloads.iter().map(|r| r.phase).collect();
    use ReloadPhase::{Started, Succeeded};
    assert_eq!(got, vec![Started, Started, Succeeded]);
}

#[test]
fn reload_signals_are_taken_once_and_bounded() {
    let mut scanner = Scanner::new(defaults(), "process:web");
    let mut out = Vec::new();
    assert!(scanner.take_reloads().is_empty());
    for i in 0..1000 {
        let line = format!(
            "\x1b[2m1:55:{:02} PM\x1b[22m \x1b[36m[vite]\x1b[39m \x1b[32mhmr update \x1b[39m/src/C{i}.tsx",
            i % 60
        );
        scanner.feed(&line, Stream::Stdout, t(i), &mut out);
    }
    assert!(out.is_empty() && !scanner.pending());
    let reloads = scanner.take_reloads();
    // The newest are kept, in order, without their colours.
    assert!(
        reloads.len() <= 256 && reloads.len() >= 128,
        "{}",
        reloads.len()
    );
    assert_eq!(
        reloads.last().unwrap().line,
        "1:55:39 PM [vite] hmr update /src/C999.tsx"
    );
    assert!(reloads.windows(2).all(|w| w[0].at < w[1].at));
    assert!(scanner.take_reloads().is_empty());
}

#[test]
fn a_summary_is_an_alert_only_when_its_errors_were_not() {
    let block = [
        "ERROR in ./src/index.js 3:17",
        "Module parse failed: Unexpected token (3:17)",
        "",
        "webpack 5.97.1 compiled with 1 error in 30 ms",
    ];
    let alerts = scan(&block);
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].rule, "bundler.webpack");
    // With `stats: 'summary'` webpack prints only the summary: then it is the alert,
    // every time.
    let summary = "webpack 5.97.1 compiled with 1 error in 30 ms";
    let alerts = scan(&[summary, "webpack 5.97.1 compiled with 1 error in 41 ms"]);
    assert_eq!(alerts.len(), 2, "{alerts:#?}");
    assert!(alerts.iter().all(|a| a.rule == "bundler.webpack_failed"
        && a.message == "webpack 5.97.1 compiled with 1 error"));
    // An error of an earlier build does not hide this build's summary.
    let mut lines = block.to_vec();
    lines.extend(["webpack 5.97.1 compiled successfully in 20 ms", summary]);
    let rules: Vec<String> = scan(&lines).into_iter().map(|a| a.rule).collect();
    assert_eq!(rules, vec!["bundler.webpack", "bundler.webpack_failed"]);
}

#[test]
fn tool_blocks_from_documented_output() {
    // (lines, rule, message, location)
    let cases: &[(&[&str], &str, &str, &str)] = &[
        (
            // Gradle 7+: the line after `What went wrong` and its first `>` cause.
            &[
                "FAILURE: Build failed with an exception.",
                "",
                "* What went wrong:",
                "Could not resolve all files for configuration ':app:compileClasspath'.",
                "> Could not find com.acme:billing-client:2.1.0.",
                "  Required by:",
                "      project :app",
                "",
                "* Try:",
                "> Run with --stacktrace option to get the stack trace.",
                "> Run with --info or --debug option to get more log output.",
                "",
                "BUILD FAILED in 2s",
            ],
            "java.build_failed",
            "Could not resolve all files for configuration ':app:compileClasspath': Could not find com.acme:billing-client:2.1.0.",
            "",
        ),
        (
            &[
                "BUILD FAILED",
                "/app/build.xml:12: Warning: Could not find file /app/lib/billing.jar to copy.",
                "",
                "Total time: 0 seconds",
            ],
            "java.build_failed",
            "Warning: Could not find file /app/lib/billing.jar to copy.",
            "/app/build.xml:12",
        ),
        (
            // babel-loader: the message is the SyntaxError, not the loader's line.
            &[
                "ERROR in ./src/App.js",
                "Module build failed (from ./node_modules/babel-loader/lib/index.js):",
                "SyntaxError: /app/src/App.js: Unexpected token (3:17)",
                "",
            ],
            "bundler.webpack",
            "SyntaxError: /app/src/App.js: Unexpected token (3:17)",
            "",
        ),
        (
            // ts-loader: the module's location line, then its own.
            &[
                "ERROR in /app/src/App.tsx",
                "./src/App.tsx 3:7-13",
                "[tsl] ERROR in /app/src/App.tsx(3,7)",
                "      TS2322: Type 'string' is not assignable to type 'number'.",
                "",
            ],
            "bundler.webpack",
            "TS2322: Type 'string' is not assignable to type 'number'.",
            "./src/App.tsx:3:7",
        ),
        (
            // fork-ts-checker-webpack-plugin.
            &[
                "ERROR in ./src/App.tsx:3:7",
                "TS2322: Type 'string' is not assignable to type 'number'.",
                "    1 | import React from 'react';",
                "",
            ],
            "bundler.webpack",
            "TS2322: Type 'string' is not assignable to type 'number'.",
            "./src/App.tsx:3:7",
        ),
        (
            &[
                "➤ YN0000: ┌ Link step",
                "➤ YN0007: │ sharp@npm:0.33.0 must be built because it never has been before or the last one failed",
                "➤ YN0009: │ sharp@npm:0.33.0 couldn't be built successfully (exit code 1, logs can be found here: /tmp/xfs-1/build.log)",
                "➤ YN0000: └ Completed in 2s",
                "➤ YN0000: · Failed with errors in 3s 12ms",
            ],
            "node.yarn",
            "sharp@npm:0.33.0 couldn't be built successfully (exit code 1, logs can be found here: /tmp/xfs-1/build.log)",
            "",
        ),
        (
            // npm 6's lifecycle failure: the first line that is not a detail.
            &[
                "npm ERR! code ELIFECYCLE",
                "npm ERR! errno 1",
                "npm ERR! web@1.0.0 build: `node build.js`",
                "npm ERR! Exit status 1",
                "npm ERR! ",
                "npm ERR! Failed at the web@1.0.0 build script.",
            ],
            "node.npm",
            "web@1.0.0 build: `node build.js`",
            "",
        ),
        (
            &[
                "go: errors parsing go.mod:",
                "/app/go.mod:3: unknown directive: requir",
            ],
            "go.module_error",
            "unknown directive: requir",
            "/app/go.mod:3",
        ),
    ];
    for &(lines, rule, message, location) in cases {
        let a = one(lines);
        assert_eq!(
            (a.rule.as_str(), a.message.as_str(), loc(&a).as_str()),
            (rule, message, location),
            "{lines:#?}"
        );
    }
    // Vite's optimizer failing: its message, and esbuild's error on a line of its own
    // (complete first, so reported first).
    let alerts = scan(&[
        "10:32:11 AM [vite] error while updating dependencies:",
        "Error: Build failed with 1 error:",
        "node_modules/left-pad/index.js:3:10: ERROR: Unexpected \"}\"",
        "    at failureErrorWithLog (/app/node_modules/esbuild/lib/main.js:1472:15)",
    ]);
    let got: Vec<(&str, &str)> = alerts
        .iter()
        .map(|a| (a.rule.as_str(), a.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("generic.error_log", "Unexpected \"}\""),
            ("bundler.vite", "Error: Build failed with 1 error:")
        ]
    );
}

#[test]
fn an_error_log_line_and_the_traceback_after_it_are_one_alert() {
    let traceback = [
        "Traceback (most recent call last):",
        r#"  File "/app/main.py", line 10, in get_item"#,
        "    return item[\"owner\"]",
        "KeyError: 'owner'",
    ];
    let header = "ERROR:    Exception in ASGI application";
    let alone = one(&traceback);
    for between in [
        &[][..],
        &["INFO:     127.0.0.1:5 - \"GET / HTTP/1.1\" 500"],
        &["", "x"],
    ] {
        let mut lines = vec![header];
        lines.extend(between);
        lines.extend(traceback);
        let a = one(&lines);
        // The traceback's alert, as without the header (same id), starting with it.
        assert_eq!(
            (a.rule.as_str(), a.id.as_str()),
            ("python.traceback", alone.id.as_str())
        );
        assert_eq!(
            (a.message.as_str(), loc(&a).as_str()),
            ("KeyError: 'owner'", "/app/main.py:10")
        );
        assert_eq!(a.lines[0], header);
        assert_eq!(a.lines.len(), 5, "{:#?}", a.lines);
    }
    // Three lines later it is an alert of its own, as before.
    let mut lines = vec![header, "a", "b", "c"];
    lines.extend(traceback);
    let rules: Vec<String> = scan(&lines).into_iter().map(|a| a.rule).collect();
    assert_eq!(rules, vec!["generic.error_log", "python.traceback"]);
    let header_alone = one(&[header]);
    assert_eq!(
        (header_alone.rule.as_str(), header_alone.message.as_str()),
        ("generic.error_log", "Exception in ASGI application")
    );
    // A JVM logger's line and the stack after it (Spring Boot).
    let a = one(&[
        "2024-05-05T14:06:59.123Z ERROR 4242 --- [main] o.s.boot.SpringApplication : Application run failed",
        "java.lang.IllegalStateException: PORT is not set",
        "\tat com.example.App.main(App.java:10)",
    ]);
    assert_eq!(
        (a.rule.as_str(), a.message.as_str(), loc(&a).as_str()),
        (
            "java.exception",
            "java.lang.IllegalStateException: PORT is not set",
            "App.java:10"
        )
    );
    // An error line that turns out not to be a stack: both are reported, in order.
    let alerts = scan(&[
        "ERROR sending mail failed",
        "TypeError: x is not a function",
    ]);
    let got: Vec<(&str, &str)> = alerts
        .iter()
        .map(|a| (a.rule.as_str(), a.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("generic.error_log", "sending mail failed"),
            ("generic.error_line", "TypeError: x is not a function")
        ]
    );
    // Other alerts after a header keep their order.
    let alerts = scan(&["ERROR first", "Segmentation fault (core dumped)"]);
    let rules: Vec<&str> = alerts.iter().map(|a| a.rule.as_str()).collect();
    assert_eq!(rules, vec!["generic.error_log", "generic.segfault"]);
}

#[test]
fn a_lone_error_log_line_is_reported_at_the_next_tick() {
    let mut scanner = Scanner::new(defaults(), "process:api");
    let mut out = Vec::new();
    scanner.feed("ERROR db: pool exhausted", Stream::Stderr, t(0), &mut out);
    assert!(out.is_empty() && scanner.pending());
    scanner.tick(t(0) + Duration::from_millis(99), &mut out);
    assert!(out.is_empty());
    scanner.tick(t(0) + Duration::from_millis(100), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].rule.as_str(), out[0].message.as_str()),
        ("generic.error_log", "db: pool exhausted")
    );
    assert!(!scanner.pending());
}

#[test]
fn an_idle_group_is_completed_by_tick_and_not_before() {
    let mut scanner = Scanner::new(defaults(), "process:api");
    let mut out = Vec::new();
    scanner.feed(
        "TypeError: x is not a function",
        Stream::Stderr,
        t(0),
        &mut out,
    );
    scanner.feed(
        "    at main (/app/a.js:1:1)",
        Stream::Stderr,
        t(0),
        &mut out,
    );
    assert!(scanner.pending());
    scanner.tick(t(0) + Duration::from_millis(999), &mut out);
    assert!(out.is_empty() && scanner.pending());
    scanner.tick(t(0) + Duration::from_millis(1000), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(loc(&out[0]), "/app/a.js:1:1");
    assert!(!scanner.pending());
}

#[test]
fn streams_have_separate_groups() {
    let mut scanner = Scanner::new(defaults(), "process:web");
    let mut out = Vec::new();
    scanner.feed(
        "Traceback (most recent call last):",
        Stream::Stderr,
        t(0),
        &mut out,
    );
    scanner.feed("GET / 200", Stream::Stdout, t(0), &mut out);
    scanner.feed(
        r#"  File "/app/x.py", line 1, in <module>"#,
        Stream::Stderr,
        t(0),
        &mut out,
    );
    scanner.feed("RuntimeError: stop", Stream::Stderr, t(0), &mut out);
    scanner.finish(&mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].stream, out[0].message.as_str()),
        (Stream::Stderr, "RuntimeError: stop")
    );
}

#[test]
fn a_group_is_bounded_in_lines_and_bytes() {
    let limits = Limits {
        max_group_lines: 10,
        max_line_bytes: 64,
        ..Limits::default()
    };
    let rules = Arc::new(AlertRules::with_limits(&AlertSettings::default(), limits).unwrap());
    let long_frame = format!("    at f (/app/{}.js:1:1)", "x".repeat(500));
    let mut lines = vec!["TypeError: deep".to_owned()];
    lines.extend((0..5000).map(|_| long_frame.clone()));
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let alerts = scan_with(rules, &refs);
    // The span limit ends a stack that never ends: 1000 lines per alert.
    assert_eq!(alerts.len(), 1, "{}", alerts.len());
    let a = &alerts[0];
    assert_eq!(a.lines.len(), 10);
    assert!(a.lines.iter().all(|l| l.len() <= 64), "{:#?}", a.lines);
    assert_eq!(a.lines.last().unwrap(), "[… 991 more lines]");
}

#[test]
fn a_one_mib_line_is_scanned_by_its_start_and_stored_capped() {
    let huge = format!("ERROR bundle failed {}", "a".repeat(1 << 20));
    let start = std::time::Instant::now();
    let a = one(&[&huge]);
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(a.rule, "generic.error_log");
    assert!(a.message.len() <= 500 && a.message.starts_with("bundle failed aaa"));
    assert!(a.lines[0].len() <= 1000);
    // The same past the scan limit is not looked at.
    let late = format!("{} ERROR late", "a".repeat(1 << 20));
    assert!(scan(&[&late]).is_empty());
}

#[test]
fn message_is_capped_at_a_char_boundary() {
    let a = one(&[&format!("ERROR {}", "é".repeat(400))]);
    assert!(
        a.message.len() <= 500 && a.message.ends_with('…'),
        "{}",
        a.message.len()
    );
}

fn settings(patterns: Vec<AlertPattern>, disable: &[&str]) -> AlertSettings {
    AlertSettings {
        patterns,
        disable: disable.iter().map(|s| s.to_string()).collect(),
        ..AlertSettings::default()
    }
}

#[test]
fn user_patterns_come_first_and_disable_takes_ids_and_categories() {
    let pattern = AlertPattern {
        id: "myapp.db_down".into(),
        regex: r"DB-(?P<msg>\d+) at (?P<file>\S+):(?P<line>\d+)".into(),
        severity: AlertSeverity::Warning,
        category: "myapp".into(),
    };
    let rules = Arc::new(
        AlertRules::with_config(&settings(vec![pattern], &["generic", "python.traceback"]))
            .unwrap(),
    );
    let alerts = scan_with(
        Arc::clone(&rules),
        &[
            "ERROR DB-42 at db.rs:7",
            "ERROR plain",
            "Traceback (most recent call last):",
            r#"  File "/app/x.py", line 1, in <module>"#,
            "ValueError: x",
            "TypeError: y is undefined",
            "    at f (/app/y.js:2:3)",
        ],
    );
    let got: Vec<(&str, &str, &str, Severity)> = alerts
        .iter()
        .map(|a| {
            (
                a.rule.as_str(),
                a.category.as_str(),
                a.message.as_str(),
                a.severity,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("myapp.db_down", "myapp", "42", Severity::Warning),
            (
                "node.error",
                "node",
                "TypeError: y is undefined",
                Severity::Error
            ),
        ]
    );
    assert_eq!(loc(&alerts[0]), "db.rs:7");
    assert!(
        rules.enabled("node.error")
            && !rules.enabled("generic.error_log")
            && !rules.enabled("generic.error_line")
    );
}

#[test]
fn bad_user_config_is_an_error_that_names_it_and_the_fix() {
    let bad = AlertPattern {
        id: "custom.1".into(),
        regex: "panic: (unclosed".into(),
        severity: AlertSeverity::Error,
        category: "custom".into(),
    };
    let err = AlertRules::with_config(&settings(vec![bad], &[])).unwrap_err();
    assert!(
        err.contains(r#""panic: (unclosed""#)
            && err.contains("unclosed group")
            && err.contains("fix it in corral.toml"),
        "{err}"
    );

    let err = AlertRules::with_config(&settings(vec![], &["python.tracebak"])).unwrap_err();
    assert_eq!(
        err,
        r#"alerts.disable: "python.tracebak" is neither a built-in rule id nor a category; did you mean "python.traceback"?"#
    );
}

fn alert(id_message: &str, source: &str, severity: Severity, at: SystemTime) -> Alert {
    let mut scanner = Scanner::new(defaults(), source);
    let mut out = Vec::new();
    let line = match severity {
        Severity::Error => format!("ERROR {id_message}"),
        Severity::Warning => format!("main.c:1:1: warning: {id_message}"),
    };
    scanner.feed(&line, Stream::Stdout, at, &mut out);
    // An error log line waits for the traceback it may announce.
    scanner.finish(&mut out);
    out.pop().expect("an alert")
}

#[test]
fn repeats_within_the_window_are_counted_and_beyond_it_are_new() {
    let mut log = AlertLog::new(Duration::from_secs(60), 200);
    let first = alert("db down", "process:web", Severity::Error, t(0));
    let id = first.id.clone();
    assert!(matches!(log.record(first), Recorded::New(a) if a.count == 1));
    assert_eq!(
        log.record(alert("db down", "process:web", Severity::Error, t(30))),
        Recorded::Repeat { id: &id, count: 2 }
    );
    // The window runs from the last sighting (30 s): 90 s is still within it.
    assert_eq!(
        log.record(alert("db down", "process:web", Severity::Error, t(90))),
        Recorded::Repeat { id: &id, count: 3 }
    );
    let entry = log.get(&id).unwrap();
    assert_eq!(
        (entry.count, entry.first_seen, entry.last_seen),
        (3, t(0), t(90))
    );
    // 151 s is 61 s after the last sighting: news again.
    assert!(
        matches!(log.record(alert("db down", "process:web", Severity::Error, t(151))), Recorded::New(a) if a.count == 1 && a.id == id)
    );
    assert_eq!(log.len(), 2);
    // Another source is another alert.
    assert!(matches!(
        log.record(alert("db down", "process:api", Severity::Error, t(152))),
        Recorded::New(_)
    ));
}

#[test]
fn the_ring_keeps_the_newest_and_answers_queries() {
    let mut log = AlertLog::new(Duration::from_secs(60), 3);
    for i in 0..5u64 {
        let (source, severity) = if i % 2 == 0 {
            ("process:web", Severity::Error)
        } else {
            ("server:files", Severity::Warning)
        };
        log.record(alert(&format!("n{i}"), source, severity, t(i)));
    }
    assert_eq!(log.len(), 3);
    let all = log.query(&AlertQuery::default());
    let messages: Vec<&str> = all.iter().map(|a| a.message.as_str()).collect();
    assert_eq!(messages, vec!["n2", "n3", "n4"]);
    let q = |q: AlertQuery| {
        log.query(&q)
            .into_iter()
            .map(|a| a.message)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        q(AlertQuery {
            since: Some(t(3)),
            ..Default::default()
        }),
        vec!["n3", "n4"]
    );
    assert_eq!(
        q(AlertQuery {
            source: Some("server:files".into()),
            ..Default::default()
        }),
        vec!["n3"]
    );
    assert_eq!(
        q(AlertQuery {
            severity: Some(Severity::Error),
            ..Default::default()
        }),
        vec!["n2", "n4"]
    );
    assert_eq!(
        q(AlertQuery {
            limit: Some(1),
            ..Default::default()
        }),
        vec!["n4"]
    );
    // An evicted alert is forgotten by dedup too: it comes back as new.
    assert!(
        log.get(&alert("n0", "process:web", Severity::Error, t(0)).id)
            .is_none()
    );
    assert!(matches!(
        log.record(alert("n0", "process:web", Severity::Error, t(6))),
        Recorded::New(_)
    ));
}
