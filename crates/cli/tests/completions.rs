//! `corral --version` names the commit, and `corral completions SHELL` gives scripts
//! that the real shells load and complete with: commands, clients, shells — and never
//! the internal commands.

mod common;
use common::*;
use std::process::Command;

fn script(shell: &str) -> String {
    let out = Command::new(corral())
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A file in a fresh temp dir holding `text`.
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("corral-completions-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn shell_out(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = shell_out(Command::new(corral()).arg("--version"));
    let head = Command::new("git")
        .args(["log", "-1", "--format=%h %cs", "--abbrev=12"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let commit = head.unwrap_or_else(|| "unknown commit".to_owned());
    assert_eq!(
        out.trim(),
        format!("corral {} ({commit})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn bash_completes_commands_clients_and_shells_but_no_internal_command() {
    let file = temp_file("corral.bash", &script("bash"));
    // What bash's completion asks the function, word by word.
    let complete = |words: &[&str]| {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let line = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _corral corral '{}' '{}'; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            quoted.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        shell_out(Command::new("bash").args(["--norc", "-c", &line]))
    };
    let top = complete(&["corral", ""]);
    for cmd in [
        "install",
        "uninstall",
        "completions",
        "errors",
        "mcp",
        "tools",
    ] {
        assert!(top.lines().any(|l| l == cmd), "{cmd} in {top}");
    }
    assert!(!top.contains("__"), "internal commands offered: {top}");
    assert_eq!(complete(&["corral", "ins"]).trim(), "install");
    assert_eq!(complete(&["corral", "install", "cl"]).trim(), "claude");
    assert_eq!(complete(&["corral", "uninstall", "wi"]).trim(), "windsurf");
    let shells = complete(&["corral", "completions", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.lines().any(|l| l == s), "{s} in {shells}");
    }
    assert_eq!(
        complete(&["corral", "errors", "--status", "res"]).trim(),
        "resolved"
    );
}

#[test]
fn fish_completes_commands_clients_and_shells_but_no_internal_command() {
    let file = temp_file("corral.fish", &script("fish"));
    let complete = |line: &str| {
        let cmd = format!("source '{}'; complete -C '{line}'", file.display());
        let out = shell_out(Command::new("fish").args(["--no-config", "-c", &cmd]));
        // `candidate<TAB>description` per line.
        out.lines()
            .map(|l| l.split('\t').next().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(complete("corral ins"), ["install"]);
    assert_eq!(complete("corral install cl"), ["claude"]);
    assert_eq!(complete("corral uninstall z"), ["zed"]);
    assert!(complete("corral completions ").contains(&"zsh".to_owned()));
    assert!(complete("corral __").is_empty());
}

#[test]
fn zsh_loads_the_completion_function() {
    let text = script("zsh");
    let file = temp_file("_corral", &text);
    shell_out(Command::new("zsh").arg("-n").arg(&file));
    let load = format!(
        "autoload -U compinit; compinit -u -D; source '{}'; whence -w _corral",
        file.display()
    );
    let out = shell_out(Command::new("zsh").args(["-f", "-c", &load]));
    assert_eq!(out.trim(), "_corral: function");
    // The clients and shells are offered as the positional values.
    assert!(
        text.contains("claude vscode cursor codex gemini windsurf zed"),
        "{text}"
    );
    assert!(!text.contains("__daemon"), "internal commands offered");
}
