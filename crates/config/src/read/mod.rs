//! Stage one of loading: the position-carrying tree → raw sections.
//!
//! Checks everything that can be checked without the environment: key names, types,
//! value syntax (durations, choices, `${…}` forms), server names, and the shape of
//! each server (exactly one of `command` and `url`). Every problem is recorded and
//! reading goes on, so one run reports them all. Strings that may hold `${…}` stay
//! unexpanded ([`Text`]) until [`crate::resolve`].

mod alerts;
mod fields;

use std::num::NonZeroU32;
use std::time::Duration;

use self::fields::{Reader, env_name_problem, header_name_problem, join, with_article};
use crate::Format;
use crate::alerts::AlertSettings;
use crate::error::Problem;
use crate::expand::Segment;
use crate::model::{
    DEFAULT_PROXY_LISTEN, GatewayConfig, HttpAuth, RestartPolicy, ToolFilter, ToolPrefix,
};
use crate::suggest::closest;
use crate::tree::{Entry, Node, Pos, Value};

/// A string value, parsed for substitutions, with where it was written.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub segments: Vec<Segment>,
    pub pos: Pos,
    /// Dotted key path, for problems found when it is resolved.
    pub key: String,
}

/// The keys a server may inherit from `[defaults]`; `None` means "not set here".
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    pub startup_timeout: Option<Duration>,
    pub call_timeout: Option<Duration>,
    pub stop_grace: Option<Duration>,
    pub restart: Option<RestartPolicy>,
    pub max_concurrency: Option<NonZeroU32>,
    pub tools: Option<ToolFilter>,
    pub quiet: Option<bool>,
    pub crash_loop_max: Option<NonZeroU32>,
    pub crash_loop_window: Option<Duration>,
}

#[derive(Debug)]
pub(crate) struct RawConfig {
    pub gateway: GatewayConfig,
    pub defaults: Policy,
    pub servers: Vec<RawServer>,
    pub processes: Vec<RawProcess>,
    pub proxies: Vec<RawProxy>,
    pub alerts: AlertSettings,
}

#[derive(Debug)]
pub(crate) struct RawServer {
    pub name: String,
    pub transport: RawTransport,
    pub policy: Policy,
}

#[derive(Debug)]
pub(crate) enum RawTransport {
    Stdio {
        command: Text,
        args: Vec<Text>,
        env: Vec<(String, Text)>,
        cwd: Option<Text>,
    },
    Http {
        url: Text,
        headers: Vec<(String, Text)>,
    },
}

#[derive(Debug)]
pub(crate) struct RawProcess {
    pub name: String,
    pub command: Text,
    pub cwd: Option<Text>,
    pub env: Vec<(String, Text)>,
}

#[derive(Debug)]
pub(crate) struct RawProxy {
    pub name: String,
    pub target: Text,
    pub listen: String,
}

const TOP_KEYS: &[&str] = &[
    "gateway",
    "defaults",
    "servers",
    "processes",
    "proxies",
    "alerts",
];
const GATEWAY_KEYS: &[&str] = &["listen", "tool_prefix", "builtin_tools", "auth"];
const POLICY_KEYS: &[&str] = &[
    "startup_timeout",
    "call_timeout",
    "stop_grace",
    "restart",
    "max_concurrency",
    "tools",
    "quiet",
    "crash_loop_max",
    "crash_loop_window",
];
/// Keys that describe one particular server, so `[defaults]` cannot hold them.
const TRANSPORT_KEYS: &[&str] = &["command", "args", "env", "cwd", "url", "headers"];
const TOOLS_KEYS: &[&str] = &["allow", "deny"];
const PROCESS_KEYS: &[&str] = &["command", "cwd", "env"];
const PROXY_KEYS: &[&str] = &["target", "listen"];

const RESTART_CHOICES: &[(&str, RestartPolicy)] = &[
    ("never", RestartPolicy::Never),
    ("on-failure", RestartPolicy::OnFailure),
    ("always", RestartPolicy::Always),
];
const TOOL_PREFIX_CHOICES: &[(&str, ToolPrefix)] =
    &[("always", ToolPrefix::Always), ("never", ToolPrefix::Never)];
const AUTH_CHOICES: &[(&str, HttpAuth)] = &[("token", HttpAuth::Token), ("none", HttpAuth::None)];

/// Longest server, process or proxy name; names become parts of tool names, file
/// names and event sources.
const MAX_NAME_LEN: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
}

/// The `type` values of JSON configs. Corral speaks Streamable HTTP to every remote
/// server; "sse" entries are accepted so the file loads, and work with servers that
/// also serve Streamable HTTP at that URL.
const JSON_TYPE_CHOICES: &[(&str, Kind)] = &[
    ("stdio", Kind::Stdio),
    ("http", Kind::Http),
    ("sse", Kind::Http),
    ("streamable-http", Kind::Http),
];

