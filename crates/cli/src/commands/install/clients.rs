//! The agent clients `corral install` knows: where each keeps its MCP servers, in which
//! format, and how its entries look. Each entry names the documentation it follows.

use std::path::{Path, PathBuf};

/// How a client's file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Strict JSON: no comments, no trailing commas.
    Json,
    /// JSON with comments and trailing commas (VS Code's and Zed's settings files).
    Jsonc,
    /// TOML (Codex).
    Toml,
}

/// Which `${…}` forms the client expands in its server entries, for `--import`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vars {
    /// `${NAME}`, `${NAME:-default}`, `${env:NAME}`: what `.mcp.json` already means to Corral.
    McpJson,
    /// VS Code's `${env:NAME}`, `${workspaceFolder}` (read in Corral's VS Code dialect).
    VsCode,
    /// `$NAME` and `${NAME}` in `env` and `headers` values (Gemini CLI).
    Dollar,
    /// No expansion: values are literal (Zed, Codex).
    None,
}

/// The user's directories, from the environment (HOME, XDG_CONFIG_HOME, CODEX_HOME,
/// CLAUDE_CONFIG_DIR), so tests can point them at temp dirs.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub home: PathBuf,
    pub config: PathBuf,
    pub codex_home: PathBuf,
    pub claude_dir: Option<PathBuf>,
}

impl Dirs {
    pub fn from_env() -> Option<Dirs> {
        let var = |n: &str| {
            std::env::var_os(n)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME")?;
        Some(Dirs {
            config: var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            codex_home: var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            claude_dir: var("CLAUDE_CONFIG_DIR"),
            home,
        })
    }

    /// VS Code's user settings directory.
    fn vscode_user(&self) -> PathBuf {
        if cfg!(target_os = "macos") {
            self.home.join("Library/Application Support/Code/User")
        } else {
            self.config.join("Code/User")
        }
    }
}

pub struct Client {
    /// The name on the command line.
    pub name: &'static str,
    /// The product's name, for messages.
    pub label: &'static str,
    pub syntax: Syntax,
    /// The key (at the top of the file) that holds the servers by name.
    pub key: &'static str,
    /// The project file, relative to the project's directory; `None`: the client has
    /// none (only a user-scope file).
    pub project: Option<&'static str>,
    /// The user-scope file.
    pub user: fn(&Dirs) -> PathBuf,
    /// The user config directory whose existence means the client is installed.
    pub user_dir: fn(&Dirs) -> PathBuf,
    /// Executables whose presence on PATH means the client is installed.
    pub bins: &'static [&'static str],
    /// The entry carries `"type": "stdio"`.
    pub stdio_type: bool,
    /// A user-scope entry names the config (`-c /abs/corral.toml`): the client (an
    /// editor) starts servers in a directory that is not the project's. Command-line
    /// agents start them in the directory they run in, the project, so Corral finds
    /// its config there as for any command.
    pub user_needs_config: bool,
    pub vars: Vars,
    /// The key a remote entry's URL is under, and the transport it means for Corral.
    pub url_keys: &'static [(&'static str, &'static str)],
}

