//! The HTTP endpoint's bearer token (`.corral/token`).

use crate::lifecycle::{DaemonError, io, write_private};
use std::path::Path;

/// The project's bearer token: read from `.corral/token`, or created there (0600) on first
/// start.
pub fn load_or_create_token(state_dir: &Path) -> Result<String, DaemonError> {
    let path = state_dir.join("token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_owned();
        if t.len() >= 32 {
            return Ok(t);
        }
    }
    // The state directory is already 0700 (`Paths::prepare`).
    let token = corral_gateway::http::new_token();
    write_private(&path, &format!("{token}\n")).map_err(io("write", &path))?;
    Ok(token)
}
