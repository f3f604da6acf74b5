//! The multi-line blocks of build tools and package managers (npm, yarn 2+, javac and
//! Maven, Gradle, Ant, the go command, MSBuild's summary) and the error log line a
//! traceback may follow: how they start, which lines belong to them, and which line is
//! the message. The other kinds are in group.rs.

use regex::Captures;

use crate::group::{Group, Kind, Step, parse_path_line_col};
use crate::model::Location;

impl Kind {
    /// The kinds whose lines this module reads.
    pub(crate) fn is_tool(self) -> bool {
        matches!(
            self,
            Kind::Npm
                | Kind::YarnBerry
                | Kind::JavaDiag
                | Kind::MavenGoal
                | Kind::Gradle
                | Kind::Ant
                | Kind::GoCmd
                | Kind::MsbuildSummary
                | Kind::LogHeader
        )
    }
}

/// What a block has seen so far, beyond the message and location every group has.
#[derive(Debug, Default)]
pub(crate) struct ToolState {
    /// The next line is the message (Ant after `BUILD FAILED`, Gradle after
    /// `* What went wrong:`, the go command after `go: errors parsing go.mod:`).
    expect: bool,
    /// javac: the `symbol:` detail was added; Gradle: the first `> ` cause was added.
    detailed: bool,
    /// npm: the first line that is neither a `key value` detail nor a hint.
    free: Option<String>,
    /// npm: the `code` line's value (an exit code or an `E…` code).
    code: Option<String>,
    /// npm: the command of `command failed`.
    command: Option<String>,
}

/// What the go command prints about its work, not about a failure.
const GO_INFO: &[&str] = &[
    "downloading ",
    "finding ",
    "found ",
    "added ",
    "upgraded ",
    "downgraded ",
    "removed ",
    "extracting ",
    "creating new go.mod",
    "to add module requirements",
    "warning: ",
];

/// yarn 2+ message codes that report progress or warnings, not the error of a failed
/// run (YN0000 is the generic one).
const YARN_NOT_ERRORS: &[&str] = &[
    "YN0000", "YN0002", "YN0007", "YN0008", "YN0013", "YN0019", "YN0060", "YN0061", "YN0085",
    "YN0086",
];

/// The summaries of build tools that point at diagnostics printed before them: the
/// diagnostics are the alerts.
const BUILD_SUMMARIES: &[&str] = &[
    "Compilation failed; see the compiler error output for details",
    "Compile failed; see the compiler error output for details",
    "Compilation error. See log for more details",
];

fn is_summary(message: &str) -> bool {
    BUILD_SUMMARIES.iter().any(|s| message.contains(s))
}

/// Sets up a group of one of these kinds from its starting line; false when the line
/// starts nothing (the go command's progress lines).
pub(crate) fn start(g: &mut Group, caps: &Captures<'_>) -> bool {
    let msg = caps.name("msg").map_or("", |m| m.as_str().trim());
    match g.kind {
        Kind::Npm => {
            // The log's path, alone: the end of a block cut short.
            if msg.starts_with("A complete log of this run") {
                return false;
            }
            g.message = None;
            npm_line(g, msg);
        }
        Kind::YarnBerry => {
            g.confirmed = false;
            g.message = None;
            let code = caps.name("code").map_or("", |m| m.as_str());
            if yarn_line(g, code, msg) {
                // `Failed with errors` or `Done` alone: nothing to report.
                return g.confirmed;
            }
        }
        Kind::Ant => g.tool.expect = true,
        Kind::GoCmd => {
            if GO_INFO.iter().any(|p| msg.starts_with(p)) {
                return false;
            }
            // `go: errors parsing go.mod:`: the error and its place are on the next line.
            g.tool.expect = msg.ends_with(':');
        }
        Kind::MsbuildSummary => g.confirmed = false,
        _ => {}
    }
    true
}