/// Reads `root` (parsed from a file in `format`) and returns what could be read plus
/// every problem found.
pub(crate) fn read(root: &Node, format: Format) -> (RawConfig, Vec<Problem>) {
    let mut reader = Reader {
        format,
        problems: Vec::new(),
    };
    let raw = match format {
        Format::Toml => reader.toml(root),
        Format::McpJson | Format::VsCode => reader.json(root),
    };
    (raw, reader.problems)
}

/// The section readers: one method per kind of table, built on the getters in
/// `fields.rs`.
impl Reader {
    fn tools(&mut self, node: &Node, key: &str) -> Option<ToolFilter> {
        let entries = self.entries(node, key)?;
        self.check_keys(entries, key, TOOLS_KEYS);
        let mut filter = ToolFilter::default();
        if let Some(e) = node.get("allow") {
            filter.allow = self.patterns(&e.node, &join(key, "allow"));
        }
        if let Some(e) = node.get("deny") {
            filter.deny = self.patterns(&e.node, &join(key, "deny"));
        }
        Some(filter)
    }

    /// Reads each entry of a `[section.NAME]` collection with `read_one`.
    fn named<T>(
        &mut self,
        section: &Entry,
        what: &str,
        mut read_one: impl FnMut(&mut Self, &Entry, &str) -> Option<T>,
    ) -> Vec<T> {
        let path = section.key.as_str();
        let Some(entries) = self.entries(&section.node, path) else {
            return Vec::new();
        };
        let mut items = Vec::new();
        for entry in entries {
            let key = join(path, &entry.key);
            self.check_name(what, entry, &key);
            if !matches!(entry.node.value, Value::Table(_)) {
                let example = if self.format == Format::Toml {
                    format!(" like [{key}]")
                } else {
                    String::new()
                };
                let expected = format!("{}{example}", with_article(self.table_word()));
                self.wrong_type(&entry.node, &key, &expected);
                continue;
            }
            items.extend(read_one(self, entry, &key));
        }
        items
    }

    // ---- corral.toml ----

    fn toml(&mut self, root: &Node) -> RawConfig {
        let entries = match &root.value {
            Value::Table(entries) => entries.as_slice(),
            _ => &[],
        };
        self.check_keys(entries, "", TOP_KEYS);
        let gateway = match root.get("gateway") {
            Some(e) => self.gateway(&e.node),
            None => GatewayConfig::default(),
        };
        let defaults = match root.get("defaults") {
            Some(e) => self.defaults(&e.node),
            None => Policy::default(),
        };
        let servers = match root.get("servers") {
            Some(e) => self.named(e, "server", Self::server),
            None => Vec::new(),
        };
        let processes = match root.get("processes") {
            Some(e) => self.named(e, "process", Self::process),
            None => Vec::new(),
        };
        let proxies = match root.get("proxies") {
            Some(e) => self.named(e, "proxy", Self::proxy),
            None => Vec::new(),
        };
        let alerts = match root.get("alerts") {
            Some(e) => self.alerts(&e.node),
            None => AlertSettings::default(),
        };
        RawConfig {
            gateway,
            defaults,
            servers,
            processes,
            proxies,
            alerts,
        }
    }

    fn gateway(&mut self, node: &Node) -> GatewayConfig {
        let mut gateway = GatewayConfig::default();
        let Some(entries) = self.entries(node, "gateway") else {
            return gateway;
        };
        self.check_keys(entries, "gateway", GATEWAY_KEYS);
        if let Some(e) = node.get("listen")
            && let Some(addr) = self.socket_addr(&e.node, "gateway.listen")
        {
            gateway.listen = crate::Listen::Addr(addr);
        }
        if let Some(e) = node.get("tool_prefix") {
            let prefix = self.choice(&e.node, "gateway.tool_prefix", TOOL_PREFIX_CHOICES);
            gateway.tool_prefix = prefix.unwrap_or_default();
        }
        if let Some(e) = node.get("builtin_tools") {
            gateway.builtin_tools = self.bool(&e.node, "gateway.builtin_tools").unwrap_or(true);
        }
        if let Some(e) = node.get("auth") {
            let auth = self.choice(&e.node, "gateway.auth", AUTH_CHOICES);
            gateway.auth = auth.unwrap_or_default();
        }
        gateway
    }

