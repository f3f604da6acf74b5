//! `corral completions SHELL`: a completion script from the command line's own
//! definition (clap_complete), so it cannot fall behind the commands.

use clap::{Command, CommandFactory};
use clap_complete::Shell;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    // Without the internal commands: clap_complete offers hidden subcommands too.
    let full = crate::args::Cli::command();
    let mut cmd = Command::new("corral")
        .version(crate::args::VERSION)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "corral", &mut out);
    let mut script = String::from_utf8_lossy(&out).into_owned();
    if shell == Shell::Fish {
        script.push_str(&fish_positional_values(&cmd));
    }
    script
}

/// clap_complete's fish script completes the fixed values of options but not of
/// positional arguments (`corral install cl` offered files): one `complete` line per
/// subcommand whose positional argument has fixed values.
fn fish_positional_values(cmd: &Command) -> String {
    let mut lines = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned())
                .collect();
            if !values.is_empty() {
                lines.push_str(&format!(
                    "complete -c corral -n \"__fish_corral_using_subcommand {}\" -f -a \"{}\"\n",
                    sub.get_name(),
                    values.join(" ")
                ));
            }
        }
    }
    lines
}
