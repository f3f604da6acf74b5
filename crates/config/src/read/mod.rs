//! Stage one of loading: the position-carrying tree → raw sections.
//!
//! Checks everything that can be checked without the environment: key names, types,
//! value syntax (durations, choices, `${…}` forms), server names, and the shape of
//! each server (exactly one of `command` and `url`). Every problem is recorded and
//! reading goes on, so one run reports them all. Strings that may hold `${…}` stay
//! unexpanded ([`Text`]) until [`crate::resolve`].

mod alerts;
mod fields;
pub use self::fields::name_problem;

use std::num::NonZeroU32;
use std::time::Duration;

use self::fields::{
    Reader, env_name_problem, header_name_problem, join, oauth_key_problem, with_article,
};
use crate::Format;
use crate::alerts::AlertSettings;
use crate::error::Problem;
use crate::expand::Segment;
use crate::model::{
    DEFAULT_OUTPUT_RING, DEFAULT_PROXY_LISTEN, DEFAULT_READY_TIMEOUT, DEFAULT_TRAFFIC_RING,
    GatewayConfig, HttpAuth, MAX_OUTPUT_RING, MIN_OUTPUT_RING, Profile, Readiness, ReadyCheck,
    RemoteTransport, RestartPolicy, ToolFilter, ToolPrefix,
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
    pub profiles: std::collections::BTreeMap<String, Profile>,
    pub alerts: AlertSettings,
    pub error_noise: Vec<String>,
    /// Where `gateway.listen`, `gateway.auth` and each `proxies.NAME.listen` are
    /// written (the key), for what [`crate::trust`] says about them.
    pub access_keys: std::collections::BTreeMap<String, (usize, usize)>,
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
        transport: RemoteTransport,
        /// `[servers.NAME.oauth]`: `client_id`, `client_secret`, `scope`.
        oauth: Vec<(String, Text)>,
    },
}

#[derive(Debug)]
pub(crate) struct RawProcess {
    pub name: String,
    pub command: RawCommand,
    pub cwd: Option<Text>,
    pub env: Vec<(String, Text)>,
    /// Only the keys in [`PROCESS_POLICY_KEYS`] are read.
    pub policy: Policy,
    pub autostart: bool,
    pub depends_on: Vec<Dep>,
    pub ready: Option<Readiness>,
    pub pty: bool,
    pub output_ring: u64,
}

/// `command` of a process: a shell line or an argv array (never empty).
#[derive(Debug)]
pub(crate) enum RawCommand {
    Shell(Text),
    Argv(Vec<Text>),
}

/// One name in `depends_on`, with where it was written.
#[derive(Debug, Clone)]
pub(crate) struct Dep {
    pub name: String,
    pub pos: Pos,
    pub key: String,
}

#[derive(Debug)]
pub(crate) struct RawProxy {
    pub name: String,
    pub target: Text,
    pub listen: String,
    pub preserve_host: bool,
    pub inject: bool,
    pub traffic_ring: u32,
    pub allowed_hosts: Vec<String>,
}

const TOP_KEYS: &[&str] = &[
    "gateway",
    "defaults",
    "servers",
    "processes",
    "proxies",
    "alerts",
    "errors",
    "profiles",
];
const PROFILE_KEYS: &[&str] = &["servers", "tools", "builtin_tools"];
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
const TRANSPORT_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "transport",
    "oauth",
];
/// corral.toml's `transport` of a remote server.
const REMOTE_TRANSPORT_CHOICES: &[(&str, RemoteTransport)] = &[
    ("auto", RemoteTransport::Auto),
    ("http", RemoteTransport::StreamableHttp),
    ("streamable-http", RemoteTransport::StreamableHttp),
    ("sse", RemoteTransport::Sse),
];
const TOOLS_KEYS: &[&str] = &["allow", "deny"];
const PROCESS_KEYS: &[&str] = &[
    "command",
    "cwd",
    "env",
    "autostart",
    "depends_on",
    "ready",
    "pty",
    "output_ring",
];
/// The [`POLICY_KEYS`] that apply to processes too (also taken from `[defaults]`).
pub(crate) const PROCESS_POLICY_KEYS: &[&str] = &[
    "stop_grace",
    "restart",
    "quiet",
    "crash_loop_max",
    "crash_loop_window",
];
const READY_KEYS: &[&str] = &["log", "tcp", "port", "http", "timeout"];
/// The keys of `ready` that name a check; exactly one must be written.
const READY_CHECKS: &[&str] = &["log", "tcp", "port", "http"];
const PROXY_KEYS: &[&str] = &[
    "target",
    "listen",
    "preserve_host",
    "inject",
    "traffic_ring",
    "allowed_hosts",
];

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
    let mut raw = match format {
        Format::Toml => reader.toml(root),
        Format::McpJson | Format::VsCode => reader.json(root),
    };
    if format == Format::Toml {
        raw.access_keys = access_keys(root);
    }
    (raw, reader.problems)
}

