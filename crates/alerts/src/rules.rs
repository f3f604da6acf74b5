//! The rule set: the built-in rules, the user's patterns, and the literal prefilter
//! that keeps the common line (one that matches nothing) to a single pass.

use std::time::Duration;

use aho_corasick::AhoCorasick;
use corral_config::AlertSettings;
use regex::{Regex, RegexSet};

use crate::frames::{self, Frames};
use crate::group::Kind;
use crate::model::Severity;
use crate::reload::{RELOADS, Signal};

/// What a rule does with a line it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The line is the alert. Named groups `msg`, `file`, `line`, `col` give the message
    /// (else the whole line) and the location.
    Line,
    /// The line starts a multi-line group (a traceback, a stack, a diagnostic).
    Group(Kind),
    /// The line looks like an error but only announces or wraps others (Maven's
    /// `[ERROR] COMPILATION ERROR :`): it is claimed, so that no generic rule takes it,
    /// and gives nothing but the end of an open group.
    Ignore,
    /// A one-line summary of a build whose errors were probably reported already
    /// (webpack's `compiled with 2 errors`): an alert only when no error alert came from
    /// the stream since the last summary or reload signal.
    Summary,
}

/// One built-in rule, as written in [`DEFAULTS`].
struct Spec {
    id: &'static str,
    severity: Severity,
    action: Action,
    /// Substrings of which every line the regex matches contains at least one: the
    /// prefilter. The regex runs only on a line that contains one.
    literals: &'static [&'static str],
    regex: &'static str,
}

/// The index of `lit` in `literals`, added at the end when new.
fn intern(literals: &mut Vec<&'static str>, lit: &'static str) -> usize {
    match literals.iter().position(|l| *l == lit) {
        Some(at) => at,
        None => {
            literals.push(lit);
            literals.len() - 1
        }
    }
}

/// The category of a rule is the part of its id before the first dot.
pub(crate) fn category_of(id: &str) -> &str {
    id.split('.').next().unwrap_or(id)
}

/// The categories of the built-in rules, documented in the crate docs. Stable: users
/// write them in `disable`.
pub const CATEGORIES: &[&str] = &[
    "rust",
    "go",
    "python",
    "node",
    "typescript",
    "bundler",
    "java",
    "ruby",
    "dotnet",
    "c",
    "generic",
];

use Action::{Group, Ignore, Line, Summary};
use Severity::{Error, Warning};

