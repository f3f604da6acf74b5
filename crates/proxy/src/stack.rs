//! Stack traces as a developer reads them: each frame of a reported stack (and of a React
//! component stack inside a message) whose script is on the page's origin is rewritten to
//! the original file's line and column where its source map says
//! (`at UserList (http://localhost:5173/src/UserList.tsx?t=1712:31:9)` becomes
//! `at UserList (src/UserList.tsx:28:12)`), and shown without the origin and without the
//! dev server's cache-busters (`?t=…`, `?v=…`) where it does not. Function names are kept
//! as the browser gave them. Frames elsewhere (another origin, `webpack-internal:`,
//! `blob:`) are left as they are.
//!
//! The lines are parsed and rewritten here ([`map_text`]); the source maps are looked up
//! by the caller, which bounds the work: at most [`FRAMES_MAPPED`] lookups per error,
//! within its deadline ([`crate::browser`]).

use std::future::Future;

/// Frames of one error looked up in source maps, its stack and its message together
/// (a render loop's error can carry a stack of hundreds).
pub const FRAMES_MAPPED: usize = 20;

/// Where a frame's code lives when it is not the app's own: a package, a dev server's
/// runtime, a bundler's, or the proxy's script. Matched in the location as shown (after
/// mapping, origin stripped).
const LIBRARY: [&str; 7] = [
    "node_modules/",
    ".vite/deps/",
    "@vite/",
    "@react-refresh",
    "webpack/runtime",
    "webpack-internal:///./node_modules",
    "__corral/",
];

/// Query parameters a dev server adds to a module's URL to defeat caching (Vite's `t`
/// after an update, `v` for pre-bundled packages): not part of where the code is.
const CACHE_BUSTERS: [&str; 2] = ["t", "v"];

/// The location in one line of a stack trace: Chrome's `    at f (URL:L:C)` and
/// `    at URL:L:C`, Firefox's and Safari's `f@URL:L:C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame<'a> {
    /// Where `URL:L:C` starts and ends in the line.
    pub start: usize,
    pub end: usize,
    pub url: &'a str,
    pub line: u32,
    pub column: u32,
}

/// The frame in `line`, if it is one: a URL (`scheme://…`) followed by `:LINE:COLUMN`,
/// at the end of the line or before its closing parenthesis.
pub(crate) fn parse(line: &str) -> Option<Frame<'_>> {
    let trimmed = line.trim_end();
    let end = trimmed.strip_suffix(')').unwrap_or(trimmed).len();
    let core = &line[..end];
    let (rest, column) = core.rsplit_once(':')?;
    let (rest, row) = rest.rsplit_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(column) || !digits(row) {
        return None;
    }
    // The location is the last word (Chrome puts it after a space or in parentheses);
    // in it, the URL starts at its scheme (Firefox and Safari put `name@` before it).
    let word = rest.rfind([' ', '(', '\t']).map_or(0, |at| at + 1);
    let scheme_end = word + rest[word..].find("://")?;
    let scheme = rest[word..scheme_end]
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || b"+.-:".contains(b))
        .count();
    let start = scheme_end - scheme;
    if scheme == 0 {
        return None;
    }
    Some(Frame {
        start,
        end,
        url: &rest[start..],
        line: row.parse().ok()?,
        column: column.parse().ok()?,
    })
}

/// One frame as shown after [`map_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// `file:line:column`: the original's when mapped, else the script's path on the
    /// origin without cache-busters, else the browser's URL.
    pub shown: String,
    /// The browser's `URL:LINE:COLUMN`.
    pub raw: String,
    /// A source map gave `shown`.
    pub mapped: bool,
    /// Its script is on the page's origin (so the proxy could map it).
    pub on_origin: bool,
}

impl Shown {
    /// The app's own code: on the origin (or webpack's eval'd modules) and not in a
    /// package, a dev server's runtime or the proxy's script.
    pub(crate) fn is_user_code(&self) -> bool {
        (self.on_origin || self.raw.starts_with("webpack-internal:///"))
            && !LIBRARY.iter().any(|l| self.shown.contains(l))
    }

