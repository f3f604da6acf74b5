//! Multi-line grouping: a traceback, a stack or a compiler diagnostic folded into one
//! alert.
//!
//! A group starts on a rule's starting line and is then offered each following line of
//! the same stream. The group's kind decides, per line, whether it belongs ([`Step::Take`]),
//! ends the group with it ([`Step::TakeEnd`]), shows the group is over ([`Step::End`]), or
//! is unrelated ([`Step::Stray`]): an access-log line printed by another thread in the
//! middle of a traceback. A stray is neither stored nor allowed to end the group until
//! [`Kind::grace`] strays in a row have passed; it is scanned as a line of its own.
//!
//! Some kinds start tentatively: a `  File "x.py", line 3` line is a SyntaxError only if
//! a `SyntaxError:` line follows; `TypeError: x` is a Node error if `at` frames follow
//! (else a [`generic.error_line`](crate#rules)); `error: x` is a Rust diagnostic if a
//! ` --> file:line:col` follows.

use std::time::SystemTime;

use regex::Captures;

use crate::frames::{self, Frame, Frames, Trace};
use crate::model::{Location, MAX_FRAMES, Stream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    PyTraceback,
    PySyntax,
    RustPanic,
    RustDiag,
    GoPanic,
    GoTest,
    Vite,
    Webpack,
    Next,
    Esbuild,
    Java,
    JavaBare,
    Dotnet,
    Ruby,
    JsError,
    // Build tools and package managers: see tools.rs.
    Npm,
    YarnBerry,
    JavaDiag,
    MavenGoal,
    Gradle,
    Ant,
    GoCmd,
    MsbuildSummary,
    /// A log line at error level that a traceback may follow (see scanner.rs).
    LogHeader,
}

impl Kind {
    /// Unrelated lines in a row a group outlives. Python gets many: a traceback is only
    /// useful with its exception line, which always comes. Kinds whose output is never
    /// interleaved in practice (a test runner's, a bundler's) end at the first one.
    fn grace(self) -> usize {
        match self {
            Kind::PyTraceback => 20,
            Kind::RustPanic | Kind::GoPanic | Kind::Java => 3,
            Kind::RustDiag | Kind::Dotnet | Kind::Ruby | Kind::JsError => 2,
            Kind::PySyntax | Kind::JavaBare => 2,
            Kind::Vite | Kind::Next => 1,
            Kind::GoTest | Kind::Webpack | Kind::Esbuild => 0,
            Kind::LogHeader => 3,
            Kind::Npm | Kind::Gradle | Kind::MsbuildSummary => 2,
            Kind::YarnBerry | Kind::JavaDiag | Kind::MavenGoal | Kind::Ant => 1,
            Kind::GoCmd => 0,
        }
    }
}

/// What a line is to an open group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Part of the group.
    Take,
    /// The group's last line.
    TakeEnd,
    /// Neutral (a blank line inside a stack): neither stored nor a stray.
    Skip,
    /// Unrelated; the group goes on unless too many came in a row.
    Stray,
    /// The group ended before this line.
    End,
}

/// Lines of other output a finished Python traceback waits through for the separator of
/// a chain ("During handling of the above exception…") before it is complete.
const CHAIN_GRACE: usize = 3;

/// The summary lines cargo prints after the diagnostics themselves; they repeat what
/// the diagnostics said.
const RUST_SUMMARIES: &[&str] = &[
    "could not compile",
    "aborting due to",
    "process didn't exit successfully",
    "build failed",
];

/// What a completed group says beyond its message: where the error is, in which
/// function, on which source line, its root cause and the reduced stack (the
/// [`Alert`](crate::Alert) fields of the same names).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Context {
    pub location: Option<Location>,
    pub function: Option<String>,
    pub code: Option<String>,
    pub cause: Option<String>,
    pub frames: Vec<String>,
}

