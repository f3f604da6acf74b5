//! Stage two of loading: raw sections → final values.
//!
//! Applies `[defaults]` and built-in defaults, expands `${…}` against the
//! environment, resolves paths against the project root, and checks what can only be
//! checked on expanded values (URL schemes, empty commands). Also picks the secrets
//! to redact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Problem;
use crate::expand;
use crate::model::{
    CrashLoop, ProcessCommand, ProcessConfig, ProxyConfig, RestartPolicy, ServerConfig, Transport,
};
use crate::read::{
    Policy, RawCommand, RawConfig, RawProcess, RawProxy, RawServer, RawTransport, Text,
};

pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);
pub(crate) const DEFAULT_CRASH_LOOP_MAX: u32 = 5;
pub(crate) const DEFAULT_CRASH_LOOP_WINDOW: Duration = Duration::from_secs(60);

/// Everything the raw config resolved to, keyed by name.
pub(crate) struct Resolved {
    pub servers: BTreeMap<String, ServerConfig>,
    pub processes: BTreeMap<String, ProcessConfig>,
    pub proxies: BTreeMap<String, ProxyConfig>,
}

pub(crate) fn resolve(
    raw: &RawConfig,
    env: &dyn Fn(&str) -> Option<String>,
    root: &Path,
) -> (Resolved, Vec<Problem>) {
    let mut resolver = Resolver {
        env,
        root,
        problems: Vec::new(),
    };
    let mut resolved = Resolved {
        servers: BTreeMap::new(),
        processes: BTreeMap::new(),
        proxies: BTreeMap::new(),
    };
    for server in &raw.servers {
        if let Some(config) = resolver.server(server, &raw.defaults) {
            resolved.servers.insert(config.name.clone(), config);
        }
    }
    for process in &raw.processes {
        if let Some(config) = resolver.process(process, &raw.defaults) {
            resolved.processes.insert(config.name.clone(), config);
        }
    }
    for proxy in &raw.proxies {
        if let Some(config) = resolver.proxy(proxy) {
            resolved.proxies.insert(config.name.clone(), config);
        }
    }
    (resolved, resolver.problems)
}

struct Resolver<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    root: &'a Path,
    problems: Vec<Problem>,
}

/// Variable names that suggest the value is a credential.
const SECRET_NAME_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASS",
    "KEY",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Which `env` values are redacted: those whose variable name looks like a credential
/// and those taken from Corral's own environment. Redacting every value would also
/// blank out `LOG_LEVEL=debug` or a path wherever they appear in a log, which makes
/// the logs useless while protecting nothing.
fn env_value_is_secret(name: &str, from_env: bool) -> bool {
    let upper = name.to_ascii_uppercase();
    from_env || SECRET_NAME_MARKERS.iter().any(|m| upper.contains(m))
}

