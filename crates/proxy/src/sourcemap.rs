//! Source-mapped locations for browser errors: `bundle.js:1:48213` becomes
//! `src/components/UserList.tsx:28:12`.
//!
//! A location is mapped when its script is on the page's origin (the proxy): the script
//! is fetched from the target through the proxy's client, its map found from the
//! `SourceMap` / `X-SourceMap` header or the last `//# sourceMappingURL=` comment (a
//! `data:` URL or a URL on the same origin; a map elsewhere is not fetched), and the
//! position looked up. Scripts are cached by path, with failures, for [`FRESH`] only:
//! a dev server rebuilds the same `bundle.js` on every edit.

use crate::Shared;
use crate::codec::{Coding, Decoder};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap};
use sourcemap::DecodedMap;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Scripts whose maps are remembered.
pub const CACHE: usize = 64;

/// How long a script's map (or the failure to get one) is trusted.
pub const FRESH: Duration = Duration::from_secs(5);

/// The largest script read to find its map reference.
const SCRIPT_LIMIT: usize = 16 << 20;

/// The largest map read.
const MAP_LIMIT: usize = 32 << 20;

/// A script's map and where it was found (relative sources are relative to it).
struct Located {
    map: DecodedMap,
    /// The map's URL path on the origin (the script's own for an inline map).
    path: String,
}

/// The source maps of one proxy's scripts, by script path.
pub(crate) struct SourceMaps {
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, (Instant, Option<Arc<Located>>)>,
    /// Paths, oldest first, for eviction.
    order: VecDeque<String>,
}

impl SourceMaps {
    pub(crate) fn new() -> SourceMaps {
        SourceMaps {
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The original `source:line:column` of a 1-based position in the script at `path`
    /// (path and query on the origin), when its source map says.
    pub(crate) async fn original(
        &self,
        shared: &Shared,
        path: &str,
        line: u32,
        column: u32,
    ) -> Option<String> {
        let located = match self.cached(path) {
            Some(located) => located,
            None => {
                let located = fetch_map(shared, path).await.map(Arc::new);
                self.remember(path, located.clone());
                located
            }
        }?;
        lookup(&located, line, column)
    }

    /// `Some` when `path` is cached and fresh (the inner `None` is a cached failure).
    fn cached(&self, path: &str) -> Option<Option<Arc<Located>>> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (at, located) = cache.entries.get(path)?;
        (at.elapsed() < FRESH).then(|| located.clone())
    }

    fn remember(&self, path: &str, located: Option<Arc<Located>>) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = (Instant::now(), located);
        if cache.entries.insert(path.to_owned(), fresh).is_none() {
            cache.order.push_back(path.to_owned());
        }
        while cache.order.len() > CACHE {
            if let Some(old) = cache.order.pop_front() {
                cache.entries.remove(&old);
            }
        }
    }
}

/// A 1-based position looked up in a map, as `source:line:column`. A position before
/// the first mapping of its line has none (the previous line's would be wrong).
fn lookup(located: &Located, line: u32, column: u32) -> Option<String> {
    let line0 = line.checked_sub(1)?;
    let token = located.map.lookup_token(line0, column.saturating_sub(1))?;
    if token.get_dst_line() != line0 {
        return None;
    }
    let source = display_source(token.get_source()?, &located.path);
    Some(format!(
        "{source}:{}:{}",
        token.get_src_line() + 1,
        token.get_src_col() + 1
    ))
}

/// A map's source as a developer reads it: relative to the project where it can be
/// (`webpack://app/./src/x.tsx` and `../src/x.tsx` from `/assets/x.js.map` are both
/// `src/x.tsx`), absolute where the map says so (`file:///…`, `/@fs/…`, `/…`).
fn display_source(source: &str, map_path: &str) -> String {
    if let Some(rest) = source.strip_prefix("webpack://") {
        // `webpack://NAMESPACE/PATH`; the namespace (the package name) may be empty.
        let rest = rest.split_once('/').map_or(rest, |(_, path)| path);
        return normalize(&format!("/{rest}"))
            .trim_start_matches('/')
            .to_owned();
    }
    if let Some(rest) = source.strip_prefix("file://") {
        return rest.to_owned();
    }
    if let Some(rest) = source.strip_prefix("/@fs/") {
        return format!("/{rest}");
    }
    if let Some(rest) = source
        .strip_prefix("http://")
        .or_else(|| source.strip_prefix("https://"))
    {
        let path = rest.find('/').map_or("", |at| &rest[at..]);
        return path.trim_start_matches('/').to_owned();
    }
    if source.starts_with('/') {
        return source.to_owned();
    }
    resolve_relative(map_path, source)
        .trim_start_matches('/')
        .to_owned()
}