    fn defaults(&mut self, node: &Node) -> Policy {
        let Some(entries) = self.entries(node, "defaults") else {
            return Policy::default();
        };
        for entry in entries {
            if TRANSPORT_KEYS.contains(&entry.key.as_str()) {
                self.problem(
                    entry.key_pos,
                    &join("defaults", &entry.key),
                    format!(
                        "`{}` cannot be set in [defaults]: it describes one server; \
                         move it to that server's [servers.NAME] table",
                        entry.key
                    ),
                );
            }
        }
        let known: Vec<&str> = POLICY_KEYS.iter().chain(TRANSPORT_KEYS).copied().collect();
        self.check_keys(entries, "defaults", &known);
        self.policy(node, "defaults")
    }

    /// The inheritable keys of a server or of `[defaults]`.
    fn policy(&mut self, node: &Node, path: &str) -> Policy {
        let mut policy = Policy::default();
        let field = |key: &str| node.get(key).map(|e| (&e.node, join(path, key)));
        if let Some((n, k)) = field("startup_timeout") {
            policy.startup_timeout = self.duration(n, &k, false);
        }
        if let Some((n, k)) = field("call_timeout") {
            policy.call_timeout = self.duration(n, &k, false);
        }
        if let Some((n, k)) = field("stop_grace") {
            policy.stop_grace = self.duration(n, &k, true);
        }
        if let Some((n, k)) = field("restart") {
            policy.restart = self.choice(n, &k, RESTART_CHOICES);
        }
        if let Some((n, k)) = field("max_concurrency") {
            let hint = "; leave max_concurrency out for unlimited concurrent calls";
            policy.max_concurrency = self.count(n, &k, hint);
        }
        if let Some((n, k)) = field("tools") {
            policy.tools = self.tools(n, &k);
        }
        if let Some((n, k)) = field("quiet") {
            policy.quiet = self.bool(n, &k);
        }
        if let Some((n, k)) = field("crash_loop_max") {
            let hint = "; it counts the crashes within crash_loop_window that stop restarts";
            policy.crash_loop_max = self.count(n, &k, hint);
        }
        if let Some((n, k)) = field("crash_loop_window") {
            policy.crash_loop_window = self.duration(n, &k, false);
        }
        policy
    }

    fn server(&mut self, entry: &Entry, path: &str) -> Option<RawServer> {
        let node = &entry.node;
        let toml = self.format == Format::Toml;
        if toml {
            let known: Vec<&str> = TRANSPORT_KEYS.iter().chain(POLICY_KEYS).copied().collect();
            if let Value::Table(entries) = &node.value {
                self.check_keys(entries, path, &known);
            }
        } else if let Some(e) = node.get("disabled") {
            // Other tools' way to keep an entry without running it.
            if self.bool(&e.node, &join(path, "disabled")) == Some(true) {
                return None;
            }
        }
        // Every field is read, whatever the server's kind, so that each bad value is
        // reported.
        let field = |key: &str| node.get(key).map(|e| (&e.node, join(path, key)));
        let command = field("command").and_then(|(n, k)| self.text(n, &k));
        let url = field("url").and_then(|(n, k)| self.text(n, &k));
        let args = field("args").map(|(n, k)| self.texts(n, &k));
        let env = field("env").map(|(n, k)| self.text_map(n, &k, env_name_problem));
        let cwd = field("cwd").and_then(|(n, k)| self.text(n, &k));
        let headers = field("headers").map(|(n, k)| self.text_map(n, &k, header_name_problem));
        let policy = if toml {
            self.policy(node, path)
        } else {
            Policy::default()
        };
        let transport = match self.server_kind(entry, path)? {
            Kind::Stdio => RawTransport::Stdio {
                command: command?,
                args: args.unwrap_or_default(),
                env: env.unwrap_or_default(),
                cwd,
            },
            Kind::Http => RawTransport::Http {
                url: url?,
                headers: headers.unwrap_or_default(),
            },
        };
        Some(RawServer {
            name: entry.key.clone(),
            transport,
            policy,
        })
    }

    /// Whether corral.toml has a key already reported as a likely typo of `command` or
    /// `url`; "has neither" on top of "did you mean `command`?" would only be noise.
    fn misspelt_transport_key(&self, node: &Node) -> bool {
        let Value::Table(entries) = &node.value else {
            return false;
        };
        self.format == Format::Toml
            && entries.iter().any(|e| {
                !TRANSPORT_KEYS.contains(&e.key.as_str())
                    && !POLICY_KEYS.contains(&e.key.as_str())
                    && closest(&e.key, &["command", "url"]).is_some()
            })
    }