/// The built-in rules, in priority order: the first rule whose regex matches a line
/// claims it. Ecosystem rules come before the generic ones, so `Error: listen
/// EADDRINUSE` with a Node stack is a `node.error`, and `generic` only takes what no
/// ecosystem recognised. Several specs may share an id (one rule, two line shapes).
const DEFAULTS: &[Spec] = &[
    // ---- Python ----
    Spec {
        id: "python.traceback",
        severity: Error,
        action: Group(Kind::PyTraceback),
        literals: &["Traceback (most recent call last)"],
        regex: r"^Traceback \(most recent call last\):",
    },
    Spec {
        id: "python.syntax_error",
        severity: Error,
        action: Group(Kind::PySyntax),
        literals: &["File \""],
        regex: r#"^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)$"#,
    },
    Spec {
        id: "python.warning",
        severity: Warning,
        action: Line,
        literals: &["Warning: "],
        regex: r"^(?P<file>\S.*?\.py):(?P<line>\d+): (?P<msg>[A-Z]\w*Warning: .+)",
    },
    // ---- Rust ----
    Spec {
        id: "rust.panic",
        severity: Error,
        action: Group(Kind::RustPanic),
        literals: &["panicked at"],
        regex: r"^thread '(?P<thread>[^']*)'(?: \(\d+\))? panicked at (?P<rest>.+)$",
    },
    Spec {
        id: "rust.compile_error",
        severity: Error,
        action: Group(Kind::RustDiag),
        literals: &["error[E", "error: "],
        regex: r"^error(?:\[(?P<code>E\d{4})\])?: (?P<msg>.+)$",
    },
    Spec {
        id: "rust.warning",
        severity: Warning,
        action: Group(Kind::RustDiag),
        literals: &["warning: ", "warning["],
        regex: r"^warning(?:\[(?P<code>[\w:]+)\])?: (?P<msg>.+)$",
    },
    // ---- Go ----
    Spec {
        id: "go.panic",
        severity: Error,
        action: Group(Kind::GoPanic),
        literals: &["panic: "],
        regex: r"^panic: (?P<msg>.+?)(?: \[recovered\])?$",
    },
    Spec {
        id: "go.build_error",
        severity: Error,
        action: Line,
        literals: &[".go:"],
        regex: r"^(?P<file>[^\s:]+\.go):(?P<line>\d+):(?P<col>\d+): (?P<msg>.+)$",
    },
    Spec {
        id: "go.test_fail",
        severity: Error,
        action: Group(Kind::GoTest),
        literals: &["--- FAIL: "],
        regex: r"^\s*--- FAIL: (?P<msg>\S+)",
    },
    Spec {
        id: "go.package_fail",
        severity: Error,
        action: Line,
        literals: &["FAIL"],
        regex: r"^FAIL\s+(?P<msg>[\w.\-/]+(?: \[[\w ]+\])?)",
    },
    Spec {
        id: "go.module_error",
        severity: Error,
        action: Group(Kind::GoCmd),
        literals: &["go: "],
        regex: r"^go: (?P<msg>.+)$",
    },
    // ---- TypeScript ----
    Spec {
        id: "typescript.error",
        severity: Error,
        action: Line,
        literals: &["error TS"],
        regex: r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+),(?P<col>\d+)\): error TS\d+: (?P<msg>.+)$",
    },
    Spec {
        id: "typescript.error",
        severity: Error,
        action: Line,
        literals: &["error TS"],
        regex: r"^(?P<file>\S+?):(?P<line>\d+):(?P<col>\d+) - error TS\d+: (?P<msg>.+)$",
    },
    Spec {
        id: "typescript.error",
        severity: Error,
        action: Line,
        literals: &["error TS"],
        regex: r"^error TS\d+: (?P<msg>.+)$",
    },
    // ---- .NET builds (MSBuild's console logger, which a redirected `dotnet build` uses) ----
    Spec {
        id: "dotnet.build_error",
        severity: Error,
        action: Line,
        literals: &["error "],
        regex: r"^\s*(?P<file>[^\s(][^(]*?)\((?P<line>\d+)(?:,(?P<col>\d+))?(?:,\d+,\d+)?\): error (?P<msg>[A-Z]{2,}\d+: .+?)(?: \[[^\]]+\])?$",
    },
    Spec {
        id: "dotnet.build_error",
        severity: Error,
        action: Line,
        literals: &["error "],
        regex: r"^\s*(?:[^\s:(\[][^:(\[]*?) : error (?P<msg>[A-Z]{2,}\d+: .+?)(?: \[[^\]]+\])?$",
    },
    Spec {
        id: "dotnet.build_error",
        severity: Error,
        action: Line,
        literals: &["error "],
        regex: r"^\s*error (?P<msg>(?:NETSDK|MSB|NU|CS)\d+: .+?)(?: \[[^\]]+\])?$",
    },
    Spec {
        // `Build FAILED.` and the diagnostics MSBuild repeats after it: no alert.
        id: "dotnet.build_error",
        severity: Error,
        action: Group(Kind::MsbuildSummary),
        literals: &["Build FAILED."],
        regex: r"^Build FAILED\.$",
    },
    Spec {
        id: "dotnet.watch",
        severity: Error,
        action: Line,
        literals: &["dotnet watch "],
        regex: r"^dotnet watch ❌ (?:\[[^\]]+\] )?(?P<msg>.+)$",
    },
    // ---- Bundlers ----
    Spec {
        id: "bundler.vite",
        severity: Error,
        action: Group(Kind::Vite),
        // "[vite]" (ANSI colours may follow it): every hot-update line has it, but they
        // are reload signals, so
        // candidates anyway.
        literals: &["[vite]"],
        regex: r"\[vite\] (?:\(\w+\) )?(?:Internal server error|Pre-transform error(?: \([^)]*\))?): (?P<msg>.+)$",
    },
    Spec {
        // The dependency scan's failure wraps esbuild's errors, printed inside it (and
        // reported as `bundler.esbuild`).
        id: "bundler.vite",
        severity: Error,
        action: Ignore,
        literals: &["Failed to scan for dependencies"],
        regex: r"^Error: +Failed to scan for dependencies from entries:$",
    },
    Spec {
        id: "bundler.vite",
        severity: Error,
        action: Group(Kind::Vite),
        literals: &["[vite]"],
        regex: r"\[vite\] (?:\(\w+\) )?(?P<what>error while updating dependencies:|server restart failed)$",
    },
    Spec {
        id: "bundler.webpack",
        severity: Error,
        action: Group(Kind::Webpack),
        literals: &["ERROR in "],
        regex: r"^ERROR in (?P<file>\S+?)(?: (?P<line>\d+):(?P<col>\d+)(?:-\d+(?::\d+)?)?)?$",
    },
    Spec {
        // A summary: an alert only when no error was reported since the last build.
        id: "bundler.webpack_failed",
        severity: Error,
        action: Summary,
        literals: &["webpack "],
        regex: r"^(?P<msg>(?:\S.*?\s)?compiled with \d+ errors?(?: and \d+ warnings?)?)(?: in \d+(?:\.\d+)? m?s)?$",
    },
    Spec {
        id: "bundler.nextjs",
        severity: Error,
        action: Group(Kind::Next),
        literals: &["Failed to compile", " ⨯ "],
        regex: r"(?:Failed to compile|^\s*⨯ (?P<msg>.+)$)",
    },
    Spec {
        id: "bundler.esbuild",
        severity: Error,
        action: Group(Kind::Esbuild),
        literals: &["[ERROR]"],
        regex: r"✘ \[ERROR\] (?P<msg>.+)$",
    },
    Spec {
        id: "bundler.esbuild_warning",
        severity: Warning,
        action: Group(Kind::Esbuild),
        literals: &["[WARNING]"],
        regex: r"▲ \[WARNING\] (?P<msg>.+)$",
    },
    // ---- Java ----
    Spec {
        id: "java.exception",
        severity: Error,
        action: Group(Kind::Java),
        literals: &["Exception in thread "],
        regex: r#"^Exception in thread "[^"]*" (?P<msg>.+)$"#,
    },
    Spec {
        id: "java.exception",
        severity: Error,
        action: Group(Kind::JavaBare),
        literals: &["Exception", "Error"],
        regex: r"^(?P<msg>(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)(?::\s.*)?)$",
    },
    Spec {
        id: "java.launcher",
        severity: Error,
        action: Line,
        literals: &["Error: Could not", "jarfile", "Error: Main method"],
        regex: r"^Error: (?P<msg>(?:Could not find or load main class|Could not create the Java Virtual Machine|Unable to access jarfile|Invalid or corrupt jarfile|Main method not found in class)\b.*)$",
    },
    Spec {
        // Maven's `[ERROR] /x/App.java:[5,20] cannot find symbol`.
        id: "java.compile_error",
        severity: Error,
        action: Group(Kind::JavaDiag),
        literals: &[".java:"],
        regex: r"^\[ERROR\] (?P<file>\S+\.java):\[(?P<line>\d+),(?P<col>\d+)\] (?P<msg>.+)$",
    },
    Spec {
        // javac's `App.java:3: error: cannot find symbol`, as Ant prints it (`[javac] …`)
        // and Gradle 4 (which glues its task name to the first one: `:compileJava/x/…`).
        id: "java.compile_error",
        severity: Error,
        action: Group(Kind::JavaDiag),
        literals: &[".java:"],
        regex: r"^(?:\s*\[javac\] |:[\w-]+)?(?P<file>[^\s:]+\.java):(?P<line>\d+): error: (?P<msg>.+)$",
    },
    Spec {
        id: "java.compile_error",
        severity: Error,
        action: Ignore,
        literals: &["COMPILATION ERROR"],
        regex: r"^\[ERROR\] COMPILATION ERROR :?\s*$",
    },
    Spec {
        id: "java.build_failed",
        severity: Error,
        action: Group(Kind::MavenGoal),
        literals: &["Failed to execute goal"],
        regex: r"^\[ERROR\] (?P<msg>Failed to execute goal .+?)(?: -> \[Help \d+\])?$",
    },
    Spec {
        id: "java.build_failed",
        severity: Error,
        action: Group(Kind::Gradle),
        literals: &["FAILURE: Build "],
        regex: r"^FAILURE: Build (?:failed with an exception|completed with \d+ failures)\.$",
    },
    Spec {
        id: "java.build_failed",
        severity: Error,
        action: Group(Kind::Ant),
        literals: &["BUILD FAILED"],
        regex: r"^BUILD FAILED$",
    },
    // ---- Python, without a traceback ----
    Spec {
        // `django.core.exceptions.ImproperlyConfigured: …`; a dotted `…Error`/`…Exception`
        // line without frames is a tentative `java.exception` first (see scanner.rs).
        id: "python.exception",
        severity: Error,
        action: Line,
        literals: &[".exc", ".error"],
        regex: r"^(?P<msg>(?:[a-z_][a-z0-9_]*\.)+(?:exceptions?|errors?|exc)\.[A-Z][A-Za-z0-9_]*(?::\s.*)?)$",
    },
    // ---- .NET ----
    Spec {
        id: "dotnet.exception",
        severity: Error,
        action: Group(Kind::Dotnet),
        literals: &["Unhandled exception. "],
        regex: r"^Unhandled exception\. (?P<msg>.+)$",
    },
    // ---- Ruby ----
    Spec {
        id: "ruby.exception",
        severity: Error,
        action: Group(Kind::Ruby),
        literals: &[":in "],
        regex: r"^(?P<file>\S+?):(?P<line>\d+):in [`'][^']*': (?P<text>.+) \((?P<class>[A-Z][\w:]*)\)$",
    },
    Spec {
        id: "ruby.errno",
        severity: Error,
        action: Line,
        literals: &["Errno::"],
        regex: r"^(?:(?P<m2>Errno::[A-Z0-9]+: .+)|(?P<msg>.*\(Errno::[A-Z0-9]+\).*))$",
    },
    // ---- C / C++ (gcc, clang) ----
    Spec {
        id: "c.compile_error",
        severity: Error,
        action: Line,
        literals: &[": error: ", ": fatal error: "],
        regex: r"^(?P<file>[^\s:]+\.(?:c|cc|cpp|cxx|h|hh|hpp|m|mm)):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: (?P<msg>.+)$",
    },
    Spec {
        id: "c.warning",
        severity: Warning,
        action: Line,
        literals: &[": warning: "],
        regex: r"^(?P<file>[^\s:]+\.(?:c|cc|cpp|cxx|h|hh|hpp|m|mm)):(?P<line>\d+):(?:(?P<col>\d+):)? warning: (?P<msg>.+)$",
    },
    // ---- Node ----
    Spec {
        id: "node.npm",
        severity: Error,
        action: Group(Kind::Npm),
        literals: &["npm ERR!", "npm error"],
        regex: r"^npm (?:ERR!|error)(?: (?P<msg>.*))?$",
    },
    Spec {
        // yarn 1: `error Command failed with exit code 2.`
        id: "node.yarn",
        severity: Error,
        action: Line,
        literals: &["error "],
        regex: r#"^error (?P<msg>[A-Z"].*)$"#,
    },
    Spec {
        // yarn 2+ (clipanion): `Usage Error: Couldn't find a script named "dev".`
        id: "node.yarn",
        severity: Error,
        action: Line,
        literals: &["Usage Error: ", "Internal Error: "],
        regex: r"^(?:Usage|Internal) Error: (?P<msg>.+)$",
    },
    Spec {
        // yarn 2+: a `➤ YN0000: · Failed with errors` run of `➤ YN…` lines.
        id: "node.yarn",
        severity: Error,
        action: Group(Kind::YarnBerry),
        literals: &["➤ YN"],
        regex: r"^➤ (?P<code>YN\d{4}): (?P<msg>.*)$",
    },
    Spec {
        id: "node.nodemon_crashed",
        severity: Error,
        action: Line,
        literals: &["[nodemon] "],
        regex: r"^\[nodemon\] (?P<msg>app crashed\b.*)$",
    },
    Spec {
        id: "node.unhandled_rejection",
        severity: Error,
        action: Line,
        literals: &["UnhandledPromiseRejection"],
        regex: r"UnhandledPromiseRejection(?:Warning)?:? (?P<msg>.+?)\]?(?: \{)?$",
    },
    Spec {
        id: "node.warning",
        severity: Warning,
        action: Line,
        literals: &["(node:"],
        regex: r"^\(node:\d+\) (?:\[[\w-]+\] )?(?P<msg>[A-Z]\w*Warning: .+)$",
    },
    Spec {
        id: "node.error",
        severity: Error,
        action: Group(Kind::JsError),
        literals: &["Error: ", "Error ["],
        regex: r"^(?:Uncaught )?(?P<msg>(?:[A-Z]\w*)?Error(?: \[[\w-]+\])?: .*)$",
    },
    Spec {
        id: "node.module_not_found",
        severity: Error,
        action: Line,
        literals: &["Cannot find "],
        regex: r"(?P<msg>Cannot find (?:module|package) '[^']+'.*)$",
    },
    // ---- generic ----
    Spec {
        id: "generic.address_in_use",
        severity: Error,
        action: Line,
        literals: &["EADDRINUSE", "ddress already in use"],
        regex: r"(?:EADDRINUSE|[Aa]ddress already in use)",
    },
    Spec {
        id: "generic.connection_refused",
        severity: Error,
        action: Line,
        literals: &["ECONNREFUSED", "onnection refused"],
        regex: r"(?:ECONNREFUSED|[Cc]onnection refused)",
    },
    Spec {
        id: "generic.segfault",
        severity: Error,
        action: Line,
        literals: &["Segmentation fault", "SIGSEGV"],
        regex: r"(?:Segmentation fault|SIGSEGV)",
    },
    Spec {
        id: "generic.out_of_memory",
        severity: Error,
        action: Line,
        literals: &[
            "ut of memory",
            "OutOfMemory",
            "MemoryError",
            "Cannot allocate memory",
        ],
        regex: r"(?:[Oo]ut of memory|OutOfMemory|\bMemoryError|Cannot allocate memory)",
    },
    Spec {
        id: "generic.fatal",
        severity: Error,
        action: Line,
        literals: &["FATAL", "fatal: ", "fatal error: "],
        regex: r"(?:\bFATAL\b[\]:\s-]*(?P<msg>.*)$|^(?:fatal|fatal error): (?P<m2>.+)$)",
    },
    Spec {
        // A log line a traceback may follow: `ERROR:    Exception in ASGI application`.
        id: "generic.error_log",
        severity: Error,
        action: Group(Kind::LogHeader),
        literals: &["ERROR", "CRITICAL", "SEVERE"],
        regex: r"(?:^|[^\w-])(?:ERROR|CRITICAL|SEVERE)(?:[^\w-]|$)[\]:|\s-]*(?P<msg>.*)$",
    },
    Spec {
        id: "generic.error_log",
        severity: Error,
        action: Line,
        literals: &["level=error", "level=fatal"],
        regex: r#"\blevel=(?:error|fatal)\b(?:.*?\bmsg="?(?P<msg>[^"]*))?"#,
    },
    Spec {
        id: "generic.error_log",
        severity: Error,
        action: Line,
        literals: &[
            "\"level\":\"error\"",
            "\"level\":\"fatal\"",
            "\"level\": \"error\"",
        ],
        regex: r#""level":\s?"(?:error|fatal)"(?:.*?"(?:msg|message)":\s?"(?P<msg>(?:[^"\\]|\\.)*)")?"#,
    },
];

