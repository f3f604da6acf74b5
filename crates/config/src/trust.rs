//! Who may widen access to Corral: the user, never the repository.
//!
//! A project's `corral.toml` is untrusted input (it comes with a cloned repository),
//! yet two of its settings decide who can reach Corral's tools, among them
//! `corral__process_start`, which runs shell commands as the user:
//!
//! * `[gateway] auth = "none"`: every local user can call the HTTP endpoint;
//! * a `listen` address beyond loopback (`[gateway] listen`, `[proxies.NAME] listen`;
//!   loopback is 127.0.0.0/8 and ::1): other machines can reach it.
//!
//! These take effect only with an opt-in that lives outside the repository:
//!
//! * the user config ([`user_config_path`]: `$CORRAL_USER_CONFIG`, else
//!   `$XDG_CONFIG_HOME/corral/config.toml`, else `~/.config/corral/config.toml`) lists
//!   the project's directory (or `"*"`) in `[trust] widen_access`. It is read strictly
//!   (an unknown key is an error with its line) and refused when anyone but its owner
//!   (the user, or root) can write it;
//! * or the person starting Corral says so: `corral up --allow-widened-access`, or
//!   `CORRAL_ALLOW_WIDENED_ACCESS=1` in the environment (which is how `corral mcp`'s
//!   auto-started daemon gets it).
//!
//! [`gate`] is the one place the decision is made: it takes a loaded config and the
//! [`Trust`] and returns the config to run with, plus a [`Notice`] for every widening
//! setting: without the opt-in the setting is not applied (auth stays `token`, the
//! address becomes a free loopback port) and the notice says how to opt in; with it,
//! the setting applies and the notice says plainly what is open.

use std::fmt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{ConfigError, Problem};
use crate::model::{Config, DEFAULT_PROXY_LISTEN, HttpAuth, Listen};

/// The environment variable naming the user config file (tests point it at a temp dir).
pub const USER_CONFIG_ENV: &str = "CORRAL_USER_CONFIG";
/// The environment variable that allows every project's config to widen access (`1`).
pub const ALLOW_ENV: &str = "CORRAL_ALLOW_WIDENED_ACCESS";
/// The command-line flag of `corral up` (and `__daemon`) that does the same.
pub const ALLOW_FLAG: &str = "--allow-widened-access";

/// Where the user config is: `$CORRAL_USER_CONFIG`, else
/// `$XDG_CONFIG_HOME/corral/config.toml`, else `$HOME/.config/corral/config.toml`;
/// `None` when none of them is set (empty and relative values count as unset).
pub fn user_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = set(USER_CONFIG_ENV) {
        return Some(p);
    }
    if let Some(dir) = set("XDG_CONFIG_HOME").filter(|d| d.is_absolute()) {
        return Some(dir.join("corral").join("config.toml"));
    }
    set("HOME")
        .filter(|d| d.is_absolute())
        .map(|home| home.join(".config").join("corral").join("config.toml"))
}

/// One entry of `[trust] widen_access`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trusted {
    /// `"*"`: every project.
    All,
    /// A project directory (the directory of its `corral.toml`), absolute.
    Dir(PathBuf),
}

/// The user config: settings of the person, not of any repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserConfig {
    pub path: PathBuf,
    /// `[trust] widen_access`: the projects whose config may widen access.
    pub widen_access: Vec<Trusted>,
}

/// Reads the user config at `path`: `Ok(None)` when there is none, an error when it
/// cannot be read, has problems, or others can write it.
pub fn load_user_config(path: &Path) -> Result<Option<UserConfig>, ConfigError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if let Err(reason) = owner_problem(meta.uid(), meta.permissions().mode(), euid) {
        return Err(ConfigError::Refused {
            path: path.to_owned(),
            reason: format!(
                "{reason}; it decides who can reach Corral, so only you may write it (`chmod go-w {}`)",
                path.display()
            ),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_user_config(path, &text).map(Some)
}

/// Why a user config owned by `uid` with `mode` must not be trusted by the user `euid`:
/// someone else could write it (group/world-writable, or owned by another user; root's
/// files are fine, root can do anything anyway).
pub fn owner_problem(uid: u32, mode: u32, euid: u32) -> Result<(), String> {
    if uid != euid && uid != 0 {
        return Err(format!("it is owned by uid {uid}, not by you (uid {euid})"));
    }
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "its group and every user",
            (true, false) => "its group",
            _ => "every user",
        };
        return Err(format!("{who} can write it (mode {:03o})", mode & 0o777));
    }
    Ok(())
}

