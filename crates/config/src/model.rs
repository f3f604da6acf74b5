//! The validated configuration handed to the rest of Corral.
//!
//! Every value here is final: defaults applied, `${env:…}` expanded, paths absolute.
//! Consumers never see an `Option` that means "use the default".

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The dialect a config file was written in. Decides which keys are read and which
/// `${…}` forms expand; see the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `corral.toml`: strict, every key known.
    Toml,
    /// `.mcp.json` / Claude Desktop: `{"mcpServers": {…}}`.
    McpJson,
    /// VS Code `mcp.json`: `{"servers": {…}, "inputs": […]}`.
    VsCode,
}

/// A loaded, validated project configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The config file, absolute.
    pub path: PathBuf,
    /// The project root: the directory of the config file (for a VS Code
    /// `.vscode/mcp.json`, the workspace folder above `.vscode`). Relative paths in the
    /// config are resolved against it.
    pub root: PathBuf,
    /// `root/.corral`: logs, journal, pid file and token live here.
    pub state_dir: PathBuf,
    pub format: Format,
    pub gateway: GatewayConfig,
    /// Keyed and ordered by name, so listings are stable.
    pub servers: BTreeMap<String, ServerConfig>,
    pub processes: BTreeMap<String, ProcessConfig>,
    pub proxies: BTreeMap<String, ProxyConfig>,
    /// `[profiles.NAME]`: what an agent connected with that profile sees. Agents without
    /// one (`corral mcp`, `/mcp`) see everything.
    pub profiles: BTreeMap<String, Profile>,
    /// `[alerts]`: user patterns, disabled rules, dedup window, ring size.
    pub alerts: crate::AlertSettings,
    /// `[errors] ignore`: what `get_errors` hides as noise besides its built-in rules: a
    /// substring of a message or request path, or a glob (`*`, `?`) over the whole.
    pub error_noise: Vec<String>,
    /// What loading left out, for the user to read (`corral` prints these on stderr):
    /// an `.mcp.json` entry that runs Corral itself is skipped, not run.
    pub notes: Vec<String>,
    /// Where `gateway.listen`, `gateway.auth` and each `proxies.NAME.listen` are written
    /// (line, column of the key), for [`crate::trust`]'s notices. Empty for JSON configs.
    pub access_keys: BTreeMap<String, (usize, usize)>,
}

impl Config {
    /// The server called `name`, if configured.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.get(name)
    }

    /// `text` with every secret of every server and process, and anything shaped like a
    /// credential, replaced by `***`, for anything that leaves the process (logs, events,
    /// error messages).
    pub fn redact(&self, text: &str) -> String {
        let servers = self.servers.values().flat_map(|s| &s.secrets);
        let processes = self.processes.values().flat_map(|p| &p.secrets);
        redact_with(text, servers.chain(processes))
    }
}

/// Where the Streamable HTTP endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Listen {
    /// Not configured: a free loopback port — the one used last time when it is still
    /// free, so HTTP clients keep working across daemon restarts, while two projects
    /// never clash over a fixed default.
    #[default]
    Auto,
    /// `IP:PORT` as configured (validated to parse as a socket address); port 0 picks a
    /// new free port on every start.
    Addr(String),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Auto => f.write_str("a free loopback port"),
            Listen::Addr(a) => f.write_str(a),
        }
    }
}

/// The shared MCP endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    pub listen: Listen,
    pub tool_prefix: ToolPrefix,
    /// Offer the built-in tools (`servers`, `server_logs`, `restart_server`).
    pub builtin_tools: bool,
    /// How HTTP clients authenticate.
    pub auth: HttpAuth,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: Listen::Auto,
            tool_prefix: ToolPrefix::Always,
            builtin_tools: true,
            auth: HttpAuth::Token,
        }
    }
}

/// Authentication of the Streamable HTTP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpAuth {
    /// A bearer token (generated on first start, stored 0600 under `.corral/`).
    #[default]
    Token,
    /// No token: any local process may connect. Host and Origin are still checked.
    None,
}

/// How aggregated tools are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolPrefix {
    /// `<server>__<tool>`: never collides, which is why it is the default.
    #[default]
    Always,
    /// Bare tool names; two servers offering the same name is an error at run time.
    Never,
}

