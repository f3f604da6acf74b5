//! `corral install` / `corral uninstall` through the real binary, with HOME,
//! XDG_CONFIG_HOME, CODEX_HOME and PATH pointed at temp dirs (never the real home).

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A project with a corral.toml and a fake home beside it.
struct Env {
    p: Project,
    home: PathBuf,
    path: String,
}

impl Env {
    fn new() -> Env {
        let p = Project::new("[servers]\n\n[profiles.dev]\nservers = []\n");
        let home = p.dir.join(".home");
        std::fs::create_dir_all(&home).unwrap();
        let bin = p.dir.join(".bin");
        std::fs::create_dir_all(&bin).unwrap();
        Env {
            path: bin.display().to_string(),
            p,
            home,
        }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.p.cmd(args);
        c.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("PATH", &self.path);
        c
    }
    fn run(&self, args: &[&str]) -> Run {
        let out = self.cmd(args).output().unwrap();
        Run(out)
    }
    fn ok(&self, args: &[&str]) -> Run {
        let r = self.run(args);
        assert_eq!(r.code(), 0, "corral {args:?}: {r:?}");
        r
    }
    fn file(&self, rel: &str) -> PathBuf {
        self.p.dir.join(rel)
    }
}

/// name, project file, key, syntax ("json", "jsonc", "toml").
const CLIENTS: &[(&str, &str, &str, &str)] = &[
    ("claude", ".mcp.json", "mcpServers", "json"),
    ("vscode", ".vscode/mcp.json", "servers", "jsonc"),
    ("cursor", ".cursor/mcp.json", "mcpServers", "json"),
    ("codex", ".codex/config.toml", "mcp_servers", "toml"),
    ("gemini", ".gemini/settings.json", "mcpServers", "jsonc"),
    ("zed", ".zed/settings.json", "context_servers", "jsonc"),
];

/// The file parsed under the client's rules: strict JSON with serde_json, JSONC with
/// comments and trailing commas blanked first (what corral_config does), TOML with toml.
fn parse(syntax: &str, text: &str) -> Value {
    match syntax {
        "json" => serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}")),
        "jsonc" => {
            let clean: String = text
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with("//") {
                        ""
                    } else {
                        l.split(" //").next().unwrap()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                .replace(",\n}", "\n}")
                .replace(",}", "}");
            let clean = regex_free_trailing_commas(&clean);
            serde_json::from_str(&clean).unwrap_or_else(|e| panic!("{e}: {clean}"))
        }
        _ => {
            let v: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            serde_json::to_value(v).unwrap()
        }
    }
}

fn regex_free_trailing_commas(s: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn corral_entry<'a>(doc: &'a Value, key: &str) -> &'a Value {
    &doc[key]["corral"]
}

#[test]
fn each_client_fresh_install_has_the_documented_shape_and_uninstall_removes_it() {
    let e = Env::new();
    for (name, rel, key, syntax) in CLIENTS {
        let r = e.ok(&["install", name]);
        assert!(r.stdout().contains("created"), "{name}: {r:?}");
        let text = std::fs::read_to_string(e.file(rel)).unwrap();
        let doc = parse(syntax, &text);
        let entry = corral_entry(&doc, key);
        assert_eq!(
            entry["command"],
            corral().display().to_string(),
            "{name}: {text}"
        );
        assert_eq!(entry["args"], serde_json::json!(["mcp"]), "{name}: {text}");
        let expected_keys: &[&str] = if *name == "vscode" {
            &["args", "command", "type"]
        } else {
            &["args", "command"]
        };
        let keys: Vec<&str> = entry
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, expected_keys, "{name}: {text}");
        if *name == "vscode" {
            assert_eq!(entry["type"], "stdio");
        }
        // Idempotent.
        let again = e.ok(&["install", name]);
        assert!(
            again.stdout().contains("already installed"),
            "{name}: {again:?}"
        );
        assert_eq!(
            std::fs::read_to_string(e.file(rel)).unwrap(),
            text,
            "{name}"
        );
        // A profile the config lacks is refused: the entry would fail at every start.
        let r = e.run(&["install", name, "--profile", "deev"]);
        assert_eq!(r.code(), 2, "{name}: {r:?}");
        assert!(r.stderr().contains("did you mean 'dev'?"), "{name}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(e.file(rel)).unwrap(),
            text,
            "{name}"
        );
        // A new profile updates the entry in place.
        e.ok(&["install", name, "--profile", "dev"]);
        let doc = parse(syntax, &std::fs::read_to_string(e.file(rel)).unwrap());
        assert_eq!(
            corral_entry(&doc, key)["args"],
            serde_json::json!(["mcp", "--profile", "dev"]),
            "{name}"
        );
        // Uninstall removes the file install created, and the directory it made.
        let r = e.ok(&["uninstall", name]);
        assert!(r.stdout().contains("removed"), "{name}: {r:?}");
        assert!(!e.file(rel).exists(), "{name}");
        if rel.contains('/') {
            assert!(!e.file(rel).parent().unwrap().exists(), "{name}: dir left");
        }
    }
}