/// Fetches a script from the target and the map it names.
async fn fetch_map(shared: &Shared, path: &str) -> Option<Located> {
    let (headers, script) = get(shared, path, SCRIPT_LIMIT).await?;
    let reference = ["sourcemap", "x-sourcemap"]
        .into_iter()
        .find_map(|name| headers.get(name)?.to_str().ok().map(str::to_owned))
        .or_else(|| comment_reference(&script).map(str::to_owned))?;
    drop(script);
    if reference.starts_with("data:") {
        let map = sourcemap::decode_data_url(&reference).ok()?;
        return Some(Located {
            map,
            path: path.to_owned(),
        });
    }
    let origins = [
        shared.target.authority.as_str().to_owned(),
        shared.addr.to_string(),
    ];
    let map_path = on_origin(&reference, &origins, path)?;
    let (_, bytes) = get(shared, &map_path, MAP_LIMIT).await?;
    let map = sourcemap::decode_slice(&bytes).ok()?;
    Some(Located {
        map,
        path: map_path,
    })
}

/// The URL the last `//# sourceMappingURL=` comment of a script names.
fn comment_reference(script: &[u8]) -> Option<&str> {
    script.split(|&b| b == b'\n').rev().find_map(|line| {
        let line = std::str::from_utf8(line).ok()?.trim();
        let url = line
            .strip_prefix("//# sourceMappingURL=")
            .or_else(|| line.strip_prefix("//@ sourceMappingURL="))?;
        url.split_whitespace().next()
    })
}

/// GETs `path` from the target: the headers and the decoded body, if it is a 2xx of at
/// most `limit` bytes.
async fn get(shared: &Shared, path: &str, limit: usize) -> Option<(HeaderMap, Bytes)> {
    let target = &shared.target;
    let uri: hyper::Uri = format!("http://{}{}{path}", target.authority, target.base)
        .parse()
        .ok()?;
    let request = hyper::Request::get(uri)
        .header(header::ACCEPT, "*/*")
        .body(crate::full(Bytes::new()))
        .ok()?;
    let response = shared.client.request(request).await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let (parts, body) = response.into_parts();
    let coded = http_body_util::Limited::new(body, limit)
        .collect()
        .await
        .ok()?
        .to_bytes();
    let coding = parts
        .headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().eq_ignore_ascii_case("identity"));
    let body = match coding {
        None => coded,
        Some(value) => {
            let mut decoder = Decoder::new(Coding::parse(value)?);
            let mut plain = decoder.feed(&coded).ok()?;
            plain.extend(decoder.finish().ok()?);
            if plain.len() > limit {
                return None;
            }
            plain.into()
        }
    };
    Some((parts.headers, body))
}

/// The path (and query) of `url` when it is on one of `origins` (`host:port`), or
/// relative (to `base`, a path on the origin); `None` for anything elsewhere.
pub(crate) fn on_origin(url: &str, origins: &[String], base: &str) -> Option<String> {
    let url = url.split('#').next().unwrap_or("");
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .or_else(|| url.strip_prefix("//"));
    if let Some(rest) = rest {
        let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
        return origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(authority))
            .then(|| path.to_owned());
    }
    if url.is_empty() || url.contains("://") || url.starts_with("data:") {
        return None;
    }
    if url.starts_with('/') {
        return Some(url.to_owned());
    }
    Some(resolve_relative(base, url))
}

/// `reference` resolved against the directory of `base` (paths on one origin).
fn resolve_relative(base: &str, reference: &str) -> String {
    let base = base.split(['?', '#']).next().unwrap_or("");
    let dir = base.rfind('/').map_or("/", |at| &base[..=at]);
    let (path, query) = reference
        .split_once('?')
        .map_or((reference, None), |(p, q)| (p, Some(q)));
    let mut resolved = normalize(&format!("{dir}{path}"));
    if let Some(query) = query {
        resolved.push('?');
        resolved.push_str(query);
    }
    resolved
}

/// An absolute path with `.` and `..` segments folded (never above the root).
fn normalize(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let trailing = path.ends_with('/') && !segments.is_empty();
    format!("/{}{}", segments.join("/"), if trailing { "/" } else { "" })
}

