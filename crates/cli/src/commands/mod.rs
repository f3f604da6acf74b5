//! One module per command; [`dispatch`] is the single `match`.

mod auth;
mod call;
mod check;
mod completions;
mod ctl;
mod dashboard;
mod errors;
mod events;
mod init;
mod install;
mod mcp;
mod proxy;
mod run;
mod tools;
mod up;

use crate::CmdResult;
use crate::args::{Cli, Command};
pub(crate) use install::client_names;

/// Runs the parsed command.
pub async fn dispatch(cli: Cli) -> CmdResult {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Init { force } => init::run(config, force),
        Command::Check { json } => check::run(config, json),
        Command::Up {
            detach,
            allow_widened_access,
        } => up::run(config, detach, allow_widened_access).await,
        Command::Down => up::down(config).await,
        Command::Reload { json } => ctl::reload(config, json).await,
        Command::Daemon {
            allow_widened_access,
        } => up::daemon(config, allow_widened_access).await,
        Command::Mcp {
            standalone,
            profile,
        } => mcp::run(config, standalone, profile).await,
        Command::Ps { json } => ctl::ps(config, json).await,
        Command::Tools {
            server,
            profile,
            tokens,
            json,
            standalone,
        } => {
            let view = tools::View {
                server: server.as_deref(),
                profile: profile.as_deref(),
                tokens,
                json,
            };
            tools::run(config, view, standalone).await
        }
        Command::Call {
            target,
            second,
            arguments,
            json,
            standalone,
        } => {
            let (server, tool, arguments) = call::forms(target, second, arguments)?;
            call::run(
                config,
                server.as_deref(),
                &tool,
                &arguments,
                json,
                standalone,
            )
            .await
        }
        Command::Logs {
            name,
            follow,
            lines,
            json,
        } => ctl::logs(config, &name, follow, lines, json).await,
        Command::Dashboard { no_browser } => dashboard::run(config, no_browser).await,
        Command::Auth {
            name,
            logout,
            no_browser,
            wait,
        } => auth::auth(config, &name, logout, !no_browser, wait).await,
        Command::Restart { name, json } => ctl::lifecycle(config, "restart", &name, json).await,
        Command::Stop { name, json } => ctl::lifecycle(config, "stop", &name, json).await,
        Command::Start { name, json } => ctl::lifecycle(config, "start", &name, json).await,
        Command::Run {
            name,
            command,
            follow,
            standalone,
            json,
        } => run::run(config, &name, command, follow, standalone, json).await,
        Command::Proxy {
            name,
            target,
            listen,
            no_inject,
            stop,
            log,
            errors,
            lines,
            standalone,
            json,
        } => {
            let action = match (stop, log, standalone) {
                (true, _, _) => proxy::Action::Stop,
                (_, true, _) => proxy::Action::Log { errors, lines },
                (_, _, true) => proxy::Action::Standalone,
                _ => proxy::Action::Start,
            };
            let spec = proxy::Wanted {
                name,
                target,
                listen,
                inject: !no_inject,
            };
            proxy::run(config, action, spec, json).await
        }
        Command::Events {
            follow,
            json,
            lines,
            standalone,
        } => events::run(config, follow, json, lines, standalone).await,
        Command::Errors {
            source,
            since,
            status,
            limit,
            no_warnings,
            verbose,
            json,
            raw,
            standalone,
        } => {
            let args = serde_json::json!({
                "source": source,
                "since": since,
                "status": status,
                "limit": limit,
                "include_warnings": !no_warnings,
                "verbose": verbose,
                "raw": raw,
            });
            errors::run(config, args, json, standalone).await
        }
        Command::Install {
            clients,
            user,
            dry_run,
            detect,
            import,
            profile,
            force,
        } => install::install(
            config,
            install::Options {
                clients,
                user,
                dry_run,
                detect,
                import,
                profile,
                force,
            },
        ),
        Command::Uninstall {
            clients,
            user,
            dry_run,
        } => install::uninstall(config, clients, user, dry_run),
        Command::Completions { shell } => {
            print!("{}", completions::script(shell));
            Ok(())
        }
        Command::Guard | Command::Remote => unreachable!("handled before the runtime starts"),
    }
}
