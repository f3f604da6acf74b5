//! Hiding secrets in text that leaves the process: a server's stderr and stdout noise
//! (log files, the console, events, the `server_logs` tool), event fields, messages.
//!
//! Two kinds of secret are replaced by [`MARK`]:
//!
//! - the values the config marks as secrets ([`crate::ServerConfig::secrets`]: `headers`
//!   values, credential-like or `${…}`-expanded `env` values) of at least
//!   [`MIN_SECRET_LEN`] bytes, replaced whole, longest first;
//! - anything shaped like a well-known credential, whatever the config says. The prefix
//!   that says what it was is kept, the rest replaced: `Bearer ***`, `sk-***` (OpenAI and
//!   Anthropic keys, `sk-ant-…`, `sk-proj-…`), `ghp_***` (and `gho_`, `ghs_`, `ghu_`,
//!   `ghr_`), `github_pat_***`, `xoxb-***` (Slack `xox[abprs]-`), `AKIA***` / `ASIA***`
//!   (AWS access key ids), and PEM private keys: the `-----BEGIN … PRIVATE KEY-----` and
//!   `-----END … PRIVATE KEY-----` lines are kept, every line between them becomes `***`.
//!
//! A shape matches only at the start of a word (after a byte that is not a letter or a
//! digit) and only with enough characters after its prefix to be a key rather than a
//! word: "task-id", "skip", "sk-1", "AKIAB" and "Bearer of bad news" stay as they are
//! (the thresholds are on [`Redactor::line`]).
//!
//! A [`Redactor`] works line by line and remembers one thing between lines: that it is
//! inside a private key block. Each stream (a server's stderr, its stdout) gets its own.
//! It is a hand-written scanner rather than a regex set: one pass over the bytes, which
//! only looks closer at the start of a word beginning with one of the few bytes a
//! credential starts with, and borrows the line when nothing matched (the common case),
//! so the stderr drain keeps its rate (BENCHMARKS.md, "Stderr drain").

use std::borrow::Cow;

/// What a secret is replaced with.
pub const MARK: &str = "***";

/// Shorter configured secrets are left alone: replacing every "1" or "on" in a log would
/// destroy the log and protect nothing.
pub const MIN_SECRET_LEN: usize = 4;

/// A private key block longer than this many lines is not one: the redactor stops hiding
/// lines, so a stray BEGIN line cannot swallow a server's log for good. (An 8192-bit RSA
/// key is about 100 lines.)
const PEM_MAX_LINES: u32 = 200;

/// Redacts lines of one stream. Cheap to clone; the clone shares nothing.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Configured secrets, longest first, so "Bearer abcd" goes whole before "abcd".
    secrets: Vec<String>,
    /// Lines seen inside a private key block, `None` outside one.
    pem: Option<u32>,
}

impl Redactor {
    /// A redactor for `secrets` (those shorter than [`MIN_SECRET_LEN`] are ignored) and
    /// the credential shapes.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a String>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .cloned()
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets, pem: None }
    }

    /// One line (without its newline) with every secret replaced. Borrowed means
    /// unchanged: `line` itself is returned when there was nothing to hide.
    ///
    /// Shapes: `Bearer` (any case) and spaces, then a token of `A-Za-z0-9-._~+/=` of at
    /// least 8 characters with a digit, or of 20; `sk-` + 20 of `A-Za-z0-9_-`;
    /// `gh[pousr]_` + 20 of `A-Za-z0-9`; `github_pat_` + 20 of `A-Za-z0-9_`;
    /// `xox[abprs]-` + 10 of `A-Za-z0-9-`; `AKIA`/`ASIA` + exactly 16 of `A-Z0-9`.
    pub fn line<'a>(&mut self, line: &'a str) -> Cow<'a, str> {
        if let Some(seen) = self.pem {
            match find_pem_end(line) {
                Some(end) => {
                    self.pem = None;
                    let rest = self.line(&line[end..]);
                    return if end == 0 {
                        rest
                    } else {
                        Cow::Owned(format!("{MARK}{rest}"))
                    };
                }
                None if seen < PEM_MAX_LINES => {
                    self.pem = Some(seen + 1);
                    // Owned: a borrowed result means "unchanged" to callers.
                    return Cow::Owned(MARK.to_owned());
                }
                None => self.pem = None,
            }
        }
        let mut text = Cow::Borrowed(line);
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), MARK));
            }
        }
        let (shapes, pem) = scan(&text);
        if pem {
            self.pem = Some(0);
        }
        match (shapes, text) {
            (Some(out), _) => Cow::Owned(out),
            (None, text) => text,
        }
    }

    /// A whole text, line by line, with a fresh block state (for messages and fields).
    pub fn text(&self, text: &str) -> String {
        let mut r = Redactor {
            secrets: self.secrets.clone(),
            pem: None,
        };
        let mut out = String::with_capacity(text.len());
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&r.line(line));
        }
        out
    }
}

