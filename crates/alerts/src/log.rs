//! The alert log: dedup and the ring of recent alerts, shared by every scanner.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use corral_config::AlertSettings;

use crate::model::{Alert, Severity};

/// Recent alerts, newest last, with repeats folded into counts.
///
/// Not synchronised: the daemon keeps one behind a `Mutex` and every drain task
/// records into it. Recording is O(1) (a hash lookup and a ring push).
#[derive(Debug)]
pub struct AlertLog {
    window: Duration,
    capacity: usize,
    ring: VecDeque<Alert>,
    /// Sequence number of `ring[0]`; `ring[i]` has `front + i`.
    front: u64,
    /// Alert id → sequence number of its newest occurrence in the ring.
    newest: HashMap<String, u64>,
}

/// What [`AlertLog::record`] did with an alert.
#[derive(Debug, PartialEq, Eq)]
pub enum Recorded<'a> {
    /// Not seen within the window: a new entry. Tell the world (an event).
    New(&'a Alert),
    /// Seen within the window: the existing entry's count and `last_seen` moved on.
    /// Update a display if you like; do not emit another event.
    Repeat { id: &'a str, count: u64 },
}

/// Which alerts [`AlertLog::query`] returns; every field narrows the result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlertQuery {
    /// Alerts seen (last) at or after this time.
    pub since: Option<SystemTime>,
    /// Exactly this source, e.g. `process:web`.
    pub source: Option<String>,
    /// At least this severity (`Warning` means all).
    pub severity: Option<Severity>,
    /// At most this many, the newest ones.
    pub limit: Option<usize>,
}

impl AlertLog {
    /// A log that folds repeats within `window` (zero: never) and keeps `capacity`
    /// alerts (at least one).
    pub fn new(window: Duration, capacity: usize) -> Self {
        AlertLog {
            window,
            capacity: capacity.max(1),
            ring: VecDeque::new(),
            front: 0,
            newest: HashMap::new(),
        }
    }

    pub fn from_settings(settings: &AlertSettings) -> Self {
        Self::new(settings.window, settings.ring)
    }

    /// Records `alert` (as a scanner made it, count 1): a repeat of an alert with the
    /// same id whose `last_seen` is within the window of this one's `first_seen` only
    /// bumps that alert's count; anything else is a new entry, evicting the oldest
    /// when the ring is full.
    ///
    /// The window runs from the last sighting, so an error that repeats every second
    /// for an hour is one alert with a growing count, and one that comes back after a
    /// quiet window is news again.
    pub fn record(&mut self, alert: Alert) -> Recorded<'_> {
        if let Some(&seq) = self.newest.get(&alert.id) {
            let index = (seq - self.front) as usize;
            let entry = &self.ring[index];
            let within = alert
                .first_seen
                .duration_since(entry.last_seen)
                .map_or(true, |gap| gap <= self.window);
            if within && !self.window.is_zero() {
                let entry = &mut self.ring[index];
                entry.count += alert.count;
                entry.last_seen = entry.last_seen.max(alert.last_seen);
                return Recorded::Repeat {
                    id: &entry.id,
                    count: entry.count,
                };
            }
        }
        if self.ring.len() == self.capacity
            && let Some(old) = self.ring.pop_front()
        {
            if self.newest.get(&old.id) == Some(&self.front) {
                self.newest.remove(&old.id);
            }
            self.front += 1;
        }
        let seq = self.front + self.ring.len() as u64;
        self.newest.insert(alert.id.clone(), seq);
        self.ring.push_back(alert);
        Recorded::New(self.ring.back().expect("just pushed"))
    }

    /// Matching alerts, oldest first.
    pub fn query(&self, q: &AlertQuery) -> Vec<Alert> {
        let matching = self.ring.iter().filter(|a| {
            q.since.is_none_or(|since| a.last_seen >= since)
                && q.source.as_ref().is_none_or(|s| &a.source == s)
                && q.severity.is_none_or(|s| a.severity >= s)
        });
        let mut found: Vec<Alert> = matching.cloned().collect();
        if let Some(limit) = q.limit
            && found.len() > limit
        {
            found.drain(..found.len() - limit);
        }
        found
    }

    /// The newest entry with this id.
    pub fn get(&self, id: &str) -> Option<&Alert> {
        let seq = self.newest.get(id)?;
        self.ring.get((seq - self.front) as usize)
    }

    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}
