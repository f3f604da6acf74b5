//! `corral install CLIENT…` and `corral uninstall CLIENT…`: the `corral mcp` entry in an
//! agent client's own config file, and `--import` of the servers already there.
//!
//! # Reversibility
//!
//! An edit only touches the entry (jsonc-parser's CST for JSON/JSONC, toml_edit for
//! TOML), and install is a pure function of the file's text and the entry. Before it
//! changes an existing file, install copies it to `FILE.corral-backup` (the first backup
//! is kept). Uninstall restores that backup byte for byte when installing the current
//! entry into the backup — less the servers an `--import` moved out, those of the
//! backup the current file lacks — gives exactly the current file (nothing else changed
//! since; the imported servers stay in corral.toml),
//! and deletes the file (and the empty directories on its way that install makes) when
//! install created it (no backup, and the file is exactly what install writes into
//! nothing). Otherwise — the file was edited since — it removes only the entry, and
//! says where the backup is.
//!
//! # Symlinks
//!
//! A client file that is a symlink (dotfiles kept in a repository, linked into place) is
//! edited at its target, so the link stays a link and the dotfiles repository sees the
//! change; the backup is made beside the target. A dangling link is refused: writing
//! through it would create a file somewhere the user did not choose.

mod clients;
mod import;
mod json;
mod toml;

use crate::{CmdResult, Failure};

/// The names of the clients `corral install` knows, in [`clients::CLIENTS`]' order: clap
/// checks the command line against them and the shell completions offer them.
pub(crate) fn client_names() -> impl Iterator<Item = &'static str> {
    clients::CLIENTS.iter().map(|c| c.name)
}
use clients::{CLIENTS, Client, Dirs, Syntax};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The name of Corral's entry in a client's file.
const NAME: &str = "corral";

pub struct Options {
    pub clients: Vec<String>,
    pub user: bool,
    pub dry_run: bool,
    pub detect: bool,
    pub import: bool,
    pub profile: Option<String>,
    pub force: bool,
}

/// A planned change of one file.
struct Change {
    /// The file as the client names it.
    shown: PathBuf,
    /// Where it is written (the symlink's target, or `shown`).
    path: PathBuf,
    old: Option<String>,
    /// The new text; `None`: remove the file.
    new: Option<String>,
    /// Restore from the backup (uninstall): the backup is removed afterwards.
    restores_backup: bool,
    /// Directories to remove when empty after removing the file (innermost first).
    dirs: Vec<PathBuf>,
    message: String,
}