#[derive(Debug)]
pub(crate) struct Group {
    pub kind: Kind,
    /// Index of the starting rule in [`AlertRules::rules`](crate::AlertRules).
    pub rule: usize,
    pub stream: Stream,
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    pub lines: Vec<String>,
    pub omitted: usize,
    /// Lines taken, stored or not.
    pub span: usize,
    strays: usize,
    pub message: Option<String>,
    /// Java: the deepest `Caused by:`.
    cause: Option<String>,
    /// .NET: the innermost ` ---> ` (inner exception).
    inner: Option<String>,
    /// The location the starting line or a tool's location line gave.
    pub header_loc: Option<Location>,
    /// Ruby: the starting line's frame (the innermost).
    header_frame: Option<Frame>,
    /// The stack frames seen, per exception of a chain.
    trace: Trace,
    /// Go, Rust: the function line that the next file line belongs to.
    function: Option<String>,
    /// Python: a `File` line came; the source line may follow.
    expect_code: bool,
    /// Java: inside a `Suppressed:` block, whose `... N more` is not its section's.
    suppressed: bool,
    /// Ruby: the line that may be the raising line's source, until its marker line.
    snippet: Option<String>,
    /// Node: the uncaught error's throw site, `file:line` and its source line.
    throw_site: Option<(Location, String)>,
    pub confirmed: bool,
    /// Python: the exception line came; only a chained traceback may follow.
    complete: bool,
    /// Python: lines of other output since the exception line.
    after_exception: usize,
    /// Python: "During handling of the above exception" came; a new header follows.
    chained: bool,
    /// The next line is the message (a Rust panic in the 1.73+ format, webpack).
    expect_message: bool,
    /// Next.js: the location line is still to come.
    expect_location: bool,
    in_backtrace: bool,
    /// The state of the build tools' kinds (tools.rs).
    pub(crate) tool: crate::tools::ToolState,
}

/// Whether `line` is a Python exception line: `ValueError: x`, `KeyboardInterrupt`,
/// `json.decoder.JSONDecodeError: x`. The class name must look like one (capitalised,
/// with a lowercase letter), so `INFO: x` from a logger is not taken.
fn python_exception_line(line: &str) -> bool {
    if !line
        .as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
    {
        return false;
    }
    let name = line.split(':').next().unwrap_or(line);
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return false;
    }
    let class = name.rsplit('.').next().unwrap_or(name);
    class.as_bytes()[0].is_ascii_uppercase() && class.bytes().any(|b| b.is_ascii_lowercase())
}

fn indented(line: &str) -> bool {
    line.starts_with([' ', '\t'])
}

/// A Go goroutine trace's function line: `main.main()`, `main.(*T).m(...)`,
/// `panic({0x4a5b20?, 0xc000012345?})`.
fn go_function_line(line: &str) -> bool {
    !indented(line)
        && line.ends_with(')')
        && line
            .find('(')
            .is_some_and(|open| open > 0 && !line[..open].contains(' '))
}

