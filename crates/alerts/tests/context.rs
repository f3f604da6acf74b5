//! What an alert says beyond message and location (function, code, cause, frames), for
//! the output shapes of every ecosystem the scanner groups, including those no runtime
//! here prints (Ruby, .NET, Rust's full backtrace, Go's `created by`). The real output
//! of the installed runtimes is in real_output.rs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use corral_alerts::{Alert, Scanner, Stream};

mod common;
use common::{context, rules};

fn scan(lines: &[&str]) -> Vec<Alert> {
    let mut scanner = Scanner::new(rules(), "process:web");
    let mut out = Vec::new();
    for line in lines {
        scanner.feed(line, Stream::Stderr, SystemTime::UNIX_EPOCH, &mut out);
    }
    scanner.finish(&mut out);
    out
}

struct Case<'a> {
    name: &'a str,
    lines: &'a [&'a str],
    rule: &'a str,
    message: &'a str,
    location: &'a str,
    context: &'a [&'a str],
}

#[test]
fn every_ecosystem_names_the_function_and_reduces_the_stack() {
    // Ports in the lines are a free one read back from the OS: nothing fixed.
    let port = common::port();
    let in_use = format!("Error: listen EADDRINUSE: address already in use :::{port}");
    let refused = format!("Error: connect ECONNREFUSED 127.0.0.1:{port}");
    let cases = [
        Case {
            name: "Ruby before 3.4: backticks; the raising line is user code",
            lines: &[
                "/app/lib/users.rb:3:in `find': undefined method `name' for nil (NoMethodError)",
                "\tfrom /usr/lib/ruby/3.1.0/set.rb:511:in `each'",
                "\tfrom /app/app.rb:7:in `block in <main>'",
                "\tfrom /app/app.rb:6:in `<main>'",
            ],
            rule: "ruby.exception",
            message: "NoMethodError: undefined method `name' for nil",
            location: "/app/lib/users.rb:3",
            context: &[
                "function: find",
                "frame: /app/lib/users.rb:3 in find",
                "frame: /app/app.rb:7 in block in <main>",
                "frame: /app/app.rb:6 in <main>",
            ],
        },
        Case {
            name: "Ruby 3.1+: a cause after the frames is named, its frames are not the error's",
            lines: &[
                "/app/lib/config.rb:9:in `rescue in load': cannot load settings (Config::Error)",
                "\tfrom /app/lib/config.rb:6:in `load'",
                "\tfrom /app/app.rb:3:in `<main>'",
                "/usr/lib/ruby/3.1.0/psych.rb:455:in `parse': (settings.yml): did not find expected key while parsing a block mapping at line 1 column 1 (Psych::SyntaxError)",
                "\tfrom /usr/lib/ruby/3.1.0/psych.rb:399:in `parse_stream'",
                "\tfrom /app/lib/config.rb:7:in `load'",
                "\tfrom /app/app.rb:3:in `<main>'",
            ],
            rule: "ruby.exception",
            message: "Config::Error: cannot load settings",
            location: "/app/lib/config.rb:9",
            context: &[
                "function: rescue in load",
                "cause: Psych::SyntaxError: (settings.yml): did not find expected key while parsing a block mapping at line 1 column 1",
                "frame: /app/lib/config.rb:9 in rescue in load",
                "frame: /app/lib/config.rb:6 in load",
                "frame: /app/app.rb:3 in <main>",
            ],
        },
        Case {
            name: "Ruby 3.4: quotes and Class#method; the raising line in a gem",
            lines: &[
                "/usr/lib/ruby/gems/3.4.0/gems/rack-3.1.0/lib/rack/lint.rb:17:in 'Rack::Lint#assert': env missing (Rack::Lint::LintError)",
                "\tfrom /app/lib/api.rb:12:in 'Api#call'",
                "\tfrom /app/config.ru:5:in 'block in <main>'",
            ],
            rule: "ruby.exception",
            message: "Rack::Lint::LintError: env missing",
            location: "/app/lib/api.rb:12",
            context: &[
                "function: Api#call",
                "frame: /app/lib/api.rb:12 in Api#call",
                "frame: /app/config.ru:5 in block in <main>",
            ],
        },
        Case {
            name: "Ruby 3.1+: a snippet at the top level is not indented: no code",
            lines: &[
                "/app/main.rb:1:in `<main>': undefined local variable or method `fo' for main:Object (NameError)",
                "",
                "fo",
                "^^",
                "Did you mean?  for",
            ],
            rule: "ruby.exception",
            message: "NameError: undefined local variable or method `fo' for main:Object",
            location: "/app/main.rb:1",
            context: &["function: <main>", "frame: /app/main.rb:1 in <main>"],
        },
        Case {
            name: ".NET: an inner exception, printed first, is the cause",
            lines: &[
                "Unhandled exception. System.InvalidOperationException: cannot load user 7",
                " ---> System.FormatException: The input string 'x7' was not in a correct format.",
                "   at System.Number.ThrowFormatException[TChar](ReadOnlySpan`1 value)",
                "   at System.Int32.Parse(String s)",
                "   at Api.UserRepo.ParseId(String row) in /src/Api/UserRepo.cs:line 9",
                "   --- End of inner exception stack trace ---",
                "   at Api.UserRepo.Find(String key) in /src/Api/UserRepo.cs:line 16",
                "   at Api.Program.Main(String[] args) in /src/Api/Program.cs:line 5",
                "",
            ],
            rule: "dotnet.exception",
            message: "System.InvalidOperationException: cannot load user 7",
            location: "/src/Api/UserRepo.cs:9",
            context: &[
                "function: Api.UserRepo.ParseId",
                "cause: System.FormatException: The input string 'x7' was not in a correct format.",
                "frame: /src/Api/UserRepo.cs:9 in Api.UserRepo.ParseId",
                "frame: /src/Api/UserRepo.cs:16 in Api.UserRepo.Find",
                "frame: /src/Api/Program.cs:5 in Api.Program.Main",
            ],
        },
        Case {
            name: "Rust, RUST_BACKTRACE=full: addresses and symbol hashes",
            lines: &[
                "thread 'main' panicked at src/main.rs:2:18:",
                "boom",
                "stack backtrace:",
                "   0:     0x55d4b1c3a2f0 - std::backtrace_rs::backtrace::libunwind::trace::h1234567890abcdef",
                "                               at /rustc/59807616e1fa2540/library/std/src/../../backtrace/src/backtrace/libunwind.rs:117:9",
                "  13:     0x55d4b1c3a5e1 - boom::parse_port::h0123456789abcdef",
                "                               at ./src/main.rs:2:18",
                "  14:     0x55d4b1c3a7b2 - boom::main::hfedcba9876543210",
                "                               at ./src/main.rs:7:16",
                "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.",
            ],
            rule: "rust.panic",
            message: "boom",
            location: "src/main.rs:2:18",
            context: &[
                "function: boom::parse_port",
                "frame: ./src/main.rs:2:18 in boom::parse_port",
                "frame: ./src/main.rs:7:16 in boom::main",
            ],
        },
        Case {
            name: "Rust: a panic inside a dependency, at the first user frame",
            lines: &[
                "thread 'main' panicked at /home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/tokio-1.40.0/src/runtime/blocking/shutdown.rs:51:21:",
                "Cannot drop a runtime in a context where blocking is not allowed.",
                "stack backtrace:",
                "   5: tokio::runtime::blocking::shutdown::Receiver::wait",
                "             at /home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/tokio-1.40.0/src/runtime/blocking/shutdown.rs:51:21",
                "   6: app::db::close",
                "             at ./src/db.rs:40:5",
                "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.",
            ],
            rule: "rust.panic",
            message: "Cannot drop a runtime in a context where blocking is not allowed.",
            location: "./src/db.rs:40:5",
            context: &[
                "function: app::db::close",
                "frame: ./src/db.rs:40:5 in app::db::close",
            ],
        },
        Case {
            name: "Go: a goroutine's panic, its creator, a method's receiver",
            lines: &[
                "panic: assignment to entry in nil map",
                "",
                "goroutine 7 [running]:",
                "main.(*Server).handle(0xc000010000, {0x4a5b20?, 0xc000012345?})",
                "\t/app/server.go:12 +0x25",
                "created by main.main in goroutine 1",
                "\t/app/main.go:20 +0x3c",
                "",
                "goroutine 1 [chan receive]:",
                "main.wait(...)",
                "\t/app/main.go:30",
                "exit status 2",
            ],
            rule: "go.panic",
            message: "assignment to entry in nil map",
            location: "/app/server.go:12",
            context: &[
                "function: main.(*Server).handle",
                // Another goroutine's frames (GOTRACEBACK=all) are not this stack.
                "frame: /app/server.go:12 in main.(*Server).handle",
                "frame: /app/main.go:20 in main.main",
            ],
        },
        Case {
            name: "Python: a SyntaxError in an imported module",
            lines: &[
                "Traceback (most recent call last):",
                r#"  File "/app/main.py", line 1, in <module>"#,
                "    import broken",
                r#"  File "/app/broken.py", line 2"#,
                r#"    return {"ok": True"#,
                "           ^",
                "SyntaxError: '{' was never closed",
            ],
            rule: "python.traceback",
            message: "SyntaxError: '{' was never closed",
            location: "/app/broken.py:2",
            context: &[
                r#"code: return {"ok": True"#,
                "frame: /app/broken.py:2",
                "frame: /app/main.py:1 in <module>",
            ],
        },
        Case {
            name: "Python: a frame without source, a long source line cut at 200 bytes",
            lines: &[
                "Traceback (most recent call last):",
                r#"  File "/app/main.py", line 3, in <module>"#,
                "    exec(src)",
                r#"  File "<string>", line 1, in <module>"#,
                r#"  File "/app/lib.py", line 2, in check"#,
                &format!("    raise ValueError({})", "x".repeat(300)),
                "    ~~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^",
                "ValueError: bad",
            ],
            rule: "python.traceback",
            message: "ValueError: bad",
            location: "/app/lib.py:2",
            context: &[
                "function: check",
                &format!("code: raise ValueError({}…", "x".repeat(200 - 17 - 3)),
                "frame: /app/lib.py:2 in check",
                "frame: <string>:1 in <module>",
                "frame: /app/main.py:3 in <module>",
            ],
        },
        Case {
            name: "Node: the last frame of an error with properties ends in ` {`",
            lines: &[
                &in_use,
                "    at Server.setupListenHandle [as _listen2] (node:net:1817:16)",
                "    at listenInCluster (node:net:1865:12)",
                "    at /app/server.js:5:8 {",
                "  code: 'EADDRINUSE',",
                &format!("  port: {port}"),
                "}",
            ],
            rule: "node.error",
            message: &in_use,
            location: "/app/server.js:5:8",
            context: &["frame: /app/server.js:5:8"],
        },
        Case {
            name: "Node: `Caused by:` as libraries print it, the cause all library code",
            lines: &[
                "VError: request failed: connect ECONNREFUSED",
                "    at Client.get (/app/client.js:10:11)",
                "    at async main (/app/main.js:4:3)",
                &format!("Caused by: {refused}"),
                "    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)",
            ],
            rule: "node.error",
            message: "VError: request failed: connect ECONNREFUSED",
            location: "/app/client.js:10:11",
            context: &[
                "function: Client.get",
                &format!("cause: {refused}"),
                "frame: /app/client.js:10:11 in Client.get",
                "frame: /app/main.js:4:3 in main",
            ],
        },
        Case {
            name: "Node: a cause that is no error",
            lines: &[
                "Error: save failed",
                "    at save (/app/db.js:8:11) {",
                "  [cause]: { code: 'E_DB', retry: false }",
                "}",
            ],
            rule: "node.error",
            message: "Error: save failed",
            location: "/app/db.js:8:11",
            context: &["function: save", "frame: /app/db.js:8:11 in save"],
        },
        Case {
            name: "Java: `Suppressed:` frames stay out, logback's `common frames omitted`",
            lines: &[
                r#"Exception in thread "main" java.lang.RuntimeException: outer"#,
                "\tat com.acme.A.run(A.java:10)",
                "\tat com.acme.A.main(A.java:5)",
                "\tSuppressed: java.io.IOException: close failed",
                "\t\tat com.acme.Res.close(Res.java:3)",
                "\t\t... 2 more",
                "Caused by: java.lang.IllegalStateException: inner",
                "\tat com.acme.B.go(B.java:7)",
                "\t... 1 common frames omitted",
            ],
            rule: "java.exception",
            message: "java.lang.RuntimeException: outer (caused by java.lang.IllegalStateException: inner)",
            location: "B.java:7",
            context: &[
                "function: com.acme.B.go",
                "cause: java.lang.IllegalStateException: inner",
                "frame: B.java:7 in com.acme.B.go",
                "frame: A.java:5 in com.acme.A.main",
            ],
        },
        Case {
            name: "Java: no chain, kotlin and JDK frames skipped",
            lines: &[
                "java.lang.IllegalArgumentException: port out of range:70000",
                "\tat java.base/java.net.InetSocketAddress.checkPort(InetSocketAddress.java:143)",
                "\tat kotlin.io.ConsoleKt.println(Console.kt:1)",
                "\tat app//com.acme.ServerKt.start(Server.kt:12)",
                "\tat com.acme.MainKt.main(Main.kt:3)",
                "",
            ],
            rule: "java.exception",
            message: "java.lang.IllegalArgumentException: port out of range:70000",
            location: "Server.kt:12",
            context: &[
                "function: com.acme.ServerKt.start",
                "frame: Server.kt:12 in com.acme.ServerKt.start",
                "frame: Main.kt:3 in com.acme.MainKt.main",
            ],
        },
    ];
    for case in cases {
        let alerts = scan(case.lines);
        assert_eq!(alerts.len(), 1, "{}: {alerts:#?}", case.name);
        let a = &alerts[0];
        let at = format!("{}: {a:#?}", case.name);
        assert_eq!(a.rule, case.rule, "{at}");
        assert_eq!(a.message, case.message, "{at}");
        let location = a.location.as_ref().map(|l| l.to_string());
        assert_eq!(location.as_deref(), Some(case.location), "{at}");
        assert_eq!(context(a), case.context, "{at}");
    }
}

