//! End-to-end loading tests: text in, `Config` or problems out.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::*;

const TOML_PATH: &str = "/proj/corral.toml";

fn env(name: &str) -> Option<String> {
    match name {
        "SEARCH_TOKEN" => Some("tok-1234".into()),
        "HOME" => Some("/home/me".into()),
        _ => None,
    }
}

fn load_toml(text: &str) -> Result<Config, ConfigError> {
    load_str(Path::new(TOML_PATH), text, &env)
}

fn problems(text: &str) -> Vec<Problem> {
    match load_toml(text) {
        Ok(_) => panic!("expected problems in:\n{text}"),
        Err(ConfigError::Invalid { problems, .. }) => problems,
        Err(other) => panic!("unexpected error {other}"),
    }
}

/// The one problem the text has.
fn problem(text: &str) -> Problem {
    let mut all = problems(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

#[test]
fn design_example_loads() {
    let text = r#"
[gateway]
listen = "127.0.0.1:7333"
tool_prefix = "always"

[defaults]
startup_timeout = "30s"
call_timeout = "30s"
restart = "on-failure"

[servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { DEBUG = "1" }
cwd = "tools/files"
max_concurrency = 1
tools = { allow = ["read_*"], deny = [] }
quiet = false

[servers.search]
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer ${env:SEARCH_TOKEN}" }

[processes.web]
command = "npm run dev"
cwd = "web"

[proxies.web]
target = "http://127.0.0.1:5173"
listen = "127.0.0.1:4173"
allowed_hosts = ["MyApp.test", "[::2]"]
"#;
    let config = load_toml(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.path, Path::new(TOML_PATH));
    assert_eq!(config.root, Path::new("/proj"));
    assert_eq!(config.state_dir, Path::new("/proj/.corral"));
    assert_eq!(config.format, Format::Toml);
    assert_eq!(config.gateway.tool_prefix, ToolPrefix::Always);
    assert_eq!(
        config.gateway.listen,
        crate::Listen::Addr("127.0.0.1:7333".into()),
        "an explicit listen is kept as written"
    );

    let files = config.server("files").unwrap();
    assert_eq!(
        files.transport,
        Transport::Stdio {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-filesystem".into(),
                ".".into()
            ],
            env: [("DEBUG".to_owned(), "1".to_owned())].into(),
            cwd: PathBuf::from("/proj/tools/files"),
        }
    );
    assert_eq!(files.max_concurrency, NonZeroU32::new(1));
    assert_eq!(files.tools.allow, vec!["read_*".to_owned()]);
    assert_eq!(files.stop_grace, Duration::from_secs(3));
    assert_eq!(files.crash_loop.max, 5);
    assert_eq!(files.crash_loop.window, Duration::from_secs(60));
    assert!(files.secrets.is_empty(), "DEBUG=1 is not a secret");

    let search = config.server("search").unwrap();
    let Transport::Http { headers, .. } = &search.transport else {
        panic!("search is http");
    };
    assert_eq!(headers["Authorization"], "Bearer tok-1234");
    assert_eq!(
        search.redact("sent Bearer tok-1234; token tok-1234"),
        "sent ***; token ***"
    );
    assert_eq!(config.redact("x tok-1234 y"), "x *** y");

    let web = &config.processes["web"];
    assert_eq!(web.command, ProcessCommand::Shell("npm run dev".into()));
    assert_eq!(web.cwd, Path::new("/proj/web"));
    assert_eq!(config.proxies["web"].listen, "127.0.0.1:4173");
    assert_eq!(config.proxies["web"].allowed_hosts, ["myapp.test", "[::2]"]);
}

#[test]
fn every_problem_is_reported_at_once_in_line_order() {
    let text = r#"[servers.files]
command = "npx"
restart = "sometimes"

[servers.search]
url = "http://x/mcp"
call_timeout = 30

[gateway]
tool_prefix = "sometimes"
"#;
    let all = problems(text);
    let located: Vec<(usize, usize, &str)> = all
        .iter()
        .map(|p| (p.line, p.column, p.key.as_str()))
        .collect();
    assert_eq!(
        located,
        vec![
            (3, 11, "servers.files.restart"),
            (7, 16, "servers.search.call_timeout"),
            (10, 15, "gateway.tool_prefix"),
        ],
        "{all:#?}"
    );
}

#[test]
fn display_format_is_file_line_column_key_message() {
    let text = "[servers.files]\ncommand = \"npx\"\nrestart = \"sometimes\"\n";
    let err = load_str(Path::new("corral.toml"), text, &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "corral.toml:3:11: servers.files.restart: unknown value \"sometimes\"; \
         expected one of never, on-failure, always"
    );
}

#[test]
fn unknown_key_names_key_and_suggests() {
    // The server also lacks `command`, but saying so would repeat the same mistake.
    let p = problem("[servers.files]\ncomand = \"npx\"\n");
    assert_eq!((p.line, p.column), (2, 1));
    assert_eq!(p.key, "servers.files.comand");
    assert_eq!(
        p.message,
        "unknown key `comand` in [servers.files]; did you mean `command`?"
    );

    let p = problem("colour = 1\n");
    assert!(
        p.message
            .starts_with("unknown key `colour` at the top level; expected one of: gateway"),
        "{p:?}"
    );
}

#[test]
fn command_and_url_are_exclusive() {
    let p = problem("[servers.x]\ncommand = \"a\"\nurl = \"http://b\"\n");
    assert_eq!((p.line, p.column, p.key.as_str()), (1, 10, "servers.x"));
    assert!(p.message.contains("both `command` and `url`"), "{p:?}");

    let p = problem("[servers.x]\nquiet = true\n");
    assert!(p.message.contains("neither `command`"), "{p:?}");

    let p = problem("[servers.x]\nurl = \"http://b\"\nargs = []\n");
    assert_eq!((p.line, p.key.as_str()), (3, "servers.x.args"));
    assert!(p.message.contains("only to stdio servers"), "{p:?}");
}

#[test]
fn env_expansion_and_missing_variables() {
    let text = r#"[servers.x]
command = "${env:HOME}/bin/srv"
args = ["--token", "${env:SEARCH_TOKEN}", "$$literal"]
env = { API_KEY = "${env:MISSING_KEY}", PLAIN = "$${env:HOME}" }
"#;
    let p = problem(text);
    assert_eq!((p.line, p.column), (4, 19));
    assert_eq!(p.key, "servers.x.env.API_KEY");
    assert_eq!(p.message, "environment variable MISSING_KEY is not set");

    let fixed = text.replace("MISSING_KEY", "SEARCH_TOKEN");
    let config = load_toml(&fixed).unwrap();
    let server = config.server("x").unwrap();
    let Transport::Stdio {
        command, args, env, ..
    } = &server.transport
    else {
        panic!("stdio");
    };
    assert_eq!(command, "/home/me/bin/srv");
    assert_eq!(args, &["--token", "tok-1234", "$literal"]);
    assert_eq!(env["PLAIN"], "${env:HOME}");
    assert_eq!(server.secrets, vec!["tok-1234".to_owned()]);
}

#[test]
fn unknown_substitution_suggests_env_form() {
    let p = problem("[servers.x]\ncommand = \"${HOME}/srv\"\n");
    assert_eq!(p.key, "servers.x.command");
    assert!(p.message.contains("write `${env:HOME}`"), "{p:?}");
}

#[test]
fn cwd_resolves_against_the_config_directory() {
    let cwd_of = |text: &str| match load_toml(text).unwrap().servers["x"].transport.clone() {
        Transport::Stdio { cwd, .. } => cwd,
        Transport::Http { .. } => panic!("stdio"),
    };
    assert_eq!(cwd_of("[servers.x]\ncommand = \"a\"\n"), Path::new("/proj"));
    assert_eq!(
        cwd_of("[servers.x]\ncommand = \"a\"\ncwd = \"./tools/../t\"\n"),
        Path::new("/proj/tools/../t")
    );
    assert_eq!(
        cwd_of("[servers.x]\ncommand = \"a\"\ncwd = \"/abs\"\n"),
        Path::new("/abs")
    );
    assert_eq!(
        cwd_of("[servers.x]\ncommand = \"a\"\ncwd = \"${env:HOME}/w\"\n"),
        Path::new("/home/me/w")
    );
}

#[test]
fn defaults_are_inherited_and_overridden() {
    let text = r#"[defaults]
startup_timeout = "2m"
restart = "always"
max_concurrency = 4
tools = { deny = ["rm_*"] }
crash_loop_window = "10s"

[servers.a]
command = "a"

[servers.b]
command = "b"
restart = "never"
startup_timeout = "500ms"
tools = { allow = ["*"] }
"#;
    let config = load_toml(text).unwrap();
    let a = config.server("a").unwrap();
    assert_eq!(a.startup_timeout, Duration::from_secs(120));
    assert_eq!(a.restart, RestartPolicy::Always);
    assert_eq!(a.max_concurrency, NonZeroU32::new(4));
    assert_eq!(a.tools.deny, vec!["rm_*".to_owned()]);
    assert_eq!(a.crash_loop.window, Duration::from_secs(10));
    assert_eq!(a.call_timeout, Duration::from_secs(30));
    let b = config.server("b").unwrap();
    assert_eq!(b.startup_timeout, Duration::from_millis(500));
    assert_eq!(b.restart, RestartPolicy::Never);
    assert_eq!(
        b.tools.deny,
        Vec::<String>::new(),
        "a server's tools replace the default"
    );
    assert_eq!(b.max_concurrency, NonZeroU32::new(4));
}

#[test]
fn defaults_cannot_hold_server_specific_keys() {
    let p = problem("[defaults]\ncommand = \"npx\"\n");
    assert_eq!(p.key, "defaults.command");
    assert!(p.message.contains("cannot be set in [defaults]"), "{p:?}");
}

#[test]
fn duration_errors() {
    let p = problem("[defaults]\ncall_timeout = 30\n");
    assert_eq!(
        p.message,
        r#"expected a duration string like "30s", found integer 30; write "30s" for seconds"#
    );
    let p = problem("[defaults]\ncall_timeout = \"30 parsecs\"\n");
    assert!(
        p.message.starts_with("invalid duration \"30 parsecs\": "),
        "{p:?}"
    );
    assert!(
        p.message.ends_with(r#"write e.g. "30s", "500ms" or "2m""#),
        "{p:?}"
    );
    let p = problem("[defaults]\nstartup_timeout = \"0s\"\n");
    assert_eq!(p.message, "must be longer than zero");
    let p = problem("[defaults]\nstop_grace = true\n");
    assert!(p.message.starts_with("expected a duration string"), "{p:?}");
    load_toml("[defaults]\nstop_grace = \"0s\"\n").expect("a zero grace is allowed");
}

#[test]
fn value_checks() {
    let p = problem("[defaults]\nmax_concurrency = 0\n");
    assert!(
        p.message
            .starts_with("must be at least 1; leave max_concurrency out"),
        "{p:?}"
    );
    let p = problem("[gateway]\nlisten = \"localhost\"\n");
    assert!(p.message.starts_with("invalid listen address"), "{p:?}");
    let p = problem("[servers.s]\nurl = \"ftp://x\"\n");
    assert!(
        p.message.starts_with("expected an http:// or https:// URL"),
        "{p:?}"
    );
    let p = problem("[proxies.p]\ntarget = \"https://x\"\n");
    assert!(p.message.starts_with("expected an http:// URL"), "{p:?}");
    let p = problem("[servers.s]\ncommand = \"x\"\ntools = { allow = [\"\"] }\n");
    assert_eq!(p.key, "servers.s.tools.allow[0]");
    let p = problem("[servers.s]\ncommand = \"x\"\nargs = [\"a\", 1]\n");
    assert_eq!((p.key.as_str(), p.column), ("servers.s.args[1]", 14));
    assert_eq!(p.message, "expected a string, found an integer");
    let p = problem("[processes.p]\ncwd = \"x\"\n");
    assert!(p.message.starts_with("missing `command`"), "{p:?}");
    let p = problem("[proxies.p]\ntarget = \"http://x\"\nallowed_hosts = [\"a.test:80\"]\n");
    assert_eq!(p.key, "proxies.p.allowed_hosts[0]");
    assert!(p.message.contains("not a host name"), "{p:?}");
    let p = problem("[proxies.p]\ntarget = \"http://x\"\nport = 1\n");
    assert_eq!(
        p.message,
        "unknown key `port` in [proxies.p]; expected one of: target, listen, preserve_host, inject, traffic_ring, allowed_hosts"
    );
}

#[test]
fn server_name_rules() {
    let p = problem("[servers.a__b]\ncommand = \"x\"\n");
    assert!(p.message.contains("must not contain \"__\""), "{p:?}");
    let p = problem("[servers.\"my.server\"]\ncommand = \"x\"\n");
    assert!(p.message.contains("may only contain letters"), "{p:?}");
    assert_eq!(p.key, "servers.\"my.server\"");
    let long = "a".repeat(65);
    let p = problem(&format!("[servers.{long}]\ncommand = \"x\"\n"));
    assert!(p.message.contains("the limit is 64"), "{p:?}");
    load_toml("[processes.a__b]\ncommand = \"x\"\n").expect("only server names use __");
}

#[test]
fn toml_syntax_error_is_a_single_located_problem() {
    let p = problem("[servers.x]\ncommand = \"unterminated\n");
    assert_eq!(p.line, 2, "{p:?}");
    assert_eq!(p.key, "");
}

#[test]
fn mcp_json_is_accepted_as_it_is() {
    let text = r#"{
  "mcpServers": {
    "files": {
      "command": "npx",
      "args": ["-y", "server", "${HOME}"],
      "env": {"GITHUB_TOKEN": "${GH_TOKEN:-none}"},
      "alwaysAllow": ["read"]
    },
    "remote": {"type": "http", "url": "https://example.com/mcp",
               "headers": {"X-Api-Key": "abcd-efgh"}},
    "old": {"command": "x", "disabled": true}
  },
  "otherTool": {"anything": 1}
}"#;
    let config = load_str(Path::new("/proj/.mcp.json"), text, &env).unwrap();
    assert_eq!(config.format, Format::McpJson);
    assert_eq!(config.root, Path::new("/proj"));
    assert_eq!(
        config.servers.keys().collect::<Vec<_>>(),
        ["files", "remote"]
    );
    let files = config.server("files").unwrap();
    let Transport::Stdio { args, env, .. } = &files.transport else {
        panic!("stdio");
    };
    assert_eq!(args[2], "/home/me");
    assert_eq!(env["GITHUB_TOKEN"], "none");
    assert_eq!(files.secrets, vec!["none".to_owned()]);
    assert_eq!(files.restart, RestartPolicy::OnFailure);
    assert_eq!(
        config.redact("key abcd-efgh"),
        "key ***",
        "header values are secrets"
    );
}

#[test]
fn mcp_json_problems_have_lines() {
    let text = r#"{
  "mcpServers": {
    "a": {"command": 3},
    "b": {"url": "http://x", "type": "stdio"},
    "c": {"args": ["x"]}
  }
}"#;
    let err = load_str(Path::new(".mcp.json"), text, &env).unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("{err}");
    };
    let located: Vec<(usize, &str)> = problems.iter().map(|p| (p.line, p.key.as_str())).collect();
    assert_eq!(
        located,
        vec![
            (3, "mcpServers.a.command"),
            (4, "mcpServers.b.type"),
            (5, "mcpServers.c")
        ],
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(".mcp.json:3:22: mcpServers.a.command: expected a string, found a number"),
        "{err}"
    );
}

