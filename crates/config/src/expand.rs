//! `${…}` substitution in config strings.
//!
//! Each dialect keeps the syntax its own tools use, so a file is accepted as it is:
//!
//! | dialect   | forms                                                                  |
//! |-----------|------------------------------------------------------------------------|
//! | TOML      | `${env:NAME}`, `${env:NAME:-fallback}`, `$$` for a literal `$`         |
//! | .mcp.json | `${NAME}`, `${NAME:-fallback}` (Claude Code's), and `${env:NAME}`      |
//! | VS Code   | `${env:NAME}`, `${env:NAME:-fallback}`, `${workspaceFolder}`           |
//!
//! A fallback applies when the variable is unset or empty, as in the shell. Any other
//! `${…}` is an error rather than passed through, so a typo cannot reach a server as a
//! literal. Strings are parsed into [`Segment`]s while reading (syntax problems) and
//! resolved later against the environment (unset variables), so `corral init` can
//! re-emit them as TOML without expanding them.

use std::path::Path;

use crate::Format;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Literal(String),
    Env {
        name: String,
        fallback: Option<String>,
    },
    /// VS Code's `${workspaceFolder}`: the project root.
    WorkspaceFolder,
}

/// Splits `text` into literal text and substitutions; every malformed `${…}` is
/// reported.
pub(crate) fn parse(text: &str, format: Format) -> Result<Vec<Segment>, Vec<String>> {
    let mut segments = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        literal.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if format == Format::Toml && after.starts_with('$') {
            literal.push('$');
            rest = &after[1..];
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                errors.push(unterminated(format));
                rest = "";
                break;
            };
            match substitution(&body[..end], format) {
                Ok(segment) => {
                    if !literal.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut literal)));
                    }
                    segments.push(segment);
                }
                Err(message) => errors.push(message),
            }
            rest = &body[end + 1..];
        } else {
            literal.push('$');
            rest = after;
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    if errors.is_empty() {
        Ok(segments)
    } else {
        Err(errors)
    }
}

fn unterminated(format: Format) -> String {
    if format == Format::Toml {
        "unterminated `${` (no closing `}`); write `$${` for a literal `${`".to_owned()
    } else {
        "unterminated `${` (no closing `}`)".to_owned()
    }
}