/// Parses `text` as the user config at `path`, strictly: an unknown key, a wrong type or
/// a relative directory is a problem with its line and column.
pub fn parse_user_config(path: &Path, text: &str) -> Result<UserConfig, ConfigError> {
    let invalid = |mut problems: Vec<Problem>| {
        problems.sort_by_key(|p| (p.line, p.column));
        ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        }
    };
    let tree = crate::toml_load::parse(text).map_err(|p| invalid(vec![p]))?;
    let (entries, mut problems) = crate::read::read_user(&tree);
    let mut widen_access = Vec::new();
    for (i, (dir, pos)) in entries.into_iter().enumerate() {
        if dir == "*" {
            widen_access.push(Trusted::All);
        } else if Path::new(&dir).is_absolute() {
            widen_access.push(Trusted::Dir(PathBuf::from(dir)));
        } else {
            problems.push(Problem {
                line: pos.line,
                column: pos.column,
                key: format!("trust.widen_access[{i}]"),
                message: format!(
                    "{dir:?} is not an absolute directory; write the project's full path \
                     (the directory of its corral.toml, no `~`), or \"*\" for every project"
                ),
            });
        }
    }
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    Ok(UserConfig {
        path: path.to_owned(),
        widen_access,
    })
}

/// What the user said about widening access: the opt-in of the person starting Corral
/// (flag or environment) and the user config.
#[derive(Debug, Default)]
pub struct Trust {
    /// How the person starting Corral allowed widening for every project
    /// (`--allow-widened-access`, `CORRAL_ALLOW_WIDENED_ACCESS=1`), if they did.
    pub everywhere: Option<String>,
    /// Where the user config is (or would be), for the notices' "how to opt in".
    pub user_config_path: Option<PathBuf>,
    pub user_config: Option<UserConfig>,
    /// Why the user config is not used (unreadable, invalid, writable by others).
    pub problem: Option<ConfigError>,
}

impl Trust {
    /// The trust of the person running this: `flag` is `--allow-widened-access`; `env`
    /// gives `CORRAL_ALLOW_WIDENED_ACCESS` and where the user config is. The user config
    /// is read unless the flag or the environment already allow everything.
    pub fn resolve(flag: bool, env: &dyn Fn(&str) -> Option<String>) -> Trust {
        let user_config_path = user_config_path(env);
        let everywhere = if flag {
            Some(ALLOW_FLAG.to_owned())
        } else if env(ALLOW_ENV).is_some_and(|v| v.trim() == "1") {
            Some(format!("{ALLOW_ENV}=1"))
        } else {
            None
        };
        let mut trust = Trust {
            everywhere,
            user_config_path,
            ..Trust::default()
        };
        if trust.everywhere.is_none()
            && let Some(path) = &trust.user_config_path
        {
            match load_user_config(path) {
                Ok(c) => trust.user_config = c,
                Err(e) => trust.problem = Some(e),
            }
        }
        trust
    }

    /// Why the project at `root` may widen access (how the user said so), or `None`.
    pub fn allows(&self, root: &Path) -> Option<String> {
        if let Some(via) = &self.everywhere {
            return Some(via.clone());
        }
        let user = self.user_config.as_ref()?;
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let root = canonical(root);
        user.widen_access
            .iter()
            .any(|t| match t {
                Trusted::All => true,
                Trusted::Dir(dir) => canonical(dir) == root,
            })
            .then(|| format!("[trust] widen_access in {}", user.path.display()))
    }
}

/// What [`gate`] says about one setting that widens access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The project config file.
    pub file: PathBuf,
    /// Where the key is written (1-based; 1:1 when unknown).
    pub line: usize,
    pub column: usize,
    /// `gateway.auth`, `gateway.listen` or `proxies.NAME.listen`.
    pub key: String,
    /// What was (not) applied and why; without the opt-in, how to give it.
    pub message: String,
    /// Whether the setting took effect (the user opted in).
    pub applied: bool,
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.key,
            self.message
        )
    }
}

/// Whether `addr` (`IP:PORT`) listens on loopback only (127.0.0.0/8, ::1, or an
/// IPv4-mapped loopback address). An address that does not parse is not loopback.
pub fn is_loopback(addr: &str) -> bool {
    addr.parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.ip().to_canonical().is_loopback())
}

