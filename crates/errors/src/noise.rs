//! What is not worth an agent's attention: redirects, 304s, the 404s every dev server
//! answers for source maps and favicons, hot-reload traffic, and the user's patterns.

use crate::model::{Http, Observation};

/// Decides which observations are noise. Hidden observations are not listed but
/// counted ([`Report::hidden`](crate::Report::hidden), by [`NoiseFilter::reason`]).
///
/// Built-in rules, which look only at observations with [`Observation::http`] (the
/// path without its query):
///
/// - any 3xx status: redirects and `304 Not Modified`;
/// - a 404 for a source map (`*.map`), a favicon (`favicon.ico`, `apple-touch-icon*`);
/// - a request another site's page sent ([`Http::cross_site`]): any web page the user
///   has open can make one to the proxy's port, with a path that says anything;
/// - hot-reload traffic at any status or none (a dev server drops these connections on
///   every restart): `*.hot-update.json`/`.js`, `/@vite/`, `/__vite_ping`,
///   `/@react-refresh`, `/__webpack_hmr`, `/_next/webpack-hmr`, `/sockjs-node`.
///
/// User patterns (from config) apply to every observation: a pattern with `*` or `?`
/// is a glob that must match the whole request path (with or without its query) or
/// the whole message; any other pattern is a substring of either. Case-sensitive;
/// empty patterns are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoiseFilter {
    builtin: bool,
    patterns: Vec<String>,
}

impl Default for NoiseFilter {
    /// The built-in rules, no patterns.
    fn default() -> Self {
        NoiseFilter {
            builtin: true,
            patterns: Vec::new(),
        }
    }
}

impl NoiseFilter {
    /// The built-in rules plus the user's patterns.
    pub fn with_patterns(patterns: Vec<String>) -> Self {
        NoiseFilter {
            builtin: true,
            patterns: patterns.into_iter().filter(|p| !p.is_empty()).collect(),
        }
    }

    /// Hides nothing (to see everything, e.g. when debugging the filter itself).
    pub fn none() -> Self {
        NoiseFilter {
            builtin: false,
            patterns: Vec::new(),
        }
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn is_noise(&self, obs: &Observation) -> bool {
        self.reason(obs).is_some()
    }

    /// Why an observation is noise, as shown in the report's footnote: one of
    /// [`NoiseFilter::REASONS`].
    pub fn reason(&self, obs: &Observation) -> Option<&'static str> {
        if self.builtin
            && let Some(reason) = obs.http.as_ref().and_then(builtin_reason)
        {
            return Some(reason);
        }
        self.patterns
            .iter()
            .any(|p| {
                matches_pattern(p, &obs.message)
                    || obs.http.as_ref().is_some_and(|h| {
                        matches_pattern(p, &h.path) || matches_pattern(p, h.bare_path())
                    })
            })
            .then_some("patterns")
    }

    /// Every reason [`NoiseFilter::reason`] gives, in the order reports list them.
    pub const REASONS: [&'static str; 7] = [
        "cross-site requests",
        "redirects",
        "304s",
        "source maps",
        "favicons",
        "hot reload",
        "patterns",
    ];
}

fn builtin_reason(http: &Http) -> Option<&'static str> {
    if http.cross_site {
        return Some("cross-site requests");
    }
    let path = http.bare_path();
    match http.status {
        Some(304) => return Some("304s"),
        Some(300..=399) => return Some("redirects"),
        _ => {}
    }
    if is_hot_reload(path) {
        return Some("hot reload");
    }
    if http.status == Some(404) {
        let file = path.rsplit('/').next().unwrap_or(path);
        if file.ends_with(".map") {
            return Some("source maps");
        }
        if file == "favicon.ico" || file.starts_with("apple-touch-icon") {
            return Some("favicons");
        }
    }
    None
}

fn is_hot_reload(path: &str) -> bool {
    path.ends_with(".hot-update.json")
        || path.ends_with(".hot-update.js")
        || path.contains("/@vite/")
        || path.starts_with("/__vite_ping")
        || path.starts_with("/@react-refresh")
        || path.starts_with("/__webpack_hmr")
        || path.starts_with("/_next/webpack-hmr")
        || path.starts_with("/sockjs-node")
}

fn matches_pattern(pattern: &str, text: &str) -> bool {
    if pattern.contains(['*', '?']) {
        glob(pattern.as_bytes(), text.as_bytes())
    } else {
        text.contains(pattern)
    }
}