pub fn install(config: Option<&Path>, o: Options) -> CmdResult {
    let dirs = Dirs::from_env()
        .ok_or_else(|| Failure::Usage("HOME is not set: cannot find the clients' files".into()))?;
    let chosen = choose(&o, &dirs)?;
    let project = project(config, !o.user || o.import, o.import)?;
    // The entry would fail at the agent's every start: a profile the config lacks.
    if let (Some(name), Some(p)) = (o.profile.as_deref(), &project)
        && p.config.exists()
    {
        let cfg = crate::project::load(Some(&p.config))?;
        crate::project::check_profile(&cfg, Some(name))?;
    }
    let mut toml_text = match (&project, o.import) {
        (Some(p), true) => Some(match std::fs::read_to_string(&p.config) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                corral_config::init_template(None)
                    .map_err(crate::project::config_failure)?
                    .text
            }
            Err(e) => {
                return Err(Failure::Op(format!(
                    "cannot read {}: {e}",
                    p.config.display()
                )));
            }
        }),
        _ => None,
    };
    let original_toml = project
        .as_ref()
        .and_then(|p| std::fs::read_to_string(&p.config).ok());
    let mut changes = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    for client in chosen {
        let scope_dir = if o.user {
            None
        } else {
            project.as_ref().map(|p| p.dir.as_path())
        };
        let shown = clients::file(client, scope_dir, &dirs);
        if !o.user && client.project.is_none() {
            notes.push(format!(
                "{} has no project file: its user file {} is written",
                client.label,
                shown.display()
            ));
        }
        let (path, old) = read(&shown)?;
        let entry = entry(client, o.user, project.as_ref(), o.profile.as_deref())?;
        let mut text = old.clone();
        if let Some(current) = &old {
            check(client, &shown, current)?;
            if let Some((_, existing)) = entries(client, current)
                .map_err(|e| broken(&shown, &e))?
                .into_iter()
                .find(|(n, _)| n == NAME)
                && !is_corral(&existing)
            {
                if !o.force {
                    return Err(Failure::Op(format!(
                        "{} has a server named '{NAME}' that is not Corral ({}): not \
                         overwritten. Rename that server, or pass --force to replace it",
                        shown.display(),
                        describe(&existing)
                    )));
                }
                notes.push(format!(
                    "replaced the server named '{NAME}' in {} ({}), as --force asked",
                    shown.display(),
                    describe(&existing)
                ));
            }
        }
        if let (Some(toml), Some(p)) = (toml_text.as_mut(), project.as_ref()) {
            let found = match &old {
                Some(t) => entries(client, t).map_err(|e| broken(&shown, &e))?,
                None => Vec::new(),
            };
            let imp = import::import(client, &shown, &found, toml, &p.dir).map_err(Failure::Op)?;
            *toml = imp.toml;
            if !imp.moved.is_empty() {
                notes.push(format!(
                    "imported from {}: {}",
                    shown.display(),
                    imp.moved.join(", ")
                ));
                let t = text.as_deref().unwrap_or_default();
                text = Some(remove(client, t, &imp.moved).map_err(|e| broken(&shown, &e))?);
            }
            notes.extend(imp.kept);
            warnings.extend(imp.warnings);
        }
        let new = set(client, text.as_deref(), &entry).map_err(|e| broken(&shown, &e))?;
        let message = if old.as_deref() == Some(new.as_str()) {
            format!("already installed in {}: {}", client.label, shown.display())
        } else if old.is_none() {
            format!(
                "installed Corral in {}: created {}",
                client.label,
                shown.display()
            )
        } else {
            format!("installed Corral in {}: {}", client.label, shown.display())
        };
        changes.push(Change {
            dirs: Vec::new(),
            shown,
            path,
            old,
            new: Some(new),
            restores_backup: false,
            message,
        });
    }
    if let (Some(toml), Some(p)) = (toml_text, project.as_ref()) {
        let (path, _) = read(&p.config)?;
        changes.insert(
            0,
            Change {
                message: format!("servers imported into {}", p.config.display()),
                shown: p.config.clone(),
                path,
                old: original_toml,
                new: Some(toml),
                restores_backup: false,
                dirs: Vec::new(),
            },
        );
    }
    apply(changes, o.dry_run)?;
    for n in notes {
        println!("{n}");
    }
    for w in warnings {
        eprintln!("corral: warning: {w}");
    }
    Ok(())
}

/// Whether `current` is exactly what install (with `--import` or without) makes of
/// `backup` with `entry`: nothing else changed since, so uninstall may restore `backup`.
/// The servers an import moved are those of `backup` that `current` lacks.
fn installed_into(client: &Client, backup: &str, current: &str, entry: &Value) -> bool {
    let names = |text: &str| -> Option<Vec<String>> {
        let found = entries(client, text).ok()?;
        Some(
            found
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| n != NAME)
                .collect(),
        )
    };
    let (Some(before), Some(now)) = (names(backup), names(current)) else {
        return false;
    };
    let moved: Vec<String> = before.into_iter().filter(|n| !now.contains(n)).collect();
    let base = match moved.is_empty() {
        true => Some(backup.to_owned()),
        false => remove(client, backup, &moved).ok(),
    };
    base.and_then(|b| set(client, Some(&b), entry).ok())
        .is_some_and(|t| t == current)
}