/// The config to run with and what to tell the user: every setting of `config` that
/// widens access applies only when `trust` allows it for the project (see the module
/// docs). Pure but for resolving the project directory against the user config's
/// entries (symlinks), so tests give the trust directly.
pub fn gate(config: &Config, trust: &Trust) -> (Config, Vec<Notice>) {
    let mut out = config.clone();
    let mut notices = Vec::new();
    let allowed = trust.allows(&config.root);
    let mut notice = |key: String, message: String, applied: bool| {
        let (line, column) = config.access_keys.get(&key).copied().unwrap_or((1, 1));
        notices.push(Notice {
            file: config.path.clone(),
            line,
            column,
            key,
            message,
            applied,
        });
    };
    let how = how_to_opt_in(config, trust);
    if config.gateway.auth == HttpAuth::None {
        let key = "gateway.auth".to_owned();
        match &allowed {
            Some(via) => notice(
                key,
                format!(
                    "auth = \"none\" applies (allowed by {via}): the HTTP endpoint requires no \
                     token, so every local user can call its tools, including running commands \
                     as you"
                ),
                true,
            ),
            None => {
                out.gateway.auth = HttpAuth::Token;
                notice(
                    key,
                    format!(
                        "auth = \"none\" is not applied: the HTTP endpoint still requires the \
                         bearer token (.corral/token); a project's own config cannot open Corral \
                         to every local user. {how}"
                    ),
                    false,
                );
            }
        }
    }
    if let Listen::Addr(addr) = &config.gateway.listen
        && !is_loopback(addr)
    {
        let key = "gateway.listen".to_owned();
        match &allowed {
            Some(via) => notice(key, applied_listen(addr, via), true),
            None => {
                out.gateway.listen = Listen::Auto;
                notice(key, not_applied_listen(addr, &how), false);
            }
        }
    }
    for (name, proxy) in &config.proxies {
        if is_loopback(&proxy.listen) {
            continue;
        }
        let key = format!("proxies.{name}.listen");
        match &allowed {
            Some(via) => notice(key, applied_listen(&proxy.listen, via), true),
            None => {
                if let Some(p) = out.proxies.get_mut(name) {
                    p.listen = DEFAULT_PROXY_LISTEN.to_owned();
                }
                notice(key, not_applied_listen(&proxy.listen, &how), false);
            }
        }
    }
    (out, notices)
}

fn applied_listen(addr: &str, via: &str) -> String {
    format!(
        "listen = \"{addr}\" applies (allowed by {via}): it listens beyond loopback, where \
         other machines may reach it"
    )
}

fn not_applied_listen(addr: &str, how: &str) -> String {
    format!(
        "listen = \"{addr}\" is not applied: it reaches beyond loopback (127.0.0.1, ::1); \
         listening on a free loopback port instead. {how}"
    )
}