/// Interprets the text between `${` and `}`.
fn substitution(inner: &str, format: Format) -> Result<Segment, String> {
    let env_reference = |reference: &str| -> Result<Segment, String> {
        let (name, fallback) = match reference.split_once(":-") {
            Some((name, fallback)) => (name, Some(fallback.to_owned())),
            None => (reference, None),
        };
        if is_env_name(name) {
            Ok(Segment::Env {
                name: name.to_owned(),
                fallback,
            })
        } else {
            Err(format!(
                "`${{{inner}}}`: {name:?} is not an environment variable name \
                 (letters, digits and '_', not starting with a digit)"
            ))
        }
    };
    if let Some(reference) = inner.strip_prefix("env:") {
        return env_reference(reference);
    }
    match format {
        Format::McpJson => env_reference(inner).map_err(|_| {
            format!(
                "unsupported substitution `${{{inner}}}`; expected `${{NAME}}` or \
                 `${{NAME:-fallback}}` with an environment variable name"
            )
        }),
        Format::VsCode if inner == "workspaceFolder" => Ok(Segment::WorkspaceFolder),
        Format::VsCode if inner.starts_with("input:") => Err(format!(
            "VS Code input variables like `${{{inner}}}` are not supported: Corral runs \
             without a prompt; put the value in an environment variable and write \
             `${{env:NAME}}`"
        )),
        Format::VsCode => Err(format!(
            "unsupported VS Code variable `${{{inner}}}`; Corral expands only \
             `${{env:NAME}}` and `${{workspaceFolder}}`"
        )),
        Format::Toml if is_env_name(inner) => Err(format!(
            "unknown substitution `${{{inner}}}`; write `${{env:{inner}}}` for an \
             environment variable, or `$${{` for a literal `${{`"
        )),
        Format::Toml => Err(format!(
            "unknown substitution `${{{inner}}}`; Corral expands only `${{env:NAME}}`; \
             write `$${{` for a literal `${{`"
        )),
    }
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The expanded string, and whether any part of it came from the environment (such
/// values are treated as secrets).
pub(crate) struct Resolved {
    pub value: String,
    pub from_env: bool,
}

/// Substitutes every variable; each unset one is reported.
pub(crate) fn resolve(
    segments: &[Segment],
    env: &dyn Fn(&str) -> Option<String>,
    root: &Path,
) -> Result<Resolved, Vec<String>> {
    let mut value = String::new();
    let mut from_env = false;
    let mut errors = Vec::new();
    for segment in segments {
        match segment {
            Segment::Literal(text) => value.push_str(text),
            Segment::WorkspaceFolder => value.push_str(&root.to_string_lossy()),
            Segment::Env { name, fallback } => {
                from_env = true;
                match (env(name).filter(|v| !v.is_empty()), fallback) {
                    (Some(v), _) => value.push_str(&v),
                    (None, Some(fallback)) => value.push_str(fallback),
                    (None, None) if env(name).is_some() => {}
                    (None, None) => {
                        errors.push(format!("environment variable {name} is not set"));
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(Resolved { value, from_env })
    } else {
        Err(errors)
    }
}

/// Writes `segments` back in TOML syntax, for `corral init`'s import.
/// `${workspaceFolder}` has no TOML form and becomes the root path itself.
pub(crate) fn to_toml_text(segments: &[Segment], root: &Path) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Literal(text) => out.push_str(&text.replace('$', "$$")),
            Segment::WorkspaceFolder => out.push_str(&root.to_string_lossy().replace('$', "$$")),
            Segment::Env {
                name,
                fallback: None,
            } => out.push_str(&format!("${{env:{name}}}")),
            Segment::Env {
                name,
                fallback: Some(fallback),
            } => out.push_str(&format!("${{env:{name}:-{fallback}}}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn expand(text: &str, format: Format) -> Result<String, Vec<String>> {
        let segments = parse(text, format)?;
        resolve(&segments, &env, Path::new("/proj")).map(|r| r.value)
    }

    #[test]
    fn toml_forms() {
        assert_eq!(
            expand("Bearer ${env:TOKEN}", Format::Toml).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(expand("${env:NOPE:-dflt}", Format::Toml).unwrap(), "dflt");
        assert_eq!(expand("${env:EMPTY:-dflt}", Format::Toml).unwrap(), "dflt");
        assert_eq!(expand("${env:EMPTY}", Format::Toml).unwrap(), "");
        assert_eq!(
            expand("a$$b $x $${env:TOKEN}", Format::Toml).unwrap(),
            "a$b $x ${env:TOKEN}"
        );
    }

    #[test]
    fn unset_variables_are_each_reported() {
        assert_eq!(
            expand("${env:A} ${env:B}", Format::Toml).unwrap_err(),
            vec![
                "environment variable A is not set".to_owned(),
                "environment variable B is not set".to_owned()
            ]
        );
    }

    #[test]
    fn malformed_forms_are_errors_with_a_fix() {
        let err = expand("${HOME}/x", Format::Toml).unwrap_err();
        assert!(err[0].contains("write `${env:HOME}`"), "{err:?}");
        let err = expand("${env:1X}", Format::Toml).unwrap_err();
        assert!(
            err[0].contains("not an environment variable name"),
            "{err:?}"
        );
        let err = expand("abc ${env:X", Format::Toml).unwrap_err();
        assert!(err[0].starts_with("unterminated"), "{err:?}");
    }

    #[test]
    fn mcp_json_uses_claude_code_forms() {
        assert_eq!(
            expand("${TOKEN}-${NOPE:-x}", Format::McpJson).unwrap(),
            "s3cret-x"
        );
        assert_eq!(expand("$$", Format::McpJson).unwrap(), "$$");
        assert!(expand("${a b}", Format::McpJson).is_err());
    }

    #[test]
    fn vscode_forms() {
        assert_eq!(
            expand("${workspaceFolder}/bin ${env:TOKEN}", Format::VsCode).unwrap(),
            "/proj/bin s3cret"
        );
        let err = expand("${input:api-key}", Format::VsCode).unwrap_err();
        assert!(err[0].contains("input variables"), "{err:?}");
        assert!(expand("${userHome}", Format::VsCode).is_err());
    }

    #[test]
    fn toml_rendering_round_trips() {
        let segments = parse("a$b ${TOKEN} ${NOPE:-d}", Format::McpJson).unwrap();
        let toml = to_toml_text(&segments, Path::new("/proj"));
        assert_eq!(toml, "a$$b ${env:TOKEN} ${env:NOPE:-d}");
        assert_eq!(parse(&toml, Format::Toml).unwrap(), segments);
    }
}