#[test]
fn json_without_servers_is_explained() {
    let p = match load_str(Path::new("x.json"), "{\"foo\": 1}", &env) {
        Err(ConfigError::Invalid { problems, .. }) => problems[0].clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        p.message.contains("does not look like an MCP config"),
        "{p:?}"
    );
}

#[test]
fn vscode_format_with_inputs_and_workspace_folder() {
    let text = r#"{
  // VS Code allows comments
  "inputs": [{"type": "promptString", "id": "key"}],
  "servers": {
    "local": {"type": "stdio", "command": "${workspaceFolder}/bin/srv", "args": [],
              "cwd": "${workspaceFolder}/sub", "envFile": "x"},
    "web": {"type": "sse", "url": "http://127.0.0.1:1/sse",
            "headers": {"Authorization": "${input:key}"}},
  }
}"#;
    let path = Path::new("/proj/.vscode/mcp.json");
    let err = load_str(path, text, &env).unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(problems.len(), 1, "{err}");
    assert_eq!(problems[0].line, 8);
    assert_eq!(problems[0].key, "servers.web.headers.Authorization");
    assert!(problems[0].message.contains("input variables"), "{err}");

    let config = load_str(
        path,
        &text.replace("${input:key}", "${env:SEARCH_TOKEN}"),
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.format, Format::VsCode);
    assert_eq!(config.root, Path::new("/proj"));
    let Transport::Stdio { command, cwd, .. } = &config.server("local").unwrap().transport else {
        panic!("stdio");
    };
    assert_eq!(command, "/proj/bin/srv");
    assert_eq!(cwd, Path::new("/proj/sub"));
    assert!(matches!(
        &config.server("web").unwrap().transport,
        Transport::Http { url, transport: RemoteTransport::Sse, .. } if url == "http://127.0.0.1:1/sse"
    ));
}

