//! Source-mapped locations for browser errors: `bundle.js:1:48213` becomes
//! `src/components/UserList.tsx:28:12`.
//!
//! A location is mapped when its script is on the page's origin (the proxy): the script
//! is fetched from the target through the proxy's client, its map found from the
//! `SourceMap` / `X-SourceMap` header or the last `//# sourceMappingURL=` comment (a
//! `data:` URL or a URL on the same origin; a map elsewhere is not fetched), and the
//! position looked up. Scripts are cached by path, with failures, and decoded maps by
//! their own URL within [`CACHE_BYTES`], for [`FRESH`] only: a dev server rebuilds the
//! same `bundle.js` on every edit. Anyone can post a report, so every step is bounded:
//! scripts and maps are decoded only up to [`SCRIPT_LIMIT`] and [`MAP_LIMIT`], the cache
//! in estimated bytes, and fetches go one at a time (see [`SourceMaps`]).

use crate::Shared;
use crate::codec::{Coding, Decoder, STEP, over_limit};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::{self, HeaderMap};
use sourcemap::DecodedMap;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Scripts whose map is remembered (each entry is small: the map's key).
pub const CACHE: usize = 64;

/// The decoded maps kept, in estimated bytes of memory ([`estimate`]): a decoded map is
/// several times its JSON, so a count of maps bounds nothing. The oldest go first; a
/// single map over this is not used at all (a `proxy.error` says so).
pub const CACHE_BYTES: usize = 32 << 20;

/// How long a script's map (or the failure to get one) is trusted.
pub const FRESH: Duration = Duration::from_secs(5);

/// The largest script read to find its map reference (decoded size).
pub const SCRIPT_LIMIT: usize = 16 << 20;

/// The largest map read (decoded size).
pub const MAP_LIMIT: usize = 32 << 20;

/// The `proxy.error` reasons of the limits above (one text per limit, for the gate).
const SCRIPT_TOO_BIG: &str = "a script over 16 MiB (decoded) is not source-mapped";
const MAP_TOO_BIG: &str = "a source map over 32 MiB (decoded) is not used";
const MAP_OVER_CACHE: &str =
    "a source map whose decoded form is over the 32 MiB map cache is not used";

/// A script's map and where it was found (relative sources are relative to it).
struct Located {
    map: DecodedMap,
    /// The map's URL path on the origin (the script's own for an inline map).
    path: String,
    /// Its [`estimate`]d memory.
    bytes: usize,
}

/// The source maps of one proxy's scripts.
///
/// Two levels: script path (with its query) → the key of its map, and map key → the
/// decoded map. A map's key is its resolved path on the origin with its query (for an
/// inline map, the script's path), so `bm.js?v=1` … `bm.js?v=64` naming one
/// `bm.js.map` share one decoded map, while a map whose own URL changes with a rebuild
/// is fetched anew. Fetching and decoding go one at a time per proxy: a burst of
/// reports naming 64 scripts decodes one map at a time, not 64 at once, and the
/// reports queued behind it find it cached.
pub(crate) struct SourceMaps {
    cache: Mutex<Cache>,
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Cache {
    /// Script path → when, and its map's key (`None`: no map, or a failure).
    scripts: HashMap<String, (Instant, Option<String>)>,
    /// Script paths, oldest first, for eviction.
    script_order: VecDeque<String>,
    maps: HashMap<String, (Instant, Arc<Located>)>,
    /// Map keys, oldest first, for eviction.
    map_order: VecDeque<String>,
    /// The estimated bytes of `maps`.
    bytes: usize,
}

impl Cache {
    fn map(&self, key: &str) -> Option<Arc<Located>> {
        let (at, located) = self.maps.get(key)?;
        (at.elapsed() < FRESH).then(|| located.clone())
    }

    fn remember_script(&mut self, path: &str, key: Option<String>) {
        if self
            .scripts
            .insert(path.to_owned(), (Instant::now(), key))
            .is_none()
        {
            self.script_order.push_back(path.to_owned());
        }
        while self.script_order.len() > CACHE {
            if let Some(old) = self.script_order.pop_front() {
                self.scripts.remove(&old);
            }
        }
    }

    /// Keeps a map within [`CACHE_BYTES`], evicting the oldest; `false` when it alone
    /// is over.
    fn remember_map(&mut self, key: &str, located: Arc<Located>) -> bool {
        if located.bytes > CACHE_BYTES {
            return false;
        }
        if let Some((_, old)) = self.maps.remove(key) {
            self.bytes -= old.bytes;
            self.map_order.retain(|k| k != key);
        }
        while self.bytes + located.bytes > CACHE_BYTES {
            let Some(old) = self.map_order.pop_front() else {
                break;
            };
            if let Some((_, gone)) = self.maps.remove(&old) {
                self.bytes -= gone.bytes;
            }
        }
        self.bytes += located.bytes;
        self.maps.insert(key.to_owned(), (Instant::now(), located));
        self.map_order.push_back(key.to_owned());
        true
    }
}

impl SourceMaps {
    pub(crate) fn new() -> SourceMaps {
        SourceMaps {
            cache: Mutex::new(Cache::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets every script and map (a proxy that stops, or starts again, perhaps in
    /// front of another target).
    pub(crate) fn clear(&self) {
        *self.cache() = Cache::default();
    }

    /// The estimated bytes of the decoded maps kept.
    #[cfg(test)]
    fn cached_bytes(&self) -> usize {
        self.cache().bytes
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
                let _one = self.fetching.lock().await;
                match self.cached(path) {
                    Some(located) => located,
                    None => self.fetch(shared, path).await,
                }
            }
        }?;
        lookup(&located, line, column)
    }

    /// `Some` when `path` is cached and fresh, and its map too (the inner `None` is a
    /// cached failure).
    fn cached(&self, path: &str) -> Option<Option<Arc<Located>>> {
        let cache = self.cache();
        let (at, key) = cache.scripts.get(path)?;
        if at.elapsed() >= FRESH {
            return None;
        }
        match key {
            None => Some(None),
            Some(key) => cache.map(key).map(Some),
        }
    }

    /// Fetches a script from the target, and the map it names unless that is cached.
    async fn fetch(&self, shared: &Shared, path: &str) -> Option<Arc<Located>> {
        let found = self.fetch_map(shared, path).await;
        let mut cache = self.cache();
        let key = match found {
            Some((key, Ok(located))) => {
                if !cache.remember_map(&key, located.clone()) {
                    drop(cache);
                    over_limit(shared, MAP_OVER_CACHE, &located.path);
                    self.cache().remember_script(path, None);
                    return None;
                }
                cache.remember_script(path, Some(key));
                return Some(located);
            }
            Some((key, Err(cached))) => {
                cache.remember_script(path, Some(key));
                return Some(cached);
            }
            None => None,
        };
        cache.remember_script(path, key);
        None
    }

    /// The script's map: its key and the map decoded now (`Ok`) or found cached (`Err`).
    async fn fetch_map(
        &self,
        shared: &Shared,
        path: &str,
    ) -> Option<(String, Result<Arc<Located>, Arc<Located>>)> {
        let (headers, script) = get(shared, path, SCRIPT_LIMIT, SCRIPT_TOO_BIG).await?;
        let reference = ["sourcemap", "x-sourcemap"]
            .into_iter()
            .find_map(|name| headers.get(name)?.to_str().ok().map(str::to_owned))
            .or_else(|| comment_reference(&script).map(str::to_owned))?;
        drop(script);
        if reference.starts_with("data:") {
            let map = sourcemap::decode_data_url(&reference).ok()?;
            return Some((path.to_owned(), Ok(located(map, path.to_owned()))));
        }
        let origins = [
            shared.target.authority.as_str().to_owned(),
            shared.addr.to_string(),
        ];
        let map_path = on_origin(&reference, &origins, path)?;
        if let Some(cached) = self.cache().map(&map_path) {
            return Some((map_path, Err(cached)));
        }
        let (_, bytes) = get(shared, &map_path, MAP_LIMIT, MAP_TOO_BIG).await?;
        let map = sourcemap::decode_slice(&bytes).ok()?;
        drop(bytes);
        Some((map_path.clone(), Ok(located(map, map_path))))
    }
}

/// For the fuzz target: `map` decoded as the mapper decodes a fetched one (skipped over
/// [`MAP_LIMIT`]), each 1-based position looked up, and the reference `script` names.
/// Returns the reference, the locations and the map's estimated bytes.
pub(crate) fn map_and_lookup(
    map: &[u8],
    script: &[u8],
    positions: &[(u32, u32)],
) -> (Option<String>, Vec<Option<String>>, usize) {
    let reference = comment_reference(script).map(str::to_owned);
    if map.len() > MAP_LIMIT {
        return (reference, Vec::new(), 0);
    }
    let Ok(map) = sourcemap::decode_slice(map) else {
        return (reference, Vec::new(), 0);
    };
    let located = located(map, "/assets/app.js.map".to_owned());
    let found = positions
        .iter()
        .map(|&(line, column)| lookup(&located, line, column))
        .collect();
    (reference, found, located.bytes)
}

/// A decoded map ready to keep: without its sources' contents (only positions are
/// looked up, and the contents are often most of a map), with its size estimated.
fn located(mut map: DecodedMap, path: String) -> Arc<Located> {
    if let DecodedMap::Regular(sm) = &mut map {
        for i in 0..sm.get_source_count() {
            sm.set_source_contents(i, None);
        }
    }
    let bytes = estimate(&map);
    Arc::new(Located { map, path, bytes })
}

/// The memory a decoded map holds, roughly: its tokens, names, sources and sources'
/// contents, each string with an `Arc<str>`'s overhead.
fn estimate(map: &DecodedMap) -> usize {
    fn regular(sm: &sourcemap::SourceMap) -> usize {
        const STR: usize = 4 * size_of::<usize>();
        sm.get_token_count() as usize * size_of::<sourcemap::RawToken>()
            + sm.sources().map(|s| s.len() + STR).sum::<usize>()
            + sm.names().map(|s| s.len() + STR).sum::<usize>()
            + sm.source_contents().flatten().map(str::len).sum::<usize>()
            + size_of::<sourcemap::SourceMap>()
    }
    match map {
        DecodedMap::Regular(sm) => regular(sm),
        DecodedMap::Hermes(h) => regular(h),
        DecodedMap::Index(index) => index
            .sections()
            .map(|s| s.get_sourcemap().map_or(0, estimate) + 64)
            .sum(),
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
    // (Widened: a map may claim line or column u32::MAX.)
    Some(format!(
        "{source}:{}:{}",
        u64::from(token.get_src_line()) + 1,
        u64::from(token.get_src_col()) + 1
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
/// most `limit` bytes decoded. Decoding stops at the limit (it never holds more than
/// `limit` and one step): then the body is skipped, and a `proxy.error` says `reason`.
async fn get(
    shared: &Shared,
    path: &str,
    limit: usize,
    reason: &'static str,
) -> Option<(HeaderMap, Bytes)> {
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
    let (parts, mut body) = response.into_parts();
    let mut decoder = match parts
        .headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().eq_ignore_ascii_case("identity"))
    {
        None => None,
        Some(value) => Some(Decoder::new(Coding::parse(value)?)),
    };
    let mut kept = Kept {
        steps: Vec::new(),
        total: 0,
        limit,
    };
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.ok()?.into_data() else {
            continue;
        };
        let Some(decoder) = &mut decoder else {
            if !kept.push(data) {
                break;
            }
            continue;
        };
        let mut used = 0;
        while (used < data.len() || decoder.has_pending()) && kept.within() {
            let mut plain = Vec::with_capacity(STEP);
            used += decoder.decode(&data[used..], STEP, &mut plain).ok()?;
            kept.push(plain.into());
        }
        if !kept.within() {
            break;
        }
    }
    if let Some(decoder) = &mut decoder {
        while kept.within() {
            let mut plain = Vec::with_capacity(STEP);
            let done = decoder.finish(STEP, &mut plain).ok()?;
            kept.push(plain.into());
            if done {
                break;
            }
        }
    }
    if !kept.within() {
        over_limit(shared, reason, path);
        return None;
    }
    let body = match kept.steps.len() {
        1 => kept.steps.pop().unwrap_or_default(),
        _ => kept.steps.concat().into(),
    };
    Some((parts.headers, body))
}

/// A body's plain bytes, as steps joined once at the end (a growing `Vec` would double
/// its capacity past the limit), up to a limit.
struct Kept {
    steps: Vec<Bytes>,
    total: usize,
    limit: usize,
}

impl Kept {
    /// Keeps `step` unless the total passes the limit; whether it is still within.
    fn push(&mut self, step: Bytes) -> bool {
        self.total += step.len();
        if self.within() && !step.is_empty() {
            self.steps.push(step);
        } else {
            self.steps.clear();
        }
        self.within()
    }

    fn within(&self) -> bool {
        self.total <= self.limit
    }
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
            bytes: 0,
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

    /// The map cache holds at most [`CACHE_BYTES`] of estimated maps, evicting the
    /// oldest; a map alone over it is refused.
    #[test]
    fn the_map_cache_is_bounded_in_bytes_oldest_out_first() {
        let map = |bytes| {
            Arc::new(Located {
                map: DecodedMap::Regular(sourcemap::SourceMapBuilder::new(None).into_sourcemap()),
                path: String::new(),
                bytes,
            })
        };
        let maps = SourceMaps::new();
        let mut cache = maps.cache();
        let third = CACHE_BYTES / 3;
        for key in ["/a.map", "/b.map", "/c.map"] {
            assert!(cache.remember_map(key, map(third)));
        }
        assert!(cache.remember_map("/d.map", map(third)));
        assert!(cache.map("/a.map").is_none(), "the oldest went");
        assert!(cache.map("/b.map").is_some() && cache.map("/d.map").is_some());
        assert!(cache.bytes <= CACHE_BYTES);
        assert!(!cache.remember_map("/huge.map", map(CACHE_BYTES + 1)));
        assert!(cache.map("/huge.map").is_none());
        assert!(
            cache.map("/b.map").is_some(),
            "a refused map evicts nothing"
        );
        drop(cache);
        assert!(maps.cached_bytes() <= CACHE_BYTES);
    }

    /// The estimate counts what a decoded map holds: a map of many tokens is estimated
    /// at many times its token count's bytes, and more than its JSON.
    #[test]
    fn a_decoded_maps_estimate_grows_with_its_tokens() {
        let mut builder = sourcemap::SourceMapBuilder::new(None);
        for col in 0..10_000 {
            builder.add(0, col, 0, col, Some("src/a.ts"), None, false);
        }
        let mut json = Vec::new();
        builder.into_sourcemap().to_writer(&mut json).unwrap();
        let decoded = located(sourcemap::decode_slice(&json).unwrap(), "/a.map".into());
        assert!(decoded.bytes >= 10_000 * size_of::<sourcemap::RawToken>());
        assert!(
            decoded.bytes > json.len(),
            "{} vs {}",
            decoded.bytes,
            json.len()
        );
    }
}
