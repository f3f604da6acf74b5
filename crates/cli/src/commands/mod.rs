//! One module per command; [`dispatch`] is the single `match`.

mod call;
mod check;
mod events;
mod init;
mod mcp;
mod tools;
mod up;

use crate::CmdResult;
use crate::args::{Cli, Command};

/// Runs the parsed command.
pub async fn dispatch(cli: Cli) -> CmdResult {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Init { force } => init::run(force),
        Command::Check { json } => check::run(config, json),
        Command::Tools {
            server,
            json,
            standalone: _,
        } => tools::run(config, server.as_deref(), json).await,
        Command::Call {
            server,
            tool,
            arguments,
            json,
            standalone: _,
        } => call::run(config, &server, &tool, &arguments, json).await,
        Command::Events {
            follow,
            json,
            standalone,
        } => events::run(config, follow, json, standalone).await,
        Command::Up => up::run(config).await,
        Command::Mcp { standalone } => mcp::run(config, standalone).await,
        Command::Guard => unreachable!("handled before the runtime starts"),
    }
}