#[test]
fn a_remote_servers_transport_is_read_checked_and_kept_to_remote_servers() {
    let transport = |toml: &str| match load_str(Path::new("/p/corral.toml"), toml, &env) {
        Ok(c) => match &c.server("r").unwrap().transport {
            Transport::Http { transport, .. } => Ok(*transport),
            Transport::Stdio { .. } => panic!("stdio"),
        },
        Err(ConfigError::Invalid { problems, .. }) => Err(problems[0].clone()),
        Err(e) => panic!("{e}"),
    };
    let url = "[servers.r]\nurl = \"http://127.0.0.1:1/mcp\"\n";
    assert_eq!(transport(url), Ok(RemoteTransport::Auto));
    assert_eq!(
        transport(&format!("{url}transport = \"sse\"\n")),
        Ok(RemoteTransport::Sse)
    );
    assert_eq!(
        transport(&format!("{url}transport = \"http\"\n")),
        Ok(RemoteTransport::StreamableHttp)
    );
    let p = transport(&format!("{url}transport = \"websocket\"\n")).unwrap_err();
    assert_eq!(p.key, "servers.r.transport");
    assert!(
        p.message.contains("auto, http, streamable-http, sse"),
        "{p:?}"
    );
    let p = problem("[servers.s]\ncommand = \"a\"\ntransport = \"sse\"\n");
    assert!(p.message.contains("only to remote servers"), "{p:?}");
}