/// One MCP server, stdio or remote.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// Spawn + MCP initialize must finish within this.
    pub startup_timeout: Duration,
    /// A single request must be answered within this.
    pub call_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub stop_grace: Duration,
    pub restart: RestartPolicy,
    /// Calls in flight at once; `None` means unlimited.
    pub max_concurrency: Option<NonZeroU32>,
    pub tools: ToolFilter,
    /// Do not echo this server's stderr on the console (it is still logged).
    pub quiet: bool,
    pub crash_loop: CrashLoop,
    /// Values that must never be shown: see [`ServerConfig::redact`]. Chosen from the
    /// expanded `env` and `headers` values (see the crate docs for which).
    pub secrets: Vec<String>,
}

impl ServerConfig {
    /// `text` with this server's secrets and anything shaped like a credential
    /// replaced (see [`crate::redact`]).
    pub fn redact(&self, text: &str) -> String {
        redact_with(text, &self.secrets)
    }

    /// A line-by-line redactor for one stream of this server's output (its stderr, its
    /// stdout noise): the secrets of the config and the credential shapes.
    pub fn redactor(&self) -> crate::redact::Redactor {
        crate::redact::Redactor::new(&self.secrets)
    }
}

/// How Corral reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The program (looked up in `PATH`), not a shell command line.
        command: String,
        args: Vec<String>,
        /// Merged over the parent environment.
        env: BTreeMap<String, String>,
        /// Absolute; defaults to the project root.
        cwd: PathBuf,
    },
    /// A remote server speaking Streamable HTTP (or the older HTTP+SSE transport).
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// Which HTTP transport (`transport` in corral.toml, `type` in JSON configs).
        transport: RemoteTransport,
        /// A client registered by hand with the server's authorization server
        /// (`[servers.NAME.oauth]`); otherwise `corral auth` registers one.
        oauth: OAuthClient,
    },
}

/// `[servers.NAME.oauth]`: the OAuth client to authorize as, and the scope to ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: Option<String>,
    /// A secret (from `${env:…}`, say): redacted like `headers`.
    pub client_secret: Option<String>,
    /// Scopes to ask for (space-separated) instead of those the server names.
    pub scope: Option<String>,
}

/// Which HTTP transport a remote server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoteTransport {
    /// Streamable HTTP, falling back to HTTP+SSE as the specification says.
    #[default]
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport only.
    Sse,
}

impl RemoteTransport {
    /// The spelling used in corral.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            RemoteTransport::Auto => "auto",
            RemoteTransport::StreamableHttp => "http",
            RemoteTransport::Sse => "sse",
        }
    }
}

/// When an exited server is started again (with backoff and the crash-loop breaker).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    Never,
    #[default]
    OnFailure,
    Always,
}

impl RestartPolicy {
    /// The spelling used in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Never => "never",
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Always => "always",
        }
    }
}

/// Which of a server's tools are exposed. Patterns are globs (`*` any run of
/// characters, `?` one character), kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolFilter {
    /// Empty means every tool is allowed.
    pub allow: Vec<String>,
    /// Wins over `allow`.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether the tool named `tool` (the server's own name, without prefix) is exposed.
    pub fn permits(&self, tool: &str) -> bool {
        let allowed = self.allow.is_empty() || self.allow.iter().any(|p| glob_match(p, tool));
        allowed && !self.deny.iter().any(|p| glob_match(p, tool))
    }
}

/// A named view of the gateway for agents that need less than everything
/// (`corral mcp --profile NAME`, `/mcp/NAME`): every tool it leaves out is context the
/// agent does not pay for on every turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    /// The servers whose tools, resources and prompts it offers; `None`: every server.
    pub servers: Option<Vec<String>>,
    /// Which tools, by the names agents see (`files__read_file`, `get_errors`), Corral's
    /// own included; applied after each server's own `tools` filter.
    pub tools: ToolFilter,
    /// `false` leaves Corral's own tools out (with `[gateway] builtin_tools = false`
    /// no profile has them).
    pub builtin_tools: bool,
}

impl Profile {
    /// Whether the profile offers server `server`'s resources, prompts and tools.
    pub fn has_server(&self, server: &str) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| n == server))
    }

    /// Whether the profile offers the tool exposed as `name`: of server `server`, or
    /// Corral's own (`None`) when `builtins` (the gateway's setting) allows them.
    pub fn offers(&self, server: Option<&str>, name: &str, builtins: bool) -> bool {
        let present = match server {
            Some(s) => self.has_server(s),
            None => builtins && self.builtin_tools,
        };
        present && self.tools.permits(name)
    }
}