/// Short literals the prefilter looks for instead of the rules' and signals' literals
/// that contain them (`error` for `error: `, `error[E`, `error TS`, …): Teddy's speed
/// goes with the number of patterns (BENCHMARKS.md), and these are rare in ordinary
/// output. The rules' own literals still pick the candidates.
const PREFILTER_COVERS: &[&str] = &[
    "error",
    "warning",
    "npm ",
    "Failed to ",
    "panic",
    "xception",
];

/// Rule ids that only the grouping code produces (a group that turned out to be
/// something else); `disable` accepts them like any other id.
const DERIVED_IDS: &[&str] = &["generic.error_line"];

/// Bounds that keep memory and work per line fixed, whatever a process prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Lines kept in one alert; a longer group keeps the first ones and counts the rest.
    pub max_group_lines: usize,
    /// A group ends after this many lines even if it could go on (a stack that never
    /// ends must still be reported).
    pub max_group_span: usize,
    /// Bytes of a line kept in an alert.
    pub max_line_bytes: usize,
    /// Bytes of a line the rules look at: errors are recognised by how lines start,
    /// and a regex over a 1 MiB minified bundle line would cost milliseconds.
    pub max_scan_bytes: usize,
    /// Bytes of an alert's message.
    pub max_message_bytes: usize,
    /// A group with no new line for this long is complete ([`Scanner::tick`]).
    ///
    /// [`Scanner::tick`]: crate::Scanner::tick
    pub group_idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_group_lines: 200,
            max_group_span: 1000,
            max_line_bytes: 1000,
            max_scan_bytes: 4096,
            max_message_bytes: 500,
            group_idle: Duration::from_millis(1000),
        }
    }
}

