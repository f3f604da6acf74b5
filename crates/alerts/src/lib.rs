//! The alert scanner: recognises errors in the output of dev processes and MCP servers.
//!
//! # Theory of operation
//!
//! Every line a child prints goes through a [`Scanner`] (one per drain task, see there).
//! The scanner is synchronous and pure: lines and times in, [`Alert`]s out; the caller
//! owns the clock (`now` is a parameter, so tests need no sleeps) and the threads.
//!
//! 1. **Clean** (`clean.rs`): ANSI escapes (CSI, OSC, stray ESC) are removed and of a
//!    line a progress bar rewrote with `\r` only the last text is kept. A line with
//!    neither ESC nor `\r` is borrowed as it is.
//! 2. **Prefilter** (`rules.rs`): one Aho-Corasick pass looks for the literals the
//!    rules and the reload signals need (`Traceback (most recent call last)`,
//!    `panicked at`, `error[E`, `ERROR`, `hmr update `, …). Almost every line has none
//!    and is done: no allocation, no regex. BENCHMARKS.md, "Alert scanner throughput",
//!    has the measurements behind choosing Aho-Corasick's SIMD searcher (Teddy) over a
//!    `RegexSet` or a loop of `str::contains`. The searcher is built directly, as
//!    `AhoCorasick` only uses it up to 64 patterns; it takes fewer than 128 (a unit
//!    test says so), and gets slower with each: it looks for a few short covers
//!    (`error`, `warning`, `Failed to `, …) instead of the longer literals containing
//!    them, which then pick the candidate rules on the rare lines that have one.
//! 3. **Reload signals** (`reload.rs`): on a candidate line the regexes of the signals
//!    whose literals occurred run first; a line that is one (`compiled successfully`,
//!    `Reloading...`) is kept for [`Scanner::take_reloads`] and is neither an alert nor
//!    part of a group. See "Reload signals" below.
//! 4. **Rules**: else the regexes of the rules whose literals occurred run in priority
//!    order (user patterns first, then ecosystem rules, `generic` last); the first
//!    match claims the line. Only the first [`Limits::max_scan_bytes`] of a line are
//!    looked at: errors are recognised by how lines start, and a 1 MiB line of
//!    minified JavaScript must not cost a millisecond. A rule's line may also be a
//!    *summary* (webpack's `compiled with 2 errors`: an alert only if no error alert
//!    came from the stream since the last summary or reload signal) or a wrapper that
//!    only announces others (Maven's `[ERROR] COMPILATION ERROR :`: claimed, no alert).
//! 5. **Groups** (`group.rs`, and `tools.rs` for build tools and package managers): a
//!    rule may start a group (a traceback, a stack, a compiler diagnostic) that
//!    collects the following lines of the same stream until its natural end (Python:
//!    the exception line, or the last one of a chain, whose separator may come after a
//!    few lines of other output; Node: the last `at` frame; Rust: the diagnostic's
//!    blank line or the backtrace's closing note), until
//!    [`Scanner::tick`] finds it idle for [`Limits::group_idle`], or until
//!    [`Scanner::finish`]. Unrelated lines printed in between (another thread's access
//!    log) are neither stored in the group nor allowed to end it, within a grace of a
//!    few lines per kind; they are scanned as lines of their own. Memory is bounded:
//!    [`Limits::max_group_lines`] lines of at most [`Limits::max_line_bytes`] each.
//!    A block that only sums up diagnostics reported before it (Maven's `Compilation
//!    failure`, Gradle's and Ant's `compiler error output`, MSBuild's `Build FAILED.`
//!    repeating the errors) gives no alert, like cargo's `could not compile`.
//!
//!    An error log line (`generic.error_log`: `ERROR:    Exception in ASGI
//!    application`, Flask's `ERROR in app: Exception on /x [GET]`, a JVM logger's
//!    `ERROR … Application run failed`) is a group too, of one line: a traceback or
//!    stack that starts within the next two lines takes it as its first line, and the
//!    two are one alert, the traceback's (its id as without the header). Alone, the
//!    header is its own alert as it always was, reported three lines later or at the
//!    next [`Scanner::tick`] 100 ms on. Inside another group it is reported at once.
//! 6. **Dedup and ring** ([`AlertLog`], shared by all scanners behind the caller's
//!    mutex): the same alert (same [`Alert::id`]: source, rule, message, location)
//!    within the window of its last sighting bumps a count ([`Recorded::Repeat`])
//!    instead of being new ([`Recorded::New`]), so a crash loop is one event; the last
//!    N alerts are kept for [`AlertLog::query`].
//!
//! # Messages and locations
//!
//! An alert's message is the line that says what went wrong, and its location the
//! place an agent should open, which is not always the first or last line printed.
//! With the location come the function of that frame and its source line when the
//! runtime printed them ([`Alert::function`], [`Alert::code`]); for a chained exception
//! the root cause ([`Alert::cause`]). For a chain the message stays the exception that
//! ended the program (so an alert's id, of source, rule, message and location, is the
//! same as before alerts had a context) while location, function, code and frames are
//! the root cause's: where the bug is (Ruby aside: its cause is only named).
//!
//! | ecosystem | message | location, and its function and code | cause |
//! |---|---|---|---|
//! | Python | the exception line (`ValueError: …`), the last one of a chain | the innermost frame in user code of the root cause: Python prints the outermost first, so the *last* user `File` line of the chain's *first* traceback (of the only one when not chained); for a SyntaxError the `File "x", line N` it points at. Function: `, in NAME`; code: the indented line under the `File` line (3.11's `~~~^^^` markers skipped) | the first exception of a chain (`raise … from e`, "During handling of the above exception") |
//! | Rust panic | the panic message (the line after the header in 1.73+) | the panic's own location when it is user code, else the first user frame of the backtrace. Function: the backtrace's `N: crate::module::func` of that frame (hash removed); no code | — |
//! | Rust diagnostic | the text after `error[E…]:` | the ` --> ` line | — |
//! | Node | the `TypeError: …` line (the outer error of a chain) | the first `at` frame in user code (innermost first) of the innermost `[cause]:`, else of the error itself. Function: `at NAME (…)` (without `new `/`async `; none for `at file:1:2`); code: the source line Node prints above a `^` for an uncaught error, when its `file:line` is that frame's | the innermost `[cause]:` (`Error.cause`, Node ≥ 16.9) or `Caused by:` |
//! | Java | the top exception, with `(caused by <root cause>)` | the first user frame of the root cause (the last `Caused by:`), else of the top trace. Function: `pkg.Class.method`; no code | the last `Caused by:` |
//! | Go panic | the text after `panic:` | the first frame in user code of the panicking goroutine. Function: the line above it without arguments (`main.handler`); no code | — |
//! | Ruby | the exception class and message | the raising line when it is user code, else the first user `from` frame, of the exception itself (the frames of its cause, printed after them, are not its own). Function: `in 'NAME'`; code: the raising line's source Ruby 3.1+ prints under the message with `^^^^` under it (error_highlight), when indented | the last cause Ruby 3.1+ prints after the frames, in the first line's shape (`Class: message`) |
//! | .NET | the exception class and message | the first user frame (an inner exception's frames are printed first). Function: `Ns.Class.Method` without parameters | the innermost ` ---> ` |
//! | TypeScript, Go build, gcc, bundlers, javac/Maven, MSBuild | the tool's message | the tool's `file:line:col` (Maven's `[line,col]`, MSBuild's `(line,col)`); no function | — |
//! | npm, yarn, Gradle, Maven goals, `go:` | the block's decisive line (not its `code`/`path` details, not a summary of errors reported above it) | where the tool gives one (`go.mod:6`, `build.xml:12`); no function | — |
//!
//! [`Alert::frames`] is the reduced stack of the same exception: its user frames,
//! innermost first, at most 10. A chain's root cause printed only part of its stack,
//! which is rebuilt: Java's `... N more` stands for the last N frames of the trace that
//! encloses it; Python's first traceback starts at the frame that caught the exception,
//! and the frames above that one are those of the next traceback before the same
//! function of the same file. Node prints a cause's stack whole.
//!
//! Library frames are skipped by where they live: `node_modules`, `node:internal`,
//! `site-packages`/`dist-packages`, the Python stdlib (`lib/python3.x`, `<frozen …>`),
//! `/rustc/`, `.cargo/registry`, GOROOT and the module cache, `java.`/`javax.`/`jdk.`/
//! `sun.` (and a few big frameworks), `System.`/`Microsoft.`, gems.
//!
//! # Rules
//!
//! Categories (stable, users write them in `disable`): `rust`, `go`, `python`, `node`,
//! `typescript`, `bundler`, `java`, `ruby`, `dotnet`, `c`, `generic`. A rule id is
//! `<category>.<name>`:
//!
//! | id | severity | recognises |
//! |---|---|---|
//! | `python.traceback` | error | `Traceback (most recent call last):` … exception line |
//! | `python.syntax_error` | error | `File "x.py", line N` … `SyntaxError:` (no traceback header) |
//! | `python.warning` | warning | `x.py:3: DeprecationWarning: …` (any `…Warning`) |
//! | `python.exception` | error | a dotted exception line without a traceback: `django.core.exceptions.ImproperlyConfigured: …`, `werkzeug.exceptions.BadRequestKeyError: …` (a module path, then a class under `exceptions`/`errors`/`exc` or named `…Error`/`…Exception`; JVM packages excluded) |
//! | `rust.panic` | error | `thread '…' panicked at …`, message, backtrace |
//! | `rust.compile_error` | error | `error[E0308]: …` / `error: …` with its ` --> ` line |
//! | `rust.warning` | warning | `warning: …` with its ` --> ` line |
//! | `go.panic` | error | `panic: …` and the goroutine trace |
//! | `go.build_error` | error | `./x.go:12:5: …` |
//! | `go.test_fail` | error | `--- FAIL: TestX` and its indented output |
//! | `go.package_fail` | error | `FAIL` + tab + package |
//! | `go.module_error` | error | `go: …` failures of the go command (`go.mod file not found`, `cannot find main module`, `errors parsing go.mod:` + the place on the next line); not `go: downloading`/`finding`/`found`/… |
//! | `typescript.error` | error | `a.ts(3,7): error TS2322: …`, `a.ts:3:7 - error TS…`, `error TS…` |
//! | `bundler.vite` | error | `[vite] Internal server error: …` / `Pre-transform error` (also `(file):`), after a time and a `(client)`/`(ssr)` tag; `error while updating dependencies:` + the error on the next line; `server restart failed` |
//! | `bundler.webpack` | error | `ERROR in ./src/x.js 3:10` (or `./x.tsx:3:7`) and the message after it, past loaders' `Module build failed (from …):` and location lines |
//! | `bundler.webpack_failed` | error | `webpack 5.x compiled with N errors` when no error of that build was reported (summary) |
//! | `bundler.nextjs` | error | `Failed to compile` (Next.js and Create React App: the error after it) / ` ⨯ …` |
//! | `bundler.esbuild` | error | `✘ [ERROR] …` |
//! | `bundler.esbuild_warning` | warning | `▲ [WARNING] …` |
//! | `java.exception` | error | `Exception in thread "…" X: …` (with or without frames) or a bare `pkg.XException: …` followed by `at` frames; `Caused by:` |
//! | `java.launcher` | error | `Error: Could not find or load main class X`, `Unable to access jarfile …`, `Main method not found …` |
//! | `java.compile_error` | error | javac's `App.java:3: error: …` (also as Ant's `[javac]` and Gradle 4 print it), Maven's `[ERROR] /x/App.java:[3,5] …`; message + the `symbol:` detail |
//! | `java.build_failed` | error | Maven's `[ERROR] Failed to execute goal …` block, Gradle's `FAILURE: Build failed` (the line after `* What went wrong:` + its first `>` cause), Ant's `BUILD FAILED` (the next line, at its `build.xml:N`); none when they only point at the compiler's errors |
//! | `dotnet.exception` | error | `Unhandled exception. System.X: …` and its `at … in File.cs:line N` frames |
//! | `dotnet.build_error` | error | MSBuild's `Program.cs(3,5): error CS1002: ; expected [x.csproj]`, `MSBUILD : error MSB1009: …`, `error NETSDK1045: …`; message `CODE: text` (the `Build FAILED.` summary repeating them is none) |
//! | `dotnet.watch` | error | `dotnet watch ❌ …` |
//! | `ruby.exception` | error | `x.rb:12:in 'm': msg (NameError)` (also `-e:1`, `bin/rails:4`) and its `from` frames, and the cause Ruby 3.1+ prints after them |
//! | `ruby.errno` | error | other `… (Errno::ECONNREFUSED)` lines, `Errno::X: …` |
//! | `c.compile_error` | error | `x.c:3:5: error: …` (gcc, clang) |
//! | `c.warning` | warning | `x.c:3:5: warning: …` |
//! | `node.npm` | error | one `npm ERR! …` (npm ≤ 9) / `npm error …` (npm ≥ 10) block: its first line that is no `code`/`path`/`command` detail (`Missing script: "dev"`), else `command failed (exit code N): …` |
//! | `node.yarn` | error | yarn 1's `error Command failed with exit code N.` (any `error X…`), yarn 2+'s `Usage Error: …`/`Internal Error: …` and a `➤ YN…` run that ends `Failed with errors` (its first error line) |
//! | `node.nodemon_crashed` | error | `[nodemon] app crashed - waiting for file changes before starting...` |
//! | `node.unhandled_rejection` | error | `[UnhandledPromiseRejection: …]`, `UnhandledPromiseRejectionWarning` |
//! | `node.warning` | warning | `(node:123) [DEP0005] DeprecationWarning: …` |
//! | `node.error` | error | `TypeError: …` (any `…Error:`) followed by `at` frames |
//! | `node.module_not_found` | error | `Cannot find module '…'` (also a `node.error` saying so) |
//! | `generic.error_line` | error | `Error: …` or `error: …` at the start of a line with no stack or location after it |
//! | `generic.address_in_use` | error | `EADDRINUSE`, `address already in use` |
//! | `generic.connection_refused` | error | `ECONNREFUSED`, `connection refused` |
//! | `generic.segfault` | error | `Segmentation fault`, `SIGSEGV` |
//! | `generic.out_of_memory` | error | `out of memory`, `OutOfMemory`, `MemoryError`, `Cannot allocate memory` |
//! | `generic.fatal` | error | `FATAL`, `fatal: …`, `fatal error: …` |
//! | `generic.error_log` | error | log-level lines: `ERROR`/`CRITICAL`/`SEVERE`, `level=error`, `"level":"error"` (the first: merged into a traceback that follows) |
//!
//! Cargo's summaries (`error: could not compile …`, `warning: … generated N warnings`)
//! are not alerts: they repeat the diagnostics; nor are the build tools' summaries
//! above (`[INFO] BUILD FAILURE`, Gradle's `BUILD FAILED in 2s`, tsc's `Found 2
//! errors.`). Users add patterns (regexes with
//! optional `msg`, `file`, `line`, `col` groups, tried before the built-in rules, one
//! line each) and disable built-in rules by id or category in `[alerts]`
//! ([`corral_config::AlertSettings`]).
//!
//! # Reload signals
//!
//! The lines by which dev tools say that a rebuild or restart began
//! ([`ReloadPhase::Started`]) or worked ([`ReloadPhase::Succeeded`]), taken with
//! [`Scanner::take_reloads`]. Matched after ANSI removal, after a tool's time prefix. A failed build is
//! never a success (its errors are alerts), and a start line never counts as one:
//!
//! | tool | started | succeeded | not a signal (failure) |
//! |---|---|---|---|
//! | `vite` | `[vite] x changed, restarting server...` | `[vite] (client) hmr update …`, `page reload …`, `server restarted.` (an update means shipped: Vite transforms lazily) | `Internal server error`, `Pre-transform error` |
//! | `webpack` | `Compiling...` (Create React App, webpack-dev-middleware 3) | `webpack 5.x compiled successfully in N ms` (or `with N warnings`), `Compiled successfully!`, `Compiled with warnings.` | `compiled with N errors`, `Failed to compile.` |
//! | `nextjs` | ` ○ Compiling /page ...` | ` ✓ Compiled /page in 1.2s` | ` ⨯ …` |
//! | `tsc` | `Starting compilation in watch mode...`, `File change detected. Starting incremental compilation...` | `Found 0 errors. Watching for file changes.` | `Found N errors.` |
//! | `uvicorn` | `WARNING:  WatchFiles detected changes in '…'. Reloading...` (or StatReload) | `INFO:     Application startup complete.` | a traceback without it |
//! | `django` | `/x/views.py changed, reloading.` | `System check identified no issues (0 silenced).` | `identified N issues` |
//! | `flask` | ` * Detected change in '…', reloading`, ` * Restarting with stat` | ` * Debugger is active!` (debug mode only) | `Exception on /x [GET]` |
//! | `nodemon` | `[nodemon] restarting due to changes...` | ``[nodemon] starting `node x.js` `` (the new child spawned: nodemon says nothing later; a crash follows as `node.nodemon_crashed`) | `app crashed` |
//! | `cargo` | | ``Finished `dev` profile [...] target(s) in 0.52s`` (and before 1.77 `Finished dev [...]`) | `error: could not compile` |
//! | `cargo-watch` | `[Running 'cargo run']` | `[Finished running. Exit status: 0]` | another status |
//! | `air` | `building...` | `running...`, unless `failed to build, error: …` came since `building...` (air runs the old binary anyway without `stop_on_error`) | `failed to build` |
//! | `dotnet-watch` | `dotnet watch ⌚ File changed: …`, `Restarting application to apply changes ...`, `Building … ...` | `dotnet watch 🔥 Hot reload succeeded.`, `C# and Razor changes applied in Nms.`, `Static asset changes applied in Nms.`, `Build succeeded` | `dotnet watch ❌ …`, `Unable to apply changes due to compilation errors.` |
//!
//! A scanner keeps the last 256 signals not yet taken. Vite's `hmr update failed` (in
//! the design notes) is printed by no Vite release read (6.4, its `dist`); not matched.

mod clean;
mod frames;
mod group;
mod log;
mod model;
mod reload;
mod rules;
mod scanner;
mod tools;

use std::borrow::Cow;

pub use clean::clean;
pub use log::{AlertLog, AlertQuery, Recorded};
pub use model::{Alert, Location, Severity, Stream, alert_id, stable_id};
pub use reload::{Reload, ReloadPhase};
pub use rules::{AlertRules, CATEGORIES, Limits};
pub use scanner::Scanner;

/// `s` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub(crate) fn cap(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}