/// A script location in one line of a stack trace: Chrome's `    at f (URL:L:C)` and
/// `    at URL:L:C`, Firefox's and Safari's `f@URL:L:C`.
pub(crate) fn frame(line: &str) -> Option<(&str, u32, u32)> {
    let line = line.trim().trim_end_matches(')');
    let (rest, column) = line.rsplit_once(':')?;
    let (rest, row) = rest.rsplit_once(':')?;
    let start = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()?;
    Some((&rest[start..], row.parse().ok()?, column.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_shown_relative_to_the_project() {
        let map = "/assets/bundle.js.map";
        assert_eq!(
            display_source("webpack://app/./src/x.tsx", map),
            "src/x.tsx"
        );
        assert_eq!(display_source("webpack:///./src/x.tsx", map), "src/x.tsx");
        assert_eq!(display_source("../src/x.tsx", map), "src/x.tsx");
        assert_eq!(display_source("x.tsx", map), "assets/x.tsx");
        assert_eq!(
            display_source("file:///home/me/x.tsx", map),
            "/home/me/x.tsx"
        );
        assert_eq!(display_source("/@fs/home/me/x.tsx", map), "/home/me/x.tsx");
        assert_eq!(display_source("http://h:1/src/x.tsx", map), "src/x.tsx");
    }

    #[test]
    fn only_urls_on_the_origin_are_followed() {
        let origins = ["127.0.0.1:5173".to_owned(), "localhost:8080".to_owned()];
        let base = "/assets/app.js?v=1";
        assert_eq!(
            on_origin("http://LOCALHOST:8080/a.js?t=2#x", &origins, base).as_deref(),
            Some("/a.js?t=2")
        );
        assert_eq!(on_origin("https://cdn.example/a.js", &origins, base), None);
        assert_eq!(on_origin("//cdn.example/a.js", &origins, base), None);
        assert_eq!(on_origin("data:application/json,{}", &origins, base), None);
        assert_eq!(
            on_origin("app.js.map", &origins, base).as_deref(),
            Some("/assets/app.js.map")
        );
        assert_eq!(
            on_origin("../../maps/app.js.map?x", &origins, base).as_deref(),
            Some("/maps/app.js.map?x")
        );
    }

    #[test]
    fn stack_frames_of_chrome_firefox_and_safari() {
        assert_eq!(
            frame("    at UserList (http://localhost:3000/static/js/bundle.js:1:4821)"),
            Some(("http://localhost:3000/static/js/bundle.js", 1, 4821))
        );
        assert_eq!(
            frame("    at http://localhost:3000/@fs/x/y.js?v=1:20:5"),
            Some(("http://localhost:3000/@fs/x/y.js?v=1", 20, 5))
        );
        assert_eq!(
            frame("render@http://127.0.0.1:5173/src/App.tsx:12:7"),
            Some(("http://127.0.0.1:5173/src/App.tsx", 12, 7))
        );
        assert_eq!(frame("TypeError: x is undefined"), None);
        assert_eq!(frame("    at <anonymous>"), None);
    }

    #[test]
    fn the_last_mapping_comment_wins() {
        let script =
            b"//# sourceMappingURL=old.map\nvar a = 1;\n//# sourceMappingURL=bundle.js.map \n\n";
        assert_eq!(comment_reference(script), Some("bundle.js.map"));
        assert_eq!(
            comment_reference(b"var a = '//# sourceMappingURL=x';"),
            None
        );
    }

    #[test]
    fn positions_are_one_based_and_stay_on_their_line() {
        let mut builder = sourcemap::SourceMapBuilder::new(Some("bundle.js"));
        builder.add(
            0,
            100,
            27,
            11,
            Some("../src/components/UserList.tsx"),
            None,
            false,
        );
        builder.add(1, 0, 40, 0, Some("../src/main.tsx"), None, false);
        let located = Located {
            map: DecodedMap::Regular(builder.into_sourcemap()),
            path: "/assets/bundle.js.map".to_owned(),
        };
        assert_eq!(
            lookup(&located, 1, 101).as_deref(),
            Some("src/components/UserList.tsx:28:12")
        );
        assert_eq!(
            lookup(&located, 1, 150).as_deref(),
            Some("src/components/UserList.tsx:28:12")
        );
        assert_eq!(lookup(&located, 1, 100), None);
        assert_eq!(lookup(&located, 3, 1), None);
        assert_eq!(lookup(&located, 0, 1), None);
    }
}