/// A compiled rule.
pub(crate) struct Rule {
    pub id: String,
    pub category: String,
    pub severity: Severity,
    pub action: Action,
    pub regex: Regex,
}

/// The prefilter's searcher. Teddy, aho-corasick's SIMD searcher, is 2-4× faster on
/// ordinary lines than its automata (BENCHMARKS.md); the automaton of `AhoCorasick`
/// only uses it up to 64 patterns, so it is built directly, without that limit (the
/// packed searcher takes fewer than 128). Where the CPU has no SSSE3/AVX2 (or NEON), the
/// leftmost-first automaton.
pub(crate) enum Prefilter {
    Teddy(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

impl Prefilter {
    fn new(literals: &[&str]) -> Result<Self, String> {
        let teddy = aho_corasick::packed::Config::new()
            .heuristic_pattern_limits(false)
            .builder()
            .extend(literals)
            .build();
        if let Some(teddy) = teddy {
            return Ok(Prefilter::Teddy(teddy));
        }
        let automaton = AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(literals)
            .map_err(|e| e.to_string())?;
        Ok(Prefilter::Automaton(automaton))
    }

    /// Where the first literal in `text` starts.
    fn find(&self, text: &[u8]) -> Option<usize> {
        match self {
            Prefilter::Teddy(teddy) => teddy.find(text).map(|m| m.start()),
            Prefilter::Automaton(automaton) => automaton.find(text).map(|m| m.start()),
        }
    }

    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.find(text.as_bytes()).is_some()
    }
}

/// A compiled reload signal.
pub(crate) struct ReloadRule {
    pub tool: &'static str,
    pub signal: Signal,
    pub regex: Regex,
}

/// What the prefilter found in a line: the rules and reload signals whose literals occur.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Candidates {
    rules: u128,
    reloads: u64,
}