    /// As an entry's `location`: the original's when mapped, else the browser's.
    pub(crate) fn location(&self) -> &str {
        if self.mapped { &self.shown } else { &self.raw }
    }
}

/// A script's path on the origin as shown in a frame: without the origin, the leading
/// `/` and cache-busting query parameters; a Vite `/@fs/` path is the absolute file path
/// it stands for.
pub(crate) fn display_path(path: &str) -> String {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let path = match path.strip_prefix("/@fs/") {
        Some(absolute) => format!("/{absolute}"),
        None => path.trim_start_matches('/').to_owned(),
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| {
            let name = p.split('=').next().unwrap_or("");
            !p.is_empty() && !CACHE_BUSTERS.contains(&name)
        })
        .collect();
    match kept.is_empty() {
        true => path,
        false => format!("{path}?{}", kept.join("&")),
    }
}

/// `text` (a stack, or a message that may hold a component stack) with its frames
/// rewritten, and the frames as shown, in order. `on_origin` gives a URL's path on the
/// page's origin (`None` for one elsewhere); `lookup(path, line, column)` the original
/// `file:line:column`, tried for at most `budget` frames (it is decreased; frames past
/// it are only shown without the origin).
pub(crate) async fn map_text<O, L, F>(
    text: &str,
    budget: &mut usize,
    on_origin: O,
    mut lookup: L,
) -> (String, Vec<Shown>)
where
    O: Fn(&str) -> Option<String>,
    L: FnMut(String, u32, u32) -> F,
    F: Future<Output = Option<String>>,
{
    let mut out = String::with_capacity(text.len());
    let mut frames = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let Some(frame) = parse(line) else {
            out.push_str(line);
            continue;
        };
        let raw = format!("{}:{}:{}", frame.url, frame.line, frame.column);
        let path = on_origin(frame.url);
        let mut mapped = None;
        if let Some(path) = &path
            && *budget > 0
            && frame.line > 0
        {
            *budget -= 1;
            mapped = lookup(path.clone(), frame.line, frame.column).await;
        }
        let shown = match (&mapped, &path) {
            (Some(original), _) => original.clone(),
            (None, Some(path)) => format!("{}:{}:{}", display_path(path), frame.line, frame.column),
            (None, None) => raw.clone(),
        };
        out.push_str(&line[..frame.start]);
        out.push_str(&shown);
        out.push_str(&line[frame.end..]);
        frames.push(Shown {
            shown,
            raw,
            mapped: mapped.is_some(),
            on_origin: path.is_some(),
        });
    }
    (out, frames)
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(line: &str) -> Option<(&str, u32, u32)> {
        parse(line).map(|f| (f.url, f.line, f.column))
    }

    #[test]
    fn frames_of_chrome_firefox_and_safari() {
        // A dev server's origin with a port (one the OS gave, nothing fixed): its colon
        // is no position.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let (local, loopback) = (
            format!("http://localhost:{port}"),
            format!("http://127.0.0.1:{port}"),
        );
        for (line, script, line_no, column) in [
            (
                format!("    at UserList ({local}/static/js/bundle.js:1:4821)"),
                format!("{local}/static/js/bundle.js"),
                1,
                4821,
            ),
            (
                format!("    at {local}/@fs/x/y.js?v=1:20:5"),
                format!("{local}/@fs/x/y.js?v=1"),
                20,
                5,
            ),
            (
                format!("render@{loopback}/src/App.tsx:12:7"),
                format!("{loopback}/src/App.tsx"),
                12,
                7,
            ),
            (
                format!("global code@{loopback}/node_modules/@scope/x.js:1:2"),
                format!("{loopback}/node_modules/@scope/x.js"),
                1,
                2,
            ),
        ] {
            assert_eq!(
                url(&line),
                Some((script.as_str(), line_no, column)),
                "{line}"
            );
        }
        assert_eq!(
            url("    at async load (webpack-internal:///./src/a.ts:3:4)"),
            Some(("webpack-internal:///./src/a.ts", 3, 4))
        );
        assert_eq!(
            url("f@blob:http://h/uuid:1:2"),
            Some(("blob:http://h/uuid", 1, 2))
        );
        assert_eq!(url("TypeError: x is undefined"), None);
        assert_eq!(url("    at <anonymous>"), None);
        assert_eq!(url("    at div"), None);
        assert_eq!(url("Error: at 12:30:45"), None);
        assert_eq!(url("    at x (http://h/a.js:1:)"), None);
        // The range replaced is the URL and its position, nothing around it.
        let line = "    at f (http://h/a.js:1:2) ";
        let f = parse(line).unwrap();
        assert_eq!(&line[f.start..f.end], "http://h/a.js:1:2");
    }

    #[test]
    fn shown_paths_lose_the_origin_and_cache_busters_only() {
        assert_eq!(display_path("/src/App.tsx?t=1712345"), "src/App.tsx");
        assert_eq!(
            display_path("/node_modules/.vite/deps/react-dom.js?v=ab12cd34"),
            "node_modules/.vite/deps/react-dom.js"
        );
        assert_eq!(
            display_path("/src/a.ts?import&t=1&x=2"),
            "src/a.ts?import&x=2"
        );
        assert_eq!(
            display_path("/@fs/home/me/lib/x.js?v=1"),
            "/home/me/lib/x.js"
        );
        assert_eq!(display_path("/app.js"), "app.js");
    }

    fn shown(shown: &str, on_origin: bool) -> Shown {
        Shown {
            shown: shown.into(),
            raw: format!("http://h/{shown}"),
            mapped: false,
            on_origin,
        }
    }

    #[test]
    fn user_code_is_on_the_origin_and_in_no_package_or_runtime() {
        assert!(shown("src/UserList.tsx:28:12", true).is_user_code());
        assert!(!shown("src/UserList.tsx:28:12", false).is_user_code());
        for library in [
            "node_modules/.vite/deps/react-dom.js:1:2",
            "node_modules/react-dom/cjs/react-dom.development.js:1:2",
            ".vite/deps/chunk-X.js:1:2",
            "@vite/client:1:2",
            "@react-refresh:1:2",
            "webpack/runtime/jsonp chunk loading:1:2",
            "__corral/client.js:1:2",
        ] {
            assert!(!shown(library, true).is_user_code(), "{library}");
        }
        let webpack = |raw: &str| Shown {
            shown: raw.into(),
            raw: raw.into(),
            mapped: false,
            on_origin: false,
        };
        assert!(webpack("webpack-internal:///./src/a.ts:1:2").is_user_code());
        assert!(!webpack("webpack-internal:///./node_modules/x/a.js:1:2").is_user_code());
    }

    #[tokio::test]
    async fn frames_on_the_origin_are_mapped_within_the_budget() {
        let stack = "TypeError: boom\n    at render (http://h/src/App.tsx?t=9:10:3)\n    at \
                     http://h/node_modules/.vite/deps/react.js?v=1:500:7\n    at x \
                     (https://cdn.example/lib.js:1:1)\n    at <anonymous>\n    at deep \
                     (http://h/src/deep.ts:4:4)";
        let on_origin = |url: &str| url.strip_prefix("http://h").map(str::to_owned);
        let mut asked = Vec::new();
        let mut budget = 2;
        let (text, frames) = map_text(stack, &mut budget, on_origin, |path, line, col| {
            asked.push(path.clone());
            let found = path
                .starts_with("/src/App.tsx")
                .then(|| format!("src/App.tsx:{}:{}", line - 2, col + 1));
            async move { found }
        })
        .await;
        assert_eq!(budget, 0);
        assert_eq!(
            asked,
            ["/src/App.tsx?t=9", "/node_modules/.vite/deps/react.js?v=1"]
        );
        assert_eq!(
            text,
            "TypeError: boom\n    at render (src/App.tsx:8:4)\n    at \
             node_modules/.vite/deps/react.js:500:7\n    at x \
             (https://cdn.example/lib.js:1:1)\n    at <anonymous>\n    at deep \
             (src/deep.ts:4:4)"
        );
        let user: Vec<bool> = frames.iter().map(Shown::is_user_code).collect();
        assert_eq!(user, [true, false, false, true]);
        assert_eq!(frames[0].location(), "src/App.tsx:8:4");
        assert_eq!(frames[3].location(), "http://h/src/deep.ts:4:4");
    }
}