/// Credential shapes only, no configured secrets: for text that belongs to no server.
pub fn redact_shapes(text: &str) -> String {
    Redactor::default().text(text)
}

/// Byte classes for the scan: a credential shape starts at a trigger byte, at the start
/// of a word (letters, digits) or at a dash after one.
const OTHER: u8 = 0;
const WORD: u8 = 1;
const TRIGGER: u8 = 2;
const DASH: u8 = 3;

const fn classes() -> [u8; 256] {
    let mut t = [OTHER; 256];
    let mut c = 0;
    while c < 256 {
        if (c as u8).is_ascii_alphanumeric() {
            t[c] = WORD;
        }
        c += 1;
    }
    let triggers = b"bBsgxA";
    let mut i = 0;
    while i < triggers.len() {
        t[triggers[i] as usize] = TRIGGER;
        i += 1;
    }
    t[b'-' as usize] = DASH;
    t
}
static CLASS: [u8; 256] = classes();

/// The index after the word (letters and digits) that goes on at `i`.
fn skip_word(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() && b[i].is_ascii_alphanumeric() {
        i += 1;
    }
    i
}

/// What matched at a position.
enum Hit {
    /// Keep `keep` bytes (the prefix), replace up to `end` with the mark.
    Token { keep: usize, end: usize },
    /// A private key header ending at `header_end`; the block goes on past this line.
    PemOpen { header_end: usize },
    /// A whole private key block on this line: keep the header, hide up to `end_marker`.
    PemBlock {
        header_end: usize,
        end_marker: usize,
    },
}

/// Every credential shape contains one of these, as written (`Bearer`, in any case,
/// contains one of the 32 spellings of `earer`, added by [`may_hold_a_shape`]). Most
/// lines contain none: one SIMD pass (case-sensitive, so the packed searcher applies)
/// tells, and the byte-by-byte scan is skipped.
const SHAPE_LITERALS: &[&str] = &[
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "AKIA",
    "ASIA",
    "-----BEGIN ",
];

fn may_hold_a_shape(line: &str) -> bool {
    static FINDER: std::sync::LazyLock<aho_corasick::AhoCorasick> =
        std::sync::LazyLock::new(|| {
            let mut literals: Vec<String> = SHAPE_LITERALS.iter().map(|s| s.to_string()).collect();
            for mask in 0..32u32 {
                let earer: String = "earer"
                    .chars()
                    .enumerate()
                    .map(|(i, c)| {
                        if mask & (1 << i) != 0 {
                            c.to_ascii_uppercase()
                        } else {
                            c
                        }
                    })
                    .collect();
                literals.push(earer);
            }
            aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(literals)
                .expect("the shape literals build")
        });
    FINDER.is_match(line)
}

/// The credential shapes in `line`: the redacted line if any matched, and whether a
/// private key block was left open at its end.
fn scan(line: &str) -> (Option<String>, bool) {
    if !may_hold_a_shape(line) {
        return (None, false);
    }
    let b = line.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        // Whole words are skipped at once; only a word's first byte can start a shape.
        let class = CLASS[b[i] as usize];
        let after_word = i > 0 && b[i - 1].is_ascii_alphanumeric();
        match class {
            OTHER => {
                i += 1;
                continue;
            }
            WORD => {
                i = skip_word(b, i);
                continue;
            }
            DASH if after_word => {
                i += 1;
                continue;
            }
            TRIGGER if after_word => {
                i = skip_word(b, i);
                continue;
            }
            _ => {}
        }
        let Some(hit) = match_at(line, i) else {
            i = if class == DASH {
                i + 1
            } else {
                skip_word(b, i)
            };
            continue;
        };
        let out = out.get_or_insert_with(|| String::with_capacity(line.len()));
        match hit {
            Hit::Token { keep, end } => {
                out.push_str(&line[copied..i + keep]);
                out.push_str(MARK);
                copied = end;
                i = end;
            }
            Hit::PemBlock {
                header_end,
                end_marker,
            } => {
                out.push_str(&line[copied..header_end]);
                out.push_str(MARK);
                copied = end_marker;
                i = end_marker + 1;
            }
            Hit::PemOpen { header_end } => {
                out.push_str(&line[copied..header_end]);
                if header_end < line.len() {
                    out.push_str(MARK);
                }
                return (Some(std::mem::take(out)), true);
            }
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&line[copied..]);
            (Some(out), false)
        }
        None => (None, false),
    }
}