/// Every client, in the order `--detect` reports them.
pub const CLIENTS: &[Client] = &[
    // Claude Code, https://docs.anthropic.com/en/docs/claude-code/mcp ("MCP installation
    // scopes"): project scope is `.mcp.json` at the project root, `mcpServers`; user scope
    // is `mcpServers` at the top of `~/.claude.json` ($CLAUDE_CONFIG_DIR/.claude.json when
    // set). `${VAR}` and `${VAR:-default}` expand in command, args, env, url, headers.
    // Claude Code starts stdio servers in its working directory, the project.
    Client {
        name: "claude",
        label: "Claude Code",
        syntax: Syntax::Json,
        key: "mcpServers",
        project: Some(".mcp.json"),
        user: |d| match &d.claude_dir {
            Some(dir) => dir.join(".claude.json"),
            None => d.home.join(".claude.json"),
        },
        user_dir: |d| {
            d.claude_dir
                .clone()
                .unwrap_or_else(|| d.home.join(".claude"))
        },
        bins: &["claude"],
        stdio_type: false,
        user_needs_config: false,
        vars: Vars::McpJson,
        url_keys: &[("url", "auto")],
    },
    // VS Code, https://code.visualstudio.com/docs/copilot/customization/mcp-servers and its
    // configuration reference: `.vscode/mcp.json` (workspace) or `mcp.json` in the user
    // settings directory, key `servers`, JSONC; stdio entries `{"type": "stdio", "command",
    // "args", "env"}`, remote `{"type": "http"|"sse", "url", "headers"}`; `${env:NAME}`,
    // `${workspaceFolder}`, `${input:ID}`.
    Client {
        name: "vscode",
        label: "VS Code",
        syntax: Syntax::Jsonc,
        key: "servers",
        project: Some(".vscode/mcp.json"),
        user: |d| d.vscode_user().join("mcp.json"),
        user_dir: |d| d.vscode_user(),
        bins: &["code"],
        stdio_type: true,
        user_needs_config: true,
        vars: Vars::VsCode,
        url_keys: &[("url", "auto")],
    },
    // Cursor, https://docs.cursor.com/context/model-context-protocol: `.cursor/mcp.json`
    // (project) or `~/.cursor/mcp.json` (global), `mcpServers`, `command`/`args`/`env` or
    // `url`/`headers`; `${env:NAME}` interpolation.
    Client {
        name: "cursor",
        label: "Cursor",
        syntax: Syntax::Json,
        key: "mcpServers",
        project: Some(".cursor/mcp.json"),
        user: |d| d.home.join(".cursor/mcp.json"),
        user_dir: |d| d.home.join(".cursor"),
        bins: &["cursor"],
        stdio_type: false,
        user_needs_config: true,
        vars: Vars::McpJson,
        url_keys: &[("url", "auto")],
    },
    // Codex, https://developers.openai.com/codex/mcp and docs/config.md of openai/codex:
    // `[mcp_servers.NAME]` in `~/.codex/config.toml` ($CODEX_HOME/config.toml), or
    // `.codex/config.toml` of a trusted project; `command`, `args`, `env` (literal
    // values), `env_vars` (names passed through), `cwd`; remote: `url`,
    // `bearer_token_env_var`, `http_headers`, `env_http_headers` (header → variable).
    Client {
        name: "codex",
        label: "Codex",
        syntax: Syntax::Toml,
        key: "mcp_servers",
        project: Some(".codex/config.toml"),
        user: |d| d.codex_home.join("config.toml"),
        user_dir: |d| d.codex_home.clone(),
        bins: &["codex"],
        stdio_type: false,
        user_needs_config: false,
        vars: Vars::None,
        url_keys: &[("url", "http")],
    },
    // Gemini CLI, https://geminicli.com/docs/tools/mcp-server (docs/tools/mcp-server.md
    // of google-gemini/gemini-cli): `mcpServers` in `.gemini/settings.json` (project) or
    // `~/.gemini/settings.json`; `command`/`args`/`env`/`cwd`, `httpUrl` (Streamable
    // HTTP) or `url` (SSE) with `headers`; `$VAR`/`${VAR}` in env values. Settings files
    // may carry comments.
    Client {
        name: "gemini",
        label: "Gemini CLI",
        syntax: Syntax::Jsonc,
        key: "mcpServers",
        project: Some(".gemini/settings.json"),
        user: |d| d.home.join(".gemini/settings.json"),
        user_dir: |d| d.home.join(".gemini"),
        bins: &["gemini"],
        stdio_type: false,
        user_needs_config: false,
        vars: Vars::Dollar,
        url_keys: &[("httpUrl", "http"), ("url", "sse")],
    },
    // Windsurf, https://docs.windsurf.com/windsurf/cascade/mcp: only a user file,
    // `~/.codeium/windsurf/mcp_config.json`, `mcpServers`; `command`/`args`/`env`, remote
    // `serverUrl` (or `url`) with `headers`; `${env:NAME}` interpolation.
    Client {
        name: "windsurf",
        label: "Windsurf",
        syntax: Syntax::Json,
        key: "mcpServers",
        project: None,
        user: |d| d.home.join(".codeium/windsurf/mcp_config.json"),
        user_dir: |d| d.home.join(".codeium/windsurf"),
        bins: &["windsurf"],
        stdio_type: false,
        user_needs_config: true,
        vars: Vars::McpJson,
        url_keys: &[("serverUrl", "auto"), ("url", "auto")],
    },
    // Zed, https://zed.dev/docs/ai/mcp ("As Custom Servers"): `context_servers` in the
    // settings file, `.zed/settings.json` (project) or `~/.config/zed/settings.json`
    // (JSONC); `{"command", "args", "env"}` (older: `"command": {"path", "args", "env"}`),
    // remote `{"url", "headers"}`; no variable expansion.
    Client {
        name: "zed",
        label: "Zed",
        syntax: Syntax::Jsonc,
        key: "context_servers",
        project: Some(".zed/settings.json"),
        user: |d| d.config.join("zed/settings.json"),
        user_dir: |d| d.config.join("zed"),
        bins: &["zed"],
        stdio_type: false,
        user_needs_config: true,
        vars: Vars::None,
        url_keys: &[("url", "auto")],
    },
];

/// The client named `name`, or a usage error listing the valid names.
pub fn find(name: &str) -> Result<&'static Client, String> {
    CLIENTS.iter().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = CLIENTS.iter().map(|c| c.name).collect();
        format!(
            "unknown client '{name}'; valid clients: {}",
            names.join(", ")
        )
    })
}

/// Why `client` counts as installed here, if it does: an executable on `path`, or its
/// user config directory.
pub fn detect(client: &Client, dirs: &Dirs, path: Option<&std::ffi::OsStr>) -> Option<String> {
    for bin in client.bins {
        if let Some(found) = on_path(bin, path) {
            return Some(format!("`{bin}` on PATH ({})", found.display()));
        }
    }
    let dir = (client.user_dir)(dirs);
    dir.is_dir()
        .then(|| format!("its config directory {} exists", dir.display()))
}

/// The executable `name` in the directories of `path`.
pub fn on_path(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The file `client` keeps its servers in, for the project at `project` or the user.
pub fn file(client: &Client, project: Option<&Path>, dirs: &Dirs) -> PathBuf {
    match (project, client.project) {
        (Some(dir), Some(rel)) => dir.join(rel),
        _ => (client.user)(dirs),
    }
}