/// What `line` is to a group of one of these kinds.
pub(crate) fn offer(g: &mut Group, line: &str, blank: bool) -> Step {
    let indented = line.starts_with([' ', '\t']);
    match g.kind {
        Kind::Npm => {
            let Some(rest) = line
                .strip_prefix("npm ERR!")
                .or_else(|| line.strip_prefix("npm error"))
            else {
                // npm 9 prints a blank line before the log's path.
                return if blank { Step::Skip } else { Step::Stray };
            };
            if rest.trim_start().starts_with("A complete log of this run") {
                return Step::TakeEnd;
            }
            // `npm error   npm run` (a hint's command) is indented after the prefix.
            if !rest.starts_with("   ") {
                npm_line(g, rest.trim());
            }
            Step::Take
        }
        Kind::YarnBerry => {
            if blank {
                return Step::Skip;
            }
            let Some(rest) = line.strip_prefix("➤ ") else {
                return Step::Stray;
            };
            let Some((code, msg)) = rest.split_once(": ") else {
                return Step::Stray;
            };
            if yarn_line(g, code, msg) {
                Step::TakeEnd
            } else {
                Step::Take
            }
        }
        Kind::JavaDiag => {
            if blank {
                return Step::End;
            }
            // Maven repeats the detail lines with its prefix in the goal's block; Ant
            // prefixes all of javac's.
            let detail = line
                .strip_prefix("[ERROR] ")
                .or_else(|| line.trim_start().strip_prefix("[javac] "))
                .unwrap_or(line);
            if !detail.starts_with([' ', '\t']) {
                return Step::Stray;
            }
            // `  symbol:   method parsePort(String[])`: what could not be found.
            if let Some(symbol) = detail.trim_start().strip_prefix("symbol:")
                && !g.tool.detailed
                && let Some(message) = &g.message
            {
                g.message = Some(format!("{message}: {}", symbol.trim()));
                g.tool.detailed = true;
            }
            Step::Take
        }
        Kind::MavenGoal => {
            let Some(rest) = line.strip_prefix("[ERROR]") else {
                return if blank { Step::Skip } else { Step::Stray };
            };
            // The compiler's errors again: the goal's failure only sums them up.
            if g.message
                .as_deref()
                .is_some_and(|m| m.ends_with("Compilation failure"))
                && maven_diagnostic(rest.trim())
            {
                g.confirmed = false;
            }
            if rest.trim_start().starts_with("[Help ") {
                Step::TakeEnd
            } else {
                Step::Take
            }
        }
        Kind::Gradle => {
            if blank {
                return Step::Skip;
            }
            let trimmed = line.trim();
            if g.tool.expect {
                g.tool.expect = false;
                g.message = Some(trimmed.to_owned());
                return Step::Take;
            }
            if trimmed == "* What went wrong:" {
                g.tool.expect = true;
                return Step::Take;
            }
            if let Some(cause) = trimmed.strip_prefix("> ")
                && !g.tool.detailed
                && let Some(message) = &g.message
            {
                // `Execution failed for task ':compileJava'.` + `> Compilation failed; …`
                g.tool.detailed = true;
                if is_summary(cause) {
                    g.confirmed = false;
                }
                g.message = Some(format!("{}: {cause}", message.trim_end_matches('.')));
                return Step::Take;
            }
            if trimmed.starts_with("BUILD FAILED") {
                Step::TakeEnd
            } else if trimmed.starts_with("* ")
                || trimmed.starts_with("> ")
                || trimmed.starts_with("Run with ")
                || indented
            {
                Step::Take
            } else {
                Step::Stray
            }
        }
        Kind::Ant => {
            if g.tool.expect {
                if blank {
                    return Step::Skip;
                }
                g.tool.expect = false;
                // `/app/build.xml:12: Compile failed; see the compiler error output …`
                let trimmed = line.trim();
                let (loc, message) = split_location(trimmed);
                if let Some(loc) = loc {
                    g.header_loc = Some(loc);
                }
                if is_summary(message) {
                    g.confirmed = false;
                }
                g.message = Some(message.to_owned());
                return Step::Take;
            }
            if blank {
                Step::End
            } else if line.starts_with("Total time:") {
                Step::TakeEnd
            } else if indented {
                Step::Take
            } else {
                Step::Stray
            }
        }
        Kind::GoCmd => {
            if g.tool.expect && !blank {
                g.tool.expect = false;
                let (loc, message) = split_location(line.trim());
                if loc.is_some() {
                    g.header_loc = loc;
                }
                g.message = Some(message.to_owned());
                Step::Take
            } else if line.starts_with('\t') {
                // `\tgo mod init`, the hint's command.
                Step::Take
            } else {
                Step::End
            }
        }
        Kind::MsbuildSummary => {
            let trimmed = line.trim();
            if blank {
                Step::Skip
            } else if trimmed.starts_with("Time Elapsed") {
                Step::TakeEnd
            } else if trimmed.contains(": error ")
                || trimmed.contains(": warning ")
                || trimmed.ends_with("Warning(s)")
                || trimmed.ends_with("Error(s)")
            {
                Step::Take
            } else {
                Step::Stray
            }
        }
        // A header takes nothing; the traceback after it is a group of its own that
        // the scanner merges it into.
        _ => Step::Stray,
    }
}

