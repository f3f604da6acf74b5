//! The command-line contract (DESIGN.md, "CLI").

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "corral",
    version,
    about = "Runs a project's MCP servers and dev processes, shared by every agent, and says what broke"
)]
pub struct Cli {
    /// Config file (else $CORRAL_CONFIG, else corral.toml searched upward, else .mcp.json).
    #[arg(short, long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented starter corral.toml (importing .mcp.json if present).
    Init {
        /// Overwrite an existing corral.toml.
        #[arg(long)]
        force: bool,
    },
    /// Load and validate the config; report every problem at once (exit 2 if any).
    Check {
        #[arg(long)]
        json: bool,
    },
    /// The aggregated tool list (namespaced names).
    Tools {
        /// Only this server's tools.
        server: Option<String>,
        #[arg(long)]
        json: bool,
        /// Run the servers in-process (the only mode of this version).
        #[arg(long)]
        standalone: bool,
    },
    /// Call one tool and print its result; exit 1 on a tool error.
    Call {
        server: String,
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        #[arg(long)]
        json: bool,
        #[arg(long)]
        standalone: bool,
    },
    /// The event stream.
    Events {
        /// Keep running and print events as they happen.
        #[arg(short, long)]
        follow: bool,
        #[arg(long)]
        json: bool,
        /// Run the servers in-process and show their events.
        #[arg(long)]
        standalone: bool,
    },
    /// Run the servers behind the Streamable HTTP endpoint (foreground, live console).
    Up,
    /// Stdio MCP endpoint for agents: every server's tools, resources and prompts.
    Mcp {
        /// Run the servers in this process (no daemon). This version has no daemon
        /// yet, so this is also what `corral mcp` does.
        #[arg(long)]
        standalone: bool,
    },
    /// Internal: the watchdog that kills the servers' process groups if corral dies.
    #[command(name = "__guard", hide = true)]
    Guard,
}
