//! Errors recognised in what the units print: every byte of a dev process's output and
//! of an MCP server's stderr also goes through an alert scanner ([`corral_alerts`]).
//!
//! Scanning never slows the drain: the drain hands each chunk it read to a [`Tap`] (one
//! copy, no per-line work) and goes on; a scanning task per stream splits the chunks
//! into lines, redacts them as the drain does, and feeds its own [`Scanner`] (a stderr
//! traceback cannot mix with stdout lines). The queue between them is bounded: a
//! scanner that falls behind a flood loses chunks rather than holding up the drain, and
//! says how much it skipped (an open group is closed at the gap, not stitched across
//! it). The log behind [`Alerts`] deduplicates: a new alert becomes one `alert` event; a
//! repeat within the window only raises the count of the one already listed.

use corral_alerts::{Alert, AlertLog, AlertQuery, AlertRules, Recorded, Scanner, Stream};
use corral_config::redact::Redactor;
use corral_events::{Event, EventBus, Kind, Source};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::mpsc;

/// Chunks a scanner may be behind its drain (each at most the drain's 64 KiB read).
const QUEUE_CHUNKS: usize = 64;

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

    /// A tap for one output stream of `source`, and the scanning task the caller runs
    /// for as long as the stream (it ends when the tap is dropped).
    pub(crate) fn tap(
        self: &Arc<Self>,
        source: &Source,
        stream: Stream,
        redactor: Redactor,
        max_line: usize,
    ) -> (Tap, impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::channel(QUEUE_CHUNKS);
        let scanning = scan(
            rx,
            Scanner::new(self.rules.clone(), source.to_string()),
            stream,
            redactor,
            max_line,
            self.clone(),
        );
        (
            Tap {
                tx,
                skipped: 0,
                source: source.to_string(),
                alerts: self.clone(),
                reported: false,
            },
            scanning,
        )
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

/// What a drain hands to its scanner.
enum Chunk {
    Data(Vec<u8>, SystemTime),
    /// Chunks were dropped here: what was open cannot be finished.
    Gap,
}

/// A drain's end of the queue to its scanner.
pub(crate) struct Tap {
    tx: mpsc::Sender<Chunk>,
    /// Bytes dropped since the last chunk that went through.
    skipped: u64,
    source: String,
    alerts: Arc<Alerts>,
    reported: bool,
}

impl Tap {
    /// Queues a copy of `bytes` (just read) for scanning; never waits.
    pub(crate) fn chunk(&mut self, bytes: &[u8]) {
        if self.skipped > 0 {
            if self.tx.try_send(Chunk::Gap).is_err() {
                self.skipped += bytes.len() as u64;
                return;
            }
            self.skipped = 0;
        }
        let chunk = Chunk::Data(bytes.to_vec(), SystemTime::now());
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(chunk) {
            self.skipped += bytes.len() as u64;
            if !self.reported {
                // Once per stream: a flood faster than the scanner is worth knowing
                // about (a warning among the alerts), not worth one per chunk.
                self.reported = true;
                let rule = "corral.scan_skipped";
                let message = "output arrives faster than the alert scanner reads it; \
                    some of it was not scanned";
                let now = SystemTime::now();
                let alert = Alert {
                    id: corral_alerts::alert_id(&self.source, rule, message, None),
                    source: self.source.clone(),
                    rule: rule.to_owned(),
                    category: "corral".to_owned(),
                    severity: corral_alerts::Severity::Warning,
                    message: message.to_owned(),
                    location: None,
                    lines: Vec::new(),
                    stream: Stream::Stdout,
                    count: 1,
                    first_seen: now,
                    last_seen: now,
                };
                self.alerts.record(&mut vec![alert]);
            }
        }
    }
}

/// The scanning task of one stream: lines out of chunks, scanned as they are (a line
/// is borrowed from its chunk, not copied, unless it spans two), an open group
/// completed when the stream goes quiet, at a gap and at the end. Only what an alert
/// quotes is redacted: the scanner reads the raw text, nothing of it leaves unredacted.
async fn scan(
    mut rx: mpsc::Receiver<Chunk>,
    mut scanner: Scanner,
    stream: Stream,
    mut redactor: Redactor,
    max_line: usize,
    alerts: Arc<Alerts>,
) {
    let mut lines = Lines::new(max_line);
    let mut found = Vec::new();
    let idle = alerts.rules.limits().group_idle;
    let report = |found: &mut Vec<Alert>, redactor: &mut Redactor| {
        if !found.is_empty() {
            for a in found.iter_mut() {
                redact(a, redactor);
            }
            alerts.record(found);
        }
    };
    loop {
        let next = if scanner.pending() {
            match tokio::time::timeout(idle, rx.recv()).await {
                Ok(next) => next,
                Err(_) => {
                    scanner.tick(SystemTime::now(), &mut found);
                    report(&mut found, &mut redactor);
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        match next {
            Some(Chunk::Data(bytes, at)) => {
                lines.split(&bytes, |line| scanner.feed(line, stream, at, &mut found));
            }
            Some(Chunk::Gap) => {
                lines = Lines::new(max_line);
                scanner.finish(&mut found);
            }
            None => break,
        }
        report(&mut found, &mut redactor);
    }
    lines.finish(|line| scanner.feed(line, stream, SystemTime::now(), &mut found));
    scanner.finish(&mut found);
    report(&mut found, &mut redactor);
}

/// What an alert quotes of the output, redacted like the output itself.
fn redact(a: &mut Alert, redactor: &mut Redactor) {
    if let std::borrow::Cow::Owned(m) = redactor.line(&a.message) {
        a.message = m;
    }
    for line in &mut a.lines {
        if let std::borrow::Cow::Owned(l) = redactor.line(line) {
            *line = l;
        }
    }
    if let Some(loc) = &mut a.location
        && let std::borrow::Cow::Owned(f) = redactor.line(&loc.file)
    {
        loc.file = f;
    }
}

/// Splits chunks into lines without copying those that lie within one chunk; a line
/// that spans chunks is carried (at most `max_line` bytes of it).
struct Lines {
    carry: Vec<u8>,
    max_line: usize,
}

impl Lines {
    fn new(max_line: usize) -> Lines {
        Lines {
            carry: Vec::new(),
            max_line,
        }
    }

    fn split(&mut self, mut chunk: &[u8], mut emit: impl FnMut(&str)) {
        while let Some(end) = memchr::memchr(b'\n', chunk) {
            let line = &chunk[..end];
            chunk = &chunk[end + 1..];
            if self.carry.is_empty() {
                emit(&text(&line[..line.len().min(self.max_line)]));
            } else {
                self.take(line);
                emit(&text(&self.carry));
                self.carry.clear();
            }
        }
        self.take(chunk);
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = self.max_line.saturating_sub(self.carry.len());
        self.carry
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish(&mut self, mut emit: impl FnMut(&str)) {
        if !self.carry.is_empty() {
            emit(&text(&self.carry));
            self.carry.clear();
        }
    }
}

/// A line as text: borrowed when it is UTF-8 (a cut in the middle of a character
/// included: the cut part is replaced).
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
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
