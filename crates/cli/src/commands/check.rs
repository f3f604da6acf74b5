//! `corral check`: load and validate, report every problem at once.

use crate::{CmdResult, project};
use std::path::Path;

pub fn run(config: Option<&Path>, json: bool) -> CmdResult {
    let cfg = project::load(config)?;
    if json {
        let v = serde_json::json!({
            "ok": true,
            "config": cfg.path,
            "servers": cfg.servers.keys().collect::<Vec<_>>(),
            "processes": cfg.processes.keys().collect::<Vec<_>>(),
            "proxies": cfg.proxies.keys().collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        println!(
            "{}: ok ({} servers, {} processes, {} proxies)",
            cfg.path.display(),
            cfg.servers.len(),
            cfg.processes.len(),
            cfg.proxies.len()
        );
    }
    Ok(())
}