/// Where the keys that decide who can connect are written: `gateway.listen`,
/// `gateway.auth`, `proxies.NAME.listen` (the key's own line and column).
fn access_keys(root: &Node) -> std::collections::BTreeMap<String, (usize, usize)> {
    let mut out = std::collections::BTreeMap::new();
    let mut put = |key: String, e: &Entry| {
        out.insert(key, (e.key_pos.line, e.key_pos.column));
    };
    if let Some(gateway) = root.get("gateway") {
        for key in ["listen", "auth"] {
            if let Some(e) = gateway.node.get(key) {
                put(join("gateway", key), e);
            }
        }
    }
    if let Some(Entry {
        node: Node {
            value: Value::Table(proxies),
            ..
        },
        ..
    }) = root.get("proxies")
    {
        for proxy in proxies {
            if let Some(e) = proxy.node.get("listen") {
                put(join(&join("proxies", &proxy.key), "listen"), e);
            }
        }
    }
    out
}

/// The user config (see [`crate::trust`]): `[trust] widen_access`, each entry as
/// written with its position, and every problem (unknown keys, wrong types) found.
pub(crate) fn read_user(root: &Node) -> (Vec<(String, Pos)>, Vec<Problem>) {
    let mut reader = Reader {
        format: Format::Toml,
        problems: Vec::new(),
    };
    let entries = match &root.value {
        Value::Table(entries) => entries.as_slice(),
        _ => &[],
    };
    reader.check_keys(entries, "", &["trust"]);
    let mut dirs = Vec::new();
    if let Some(trust) = root.get("trust")
        && let Some(entries) = reader.entries(&trust.node, "trust")
    {
        reader.check_keys(entries, "trust", &["widen_access"]);
        if let Some(e) = trust.node.get("widen_access") {
            let key = "trust.widen_access";
            match &e.node.value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(s) = reader.string(item, &format!("{key}[{i}]")) {
                            dirs.push((s, item.pos));
                        }
                    }
                }
                _ => reader.wrong_type(&e.node, key, "an array of project directories"),
            }
        }
    }
    (dirs, reader.problems)
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
        let error_noise = match root.get("errors") {
            Some(e) => self.errors(&e.node),
            None => Vec::new(),
        };
        let profiles = match root.get("profiles") {
            Some(e) => {
                let servers: Vec<&str> = match root.get("servers").map(|s| &s.node.value) {
                    Some(Value::Table(entries)) => entries.iter().map(|e| e.key.as_str()).collect(),
                    _ => Vec::new(),
                };
                self.named(e, "profile", |r, entry, path| {
                    r.profile(entry, path, &servers)
                })
                .into_iter()
                .map(|p| (p.name.clone(), p))
                .collect()
            }
            None => Default::default(),
        };
        RawConfig {
            gateway,
            defaults,
            servers,
            processes,
            proxies,
            profiles,
            alerts,
            error_noise,
            access_keys: Default::default(),
        }
    }

    /// `[profiles.NAME]`: `servers` (names from `[servers]`; `known`), `tools`
    /// (patterns over the names agents see), `builtin_tools`.
    fn profile(&mut self, entry: &Entry, path: &str, known: &[&str]) -> Option<Profile> {
        let node = &entry.node;
        if let Value::Table(entries) = &node.value {
            self.check_keys(entries, path, PROFILE_KEYS);
        }
        let servers = node.get("servers").map(|e| {
            let key = join(path, "servers");
            let Value::Array(items) = &e.node.value else {
                self.wrong_type(&e.node, &key, "an array of server names");
                return Vec::new();
            };
            let mut names = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let item_key = format!("{key}[{i}]");
                let Some(name) = self.string(item, &item_key) else {
                    continue;
                };
                if known.contains(&name.as_str()) {
                    names.push(name);
                    continue;
                }
                let near = closest(&name, known)
                    .map(|n| format!("did you mean {n:?}? "))
                    .unwrap_or_default();
                let list = if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                };
                self.problem(
                    item.pos,
                    &item_key,
                    format!("no server named {name:?} in [servers]; {near}servers: {list}"),
                );
            }
            names
        });
        let tools = node
            .get("tools")
            .and_then(|e| self.tools(&e.node, &join(path, "tools")));
        let builtin_tools = node
            .get("builtin_tools")
            .and_then(|e| self.bool(&e.node, &join(path, "builtin_tools")));
        Some(Profile {
            name: entry.key.clone(),
            servers,
            tools: tools.unwrap_or_default(),
            builtin_tools: builtin_tools.unwrap_or(true),
        })
    }

    /// `[errors]`: `ignore`, patterns `get_errors` hides as noise.
    fn errors(&mut self, node: &Node) -> Vec<String> {
        let Some(entries) = self.entries(node, "errors") else {
            return Vec::new();
        };
        self.check_keys(entries, "errors", &["ignore"]);
        match node.get("ignore") {
            Some(e) => self.patterns(&e.node, "errors.ignore"),
            None => Vec::new(),
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
        self.policy(node, "defaults", POLICY_KEYS)
    }

    /// The inheritable keys of a server, a process or of `[defaults]`; only those in
    /// `keys` are read (the others are someone else's to report).
    fn policy(&mut self, node: &Node, path: &str, keys: &[&str]) -> Policy {
        let mut policy = Policy::default();
        let field = |key: &str| {
            keys.contains(&key)
                .then(|| node.get(key).map(|e| (&e.node, join(path, key))))
                .flatten()
        };
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
        let oauth = field("oauth").map(|(n, k)| self.text_map(n, &k, oauth_key_problem));
        // corral.toml's `transport`, or what a JSON config's `type` says of it.
        let remote_transport = if toml {
            field("transport").and_then(|(n, k)| self.choice(n, &k, REMOTE_TRANSPORT_CHOICES))
        } else {
            match node.get("type").map(|e| &e.node.value) {
                Some(Value::String(t)) if t == "sse" => Some(RemoteTransport::Sse),
                Some(Value::String(t)) if t == "streamable-http" => {
                    Some(RemoteTransport::StreamableHttp)
                }
                _ => None,
            }
        };
        let policy = if toml {
            self.policy(node, path, POLICY_KEYS)
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
                transport: remote_transport.unwrap_or_default(),
                oauth: oauth.unwrap_or_default(),
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
            Kind::Stdio => (
                &["headers", "transport", "oauth"],
                "only to remote servers (those with `url`)",
            ),
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
            let known: Vec<&str> = PROCESS_KEYS
                .iter()
                .chain(PROCESS_POLICY_KEYS)
                .copied()
                .collect();
            self.check_keys(entries, path, &known);
        }
        let field = |key: &str| node.get(key).map(|e| (&e.node, join(path, key)));
        let env = field("env")
            .map(|(n, k)| self.text_map(n, &k, env_name_problem))
            .unwrap_or_default();
        let cwd = field("cwd").and_then(|(n, k)| self.text(n, &k));
        let policy = self.policy(node, path, PROCESS_POLICY_KEYS);
        let autostart = field("autostart").map(|(n, k)| self.bool(n, &k));
        let pty = field("pty").map(|(n, k)| self.bool(n, &k));
        let depends_on = field("depends_on").map(|(n, k)| self.depends_on(n, &k));
        let ready = field("ready").map(|(n, k)| self.ready(n, &k));
        let output_ring =
            field("output_ring").map(|(n, k)| self.size(n, &k, MIN_OUTPUT_RING, MAX_OUTPUT_RING));
        let Some((command, key)) = field("command") else {
            self.problem(
                entry.key_pos,
                path,
                r#"missing `command`: a shell line, e.g. command = "npm run dev", or a program and its arguments, e.g. command = ["cargo", "watch", "-x", "run"]"#,
            );
            return None;
        };
        let command = self.command(command, &key)?;
        Some(RawProcess {
            name: entry.key.clone(),
            command,
            cwd,
            env,
            policy,
            autostart: autostart.unwrap_or(Some(true))?,
            depends_on: depends_on.unwrap_or_default(),
            ready: ready.unwrap_or(None),
            pty: pty.unwrap_or(Some(false))?,
            output_ring: output_ring.unwrap_or(Some(DEFAULT_OUTPUT_RING))?,
        })
    }

    /// A process's `command`: a shell line or a non-empty array of words.
    fn command(&mut self, node: &Node, key: &str) -> Option<RawCommand> {
        match &node.value {
            Value::Array(items) if items.is_empty() => {
                self.problem(
                    node.pos,
                    key,
                    r#"is an empty array; write the program and its arguments, e.g. ["cargo", "watch", "-x", "run"], or a shell line, e.g. "npm run dev""#,
                );
                None
            }
            Value::Array(items) => {
                let words = self.texts(node, key);
                (words.len() == items.len()).then_some(RawCommand::Argv(words))
            }
            Value::String(_) => self.text(node, key).map(RawCommand::Shell),
            _ => {
                self.wrong_type(
                    node,
                    key,
                    "a shell line (a string) or a program and its arguments (an array of strings)",
                );
                None
            }
        }
    }

    /// `depends_on = ["db", "api"]`: names, checked against the config later.
    fn depends_on(&mut self, node: &Node, key: &str) -> Vec<Dep> {
        let Value::Array(items) = &node.value else {
            self.wrong_type(
                node,
                key,
                r#"an array of process or server names like ["db"]"#,
            );
            return Vec::new();
        };
        let mut deps: Vec<Dep> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            let Some(name) = self.string(item, &item_key) else {
                continue;
            };
            if deps.iter().any(|d| d.name == name) {
                self.problem(
                    item.pos,
                    &item_key,
                    format!("{name:?} is listed twice; remove one"),
                );
                continue;
            }
            deps.push(Dep {
                name,
                pos: item.pos,
                key: item_key,
            });
        }
        deps
    }

    /// `ready = { log = "REGEX" }`, `{ tcp = "HOST:PORT" }`, `{ port = N }` or
    /// `{ http = "URL" }`, each with an optional `timeout`.
    fn ready(&mut self, node: &Node, key: &str) -> Option<Readiness> {
        let entries = self.entries(node, key)?;
        self.check_keys(entries, key, READY_KEYS);
        let timeout = match node.get("timeout") {
            Some(e) => self.duration(&e.node, &join(key, "timeout"), false),
            None => Some(DEFAULT_READY_TIMEOUT),
        };
        let mut given: Vec<&Entry> = entries
            .iter()
            .filter(|e| READY_CHECKS.contains(&e.key.as_str()))
            .collect();
        // In the order written.
        given.sort_by_key(|e| (e.key_pos.line, e.key_pos.column));
        let entry = match given.as_slice() {
            [one] => *one,
            [] => {
                self.problem(
                    node.pos,
                    key,
                    r#"names no check; write one of log = "REGEX" (a line of output matches), tcp = "127.0.0.1:5173" or port = 5173 (a TCP connection succeeds), http = "http://127.0.0.1:5173/health" (a GET answers 2xx)"#,
                );
                return None;
            }
            [first, second, ..] => {
                let names: Vec<String> = given.iter().map(|e| format!("`{}`", e.key)).collect();
                let (last, rest) = names.split_last().expect("two or more");
                self.problem(
                    second.key_pos,
                    key,
                    format!(
                        "has both {} and {last}; a readiness check is exactly one of `log`, \
                         `tcp`, `port` and `http`; keep one (e.g. only `{}`)",
                        rest.join(", "),
                        first.key
                    ),
                );
                return None;
            }
        };
        let check_key = join(key, &entry.key);
        let n = &entry.node;
        let check = match entry.key.as_str() {
            "log" => self.regex(n, &check_key).map(ReadyCheck::Log),
            "tcp" => self.host_port(n, &check_key).map(ReadyCheck::Tcp),
            "port" => self
                .port(n, &check_key)
                .map(|p| ReadyCheck::Tcp(format!("127.0.0.1:{p}"))),
            _ => self.http_url(n, &check_key).map(ReadyCheck::Http),
        };
        Some(Readiness {
            check: check?,
            timeout: timeout?,
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
        let field = |key: &str| node.get(key).map(|e| (&e.node, join(path, key)));
        let preserve_host = field("preserve_host").map(|(n, k)| self.bool(n, &k));
        let inject = field("inject").map(|(n, k)| self.bool(n, &k));
        let traffic_ring = field("traffic_ring").map(|(n, k)| {
            self.count(n, &k, "it keeps the last N requests; 1000 is the default")
                .map(|n| n.get())
        });
        let allowed_hosts = field("allowed_hosts").map(|(n, k)| self.host_names(n, &k));
        let target = self.text(&target.node, &join(path, "target"))?;
        Some(RawProxy {
            name: entry.key.clone(),
            target,
            listen: listen?,
            preserve_host: preserve_host.unwrap_or(Some(false))?,
            inject: inject.unwrap_or(Some(true))?,
            traffic_ring: traffic_ring.unwrap_or(Some(DEFAULT_TRAFFIC_RING))?,
            allowed_hosts: allowed_hosts.unwrap_or_default(),
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
            profiles: Default::default(),
            alerts: AlertSettings::default(),
            error_noise: Vec::new(),
            access_keys: Default::default(),
        }
    }
}
