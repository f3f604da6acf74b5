//! The traffic log: a bounded ring of what went through the proxy (owner: the forwarding
//! work).

use serde::{Deserialize, Serialize};

/// One request and its response.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrafficEntry {}

/// The last N requests of one proxy.
pub struct TrafficLog {}

impl TrafficLog {
    pub fn new(capacity: usize) -> TrafficLog {
        let _ = capacity;
        TrafficLog {}
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
