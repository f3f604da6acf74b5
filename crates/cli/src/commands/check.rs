//! `corral check`: load and validate, report every problem at once (with the ids in
//! `[alerts] disable`, checked against the built-in rules); then look for what would
//! make a server or dev process fail at start (a command not on PATH, a script that is
//! not there, a missing cwd) and warn about it.
//!
//! Problems are errors (exit 2). Warnings are not: the command may be installed, or the
//! script built, before the servers start; `check` says what `start` would say.
//!
//! Settings that widen access (`[gateway] auth = "none"`, a listen address beyond
//! loopback) are warnings too, with file, line and key: the config is valid, and without
//! the user's opt-in Corral runs it safely (see [`corral_config::trust`]), not applying
//! them; the warning says so and how to opt in, or, with the opt-in, what is open. A
//! user config that cannot be used (invalid, writable by others) is an error.

use crate::{CmdResult, Failure, project};
use corral_config::{Config, ConfigError, Problem, Transport};
use corral_supervisor::spawn::{SpawnSpec, resolve};
use serde_json::{Value, json};
use std::path::Path;

pub fn run(config: Option<&Path>, json: bool) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::Op(format!("cannot read the working directory: {e}")))?;
    let loaded = corral_config::discover(&cwd, config).and_then(|p| corral_config::load(&p));
    let loaded = loaded.and_then(|cfg| match alert_problems(&cfg) {
        problems if problems.is_empty() => Ok(cfg),
        problems => Err(ConfigError::Invalid {
            path: cfg.path.clone(),
            problems,
        }),
    });
    let cfg = match loaded {
        Ok(cfg) => cfg,
        Err(e) if json => {
            println!("{}", problems_json(&e));
            return Err(Failure::Usage(String::new()));
        }
        Err(e) => return Err(project::config_failure(e)),
    };
    // What the trust gate would not apply (or applies) when this config runs; a user
    // config that cannot be used is an error like the project's own problems.
    let trust = corral_config::trust::Trust::resolve(false, &|name| std::env::var(name).ok());
    if let Some(e) = trust.problem {
        if json {
            println!("{}", problems_json(&e));
            return Err(Failure::Usage(String::new()));
        }
        return Err(project::config_failure(e));
    }
    let (_, access) = corral_config::trust::gate(&cfg, &trust);
    let mut warnings = warnings(&cfg);
    warnings.extend(access.iter().map(|n| Warning {
        kind: "access",
        name: n.key.clone(),
        key: n.key.clone(),
        message: n.to_string(),
    }));
    if json {
        let v = json!({
            "ok": true,
            "config": cfg.path,
            "servers": cfg.servers.keys().collect::<Vec<_>>(),
            "processes": cfg.processes.keys().collect::<Vec<_>>(),
            "proxies": cfg.proxies.keys().collect::<Vec<_>>(),
            "warnings": warnings.iter().map(|w| json!({
                w.kind: w.name, "key": w.key, "message": w.message,
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    for w in &warnings {
        if w.kind == "access" {
            // The message names the file, line and key itself.
            eprintln!("corral: warning: {}", w.message);
        } else {
            eprintln!("corral: warning: {}: {}", w.key, w.message);
        }
    }
    let note = match warnings.len() {
        0 => String::new(),
        n => format!(
            "; {n} warning{} above (warnings do not fail the check: fix them before the servers start)",
            if n == 1 { "" } else { "s" }
        ),
    };
    println!(
        "{}: ok ({} servers, {} processes, {} proxies){note}",
        cfg.path.display(),
        cfg.servers.len(),
        cfg.processes.len(),
        cfg.proxies.len()
    );
    Ok(())
}

/// `{"ok": false, "config", "problems": [{file, line, column, key, message}]}`: what the
/// config crate knows of each problem; `null` where it knows nothing (a file that cannot
/// be read has no line).
fn problems_json(e: &ConfigError) -> Value {
    let (config, problems) = match e {
        ConfigError::Invalid { path, problems } => (
            json!(path),
            problems
                .iter()
                .map(|p| {
                    json!({
                        "file": path,
                        "line": p.line,
                        "column": p.column,
                        "key": p.key,
                        "message": p.message,
                    })
                })
                .collect(),
        ),
        ConfigError::Read { path, .. } | ConfigError::Refused { path, .. } => (
            json!(path),
            vec![
                json!({"file": path, "line": null, "column": null, "key": "", "message": e.to_string()}),
            ],
        ),
        ConfigError::NotFound { .. } => (
            Value::Null,
            vec![
                json!({"file": null, "line": null, "column": null, "key": "", "message": e.to_string()}),
            ],
        ),
    };
    json!({ "ok": false, "config": config, "problems": problems })
}

/// Something that will make a server or process fail at start unless fixed first, or a
/// setting that widens access (applied with the user's opt-in, else not applied).
struct Warning {
    /// `server`, `process` or `access` (the JSON key of `name`; for `access` the key).
    kind: &'static str,
    name: String,
    /// The config key to fix, e.g. `servers.files.command`.
    key: String,
    message: String,
}

fn warnings(cfg: &Config) -> Vec<Warning> {
    let mut out = Vec::new();
    for (name, server) in &cfg.servers {
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &server.transport
        else {
            continue;
        };
        let mut warn = |key: &str, message: String| {
            out.push(Warning {
                kind: "server",
                name: name.clone(),
                key: format!("servers.{name}.{key}"),
                message,
            })
        };
        // The lookup `start` does, so the message is the one `start` would give.
        let spec = SpawnSpec {
            command,
            args,
            env,
            cwd,
        };
        match resolve(&spec) {
            Err(e @ corral_supervisor::spawn::SpawnError::NoCwd { .. }) => {
                warn("cwd", format!("{e}; the server will not start"))
            }
            Err(e) => warn("command", format!("{e}; the server will not start")),
            Ok(_) => {
                if let Some(script) = script_of(command, args)
                    && !script_exists(command, &cwd.join(script))
                {
                    warn(
                        "args",
                        format!(
                            "'{command}' would run '{script}', which does not exist in {} \
                             (the server's cwd); fix `args` or `cwd`",
                            cwd.display()
                        ),
                    );
                }
            }
        }
    }
    for (name, process) in &cfg.processes {
        let (program, args) = process.command.program_and_args();
        let spec = SpawnSpec {
            command: program,
            args: &args,
            env: &process.env,
            cwd: &process.cwd,
        };
        let what = match resolve(&spec) {
            Err(e @ corral_supervisor::spawn::SpawnError::NoCwd { .. }) => Some(("cwd", e)),
            Err(e) => Some(("command", e)),
            Ok(_) => None,
        };
        if let Some((key, e)) = what {
            out.push(Warning {
                kind: "process",
                name: name.clone(),
                key: format!("processes.{name}.{key}"),
                message: format!("{e}; the process will not start"),
            });
        }
    }
    out
}

/// The ids and categories in `[alerts] disable` that the built-in rules do not know, one
/// problem each, naming the nearest known one (only the scanner knows them, so loading
/// the config cannot check them).
fn alert_problems(cfg: &Config) -> Vec<Problem> {
    let text = std::fs::read_to_string(&cfg.path).unwrap_or_default();
    let mut problems = Vec::new();
    for id in &cfg.alerts.disable {
        let one = corral_config::AlertSettings {
            disable: vec![id.clone()],
            ..cfg.alerts.clone()
        };
        let Err(e) = corral_alerts::AlertRules::with_config(&one) else {
            continue;
        };
        // Where the id is written: the first line quoting it (else the file's start).
        let quoted = format!("\"{id}\"");
        let (line, column) = text
            .lines()
            .enumerate()
            .find_map(|(i, l)| l.find(&quoted).map(|c| (i + 1, l[..c].chars().count() + 1)))
            .unwrap_or((1, 1));
        problems.push(Problem {
            line,
            column,
            key: "alerts.disable".into(),
            message: e.strip_prefix("alerts.disable: ").unwrap_or(&e).to_owned(),
        });
    }
    problems
}

/// Whether a flag of an interpreter takes no value (the next argument is the script).
type FlagTest = fn(&str) -> bool;

/// The script file an interpreter's command line names, for the interpreters below, or
/// `None`. Only the plain forms are recognized; any flag not listed (`-m module`,
/// `-c code`, `-e code`, a flag that may take a value) means the first operand need not
/// be a file, and nothing is checked rather than guessed:
///
/// | command                           | form                                                            |
/// |-----------------------------------|-----------------------------------------------------------------|
/// | `python`, `python3`, `python3.12` | `python [-u -B -E -I -O -OO -P -q -s -S] FILE`                  |
/// | `node`                            | `node [--enable-source-maps --no-warnings --no-deprecation] FILE` |
/// | `bash`, `sh`, `dash`, `zsh`       | `bash [-e -u -x -v -l --login --norc --noprofile] FILE`         |
/// | `ruby`                            | `ruby [-w] FILE`                                                |
/// | `deno`                            | `deno run [-A -q --quiet --no-check --allow-* --deny-*] FILE` (not a URL, `npm:` or `jsr:`) |
/// | `bun`                             | `bun [run] FILE` where FILE ends in .js .mjs .cjs .ts .mts .jsx .tsx (else it may be a package.json script) |
/// | `uv`                              | `uv run FILE.py`                                                |
fn script_of<'a>(command: &str, args: &'a [String]) -> Option<&'a str> {
    let program = Path::new(command).file_name()?.to_str()?;
    let is_python = program
        .strip_prefix("python")
        .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    let (args, plain_flag): (&[String], FlagTest) = match program {
        _ if is_python => (args, |f| {
            matches!(
                f,
                "-u" | "-B" | "-E" | "-I" | "-O" | "-OO" | "-P" | "-q" | "-s" | "-S"
            )
        }),
        "node" => (args, |f| {
            matches!(
                f,
                "--enable-source-maps" | "--no-warnings" | "--no-deprecation"
            )
        }),
        "bash" | "sh" | "dash" | "zsh" => (args, |f| {
            matches!(
                f,
                "-e" | "-u" | "-x" | "-v" | "-l" | "--login" | "--norc" | "--noprofile"
            )
        }),
        "ruby" => (args, |f| f == "-w"),
        "deno" if args.first().is_some_and(|a| a == "run") => (&args[1..], |f| {
            matches!(f, "-A" | "-q" | "--quiet" | "--no-check")
                || ["--allow-", "--deny-"].iter().any(|p| f.starts_with(p))
        }),
        "bun" => {
            let rest = if args.first().is_some_and(|a| a == "run") {
                &args[1..]
            } else {
                args
            };
            let first = rest.first()?;
            let source = [".js", ".mjs", ".cjs", ".ts", ".mts", ".jsx", ".tsx"]
                .iter()
                .any(|ext| first.ends_with(ext));
            return source.then_some(first.as_str());
        }
        "uv" => {
            return match args {
                [run, file, ..] if run == "run" && file.ends_with(".py") => Some(file),
                _ => None,
            };
        }
        _ => return None,
    };
    let operand = args.iter().find(|a| !plain_flag(a))?;
    let url_like =
        operand.contains("://") || operand.starts_with("npm:") || operand.starts_with("jsr:");
    (!operand.starts_with('-') && !url_like).then_some(operand.as_str())
}

/// Whether the interpreter would find `path`: it exists (a file, or a directory python
/// and node can run), or, for node, with one of the extensions node tries.
fn script_exists(command: &str, path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    let node = Path::new(command).file_name().is_some_and(|p| p == "node");
    node && [".js", ".mjs", ".cjs", ".json", ".node"].iter().any(|ext| {
        let mut p = path.as_os_str().to_owned();
        p.push(ext);
        Path::new(&p).exists()
    })
}

#[cfg(test)]
mod tests {
    use super::script_of;

    fn script(command: &str, args: &[&str]) -> Option<String> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        script_of(command, &args).map(str::to_owned)
    }

    #[test]
    fn finds_the_script_of_plain_interpreter_command_lines() {
        assert_eq!(
            script("python", &["server.py"]).as_deref(),
            Some("server.py")
        );
        assert_eq!(
            script("/usr/bin/python3.12", &["-u", "s.py", "--port", "1"]).as_deref(),
            Some("s.py")
        );
        assert_eq!(
            script(".venv/bin/python", &["-B", "app/main.py"]).as_deref(),
            Some("app/main.py")
        );
        assert_eq!(
            script("node", &["--enable-source-maps", "dist/index.js"]).as_deref(),
            Some("dist/index.js")
        );
        assert_eq!(script("bash", &["-e", "run.sh"]).as_deref(), Some("run.sh"));
        assert_eq!(
            script("deno", &["run", "-A", "--allow-net=x", "main.ts"]).as_deref(),
            Some("main.ts")
        );
        assert_eq!(
            script("bun", &["run", "src/server.ts"]).as_deref(),
            Some("src/server.ts")
        );
        assert_eq!(
            script("uv", &["run", "server.py"]).as_deref(),
            Some("server.py")
        );
    }

    #[test]
    fn says_nothing_where_the_operand_need_not_be_a_file() {
        assert_eq!(script("python", &["-m", "mcp_server_git"]), None);
        assert_eq!(script("python3", &["-c", "print(1)"]), None);
        assert_eq!(script("python", &["-X", "utf8", "s.py"]), None);
        assert_eq!(script("python", &["-"]), None);
        assert_eq!(script("node", &["-e", "x"]), None);
        assert_eq!(
            script("node", &["--require", "ts-node/register", "s.ts"]),
            None
        );
        assert_eq!(script("sh", &["-c", "exec server"]), None);
        assert_eq!(script("deno", &["run", "https://x.dev/s.ts"]), None);
        assert_eq!(script("deno", &["run", "npm:@x/server"]), None);
        assert_eq!(script("deno", &["task", "serve"]), None);
        assert_eq!(script("bun", &["run", "dev"]), None);
        assert_eq!(script("bun", &["x", "some-server"]), None);
        assert_eq!(script("uv", &["run", "--with", "mcp", "s.py"]), None);
        assert_eq!(script("uv", &["run", "mcp-server-time"]), None);
        assert_eq!(
            script("npx", &["-y", "@modelcontextprotocol/server-everything"]),
            None
        );
        assert_eq!(script("pythonista", &["s.py"]), None);
        assert_eq!(script("python", &[]), None);
    }
}
