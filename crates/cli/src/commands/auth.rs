//! `corral auth NAME [--logout]`: OAuth for a remote server (`corral_remote::oauth`).

use crate::{CmdResult, Failure, project};
use corral_daemon::protocol::Request;
use corral_remote::oauth::flow;
use std::path::Path;
use std::time::Duration;

pub async fn auth(
    config: Option<&Path>,
    name: &str,
    logout: bool,
    open_browser: bool,
    wait: u64,
) -> CmdResult {
    let cfg = project::load(config)?;
    let Some(server) = cfg.servers.get(name) else {
        project::check_unit(&cfg, name)?;
        return Err(Failure::Usage(format!(
            "'{name}' is a dev process, not a server: only remote (url) servers authorize"
        )));
    };
    let Some(target) = flow::Target::of(&cfg.root, name, server) else {
        return Err(Failure::Usage(format!(
            "server '{name}' is a stdio server: only remote (url) servers use OAuth"
        )));
    };
    let said = if logout {
        flow::logout(&target).await
    } else {
        let opts = flow::Options {
            open_browser,
            timeout: Duration::from_secs(wait),
            paste: true,
            url_to: None,
        };
        flow::login(&target, opts, &mut std::io::stdout()).await
    }
    .map_err(|e| Failure::Op(format!("server '{name}': {e}")))?;
    println!("{said}");
    // A running daemon takes the new credentials (or their absence) at once.
    if project::daemon_running(&cfg).await {
        let req = Request::Restart {
            name: name.to_owned(),
        };
        match project::daemon_request(&cfg, &req).await {
            Ok(row) => println!(
                "server '{name}' reconnected: {}",
                row["state"].as_str().unwrap_or("?")
            ),
            // Without credentials it cannot get ready: what logging out means.
            Err(_) if logout => {
                println!("server '{name}' disconnected: it waits for `corral auth {name}`")
            }
            Err(Failure::Op(e) | Failure::Usage(e)) => {
                eprintln!("corral: the daemon did not reconnect '{name}': {e}")
            }
            Err(Failure::Exit(_)) => {}
        }
    }
    Ok(())
}
