//! Names agents see: `<server>__<tool>` (or bare), kept within MCP's tool-name rules.
//!
//! MCP (2025-11-25) asks tool names to be 1–128 characters of `A-Z a-z 0-9 _ - .`.
//! Names that break the rule are rewritten deterministically: invalid characters become
//! `_`, and a short hash of the original name is appended so that two different
//! originals never map to one name, and the same original always maps to the same name
//! (an agent can keep using a name across restarts).

use corral_config::ToolPrefix;

/// Longest tool name MCP allows.
pub const MAX_NAME: usize = 128;
/// Separator between server and tool.
pub const SEP: &str = "__";

/// The name an agent sees for `tool` of `server`.
pub fn exposed(prefix: ToolPrefix, server: &str, tool: &str) -> String {
    let full = match prefix {
        ToolPrefix::Always => format!("{server}{SEP}{tool}"),
        ToolPrefix::Never => tool.to_owned(),
    };
    fit(&full)
}

/// `name` itself when valid, else a valid, deterministic replacement.
pub fn fit(name: &str) -> String {
    let valid_chars = name.chars().all(valid);
    if valid_chars && !name.is_empty() && name.len() <= MAX_NAME {
        return name.to_owned();
    }
    let hash = format!("{:08x}", fnv1a(name.as_bytes()) as u32);
    let mut clean: String = name
        .chars()
        .map(|c| if valid(c) { c } else { '_' })
        .collect();
    let keep = MAX_NAME - hash.len() - 1;
    if clean.len() > keep {
        clean.truncate(keep);
    }
    format!("{clean}_{hash}")
}

fn valid(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// FNV-1a, 64 bit: tiny, stable across versions and platforms (unlike `DefaultHasher`).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_keeps_valid_names() {
        assert_eq!(
            exposed(ToolPrefix::Always, "files", "read_file"),
            "files__read_file"
        );
        assert_eq!(
            exposed(ToolPrefix::Never, "files", "read_file"),
            "read_file"
        );
        assert_eq!(fit("a.b-c_d"), "a.b-c_d");
    }

    #[test]
    fn invalid_characters_are_replaced_with_a_hash_suffix() {
        let n = fit("get weather/now");
        assert!(n.starts_with("get_weather_now_"), "{n}");
        assert_eq!(n, fit("get weather/now"), "deterministic");
        assert_ne!(
            n,
            fit("get_weather_now"),
            "no collision with the valid spelling"
        );
    }

    #[test]
    fn long_names_are_shortened_to_the_limit() {
        let long = "x".repeat(300);
        let n = fit(&long);
        assert_eq!(n.len(), MAX_NAME);
        assert_ne!(fit(&"x".repeat(301)), n);
    }
}
