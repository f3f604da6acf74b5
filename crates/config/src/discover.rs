//! Finding the config file, in the order the CLI contract gives: `--config`, then
//! `$CORRAL_CONFIG`, then `corral.toml` in the working directory or any parent, then
//! `.mcp.json` likewise.

use std::path::{Path, PathBuf};

use crate::{CONFIG_ENV, CONFIG_FILE, ConfigError, MCP_JSON};

/// The config file to use, absolute. Reads `$CORRAL_CONFIG` from the process
/// environment; see [`discover_with`].
pub fn discover(cwd: &Path, explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
    let env_config = std::env::var_os(CONFIG_ENV).map(PathBuf::from);
    discover_with(cwd, explicit, env_config)
}

/// [`discover`] with the value of `$CORRAL_CONFIG` passed in, for tests.
///
/// An explicit or environment path is returned without checking that it exists, so
/// that loading it reports the real reason it cannot be read. An empty
/// `$CORRAL_CONFIG` counts as unset. A `corral.toml` anywhere above wins over a nearer
/// `.mcp.json`: the `.mcp.json` may well be the one `corral init` imported.
pub fn discover_with(
    cwd: &Path,
    explicit: Option<&Path>,
    env_config: Option<PathBuf>,
) -> Result<PathBuf, ConfigError> {
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let chosen = explicit
        .map(Path::to_path_buf)
        .or(env_config.filter(|p| !p.as_os_str().is_empty()));
    if let Some(path) = chosen {
        return Ok(cwd.join(path));
    }
    let mut searched = Vec::new();
    for name in [CONFIG_FILE, MCP_JSON] {
        for dir in cwd.ancestors() {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
            searched.push(candidate);
        }
    }
    Err(ConfigError::NotFound { searched })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("corral-config-test-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn explicit_wins_over_env_and_is_made_absolute() {
        let tmp = TempDir::new();
        let found = discover_with(&tmp.0, Some(Path::new("x.toml")), Some("y.toml".into()));
        assert_eq!(found.unwrap(), tmp.0.join("x.toml"));
        let found = discover_with(&tmp.0, None, Some("/etc/y.toml".into()));
        assert_eq!(found.unwrap(), Path::new("/etc/y.toml"));
    }

    #[test]
    fn searches_upward_corral_toml_before_mcp_json() {
        let tmp = TempDir::new();
        let deep = tmp.0.join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        fs::write(tmp.0.join("a/b/.mcp.json"), "{}").unwrap();
        assert_eq!(
            discover_with(&deep, None, Some(PathBuf::new())).unwrap(),
            tmp.0.join("a/b/.mcp.json")
        );
        fs::write(tmp.0.join("a/corral.toml"), "").unwrap();
        assert_eq!(
            discover_with(&deep, None, None).unwrap(),
            tmp.0.join("a/corral.toml")
        );
    }

    #[test]
    fn not_found_lists_what_was_searched() {
        let tmp = TempDir::new();
        // Only meaningful if no ancestor of the temp dir has a config of its own.
        if tmp
            .0
            .ancestors()
            .skip(1)
            .any(|d| d.join(CONFIG_FILE).is_file() || d.join(MCP_JSON).is_file())
        {
            return;
        }
        let err = discover_with(&tmp.0, None, None).unwrap_err();
        let ConfigError::NotFound { searched } = &err else {
            panic!("{err}");
        };
        assert_eq!(searched[0], tmp.0.join(CONFIG_FILE));
        assert!(searched.contains(&tmp.0.join(MCP_JSON)));
        assert!(err.to_string().contains("corral init"));
    }
}