impl Resolver<'_> {
    fn problem(&mut self, text: &Text, message: impl Into<String>) {
        self.problems.push(Problem {
            line: text.pos.line,
            column: text.pos.column,
            key: text.key.clone(),
            message: message.into(),
        });
    }

    fn expand(&mut self, text: &Text) -> Option<expand::Resolved> {
        match expand::resolve(&text.segments, self.env, self.root) {
            Ok(resolved) => Some(resolved),
            Err(messages) => {
                for message in messages {
                    self.problem(text, message);
                }
                None
            }
        }
    }

    fn value(&mut self, text: &Text) -> Option<String> {
        self.expand(text).map(|r| r.value)
    }

    fn non_empty(&mut self, text: &Text, what: &str) -> Option<String> {
        let value = self.value(text)?;
        if value.trim().is_empty() {
            self.problem(text, format!("{what} is empty"));
            return None;
        }
        Some(value)
    }

    /// A directory relative to the project root; the root itself when not given.
    fn dir(&mut self, text: Option<&Text>) -> Option<PathBuf> {
        let Some(text) = text else {
            return Some(self.root.to_path_buf());
        };
        let value = self.non_empty(text, "cwd")?;
        // `join` keeps an absolute path as it is; collecting components drops `.`.
        Some(self.root.join(value).components().collect())
    }

    /// Expanded values and the secrets among them.
    fn env(&mut self, entries: &[(String, Text)]) -> (BTreeMap<String, String>, Vec<String>) {
        let mut env = BTreeMap::new();
        let mut secrets = Vec::new();
        for (name, text) in entries {
            if let Some(r) = self.expand(text) {
                if env_value_is_secret(name, r.from_env) {
                    secrets.push(r.value.clone());
                }
                env.insert(name.clone(), r.value);
            }
        }
        (env, secrets)
    }

    fn url(&mut self, text: &Text, schemes: &[&str], example: &str) -> Option<String> {
        let value = self.value(text)?;
        let scheme_ok = schemes.iter().any(|scheme| {
            value
                .get(..scheme.len())
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case(scheme))
                && value.len() > scheme.len()
        });
        if scheme_ok {
            Some(value)
        } else {
            let schemes = schemes.join(" or ");
            self.problem(
                text,
                format!("expected an {schemes} URL like {example:?}, found {value:?}"),
            );
            None
        }
    }

    fn server(&mut self, raw: &RawServer, defaults: &Policy) -> Option<ServerConfig> {
        let mut secrets = Vec::new();
        let transport = match &raw.transport {
            RawTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let command = self.non_empty(command, "command");
                let args: Vec<Option<String>> = args.iter().map(|a| self.value(a)).collect();
                let (env, env_secrets) = self.env(env);
                secrets.extend(env_secrets);
                let cwd = self.dir(cwd.as_ref());
                Transport::Stdio {
                    command: command?,
                    args: args.into_iter().collect::<Option<_>>()?,
                    env,
                    cwd: cwd?,
                }
            }
            RawTransport::Http {
                url,
                headers,
                transport,
                oauth,
            } => {
                let url = self.url(url, &["http://", "https://"], "http://127.0.0.1:9000/mcp");
                let mut values = BTreeMap::new();
                for (name, text) in headers {
                    if let Some(value) = self.value(text) {
                        // "Bearer abc…": the credential may also show up on its own.
                        if let Some((_, credential)) = value.split_once(' ') {
                            secrets.push(credential.trim().to_owned());
                        }
                        secrets.push(value.clone());
                        values.insert(name.clone(), value);
                    }
                }
                let mut client = crate::model::OAuthClient::default();
                for (key, text) in oauth {
                    let value = self.value(text);
                    match key.as_str() {
                        "client_id" => client.client_id = value,
                        "client_secret" => {
                            secrets.extend(value.clone());
                            client.client_secret = value;
                        }
                        _ => client.scope = value,
                    }
                }
                Transport::Http {
                    url: url?,
                    headers: values,
                    transport: *transport,
                    oauth: client,
                }
            }
        };
        let p = raw.policy.over(defaults);
        Some(ServerConfig {
            name: raw.name.clone(),
            transport,
            startup_timeout: p.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: p.call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT),
            stop_grace: p.stop_grace.unwrap_or(DEFAULT_STOP_GRACE),
            restart: p.restart.unwrap_or(RestartPolicy::OnFailure),
            max_concurrency: p.max_concurrency,
            tools: p.tools.clone().unwrap_or_default(),
            quiet: p.quiet.unwrap_or(false),
            crash_loop: p.crash_loop(),
            secrets,
        })
    }

    fn process(&mut self, raw: &RawProcess, defaults: &Policy) -> Option<ProcessConfig> {
        let command = match &raw.command {
            RawCommand::Shell(line) => {
                let line = self.value(line).and_then(|value| {
                    if value.trim().is_empty() {
                        self.problem(
                            line,
                            r#"is empty; write the shell line to run, e.g. "npm run dev""#,
                        );
                        return None;
                    }
                    Some(value)
                });
                line.map(ProcessCommand::Shell)
            }
            RawCommand::Argv(words) => {
                let values: Vec<Option<String>> = words.iter().map(|w| self.value(w)).collect();
                let argv: Option<Vec<String>> = values.into_iter().collect();
                match argv {
                    Some(argv) if argv[0].trim().is_empty() => {
                        self.problem(
                            &words[0],
                            r#"the program is empty; write its name first, e.g. ["cargo", "watch"]"#,
                        );
                        None
                    }
                    argv => argv.map(ProcessCommand::Argv),
                }
            }
        };
        let cwd = self.dir(raw.cwd.as_ref());
        let (env, secrets) = self.env(&raw.env);
        let p = raw.policy.over(defaults);
        Some(ProcessConfig {
            name: raw.name.clone(),
            command: command?,
            cwd: cwd?,
            env,
            secrets,
            restart: p.restart.unwrap_or(RestartPolicy::OnFailure),
            crash_loop: p.crash_loop(),
            stop_grace: p.stop_grace.unwrap_or(DEFAULT_STOP_GRACE),
            quiet: p.quiet.unwrap_or(false),
            autostart: raw.autostart,
            depends_on: raw.depends_on.iter().map(|d| d.name.clone()).collect(),
            ready: raw.ready.clone(),
            pty: raw.pty,
            output_ring: raw.output_ring,
        })
    }

    fn proxy(&mut self, raw: &RawProxy) -> Option<ProxyConfig> {
        let target = self.url(&raw.target, &["http://"], "http://127.0.0.1:5173")?;
        Some(ProxyConfig {
            name: raw.name.clone(),
            target,
            listen: raw.listen.clone(),
            preserve_host: raw.preserve_host,
            inject: raw.inject,
            traffic_ring: raw.traffic_ring,
            allowed_hosts: raw.allowed_hosts.clone(),
        })
    }
}

impl Policy {
    /// These keys, falling back to `defaults` for each one not set here.
    pub(crate) fn over(&self, defaults: &Policy) -> Policy {
        Policy {
            startup_timeout: self.startup_timeout.or(defaults.startup_timeout),
            call_timeout: self.call_timeout.or(defaults.call_timeout),
            stop_grace: self.stop_grace.or(defaults.stop_grace),
            restart: self.restart.or(defaults.restart),
            max_concurrency: self.max_concurrency.or(defaults.max_concurrency),
            tools: self.tools.clone().or_else(|| defaults.tools.clone()),
            quiet: self.quiet.or(defaults.quiet),
            crash_loop_max: self.crash_loop_max.or(defaults.crash_loop_max),
            crash_loop_window: self.crash_loop_window.or(defaults.crash_loop_window),
        }
    }

    /// The crash-loop breaker, built-in defaults for what is unset.
    pub(crate) fn crash_loop(&self) -> CrashLoop {
        CrashLoop {
            max: self
                .crash_loop_max
                .map_or(DEFAULT_CRASH_LOOP_MAX, |n| n.get()),
            window: self.crash_loop_window.unwrap_or(DEFAULT_CRASH_LOOP_WINDOW),
        }
    }
}