impl Group {
    /// A group from its starting line, or `None` when the line turns out to be one a
    /// group must not start on (cargo's summary lines).
    pub fn start(
        kind: Kind,
        rule: usize,
        caps: &Captures<'_>,
        stream: Stream,
        now: SystemTime,
    ) -> Option<Self> {
        let text = |name: &str| caps.name(name).map(|m| m.as_str().trim().to_owned());
        let mut g = Group {
            kind,
            rule,
            stream,
            first_seen: now,
            last_seen: now,
            lines: Vec::new(),
            omitted: 0,
            span: 0,
            strays: 0,
            message: text("msg").filter(|m| !m.is_empty()),
            cause: None,
            inner: None,
            header_loc: frames::location(caps),
            header_frame: None,
            trace: Trace::new(kind != Kind::PyTraceback),
            function: None,
            expect_code: false,
            suppressed: false,
            snippet: None,
            throw_site: None,
            confirmed: true,
            complete: false,
            after_exception: 0,
            chained: false,
            expect_message: false,
            expect_location: false,
            in_backtrace: false,
            tool: Default::default(),
        };
        if let Some(message) = &g.message {
            g.trace.exception(message);
        }
        match kind {
            Kind::PySyntax => {
                g.confirmed = false;
                if let Some(loc) = g.header_loc.clone() {
                    let user = frames::python_user(&loc.file);
                    g.trace.push(Frame::new(loc, None, user));
                    g.expect_code = true;
                }
            }
            Kind::JavaBare | Kind::JsError => g.confirmed = false,
            Kind::RustDiag => {
                let msg = g.message.as_deref().unwrap_or_default();
                if RUST_SUMMARIES.iter().any(|s| msg.starts_with(s))
                    || (msg.starts_with('`') && msg.contains(") generated "))
                {
                    return None;
                }
                g.confirmed = false;
            }
            Kind::RustPanic => {
                let rest = text("rest").unwrap_or_default();
                if let Some(at) = rest.strip_suffix(':') {
                    // 1.73+: `panicked at src/main.rs:2:5:`, the message on the next line.
                    g.header_loc = parse_path_line_col(at);
                    g.expect_message = true;
                } else if let Some((msg, at)) = rest.rsplit_once(", ") {
                    // Before 1.73: `panicked at 'boom', src/main.rs:2:5`.
                    g.header_loc = parse_path_line_col(at);
                    let msg = msg.strip_prefix('\'').unwrap_or(msg);
                    g.message = Some(msg.strip_suffix('\'').unwrap_or(msg).to_owned());
                } else {
                    g.message = Some(rest);
                }
            }
            Kind::Ruby => {
                if let (Some(class), Some(msg)) = (text("class"), text("text")) {
                    g.message = Some(format!("{class}: {msg}"));
                }
                if let Some(loc) = g.header_loc.clone() {
                    // `app.rb:3:in 'load': …`: the innermost frame.
                    let all = caps.get(0).map_or("", |m| m.as_str());
                    let function = all
                        .split_once(":in ")
                        .and_then(|(_, rest)| rest.get(1..))
                        .and_then(|rest| rest.split_once('\''))
                        .map(|(name, _)| name);
                    let user = frames::ruby_user(&loc.file);
                    g.header_frame = Some(Frame::new(loc, function, user));
                    g.expect_code = true;
                }
            }
            Kind::Webpack => {
                g.expect_message = true;
                // fork-ts-checker: `ERROR in ./src/App.tsx:3:7`.
                if g.header_loc.is_none() {
                    g.header_loc = text("file").and_then(|f| parse_path_line_col(&f));
                }
            }
            // `error while updating dependencies:`: the error is on the next line.
            Kind::Vite => match text("what") {
                Some(what) if what.ends_with(':') => g.expect_message = true,
                Some(what) => g.message = Some(what),
                None => {}
            },
            Kind::Next => match g.message.take() {
                // ` ⨯ ./app/page.tsx:3:1`: the location, the message on the next line.
                Some(msg) if looks_like_path(&msg) => {
                    g.header_loc = parse_path_line_col(&msg);
                    g.expect_message = true;
                }
                Some(msg) => g.message = Some(msg),
                // `Failed to compile.`: a location line, then the message.
                None => {
                    g.expect_location = true;
                    g.expect_message = true;
                }
            },
            k if k.is_tool() && !crate::tools::start(&mut g, caps) => return None,
            _ => {}
        }
        Some(g)
    }

    /// Keeps `line` (as cleaned, not cut) within the limits.
    pub fn push(&mut self, line: &str, max_lines: usize, max_bytes: usize) {
        self.span += 1;
        self.strays = 0;
        if self.lines.len() < max_lines {
            self.lines.push(crate::cap(line, max_bytes).into_owned());
        } else {
            self.omitted += 1;
        }
    }

    /// Counts a stray; true when the group has outlived its grace. Tentative groups
    /// get the same grace: the line that confirms them may come after an unrelated one.
    pub fn stray(&mut self) -> bool {
        self.strays += 1;
        self.strays > self.kind.grace()
    }

