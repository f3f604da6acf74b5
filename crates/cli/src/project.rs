//! Finding and loading the project's config, and running its servers in-process.

use crate::Failure;
use corral_config::{Config, ConfigError, ServerConfig};
use corral_events::EventBus;
use corral_supervisor::alerts::Alerts;
use corral_supervisor::{Console, Supervisor, SupervisorOptions};
use std::path::Path;

/// Finds and loads the config; every problem maps to exit code 2.
pub fn load(explicit: Option<&Path>) -> Result<Config, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    let path = corral_config::discover(&cwd, explicit).map_err(config_failure)?;
    let config = corral_config::load(&path).map_err(config_failure)?;
    for note in &config.notes {
        eprintln!("corral: note: {}: {note}", config.path.display());
    }
    Ok(config)
}

/// `config` as this command may run it (outside the daemon, e.g. a standalone proxy):
/// through the trust gate ([`corral_config::trust`]) with the user's opt-in from the
/// environment and the user config; what the gate says goes to stderr.
pub fn gated(config: &Config) -> Config {
    let trust = corral_config::trust::Trust::resolve(false, &|name| std::env::var(name).ok());
    let (config, notices) = corral_config::trust::gate(config, &trust);
    for n in &notices {
        eprintln!("corral: warning: {n}");
    }
    if notices.is_empty()
        && let Some(problem) = &trust.problem
    {
        eprintln!("corral: warning: your user config is not used: {problem}");
    }
    config
}

/// A config error as a usage failure (exit 2).
pub fn config_failure(e: ConfigError) -> Failure {
    Failure::Usage(e.to_string())
}

/// The named servers of `config`, or all of them; an unknown name is a usage error that
/// lists the known ones.
pub fn select(config: &Config, name: Option<&str>) -> Result<Vec<ServerConfig>, Failure> {
    match name {
        None => Ok(config.servers.values().cloned().collect()),
        Some(n) => config.server(n).cloned().map(|s| vec![s]).ok_or_else(|| {
            let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
            Failure::Usage(format!(
                "no server named '{n}' in {}; configured servers: {}",
                config.path.display(),
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            ))
        }),
    }
}

/// The profile called `name` of `config` (`None`: no profile asked); an unknown name is
/// a usage error naming the configured ones and the likeliest.
pub fn check_profile<'c>(
    config: &'c Config,
    name: Option<&str>,
) -> Result<Option<&'c corral_config::Profile>, Failure> {
    let Some(name) = name else {
        return Ok(None);
    };
    if let Some(p) = config.profiles.get(name) {
        return Ok(Some(p));
    }
    let known: Vec<&str> = config.profiles.keys().map(String::as_str).collect();
    let near = corral_config::closest(name, &known)
        .map(|n| format!("did you mean '{n}'? "))
        .unwrap_or_default();
    Err(Failure::Usage(format!(
        "no profile '{name}' in {}; {near}profiles: {} (a profile is a [profiles.NAME] \
         table: the servers and tools an agent of it sees)",
        config.path.display(),
        if known.is_empty() {
            "(none)".to_owned()
        } else {
            known.join(", ")
        }
    )))
}

/// Checks that `name` is a server or a dev process of `config` (names are unique across
/// the two: the config refuses a process named like a server); an unknown name is a
/// usage error listing both kinds.
pub fn check_unit(config: &Config, name: &str) -> Result<(), Failure> {
    if config.servers.contains_key(name)
        || config.processes.contains_key(name)
        || config.proxies.contains_key(name)
    {
        return Ok(());
    }
    let list = |names: Vec<&str>| {
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    };
    Err(Failure::Usage(format!(
        "no server, process or proxy named '{name}' in {}; configured servers: {}; \
         processes: {}; proxies: {}",
        config.path.display(),
        list(config.servers.keys().map(String::as_str).collect()),
        list(config.processes.keys().map(String::as_str).collect()),
        list(config.proxies.keys().map(String::as_str).collect()),
    )))
}

/// Servers (and dev processes) running in this process for the length of one command.
pub struct Standalone {
    pub supervisor: Supervisor,
}

impl Standalone {
    /// Starts `servers` eagerly, logging under the project's `.corral/logs`; with a
    /// `console`, their stderr is shown live.
    pub fn start(
        config: &Config,
        servers: Vec<ServerConfig>,
        bus: EventBus,
        console: Option<Console>,
    ) -> Standalone {
        Self::start_with(config, servers, bus, console, |_| {})
    }

