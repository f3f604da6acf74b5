//! Reload and rebuild signals: the lines by which dev tools say that a rebuild or a
//! restart began or worked (`hmr update …`, `compiled successfully`, `Application
//! startup complete.`). The scanner recognises them in the same prefilter pass as the
//! alert rules; the caller collects them with [`Scanner::take_reloads`].
//!
//! [`Scanner::take_reloads`]: crate::Scanner::take_reloads

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::model::{Stream, rfc3339};

/// Where in a reload a [`Reload`] signal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReloadPhase {
    /// A change was seen and a rebuild or restart began (`Compiling...`,
    /// `… Reloading...`, `restarting due to changes...`).
    Started,
    /// The rebuild or restart worked: the new code is being served. A failed build is
    /// never this (`compiled with 2 errors`, `Found 3 errors.` are not signals at all;
    /// their errors are alerts).
    Succeeded,
}

/// One reload signal, as [`Scanner::take_reloads`](crate::Scanner::take_reloads) hands
/// it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reload {
    pub phase: ReloadPhase,
    /// The tool that printed it: "vite", "webpack", "nextjs", "tsc", "uvicorn", "django",
    /// "flask", "nodemon", "cargo", "cargo-watch", "air", "dotnet-watch".
    pub tool: String,
    /// The line, cleaned and capped like an alert message.
    pub line: String,
    pub stream: Stream,
    #[serde(with = "rfc3339")]
    pub at: SystemTime,
}

/// What a reload line says, internally: [`ReloadPhase`]s, and the failed build that
/// vetoes the tool's next success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    Phase(ReloadPhase),
    /// A failed build after which the tool runs the old binary anyway (air without
    /// `stop_on_error`): its next [`ReloadPhase::Succeeded`] is not one. Not reported.
    Failed,
}

/// One reload signal, as written in [`RELOADS`].
pub(crate) struct ReloadSpec {
    pub tool: &'static str,
    pub signal: Signal,
    /// Like a rule's: every line the regex matches contains one of them.
    pub literals: &'static [&'static str],
    /// Matched against the cleaned line; unanchored where tools put a time in front.
    pub regex: &'static str,
}

const STARTED: Signal = Signal::Phase(ReloadPhase::Started);
const SUCCEEDED: Signal = Signal::Phase(ReloadPhase::Succeeded);

