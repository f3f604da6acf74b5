//! The starter `corral.toml` written by `corral init`.

use std::path::Path;

use crate::ConfigError;
use crate::expand::to_toml_text;
use crate::model::project_root;
use crate::read::{self, RawServer, RawTransport, Text};

const HEADER: &str = r#"# corral.toml: the MCP servers and dev processes of this project, run by Corral and
# shared by every agent that connects. `corral check` validates this file; `corral up`
# starts everything. Corral keeps logs and state in .corral/ (add it to .gitignore).
#
# Durations are strings: "500ms", "30s", "2m". Strings may use ${env:NAME} for an
# environment variable (${env:NAME:-fallback} if it may be unset) and $$ for a literal $.

[gateway]
# Address of the shared MCP endpoint (Streamable HTTP at /mcp). Unset: a free loopback
# port, the same one as last time when it is still free; `corral up` prints it,
# `corral ps` shows it and .corral/endpoint holds it. Agents that start `corral mcp`
# do not need it. Set an address only if an HTTP client needs a fixed one. An address
# beyond loopback (127.0.0.0/8, ::1) applies only if you allow it outside this file
# (see auth below):
# listen = "127.0.0.1:8080"
# "always": tools are named <server>__<tool>, so no two servers can collide.
# "never": bare tool names; when two servers offer the same name, the second one's
# tool keeps its prefix (and `corral events` says so).
tool_prefix = "always"
# Corral's own tools for agents (corral__servers, corral__server_logs,
# corral__restart_server; bare names with tool_prefix = "never").
builtin_tools = true
# HTTP clients send the bearer token from .corral/token. "none" (no token: every local
# user could run commands as you) applies only if you allow it outside this repository:
# `[trust] widen_access = ["/path/to/project"]` in ~/.config/corral/config.toml, or
# `corral up --allow-widened-access`, or CORRAL_ALLOW_WIDENED_ACCESS=1; otherwise the
# token stays and `corral check` says why.
auth = "token"

[defaults]
# Every server inherits these unless its own table sets them.
# Time allowed to spawn a server and finish the MCP handshake; npx/uvx cold starts
# can need more than a few seconds.
startup_timeout = "30s"
# Longest a single tool call may take. After a timeout Corral pings the server and
# restarts it if it no longer answers at all.
call_timeout = "30s"
# On stop, time between SIGTERM and SIGKILL.
stop_grace = "3s"
# Restart an exited server: "never", "on-failure" or "always" (backoff 1s, 2s, ... 60s).
restart = "on-failure"
# Give up restarting after crash_loop_max crashes within crash_loop_window.
crash_loop_max = 5
crash_loop_window = "60s"
# true: do not echo the server's stderr on the console (it is still logged).
quiet = false
# Calls in flight at once per server (default unlimited); 1 serializes calls for servers
# that cannot handle concurrent requests.
# max_concurrency = 1
# Which tools to expose, as glob patterns; deny wins, an empty allow exposes all.
# tools = { allow = ["read_*"], deny = ["*delete*"] }
"#;

const EXAMPLES: &str = r#"
# ---- Examples: uncomment and adapt. ----

# A stdio server: Corral starts it and speaks JSON-RPC over its stdin/stdout.
# Any key of [defaults] may also be set here, for this server only.
# [servers.files]
# command = "npx"                # the program, looked up in PATH (not a shell line)
# args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
# env = { DEBUG = "1" }          # merged over Corral's own environment
# cwd = "."                      # working directory, relative to this file

# A remote server over Streamable HTTP (MCP 2026-07-28 or a 2025 session).
# [servers.search]
# url = "http://127.0.0.1:9000/mcp"
# headers = { Authorization = "Bearer ${env:SEARCH_TOKEN}" }   # values are redacted in logs
# transport = "auto"             # or "http" (Streamable HTTP only), "sse" (HTTP+SSE only)
# Behind OAuth: nothing to set; `corral auth search` signs in once for every agent.
# oauth = { client_id = "corral-dev", scope = "read" }   # only for a client registered
#                                # by hand (its client_secret, if any, from ${env:…})

# A dev process: its output kept and scanned for errors.
# [processes.web]
# command = "npm run dev"        # run with `sh -c`; or a program and its arguments:
#                                # command = ["cargo", "watch", "-x", "run"]
# cwd = "web"                    # relative to this file
# env = { PORT = "5173" }
# ready = { port = 5173 }        # or { log = "ready in" }, { http = "http://…/health" }

# A dev proxy in front of a dev server: logs its traffic and the page's JavaScript
# errors (`corral proxy web --log`, and the agent's proxy_log tool).
# [proxies.web]
# target = "http://127.0.0.1:5173"   # the dev server
# listen = "127.0.0.1:4173"          # open this in the browser (default: a free port;
#                                    # beyond loopback only if allowed, like [gateway])
# allowed_hosts = ["myapp.test"]     # Host names to answer besides localhost/127.x
"#;