#[test]
fn a_remote_servers_oauth_client_is_read_its_secret_redacted_and_kept_to_remote_servers() {
    let toml = "[servers.r]\nurl = \"https://x/mcp\"\n[servers.r.oauth]\nclient_id = \"corral-1\"\nclient_secret = \"${env:SEARCH_TOKEN}\"\nscope = \"read write\"\n";
    let c = load_str(Path::new("/p/corral.toml"), toml, &env).unwrap();
    let s = c.server("r").unwrap();
    let Transport::Http { oauth, .. } = &s.transport else {
        panic!("stdio")
    };
    assert_eq!(oauth.client_id.as_deref(), Some("corral-1"));
    assert_eq!(oauth.scope.as_deref(), Some("read write"));
    let secret = oauth.client_secret.clone().unwrap();
    assert!(
        s.secrets.contains(&secret),
        "the secret is redacted like headers"
    );
    assert!(!s.redact(&format!("it is {secret}")).contains(&secret));
    let p = problem("[servers.r]\nurl = \"https://x/mcp\"\noauth = { client = \"a\" }\n");
    assert_eq!(p.key, "servers.r.oauth.client");
    assert!(
        p.message.contains("client_id, client_secret, scope"),
        "{p:?}"
    );
    let p = problem("[servers.s]\ncommand = \"a\"\noauth = { client_id = \"a\" }\n");
    assert!(p.message.contains("only to remote servers"), "{p:?}");
}

#[test]
fn json_syntax_error_is_located() {
    let err = load_str(
        Path::new("/p/.mcp.json"),
        "{\n  \"mcpServers\": {,}\n}",
        &env,
    )
    .unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].line, 2, "{err}");
}

#[test]
fn load_reports_unreadable_files() {
    let err = load(Path::new("/nonexistent/corral.toml")).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    assert!(
        err.to_string()
            .starts_with("cannot read config file /nonexistent/corral.toml: "),
        "{err}"
    );
}

#[test]
fn corral_itself_is_a_problem_in_corral_toml() {
    let p = problem(
        "[servers.time]\ncommand = \"uvx\"\n\n[servers.me]\ncommand = \"corral\"\nargs = [\"-c\", \"x.toml\", \"mcp\"]\n",
    );
    assert_eq!((p.line, p.column), (5, 11), "{p:?}");
    assert_eq!(p.key, "servers.me.command");
    assert!(
        p.message
            .starts_with("server 'me' runs Corral itself (`corral -c x.toml mcp`)"),
        "{p:?}"
    );
    assert!(p.message.contains("remove the [servers.me] table"), "{p:?}");
}

