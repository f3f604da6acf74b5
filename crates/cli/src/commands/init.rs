//! `corral init`: a commented starter `corral.toml`, importing `.mcp.json` when present.

use crate::{CmdResult, Failure, project};

pub fn run(force: bool) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    let target = cwd.join(corral_config::CONFIG_FILE);
    if target.exists() && !force {
        return Err(Failure::Op(format!(
            "{} already exists; edit it, or pass --force to overwrite it",
            target.display()
        )));
    }
    let mcp_path = cwd.join(corral_config::MCP_JSON);
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
