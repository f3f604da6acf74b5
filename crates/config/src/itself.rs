//! Recognising Corral itself among a config's servers.
//!
//! The README tells users to add `corral mcp` to their `.mcp.json`, and `corral init`
//! imports `.mcp.json`. Without this check the daemon would then run `corral mcp` as one
//! of its own servers: a bridge to the very daemon that runs it, which starts another
//! session, lists its tools again, and so on (it spun a core and grew past 800 MB in
//! 20 s). A server is Corral itself when
//!
//! * its command resolves (against its `cwd` and `PATH`, as the supervisor would) to
//!   the running executable, compared as canonical paths; or
//! * its command is named `corral` and its subcommand (the first argument that is not
//!   a global option or an option's value) is `mcp`: `corral mcp`,
//!   `corral -c x mcp`, `/usr/local/bin/corral --config=x mcp --standalone`.
//!
//! What happens then depends on the dialect: `corral.toml` is Corral's own file, so such
//! a server is a problem (`corral check` reports it, nothing starts); an `.mcp.json` /
//! VS Code file is the agent's file, where a `corral mcp` entry is exactly what the
//! README asks for, so the entry is skipped with a note ([`Config::notes`]) and the
//! other servers run. `corral init` leaves it out of the generated `corral.toml`, with a
//! comment saying so.
//!
//! [`Config::notes`]: crate::Config::notes

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Whether `command args` (run in `cwd` with `env` merged over the environment that
/// `lookup` reads) starts Corral itself. `self_exe` is the running executable, when
/// known (`std::env::current_exe`).
pub fn runs_corral(
    command: &str,
    args: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    lookup: &dyn Fn(&str) -> Option<String>,
    self_exe: Option<&Path>,
) -> bool {
    if named_corral_mcp(command, args) {
        return true;
    }
    let Some(me) = self_exe.and_then(|p| p.canonicalize().ok()) else {
        return false;
    };
    let path = env.get("PATH").cloned().or_else(|| lookup("PATH"));
    find_program(command, cwd, path.as_deref())
        .and_then(|p| p.canonicalize().ok())
        .is_some_and(|p| p == me)
}

/// A command named `corral` whose subcommand is `mcp`.
pub fn named_corral_mcp(command: &str, args: &[String]) -> bool {
    let named = Path::new(command)
        .file_name()
        .is_some_and(|n| n == "corral");
    named && subcommand(args) == Some("mcp")
}

/// The first argument that is neither a global option nor the value of `-c/--config`.
fn subcommand(args: &[String]) -> Option<&str> {
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-c" | "--config" => {
                args.next();
            }
            s if s.starts_with('-') => {}
            s => return Some(s),
        }
    }
    None
}

/// Where `command` would be found: relative to `cwd` when it has a `/`, else in `path`.
fn find_program(command: &str, cwd: &Path, path: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        let p = cwd.join(command);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(path?)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                cwd.join(command)
            } else {
                dir.join(command)
            }
        })
        .find(|p| p.is_file())
}

/// The note or problem text for a server that is Corral itself.
pub(crate) fn message(name: &str, command: &str, args: &[String]) -> String {
    let line = std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "server '{name}' runs Corral itself (`{line}`): the daemon would start a bridge to \
         itself and recurse; Corral is what agents connect to, not one of its servers"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recognises_corral_mcp_by_name_with_global_options() {
        for args in [
            &["mcp"][..],
            &["-c", "x.toml", "mcp"],
            &["--config", "mcp", "mcp", "--standalone"],
            &["--config=x", "mcp"],
        ] {
            assert!(named_corral_mcp("corral", &strings(args)), "{args:?}");
            assert!(
                named_corral_mcp("/usr/local/bin/corral", &strings(args)),
                "{args:?}"
            );
        }
        assert!(!named_corral_mcp(
            "corral",
            &strings(&["-c", "mcp", "tools"])
        ));
        assert!(!named_corral_mcp("corral", &strings(&["tools"])));
        assert!(!named_corral_mcp("corral-fixture", &strings(&["mcp"])));
        assert!(!named_corral_mcp("uvx", &strings(&["corral", "mcp"])));
    }

    #[test]
    fn recognises_the_running_executable_by_path() {
        let me = std::env::current_exe().unwrap();
        let dir = me.parent().unwrap();
        let name = me.file_name().unwrap().to_str().unwrap();
        let none = |_: &str| None;
        let env = BTreeMap::from([("PATH".to_owned(), dir.display().to_string())]);
        let no_env = BTreeMap::new();
        // Found in PATH, or given as a path (absolute, or relative to cwd).
        assert!(runs_corral(name, &[], dir, &env, &none, Some(&me)));
        assert!(runs_corral(
            &me.display().to_string(),
            &[],
            Path::new("/"),
            &no_env,
            &none,
            Some(&me)
        ));
        assert!(runs_corral(
            &format!("./{name}"),
            &[],
            dir,
            &no_env,
            &none,
            Some(&me)
        ));
        assert!(!runs_corral("sh", &[], dir, &no_env, &none, Some(&me)));
        assert!(!runs_corral(
            name,
            &[],
            Path::new("/"),
            &no_env,
            &none,
            None
        ));
    }
}