#[test]
fn at_most_ten_frames_innermost_first() {
    let mut lines = vec!["Traceback (most recent call last):".to_owned()];
    for i in 1..=15 {
        lines.push(format!(r#"  File "/app/deep.py", line {i}, in f{i}"#));
    }
    lines.push("RecursionError: too deep".into());
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let a = &scan(&lines)[0];
    let want: Vec<String> = (6..=15)
        .rev()
        .map(|i| format!("/app/deep.py:{i} in f{i}"))
        .collect();
    assert_eq!(a.frames, want);
}

/// Node's throw site: its source line is the alert's code only when it is the frame at
/// the alert's location, and only when the three lines came as Node writes them.
#[test]
fn node_throw_site_code_belongs_to_its_own_frame_only() {
    let error = [
        "TypeError: Cannot read properties of undefined (reading 'name')",
        "    at userName (/app/server.js:2:23)",
    ];
    let with = |before: &[&str]| {
        let lines: Vec<&str> = before.iter().chain(&error).copied().collect();
        let alerts = scan(&lines);
        assert_eq!(alerts.len(), 1, "{alerts:#?}");
        alerts[0].code.clone()
    };
    let site = [
        "/app/server.js:2",
        "  return user.profile.name;",
        "               ^",
        "",
    ];
    assert_eq!(with(&site).as_deref(), Some("return user.profile.name;"));
    // A few lines of other output between the caret and the error line.
    let noisy = [&site[..], &["GET / 200", "GET /a 200"]].concat();
    assert_eq!(with(&noisy).as_deref(), Some("return user.profile.name;"));
    // Another line's throw site, or no caret under the source line: no code.
    let other = ["/app/server.js:9", "  x();", "  ^", ""];
    assert_eq!(with(&other), None);
    let no_caret = ["/app/server.js:2", "  return user.profile.name;", ""];
    assert_eq!(with(&no_caret), None);
    // Noise between the three lines loses the code (never gives a wrong one).
    let split = [
        "/app/server.js:2",
        "GET / 200",
        "  return user.profile.name;",
        "  ^",
    ];
    assert_eq!(with(&split), None);
}

/// A line that looks like a throw site keeps the scanner pending (so the supervisor
/// feeds the next lines) only as long as a throw site can still come of it.
#[test]
fn a_throw_site_keeps_the_scanner_pending_only_briefly() {
    let t0 = SystemTime::UNIX_EPOCH;
    let mut scanner = Scanner::new(rules(), "process:web");
    let mut out = Vec::new();
    scanner.feed("/app/server.js:2", Stream::Stderr, t0, &mut out);
    assert!(scanner.pending());
    scanner.feed("  go();", Stream::Stderr, t0, &mut out);
    assert!(scanner.pending());
    let listening = format!("listening on {}", common::port());
    scanner.feed(&listening, Stream::Stderr, t0, &mut out);
    assert!(!scanner.pending());

    scanner.feed("see /app/server.js:2", Stream::Stderr, t0, &mut out);
    assert!(
        !scanner.pending(),
        "a path inside a sentence is no throw site"
    );

    scanner.feed("/app/server.js:2", Stream::Stderr, t0, &mut out);
    scanner.tick(t0 + Duration::from_millis(999), &mut out);
    assert!(scanner.pending());
    scanner.tick(t0 + Duration::from_secs(1), &mut out);
    assert!(!scanner.pending() && out.is_empty(), "{out:#?}");
}

/// A reload signal printed into a throw site (another tool's line, on the same stream)
/// is no part of it: unlike other output it neither loses the source line nor could be
/// taken for it, whether every line is fed or only candidates are (the supervisor's way:
/// a reload line is a candidate, and steps back to a throw site before it).
#[test]
fn a_reload_line_inside_a_throw_site_is_not_part_of_it() {
    let reload = "webpack 5.89.0 compiled successfully in 12 ms";
    let site = [
        "/app/server.js:2",
        "  return user.profile.name;",
        "               ^",
        "",
        "TypeError: Cannot read properties of undefined (reading 'name')",
        "    at userName (/app/server.js:2:23)",
    ];
    let rules = rules();
    for at in 1..=4 {
        let mut lines = site.to_vec();
        lines.insert(at, reload);
        let text = lines.join("\n");

        let mut whole = Scanner::new(Arc::clone(&rules), "process:web");
        let mut fed = Scanner::new(Arc::clone(&rules), "process:web");
        let (mut all, mut some) = (Vec::new(), Vec::new());
        for line in &lines {
            whole.feed(line, Stream::Stderr, SystemTime::UNIX_EPOCH, &mut all);
        }
        let mut rest = text.as_str();
        while !rest.is_empty() {
            if !fed.pending() {
                let Some(hit) = rules.next_candidate(rest.as_bytes()) else {
                    break;
                };
                rest = &rest[rest[..hit].rfind('\n').map_or(0, |i| i + 1)..];
            }
            let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
            fed.feed(line, Stream::Stderr, SystemTime::UNIX_EPOCH, &mut some);
            rest = tail;
        }
        for (scanner, out) in [(&mut whole, &mut all), (&mut fed, &mut some)] {
            scanner.finish(out);
            assert_eq!(out.len(), 1, "reload line at {at}: {out:#?}");
            assert_eq!(
                out[0].code.as_deref(),
                Some("return user.profile.name;"),
                "reload line at {at}"
            );
            let reloads = scanner.take_reloads();
            assert_eq!(reloads.len(), 1, "reload line at {at}: {reloads:#?}");
            assert_eq!(reloads[0].tool, "webpack");
        }
    }

    // Alone, it starts no throw site: nothing is pending after it.
    let mut scanner = Scanner::new(rules, "process:web");
    let mut out = Vec::new();
    scanner.feed(reload, Stream::Stderr, SystemTime::UNIX_EPOCH, &mut out);
    assert!(!scanner.pending() && out.is_empty(), "{out:#?}");
}