    /// Like [`Standalone::start`], with the servers' requests to the client (sampling,
    /// elicitation) delivered to `requests`.
    pub fn start_with_requests(
        config: &Config,
        servers: Vec<ServerConfig>,
        bus: EventBus,
        console: Option<Console>,
        requests: tokio::sync::mpsc::UnboundedSender<corral_supervisor::IncomingRequest>,
        hook: corral_supervisor::NotificationHook,
    ) -> Standalone {
        Self::start_with(config, servers, bus, console, |opts| {
            opts.requests = Some(requests);
            opts.on_notification = Some(hook);
        })
    }

    fn start_with(
        config: &Config,
        servers: Vec<ServerConfig>,
        bus: EventBus,
        console: Option<Console>,
        more: impl FnOnce(&mut SupervisorOptions),
    ) -> Standalone {
        // Private, as the daemon makes it: the logs are created inside (0700 / 0600).
        let _ = corral_supervisor::stderr::private_dir_all(&config.state_dir);
        let mut opts = SupervisorOptions::new(bus, config.state_dir.join("logs"));
        opts.console = console;
        let exe = std::env::current_exe().ok();
        opts.remote_program = exe.clone();
        opts.project_root = Some(config.root.clone());
        for problem in opts.contain(exe.as_deref()) {
            eprintln!("corral: warning: {problem}");
        }
        // Alerts as the daemon has them: a wrong `[alerts]` costs the settings, not the
        // alerts (`corral check` names the problem).
        let alerts = Alerts::new(&config.alerts, opts.bus.clone()).unwrap_or_else(|e| {
            eprintln!("corral: warning: [alerts] is ignored: {e}");
            Alerts::new(&Default::default(), opts.bus.clone())
                .expect("the default alert rules compile")
        });
        opts.alerts = Some(alerts);
        more(&mut opts);
        Standalone {
            supervisor: Supervisor::start(servers, &opts),
        }
    }

    /// Starts the config's dev processes in dependency order (each once what it depends
    /// on is ready), as the daemon does; what cannot start is a warning.
    pub fn start_processes(&mut self, config: &Config) {
        if let Err(e) = self.supervisor.start_processes(config.start_order()) {
            eprintln!("corral: warning: {e}");
        }
    }

    /// Stops every process and server gracefully.
    pub async fn stop(self) {
        let deadline = self.supervisor.shutdown_deadline();
        self.supervisor.shutdown(deadline).await;
    }
}

/// Resolves on Ctrl-C or SIGTERM, or when stdout turned out closed (nobody reads what
/// a command would go on printing).
pub async fn interrupted() {
    tokio::select! {
        _ = signalled() => {}
        _ = crate::stdout::closed() => {}
    }
}

/// Resolves on Ctrl-C or SIGTERM (what stops a daemon: not a closed stdout).
pub async fn signalled() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// The daemon files of this project.
pub fn paths(config: &Config) -> corral_daemon::Paths {
    corral_daemon::Paths::new(&config.path, &config.state_dir)
}

/// A daemon control request; `NotRunning` and friends become exit-1 failures, a refusal
/// of a name (unknown, or taken) an exit-2 one.
pub async fn daemon_request(
    config: &Config,
    req: &corral_daemon::Request,
) -> Result<serde_json::Value, Failure> {
    let reply = corral_daemon::client::request(&paths(config), req)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    if reply.ok {
        return Ok(reply.data);
    }
    let usage = reply.is_usage();
    let msg = reply.error.unwrap_or_else(|| "the daemon refused".into());
    Err(if usage {
        Failure::Usage(msg)
    } else {
        Failure::Op(msg)
    })
}

/// A daemon reply's data read as one of the typed rows (`corral_events::rows`): the
/// daemon writes the same type, so this fails only against a daemon that is not ours.
pub fn reply_as<T: serde::de::DeserializeOwned>(data: serde_json::Value) -> Result<T, Failure> {
    serde_json::from_value(data)
        .map_err(|e| Failure::Op(format!("cannot read the daemon's reply: {e}")))
}

/// Whether a daemon answers on this project's socket.
pub async fn daemon_running(config: &Config) -> bool {
    corral_daemon::client::connect(&paths(config)).await.is_ok()
}