/// The reload signals, checked before the alert rules (a reload line is never an
/// alert). Sources: each tool's own messages (its source or documentation, quoted in
/// the crate docs' table); none of them matches a failure (`compiled with 2 errors`,
/// `Found 3 errors.`).
pub(crate) const RELOADS: &[ReloadSpec] = &[
    // Vite: `10:32:11 AM [vite] (client) hmr update /src/App.tsx` (the `(client)` tag
    // since Vite 6). An update means shipped, not compiled: Vite transforms lazily.
    ReloadSpec {
        tool: "vite",
        signal: SUCCEEDED,
        literals: &["[vite]"],
        regex: r"\[vite\] (?:\(\w+\) )?(?:hmr update |page reload |server restarted\.)",
    },
    ReloadSpec {
        tool: "vite",
        signal: STARTED,
        literals: &["[vite]"],
        regex: r"\[vite\] (?:\(\w+\) )?\S+ changed, restarting server\.\.\.",
    },
    // Next.js 13.4+: ` ○ Compiling /page ...`, ` ✓ Compiled /page in 1.2s (512 modules)`.
    ReloadSpec {
        tool: "nextjs",
        signal: STARTED,
        literals: &["○ Compiling"],
        regex: r"^\s*○ Compiling \S+(?: \(\S+\))? \.\.\.$",
    },
    ReloadSpec {
        tool: "nextjs",
        signal: SUCCEEDED,
        literals: &["✓ Compiled"],
        regex: r"^\s*✓ Compiled(?: \S+)? in \d+(?:\.\d+)?m?s\b",
    },
    // webpack 5 (CLI, dev server): `webpack 5.89.0 compiled successfully in 312 ms`,
    // `client (webpack 5.89.0) compiled with 1 warning in 40 ms`.
    ReloadSpec {
        tool: "webpack",
        signal: SUCCEEDED,
        literals: &["webpack "],
        regex: r"webpack \d+\.\d+\.\d+\)? compiled (?:successfully|with \d+ warnings?) in \d",
    },
    // Create React App (react-dev-utils) and webpack-dev-middleware 3 (`｢wdm｣: …`).
    ReloadSpec {
        tool: "webpack",
        signal: STARTED,
        literals: &["Compiling..."],
        regex: r"^(?:.*｢wdm｣: )?Compiling\.\.\.$",
    },
    ReloadSpec {
        tool: "webpack",
        signal: SUCCEEDED,
        literals: &["Compiled "],
        regex: r"^(?:.*｢wdm｣: )?(?:Compiled successfully[!.]|Compiled with warnings\.)$",
    },
    // tsc --watch: `8:24:03 AM - Found 0 errors. Watching for file changes.` (or
    // `[8:24:03 AM] …` when pretty).
    ReloadSpec {
        tool: "tsc",
        signal: STARTED,
        literals: &["compilation"],
        regex: r"(?:File change detected\. Starting incremental compilation|Starting compilation in watch mode)\.\.\.",
    },
    ReloadSpec {
        tool: "tsc",
        signal: SUCCEEDED,
        literals: &["Found 0 errors"],
        regex: r"Found 0 errors\. Watching for file changes\.",
    },
    // uvicorn --reload.
    ReloadSpec {
        tool: "uvicorn",
        signal: STARTED,
        literals: &["eloading"],
        regex: r"^WARNING:\s+(?:StatReload|WatchFiles|WatchGod) detected (?:changes|file change) in .*Reloading\.\.\.$",
    },
    ReloadSpec {
        tool: "uvicorn",
        signal: SUCCEEDED,
        literals: &["Application startup complete"],
        regex: r"^INFO:\s+Application startup complete\.$",
    },
    // Django's runserver: `/app/shop/urls.py changed, reloading.`; a check that finds
    // issues (even warnings) prints `identified N issues`, which is no signal.
    ReloadSpec {
        tool: "django",
        signal: STARTED,
        literals: &["eloading"],
        regex: r"^\S.* changed, reloading\.$",
    },
    ReloadSpec {
        tool: "django",
        signal: SUCCEEDED,
        literals: &["System check identified no issues"],
        regex: r"^System check identified no issues \(\d+ silenced\)\.$",
    },
    // Flask (werkzeug's reloader); `Debugger is active!` only in debug mode.
    ReloadSpec {
        tool: "flask",
        signal: STARTED,
        literals: &["eloading", "* Restarting with "],
        regex: r"^ \* (?:Detected change in '.+', reloading|Restarting with \S.*)$",
    },
    ReloadSpec {
        tool: "flask",
        signal: SUCCEEDED,
        literals: &["Debugger is active!"],
        regex: r"^ \* Debugger is active!$",
    },
    // nodemon: `starting` is the new child spawned (nodemon has no later line saying it
    // works; a crash follows as `node.nodemon_crashed`).
    ReloadSpec {
        tool: "nodemon",
        signal: STARTED,
        literals: &["[nodemon] "],
        regex: r"^\[nodemon\] restarting due to changes\.\.\.$",
    },
    ReloadSpec {
        tool: "nodemon",
        signal: SUCCEEDED,
        literals: &["[nodemon] "],
        regex: r"^\[nodemon\] starting `.+`$",
    },
    // cargo: `Finished `dev` profile [unoptimized + debuginfo] target(s) in 0.52s`
    // (before 1.77: `Finished dev [unoptimized + debuginfo] target(s) in 0.52s`).
    ReloadSpec {
        tool: "cargo",
        signal: SUCCEEDED,
        literals: &["target(s) in "],
        regex: r"^\s*Finished (?:`[\w-]+` profile|[\w-]+) \[[^\]]*\] target\(s\) in ",
    },
    // cargo-watch 8.
    ReloadSpec {
        tool: "cargo-watch",
        signal: STARTED,
        literals: &["[Running '"],
        regex: r"^\[Running '.+'\]$",
    },
    ReloadSpec {
        tool: "cargo-watch",
        signal: SUCCEEDED,
        literals: &["running."],
        regex: r"^\[Finished running\. Exit status: 0\]$",
    },
    // air (Go): `building...`, then `running...` (optionally after `[15:04:05] `); the
    // build's own errors are alerts (`go.build_error`).
    ReloadSpec {
        tool: "air",
        signal: STARTED,
        literals: &["building..."],
        regex: r"^(?:\[\d\d:\d\d:\d\d\] )?building\.\.\.$",
    },
    ReloadSpec {
        tool: "air",
        signal: Signal::Failed,
        literals: &["failed to build, error: "],
        regex: r"^(?:\[\d\d:\d\d:\d\d\] )?failed to build, error: ",
    },
    ReloadSpec {
        tool: "air",
        signal: SUCCEEDED,
        literals: &["running."],
        regex: r"^(?:\[\d\d:\d\d:\d\d\] )?running\.\.\.$",
    },
    // dotnet watch (`dotnet watch <emoji> [project] message`, dotnet/sdk's
    // MessageDescriptor): hot reload applied, or a rebuild or restart begun.
    ReloadSpec {
        tool: "dotnet-watch",
        signal: SUCCEEDED,
        literals: &["dotnet watch "],
        regex: r"^dotnet watch \S+ (?:\[[^\]]+\] )?(?:Hot reload succeeded\.|(?:C# and Razor|Static asset) changes applied in \d+ms\.|Build succeeded\b)",
    },
    ReloadSpec {
        tool: "dotnet-watch",
        signal: STARTED,
        literals: &["dotnet watch "],
        regex: r"^dotnet watch \S+ (?:\[[^\]]+\] )?(?:File changed: .+|Restarting(?: application(?: to apply changes)?)? \.\.\.|Restarting\.|Restart in progress\.|Relaunching \.\.\.|Building .+ \.\.\.)$",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_round_trips_through_json_in_snake_case() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        let reload = Reload {
            phase: ReloadPhase::Succeeded,
            tool: "vite".into(),
            line: "[vite] hmr update /src/App.tsx".into(),
            stream: Stream::Stdout,
            at: t,
        };
        let json = serde_json::to_string(&reload).unwrap();
        assert_eq!(
            json,
            r#"{"phase":"succeeded","tool":"vite","line":"[vite] hmr update /src/App.tsx","stream":"stdout","at":"2023-11-14T22:13:20.123Z"}"#
        );
        assert_eq!(serde_json::from_str::<Reload>(&json).unwrap(), reload);
    }
}