pub fn uninstall(
    config: Option<&Path>,
    names: Vec<String>,
    user: bool,
    dry_run: bool,
) -> CmdResult {
    let dirs = Dirs::from_env()
        .ok_or_else(|| Failure::Usage("HOME is not set: cannot find the clients' files".into()))?;
    let o = Options {
        clients: names,
        user,
        dry_run,
        detect: false,
        import: false,
        profile: None,
        force: false,
    };
    let chosen = choose(&o, &dirs)?;
    let project = project(config, !user, false)?;
    let mut changes = Vec::new();
    for client in chosen {
        let scope_dir = if user {
            None
        } else {
            project.as_ref().map(|p| p.dir.as_path())
        };
        let shown = clients::file(client, scope_dir, &dirs);
        let (path, old) = read(&shown)?;
        let Some(current) = old else {
            println!(
                "not installed in {}: {} does not exist",
                client.label,
                shown.display()
            );
            continue;
        };
        check(client, &shown, &current)?;
        let found = entries(client, &current).map_err(|e| broken(&shown, &e))?;
        let Some((_, existing)) = found.into_iter().find(|(n, _)| n == NAME) else {
            println!(
                "not installed in {}: {} has no '{NAME}' entry",
                client.label,
                shown.display()
            );
            continue;
        };
        if !is_corral(&existing) {
            return Err(Failure::Op(format!(
                "{}: the server named '{NAME}' is not Corral ({}): not removed",
                shown.display(),
                describe(&existing)
            )));
        }
        let backup = backup_of(&path);
        let restored = std::fs::read_to_string(&backup)
            .ok()
            .filter(|b| installed_into(client, b, &current, &existing));
        // A backup that is itself only Corral's entry is a file install created (and a
        // later install changed): it goes too.
        let created_then_changed = restored.as_deref().is_some_and(|b| {
            entries(client, b)
                .ok()
                .and_then(|found| found.into_iter().find(|(n, _)| n == NAME))
                .is_some_and(|(_, e)| set(client, None, &e).ok().as_deref() == Some(b))
        });
        let created = created_then_changed
            || (!backup.exists() && set(client, None, &existing).ok().as_deref() == Some(&current));
        let change = if let (Some(b), false) = (restored, created) {
            Change {
                message: format!(
                    "uninstalled Corral from {}: {} restored from {}",
                    client.label,
                    shown.display(),
                    backup.display()
                ),
                new: Some(b),
                restores_backup: true,
                dirs: Vec::new(),
                shown,
                path,
                old: Some(current),
            }
        } else if created {
            let base = match scope_dir {
                Some(d) if client.project.is_some() => d.to_owned(),
                _ => dirs.home.clone(),
            };
            let dirs = path
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(&base) && *d != base)
                .map(Path::to_path_buf)
                .collect();
            Change {
                message: format!(
                    "uninstalled Corral from {}: removed {} (install created it)",
                    client.label,
                    shown.display()
                ),
                new: None,
                restores_backup: created_then_changed,
                dirs,
                shown,
                path,
                old: Some(current),
            }
        } else {
            let new =
                remove(client, &current, &[NAME.to_owned()]).map_err(|e| broken(&shown, &e))?;
            let kept = if backup.exists() {
                format!(
                    "; the file changed since install, its backup {} is kept",
                    backup.display()
                )
            } else {
                String::new()
            };
            Change {
                message: format!(
                    "uninstalled Corral from {}: removed its entry from {}{kept}",
                    client.label,
                    shown.display()
                ),
                new: Some(new),
                restores_backup: false,
                dirs: Vec::new(),
                shown,
                path,
                old: Some(current),
            }
        };
        changes.push(change);
    }
    apply(changes, dry_run)
}

/// The clients named, or found with `--detect` (each printed with why).
fn choose(o: &Options, dirs: &Dirs) -> Result<Vec<&'static Client>, Failure> {
    let mut chosen = Vec::new();
    for name in &o.clients {
        let c = clients::find(name).map_err(Failure::Usage)?;
        if !chosen.iter().any(|x: &&Client| x.name == c.name) {
            chosen.push(c);
        }
    }
    if o.detect {
        let path = std::env::var_os("PATH");
        for c in CLIENTS {
            match clients::detect(c, dirs, path.as_deref()) {
                Some(why) => {
                    println!("found {} ({}): {why}", c.label, c.name);
                    if !chosen.iter().any(|x| x.name == c.name) {
                        chosen.push(c);
                    }
                }
                None => println!("not found: {} ({})", c.label, c.name),
            }
        }
        if chosen.is_empty() {
            return Err(Failure::Op(
                "no client found on this machine; name one: corral install CLIENT".into(),
            ));
        }
    }
    if chosen.is_empty() {
        let names: Vec<&str> = CLIENTS.iter().map(|c| c.name).collect();
        return Err(Failure::Usage(format!(
            "name a client ({}), or pass --detect",
            names.join(", ")
        )));
    }
    Ok(chosen)
}