/// The restart breaker: after `max` crashes within `window`, Corral gives up on the
/// server instead of restarting it forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashLoop {
    pub max: u32,
    pub window: Duration,
}

/// A dev process (e.g. `npm run dev`): supervised, its output kept and scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    pub name: String,
    pub command: ProcessCommand,
    /// Absolute; defaults to the project root.
    pub cwd: PathBuf,
    /// Merged over the parent environment.
    pub env: BTreeMap<String, String>,
    /// Values of `env` that must never be shown; see [`ServerConfig::secrets`].
    pub secrets: Vec<String>,
    /// Default [`RestartPolicy::OnFailure`] (or `[defaults]`' `restart`).
    pub restart: RestartPolicy,
    pub crash_loop: CrashLoop,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub stop_grace: Duration,
    /// Do not echo this process's output on the console (it is still logged).
    pub quiet: bool,
    /// Started with the daemon (default); `false`: only on `corral start NAME`.
    pub autostart: bool,
    /// Processes and servers that must be ready before this one starts, as written.
    /// Every name exists and there is no cycle ([`Config::start_order`]).
    pub depends_on: Vec<String>,
    /// When the process counts as ready; `None`: as soon as it is spawned.
    pub ready: Option<Readiness>,
    /// Run on a pseudo-terminal (for programs that only line-buffer on a terminal).
    pub pty: bool,
    /// Bytes of output kept in memory ([`DEFAULT_OUTPUT_RING`] unless set).
    pub output_ring: u64,
}

impl ProcessConfig {
    /// A process started by hand (`corral run NAME -- CMD`, an agent's tool call) with
    /// the defaults a config entry would get, except that it is not restarted: it ran
    /// once because someone asked, and its exit is the answer.
    pub fn ad_hoc(name: &str, command: ProcessCommand, cwd: PathBuf) -> ProcessConfig {
        ProcessConfig {
            name: name.to_owned(),
            command,
            cwd,
            env: BTreeMap::new(),
            secrets: Vec::new(),
            restart: RestartPolicy::Never,
            crash_loop: CrashLoop {
                max: crate::resolve::DEFAULT_CRASH_LOOP_MAX,
                window: crate::resolve::DEFAULT_CRASH_LOOP_WINDOW,
            },
            stop_grace: crate::resolve::DEFAULT_STOP_GRACE,
            quiet: false,
            autostart: true,
            depends_on: Vec::new(),
            ready: None,
            pty: false,
            output_ring: DEFAULT_OUTPUT_RING,
        }
    }
}

/// Bytes of a process's output kept in memory unless `output_ring` says otherwise.
pub const DEFAULT_OUTPUT_RING: u64 = 256 * 1024;
/// The smallest `output_ring`: one line of the longest kept (8 KiB).
pub const MIN_OUTPUT_RING: u64 = 8 * 1024;
/// The largest `output_ring`.
pub const MAX_OUTPUT_RING: u64 = 64 * 1024 * 1024;
/// How long a readiness check may take unless its `timeout` says otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What a process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessCommand {
    /// `command = "npm run dev"`: a shell line, run with `sh -c`.
    Shell(String),
    /// `command = ["cargo", "watch", "-x", "run"]`: a program (looked up in `PATH`) and
    /// its arguments, no shell. Never empty.
    Argv(Vec<String>),
}

impl ProcessCommand {
    /// The program and its arguments: `sh -c LINE` for a shell line.
    pub fn program_and_args(&self) -> (&str, Vec<String>) {
        match self {
            ProcessCommand::Shell(line) => ("sh", vec!["-c".to_owned(), line.clone()]),
            ProcessCommand::Argv(argv) => (&argv[0], argv[1..].to_vec()),
        }
    }
}

impl std::fmt::Display for ProcessCommand {
    /// The command as a person would type it (argv words joined by spaces).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcessCommand::Shell(line) => f.write_str(line),
            ProcessCommand::Argv(argv) => f.write_str(&argv.join(" ")),
        }
    }
}

