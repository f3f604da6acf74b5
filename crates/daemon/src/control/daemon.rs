//! The daemon itself: `status`, `shutdown`, and `errors` (what is broken, over all of it).

use super::State;
use crate::protocol::Reply;
use corral_events::rows::DaemonStatus;
use serde_json::json;

/// `status`: the daemon's identity and health.
pub(crate) fn status(state: &State) -> Reply {
    Reply::ok_of(&status_of(state))
}

/// `shutdown`: stop every server and exit (the accept loop sees the token); answers with
/// the pid and how many agent sessions end with it.
pub(crate) fn shutdown(state: &State) -> Reply {
    let agents = state.hub.session_count();
    state.shutdown.cancel();
    Reply::ok(json!({ "pid": state.info.pid, "agents": agents }))
}

/// The daemon's row (`status`, and `daemon` in `ps`).
pub(crate) fn status_of(state: &State) -> DaemonStatus {
    DaemonStatus {
        pid: state.info.pid,
        endpoint: state.info.endpoint.clone(),
        config: state.config.read().unwrap().path.clone(),
        socket: state.info.socket.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        agents: state.hub.session_count(),
        http_error: state.info.http_error.clone(),
        warnings: state.info.warnings.clone(),
        http_sessions: state.http.as_ref().map_or(0, |h| h.session_count()),
    }
}

/// `errors`: the `get_errors` report over the daemon's servers, processes and proxies.
pub(crate) async fn errors(state: &State, args: &serde_json::Value) -> Reply {
    match errors_report(state, args, Some("corral errors")).await {
        Ok((report, raw)) => Reply::ok(serde_json::json!({
            "text": report.text(),
            "colored": report.colored(),
            "report": report.json(raw),
        })),
        Err(e) => Reply::err_code(crate::protocol::INVALID, e),
    }
}

/// The `get_errors` report for `args`, and whether it was asked `raw`; each caller
/// renders what it shows. `caller` is who asks, for "resolved since your last call"
/// (none: not counted).
pub(crate) async fn errors_report(
    state: &State,
    args: &serde_json::Value,
    caller: Option<&str>,
) -> Result<(corral_errors::Report, bool), String> {
    let servers = state.servers();
    let (root, noise) = {
        let config = state.config.read().unwrap();
        (config.root.clone(), config.error_noise.clone())
    };
    let src = corral_gateway::tools::errors::Sources {
        servers: &servers,
        root: Some(&root),
        noise: &noise,
        processes: Some(&state.processes),
        proxies: Some(&state.proxies),
        last_call: caller.and_then(|c| state.hub.errors_last_call(c)),
        history: state.hub.history(),
    };
    corral_gateway::tools::errors::answer(&src, args).await
}