#[test]
fn windsurf_writes_its_user_file_naming_the_config() {
    let e = Env::new();
    let r = e.ok(&["install", "windsurf"]);
    assert!(r.stdout().contains("has no project file"), "{r:?}");
    let file = e.home.join(".codeium/windsurf/mcp_config.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let config = e.p.dir.join("corral.toml").display().to_string();
    assert_eq!(
        doc["mcpServers"]["corral"]["args"],
        serde_json::json!(["-c", config, "mcp"])
    );
    e.ok(&["uninstall", "windsurf"]);
    assert!(!file.exists());
    assert!(!e.home.join(".codeium").exists());
    assert!(e.home.exists());
}

/// Existing files with other servers, comments (where the client allows them), trailing
/// commas and unusual indentation.
fn existing(name: &str) -> &'static str {
    match name {
        "claude" | "cursor" => {
            "{\n\t\"mcpServers\":   {\n\t\t\"other\": { \"command\": \"x\", \"args\": [\"1\"] }\n\t},\n\t\"keep\": true\n}"
        }
        "codex" => {
            "# my codex config\nmodel = \"o3\"  # the model\n\n[mcp_servers.other]\ncommand = \"x\"   # run x\nargs = [ \"1\" ]\n"
        }
        _ => {
            "// settings\n{\n      \"theme\": \"dark\", // mine\n      \"SERVERS\": {\n            \"other\": { \"command\": \"x\", },\n      },\n}\n"
        }
    }
}

#[test]
fn install_into_existing_files_keeps_everything_and_uninstall_restores_bytes() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    for (name, rel, key, syntax) in CLIENTS {
        let original = existing(name).replace("SERVERS", key);
        let path = e.file(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &original).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();

        // Dry run: a diff, nothing written.
        let r = e.ok(&["install", name, "--dry-run"]);
        assert!(r.stdout().contains("+"), "{name}: {r:?}");
        assert!(r.stdout().contains("corral"), "{name}: {r:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original, "{name}");
        let backup = PathBuf::from(format!("{}.corral-backup", path.display()));
        assert!(!backup.exists(), "{name}");

        let r = e.ok(&["install", name]);
        assert!(r.stdout().contains(".corral-backup"), "{name}: {r:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = parse(syntax, &text);
        assert_eq!(doc[key]["other"]["command"], "x", "{name}: {text}");
        assert_eq!(
            corral_entry(&doc, key)["args"],
            serde_json::json!(["mcp"]),
            "{name}"
        );
        for kept in [
            "// settings",
            "// mine",
            "# my codex config",
            "# run x",
            "\t\"keep\": true",
        ] {
            if original.contains(kept) {
                assert!(text.contains(kept), "{name}: lost {kept:?}: {text}");
            }
        }
        assert_eq!(
            std::fs::read_to_string(&backup).unwrap(),
            original,
            "{name}"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&backup), 0o600, "{name}");
        assert_eq!(mode(&path), 0o600, "{name}");

        let again = e.ok(&["install", name]);
        assert!(again.stdout().contains("already installed"), "{name}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{name}");

        let r = e.ok(&["uninstall", name]);
        assert!(r.stdout().contains("restored"), "{name}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            original,
            "{name}: not byte for byte"
        );
        assert!(!backup.exists(), "{name}");
        assert_eq!(mode(&path), 0o600, "{name}");
    }
}

#[test]
fn uninstall_after_other_edits_removes_only_the_entry() {
    let e = Env::new();
    let path = e.file(".mcp.json");
    std::fs::write(&path, existing("claude")).unwrap();
    e.ok(&["install", "claude"]);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"keep\": true", "\"keep\": false");
    std::fs::write(&path, &text).unwrap();
    let r = e.ok(&["uninstall", "claude"]);
    assert!(r.stdout().contains("is kept"), "{r:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(doc["mcpServers"].get("corral").is_none(), "{doc}");
    assert_eq!(doc["keep"], false);
    assert_eq!(doc["mcpServers"]["other"]["command"], "x");
}