/// The sentence that says how to allow the project's widening.
fn how_to_opt_in(config: &Config, trust: &Trust) -> String {
    let file = match &trust.user_config_path {
        Some(p) => p.display().to_string(),
        None => format!("(${USER_CONFIG_ENV}, or ~/.config/corral/config.toml)"),
    };
    let mut how = format!(
        "To allow it for this project, add \"{}\" to `widen_access` under [trust] in your \
         user config {file}, or start Corral with {ALLOW_FLAG} (or {ALLOW_ENV}=1 in its \
         environment)",
        config.root.display()
    );
    if let Some(problem) = &trust.problem {
        how.push_str(&format!(
            " (your user config is not used: {})",
            problem.to_string().replace('\n', "; ")
        ));
    }
    how
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDE: &str = r#"[gateway]
auth = "none"
listen = "0.0.0.0:0"

[proxies.web]
target = "http://127.0.0.1:5173"
listen = "[::]:8080"

[proxies.local]
target = "http://127.0.0.1:5174"
listen = "127.0.0.2:0"
"#;

    fn config(text: &str) -> Config {
        crate::load_str(Path::new("/proj/corral.toml"), text, &|_: &str| None).unwrap()
    }

    fn user(entries: &[Trusted]) -> Trust {
        Trust {
            user_config_path: Some("/home/me/.config/corral/config.toml".into()),
            user_config: Some(UserConfig {
                path: "/home/me/.config/corral/config.toml".into(),
                widen_access: entries.to_vec(),
            }),
            ..Trust::default()
        }
    }

    #[test]
    fn without_an_opt_in_nothing_widens_and_each_setting_is_named() {
        let original = config(WIDE);
        let (run, notices) = gate(&original, &Trust::default());
        assert_eq!(run.gateway.auth, HttpAuth::Token);
        assert_eq!(run.gateway.listen, Listen::Auto);
        assert_eq!(run.proxies["web"].listen, "127.0.0.1:0");
        assert_eq!(
            run.proxies["local"].listen, "127.0.0.2:0",
            "loopback is kept"
        );
        let located: Vec<(usize, usize, &str, bool)> = notices
            .iter()
            .map(|n| (n.line, n.column, n.key.as_str(), n.applied))
            .collect();
        assert_eq!(
            located,
            [
                (2, 1, "gateway.auth", false),
                (3, 1, "gateway.listen", false),
                (7, 1, "proxies.web.listen", false),
            ]
        );
        let text = notices[0].to_string();
        assert!(
            text.starts_with("/proj/corral.toml:2:1: gateway.auth: auth = \"none\" is not applied"),
            "{text}"
        );
        for n in &notices {
            let m = &n.message;
            assert!(
                m.contains("add \"/proj\" to `widen_access` under [trust]"),
                "{m}"
            );
            assert!(m.contains("--allow-widened-access"), "{m}");
            assert!(m.contains("CORRAL_ALLOW_WIDENED_ACCESS=1"), "{m}");
        }
        assert!(notices[1].message.contains("\"0.0.0.0:0\" is not applied"));
        // The loaded config itself is untouched: the gate returns the one to run.
        assert_eq!(original.gateway.auth, HttpAuth::None);
    }

    #[test]
    fn with_an_opt_in_it_applies_and_says_so() {
        let original = config(WIDE);
        let everywhere = Trust {
            everywhere: Some(format!("{ALLOW_ENV}=1")),
            ..Trust::default()
        };
        for trust in [
            everywhere,
            user(&[
                Trusted::Dir("/elsewhere".into()),
                Trusted::Dir("/proj/".into()),
            ]),
            user(&[Trusted::All]),
        ] {
            let (run, notices) = gate(&original, &trust);
            assert_eq!(run, original, "{trust:?}");
            assert_eq!(notices.len(), 3);
            assert!(notices.iter().all(|n| n.applied));
            assert!(
                notices[0].message.contains("requires no token"),
                "{}",
                notices[0].message
            );
            assert!(notices[1].message.contains("beyond loopback"));
        }
    }

    #[test]
    fn another_projects_trust_is_not_this_ones() {
        let trust = user(&[
            Trusted::Dir("/proj/sub".into()),
            Trusted::Dir("/pro".into()),
        ]);
        let (run, notices) = gate(&config(WIDE), &trust);
        assert_eq!(run.gateway.auth, HttpAuth::Token);
        assert!(notices.iter().all(|n| !n.applied));
        assert!(
            notices[0]
                .message
                .contains("/home/me/.config/corral/config.toml")
        );
    }

    #[test]
    fn loopback_settings_need_no_trust() {
        let text = "[gateway]\nlisten = \"[::1]:0\"\nauth = \"token\"\n\
                    [proxies.a]\ntarget = \"http://127.0.0.1:1\"\n";
        let c = config(text);
        let (run, notices) = gate(&c, &Trust::default());
        assert_eq!(run, c);
        assert!(notices.is_empty(), "{notices:?}");
        assert!(is_loopback("127.255.0.1:1"));
        assert!(is_loopback("[::ffff:127.0.0.1]:1"));
        assert!(!is_loopback("192.168.1.2:1"));
        assert!(!is_loopback("[::]:1"));
        assert!(!is_loopback("localhost:1"), "never parsed, never trusted");
    }

    #[test]
    fn user_config_is_strict_and_located() {
        let path = Path::new("/home/me/.config/corral/config.toml");
        let ok = parse_user_config(path, "[trust]\nwiden_access = [\"/a/b\", \"*\"]\n").unwrap();
        assert_eq!(ok.widen_access, [Trusted::Dir("/a/b".into()), Trusted::All]);
        assert_eq!(parse_user_config(path, "").unwrap().widen_access, []);

        let err = parse_user_config(
            path,
            "[trust]\nwiden_acess = [\"/a\"]\n[gateway]\nauth = \"none\"\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "/home/me/.config/corral/config.toml:2:1: trust.widen_acess: unknown key \
             `widen_acess` in [trust]; did you mean `widen_access`?\n\
             /home/me/.config/corral/config.toml:3:2: gateway: unknown key `gateway` at the \
             top level; expected one of: trust"
        );
        let err = parse_user_config(path, "[trust]\nwiden_access = [\"~/src/app\", 3]\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(":2:17: trust.widen_access[0]: \"~/src/app\" is not an absolute"),
            "{err}"
        );
        assert!(
            err.contains(":2:30: trust.widen_access[1]: expected a string"),
            "{err}"
        );
        let err = parse_user_config(path, "[trust]\nwiden_access = \"/a\"\n").unwrap_err();
        assert!(err.to_string().contains("expected an array"), "{err}");
        let err = parse_user_config(path, "[trust\n").unwrap_err();
        assert!(err.to_string().contains(":1:"), "{err}");
    }

    #[test]
    fn a_user_config_others_can_write_is_refused() {
        assert_eq!(owner_problem(1000, 0o100644, 1000), Ok(()));
        assert_eq!(owner_problem(0, 0o100600, 1000), Ok(()), "root's file");
        let group = owner_problem(1000, 0o100664, 1000).unwrap_err();
        assert_eq!(group, "its group can write it (mode 664)");
        let world = owner_problem(1000, 0o100646, 1000).unwrap_err();
        assert_eq!(world, "every user can write it (mode 646)");
        let other = owner_problem(1001, 0o100600, 1000).unwrap_err();
        assert_eq!(other, "it is owned by uid 1001, not by you (uid 1000)");

        // The real file check, on a file of our own.
        let dir = temp_dir("refused");
        let path = dir.join("config.toml");
        std::fs::write(&path, "[trust]\nwiden_access = [\"*\"]\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = load_user_config(&path).unwrap_err().to_string();
        assert!(
            err.contains("refused: its group and every user can write it (mode 666)"),
            "{err}"
        );
        assert!(err.contains("chmod go-w"), "{err}");
        let env = |name: &str| (name == USER_CONFIG_ENV).then(|| path.display().to_string());
        let trust = Trust::resolve(false, &env);
        assert!(trust.user_config.is_none() && trust.problem.is_some());
        let (run, notices) = gate(&config(WIDE), &trust);
        assert_eq!(run.gateway.auth, HttpAuth::Token);
        assert!(
            notices[0].message.contains("your user config is not used"),
            "{notices:?}"
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let trust = Trust::resolve(false, &env);
        assert_eq!(
            trust.allows(Path::new("/any")).as_deref(),
            Some(&*format!("[trust] widen_access in {}", path.display()))
        );
        assert!(
            load_user_config(&dir.join("absent.toml"))
                .unwrap()
                .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn where_the_user_config_is_and_the_environment_opt_in() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let all = env(&[
            ("CORRAL_USER_CONFIG", "/x/u.toml"),
            ("XDG_CONFIG_HOME", "/xdg"),
            ("HOME", "/home/me"),
        ]);
        assert_eq!(user_config_path(&all), Some("/x/u.toml".into()));
        let xdg = env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/home/me")]);
        assert_eq!(
            user_config_path(&xdg),
            Some("/xdg/corral/config.toml".into())
        );
        let home = env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/home/me")]);
        assert_eq!(
            user_config_path(&home),
            Some("/home/me/.config/corral/config.toml".into())
        );
        assert_eq!(user_config_path(&env(&[])), None);

        let on = env(&[(ALLOW_ENV, "1"), (USER_CONFIG_ENV, "/nonexistent/u.toml")]);
        assert_eq!(
            Trust::resolve(false, &on).everywhere.as_deref(),
            Some("CORRAL_ALLOW_WIDENED_ACCESS=1")
        );
        let off = env(&[(ALLOW_ENV, "0"), (USER_CONFIG_ENV, "/nonexistent/u.toml")]);
        let trust = Trust::resolve(false, &off);
        assert!(
            trust.everywhere.is_none() && trust.problem.is_none(),
            "{trust:?}"
        );
        assert_eq!(
            Trust::resolve(true, &off).everywhere.as_deref(),
            Some(ALLOW_FLAG)
        );
    }

    fn temp_dir(what: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "corral-trust-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