/// What `corral init` writes, and what it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitTemplate {
    /// The `corral.toml` text.
    pub text: String,
    /// One line per imported entry that was left out (an entry that runs Corral itself,
    /// see [`crate::itself`]); the file carries the same note as a comment.
    pub skipped: Vec<String>,
}

/// A commented starter `corral.toml`. Given the path and text of an `.mcp.json` (or
/// VS Code `mcp.json`), its servers are imported as `[servers.NAME]` tables, with
/// `${…}` references kept as references (never expanded into the file). An entry that
/// runs Corral itself (`corral mcp`, the one the README asks agents to have) is not
/// imported: it is noted in a comment and in [`InitTemplate::skipped`].
///
/// Fails with [`ConfigError::Invalid`] if the JSON has problems, located in the JSON.
pub fn init_template(mcp_json: Option<(&Path, &str)>) -> Result<InitTemplate, ConfigError> {
    let mut out = String::from(HEADER);
    let mut skipped = Vec::new();
    if let Some((path, text)) = mcp_json {
        let source = path
            .file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy();
        out.push_str(&format!("\n# ---- Servers imported from {source}. ----\n"));
        for server in import_servers(path, text)? {
            match server.skipped {
                Some(note) => {
                    out.push_str(&format!("\n# Not imported: {note}.\n"));
                    skipped.push(note);
                }
                None => out.push_str(&server.toml),
            }
        }
    }
    out.push_str(EXAMPLES);
    Ok(InitTemplate { text: out, skipped })
}

/// One server entry of an imported `.mcp.json` / VS Code `mcp.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedServer {
    /// The entry's name.
    pub name: String,
    /// Its `[servers.NAME]` table as `corral init` writes it (a leading blank line, `${…}`
    /// references kept); empty when skipped.
    pub toml: String,
    /// Why it was left out: it runs Corral itself.
    pub skipped: Option<String>,
}

/// The servers of an `.mcp.json` (or VS Code `mcp.json`) at `path` as `corral.toml`
/// tables, the conversion [`init_template`] uses (`corral install --import` appends
/// them to an existing `corral.toml`). Disabled entries are absent.
pub fn import_servers(path: &Path, text: &str) -> Result<Vec<ImportedServer>, ConfigError> {
    let invalid = |problems| ConfigError::Invalid {
        path: path.to_owned(),
        problems,
    };
    let (tree, format) = crate::json_load::parse(text).map_err(|p| invalid(vec![p]))?;
    let (raw, mut problems) = read::read(&tree, format);
    if !problems.is_empty() {
        problems.sort_by_key(|p| (p.line, p.column));
        return Err(invalid(problems));
    }
    let root = project_root(
        &std::path::absolute(path).unwrap_or(path.to_owned()),
        format,
    );
    let mut servers = Vec::new();
    for server in &raw.servers {
        let mut toml = String::new();
        let skipped = corral_itself(server, &root);
        if skipped.is_none() {
            render_server(&mut toml, server, &root);
        }
        servers.push(ImportedServer {
            name: server.name.clone(),
            toml,
            skipped,
        });
    }
    Ok(servers)
}

/// Why `server` is not imported, when it runs Corral itself. The check expands `${…}`
/// against the process environment (only to look; the file keeps the references).
fn corral_itself(server: &RawServer, root: &Path) -> Option<String> {
    let RawTransport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &server.transport
    else {
        return None;
    };
    let lookup = |name: &str| std::env::var(name).ok();
    let value = |t: &Text| crate::expand::resolve(&t.segments, &lookup, root).map(|r| r.value);
    let command = value(command).ok()?;
    let args: Vec<String> = args.iter().map(value).collect::<Result<_, _>>().ok()?;
    let env = env
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), value(v).ok()?)))
        .collect();
    let cwd = match cwd {
        Some(c) => root.join(value(c).ok()?),
        None => root.to_owned(),
    };
    let exe = std::env::current_exe().ok();
    crate::itself::runs_corral(&command, &args, &cwd, &env, &lookup, exe.as_deref())
        .then(|| crate::itself::message(&server.name, &command, &args))
}

fn render_server(out: &mut String, server: &RawServer, root: &Path) {
    let text = |t: &Text| toml_string(&to_toml_text(&t.segments, root));
    let map = |entries: &[(String, Text)]| {
        let pairs: Vec<String> = entries
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_key(k), text(v)))
            .collect();
        format!("{{ {} }}", pairs.join(", "))
    };
    out.push_str(&format!("\n[servers.{}]\n", server.name));
    match &server.transport {
        RawTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            out.push_str(&format!("command = {}\n", text(command)));
            if !args.is_empty() {
                let args: Vec<String> = args.iter().map(text).collect();
                out.push_str(&format!("args = [{}]\n", args.join(", ")));
            }
            if !env.is_empty() {
                out.push_str(&format!("env = {}\n", map(env)));
            }
            if let Some(cwd) = cwd {
                out.push_str(&format!("cwd = {}\n", text(cwd)));
            }
        }
        RawTransport::Http {
            url,
            headers,
            transport,
            oauth,
        } => {
            out.push_str(&format!("url = {}\n", text(url)));
            if !headers.is_empty() {
                out.push_str(&format!("headers = {}\n", map(headers)));
            }
            if *transport != crate::RemoteTransport::Auto {
                out.push_str(&format!("transport = {:?}\n", transport.as_str()));
            }
            if !oauth.is_empty() {
                out.push_str(&format!("oauth = {}\n", map(oauth)));
            }
        }
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

