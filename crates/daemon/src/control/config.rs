//! `reload` (and SIGHUP): apply a changed config by diff.

use super::State;
use crate::protocol::Reply;
use corral_config::Config;
use corral_events::{Event, Kind, Source};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Re-reads the config and applies the difference: servers whose definition changed are
/// restarted, removed ones stopped, new ones started, the rest left alone; agents get
/// `list_changed`. Dev processes alike ([`ProcessPlan`]); ad-hoc ones (`corral run`) are
/// left alone unless the config now defines a process of their name. Dev proxies alike
/// ([`super::proxies::reload`]). A config with problems changes nothing. Settings that
/// need a restart of the daemon (`gateway.*`) are reported, not applied.
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
    // The file may have changed under the daemon: it passes the same gate as at start.
    let (new, access) = crate::lifecycle::gate(&new, state.allow_widened_access);
    for note in &access {
        state.bus.emit(crate::lifecycle::access_event(note));
    }
    let old = state.config.read().unwrap().clone();
    let mut guard = state.supervisor.lock().await;
    let Some(sup) = guard.as_mut() else {
        return Reply::err("the daemon is shutting down");
    };
    let (mut added, mut removed, mut restarted, mut unchanged) = (vec![], vec![], vec![], vec![]);
    let mut warnings: Vec<String> = access.into_iter().map(|n| n.message).collect();
    // Processes first: stop the ones removed or changed, before the servers they may
    // use change; they start again once the servers are in place.
    let changed_servers: BTreeSet<&str> = old
        .servers
        .iter()
        .filter(|(name, cfg)| new.servers.get(*name) != Some(cfg))
        .map(|(name, _)| name.as_str())
        .collect();
    let plan = ProcessPlan::of(&old, &new, &changed_servers);
    for name in plan.removed.iter().chain(&plan.restarted) {
        sup.processes().remove(name).await;
    }
    for name in &plan.added {
        // An ad-hoc process of that name: the config's process takes the name.
        if sup.processes().remove(name).await {
            warnings.push(format!(
                "the ad-hoc process '{name}' was stopped: the config now defines a process of that name"
            ));
        }
    }
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
    for cfg in new.start_order() {
        let name = cfg.name.as_str();
        if (plan.added.contains(name) || plan.restarted.contains(name))
            && let Err(e) = sup.add_process(cfg.clone())
        {
            warnings.push(format!("process '{name}' not started: {e}"));
        }
    }
    let servers = sup.handles();
    drop(guard);
    state.hub.set_servers(servers);
    if old.profiles != new.profiles {
        state.hub.set_profiles(new.profiles.clone());
    }
    state.hub.set_error_noise(new.error_noise.clone());
    let (p_added, p_removed, p_restarted, p_warnings) =
        super::proxies::reload(&state.proxies, &old, &new).await;
    warnings.extend(p_warnings);
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
        "processes": {
            "added": plan.added,
            "removed": plan.removed,
            "restarted": plan.restarted,
            "unchanged": plan.unchanged,
        },
        "proxies": {
            "added": p_added,
            "removed": p_removed,
            "restarted": p_restarted,
        },
    });
    let mut ev = Event::new(Kind::DaemonReloaded, Source::Corral);
    if let Value::Object(m) = &data {
        ev.data.extend(m.clone());
    }
    state.bus.emit(ev);
    Reply::ok(data)
}

/// What a reload does to the config's dev processes.
#[derive(Debug, Default, PartialEq)]
struct ProcessPlan {
    /// New in the config.
    added: BTreeSet<String>,
    /// Gone from the config.
    removed: BTreeSet<String>,
    /// Changed, or depending (transitively) on a process or server that restarts: a
    /// dependency is watched from the process's start, so a replaced one is only seen
    /// by a process started after it.
    restarted: BTreeSet<String>,
    unchanged: BTreeSet<String>,
}

impl ProcessPlan {
    fn of(old: &Config, new: &Config, changed_servers: &BTreeSet<&str>) -> ProcessPlan {
        let mut plan = ProcessPlan::default();
        for name in old.processes.keys() {
            if !new.processes.contains_key(name) {
                plan.removed.insert(name.clone());
            }
        }
        for (name, cfg) in &new.processes {
            match old.processes.get(name) {
                None => {
                    plan.added.insert(name.clone());
                }
                Some(o) if o != cfg => {
                    plan.restarted.insert(name.clone());
                }
                Some(_) => {}
            }
        }
        loop {
            let more: Vec<String> = new
                .processes
                .values()
                .filter(|p| old.processes.contains_key(&p.name))
                .filter(|p| !plan.restarted.contains(&p.name))
                .filter(|p| {
                    p.depends_on.iter().any(|d| {
                        plan.restarted.contains(d)
                            || plan.added.contains(d)
                            || changed_servers.contains(d.as_str())
                    })
                })
                .map(|p| p.name.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            plan.restarted.extend(more);
        }
        plan.unchanged = new
            .processes
            .keys()
            .filter(|n| !plan.added.contains(*n) && !plan.restarted.contains(*n))
            .cloned()
            .collect();
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        corral_config::load_str(std::path::Path::new("/p/corral.toml"), text, &|_: &str| {
            None
        })
        .unwrap()
    }

    #[test]
    fn a_changed_process_restarts_with_what_depends_on_it() {
        let old = config(
            r#"
[servers.db]
command = "db"
[processes.api]
command = "api"
depends_on = ["db"]
[processes.web]
command = "web"
depends_on = ["api"]
[processes.docs]
command = "docs"
[processes.gone]
command = "gone"
"#,
        );
        let new = config(
            r#"
[servers.db]
command = "db"
[processes.api]
command = "api --new"
depends_on = ["db"]
[processes.web]
command = "web"
depends_on = ["api"]
[processes.docs]
command = "docs"
[processes.fresh]
command = "fresh"
"#,
        );
        let plan = ProcessPlan::of(&old, &new, &BTreeSet::new());
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(plan.added, set(&["fresh"]));
        assert_eq!(plan.removed, set(&["gone"]));
        assert_eq!(plan.restarted, set(&["api", "web"]));
        assert_eq!(plan.unchanged, set(&["docs"]));
        // A restarted server restarts what depends on it.
        let plan = ProcessPlan::of(&old, &old, &BTreeSet::from(["db"]));
        assert_eq!(plan.restarted, set(&["api", "web"]));
    }
}
