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
//!    rules need (`Traceback (most recent call last)`, `panicked at`, `error[E`,
//!    `ERROR`, …). Almost every line has none and is done: no allocation, no regex.
//!    BENCHMARKS.md, "Alert scanner throughput", has the measurements behind choosing
//!    Aho-Corasick over a `RegexSet` or a loop of `str::contains`.
//! 3. **Rules**: on a candidate line the regexes of the rules whose literals occurred
//!    run in priority order (user patterns first, then ecosystem rules, `generic` last);
//!    the first match claims the line. Only the first [`Limits::max_scan_bytes`] of a
//!    line are looked at: errors are recognised by how lines start, and a 1 MiB line
//!    of minified JavaScript must not cost a millisecond.
//! 4. **Groups** (`group.rs`): a rule may start a group (a traceback, a stack, a
//!    compiler diagnostic) that collects the following lines of the same stream until
//!    its natural end (Python: the exception line; Node: the last `at` frame; Rust: the
//!    diagnostic's blank line or the backtrace's closing note), until
//!    [`Scanner::tick`] finds it idle for [`Limits::group_idle`], or until
//!    [`Scanner::finish`]. Unrelated lines printed in between (another thread's access
//!    log) are neither stored in the group nor allowed to end it, within a grace of a
//!    few lines per kind; they are scanned as lines of their own. Memory is bounded:
//!    [`Limits::max_group_lines`] lines of at most [`Limits::max_line_bytes`] each.
//! 5. **Dedup and ring** ([`AlertLog`], shared by all scanners behind the caller's
//!    mutex): the same alert (same [`Alert::id`]: source, rule, message, location)
//!    within the window of its last sighting bumps a count ([`Recorded::Repeat`])
//!    instead of being new ([`Recorded::New`]), so a crash loop is one event; the last
//!    N alerts are kept for [`AlertLog::query`].
//!
//! # Messages and locations
//!
//! An alert's message is the line that says what went wrong, and its location the
//! place an agent should open, which is not always the first or last line printed:
//!
//! | ecosystem | message | location |
//! |---|---|---|
//! | Python | the exception line (`ValueError: …`), the last one of a chain | the innermost frame in user code: Python prints the outermost first, so the *last* user `File` line; for a SyntaxError the `File "x", line N` it points at |
//! | Rust panic | the panic message (the line after the header in 1.73+) | the panic's own location when it is user code, else the first user frame of the backtrace |
//! | Rust diagnostic | the text after `error[E…]:` | the ` --> ` line |
//! | Node | the `TypeError: …` line | the first `at` frame in user code (innermost first) |
//! | Java | the top exception, with `(caused by <root cause>)` | the first user frame of the root cause, which is where the bug is; else of the top trace |
//! | Go panic | the text after `panic:` | the first frame in user code of the panicking goroutine |
//! | Ruby, .NET | the exception class and message | the first user frame |
//! | TypeScript, Go build, gcc, bundlers | the tool's message | the tool's `file:line:col` |
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
//! | `rust.panic` | error | `thread '…' panicked at …`, message, backtrace |
//! | `rust.compile_error` | error | `error[E0308]: …` / `error: …` with its ` --> ` line |
//! | `rust.warning` | warning | `warning: …` with its ` --> ` line |
//! | `go.panic` | error | `panic: …` and the goroutine trace |
//! | `go.build_error` | error | `./x.go:12:5: …` |
//! | `go.test_fail` | error | `--- FAIL: TestX` and its indented output |
//! | `go.package_fail` | error | `FAIL` + tab + package |
//! | `typescript.error` | error | `a.ts(3,7): error TS2322: …`, `a.ts:3:7 - error TS…`, `error TS…` |
//! | `bundler.vite` | error | `[vite] Internal server error: …` / `Pre-transform error` |
//! | `bundler.webpack` | error | `ERROR in ./src/x.js 3:10` and the message after it |
//! | `bundler.nextjs` | error | `Failed to compile` / ` ⨯ …` |
//! | `bundler.esbuild` | error | `✘ [ERROR] …` |
//! | `bundler.esbuild_warning` | warning | `▲ [WARNING] …` |
//! | `java.exception` | error | `Exception in thread "…" X: …` or a bare `pkg.XException: …` followed by `at` frames; `Caused by:` |
//! | `dotnet.exception` | error | `Unhandled exception. System.X: …` and its `at … in File.cs:line N` frames |
//! | `ruby.exception` | error | `x.rb:12:in 'm': msg (NameError)` and its `from` frames |
//! | `c.compile_error` | error | `x.c:3:5: error: …` (gcc, clang) |
//! | `c.warning` | warning | `x.c:3:5: warning: …` |
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
//! | `generic.error_log` | error | log-level lines: `ERROR`/`CRITICAL`/`SEVERE`, `level=error`, `"level":"error"` |
//!
//! Cargo's summaries (`error: could not compile …`, `warning: … generated N warnings`)
//! are not alerts: they repeat the diagnostics. Users add patterns (regexes with
//! optional `msg`, `file`, `line`, `col` groups, tried before the built-in rules, one
//! line each) and disable built-in rules by id or category in `[alerts]`
//! ([`corral_config::AlertSettings`]).

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
