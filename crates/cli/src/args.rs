//! The command-line contract (ARCHITECTURE.md, "Contracts: CLI").

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// `corral --version`: the package's version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("CORRAL_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(
    name = "corral",
    version = VERSION,
    about = "Runs a project's MCP servers and dev processes, shared by every agent, and says what broke"
)]
pub struct Cli {
    /// Config file (else $CORRAL_CONFIG, else corral.toml searched upward, else .mcp.json).
    #[arg(short, long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

const CALL_FORMS: &str = "\
Forms:
  corral call TOOL [JSON]           TOOL as `corral tools` lists it:
                                    corral call time__get_current_time '{\"timezone\": \"UTC\"}'
  corral call SERVER TOOL [JSON]    TOOL by the server's own name, or as listed:
                                    corral call time get_current_time '{\"timezone\": \"UTC\"}'
A second word starting with `{` is the JSON of the first form. A name not found is
answered with the listed name it most likely means.";

const RUN_FORMS: &str = "\
The command comes after `--`:
  corral run web -- npm run dev          a program and its arguments (no shell)
  corral run web -- 'npm run dev | tee x' exactly one argument: a shell line (sh -c)
The process runs in the daemon with the daemon's environment, in the current directory,
is never restarted, and its output goes to .corral/logs/NAME.log (`corral logs NAME`).
A name in use is an error: `corral restart NAME` restarts a process that exists.
--standalone runs it here instead, its output live on stderr, until it exits (corral
exits with its exit code) or Ctrl-C (it is stopped gracefully).";

const PROXY_FORMS: &str = "\
Forms:
  corral proxy web --target http://127.0.0.1:5173   a new proxy in the daemon
  corral proxy web                                  the configured [proxies.web]
  corral proxy web --stop                           stop it
  corral proxy web --log [--errors] [-n N]          its requests and the page's errors
  corral proxy web --target URL --standalone        here, in the foreground, until Ctrl-C
Open the printed URL in the browser instead of the target's: every request is recorded,
and HTML pages get a small script that reports JavaScript errors, unhandled rejections,
console.error calls and failed fetches back to Corral (`--no-inject` turns it off).";

const INSTALL_FORMS: &str = "\
Examples:
  corral install claude                 .mcp.json of this project
  corral install --detect               every client found on this machine
  corral install codex --user           ~/.codex/config.toml ($CODEX_HOME)
  corral install vscode --dry-run       print the diff only
  corral install cursor --import        move .cursor/mcp.json's servers into corral.toml
  corral install claude --profile dev   the entry runs `corral mcp --profile dev`
  corral uninstall claude               remove the entry again";

const COMPLETIONS_FORMS: &str = "\
Where each shell finds them:
  bash   corral completions bash > ~/.local/share/bash-completion/completions/corral
  zsh    corral completions zsh > ~/.zfunc/_corral   (with fpath+=~/.zfunc before compinit)
  fish   corral completions fish > ~/.config/fish/completions/corral.fish
They complete commands, options and fixed values (clients, shells, statuses); names
from the project (servers, processes, profiles) are not completed.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented starter corral.toml (importing .mcp.json if present); with -c,
    /// at that path. Refuses below a directory whose config would be shadowed.
    Init {
        /// Overwrite an existing corral.toml, or create one below another project's.
        #[arg(long)]
        force: bool,
    },
    /// Load and validate the config; report every problem at once (exit 2 if any).
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the project daemon: servers, HTTP endpoint, control socket (foreground: live
    /// console; -d: detached, logs to .corral/).
    Up {
        /// Detach: start the daemon in the background and return.
        #[arg(short, long)]
        detach: bool,
        /// Let this project's corral.toml widen access: `[gateway] auth = "none"` and
        /// listen addresses beyond loopback apply (without this, or
        /// CORRAL_ALLOW_WIDENED_ACCESS=1, or the project in your user config's
        /// `[trust] widen_access`, they are not applied and a warning says so).
        #[arg(long)]
        allow_widened_access: bool,
    },
    /// Stop the daemon: every server stopped gracefully.
    Down,
    /// Apply a changed config to the running daemon (also on SIGHUP): only servers whose
    /// definition changed restart, removed ones stop, new ones start.
    Reload {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stdio MCP endpoint for agents: a bridge to the project daemon (started if needed).
    Mcp {
        /// Run the servers in this process instead (no daemon).
        #[arg(long)]
        standalone: bool,
        /// Offer only what `[profiles.NAME]` of the config names (servers, tools); the
        /// default is everything.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
    /// Servers (state, pid, uptime, restarts, tools, last error) and dev processes (state,
    /// what they wait for, pid, uptime, restarts, ready, last exit, last alert).
    Ps {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The aggregated tool list, by the names agents see (and `corral call` takes).
    Tools {
        /// Only this server's tools (a name from the config).
        server: Option<String>,
        /// Only what an agent of `[profiles.NAME]` sees.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// What the tool definitions cost an agent's context, in estimated tokens: per
        /// tool, per server, and for each profile.
        #[arg(long)]
        tokens: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Run the servers in-process even when a daemon runs.
        #[arg(long)]
        standalone: bool,
    },
    /// Call one tool and print its result; exit 1 on a tool error.
    #[command(after_help = CALL_FORMS)]
    Call {
        /// The tool as `corral tools` lists it (e.g. `time__get_current_time`), or the
        /// name of a server followed by its TOOL.
        #[arg(value_name = "TOOL|SERVER")]
        target: String,
        /// After TOOL: the JSON arguments. After SERVER: the tool, by the server's own
        /// name (`get_current_time`) or as `corral tools` lists it.
        #[arg(value_name = "JSON|TOOL")]
        second: Option<String>,
        /// Arguments as a JSON object (default `{}`), after SERVER TOOL.
        #[arg(value_name = "JSON")]
        arguments: Option<String>,
        /// Print the result as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Run the servers in-process even when a daemon runs.
        #[arg(long)]
        standalone: bool,
    },
    /// The log of a server (its stderr) or of a dev process (its output, a header line
    /// per run); read from the file when no daemon runs.
    Logs {
        /// The server or process whose log to show (`.corral/logs/NAME.log`).
        name: String,
        /// Keep printing new lines.
        #[arg(short, long)]
        follow: bool,
        /// Lines of history.
        #[arg(short = 'n', long = "lines", default_value_t = 50)]
        lines: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open the project's dashboard in the browser (the daemon must run): a live view of
    /// servers, processes, proxies, errors, logs, traffic, tools and events. The link
    /// signs the browser in once; without a browser (or over SSH) it is printed.
    Dashboard {
        /// Do not open a browser: print the one-time link.
        #[arg(long)]
        no_browser: bool,
    },
    /// Authorize Corral with a remote server's OAuth (prints the address to open, opens a
    /// browser when there is one, takes the answer on a loopback address or pasted); a
    /// running daemon then reconnects the server. `--logout` revokes and forgets.
    Auth {
        /// The remote server.
        name: String,
        /// Revoke the server's tokens and forget them.
        #[arg(long)]
        logout: bool,
        /// Do not open a browser (only print the address).
        #[arg(long)]
        no_browser: bool,
        /// How long to wait for the authorization, in seconds.
        #[arg(long, default_value_t = 600)]
        wait: u64,
    },
    /// Restart a server or dev process (graceful stop, then start).
    Restart {
        /// The server or process to restart.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop a server or dev process.
    Stop {
        /// The server or process to stop.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a stopped, failed or given-up server or dev process.
    Start {
        /// The server or process to start.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run an ad-hoc dev process under supervision, in the daemon (or --standalone here).
    #[command(after_help = RUN_FORMS)]
    Run {
        /// The process's name (letters, digits, '_' and '-'; not a server's).
        name: String,
        /// After `--`: one argument is a shell line (`sh -c`); more are a program and its
        /// arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
        /// Then print its output as it comes, until Ctrl-C (which detaches: the process
        /// keeps running).
        #[arg(short, long)]
        follow: bool,
        /// Run it in this process instead of the daemon, in the foreground.
        #[arg(long)]
        standalone: bool,
        /// Print the daemon's answer as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A dev proxy in front of a dev server: records its traffic and the browser's errors
    /// (in the daemon, or --standalone here).
    #[command(after_help = PROXY_FORMS)]
    Proxy {
        /// The proxy's name (letters, digits, '_' and '-').
        name: String,
        /// The dev server to proxy (`http://HOST:PORT`); without it, the configured
        /// `[proxies.NAME]`.
        #[arg(long, value_name = "URL")]
        target: Option<String>,
        /// Where to listen (`IP:PORT`; default a free loopback port).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Leave HTML pages untouched (no error-reporting script).
        #[arg(long)]
        no_inject: bool,
        /// Stop the running proxy instead.
        #[arg(long, conflicts_with_all = ["target", "listen", "no_inject", "standalone", "log"])]
        stop: bool,
        /// Show its traffic log and the errors its pages reported instead.
        #[arg(long, conflicts_with_all = ["target", "listen", "no_inject", "standalone"])]
        log: bool,
        /// With --log: only failed requests (status ≥ 400 or no answer).
        #[arg(long, requires = "log")]
        errors: bool,
        /// With --log: the newest N requests and browser errors.
        #[arg(short = 'n', long = "lines", default_value_t = 30, requires = "log")]
        lines: usize,
        /// Run it here, in the foreground, until Ctrl-C (no daemon; no config needed
        /// with --target).
        #[arg(long)]
        standalone: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The event stream (from the daemon's journal).
    Events {
        /// Keep running and print events as they happen.
        #[arg(short, long)]
        follow: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Events of history to show first.
        #[arg(short = 'n', long = "lines", default_value_t = 50)]
        lines: usize,
        /// Run the servers in-process (no daemon) and show their events.
        #[arg(long)]
        standalone: bool,
    },
    /// What is broken right now, as incidents (a failure's root cause with its symptoms
    /// under it): servers, dev processes, proxied HTTP requests and the browser.
    Errors {
        /// Only one source: server:NAME, process:NAME, proxy:NAME, browser (or a kind).
        #[arg(long, value_name = "SOURCE")]
        source: Option<String>,
        /// Only what was seen since: RFC 3339, or a duration ago (30s, 5m, 1h).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Which incidents: open (active and regressed), resolved, or all.
        #[arg(long, value_name = "STATUS", default_value = "open", value_parser = ["open", "resolved", "all"])]
        status: String,
        /// Incidents at most.
        #[arg(long, default_value_t = 25)]
        limit: usize,
        /// Errors only, no warnings.
        #[arg(long)]
        no_warnings: bool,
        /// Each incident's reduced stack too (its frames in the project's code).
        #[arg(short, long)]
        verbose: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// With --json: every field of every record.
        #[arg(long, requires = "json")]
        raw: bool,
        /// Start the servers in-process even when a daemon runs (dev processes and
        /// proxies run only in the daemon).
        #[arg(long)]
        standalone: bool,
    },
    /// Add the `corral mcp` entry to agent clients' MCP config (project scope: the
    /// directory of corral.toml; --user: the client's user file). Comments and other
    /// entries are kept; a changed file is backed up to FILE.corral-backup first.
    #[command(after_help = INSTALL_FORMS)]
    Install {
        /// claude, vscode, cursor, codex, gemini, windsurf (user file only), zed.
        #[arg(
            value_name = "CLIENT",
            required_unless_present = "detect",
            value_parser = clap::builder::PossibleValuesParser::new(crate::commands::client_names())
        )]
        clients: Vec<String>,
        /// Write the client's user-scope file instead of the project's.
        #[arg(long)]
        user: bool,
        /// Print the diff of each file that would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Every client found on this machine (its program on PATH, or its user config
        /// directory).
        #[arg(long)]
        detect: bool,
        /// Move the servers configured in the client's file into corral.toml first.
        #[arg(long)]
        import: bool,
        /// The entry runs `corral mcp --profile NAME`.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// Replace a server named `corral` that is not Corral.
        #[arg(long)]
        force: bool,
    },
    /// Remove the `corral` entry from agent clients' MCP config (the file is restored
    /// byte for byte from its backup when nothing else changed since install).
    Uninstall {
        /// claude, vscode, cursor, codex, gemini, windsurf, zed.
        #[arg(
            value_name = "CLIENT",
            required = true,
            value_parser = clap::builder::PossibleValuesParser::new(crate::commands::client_names())
        )]
        clients: Vec<String>,
        /// The client's user-scope file instead of the project's.
        #[arg(long)]
        user: bool,
        /// Print the diff of each file that would change; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print a completion script for SHELL to stdout; e.g. for bash
    /// `corral completions bash > ~/.local/share/bash-completion/completions/corral`.
    #[command(after_help = COMPLETIONS_FORMS)]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Internal: the detached daemon (`corral up -d` starts it).
    #[command(name = "__daemon", hide = true)]
    Daemon {
        #[arg(long)]
        allow_widened_access: bool,
    },
    /// Internal: the watchdog that kills the servers' process groups if corral dies.
    #[command(name = "__guard", hide = true)]
    Guard,
    /// Internal: carries a remote (url) server's traffic for the supervisor (its
    /// settings come in `CORRAL_REMOTE_*` environment variables).
    #[command(name = "__remote", hide = true)]
    Remote,
}
