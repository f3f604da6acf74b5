//! The page's files, embedded in the binary (no build step, no network): served
//! gzip-compressed to a browser that accepts it (compressed once, on first use), with an
//! `ETag` so a reload costs a `304`.

use std::io::Write;
use std::sync::OnceLock;

pub(crate) struct Asset {
    pub(crate) path: &'static str,
    pub(crate) content_type: &'static str,
    pub(crate) bytes: &'static [u8],
    gzip: OnceLock<Vec<u8>>,
    etag: OnceLock<String>,
}

impl Asset {
    const fn new(path: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Asset {
        Asset {
            path,
            content_type,
            bytes,
            gzip: OnceLock::new(),
            etag: OnceLock::new(),
        }
    }

    pub(crate) fn gzip(&self) -> &[u8] {
        self.gzip.get_or_init(|| gzip(self.bytes))
    }

    /// A strong validator: a hash of the content.
    pub(crate) fn etag(&self) -> &str {
        self.etag.get_or_init(|| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.bytes.hash(&mut h);
            format!("\"{:016x}\"", h.finish())
        })
    }
}

pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).expect("writing to memory");
    enc.finish().expect("writing to memory")
}

/// The files the app loads (the HTML pages are served by their routes).
pub(crate) static FILES: [Asset; 4] = [
    Asset::new(
        "/dashboard/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/app.js"),
    ),
    Asset::new(
        "/dashboard/app.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/app.css"),
    ),
    Asset::new(
        "/dashboard/login.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/login.js"),
    ),
    Asset::new(
        "/dashboard/favicon.svg",
        "image/svg+xml",
        include_bytes!("assets/favicon.svg"),
    ),
];

pub(crate) const INDEX: &str = include_str!("assets/index.html");
pub(crate) const LOGIN: &str = include_str!("assets/login.html");

pub(crate) fn find(path: &str) -> Option<&'static Asset> {
    FILES.iter().find(|a| a.path == path)
}

/// Every byte a first visit transfers, compressed as served: the two pages and the files.
pub fn transferred_size() -> usize {
    gzip(INDEX.as_bytes()).len()
        + gzip(LOGIN.as_bytes()).len()
        + FILES.iter().map(|a| a.gzip().len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_load_only_their_own_files_and_no_inline_script() {
        for (name, html) in [("index.html", INDEX), ("login.html", LOGIN)] {
            for bad in [
                "onclick=",
                "onload=",
                "onerror=",
                "style=",
                "javascript:",
                "http:",
                "https:",
            ] {
                assert!(!html.contains(bad), "{name} contains {bad}");
            }
            let mut rest = html;
            while let Some(i) = rest.find("<script") {
                let tag = &rest[i..i + rest[i..].find('>').unwrap()];
                assert!(
                    tag.contains("src=\"/dashboard/"),
                    "{name}: inline script {tag}"
                );
                rest = &rest[i + 1..];
            }
        }
    }

    #[test]
    fn the_assets_are_small() {
        let total = transferred_size();
        assert!(total < 100 * 1024, "{total} bytes compressed");
    }
}