fn match_at(line: &str, i: usize) -> Option<Hit> {
    let b = line.as_bytes();
    let rest = &b[i..];
    // (bytes kept, bytes matched) from `i`.
    let span = match b[i] {
        b'b' | b'B' => bearer(rest),
        b's' => token(rest, b"sk-", 20, sk_char),
        b'g' if rest.len() > 4 && rest[..2] == *b"gh" && b"pousr".contains(&rest[2]) => {
            token(rest, &rest[..4], 20, |c| c.is_ascii_alphanumeric())
        }
        b'g' => token(rest, b"github_pat_", 20, |c| {
            c.is_ascii_alphanumeric() || c == b'_'
        }),
        b'x' if rest.len() > 4 && rest[..3] == *b"xox" && b"abprs".contains(&rest[3]) => {
            token(rest, &rest[..5], 10, |c| {
                c.is_ascii_alphanumeric() || c == b'-'
            })
        }
        b'A' if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") => {
            let body = rest[4..]
                .iter()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                .count();
            let after = rest.get(4 + body);
            (body == 16 && !after.is_some_and(u8::is_ascii_alphanumeric)).then_some((4, 4 + body))
        }
        b'-' => {
            let header_end = i + pem_begin(rest)?;
            // The header is ASCII, so `header_end` is a char boundary.
            return Some(match find_pem_end(&line[header_end..]) {
                Some(end) => Hit::PemBlock {
                    header_end,
                    end_marker: header_end + end,
                },
                None => Hit::PemOpen { header_end },
            });
        }
        _ => None,
    };
    span.map(|(keep, len)| Hit::Token { keep, end: i + len })
}

fn sk_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// `prefix` then at least `min` bytes of `body`: `(prefix length, match length)`.
fn token(
    rest: &[u8],
    prefix: &[u8],
    min: usize,
    body: impl Fn(u8) -> bool,
) -> Option<(usize, usize)> {
    if !rest.starts_with(prefix) {
        return None;
    }
    let len = rest[prefix.len()..]
        .iter()
        .take_while(|c| body(**c))
        .count();
    (len >= min).then_some((prefix.len(), prefix.len() + len))
}

/// `Bearer` and spaces, then a token: `(bytes kept, bytes matched)`.
fn bearer(rest: &[u8]) -> Option<(usize, usize)> {
    if rest.len() < 8 || !rest[..6].eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let spaces = rest[6..].iter().take_while(|c| **c == b' ').count();
    if spaces == 0 {
        return None;
    }
    let keep = 6 + spaces;
    let tok = &rest[keep..];
    let len = tok
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || b"-._~+/=".contains(c))
        .count();
    let digit = tok[..len].iter().any(u8::is_ascii_digit);
    ((len >= 8 && digit) || len >= 20).then_some((keep, keep + len))
}

/// `-----BEGIN [A-Z ]*PRIVATE KEY-----` at the start of `rest`: the header's length.
fn pem_begin(rest: &[u8]) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const TAIL: &[u8] = b"PRIVATE KEY-----";
    if !rest.starts_with(BEGIN) {
        return None;
    }
    let label = rest[BEGIN.len()..]
        .iter()
        .take(40)
        .take_while(|c| c.is_ascii_uppercase() || **c == b' ')
        .count();
    // The label ends with "PRIVATE KEY" (its letters were counted), then the dashes.
    let words_end = BEGIN.len() + label;
    let start = words_end.checked_sub(TAIL.len() - 5)?;
    (start >= BEGIN.len() && rest[start..].starts_with(TAIL)).then_some(start + TAIL.len())
}