#[test]
fn corral_itself_is_skipped_with_a_note_in_mcp_json() {
    let json = r#"{"mcpServers": {
        "corral": {"command": "corral", "args": ["mcp"]},
        "time": {"command": "uvx", "args": ["mcp-server-time"]}
    }}"#;
    let config = load_str(Path::new("/proj/.mcp.json"), json, &env).unwrap();
    assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["time"]);
    assert_eq!(config.notes.len(), 1, "{:?}", config.notes);
    assert!(
        config.notes[0].starts_with("server 'corral' runs Corral itself (`corral mcp`)"),
        "{:?}",
        config.notes
    );
}

// ---- processes ----

fn process(text: &str, name: &str) -> ProcessConfig {
    let config = load_toml(text).unwrap_or_else(|e| panic!("{e}"));
    config.processes[name].clone()
}

#[test]
fn a_process_has_defaults_for_every_key() {
    let web = process("[processes.web]\ncommand = \"npm run dev\"\n", "web");
    assert_eq!(
        web,
        ProcessConfig {
            name: "web".into(),
            command: ProcessCommand::Shell("npm run dev".into()),
            cwd: PathBuf::from("/proj"),
            env: Default::default(),
            secrets: vec![],
            restart: RestartPolicy::OnFailure,
            crash_loop: CrashLoop {
                max: 5,
                window: Duration::from_secs(60)
            },
            stop_grace: Duration::from_secs(3),
            quiet: false,
            autostart: true,
            depends_on: vec![],
            ready: None,
            pty: false,
            output_ring: 256 * 1024,
        }
    );
    assert_eq!(
        web.command.program_and_args(),
        ("sh", vec!["-c".to_owned(), "npm run dev".to_owned()])
    );
}