    /// Stdio or HTTP, decided by which of `command` and `url` is written (exactly one
    /// must be). A JSON `type` must agree; in corral.toml, keys that belong to the
    /// other kind are reported rather than silently ignored.
    fn server_kind(&mut self, entry: &Entry, path: &str) -> Option<Kind> {
        let node = &entry.node;
        let kind = match (node.get("command"), node.get("url")) {
            (Some(_), None) => Kind::Stdio,
            (None, Some(_)) => Kind::Http,
            (Some(_), Some(_)) => {
                self.problem(
                    entry.key_pos,
                    path,
                    "has both `command` and `url`; a server is either a stdio process \
                     (`command`) or a remote HTTP server (`url`); remove one",
                );
                return None;
            }
            (None, None) if self.misspelt_transport_key(node) => return None,
            (None, None) => {
                self.problem(
                    entry.key_pos,
                    path,
                    "has neither `command` (a stdio server to start) nor `url` \
                     (a remote HTTP server); add one",
                );
                return None;
            }
        };
        if self.format != Format::Toml {
            if let Some(e) = node.get("type") {
                let key = join(path, "type");
                if let Some(declared) = self.choice(&e.node, &key, JSON_TYPE_CHOICES)
                    && declared != kind
                {
                    let (wants, has) = match declared {
                        Kind::Stdio => ("`command`", "`url`"),
                        Kind::Http => ("`url`", "`command`"),
                    };
                    self.problem(
                        e.node.pos,
                        &key,
                        format!("this type needs {wants}, but the server has {has}; fix or remove `type`"),
                    );
                }
            }
            return Some(kind);
        }
        let (foreign, applies): (&[&str], &str) = match kind {
            Kind::Stdio => (&["headers"], "only to remote servers (those with `url`)"),
            Kind::Http => (
                &["args", "env", "cwd"],
                "only to stdio servers (those with `command`)",
            ),
        };
        for &key in foreign {
            if let Some(e) = node.get(key) {
                self.problem(
                    e.key_pos,
                    &join(path, key),
                    format!("`{key}` applies {applies}; remove it"),
                );
            }
        }
        Some(kind)
    }

    fn process(&mut self, entry: &Entry, path: &str) -> Option<RawProcess> {
        let node = &entry.node;
        if let Value::Table(entries) = &node.value {
            self.check_keys(entries, path, PROCESS_KEYS);
        }
        let env = match node.get("env") {
            Some(e) => self.text_map(&e.node, &join(path, "env"), env_name_problem),
            None => Vec::new(),
        };
        let cwd = node
            .get("cwd")
            .and_then(|e| self.text(&e.node, &join(path, "cwd")));
        let Some(command) = node.get("command") else {
            self.problem(
                entry.key_pos,
                path,
                r#"missing `command`: the shell command to run, e.g. command = "npm run dev""#,
            );
            return None;
        };
        let command = self.text(&command.node, &join(path, "command"))?;
        Some(RawProcess {
            name: entry.key.clone(),
            command,
            cwd,
            env,
        })
    }

    fn proxy(&mut self, entry: &Entry, path: &str) -> Option<RawProxy> {
        let node = &entry.node;
        if let Value::Table(entries) = &node.value {
            self.check_keys(entries, path, PROXY_KEYS);
        }
        let listen = match node.get("listen") {
            Some(e) => self.socket_addr(&e.node, &join(path, "listen")),
            None => Some(DEFAULT_PROXY_LISTEN.to_owned()),
        };
        let Some(target) = node.get("target") else {
            self.problem(
                entry.key_pos,
                path,
                r#"missing `target`: the dev server to proxy, e.g. target = "http://127.0.0.1:5173""#,
            );
            return None;
        };
        let target = self.text(&target.node, &join(path, "target"))?;
        Some(RawProxy {
            name: entry.key.clone(),
            target,
            listen: listen?,
        })
    }

    // ---- .mcp.json / VS Code ----

    /// Only the servers object is read; any other top-level key (VS Code's `inputs`,
    /// Claude Desktop's preferences) belongs to the file's other readers.
    fn json(&mut self, root: &Node) -> RawConfig {
        let servers_key = match self.format {
            Format::VsCode => "servers",
            _ => "mcpServers",
        };
        let servers = match root.get(servers_key) {
            Some(e) => self.named(e, "server", Self::server),
            None => {
                self.problem(
                    Pos::START,
                    "",
                    "no \"mcpServers\" object (.mcp.json, Claude Desktop) or \"servers\" \
                     object (VS Code) at the top level; this does not look like an MCP \
                     config file",
                );
                Vec::new()
            }
        };
        RawConfig {
            gateway: GatewayConfig::default(),
            defaults: Policy::default(),
            servers,
            processes: Vec::new(),
            proxies: Vec::new(),
            alerts: AlertSettings::default(),
        }
    }
}
