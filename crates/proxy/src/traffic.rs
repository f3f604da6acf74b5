//! The traffic log: a bounded ring of what went through the proxy (owner: the forwarding
//! work).

use serde::{Deserialize, Serialize};

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrafficEntry {
    pub id: u64,
    pub ts: String,
    pub method: String,
    pub url: String,
    pub status: Option<u16>,
    pub headers_ms: Option<u64>,
    pub total_ms: Option<u64>,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub error: Option<String>,
    pub message: Option<String>,
}

/// Which entries [`TrafficLog::query`] returns.
#[derive(Debug, Clone, Default)]
pub struct TrafficQuery {
    pub errors_only: bool,
    pub path: Option<String>,
    pub limit: usize,
}

/// The last N requests of one proxy.
pub struct TrafficLog {}

impl TrafficLog {
    pub fn new(capacity: usize) -> TrafficLog {
        let _ = capacity;
        TrafficLog {}
    }

    pub fn query(&self, q: &TrafficQuery) -> Vec<TrafficEntry> {
        let _ = q;
        Vec::new()
    }

    /// Requests recorded since start (more than the ring holds).
    pub fn total(&self) -> u64 {
        0
    }

    /// Responses ≥ 400 and transport errors since start.
    pub fn errors(&self) -> u64 {
        0
    }
}