/// The compiled rule set, shared (in an `Arc`) by every [`Scanner`](crate::Scanner).
pub struct AlertRules {
    /// User rules first (in the order written), then the enabled built-in rules.
    pub(crate) rules: Vec<Rule>,
    /// How many of `rules` are user rules; they have no literals and are found through
    /// `user_set`.
    pub(crate) user_rules: usize,
    pub(crate) user_set: Option<RegexSet>,
    /// Over the literals of the built-in rules and reload signals: answers "any
    /// literal?" for every line.
    pub(crate) prefilter: Prefilter,
    /// The same literals with standard semantics, for the overlapping search that
    /// collects every candidate rule of a line that has one.
    pub(crate) candidates: AhoCorasick,
    /// For each prefilter pattern, the bit of every rule it stands for: bit `i` is
    /// `rules[user_rules + i]`.
    pub(crate) literal_rules: Vec<u128>,
    /// For each prefilter pattern, the bit of every reload signal it stands for: bit `i`
    /// is `reloads[i]`.
    pub(crate) literal_reloads: Vec<u64>,
    /// The reload signals ([`RELOADS`]), tried before the rules.
    pub(crate) reloads: Vec<ReloadRule>,
    /// What the prefilter looks for: the covers and the literals that contain no other.
    prefilter_literals: Vec<&'static str>,
    pub(crate) frames: Frames,
    pub(crate) limits: Limits,
    /// `disable` as configured, for the ids only grouping produces.
    disabled: Vec<String>,
}

