//! The proxy's own endpoints under `/__corral/` and the browser error log (owner: the
//! injection work).

use crate::{ProxyBody, Shared};
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::sync::Arc;

/// Paths under this prefix are the proxy's, never forwarded.
pub const PREFIX: &str = "/__corral/";

/// Browser errors kept per proxy.
pub const RING: usize = 500;

/// One error a page reported.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct BrowserEntry {
    pub ts: String,
    pub kind: String,
    pub message: String,
    pub location: Option<String>,
    pub page: String,
}

/// Which entries [`BrowserLog::query`] returns.
#[derive(Debug, Clone, Default)]
pub struct BrowserQuery {
    pub limit: usize,
}

/// The errors pages reported.
pub struct BrowserLog {}

impl BrowserLog {
    pub fn new(capacity: usize) -> BrowserLog {
        let _ = capacity;
        BrowserLog {}
    }

    pub fn query(&self, q: &BrowserQuery) -> Vec<BrowserEntry> {
        let _ = q;
        Vec::new()
    }

    /// Errors reported since start.
    pub fn total(&self) -> u64 {
        0
    }
}

/// Serves `/__corral/…`.
pub(crate) async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ProxyBody> {
    let _ = (shared, req);
    todo!("browser endpoints")
}
