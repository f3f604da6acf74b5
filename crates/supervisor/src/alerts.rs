//! Errors recognised in what the units print: every line of a dev process's output and
//! of an MCP server's stderr goes through an alert scanner ([`corral_alerts`]) on its
//! way to the ring and the log.
//!
//! Each drain owns a [`Feed`]: its own [`Scanner`] (no lock on the line path; a stderr
//! traceback cannot mix with stdout lines), and the shared [`Alerts`] it reports to. The
//! log behind [`Alerts`] deduplicates: a new alert becomes one `alert` event; a repeat
//! within the window only raises the count of the one already listed.

use corral_alerts::{Alert, AlertLog, AlertQuery, AlertRules, Recorded, Scanner, Stream};
use corral_events::{Event, EventBus, Kind, Source};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The project's alert rules and the log of what they found.
pub struct Alerts {
    rules: Arc<AlertRules>,
    log: Mutex<AlertLog>,
    bus: EventBus,
}

impl Alerts {
    /// Alerts by `settings` (the `[alerts]` table), reported on `bus`. An error names the
    /// pattern or id that is wrong.
    pub fn new(
        settings: &corral_config::AlertSettings,
        bus: EventBus,
    ) -> Result<Arc<Alerts>, String> {
        Ok(Arc::new(Alerts {
            rules: Arc::new(AlertRules::with_config(settings)?),
            log: Mutex::new(AlertLog::from_settings(settings)),
            bus,
        }))
    }

    /// What the log holds that `query` asks for, oldest first.
    pub fn query(&self, query: &AlertQuery) -> Vec<Alert> {
        self.log.lock().unwrap().query(query)
    }

    /// The newest alert of `source` (`process:web`), if any.
    pub fn latest(&self, source: &str) -> Option<Alert> {
        let query = AlertQuery {
            source: Some(source.to_owned()),
            limit: Some(1),
            ..AlertQuery::default()
        };
        self.query(&query).pop()
    }

    /// A feed for one drain of `source`.
    pub(crate) fn feed(self: &Arc<Self>, source: &Source) -> Feed {
        Feed {
            scanner: Scanner::new(self.rules.clone(), source.to_string()),
            alerts: self.clone(),
            found: Vec::new(),
        }
    }

    fn record(&self, found: &mut Vec<Alert>) {
        let mut new = Vec::new();
        {
            let mut log = self.log.lock().unwrap();
            for alert in found.drain(..) {
                if let Recorded::New(a) = log.record(alert) {
                    new.push(a.clone());
                }
            }
        }
        for a in new {
            self.bus.emit(event(&a));
        }
    }
}

/// The `alert` event of a new alert.
fn event(a: &Alert) -> Event {
    let source = Source::parse(&a.source).unwrap_or(Source::Corral);
    let mut ev = Event::new(Kind::Alert, source)
        .with("id", a.id.as_str())
        .with("rule", a.rule.as_str())
        .with("category", a.category.as_str())
        .with("severity", a.severity.as_str())
        .with("message", a.message.as_str())
        .with(
            "stream",
            match a.stream {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            },
        );
    if let Some(loc) = &a.location {
        ev = ev.with("location", loc.to_string());
    }
    ev
}

/// One drain's scanner and where its alerts go.
pub(crate) struct Feed {
    scanner: Scanner,
    alerts: Arc<Alerts>,
    found: Vec<Alert>,
}

impl Feed {
    /// Scans one line (cut and redacted already).
    pub(crate) fn line(&mut self, text: &str, stream: Stream) {
        self.scanner
            .feed(text, stream, SystemTime::now(), &mut self.found);
        if !self.found.is_empty() {
            self.alerts.record(&mut self.found);
        }
    }

    /// How long the drain may wait for more output before [`Feed::idle`]: a group (a
    /// traceback) is open, and ends when its stream goes quiet.
    pub(crate) fn idle_after(&self) -> Option<Duration> {
        self.scanner
            .pending()
            .then(|| self.alerts.rules.limits().group_idle)
    }

    /// Nothing arrived for [`Feed::idle_after`]: an open group is complete.
    pub(crate) fn idle(&mut self) {
        self.scanner.tick(SystemTime::now(), &mut self.found);
        if !self.found.is_empty() {
            self.alerts.record(&mut self.found);
        }
    }

    /// The stream ended.
    pub(crate) fn finish(&mut self) {
        self.scanner.finish(&mut self.found);
        if !self.found.is_empty() {
            self.alerts.record(&mut self.found);
        }
    }
}