impl std::fmt::Debug for AlertRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.rules.iter().map(|r| r.id.as_str()).collect();
        f.debug_struct("AlertRules").field("rules", &ids).finish()
    }
}

impl AlertRules {
    /// Every built-in rule, no user patterns.
    pub fn defaults() -> Self {
        Self::with_config(&AlertSettings::default()).expect("the built-in rules compile")
    }

    /// The built-in rules minus `settings.disable`, after the user's patterns.
    ///
    /// Fails on a pattern that does not compile or a `disable` entry that names no rule
    /// or category, with a message that names it and says what to do.
    pub fn with_config(settings: &AlertSettings) -> Result<Self, String> {
        Self::build(settings, Limits::default())
    }

    /// [`with_config`](Self::with_config) with other limits (tests, benchmarks).
    pub fn with_limits(settings: &AlertSettings, limits: Limits) -> Result<Self, String> {
        Self::build(settings, limits)
    }

    fn build(settings: &AlertSettings, limits: Limits) -> Result<Self, String> {
        let mut known: Vec<&str> = DEFAULTS.iter().map(|s| s.id).collect();
        known.extend(DERIVED_IDS);
        known.extend(CATEGORIES);
        for name in &settings.disable {
            if !known.contains(&name.as_str()) {
                let hint = match corral_config::closest(name, &known) {
                    Some(near) => format!("did you mean {near:?}?"),
                    None => format!("categories are {}", CATEGORIES.join(", ")),
                };
                return Err(format!(
                    "alerts.disable: {name:?} is neither a built-in rule id nor a category; {hint}"
                ));
            }
        }
        let disabled = |id: &str| {
            settings
                .disable
                .iter()
                .any(|d| d == id || d == category_of(id))
        };

        let mut rules = Vec::new();
        for p in &settings.patterns {
            if DEFAULTS.iter().any(|s| s.id == p.id) {
                return Err(format!(
                    "alerts.patterns: id {:?} is a built-in rule's; choose another id \
                     (to replace the built-in rule, also add it to alerts.disable)",
                    p.id
                ));
            }
            let regex = Regex::new(&p.regex).map_err(|e| {
                format!(
                    "alerts.patterns: pattern {:?} (id {:?}) is not a valid regex: {}; \
                     fix it in corral.toml (Rust regex syntax, \
                     https://docs.rs/regex/latest/regex/#syntax)",
                    p.regex,
                    p.id,
                    e.to_string().lines().last().unwrap_or_default().trim()
                )
            })?;
            rules.push(Rule {
                id: p.id.clone(),
                category: p.category.clone(),
                severity: p.severity.into(),
                action: Action::Line,
                regex,
            });
        }
        let user_rules = rules.len();
        let user_set = if user_rules > 0 {
            let set = RegexSet::new(settings.patterns.iter().map(|p| &p.regex))
                .map_err(|e| format!("alerts.patterns: {e}"))?;
            Some(set)
        } else {
            None
        };

        let mut literals: Vec<&'static str> = Vec::new();
        let mut literal_rules: Vec<u128> = Vec::new();
        let enabled: Vec<&Spec> = DEFAULTS.iter().filter(|s| !disabled(s.id)).collect();
        assert!(enabled.len() <= 128, "one u128 holds the candidate set");
        for (bit, spec) in enabled.iter().enumerate() {
            for lit in spec.literals {
                let at = intern(&mut literals, lit);
                literal_rules.resize(literals.len(), 0);
                literal_rules[at] |= 1 << bit;
            }
            rules.push(Rule {
                id: spec.id.to_owned(),
                category: category_of(spec.id).to_owned(),
                severity: spec.severity,
                action: spec.action,
                regex: Regex::new(spec.regex)
                    .map_err(|e| format!("built-in rule {}: {e}", spec.id))?,
            });
        }
        let mut literal_reloads = vec![0u64; literals.len()];
        let mut reloads = Vec::new();
        assert!(RELOADS.len() <= 64, "one u64 holds the reload candidates");
        for (bit, spec) in RELOADS.iter().enumerate() {
            for lit in spec.literals {
                let at = intern(&mut literals, lit);
                literal_rules.resize(literals.len(), 0);
                literal_reloads.resize(literals.len(), 0);
                literal_reloads[at] |= 1 << bit;
            }
            reloads.push(ReloadRule {
                tool: spec.tool,
                signal: spec.signal,
                regex: Regex::new(spec.regex)
                    .map_err(|e| format!("reload signal of {}: {e}", spec.tool))?,
            });
        }
        // A line with a literal that contains another has that one too: the prefilter
        // only needs the others, and the covers (fewer patterns: a faster Teddy).
        let mut minimal: Vec<&str> = PREFILTER_COVERS.to_vec();
        for lit in &literals {
            if !minimal
                .iter()
                .chain(&literals)
                .any(|m| m != lit && lit.contains(m))
            {
                minimal.push(lit);
            }
        }
        let prefilter = Prefilter::new(&minimal)?;
        // A DFA: aho-corasick builds one by itself only for at most 100 patterns, and
        // the rules and signals have more (its NFA's overlapping search is 3× slower,
        // and lines with a reload signal, an `hmr update` per save, are many).
        let candidates = AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&literals)
            .map_err(|e| e.to_string())?;
        Ok(AlertRules {
            rules,
            user_rules,
            user_set,
            prefilter,
            candidates,
            literal_rules,
            literal_reloads,
            reloads,
            prefilter_literals: minimal,
            frames: Frames::new(),
            limits,
            disabled: settings.disable.clone(),
        })
    }

    /// The ids of the enabled rules, user rules first, each once.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::new();
        for rule in &self.rules {
            if !ids.contains(&rule.id.as_str()) {
                ids.push(&rule.id);
            }
        }
        ids
    }

    /// Whether alerts with this rule id can be produced.
    pub fn enabled(&self, id: &str) -> bool {
        if DERIVED_IDS.contains(&id) {
            return !self
                .disabled
                .iter()
                .any(|d| d == id || d == category_of(id));
        }
        self.rules.iter().any(|r| r.id == id)
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Where in `text` (many lines, raw output) the first line that could start an alert
    /// or be a reload signal is: the offset of the first literal the prefilter looks for
    /// (a built-in rule's or signal's, or a cover standing for some), or 0 when the user
    /// has patterns (regexes without literals: every line is a candidate). `None`: no
    /// line of `text` can start an alert or be a signal, so a caller with no group open
    /// may skip them all (lines are matched after ANSI escapes are removed: a literal
    /// split by an escape sequence is not found here, the one thing a chunk-wide search
    /// misses).
    ///
    /// When Node's throw site (`/app/x.js:12`, its source line, a `^`) comes just before
    /// that line, the offset is the throw site's: the error's alert takes its source
    /// line from it. Its lines have no literal of their own, which would be too common
    /// in ordinary output (BENCHMARKS.md).
    pub fn next_candidate(&self, text: &[u8]) -> Option<usize> {
        if self.user_set.is_some() {
            return Some(0);
        }
        let at = self.prefilter.find(text)?;
        let line = memchr::memrchr(b'\n', &text[..at]).map_or(0, |i| i + 1);
        Some(frames::throw_site_before(text, line).unwrap_or(at))
    }

    /// The prefilter's literals, for the benchmark's comparison of prefilters.
    #[doc(hidden)]
    pub fn literals(&self) -> &[&'static str] {
        &self.prefilter_literals
    }

    /// The regexes of the built-in rules, for the benchmark's comparison of prefilters.
    #[doc(hidden)]
    pub fn builtin_regexes(&self) -> Vec<&str> {
        self.rules[self.user_rules..]
            .iter()
            .map(|r| r.regex.as_str())
            .collect()
    }

    /// The rules and reload signals that may match `line` (already cleaned and cut to
    /// `max_scan_bytes`). The common line costs one Aho-Corasick pass and nothing else.
    pub(crate) fn candidates(&self, line: &str) -> Candidates {
        let mut found = Candidates::default();
        if !self.prefilter.is_match(line) {
            return found;
        }
        for m in self.candidates.find_overlapping_iter(line) {
            let pattern = m.pattern().as_usize();
            found.rules |= self.literal_rules[pattern];
            found.reloads |= self.literal_reloads[pattern];
        }
        found
    }

    /// The first reload signal among the candidates that matches `line`.
    pub(crate) fn reload(&self, line: &str, found: Candidates) -> Option<&ReloadRule> {
        let mut bits = found.reloads;
        while bits != 0 {
            let bit = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let reload = &self.reloads[bit];
            if reload.regex.is_match(line) {
                return Some(reload);
            }
        }
        None
    }

    /// The first rule matching `line`, with its captures: the user's patterns, then the
    /// built-in candidates.
    pub(crate) fn find<'l>(
        &self,
        line: &'l str,
        found: Candidates,
    ) -> Option<(usize, regex::Captures<'l>)> {
        if let Some(set) = &self.user_set
            && set.is_match(line)
        {
            for (index, rule) in self.rules[..self.user_rules].iter().enumerate() {
                if let Some(caps) = rule.regex.captures(line) {
                    return Some((index, caps));
                }
            }
        }
        let mut candidates = found.rules;
        while candidates != 0 {
            let bit = candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            let index = self.user_rules + bit;
            if let Some(caps) = self.rules[index].regex.captures(line) {
                return Some((index, caps));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_rule_has_a_documented_category_and_literals() {
        for spec in DEFAULTS {
            assert!(CATEGORIES.contains(&category_of(spec.id)), "{}", spec.id);
            assert!(!spec.literals.is_empty(), "{}", spec.id);
        }
    }

    #[test]
    fn the_crate_docs_list_every_rule_and_reload_tool() {
        let docs = include_str!("lib.rs");
        for id in DEFAULTS
            .iter()
            .map(|s| s.id)
            .chain(DERIVED_IDS.iter().copied())
        {
            assert!(docs.contains(&format!("//! | `{id}` |")), "{id}");
        }
        for tool in RELOADS.iter().map(|r| r.tool) {
            assert!(docs.contains(&format!("//! | `{tool}` |")), "{tool}");
        }
    }

    #[test]
    fn ordinary_lines_are_not_candidates() {
        let rules = AlertRules::defaults();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let listening =
            format!("2024-10-10T13:55:36.123Z INFO  server: listening on 0.0.0.0:{port}");
        for line in [
            r#"127.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET /api/users HTTP/1.1" 200 2326"#,
            listening.as_str(),
            "  VITE v5.0.0  ready in 312 ms",
            "    compiled 1234 modules in 512 ms; watching for file changes…",
        ] {
            assert!(!rules.prefilter.is_match(line), "{line}");
        }
        // A reload line is a candidate, for its signal only.
        let line = "webpack 5.89.0 compiled successfully in 1234 ms";
        let found = rules.candidates(line);
        assert!(rules.find(line, found).is_none(), "{line}");
        assert_eq!(rules.reload(line, found).map(|r| r.tool), Some("webpack"));
    }

    #[test]
    fn the_prefilter_stays_within_the_simd_searchers_reach() {
        // aho-corasick's packed (Teddy) searcher takes fewer than 128 patterns; past
        // that the prefilter would silently be the automaton, 2-4× slower.
        let rules = AlertRules::defaults();
        assert!(rules.literals().len() < 128, "{}", rules.literals().len());
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("ssse3") {
            assert!(matches!(rules.prefilter, Prefilter::Teddy(_)));
        }
    }
}