/// One `npm ERR!`/`npm error` line (without the prefix): a `key value` detail, a hint,
/// or the message. The message is the first other line (`Missing script: "dev"`), else
/// what the details say (`command failed (exit code 3): sh -c node setup.js`).
fn npm_line(g: &mut Group, rest: &str) {
    let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
    match key {
        "" => {}
        "code" => g.tool.code = Some(value.trim().to_owned()),
        "command" if value != "failed" => g.tool.command = Some(value.trim().to_owned()),
        "command" | "errno" | "path" | "syscall" | "signal" | "dest" | "file" => {}
        _ if rest.starts_with("To see a list of") || rest.starts_with("A complete log") => {}
        _ => {
            if g.tool.free.is_none() {
                g.tool.free = Some(rest.to_owned());
            }
        }
    }
    g.message = match (&g.tool.free, &g.tool.command, &g.tool.code) {
        (Some(free), _, _) => Some(free.clone()),
        (None, Some(command), Some(code)) if code.parse::<i32>().is_ok() => {
            Some(format!("command failed (exit code {code}): {command}"))
        }
        (None, Some(command), code) => Some(match code {
            Some(code) => format!("command failed ({code}): {command}"),
            None => format!("command failed: {command}"),
        }),
        (None, None, Some(code)) => Some(format!("code {code}")),
        (None, None, None) => None,
    };
}

/// One `➤ YN0001: │ Error: …` line of yarn 2+; true when it ends the run (`Failed with
/// errors in 0s 51ms` confirms the group, `Done in …` does not).
fn yarn_line(g: &mut Group, code: &str, msg: &str) -> bool {
    // The tree drawing of the steps: `┌ Resolution step`, `│ …`, `└ Completed`, `· …`.
    let text = msg.trim_start_matches(['┌', '│', '└', '·']).trim_start();
    if text.starts_with("Failed with errors") {
        g.confirmed = true;
        if g.message.is_none() {
            g.message = Some(text.to_owned());
        }
        return true;
    }
    if code == "YN0000" && text.starts_with("Done") {
        return true;
    }
    if g.message.is_none() && !YARN_NOT_ERRORS.contains(&code) && !text.is_empty() {
        g.message = Some(text.to_owned());
    }
    false
}

/// `/x/App.java:[5,20] cannot find symbol`, as Maven prints a compiler error.
fn maven_diagnostic(text: &str) -> bool {
    text.split_once(":[")
        .is_some_and(|(file, rest)| !file.contains(' ') && rest.contains("] "))
}

