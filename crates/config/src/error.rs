//! What can go wrong while finding and loading a config, worded for the person who
//! has to fix it.

use std::fmt;
use std::path::{Path, PathBuf};

/// One thing wrong with a config file, located precisely enough for an editor to jump
/// to it.
///
/// Problems are collected rather than returned one at a time so that `corral check`
/// can show everything that needs fixing in a single run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line in the config file.
    pub line: usize,
    /// 1-based column (in characters) in that line.
    pub column: usize,
    /// Dotted path of the offending key, e.g. `servers.files.restart`; empty when the
    /// problem is not about one key (a syntax error).
    pub key: String,
    /// What is wrong and, where there is one, the fix.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

/// Why no usable [`Config`](crate::Config) could be produced.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists in name only: it could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Discovery found no config file; `searched` lists every path it tried, nearest
    /// first.
    #[error("{}", not_found_message(searched))]
    NotFound { searched: Vec<PathBuf> },

    /// The file was read but has problems; all of them are listed, sorted by position.
    /// Displayed as one `FILE:LINE:COLUMN: KEY: MESSAGE` line per problem.
    #[error("{}", invalid_message(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },

    /// A file Corral will not trust (the user config, when others can write it).
    #[error("{}: refused: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },
}

fn not_found_message(searched: &[PathBuf]) -> String {
    let start = searched
        .first()
        .and_then(|p| p.parent())
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| ".".to_owned());
    format!(
        "no {} or {} found in {start} or any parent directory; \
         run `corral init` to create one, or pass `--config FILE`",
        crate::CONFIG_FILE,
        crate::MCP_JSON,
    )
}

fn invalid_message(path: &Path, problems: &[Problem]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{}:{p}", path.display()))
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_displays_one_line_per_problem() {
        let err = ConfigError::Invalid {
            path: PathBuf::from("corral.toml"),
            problems: vec![
                Problem {
                    line: 12,
                    column: 11,
                    key: "servers.files.restart".into(),
                    message:
                        "unknown value \"sometimes\"; expected one of never, on-failure, always"
                            .into(),
                },
                Problem {
                    line: 3,
                    column: 1,
                    key: String::new(),
                    message: "expected `=`".into(),
                },
            ],
        };
        assert_eq!(
            err.to_string(),
            "corral.toml:12:11: servers.files.restart: unknown value \"sometimes\"; \
             expected one of never, on-failure, always\n\
             corral.toml:3:1: expected `=`"
        );
    }

    #[test]
    fn not_found_suggests_init() {
        let err = ConfigError::NotFound {
            searched: vec![
                PathBuf::from("/a/b/corral.toml"),
                PathBuf::from("/a/corral.toml"),
            ],
        };
        let text = err.to_string();
        assert!(text.contains("/a/b or any parent"), "{text}");
        assert!(text.contains("corral init"), "{text}");
    }
}
