//! The dev proxy family: their rows in `ps`, `proxy_start` (a configured proxy or an
//! ad-hoc one), `proxy_stop`, and what a reload does to them.

use super::State;
use crate::protocol::{INVALID, NAME_TAKEN, Reply};
use corral_config::Config;
use corral_events::rows::ProxyRow;
use corral_proxy::{Proxies, ProxySpec};

/// Every running proxy's row for `ps`; `None` when there is none (the field is left out).
pub(crate) fn rows(state: &State) -> Option<Vec<ProxyRow>> {
    let list = state.proxies.list();
    (!list.is_empty()).then(|| list.iter().map(|p| p.row()).collect())
}

/// Starts every proxy of `config`; each one that cannot start is a warning (the daemon
/// runs on without it).
pub(crate) async fn start_configured(proxies: &Proxies, config: &Config) -> Vec<String> {
    proxies.set_configured(config.proxies.values().map(ProxySpec::from));
    proxies.start_all_configured().await
}

/// What starting a proxy asks: a configured one by name, or (with `target`) an ad-hoc
/// one.
#[derive(Debug, Default)]
pub(crate) struct StartRequest {
    pub name: String,
    pub target: Option<String>,
    pub listen: Option<String>,
    pub inject: Option<bool>,
}

/// `proxy_start`: answers with the proxy's row once it listens.
pub(crate) async fn start(state: &State, req: StartRequest) -> Reply {
    if let Some(problem) = crate::control::processes::name_problem("proxy", &req.name) {
        return Reply::err_code(INVALID, problem);
    }
    if state.proxies.get(&req.name).is_some() {
        return Reply::err_code(
            NAME_TAKEN,
            format!(
                "proxy '{}' runs already (`corral ps` shows its URL); stop it first with \
                 `corral proxy {} --stop`",
                req.name, req.name
            ),
        );
    }
    let spec = match (&req.target, state.proxies.configured(&req.name)) {
        (Some(target), _) => {
            let mut spec = ProxySpec::new(
                &req.name,
                target,
                req.listen.as_deref().unwrap_or("127.0.0.1:0"),
            );
            spec.inject = req.inject.unwrap_or(true);
            spec
        }
        (None, Some(mut spec)) => {
            if let Some(listen) = &req.listen {
                spec.listen = listen.clone();
            }
            if let Some(inject) = req.inject {
                spec.inject = inject;
            }
            spec
        }
        (None, None) => {
            return Reply::usage(format!(
                "{}; give a target to start one: `corral proxy {} --target http://127.0.0.1:5173`",
                state.proxies.unknown(&req.name),
                req.name
            ));
        }
    };
    match state.proxies.start(spec).await {
        Ok(p) => Reply::ok_of(&p.row()),
        Err(e) => Reply::err(e),
    }
}

/// `restart` of a proxy: a running one is stopped and started again with its settings on
/// the address it had (the browser's tabs keep working); a configured one that is not
/// running is started. `None`: no proxy of that name.
pub(crate) async fn restart(state: &State, name: &str) -> Option<Reply> {
    let Some(p) = state.proxies.get(name) else {
        state.proxies.configured(name)?;
        return Some(
            start(
                state,
                StartRequest {
                    name: name.to_owned(),
                    ..Default::default()
                },
            )
            .await,
        );
    };
    let mut spec = p.spec().clone();
    spec.listen = p.addr().to_string();
    drop(p);
    state.proxies.stop(name).await;
    Some(match state.proxies.start(spec).await {
        Ok(p) => Reply::ok_of(&p.row()),
        Err(e) => Reply::err(e),
    })
}

/// `proxy_stop`: stops a running proxy; answers with the row it had.
pub(crate) async fn stop(state: &State, name: &str) -> Reply {
    let Some(p) = state.proxies.get(name) else {
        return Reply::usage(state.proxies.unknown(name));
    };
    let row = p.row();
    drop(p);
    state.proxies.stop(name).await;
    Reply::ok_of(&row)
}

/// A reload's effect on the configured proxies: removed ones stop, changed ones restart
/// (a new listen address, target or setting), new ones start; ad-hoc proxies are left
/// alone unless the config now defines one of their name. Returns (added, removed,
/// restarted, warnings).
pub(crate) async fn reload(
    proxies: &Proxies,
    old: &Config,
    new: &Config,
) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    let (mut added, mut removed, mut restarted, mut warnings) = (vec![], vec![], vec![], vec![]);
    proxies.set_configured(new.proxies.values().map(ProxySpec::from));
    for (name, cfg) in &old.proxies {
        match new.proxies.get(name) {
            None => {
                proxies.stop(name).await;
                removed.push(name.clone());
            }
            Some(n) if n != cfg => {
                proxies.stop(name).await;
                restarted.push(name.clone());
            }
            Some(_) => {}
        }
    }
    for name in new.proxies.keys() {
        if old.proxies.contains_key(name) && !restarted.contains(name) {
            continue;
        }
        if !old.proxies.contains_key(name) {
            if proxies.stop(name).await {
                warnings.push(format!(
                    "the ad-hoc proxy '{name}' was stopped: the config now defines a proxy of that name"
                ));
            }
            added.push(name.clone());
        }
        if let Err(e) = proxies.start_configured(name).await {
            warnings.push(e);
        }
    }
    (added, removed, restarted, warnings)
}

/// `proxy_log`: the newest `limit` (default 50) requests of the proxy's traffic log
/// (only errors with `errors`), and the newest errors its pages reported.
pub(crate) fn log(state: &State, name: &str, limit: Option<usize>, errors: bool) -> Reply {
    let Some(p) = state.proxies.get(name) else {
        return Reply::usage(state.proxies.unknown(name));
    };
    let limit = limit.unwrap_or(50).clamp(1, 1000);
    let traffic = p.traffic().query(&corral_proxy::traffic::TrafficQuery {
        errors_only: errors,
        limit: Some(limit),
        ..Default::default()
    });
    let browser = p.browser().query(&corral_proxy::browser::BrowserQuery {
        limit: Some(limit),
        ..Default::default()
    });
    Reply::ok(serde_json::json!({
        "proxy": p.row(),
        "traffic": traffic,
        "browser": browser,
    }))
}
