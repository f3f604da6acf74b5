//! `reload` (and SIGHUP): apply a changed config by diff.

use super::State;
use crate::protocol::Reply;
use corral_events::{Event, Kind, Source};
use serde_json::{Value, json};

/// Re-reads the config and applies the difference: servers whose definition changed are
/// restarted, removed ones stopped, new ones started, the rest left alone; agents get
/// `list_changed`. A config with problems changes nothing. Settings that need a restart
/// of the daemon (`gateway.*`) are reported, not applied.
pub(crate) async fn reload(state: &State) -> Reply {
    let path = state.config.read().unwrap().path.clone();
    let new = match corral_config::load(&path) {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("config not reloaded, nothing changed:\n{e}");
            state.bus.emit(
                Event::new(Kind::DaemonReloadFailed, Source::Corral).with("reason", msg.clone()),
            );
            return Reply::err(msg);
        }
    };
    let old = state.config.read().unwrap().clone();
    let mut guard = state.supervisor.lock().await;
    let Some(sup) = guard.as_mut() else {
        return Reply::err("the daemon is shutting down");
    };
    let (mut added, mut removed, mut restarted, mut unchanged) = (vec![], vec![], vec![], vec![]);
    for (name, cfg) in &old.servers {
        match new.servers.get(name) {
            None => {
                sup.remove(name).await;
                removed.push(name.clone());
            }
            Some(n) if n != cfg => {
                sup.remove(name).await;
                sup.add(crate::lifecycle::child_config(n, &state.paths.socket));
                restarted.push(name.clone());
            }
            Some(_) => unchanged.push(name.clone()),
        }
    }
    for (name, cfg) in &new.servers {
        if !old.servers.contains_key(name) {
            sup.add(crate::lifecycle::child_config(cfg, &state.paths.socket));
            added.push(name.clone());
        }
    }
    let servers = sup.handles();
    drop(guard);
    state.hub.set_servers(servers);
    let mut warnings = Vec::new();
    if old.gateway != new.gateway {
        warnings.push(
            "[gateway] settings changed: they apply when the daemon restarts (`corral down`, `corral up -d`)"
                .to_owned(),
        );
    }
    *state.config.write().unwrap() = new;
    let data = json!({
        "added": added,
        "removed": removed,
        "restarted": restarted,
        "unchanged": unchanged,
        "warnings": warnings,
    });
    let mut ev = Event::new(Kind::DaemonReloaded, Source::Corral);
    if let Value::Object(m) = &data {
        ev.data.extend(m.clone());
    }
    state.bus.emit(ev);
    Reply::ok(data)
}