fn toml_key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { k.to_owned() } else { toml_string(k) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Format, Transport, load_str};
    use std::path::PathBuf;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn starter_template_loads_without_problems() {
        let text = init_template(None).unwrap().text;
        let config = load_str(Path::new("/proj/corral.toml"), &text, &no_env).unwrap();
        assert_eq!(config.format, Format::Toml);
        assert!(config.servers.is_empty());
        assert_eq!(config.gateway.listen, crate::Listen::Auto);
    }

    #[test]
    fn starter_template_examples_load_when_uncommented() {
        let text = init_template(None).unwrap().text;
        let examples = text.split("# ---- Examples").nth(1).unwrap();
        let uncommented: String = examples
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.starts_with('[') || l.contains(" = "))
            .map(|l| format!("{l}\n"))
            .collect();
        let env = |name: &str| (name == "SEARCH_TOKEN").then(|| "t0ken".to_owned());
        let config = load_str(Path::new("/proj/corral.toml"), &uncommented, &env)
            .unwrap_or_else(|e| panic!("{e}\n---\n{uncommented}"));
        assert_eq!(config.servers.len(), 2);
        assert_eq!(config.processes.len(), 1);
        assert_eq!(config.proxies.len(), 1);
    }

    #[test]
    fn import_round_trips_without_expanding() {
        let json = r#"{
          "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "fs", "$HOME"], "env": {"API KEY": "${KEY}"}, "cwd": "tools"},
            "search": {"type": "http", "url": "https://x/mcp", "headers": {"Authorization": "Bearer ${TOKEN:-none}"}},
            "off": {"command": "nothing", "disabled": true}
          }
        }"#;
        let text = init_template(Some((Path::new("/proj/.mcp.json"), json)))
            .unwrap()
            .text;
        assert!(
            text.contains("[servers.files]\ncommand = \"npx\"\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"env = { "API KEY" = "${env:KEY}" }"#),
            "{text}"
        );
        assert!(text.contains(r#"args = ["-y", "fs", "$$HOME"]"#), "{text}");
        assert!(!text.contains("[servers.off]"), "{text}");

        let env = |name: &str| (name == "KEY").then(|| "k3y-value".to_owned());
        let config = load_str(Path::new("/proj/corral.toml"), &text, &env)
            .unwrap_or_else(|e| panic!("{e}\n---\n{text}"));
        assert_eq!(config.servers.len(), 2);
        let Transport::Stdio { args, env, cwd, .. } = &config.servers["files"].transport else {
            panic!("files is stdio");
        };
        assert_eq!(args, &["-y", "fs", "$HOME"]);
        assert_eq!(env["API KEY"], "k3y-value");
        assert_eq!(cwd, &PathBuf::from("/proj/tools"));
        let Transport::Http { headers, .. } = &config.servers["search"].transport else {
            panic!("search is http");
        };
        assert_eq!(headers["Authorization"], "Bearer none");
    }

    #[test]
    fn import_skips_corral_itself_with_a_note() {
        let json = r#"{"mcpServers": {
            "corral": {"command": "corral", "args": ["mcp"]},
            "other": {"command": "/opt/corral", "args": ["-c", "x.toml", "mcp"]},
            "time": {"command": "uvx", "args": ["mcp-server-time"]}
        }}"#;
        let t = init_template(Some((Path::new("/proj/.mcp.json"), json))).unwrap();
        assert!(t.text.contains("[servers.time]"), "{}", t.text);
        assert!(!t.text.contains("[servers.corral]"), "{}", t.text);
        assert!(!t.text.contains("[servers.other]"), "{}", t.text);
        assert_eq!(t.skipped.len(), 2, "{:?}", t.skipped);
        assert!(
            t.text
                .contains("# Not imported: server 'corral' runs Corral itself (`corral mcp`)"),
            "{}",
            t.text
        );
        load_str(Path::new("/proj/corral.toml"), &t.text, &no_env).unwrap();
    }

    #[test]
    fn import_reports_problems_in_the_json() {
        let json = "{\"mcpServers\": {\n  \"a\": {\"args\": []}\n}}";
        let err = init_template(Some((Path::new(".mcp.json"), json))).unwrap_err();
        let ConfigError::Invalid { problems, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(problems.len(), 1, "{err}");
        assert_eq!(problems[0].line, 2);
        assert!(
            err.to_string()
                .starts_with(".mcp.json:2:3: mcpServers.a: has neither"),
            "{err}"
        );
    }
}