#[test]
fn a_process_command_is_a_shell_line_or_an_argv_array() {
    let text = r#"
[processes.api]
command = ["cargo", "watch", "-x", "run ${env:HOME}"]
"#;
    let api = process(text, "api");
    let argv: Vec<String> = ["cargo", "watch", "-x", "run /home/me"]
        .map(String::from)
        .to_vec();
    assert_eq!(api.command, ProcessCommand::Argv(argv.clone()));
    assert_eq!(
        api.command.program_and_args(),
        ("cargo", argv[1..].to_vec())
    );
    assert_eq!(api.command.to_string(), "cargo watch -x run /home/me");

    let p = problem("[processes.p]\ncommand = []\n");
    assert_eq!((p.key.as_str(), p.line), ("processes.p.command", 2));
    assert!(
        p.message
            .starts_with("is an empty array; write the program and its arguments, e.g. [\"cargo\""),
        "{p:?}"
    );
    let p = problem("[processes.p]\ncommand = \"  \"\n");
    assert!(
        p.message
            .starts_with("is empty; write the shell line to run"),
        "{p:?}"
    );
    let p = problem("[processes.p]\ncommand = [\"\", \"x\"]\n");
    assert_eq!(p.key, "processes.p.command[0]");
    assert!(p.message.starts_with("the program is empty"), "{p:?}");
    let p = problem("[processes.p]\ncommand = [\"a\", 1]\n");
    assert_eq!(p.key, "processes.p.command[1]");
    let p = problem("[processes.p]\ncommand = 3\n");
    assert!(
        p.message
            .starts_with("expected a shell line (a string) or a program"),
        "{p:?}"
    );
    let p = problem("[processes.p]\ncwd = \"x\"\n");
    assert!(
        p.message
            .contains(r#"command = ["cargo", "watch", "-x", "run"]"#),
        "{p:?}"
    );
}

#[test]
fn process_policy_keys_are_read_and_inherit_defaults() {
    let text = r#"
[defaults]
stop_grace = "7s"
crash_loop_max = 2
quiet = true
startup_timeout = "5s"

[processes.a]
command = "a"
restart = "always"
crash_loop_window = "10s"
quiet = false
autostart = false
pty = true
output_ring = "1MiB"

[processes.b]
command = "b"
restart = "never"
stop_grace = "0s"
output_ring = 65536
"#;
    let config = load_toml(text).unwrap_or_else(|e| panic!("{e}"));
    let a = &config.processes["a"];
    assert_eq!(a.restart, RestartPolicy::Always);
    assert_eq!(a.stop_grace, Duration::from_secs(7));
    assert_eq!(
        a.crash_loop,
        CrashLoop {
            max: 2,
            window: Duration::from_secs(10)
        }
    );
    assert!(!a.quiet && !a.autostart && a.pty);
    assert_eq!(a.output_ring, 1 << 20);
    let b = &config.processes["b"];
    assert_eq!(b.restart, RestartPolicy::Never);
    assert_eq!(b.stop_grace, Duration::ZERO);
    assert!(b.quiet, "inherited from [defaults]");
    assert!(b.autostart && !b.pty);
    assert_eq!(b.output_ring, 65536);
}

#[test]
fn server_only_keys_are_unknown_in_a_process() {
    let p = problem("[processes.p]\ncommand = \"x\"\ncall_timeout = \"5s\"\n");
    assert_eq!(p.key, "processes.p.call_timeout");
    assert!(
        p.message
            .starts_with("unknown key `call_timeout` in [processes.p]"),
        "{p:?}"
    );
    let p = problem("[processes.p]\ncommand = \"x\"\nrestart = \"sometimes\"\n");
    assert_eq!(
        p.message,
        "unknown value \"sometimes\"; expected one of never, on-failure, always"
    );
    let p = problem("[processes.p]\ncommand = \"x\"\npty = \"yes\"\n");
    assert_eq!(p.message, "expected true or false, found a string");
}

#[test]
fn output_ring_sizes() {
    let ring = |v: &str| {
        let text = format!("[processes.p]\ncommand = \"x\"\noutput_ring = {v}\n");
        load_toml(&text).map(|c| c.processes["p"].output_ring)
    };
    assert_eq!(ring("\"512KiB\"").unwrap(), 512 * 1024);
    assert_eq!(ring("\"64 mib\"").unwrap(), 64 << 20);
    assert_eq!(ring("\"8192\"").unwrap(), 8192);
    let message = |v: &str| {
        problem(&format!(
            "[processes.p]\ncommand = \"x\"\noutput_ring = {v}\n"
        ))
        .message
    };
    assert_eq!(
        message("\"1MB\""),
        r#"invalid size "1MB": write a binary unit (MiB) to say 1024-based; write e.g. "256KiB", "1MiB" or a number of bytes"#
    );
    assert_eq!(
        message("\"lots\""),
        r#"invalid size "lots": it does not start with a number; write e.g. "256KiB", "1MiB" or a number of bytes"#
    );
    assert!(message("\"2 furlongs\"").contains("unknown unit \"furlongs\""));
    assert_eq!(message("\"65MiB\""), "must be between 8KiB and 64MiB");
    assert_eq!(message("100"), "must be between 8KiB and 64MiB");
    assert_eq!(message("-1"), "must be between 8KiB and 64MiB");
    assert_eq!(
        message("\"99999999999999999999GiB\""),
        "must be between 8KiB and 64MiB"
    );
    assert_eq!(
        message("1.5"),
        r#"expected a size like "256KiB" or a number of bytes, found a float"#
    );
}

#[test]
fn readiness_checks() {
    let ready = |v: &str| {
        let text = format!("[processes.p]\ncommand = \"x\"\nready = {v}\n");
        load_toml(&text).unwrap_or_else(|e| panic!("{e}")).processes["p"]
            .ready
            .clone()
            .unwrap()
    };
    let r = ready(r#"{ log = 'ready in \d+ ms$' }"#);
    let ReadyCheck::Log(pattern) = &r.check else {
        panic!("{r:?}")
    };
    assert_eq!(pattern.as_str(), r"ready in \d+ ms$");
    assert!(pattern.0.is_match("VITE ready in 300 ms"));
    assert_eq!(r.timeout, Duration::from_secs(60));
    assert_eq!(
        ready(r#"{ tcp = "localhost:5173", timeout = "5s" }"#),
        Readiness {
            check: ReadyCheck::Tcp("localhost:5173".into()),
            timeout: Duration::from_secs(5)
        }
    );
    assert_eq!(
        ready("{ port = 5173 }").check,
        ReadyCheck::Tcp("127.0.0.1:5173".into())
    );
    assert_eq!(
        ready(r#"{ tcp = "[::1]:80" }"#).check,
        ReadyCheck::Tcp("[::1]:80".into())
    );
    assert_eq!(
        ready(r#"{ http = "http://127.0.0.1:5173/health" }"#).check,
        ReadyCheck::Http("http://127.0.0.1:5173/health".into())
    );
}

#[test]
fn readiness_problems() {
    let p = |v: &str| problem(&format!("[processes.p]\ncommand = \"x\"\nready = {v}\n"));
    let both = p(r#"{ log = "x", tcp = "127.0.0.1:1" }"#);
    assert_eq!(both.key, "processes.p.ready");
    assert_eq!((both.line, both.column), (3, 22), "at the second check");
    assert_eq!(
        both.message,
        "has both `log` and `tcp`; a readiness check is exactly one of `log`, `tcp`, `port` \
         and `http`; keep one (e.g. only `log`)"
    );
    let three = p(r#"{ log = "x", port = 1, http = "http://x" }"#);
    assert!(
        three
            .message
            .starts_with("has both `log`, `port` and `http`;"),
        "{three:?}"
    );
    assert!(
        p("{ timeout = \"5s\" }")
            .message
            .starts_with("names no check; write one of log = ")
    );
    assert_eq!(
        p(r#"{ tcp = "5173" }"#).message,
        r#"expected HOST:PORT like "127.0.0.1:5173", found "5173" (or write port = 5173 for 127.0.0.1)"#
    );
    assert_eq!(
        p("{ port = 70000 }").message,
        "port 70000 is not between 1 and 65535"
    );
    assert!(
        p(r#"{ http = "https://x/" }"#)
            .message
            .starts_with("readiness probes speak plain HTTP only")
    );
    assert!(
        p(r#"{ http = "x" }"#)
            .message
            .starts_with("expected a URL like")
    );
    assert!(
        p(r#"{ port = 1, timeout = "0s" }"#)
            .message
            .starts_with("must be longer than zero")
    );
    let unknown = p(r#"{ port = 1, timout = "5s" }"#);
    assert_eq!(unknown.key, "processes.p.ready.timout");
    assert!(
        unknown.message.contains("did you mean `timeout`?"),
        "{unknown:?}"
    );
    assert_eq!(p("\"x\"").message, "expected a table, found a string");
    assert!(
        p(r#"{ log = "" }"#)
            .message
            .starts_with("an empty pattern matches every line")
    );
}

#[test]
fn a_bad_log_regex_is_reported_with_its_position_and_a_fix() {
    let p = problem("[processes.p]\ncommand = \"x\"\nready = { log = 'listening (on' }\n");
    assert_eq!(
        (p.key.as_str(), p.line, p.column),
        ("processes.p.ready.log", 3, 17)
    );
    assert_eq!(
        p.message,
        r#"invalid regular expression "listening (on": unclosed group at character 11; escape characters meant literally with a backslash (in TOML, write '\(' in a 'literal string' or "\\(" in a basic one)"#
    );
    let p = problem("[processes.p]\ncommand = \"x\"\nready = { log = 'a{2,1}' }\n");
    assert!(p.message.contains("at character 2"), "{p:?}");
}

#[test]
fn depends_on_names_processes_and_servers() {
    let text = r#"
[servers.db]
command = "db-mcp"

[processes.web]
command = "web"
depends_on = ["api", "db"]

[processes.api]
command = "api"
depends_on = ["worker"]

[processes.worker]
command = "w"

[processes.docs]
command = "d"
"#;
    let config = load_toml(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.processes["web"].depends_on, ["api", "db"]);
    let order: Vec<&str> = config
        .start_order()
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(order, ["docs", "worker", "api", "web"]);
}

#[test]
fn an_unknown_dependency_names_what_exists() {
    let text = r#"
[servers.db]
command = "db-mcp"

[processes.web]
command = "web"
depends_on = ["db", "apii"]

[processes.api]
command = "api"
"#;
    let p = problem(text);
    assert_eq!(
        (p.key.as_str(), p.line, p.column),
        ("processes.web.depends_on[1]", 7, 21)
    );
    assert_eq!(
        p.message,
        r#"depends on "apii", which is neither a process nor a server; did you mean "api"? processes: api, web; servers: db"#
    );
    let p = problem("[processes.a]\ncommand = \"a\"\ndepends_on = [\"zzz\"]\n");
    assert_eq!(
        p.message,
        r#"depends on "zzz", which is neither a process nor a server; processes: a; servers: none"#
    );
    let p = problem(
        "[processes.a]\ncommand = \"a\"\ndepends_on = [\"b\", \"b\"]\n[processes.b]\ncommand = \"b\"\n",
    );
    assert_eq!(p.message, "\"b\" is listed twice; remove one");
    let p = problem("[processes.a]\ncommand = \"a\"\ndepends_on = \"b\"\n");
    assert!(
        p.message
            .starts_with("expected an array of process or server names"),
        "{p:?}"
    );
    let p = problem("[servers.s]\ncommand = \"a\"\ndepends_on = [\"b\"]\n");
    assert!(
        p.message
            .starts_with("unknown key `depends_on` in [servers.s]"),
        "{p:?}"
    );
}

#[test]
fn a_dependency_cycle_is_named() {
    let text = r#"
[processes.web]
command = "web"
depends_on = ["api"]

[processes.api]
command = "api"
depends_on = ["web"]

[processes.solo]
command = "s"
depends_on = ["solo"]
"#;
    let all = problems(text);
    let messages: Vec<(&str, &str)> = all
        .iter()
        .map(|p| (p.key.as_str(), p.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        [
            (
                "processes.api.depends_on[0]",
                "dependency cycle: api → web → api; none of them could ever start; remove one of these depends_on entries"
            ),
            (
                "processes.solo.depends_on[0]",
                "dependency cycle: solo → solo; none of them could ever start; remove one of these depends_on entries"
            ),
        ]
    );
    let text = "[processes.a]\ncommand = \"a\"\ndepends_on = [\"b\"]\n\
                [processes.b]\ncommand = \"b\"\ndepends_on = [\"c\"]\n\
                [processes.c]\ncommand = \"c\"\ndepends_on = [\"a\", \"b\"]\n";
    let messages: Vec<String> = problems(text).into_iter().map(|p| p.message).collect();
    assert!(
        messages[0].starts_with("dependency cycle: a → b → c → a;"),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("dependency cycle: b → c → b;"),
        "{messages:?}"
    );
}

#[test]
fn a_dependency_with_problems_of_its_own_is_still_known() {
    let text = r#"
[servers.db]
url = "ftp://x"

[processes.api]
command = "api"
pty = "yes"

[processes.web]
command = "web"
depends_on = ["api", "db"]
"#;
    let keys: Vec<String> = problems(text).into_iter().map(|p| p.key).collect();
    assert_eq!(keys, ["servers.db.url", "processes.api.pty"]);
}

#[test]
fn alerts_table_loads_with_defaults_for_what_is_left_out() {
    let text = r#"
[alerts]
window = "90s"
ring = 500
disable = ["python.traceback", "generic"]
patterns = [
  { regex = 'DB-(?P<msg>\d+)', severity = "warning", category = "myapp", id = "myapp.db" },
  { regex = 'PANIC' },
]
"#;
    let config = load_toml(text).unwrap_or_else(|e| panic!("{e}"));
    let alerts = &config.alerts;
    assert_eq!(alerts.window, Duration::from_secs(90));
    assert_eq!(alerts.ring, 500);
    assert_eq!(alerts.disable, vec!["python.traceback", "generic"]);
    assert_eq!(
        alerts.patterns,
        vec![
            AlertPattern {
                id: "myapp.db".into(),
                regex: r"DB-(?P<msg>\d+)".into(),
                severity: AlertSeverity::Warning,
                category: "myapp".into(),
            },
            AlertPattern {
                id: "custom.2".into(),
                regex: "PANIC".into(),
                severity: AlertSeverity::Error,
                category: "custom".into(),
            },
        ]
    );
    let none = load_toml("").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none.alerts, AlertSettings::default());
    assert_eq!(none.alerts.window, Duration::from_secs(60));
    assert_eq!(none.alerts.ring, 200);
}

#[test]
fn a_bad_alert_regex_is_reported_where_it_is_written_with_the_fix() {
    let p = problem("[alerts]\npatterns = [{ regex = 'panic: (unclosed' }]\n");
    assert_eq!((p.line, p.column), (2, 23));
    assert_eq!(p.key, "alerts.patterns[0].regex");
    assert!(
        p.message
            .starts_with(r#"invalid regex "panic: (unclosed": unclosed group; "#),
        "{p:?}"
    );
    assert!(p.message.contains("'…' literal string"), "{p:?}");
}

#[test]
fn alerts_problems_are_all_reported() {
    let text = r#"[alerts]
window = 60
ring = 0
disable = ["Python"]
patterns = [{ regex = "x", severity = "fatal", colour = 1 }, { severity = "error" }, { regex = "y", id = "a" }, { regex = "z", id = "a" }]
"#;
    let all = problems(text);
    let keys: Vec<&str> = all.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "alerts.window",
            "alerts.ring",
            "alerts.disable[0]",
            "alerts.patterns[0].severity",
            "alerts.patterns[0].colour",
            "alerts.patterns[1]",
            "alerts.patterns[3].id",
        ],
        "{all:#?}"
    );
    assert!(all[0].message.contains(r#"write "60s""#), "{:?}", all[0]);
    assert!(
        all[3].message.contains("expected one of error, warning"),
        "{:?}",
        all[3]
    );
    assert!(
        all[4]
            .message
            .starts_with("unknown key `colour` in [alerts.patterns[0]]"),
        "{:?}",
        all[4]
    );
    assert!(
        all[5].message.starts_with("missing `regex`"),
        "{:?}",
        all[5]
    );
    assert!(all[6].message.contains("already used"), "{:?}", all[6]);
}

#[test]
fn a_process_may_not_share_a_server_name() {
    let p = problem(
        r#"
[servers.db]
command = "db-mcp"

[processes.db]
command = "postgres"
"#,
    );
    assert_eq!(p.key, "processes.db");
    assert_eq!(p.line, 5, "{p:?}");
    assert!(p.message.contains("has the name of a server"), "{p:?}");
}

#[test]
fn errors_ignore_takes_noise_patterns_for_get_errors() {
    let cfg = load_str(
        Path::new("/p/corral.toml"),
        "[errors]\nignore = [\"/health\", \"*ResizeObserver loop*\"]\n",
        &|_: &str| None,
    )
    .unwrap();
    assert_eq!(cfg.error_noise, ["/health", "*ResizeObserver loop*"]);
    let p = problem("[errors]\nignore = [\"\"]\n");
    assert_eq!(p.key, "errors.ignore[0]");
    assert!(p.message.contains("must not be empty"), "{p:?}");
    let p = problem("[errors]\nhide = [\"x\"]\n");
    assert!(
        p.message
            .starts_with("unknown key `hide` in [errors]; expected one of: ignore"),
        "{p:?}"
    );
}

#[test]
fn profiles_load_and_decide_what_an_agent_is_offered() {
    let config = load_toml(
        r#"
[servers.files]
command = "npx"
[servers.web]
command = "npx"

[profiles.review]
servers = ["files"]
tools = { allow = ["files__read_*", "get_errors"], deny = ["*secret*"] }

[profiles.quiet]
builtin_tools = false
"#,
    )
    .unwrap();
    let review = &config.profiles["review"];
    assert_eq!(review.servers.as_deref(), Some(&["files".to_owned()][..]));
    assert!(review.offers(Some("files"), "files__read_file", true));
    assert!(
        !review.offers(Some("files"), "files__write_file", true),
        "not allowed"
    );
    assert!(
        !review.offers(Some("files"), "files__read_secret", true),
        "denied"
    );
    assert!(
        !review.offers(Some("web"), "files__read_x", true),
        "another server"
    );
    assert!(
        review.offers(None, "get_errors", true),
        "Corral's own, allowed"
    );
    assert!(
        !review.offers(None, "get_errors", false),
        "[gateway] turned them off"
    );
    assert!(
        !review.offers(None, "corral__servers", true),
        "not in allow"
    );
    let quiet = &config.profiles["quiet"];
    assert!(
        quiet.servers.is_none() && quiet.has_server("web"),
        "every server"
    );
    assert!(quiet.offers(Some("web"), "web__anything", true));
    assert!(!quiet.offers(None, "get_errors", true));
}

#[test]
fn profile_problems_name_the_key_and_the_fix() {
    let all = problems(
        r#"
[servers.files]
command = "npx"

[profiles.web]
servers = ["filez", 3]
builtin_tools = "yes"
tool = { allow = ["x"] }

[profiles."bad name"]
"#,
    );
    let text: Vec<String> = all
        .iter()
        .map(|p| format!("{}: {}", p.key, p.message))
        .collect();
    let has = |key: &str, part: &str| {
        assert!(
            text.iter().any(|t| t.starts_with(key) && t.contains(part)),
            "{key} / {part} in {text:#?}"
        )
    };
    has(
        "profiles.web.servers[0]",
        "did you mean \"files\"? servers: files",
    );
    has("profiles.web.servers[1]", "string");
    has("profiles.web.builtin_tools", "true or false");
    has("profiles.web.tool", "tools");
    has("profiles.\"bad name\"", "may only contain letters");
}
