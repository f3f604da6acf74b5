//! `corral proxy NAME …`: a dev proxy in the daemon (`proxy_start`, `proxy_stop`,
//! `proxy_log` requests) or, with `--standalone`, in the foreground of this command.

use crate::project;
use crate::{CmdResult, Failure, output};
use corral_daemon::Request;
use corral_events::rows::ProxyRow;
use corral_events::{EventBus, Kind};
use corral_proxy::{Proxy, ProxySpec};
use serde_json::Value;
use std::path::Path;
use tokio::sync::broadcast::error::RecvError;

/// What `corral proxy` was asked to do.
pub enum Action {
    Start,
    Stop,
    Log { errors: bool, lines: usize },
    Standalone,
}

/// The proxy the command names.
pub struct Wanted {
    pub name: String,
    pub target: Option<String>,
    pub listen: Option<String>,
    /// False with `--no-inject`.
    pub inject: bool,
}

pub async fn run(config: Option<&Path>, action: Action, wanted: Wanted, json: bool) -> CmdResult {
    if let Action::Standalone = action {
        return standalone(config, wanted).await;
    }
    let cfg = project::load(config)?;
    let name = wanted.name.clone();
    let req = match action {
        Action::Start => Request::ProxyStart {
            name: wanted.name,
            target: wanted.target,
            listen: wanted.listen,
            // Only an explicit `--no-inject` overrides the config's `inject`.
            inject: (!wanted.inject).then_some(false),
        },
        Action::Stop => Request::ProxyStop { name: wanted.name },
        Action::Log { errors, lines } => Request::ProxyLog {
            name: wanted.name,
            limit: Some(lines),
            errors,
        },
        Action::Standalone => unreachable!("handled above"),
    };
    let data = match project::daemon_request(&cfg, &req).await {
        Ok(d) => d,
        Err(Failure::Op(msg)) if !project::daemon_running(&cfg).await => {
            return Err(Failure::Op(format!(
                "{msg}; `corral up -d` starts the daemon, or `corral proxy {name} --target URL \
                 --standalone` runs a proxy here"
            )));
        }
        Err(e) => return Err(e),
    };
    if json {
        println!("{data}");
        return Ok(());
    }
    match action {
        Action::Start => {
            let row: ProxyRow = project::reply_as(data)?;
            println!("{}: {} → {}", row.name, row.url, row.target);
        }
        Action::Stop => {
            let row: ProxyRow = project::reply_as(data)?;
            println!("{}: stopped ({} no longer answers)", row.name, row.url);
        }
        Action::Log { errors, .. } => print_log(data, errors)?,
        Action::Standalone => unreachable!("handled above"),
    }
    Ok(())
}

fn print_log(mut data: Value, errors: bool) -> CmdResult {
    let row: ProxyRow = project::reply_as(data["proxy"].take())?;
    let browser: Vec<corral_proxy::browser::BrowserEntry> =
        project::reply_as(data["browser"].take())?;
    let traffic: Vec<corral_proxy::traffic::TrafficEntry> =
        project::reply_as(data["traffic"].take())?;
    let text = corral_gateway::tools::proxies::render_log(&row, &browser, &traffic, errors);
    let style = output::Style::stdout();
    print!("{}", style.shown(&text));
    Ok(())
}

/// `--standalone`: the proxy runs here until Ctrl-C / SIGTERM; its URL is the first line
/// on stdout (scripts read it), its errors and the pages' errors go to stderr as they
/// happen. With `--target` no config is needed; without, the config's `[proxies.NAME]`.
async fn standalone(config: Option<&Path>, wanted: Wanted) -> CmdResult {
    let mut spec = match &wanted.target {
        Some(target) => ProxySpec::new(
            &wanted.name,
            target,
            wanted.listen.as_deref().unwrap_or("127.0.0.1:0"),
        ),
        None => {
            let cfg = project::gated(&project::load(config)?);
            let Some(c) = cfg.proxies.get(&wanted.name) else {
                return Err(Failure::Usage(format!(
                    "{} has no [proxies.{}]; give the dev server with --target URL",
                    cfg.path.display(),
                    wanted.name
                )));
            };
            let mut spec = ProxySpec::from(c);
            if let Some(listen) = &wanted.listen {
                spec.listen = listen.clone();
            }
            spec
        }
    };
    if !wanted.inject {
        spec.inject = false;
    }
    let bus = EventBus::default();
    let mut events = bus.subscribe();
    let proxy = Proxy::start(spec, bus)
        .await
        .map_err(|e| Failure::Op(e.to_string()))?;
    println!(
        "corral: proxy '{}' on {} → {}",
        proxy.name(),
        proxy.url(),
        proxy.spec().target
    );
    let style = output::Style::stderr();
    let printer = tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(ev) if ev.is(Kind::ProxyError) || ev.is(Kind::BrowserError) => {
                    eprintln!("{}", output::render_console_event(&ev, style, false));
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    project::interrupted().await;
    proxy.stop().await;
    printer.abort();
    Ok(())
}
