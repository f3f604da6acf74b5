//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1): which schemes a server accepts, and
//! a `Bearer` challenge's parameters (RFC 6750 §3, RFC 9728 §5.1).

/// A `Bearer` challenge's parameters that matter here.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Bearer {
    /// Where the protected resource's metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
    /// The scopes the request needs.
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope` …
    pub error: Option<String>,
}

/// One challenge: its scheme and parameters (names lower-cased).
#[derive(Debug, PartialEq, Eq)]
struct Challenge {
    scheme: String,
    params: Vec<(String, String)>,
}

/// The `Bearer` challenge among `values` (a response's `WWW-Authenticate` headers);
/// `Err` with the schemes offered when none is `Bearer` (not OAuth: Basic, say).
pub fn bearer<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Bearer, Vec<String>> {
    let mut schemes = Vec::new();
    for v in values {
        for c in parse(v) {
            if c.scheme.eq_ignore_ascii_case("bearer") {
                let get = |k: &str| {
                    c.params
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.clone())
                };
                return Ok(Bearer {
                    resource_metadata: get("resource_metadata"),
                    scope: get("scope").filter(|s| !s.trim().is_empty()),
                    error: get("error"),
                });
            }
            schemes.push(c.scheme);
        }
    }
    Err(schemes)
}

/// Every challenge in one header value. Lenient: what cannot be read is skipped.
fn parse(value: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    let mut rest = value;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return out;
        }
        let (tok, after) = token(rest);
        if tok.is_empty() {
            // Not a token: skip one character and go on.
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str();
            continue;
        }
        let after_ws = after.trim_start_matches([' ', '\t']);
        if let Some(v) = after_ws.strip_prefix('=')
            && let Some(last) = out.last_mut()
            && !v.starts_with('=')
        {
            // name=value of the current challenge.
            let v = v.trim_start_matches([' ', '\t']);
            let (value, after_value) = if let Some(q) = v.strip_prefix('"') {
                quoted(q)
            } else {
                let (t, a) = token(v);
                (t.to_owned(), a)
            };
            last.params.push((tok.to_ascii_lowercase(), value));
            rest = after_value;
        } else if after_ws.starts_with('=') {
            // A token68 (`Basic abc==`) or a stray parameter: skip to the next comma.
            rest = after_ws.find(',').map_or("", |i| &after_ws[i..]);
        } else {
            out.push(Challenge {
                scheme: tok.to_owned(),
                params: Vec::new(),
            });
            // `Scheme token68` (`Basic abc==`): a token, `=` padding, then a comma or
            // the end.
            let (t68, pad) = token(after_ws);
            let next = pad.trim_start_matches('=').trim_start();
            if !t68.is_empty()
                && after.starts_with([' ', '\t'])
                && (next.is_empty() || next.starts_with(','))
            {
                rest = next;
                continue;
            }
            rest = after_ws;
        }
    }
}

/// A token (RFC 9110 tchar*), and what follows it.
fn token(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/:".contains(c)))
        .unwrap_or(s.len());
    s.split_at(end)
}

/// A quoted string's content (after its opening quote), and what follows it.
fn quoted(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, &s[i + 1..]),
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            }
            c => out.push(c),
        }
    }
    (out, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_is_read_among_others() {
        let b = bearer([
            r#"Basic realm="x", Bearer realm="mcp", resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="mcp:tools offline_access", error="invalid_token""#,
        ])
        .unwrap();
        assert_eq!(
            b.resource_metadata.as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(b.scope.as_deref(), Some("mcp:tools offline_access"));
        assert_eq!(b.error.as_deref(), Some("invalid_token"));
        // Case, spacing, escapes, tokens unquoted, two header values.
        let b = bearer([
            "Basic abc==",
            r#"bearer  ERROR = insufficient_scope ,scope="a \"b\"""#,
        ])
        .unwrap();
        assert_eq!(b.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(b.scope.as_deref(), Some(r#"a "b""#));
        assert_eq!(bearer(["Bearer"]).unwrap(), Bearer::default());
    }

    #[test]
    fn no_bearer_challenge_names_what_was_offered() {
        assert_eq!(
            bearer([r#"Basic realm="corp""#, "Negotiate"]).unwrap_err(),
            vec!["Basic".to_owned(), "Negotiate".to_owned()]
        );
        assert!(bearer(std::iter::empty()).is_err());
        // Garbage: never a panic, never a Bearer.
        for junk in [
            "\"",
            "=",
            "==,,",
            "Bearer=",
            "\u{0}\u{ff}\"\\",
            "a=\"unterminated",
        ] {
            let _ = bearer([junk]);
        }
    }
}