/// `*` any run of bytes (also `/`), `?` one byte; the whole text must match. Linear
/// backtracking on the last `*` (the usual two-pointer algorithm): no exponential
/// blow-up on patterns like `*a*a*a*`.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::model::Severity;

    fn request(path: &str, status: Option<u16>) -> Observation {
        Observation::new(
            "proxy:web",
            "http",
            Severity::Warning,
            format!("GET {path}"),
            SystemTime::UNIX_EPOCH,
        )
        .http(Http::new("GET", path, status))
    }

    #[test]
    fn builtin_rules() {
        let f = NoiseFilter::default();
        for (path, status) in [
            ("/login", Some(302)),
            ("/assets/index.css", Some(304)),
            ("/assets/app.js.map", Some(404)),
            ("/assets/app.js.map?v=3", Some(404)),
            ("/favicon.ico", Some(404)),
            ("/apple-touch-icon-precomposed.png", Some(404)),
            ("/main.1a2b.hot-update.json", Some(404)),
            ("/main.1a2b.hot-update.js", Some(500)),
            ("/@vite/client", Some(404)),
            ("/__webpack_hmr", None),
            ("/_next/webpack-hmr?page=/", Some(502)),
            ("/sockjs-node/info", Some(404)),
        ] {
            assert!(f.is_noise(&request(path, status)), "{path} {status:?}");
        }
        for (path, status) in [
            ("/api/users", Some(500)),
            ("/api/users", Some(404)),
            ("/api/users", None),
            ("/assets/app.js.map", Some(500)),
            ("/favicon.ico", Some(500)),
            ("/sitemap", Some(404)),
        ] {
            assert!(!f.is_noise(&request(path, status)), "{path} {status:?}");
        }
        // Only requests: a message mentioning a source map is not noise.
        let js = Observation::new(
            "browser",
            "js",
            Severity::Error,
            "Error: /app.js.map",
            SystemTime::UNIX_EPOCH,
        );
        assert!(!f.is_noise(&js));
        assert!(!NoiseFilter::none().is_noise(&request("/login", Some(302))));
    }

    #[test]
    fn reasons() {
        let f = NoiseFilter::with_patterns(vec!["/healthz".into()]);
        let reason = |path, status| f.reason(&request(path, status));
        assert_eq!(reason("/login", Some(302)), Some("redirects"));
        assert_eq!(reason("/x.css", Some(304)), Some("304s"));
        assert_eq!(reason("/x.js.map", Some(404)), Some("source maps"));
        assert_eq!(reason("/favicon.ico", Some(404)), Some("favicons"));
        assert_eq!(reason("/@vite/client", Some(404)), Some("hot reload"));
        assert_eq!(reason("/healthz", Some(503)), Some("patterns"));
        assert_eq!(reason("/api", Some(500)), None);
        let planted = request("/api", Some(500));
        let planted = Observation {
            http: planted.http.map(|h| h.cross_site(true)),
            ..planted
        };
        assert_eq!(f.reason(&planted), Some("cross-site requests"));
    }

    #[test]
    fn user_patterns_are_substrings_or_globs() {
        let f = NoiseFilter::with_patterns(vec![
            "/healthz".into(),
            "/api/legacy/*".into(),
            "*ExperimentalWarning*".into(),
            String::new(),
        ]);
        assert!(f.is_noise(&request("/healthz?probe=1", Some(503))));
        assert!(f.is_noise(&request("/api/legacy/v1/users", Some(500))));
        assert!(!f.is_noise(&request("/api/legacyish", Some(500))));
        assert!(!f.is_noise(&request("/v2/api/legacy/x", Some(500))));
        let warning = Observation::new(
            "server:github",
            "node.warning",
            Severity::Warning,
            "(node:4242) ExperimentalWarning: The Fetch API is experimental",
            SystemTime::UNIX_EPOCH,
        );
        assert!(f.is_noise(&warning));
        // The empty pattern was dropped rather than matching everything.
        assert!(!f.is_noise(&request("/api/users", Some(500))));
    }

    #[test]
    fn glob_matching() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*c", b"abbbc"));
        assert!(glob(b"a?c", b"abc"));
        assert!(!glob(b"a?c", b"ac"));
        assert!(glob(b"*a*a*a*b", b"aaaaaaaaaaaaaaaaab"));
        assert!(!glob(b"*a*a*a*b", b"aaaaaaaaaaaaaaaaaa"));
        assert!(!glob(b"abc", b"abcd"));
    }
}