    /// What `line` is to this group, updating message and locations from it.
    pub fn offer(&mut self, line: &str, f: &Frames) -> Step {
        let blank = line.trim().is_empty();
        match self.kind {
            Kind::PyTraceback => self.python(line, blank, f),
            Kind::PySyntax => {
                if blank {
                    Step::End
                } else if indented(line) {
                    if self.expect_code && !frames::marker_line(line) {
                        self.trace.code(line);
                        self.expect_code = false;
                    }
                    Step::Take
                } else if ["SyntaxError", "IndentationError", "TabError"]
                    .iter()
                    .any(|c| line.starts_with(c))
                {
                    self.message = Some(line.to_owned());
                    self.confirmed = true;
                    Step::TakeEnd
                } else {
                    Step::Stray
                }
            }
            Kind::RustPanic => self.rust_panic(line, blank, f),
            Kind::RustDiag => {
                if blank {
                    return Step::End;
                }
                let trimmed = line.trim_start();
                if let Some(at) = trimmed
                    .strip_prefix("--> ")
                    .or(trimmed.strip_prefix("::: "))
                {
                    if self.header_loc.is_none() {
                        self.header_loc = parse_path_line_col(at);
                    }
                    self.confirmed |= self.header_loc.is_some();
                    Step::Take
                } else if indented(line)
                    || trimmed.starts_with('|')
                    || trimmed.starts_with('=')
                    || line.starts_with("help: ")
                    || line.starts_with("note: ")
                    || trimmed
                        .split_once(" |")
                        .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok())
                {
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::GoPanic => {
                if blank {
                    Step::Skip
                } else if line.starts_with("exit status ") {
                    Step::TakeEnd
                } else if let Some(caps) = f.go.captures(line) {
                    if let Some(loc) = frames::location(&caps) {
                        let function = self.function.take();
                        let user = frames::go_user(&caps["file"]);
                        self.trace.push(Frame::new(loc, function.as_deref(), user));
                    }
                    Step::Take
                } else if line.starts_with("goroutine ") {
                    // Another goroutine's trace (GOTRACEBACK=all): the panicking one
                    // comes first.
                    self.trace.split();
                    Step::Take
                } else if let Some(by) = line.strip_prefix("created by ") {
                    // `created by main.main in goroutine 1`: where it was started.
                    let by = by.split_once(" in goroutine ").map_or(by, |(f, _)| f);
                    self.function = Some(by.to_owned());
                    Step::Take
                } else if go_function_line(line) {
                    // `main.(*T).handler(0xc000010000, {0x4a5b20?})`: the next line's.
                    let name = line.rfind('(').map_or(line, |open| &line[..open]);
                    self.function = Some(name.to_owned());
                    Step::Take
                } else if indented(line) || line.starts_with('[') {
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::GoTest => {
                if blank || !indented(line) {
                    return Step::End;
                }
                // `    parse_test.go:12: got 3, want 4`: the first failure says it.
                if self.header_loc.is_none()
                    && let Some((at, rest)) = line.trim_start().split_once(": ")
                    && at.contains(".go:")
                {
                    self.header_loc = parse_path_line_col(at);
                    if let Some(test) = &self.message {
                        self.message = Some(format!("{test}: {}", rest.trim()));
                    }
                }
                Step::Take
            }
            Kind::Vite => {
                if blank {
                    Step::Skip
                } else if self.expect_message {
                    self.expect_message = false;
                    self.message = Some(line.trim().to_owned());
                    Step::Take
                } else if indented(line) {
                    if let Some(at) = line.trim_start().strip_prefix("File: ")
                        && self.header_loc.is_none()
                    {
                        self.header_loc = parse_path_line_col(at);
                    }
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::Webpack => {
                if blank {
                    return if self.expect_message {
                        Step::Skip
                    } else {
                        Step::End
                    };
                }
                if line.starts_with("webpack ") || line.starts_with("ERROR in ") {
                    return Step::End;
                }
                if self.expect_message {
                    match crate::tools::webpack_preamble(line) {
                        // `Module build failed (from …):`, a loader's location line.
                        Some(loc) => {
                            if self.header_loc.is_none() {
                                self.header_loc = loc;
                            }
                        }
                        None => {
                            self.message = Some(line.trim().to_owned());
                            self.expect_message = false;
                        }
                    }
                }
                Step::Take
            }
            Kind::Next => {
                if blank {
                    return if self.expect_message {
                        Step::Skip
                    } else {
                        Step::End
                    };
                }
                if self.expect_location && looks_like_path(line.trim()) {
                    self.header_loc = parse_path_line_col(line.trim());
                    self.expect_location = false;
                    return Step::Take;
                }
                if self.expect_message {
                    self.message = Some(line.trim().to_owned());
                    self.expect_message = false;
                    self.expect_location = false;
                    return Step::Take;
                }
                if let Some(caps) = f.node.captures(line) {
                    self.node_frame(&caps);
                }
                if indented(line) {
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::Esbuild => {
                if blank {
                    Step::Skip
                } else if indented(line) {
                    if self.header_loc.is_none()
                        && let Some(at) = line.trim().strip_suffix(':')
                    {
                        self.header_loc = parse_path_line_col(at);
                    }
                    Step::Take
                } else {
                    Step::End
                }
            }
            Kind::Java | Kind::JavaBare => self.java(line, blank, f),
            Kind::Dotnet => {
                if blank {
                    Step::End
                } else if let Some(caps) = f.dotnet.captures(line) {
                    if let Some(loc) = frames::location(&caps) {
                        // `Api.Program.Main(String[] args)`: the method without its
                        // parameters.
                        let method = &caps["method"];
                        let name = method.split_once('(').map_or(method, |(m, _)| m);
                        let user = frames::dotnet_user(method);
                        self.trace.push(Frame::new(loc, Some(name), user));
                    }
                    Step::Take
                } else if let Some(inner) = line.trim_start().strip_prefix("---> ") {
                    // ` ---> System.FormatException: …`: an inner exception, printed
                    // innermost last; its frames come first.
                    self.inner = Some(inner.trim().to_owned());
                    Step::Take
                } else if indented(line) {
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::Ruby => {
                if let Some(caps) = f.ruby.captures(line) {
                    self.expect_code = false;
                    if let Some(loc) = frames::location(&caps) {
                        let function = caps.name("func").map(|m| m.as_str());
                        let user = frames::ruby_user(&caps["file"]);
                        self.trace.push(Frame::new(loc, function, user));
                    }
                    Step::Take
                } else if blank {
                    Step::Skip
                } else if crate::tools::ruby_cause(line) {
                    // Ruby 3.1+ prints the cause after the frames, in the shape of the
                    // first line: the `from` frames after it are the cause's, not the
                    // exception's.
                    self.expect_code = false;
                    let cause = ruby_exception(line).unwrap_or_else(|| line.trim().to_owned());
                    self.trace.section(Some(cause));
                    Step::Take
                } else if indented(line) || line.starts_with("Did you mean?") {
                    // Ruby 3.1+ (error_highlight): the raising line's source and `^^^^`
                    // under it, before the `from` lines. Only an indented line followed
                    // by its marker line is taken for it.
                    if self.expect_code && indented(line) {
                        if !frames::marker_line(line) {
                            self.snippet.get_or_insert_with(|| line.to_owned());
                        } else if let (Some(h), Some(code)) =
                            (&mut self.header_frame, self.snippet.take())
                        {
                            h.code = frames::code_line(&code);
                            self.expect_code = false;
                        }
                    }
                    Step::Take
                } else {
                    Step::Stray
                }
            }
            Kind::JsError => self.js(line, blank, f),
            _ => crate::tools::offer(self, line, blank),
        }
    }

    /// Records a Node frame (`at f (file:1:2)`, `at file:1:2`).
    fn node_frame(&mut self, caps: &Captures<'_>) {
        if let Some(loc) = frames::location(caps) {
            let function = caps.name("func").map(|m| m.as_str());
            let user = frames::node_user(&caps["file"]);
            self.trace.push(Frame::new(loc, function, user));
        }
    }

    fn python(&mut self, line: &str, blank: bool, f: &Frames) -> Step {
        if blank {
            return Step::Skip;
        }
        if self.complete {
            return if line.starts_with("During handling of the above exception")
                || line.starts_with("The above exception was the direct cause")
            {
                self.complete = false;
                self.chained = true;
                Step::Take
            } else if self.after_exception < CHAIN_GRACE {
                // Python writes a chain's parts one by one: another thread's line may
                // come before the separator. Scanned as lines of their own meanwhile.
                self.after_exception += 1;
                Step::Stray
            } else {
                Step::End
            };
        }
        if line.starts_with("Traceback (most recent call last)") {
            return if self.chained {
                self.chained = false;
                self.trace.section(None);
                Step::Take
            } else {
                Step::End
            };
        }
        if let Some(caps) = f.python.captures(line) {
            if let Some(loc) = frames::location(&caps) {
                let function = caps.name("func").map(|m| m.as_str());
                let user = frames::python_user(&caps["file"]);
                self.trace.push(Frame::new(loc, function, user));
                self.expect_code = true;
            }
            return Step::Take;
        }
        if indented(line) {
            // The source line under a `File` line; Python 3.11+ may add a line of
            // `~~~^^^` markers under it.
            if self.expect_code && !frames::marker_line(line) {
                self.trace.code(line);
                self.expect_code = false;
            }
            return Step::Take;
        }
        if python_exception_line(line) {
            self.expect_code = false;
            self.after_exception = 0;
            self.message = Some(line.to_owned());
            self.trace.exception(line);
            self.complete = true;
            return Step::Take;
        }
        Step::Stray
    }

    fn rust_panic(&mut self, line: &str, blank: bool, f: &Frames) -> Step {
        if self.expect_message {
            self.expect_message = false;
            self.message = Some(line.trim().to_owned());
            return Step::Take;
        }
        if blank {
            return Step::Skip;
        }
        if line.starts_with("note: run with `RUST_BACKTRACE")
            || line.starts_with("note: Some details are omitted")
        {
            return Step::TakeEnd;
        }
        if line.starts_with("stack backtrace:") {
            self.in_backtrace = true;
            return Step::Take;
        }
        if self.in_backtrace
            && let Some(caps) = f.rust.captures(line)
        {
            if let Some(loc) = frames::location(&caps) {
                let function = self.function.take();
                let user = frames::rust_user(&caps["file"]);
                self.trace.push(Frame::new(loc, function.as_deref(), user));
            }
            return Step::Take;
        }
        if indented(line) {
            if self.in_backtrace {
                // `   4: boom::parse_port` (`   4:     0x55d… - boom::parse_port::h…`
                // with RUST_BACKTRACE=full; an inlined function has no number).
                let t = line.trim();
                let t = t
                    .split_once(": ")
                    .filter(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()))
                    .map_or(t, |(_, name)| name.trim_start());
                let t = t
                    .strip_prefix("0x")
                    .and_then(|addr| addr.split_once(" - "))
                    .map_or(t, |(_, name)| name);
                self.function = Some(t.to_owned());
            }
            Step::Take
        } else {
            Step::Stray
        }
    }

    fn java(&mut self, line: &str, blank: bool, f: &Frames) -> Step {
        if blank {
            return if self.confirmed {
                Step::Skip
            } else {
                Step::End
            };
        }
        if let Some(caps) = f.java.captures(line) {
            self.confirmed = true;
            // A `Suppressed:` exception's frames are not its section's: they would shift
            // what `... N more` counts from the end.
            if !self.suppressed
                && let Some(loc) = frames::location(&caps)
            {
                let method = &caps["method"];
                let user = frames::java_user(method);
                self.trace.push(Frame::new(loc, Some(method), user));
            }
            return Step::Take;
        }
        if !self.confirmed {
            return Step::Stray;
        }
        if let Some(cause) = line.strip_prefix("Caused by: ") {
            let cause = cause.trim().to_owned();
            self.trace.section(Some(cause.clone()));
            self.cause = Some(cause);
            self.suppressed = false;
            return Step::Take;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("Suppressed: ") {
            self.suppressed = true;
        } else if !self.suppressed
            && let Some(n) = trimmed.strip_prefix("... ").and_then(|rest| {
                // `... 2 more` (the JVM), `... 12 common frames omitted` (logback).
                let (n, what) = rest.split_once(' ')?;
                (what == "more" || what == "common frames omitted").then_some(n)
            })
            && let Ok(n) = n.parse()
        {
            self.trace.elided(n);
        }
        if indented(line) {
            Step::Take
        } else {
            Step::Stray
        }
    }

    fn js(&mut self, line: &str, blank: bool, f: &Frames) -> Step {
        if blank {
            return if self.confirmed {
                Step::Skip
            } else {
                Step::End
            };
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("at ") {
            self.confirmed = true;
            if let Some(caps) = f.node.captures(line) {
                self.node_frame(&caps);
            }
            return Step::Take;
        }
        // `Error.cause` (Node 16.9+): `  [cause]: TypeError: x`, indented one level
        // more for each cause of a cause; `Caused by: X` as libraries print it.
        if self.confirmed
            && let Some(cause) = trimmed
                .strip_prefix("[cause]: ")
                .or_else(|| line.strip_prefix("Caused by: "))
        {
            let cause = cause.trim().trim_end_matches(" {").trim_end();
            // A cause that is no error (`[cause]: { code: 1 }`) has no exception line.
            let exception =
                (!cause.is_empty() && !cause.starts_with(['{', '['])).then(|| cause.to_owned());
            self.trace.section(exception);
            return Step::Take;
        }
        if line.starts_with("Node.js v") {
            return Step::TakeEnd;
        }
        if line.starts_with("Require stack:") || (line.starts_with("- ") && !self.confirmed) {
            return Step::Take;
        }
        if self.confirmed && (indented(line) || line == "}") {
            // An error's own properties: `  code: 'ERR_X',` … `}`.
            return Step::Take;
        }
        Step::Stray
    }

    /// Where the error is and what else an agent needs to fix it, per kind (see the
    /// crate docs, "Messages and locations").
    pub fn conclude(&mut self) -> Context {
        self.trace.seal();
        let t = &self.trace;
        let last = t.sections().len() - 1;
        let bare = |loc: &Option<Location>| loc.clone().map(|l| Frame::new(l, None, false));
        let frame: Option<Frame> = match self.kind {
            Kind::PyTraceback => {
                let syntax = self.message.as_deref().is_some_and(|m| {
                    ["SyntaxError", "IndentationError", "TabError"]
                        .iter()
                        .any(|c| m.starts_with(c))
                });
                // A chain's first traceback is the root cause's.
                match t.nameless() {
                    Some(f) if syntax => Some(f),
                    _ => t
                        .innermost_user(0)
                        .or_else(|| t.printed_user())
                        .or_else(|| t.printed_any()),
                }
                .cloned()
            }
            Kind::PySyntax => t.nameless().cloned().or_else(|| bare(&self.header_loc)),
            Kind::RustPanic => match &self.header_loc {
                // The panic's own location is the line; the backtrace names its function.
                Some(h) if frames::rust_user(&h.file) => {
                    let mut at = Frame::new(h.clone(), None, true);
                    if let Some(f) = t.user_stack(0).into_iter().find(|f| f.is_at(h)) {
                        at.function.clone_from(&f.function);
                    }
                    Some(at)
                }
                h => t.innermost_user(0).cloned().or_else(|| bare(h)),
            },
            // The last `Caused by:` is the root cause.
            Kind::Java | Kind::JavaBare => t
                .innermost_user(last)
                .or_else(|| t.innermost_user(0))
                .or_else(|| t.innermost_any(0))
                .cloned(),
            Kind::Ruby => match &self.header_frame {
                Some(h) if h.user => Some(h.clone()),
                h => t.innermost_user(0).cloned().or_else(|| h.clone()),
            },
            // Build tools and package managers (tools.rs): where the tool says, no frames.
            Kind::RustDiag
            | Kind::GoTest
            | Kind::Vite
            | Kind::Webpack
            | Kind::Esbuild
            | Kind::Npm
            | Kind::YarnBerry
            | Kind::JavaDiag
            | Kind::MavenGoal
            | Kind::Gradle
            | Kind::Ant
            | Kind::GoCmd
            | Kind::MsbuildSummary
            | Kind::LogHeader => bare(&self.header_loc),
            Kind::Next => bare(&self.header_loc)
                .or_else(|| t.printed_user().or_else(|| t.printed_any()).cloned()),
            // The innermost `[cause]:` is the root cause.
            Kind::JsError => t
                .innermost_user(last)
                .or_else(|| t.printed_user())
                .or_else(|| t.printed_any())
                .cloned(),
            Kind::GoPanic | Kind::Dotnet => t.printed_user().or_else(|| t.printed_any()).cloned(),
        };

        let mut stack = match self.kind {
            Kind::PyTraceback => t.python_root_stack(),
            Kind::Java | Kind::JavaBare => t.java_root_stack(),
            Kind::JsError => t.user_stack(last),
            Kind::Ruby => {
                let mut stack = t.user_stack(0);
                if let Some(h) = self.header_frame.as_ref().filter(|h| h.user) {
                    stack.insert(0, h);
                }
                stack
            }
            _ => t.user_stack(0),
        };
        if stack.is_empty() {
            // No user frame in the root cause's stack: the one the location came from.
            stack = match self.kind {
                Kind::PyTraceback => (0..=last)
                    .rev()
                    .map(|i| t.user_stack(i))
                    .find(|s| !s.is_empty()),
                Kind::JsError => (0..=last).map(|i| t.user_stack(i)).find(|s| !s.is_empty()),
                Kind::Java | Kind::JavaBare => Some(t.user_stack(0)),
                _ => None,
            }
            .unwrap_or_default();
        }
        let frames = stack
            .iter()
            .take(MAX_FRAMES)
            .map(|f| f.describe())
            .collect();

        let cause = match self.kind {
            Kind::PyTraceback if last > 0 => t.sections()[0].exception.clone(),
            Kind::Java | Kind::JavaBare => self.cause.clone(),
            Kind::JsError if last > 0 => t.sections()[last].exception.clone(),
            // Ruby 3.1+: the last cause printed after the frames.
            Kind::Ruby if last > 0 => t.sections()[last].exception.clone(),
            Kind::Dotnet => self.inner.clone(),
            _ => None,
        }
        .filter(|c| Some(c) != self.message.as_ref());

        let Some(frame) = frame else {
            return Context {
                cause,
                frames,
                ..Context::default()
            };
        };
        // Node printed the throwing line above the error when it is this frame's.
        let code = frame.code.clone().or_else(|| {
            let (at, code) = self.throw_site.as_ref()?;
            frame.is_at(at).then(|| frames::code_line(code))?
        });
        Context {
            location: Some(frame.loc),
            function: frame.function,
            code,
            cause,
            frames,
        }
    }

    /// Node: the throw site printed before the error line (see [`frames::ThrowSite`]).
    pub fn set_throw_site(&mut self, site: Option<(Location, String)>) {
        self.throw_site = site;
    }

    /// The decisive line. Java: the exception thrown out of the thread, and the root
    /// cause after it, since that is usually where the bug is.
    pub fn message(&self) -> Option<String> {
        let message = self.message.clone()?;
        match (&self.kind, &self.cause) {
            (Kind::Java | Kind::JavaBare, Some(cause)) => {
                Some(format!("{message} (caused by {cause})"))
            }
            _ => Some(message),
        }
    }
}

/// Ruby's `app.rb:12:in 'load': text (Class)` as an exception line: `Class: text`.
fn ruby_exception(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("': ")?;
    let (text, class) = rest.strip_suffix(')')?.rsplit_once(" (")?;
    Some(format!("{class}: {text}"))
}

fn looks_like_path(s: &str) -> bool {
    !s.contains(' ')
        && (s.starts_with("./") || s.starts_with('/'))
        && s.split(':').next().is_some_and(|p| p.contains('.'))
}

/// `path:line:col` or `path:line` (the path itself may contain `:` on Windows, so the
/// numbers are taken from the end).
pub(crate) fn parse_path_line_col(s: &str) -> Option<Location> {
    let s = s.trim();
    let (rest, last) = s.rsplit_once(':')?;
    last.parse::<u32>().ok()?;
    match rest.rsplit_once(':') {
        Some((file, line)) if line.parse::<u32>().is_ok() => {
            Location::parse(file, line, Some(last))
        }
        _ => Location::parse(rest, last, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_exception_lines_are_told_from_log_lines() {
        assert!(python_exception_line("ValueError: bad"));
        assert!(python_exception_line("KeyboardInterrupt"));
        assert!(python_exception_line(
            "json.decoder.JSONDecodeError: Expecting value"
        ));
        assert!(!python_exception_line("INFO: 127.0.0.1 GET /"));
        assert!(!python_exception_line(
            "During handling of the above exception"
        ));
        assert!(!python_exception_line("127.0.0.1 - - GET"));
    }

    #[test]
    fn path_line_col_takes_numbers_from_the_end() {
        let loc = parse_path_line_col("src/main.rs:3:18").unwrap();
        assert_eq!(loc.to_string(), "src/main.rs:3:18");
        assert_eq!(
            parse_path_line_col("C:\\x\\a.ts:4").unwrap().to_string(),
            "C:\\x\\a.ts:4"
        );
        assert_eq!(parse_path_line_col("no numbers"), None);
    }
}