#[test]
fn broken_files_are_reported_with_file_and_line_and_left_alone() {
    let e = Env::new();
    for (name, rel, body) in [
        (
            "claude",
            ".mcp.json",
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n",
        ),
        (
            "vscode",
            ".vscode/mcp.json",
            "{\n  \"servers\": {\n    \"a\": {\"command\" \"x\"}\n  }\n}\n",
        ),
        (
            "codex",
            ".codex/config.toml",
            "model = \"o3\"\n[mcp_servers.a\ncommand = \"x\"\n",
        ),
    ] {
        let path = e.file(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        for args in [vec!["install", name], vec!["uninstall", name]] {
            let r = e.run(&args);
            assert_eq!(r.code(), 2, "{name}: {r:?}");
            let err = r.stderr();
            assert!(
                err.contains(&format!("{}:", path.display())),
                "{name}: {err}"
            );
            assert!(
                err.contains(":3:") || err.contains(":2:"),
                "{name}: line: {err}"
            );
            assert!(err.contains("nothing was changed"), "{name}: {err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), body, "{name}");
        }
        assert!(!PathBuf::from(format!("{}.corral-backup", path.display())).exists());
    }
}

#[test]
fn unknown_client_and_missing_project_are_usage_errors() {
    let e = Env::new();
    let r = e.run(&["install", "emacs"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(
        r.stderr()
            .contains("claude, vscode, cursor, codex, gemini, windsurf, zed"),
        "{r:?}"
    );
    std::fs::remove_file(e.file("corral.toml")).unwrap();
    let r = e.run(&["install", "claude"]);
    assert_eq!(r.code(), 2, "{r:?}");
    assert!(r.stderr().contains("corral init"), "{r:?}");
}

#[test]
fn a_users_own_server_named_corral_is_not_overwritten_silently() {
    let e = Env::new();
    let body = "{\"mcpServers\": {\"corral\": {\"command\": \"my-corral-tool\"}}}\n";
    std::fs::write(e.file(".mcp.json"), body).unwrap();
    let r = e.run(&["install", "claude"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert!(r.stderr().contains("not Corral"), "{r:?}");
    assert!(r.stderr().contains("my-corral-tool"), "{r:?}");
    assert_eq!(std::fs::read_to_string(e.file(".mcp.json")).unwrap(), body);
    let r = e.run(&["uninstall", "claude"]);
    assert_eq!(r.code(), 1, "{r:?}");
    assert_eq!(std::fs::read_to_string(e.file(".mcp.json")).unwrap(), body);
    let r = e.ok(&["install", "claude", "--force"]);
    assert!(r.stdout().contains("replaced"), "{r:?}");
}

#[test]
fn a_symlinked_client_file_is_edited_at_its_target() {
    let e = Env::new();
    let real = e.p.dir.join("dotfiles/mcp.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    let body = "{\"mcpServers\": {}}\n";
    std::fs::write(&real, body).unwrap();
    std::os::unix::fs::symlink(&real, e.file(".mcp.json")).unwrap();
    let r = e.ok(&["install", "claude"]);
    assert!(r.stdout().contains("symlink"), "{r:?}");
    assert!(
        std::fs::symlink_metadata(e.file(".mcp.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::read_to_string(&real).unwrap().contains("corral"));
    e.ok(&["uninstall", "claude"]);
    assert_eq!(std::fs::read_to_string(&real).unwrap(), body);
    assert!(
        std::fs::symlink_metadata(e.file(".mcp.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn detect_finds_clients_by_path_and_config_dir() {
    use std::os::unix::fs::PermissionsExt;
    let e = Env::new();
    for stub in ["claude", "codex"] {
        let p = e.p.dir.join(".bin").join(stub);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(e.home.join(".gemini")).unwrap();
    let r = e.ok(&["install", "--detect"]);
    let out = r.stdout();
    assert!(
        out.contains("found Claude Code (claude): `claude` on PATH"),
        "{out}"
    );
    assert!(
        out.contains("found Codex (codex): `codex` on PATH"),
        "{out}"
    );
    assert!(
        out.contains("found Gemini CLI (gemini): its config directory"),
        "{out}"
    );
    assert!(out.contains("not found: Cursor"), "{out}");
    assert!(e.file(".mcp.json").exists());
    assert!(e.file(".codex/config.toml").exists());
    assert!(e.file(".gemini/settings.json").exists());
    assert!(!e.file(".cursor").exists());
    assert!(!e.file(".vscode").exists());
}

#[test]
fn user_scope_honours_home_and_codex_home() {
    let e = Env::new();
    let codex_home = e.p.dir.join(".codexhome");
    let r = e
        .cmd(&["install", "codex", "claude", "--user"])
        .env("CODEX_HOME", &codex_home)
        .output()
        .unwrap();
    assert!(r.status.success(), "{:?}", Run(r));
    let codex: toml::Value =
        toml::from_str(&std::fs::read_to_string(codex_home.join("config.toml")).unwrap()).unwrap();
    assert_eq!(
        codex["mcp_servers"]["corral"]["args"][0].as_str(),
        Some("mcp")
    );
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(e.home.join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        claude["mcpServers"]["corral"]["args"],
        serde_json::json!(["mcp"])
    );
    assert!(!e.file(".mcp.json").exists());
}

/// --import per format family: the fixture as a stdio server with a variable reference
/// in the client's own syntax, and a remote entry in the client's own URL key.
#[test]
fn import_moves_servers_into_corral_toml_keeping_references() {
    let fx = fixture().display().to_string();
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "claude",
            ".mcp.json",
            format!(
                r#"{{"mcpServers": {{"fx": {{"command": "{fx}", "env": {{"API_TOKEN": "${{TOKEN}}"}}}}, "web": {{"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {{"Authorization": "Bearer ${{TOKEN}}"}}}}}}, "other": 1}}"#
            ),
            "${env:TOKEN}",
        ),
        (
            "vscode",
            ".vscode/mcp.json",
            format!(
                "{{\n  // mine\n  \"servers\": {{\"fx\": {{\"type\": \"stdio\", \"command\": \"{fx}\", \"env\": {{\"API_TOKEN\": \"${{env:TOKEN}}\"}}}},}},\n  \"inputs\": [],\n}}\n"
            ),
            "${env:TOKEN}",
        ),
        (
            "codex",
            ".codex/config.toml",
            format!(
                "# codex\nmodel = \"o3\"\n\n[mcp_servers.fx]\ncommand = \"{fx}\"\nenv_vars = [\"TOKEN\"]\n\n[mcp_servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"TOKEN\"\n"
            ),
            "${env:TOKEN}",
        ),
        (
            "zed",
            ".zed/settings.json",
            format!(
                "{{\n  \"theme\": \"dark\", // mine\n  \"context_servers\": {{\"fx\": {{\"command\": \"{fx}\", \"args\": [], \"env\": {{\"LEVEL\": \"1\"}}}}}}\n}}\n"
            ),
            "LEVEL = \"1\"",
        ),
        (
            "gemini",
            ".gemini/settings.json",
            format!(
                r#"{{"mcpServers": {{"fx": {{"command": "{fx}", "env": {{"API_TOKEN": "$TOKEN"}}}}, "web": {{"httpUrl": "http://127.0.0.1:9/mcp"}}}}}}"#
            ),
            "${env:TOKEN}",
        ),
    ];
    for (name, rel, body, reference) in cases {
        let e = Env::new();
        let path = e.file(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &body).unwrap();
        let r = e.ok(&["install", name, "--import"]);
        assert!(r.stdout().contains("imported from"), "{name}: {r:?}");
        let toml_text = std::fs::read_to_string(e.file("corral.toml")).unwrap();
        assert!(toml_text.contains("[servers.fx]"), "{name}: {toml_text}");
        assert!(toml_text.contains(reference), "{name}: {toml_text}");
        if body.contains("127.0.0.1:9") {
            assert!(
                toml_text.contains("[servers.web]\nurl = \"http://127.0.0.1:9/mcp\""),
                "{name}: {toml_text}"
            );
        }
        let check = e.cmd(&["check"]).env("TOKEN", "t0k").output().unwrap();
        assert!(check.status.success(), "{name}: {:?}", Run(check));
        let tools = e
            .cmd(&["tools", "fx", "--standalone"])
            .env("TOKEN", "t0k")
            .output()
            .unwrap();
        let tools = Run(tools);
        assert_eq!(tools.code(), 0, "{name}: {tools:?}");
        assert!(tools.stdout().contains("fx__echo"), "{name}: {tools:?}");

        let syntax = CLIENTS.iter().find(|c| c.0 == name).unwrap();
        let client = std::fs::read_to_string(&path).unwrap();
        let doc = parse(syntax.3, &client);
        let servers: Vec<&String> = doc[syntax.2].as_object().unwrap().keys().collect();
        assert_eq!(servers, ["corral"], "{name}: {client}");
        for kept in ["// mine", "# codex", "\"other\": 1", "\"inputs\""] {
            if body.contains(kept) {
                assert!(client.contains(kept), "{name}: lost {kept}: {client}");
            }
        }
        // A second run changes nothing.
        let r = e.ok(&["install", name, "--import"]);
        assert!(r.stdout().contains("already installed"), "{name}: {r:?}");
        // Uninstall gives the client its own servers back, byte for byte (they stay in
        // corral.toml too).
        let r = e.ok(&["uninstall", name]);
        assert!(r.stdout().contains("restored from"), "{name}: {r:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), body, "{name}");
        assert!(
            std::fs::read_to_string(e.file("corral.toml"))
                .unwrap()
                .contains("[servers.fx]")
        );
    }
}

#[test]
fn windsurf_import_takes_server_url_and_warns_of_literal_secrets() {
    let e = Env::new();
    let path = e.home.join(".codeium/windsurf/mcp_config.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"mcpServers": {"web": {"serverUrl": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cr3t-value"}}}}"#,
    )
    .unwrap();
    std::fs::write(
        e.file("corral.toml"),
        "# my config\n[servers.web]\ncommand = \"keep-me\"\n",
    )
    .unwrap();
    let r = e.ok(&["install", "windsurf", "--import"]);
    assert!(r.stdout().contains("in corral.toml already"), "{r:?}");
    // Name taken: skipped, the entry stays in the client's file.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(doc["mcpServers"].get("web").is_some());
    assert!(doc["mcpServers"].get("corral").is_some());

    std::fs::write(e.file("corral.toml"), "# my config\n").unwrap();
    e.ok(&["uninstall", "windsurf"]);
    let r = e.ok(&["install", "windsurf", "--import"]);
    let toml_text = std::fs::read_to_string(e.file("corral.toml")).unwrap();
    assert!(toml_text.starts_with("# my config\n"), "{toml_text}");
    assert!(
        toml_text.contains("url = \"http://127.0.0.1:9/mcp\""),
        "{toml_text}"
    );
    assert!(
        r.stderr()
            .contains("headers.Authorization is a literal value"),
        "{r:?}"
    );
    assert!(!r.stderr().contains("s3cr3t"), "{r:?}");
    assert!(!r.stdout().contains("s3cr3t"), "{r:?}");
    e.ok(&["check"]);
}

#[test]
fn import_without_corral_toml_creates_one_from_the_init_template() {
    let e = Env::new();
    std::fs::remove_file(e.file("corral.toml")).unwrap();
    let fx = fixture().display().to_string();
    std::fs::write(
        e.file(".mcp.json"),
        format!(r#"{{"mcpServers": {{"fx": {{"command": "{fx}"}}}}}}"#),
    )
    .unwrap();
    e.ok(&["install", "claude", "--import"]);
    let toml_text = std::fs::read_to_string(e.file("corral.toml")).unwrap();
    assert!(toml_text.contains("[gateway]"), "{toml_text}");
    assert!(toml_text.contains("[servers.fx]"), "{toml_text}");
    e.ok(&["check"]);
}

/// Claude Code's own parser reads what `corral install claude` writes: `claude mcp list`
/// (the pinned peer from scripts/install-peers.sh, offline, HOME in a temp dir, no login)
/// lists the corral entry.
#[test]
fn claude_code_lists_the_installed_entry() {
    let claude = repo().join(".peers/claude-code/node_modules/.bin/claude");
    assert!(
        claude.exists(),
        "{} missing: real peers are not installed: run ./scripts/install-peers.sh \
         (./scripts/test.sh does)",
        claude.display()
    );
    let e = Env::new();
    e.ok(&["install", "claude"]);
    // It may health-check the entry by starting `corral mcp`: stop any daemon that started.
    let _down = DownIn(&e);
    let mut child = Command::new(&claude)
        .args(["mcp", "list"])
        .current_dir(&e.p.dir)
        .env("HOME", &e.home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("claude mcp list did not finish within 90s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = Run(child.wait_with_output().unwrap());
    assert_eq!(out.code(), 0, "{out:?}");
    let line = format!("corral: {} mcp", corral().display());
    assert!(out.stdout().contains(&line), "{out:?}");
}

/// `corral down` in the project when the test ends.
struct DownIn<'a>(&'a Env);

impl Drop for DownIn<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["down"]);
    }
}
