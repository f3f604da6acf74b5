//! `corral init`: a commented starter `corral.toml`, importing `.mcp.json` when present.
//!
//! In a directory below an existing project (a `corral.toml`, or a `.mcp.json` that
//! discovery would pick, in a parent), a new `corral.toml` would silently shadow that
//! project's config for every command run here: `init` refuses unless `--force`d, or
//! told where to write with `-c FILE`.

use crate::{CmdResult, Failure, project};
use std::path::Path;

pub fn run(config: Option<&Path>, force: bool) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    let target = match config {
        Some(path) => cwd.join(path),
        None => cwd.join(corral_config::CONFIG_FILE),
    };
    if target.exists() && !force {
        return Err(Failure::Op(format!(
            "{} already exists; edit it, or pass --force to overwrite it",
            target.display()
        )));
    }
    if config.is_none() && !force {
        // The config commands run here would use today (ignoring $CORRAL_CONFIG, which
        // names no directory).
        if let Ok(found) = corral_config::discover_with(&cwd, None, None)
            && found.parent() != Some(cwd.as_path())
        {
            return Err(Failure::Op(format!(
                "{} is the config of this directory already (corral commands here use it); \
                 a corral.toml here would shadow it. Edit that file, or pass --force to make \
                 this directory a project of its own, or write the new config elsewhere with \
                 `corral -c PATH init`",
                found.display()
            )));
        }
    }
    let dir = target.parent().unwrap_or(&cwd);
    let mcp_path = dir.join(corral_config::MCP_JSON);
    let mcp_text = std::fs::read_to_string(&mcp_path).ok();
    let imported = mcp_text.as_deref().map(|t| (mcp_path.as_path(), t));
    let template = corral_config::init_template(imported).map_err(project::config_failure)?;
    std::fs::write(&target, &template.text)
        .map_err(|e| Failure::Op(format!("cannot write {}: {e}", target.display())))?;
    match imported {
        Some(_) => println!(
            "wrote {} (servers imported from {})",
            target.display(),
            mcp_path.display()
        ),
        None => println!("wrote {}", target.display()),
    }
    for note in &template.skipped {
        println!("not imported: {note}");
    }
    println!("next: `corral check`, then `corral tools`");
    Ok(())
}