/// `path:line: message` into its location and message (`go.mod:6: syntax error …`,
/// `build.xml:12: …`); the whole text when it has no such location.
fn split_location(text: &str) -> (Option<Location>, &str) {
    if let Some((at, message)) = text.split_once(": ")
        && !at.contains(' ')
        && let Some(loc) = parse_path_line_col(at)
    {
        return (Some(loc), message.trim());
    }
    (None, text)
}

/// A line of webpack's error block that comes before the message: `Module build failed
/// (from ./node_modules/babel-loader/lib/index.js):`, ts-loader's `[tsl] ERROR in
/// /app/src/App.tsx(3,7)` or a module's `./src/App.tsx 3:7-13`; with the location it
/// gives, if any. `None`: the line is the message.
pub(crate) fn webpack_preamble(line: &str) -> Option<Option<Location>> {
    let trimmed = line.trim();
    if trimmed.starts_with("Module build failed (from ")
        || trimmed.starts_with("Module Error (from ")
        || trimmed.starts_with("Module Warning (from ")
    {
        return Some(None);
    }
    if let Some(at) = trimmed.strip_prefix("[tsl] ERROR in ") {
        // `/app/src/App.tsx(3,7)`
        let loc = at
            .strip_suffix(')')
            .and_then(|a| a.rsplit_once('('))
            .and_then(|(file, lc)| {
                let (l, c) = lc.split_once(',')?;
                Location::parse(file, l, Some(c))
            });
        return Some(loc);
    }
    // `./src/App.tsx 3:7-13`
    if let Some((module, lc)) = trimmed.split_once(' ')
        && (module.starts_with("./") || module.starts_with('/'))
        && let Some((l, c)) = lc.split_once(':')
        && l.bytes().all(|b| b.is_ascii_digit())
    {
        let col = c.split('-').next().unwrap_or(c);
        return Some(Location::parse(module, l, Some(col)));
    }
    None
}

/// Ruby 3.1+ prints an exception's cause after its frames, in the same shape as the
/// first line: `/x/socket.rb:1214:in '…': Connection refused … (Errno::ECONNREFUSED)`.
pub(crate) fn ruby_cause(line: &str) -> bool {
    let Some((head, _)) = line.split_once(":in ") else {
        return false;
    };
    line.ends_with(')')
        && !head.contains(' ')
        && head
            .rsplit_once(':')
            .is_some_and(|(_, n)| n.parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webpack_preambles_are_not_messages() {
        assert_eq!(
            webpack_preamble(
                "Module build failed (from ./node_modules/babel-loader/lib/index.js):"
            ),
            Some(None)
        );
        assert_eq!(
            webpack_preamble("[tsl] ERROR in /app/src/App.tsx(3,7)")
                .flatten()
                .map(|l| l.to_string()),
            Some("/app/src/App.tsx:3:7".into())
        );
        assert_eq!(
            webpack_preamble("./src/App.tsx 3:7-13")
                .flatten()
                .map(|l| l.to_string()),
            Some("./src/App.tsx:3:7".into())
        );
        assert_eq!(
            webpack_preamble("Module parse failed: Unexpected token (3:17)"),
            None
        );
        assert_eq!(
            webpack_preamble("SyntaxError: /app/src/App.js: Unexpected token (3:17)"),
            None
        );
    }

    #[test]
    fn locations_are_split_from_messages() {
        let (loc, msg) = split_location("/x/go.mod:6: syntax error (unterminated block)");
        assert_eq!(loc.unwrap().to_string(), "/x/go.mod:6");
        assert_eq!(msg, "syntax error (unterminated block)");
        assert_eq!(split_location("no place: here"), (None, "no place: here"));
        assert!(maven_diagnostic("/x/App.java:[5,20] cannot find symbol"));
        assert!(!maven_diagnostic("-> [Help 1]"));
    }
}