/// A process's readiness check and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub check: ReadyCheck,
    /// Default [`DEFAULT_READY_TIMEOUT`].
    pub timeout: Duration,
}

/// How Corral knows a process is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyCheck {
    /// `ready = { log = "REGEX" }`: a line of its output (either stream) matches.
    Log(LogPattern),
    /// `ready = { tcp = "HOST:PORT" }` or `{ port = N }` (`127.0.0.1:N`): a TCP connect
    /// succeeds.
    Tcp(String),
    /// `ready = { http = "http://…" }`: a GET answers 2xx.
    Http(String),
}

/// A regular expression checked when the config was loaded; equal when written the same.
#[derive(Debug, Clone)]
pub struct LogPattern(pub regex::Regex);

impl LogPattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for LogPattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for LogPattern {}

/// A dev reverse proxy in front of a dev server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    pub name: String,
    /// `http://host:port` of the dev server.
    pub target: String,
    /// `IP:PORT` to listen on; defaults to `127.0.0.1:0` (a free port).
    pub listen: String,
    /// Send the browser's `Host` to the target instead of the target's own.
    pub preserve_host: bool,
    /// Insert the browser error script into HTML pages (default true).
    pub inject: bool,
    /// Requests kept in the traffic log (default 1000).
    pub traffic_ring: u32,
    /// Host names (lower case, no port) the proxy answers besides loopback names and its
    /// own listen address; a request for any other `Host` is refused (DNS rebinding).
    pub allowed_hosts: Vec<String>,
}

impl ProxyConfig {
    /// An ad-hoc proxy (`corral proxy NAME --target URL`): the defaults of a
    /// `[proxies.NAME]` table with only `target` (and maybe `listen`) set.
    pub fn ad_hoc(name: &str, target: &str, listen: Option<&str>) -> ProxyConfig {
        ProxyConfig {
            name: name.to_owned(),
            target: target.to_owned(),
            listen: listen.unwrap_or(DEFAULT_PROXY_LISTEN).to_owned(),
            preserve_host: false,
            inject: true,
            traffic_ring: DEFAULT_TRAFFIC_RING,
            allowed_hosts: Vec::new(),
        }
    }
}

pub(crate) const DEFAULT_PROXY_LISTEN: &str = "127.0.0.1:0";
pub(crate) const DEFAULT_TRAFFIC_RING: u32 = 1000;

fn redact_with<'a>(text: &str, secrets: impl IntoIterator<Item = &'a String>) -> String {
    crate::redact::Redactor::new(secrets).text(text)
}

/// `*` and `?` glob matching, iterative with single backtracking point (linear enough
/// for tool names).
fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The root a config's relative paths are resolved against.
pub(crate) fn project_root(config_path: &Path, format: Format) -> PathBuf {
    let dir = config_path.parent().unwrap_or(Path::new("/"));
    if format == Format::VsCode
        && dir.file_name().is_some_and(|n| n == ".vscode")
        && let Some(workspace) = dir.parent()
    {
        return workspace.to_path_buf();
    }
    dir.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_replaces_long_secrets_longest_first() {
        let secrets = vec![
            "abcd1234".to_owned(),
            "Bearer abcd1234".to_owned(),
            "1".to_owned(),
        ];
        assert_eq!(
            redact_with("auth: Bearer abcd1234 then abcd1234, 1 more", &secrets),
            "auth: *** then ***, 1 more"
        );
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_match("read_*", "read_file"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(glob_match("*_file*", "read_file_now"));
        assert!(!glob_match("read_*", "write_file"));
        assert!(!glob_match("a?c", "ac"));
    }

    #[test]
    fn tool_filter_deny_wins() {
        let filter = ToolFilter {
            allow: vec!["read_*".into()],
            deny: vec!["read_secret".into()],
        };
        assert!(filter.permits("read_file"));
        assert!(!filter.permits("read_secret"));
        assert!(!filter.permits("write_file"));
        assert!(ToolFilter::default().permits("anything"));
    }

    #[test]
    fn vscode_root_is_the_workspace_folder() {
        let p = Path::new("/proj/.vscode/mcp.json");
        assert_eq!(project_root(p, Format::VsCode), Path::new("/proj"));
        assert_eq!(project_root(p, Format::McpJson), Path::new("/proj/.vscode"));
    }
}