/// Where `-----END … PRIVATE KEY-----` starts in `line`.
fn find_pem_end(line: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = line[from..].find("-----END ") {
        let at = from + at;
        let tail = &line[at + 9..];
        if let Some(k) = tail.find("PRIVATE KEY-----")
            && tail[..k]
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c == b' ')
        {
            return Some(at);
        }
        from = at + 9;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(line: &str) -> String {
        Redactor::default().line(line).into_owned()
    }

    #[test]
    fn each_credential_shape_is_redacted_keeping_its_prefix() {
        let cases = [
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc",
                "Authorization: Bearer ***",
            ),
            ("auth=bearer  abcd1234efgh", "auth=bearer  ***"),
            ("key sk-abcdefghijklmnopqrstuvwx1234 ok", "key sk-*** ok"),
            ("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx-yz_0", "sk-***"),
            (
                "OPENAI_API_KEY=sk-proj-0123456789abcdefghijKLMN",
                "OPENAI_API_KEY=sk-***",
            ),
            (
                "token ghp_0123456789abcdefghijABCDEFGHIJ012345",
                "token ghp_***",
            ),
            ("gho_0123456789abcdefghijABCDEFGHIJ012345", "gho_***"),
            ("ghs_0123456789abcdefghijABCDEFGHIJ012345,", "ghs_***,"),
            ("(ghu_0123456789abcdefghijABCDEFGHIJ012345)", "(ghu_***)"),
            ("ghr_0123456789abcdefghijABCDEFGHIJ012345", "ghr_***"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "github_pat_***",
            ),
            ("slack xoxb-123456789012-abcdefABCDEF", "slack xoxb-***"),
            ("xoxp-1234-5678-abcdef", "xoxp-***"),
            ("id=AKIAIOSFODNN7EXAMPLE;", "id=AKIA***;"),
            // Any case of Bearer passes the literal prefilter (its 32 spellings of `earer`).
            ("auth: bEaReR abcd1234efgh", "auth: bEaReR ***"),
            (
                "AUTHORIZATION: BEARER abcd1234efgh",
                "AUTHORIZATION: BEARER ***",
            ),
            ("ASIAY34FZKBOKMUTVV7A", "ASIA***"),
            (
                "two: sk-abcdefghijklmnopqrstuvwx1234 and ghp_0123456789abcdefghijABCDEFGHIJ012345",
                "two: sk-*** and ghp_***",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(shapes(input), want, "input: {input}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "task-id 42: skip the sk-1 step",
            "asking for a task-abcdefghijklmnopqrstuvwxyz",
            "desk-0123456789abcdefghijklmnop",
            "AKIAB is short, AKIAIOSFODNN7EXAMPLEX too long, xAKIAIOSFODNN7EXAMPLE inside",
            "Bearer of bad news; bearer token; Bearer realm=\"corral\"",
            "ghp_short gh_0123456789abcdefghijABCDEFGHIJ github_pat_ x",
            "xoxz-1234567890abc xox",
            "-----BEGIN CERTIFICATE----- is public",
            "-----BEGIN PUBLIC KEY-----",
            "plain ascii, ünïcödé, emoji 🦀 and ----- dashes",
            "",
        ] {
            let mut r = Redactor::default();
            assert!(
                matches!(r.line(text), Cow::Borrowed(t) if std::ptr::eq(t, text)),
                "changed: {text:?} -> {:?}",
                r.line(text)
            );
            assert_eq!(r.pem, None);
        }
    }

    #[test]
    fn a_private_key_block_is_hidden_across_lines() {
        let mut r = Redactor::default();
        let lines = [
            "loading key: -----BEGIN RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA1234567890abcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnopqrstuvwxyz0123456789+/==",
            "-----END RSA PRIVATE KEY-----",
            "after the key",
        ];
        let out: Vec<Cow<str>> = lines.iter().map(|l| r.line(l)).collect();
        assert!(
            matches!(out[1], Cow::Owned(_)),
            "a changed line is never borrowed"
        );
        assert_eq!(
            out,
            [
                "loading key: -----BEGIN RSA PRIVATE KEY-----",
                "***",
                "***",
                "-----END RSA PRIVATE KEY-----",
                "after the key",
            ]
        );
        // On one line (a JSON string with \n escapes), and the plain form.
        assert_eq!(
            shapes(r#"{"key":"-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"}"#),
            r#"{"key":"-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----\n"}"#
        );
        let mut r = Redactor::default();
        assert_eq!(
            r.line("-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXk"),
            "-----BEGIN OPENSSH PRIVATE KEY-----***"
        );
        assert_eq!(
            r.line("tail-----END OPENSSH PRIVATE KEY----- ok"),
            "***-----END OPENSSH PRIVATE KEY----- ok"
        );
        assert_eq!(r.line("next"), "next");
    }

    #[test]
    fn an_unterminated_key_block_ends_after_its_line_limit() {
        let mut r = Redactor::default();
        r.line("-----BEGIN EC PRIVATE KEY-----");
        for _ in 0..PEM_MAX_LINES {
            assert_eq!(r.line("AAAA"), MARK);
        }
        assert_eq!(r.line("a normal line"), "a normal line");
    }

    #[test]
    fn configured_secrets_go_first_and_longest_first() {
        let secrets = [
            "abcd1234".to_owned(),
            "Bearer abcd1234".to_owned(),
            "1".to_owned(),
        ];
        let r = Redactor::new(&secrets);
        assert_eq!(
            r.text("auth: Bearer abcd1234 then abcd1234, 1 more\nabcd1234"),
            "auth: *** then ***, 1 more\n***"
        );
    }
}