struct ProjectFiles {
    dir: PathBuf,
    config: PathBuf,
}

/// The project (the directory of its corral.toml), found as every command finds it. With
/// `create`, no corral.toml means one in the working directory, to be created.
fn project(
    explicit: Option<&Path>,
    needed: bool,
    create: bool,
) -> Result<Option<ProjectFiles>, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    let found = corral_config::discover(&cwd, explicit)
        .ok()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"));
    let config = match (found, create) {
        (Some(p), _) => p,
        (None, true) => cwd.join(explicit.unwrap_or(Path::new(corral_config::CONFIG_FILE))),
        (None, false) if needed => {
            return Err(Failure::Usage(format!(
                "no corral.toml in {} or above: run `corral init` first (it imports \
                 .mcp.json), or `corral install --import CLIENT` to make one from the \
                 client's servers",
                cwd.display()
            )));
        }
        (None, false) => return Ok(None),
    };
    let config = std::path::absolute(&config).unwrap_or(config);
    Ok(Some(ProjectFiles {
        dir: config.parent().unwrap_or(&cwd).to_owned(),
        config,
    }))
}

/// The Corral entry for `client`.
fn entry(
    client: &Client,
    user: bool,
    project: Option<&ProjectFiles>,
    profile: Option<&str>,
) -> Result<Value, Failure> {
    let mut args: Vec<String> = Vec::new();
    if (user || client.project.is_none()) && client.user_needs_config {
        let p = project.ok_or_else(|| {
            Failure::Usage(format!(
                "{} starts servers outside the project, so its user-scope entry names the \
                 project's corral.toml, and there is none here: run `corral init` first",
                client.label
            ))
        })?;
        args.extend(["-c".to_owned(), p.config.display().to_string()]);
    }
    args.push("mcp".into());
    if let Some(p) = profile {
        args.extend(["--profile".to_owned(), p.to_owned()]);
    }
    let mut e = serde_json::Map::new();
    if client.stdio_type {
        e.insert("type".into(), "stdio".into());
    }
    e.insert("command".into(), command().into());
    e.insert("args".into(), args.into());
    Ok(Value::Object(e))
}

/// `corral` when the `corral` on PATH is this very executable, else this executable's
/// absolute path.
fn command() -> String {
    let exe = std::env::current_exe().ok();
    let me = exe.as_ref().and_then(|p| p.canonicalize().ok());
    let on_path = clients::on_path(NAME, std::env::var_os("PATH").as_deref())
        .and_then(|p| p.canonicalize().ok());
    match (&me, on_path) {
        (Some(me), Some(found)) if *me == found => NAME.to_owned(),
        _ => exe
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| NAME.to_owned()),
    }
}

/// Whether an entry runs Corral's MCP endpoint (this binary, or one named `corral`).
fn is_corral(entry: &Value) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let args: Vec<String> = entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if corral_config::itself::named_corral_mcp(command, &args) {
        return true;
    }
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    me.is_some() && Path::new(command).canonicalize().ok() == me && args.iter().any(|a| a == "mcp")
}

fn describe(entry: &Value) -> String {
    match (
        entry.get("command"),
        entry.get("url"),
        entry.get("serverUrl"),
        entry.get("httpUrl"),
    ) {
        (Some(Value::String(c)), ..) => format!("command `{c}`"),
        (_, Some(Value::String(u)), ..)
        | (_, _, Some(Value::String(u)), _)
        | (.., Some(Value::String(u))) => {
            format!("URL {u}")
        }
        _ => "an entry of its own".into(),
    }
}

fn check(client: &Client, shown: &Path, text: &str) -> Result<(), Failure> {
    match client.syntax {
        Syntax::Toml => toml::check(text, client.key),
        s => json::check(text, s == Syntax::Jsonc, client.key),
    }
    .map_err(|e| broken(shown, &e))
}

fn entries(client: &Client, text: &str) -> Result<Vec<(String, Value)>, String> {
    match client.syntax {
        Syntax::Toml => toml::entries(text, client.key),
        s => json::entries(text, s == Syntax::Jsonc, client.key),
    }
}

fn set(client: &Client, text: Option<&str>, entry: &Value) -> Result<String, String> {
    match client.syntax {
        Syntax::Toml => toml::set_entry(text, client.key, NAME, entry),
        s => json::set_entry(text, s == Syntax::Jsonc, client.key, NAME, entry),
    }
}

fn remove(client: &Client, text: &str, names: &[String]) -> Result<String, String> {
    match client.syntax {
        Syntax::Toml => toml::remove_entries(text, client.key, names),
        s => json::remove_entries(text, s == Syntax::Jsonc, client.key, names),
    }
}

/// A client file that cannot be edited: nothing is changed.
fn broken(shown: &Path, what: &str) -> Failure {
    Failure::Usage(format!(
        "{}:{what}\n  fix the file (or move it away) and run again; nothing was changed",
        shown.display()
    ))
}

/// The file's real path (a symlink's target) and its text, if it exists.
fn read(shown: &Path) -> Result<(PathBuf, Option<String>), Failure> {
    let link = std::fs::symlink_metadata(shown).is_ok_and(|m| m.file_type().is_symlink());
    let path = if link {
        shown.canonicalize().map_err(|e| {
            Failure::Op(format!(
                "{} is a symlink whose target cannot be reached ({e}): not written through",
                shown.display()
            ))
        })?
    } else {
        shown.to_owned()
    };
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok((path, Some(t))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((path, None)),
        Err(e) => Err(Failure::Op(format!("cannot read {}: {e}", path.display()))),
    }
}

fn backup_of(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".corral-backup");
    PathBuf::from(s)
}

/// Prints (dry run) or makes the changes.
fn apply(changes: Vec<Change>, dry_run: bool) -> CmdResult {
    for c in changes {
        let old = c.old.as_deref().unwrap_or("");
        let new = c.new.as_deref().unwrap_or("");
        if c.old.as_deref() == c.new.as_deref() {
            println!("{}", c.message);
            continue;
        }
        if dry_run {
            let from = if c.old.is_some() {
                c.shown.display().to_string()
            } else {
                "/dev/null".into()
            };
            let to = if c.new.is_some() {
                c.shown.display().to_string()
            } else {
                "/dev/null".into()
            };
            print!(
                "{}",
                similar::TextDiff::from_lines(old, new)
                    .unified_diff()
                    .header(&from, &to)
            );
            println!("(dry run: {} not changed)", c.shown.display());
            continue;
        }
        let write_err =
            |e: std::io::Error| Failure::Op(format!("cannot write {}: {e}", c.path.display()));
        let backup = backup_of(&c.path);
        match &c.new {
            None => {
                std::fs::remove_file(&c.path).map_err(write_err)?;
                if c.restores_backup {
                    let _ = std::fs::remove_file(&backup);
                }
                for d in &c.dirs {
                    if std::fs::remove_dir(d).is_err() {
                        break;
                    }
                }
                println!("{}", c.message);
            }
            Some(text) => {
                let mut made_backup = false;
                if c.old.is_some() && !c.restores_backup && !backup.exists() {
                    std::fs::copy(&c.path, &backup).map_err(write_err)?;
                    made_backup = true;
                }
                if let Some(parent) = c.path.parent() {
                    std::fs::create_dir_all(parent).map_err(write_err)?;
                }
                write_atomic(&c.path, text).map_err(write_err)?;
                if c.restores_backup {
                    let _ = std::fs::remove_file(&backup);
                }
                println!("{}", c.message);
                if c.path != c.shown {
                    println!(
                        "  ({} is a symlink: its target {} was edited)",
                        c.shown.display(),
                        c.path.display()
                    );
                }
                if made_backup {
                    println!("  backup of the previous file: {}", backup.display());
                }
            }
        }
    }
    Ok(())
}

/// Writes `text` to `path` through a temp file beside it, keeping the old file's
/// permissions (a new file gets the umask's). The temp file has them from its creation:
/// a private file (`~/.claude.json` holds credentials) is never readable by others, not
/// even for a moment.
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".corral-tmp");
    let tmp = PathBuf::from(tmp);
    let old = std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777);
    // A temp file a crashed run left behind would carry its own mode.
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(old.unwrap_or(0o666))
        .open(&tmp)?;
    if let Some(mode) = old {
        // Masked by the umask at creation: the old file's mode exactly (a new file keeps
        // the umask's).
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}
