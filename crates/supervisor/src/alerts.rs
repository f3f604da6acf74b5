//! Errors recognised in what the units print: every byte of a dev process's output and
//! of an MCP server's stderr also goes through an alert scanner ([`corral_alerts`]).
//!
//! Scanning never slows the drain: the drain hands each chunk it read to a [`Tap`] (one
//! copy, no per-line work, never a wait) and goes on. One scanning thread per project
//! (a thread, not a task: it must run beside the drains, on another core, not after
//! them on the same worker) splits the chunks into lines and feeds each stream's own
//! [`Scanner`] (a stderr traceback cannot mix with stdout lines). It reads the raw text
//! and redacts only what an alert quotes. The queue to it is bounded: a scanner that
//! falls behind a flood loses chunks rather than holding up a drain, and says so once
//! per stream (an open group is closed at the gap, not stitched across it). The log
//! behind [`Alerts`] deduplicates: a new alert becomes one `alert` event; a repeat
//! within the window only raises the count of the one already listed.

use corral_alerts::{Alert, AlertLog, AlertQuery, AlertRules, Recorded, Reload, Scanner, Stream};
use corral_config::redact::Redactor;
use corral_events::{Event, EventBus, Kind, Source};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Chunks the scanning thread may be behind all drains together (each chunk at most a
/// drain's 64 KiB read).
const QUEUE_CHUNKS: usize = 256;
/// How often open groups are checked for going quiet, however busy the other streams.
const TICK: Duration = Duration::from_millis(100);

/// The project's alert rules, the log of what they found, and the scanning thread.
pub struct Alerts {
    rules: Arc<AlertRules>,
    store: Arc<Store>,
    tx: std_mpsc::SyncSender<Msg>,
    next_stream: AtomicU64,
}

/// What the scanning thread reports to: the log, the reload signals and the bus.
struct Store {
    log: Mutex<AlertLog>,
    /// The last reload signals of each source, oldest first.
    reloads: Mutex<HashMap<String, VecDeque<Reload>>>,
    bus: EventBus,
}

/// Reload signals kept per source.
const RELOADS_KEPT: usize = 32;

impl Alerts {
    /// Alerts by `settings` (the `[alerts]` table), reported on `bus`. An error names the
    /// pattern or id that is wrong. Starts the scanning thread, which ends once this and
    /// every tap are gone.
    pub fn new(
        settings: &corral_config::AlertSettings,
        bus: EventBus,
    ) -> Result<Arc<Alerts>, String> {
        let rules = Arc::new(AlertRules::with_config(settings)?);
        let store = Arc::new(Store {
            log: Mutex::new(AlertLog::from_settings(settings)),
            reloads: Mutex::new(HashMap::new()),
            bus,
        });
        let (tx, rx) = std_mpsc::sync_channel(QUEUE_CHUNKS);
        let idle = rules.limits().group_idle;
        let (thread_store, thread_rules) = (store.clone(), rules.clone());
        std::thread::Builder::new()
            .name("corral-alerts".into())
            .spawn(move || scan_thread(rx, thread_store, thread_rules, idle))
            .map_err(|e| format!("cannot start the alert scanning thread: {e}"))?;
        Ok(Arc::new(Alerts {
            rules,
            store,
            tx,
            next_stream: AtomicU64::new(1),
        }))
    }

    /// What the log holds that `query` asks for, oldest first.
    pub fn query(&self, query: &AlertQuery) -> Vec<Alert> {
        self.store.log.lock().unwrap().query(query)
    }

    /// Waits until the output read so far is scanned and no group is still open (a
    /// traceback still being printed, which completes when its stream goes quiet): so an
    /// error printed before a query is in its answer. At most the groups' idle time and
    /// a tick; at once when the scanner is idle.
    pub async fn settle(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A full queue (the scanner far behind) is not waited for.
        if self.tx.try_send(Msg::Settle(tx)).is_err() {
            return;
        }
        let limit = self.rules.limits().group_idle + 2 * TICK;
        let _ = tokio::time::timeout(limit, rx).await;
    }

    /// The last reload signals `source` (`process:web`) printed (a dev server's reload
    /// or rebuild starting or done: [`corral_alerts::Reload`]), oldest first; at most
    /// 32.
    pub fn reloads(&self, source: &str) -> Vec<Reload> {
        let reloads = self.store.reloads.lock().unwrap();
        reloads
            .get(source)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
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

    /// A tap for one output stream of `source`; the stream is scanned until the tap is
    /// dropped.
    pub(crate) fn tap(
        self: &Arc<Self>,
        source: &Source,
        stream: Stream,
        redactor: Redactor,
        max_line: usize,
    ) -> Tap {
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let open = Msg::Open {
            id,
            scanner: Box::new(Scanner::new(self.rules.clone(), source.to_string())),
            stream,
            redactor,
            max_line,
        };
        // Waits if the queue is full: an open is rare, and must not be lost.
        let _ = self.tx.send(open);
        Tap {
            id,
            tx: self.tx.clone(),
            skipped: 0,
            source: source.to_string(),
            store: self.store.clone(),
            reported: false,
        }
    }
}

impl Store {
    fn reloaded(&self, source: &str, signals: Vec<Reload>) {
        let mut reloads = self.reloads.lock().unwrap();
        let kept = reloads.entry(source.to_owned()).or_default();
        kept.extend(signals);
        while kept.len() > RELOADS_KEPT {
            kept.pop_front();
        }
    }

    fn record(&self, found: &mut Vec<Alert>) {
        if found.is_empty() {
            return;
        }
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

/// What a drain tells the scanning thread.
enum Msg {
    Open {
        id: u64,
        scanner: Box<Scanner>,
        stream: Stream,
        redactor: Redactor,
        max_line: usize,
    },
    Data(u64, Vec<u8>, SystemTime),
    /// Chunks of this stream were dropped here: what was open cannot be finished.
    Gap(u64),
    Close(u64),
    /// Answer once everything before is scanned and no group is open ([`Alerts::settle`]).
    Settle(tokio::sync::oneshot::Sender<()>),
}

/// A drain's end of the queue to the scanning thread.
pub(crate) struct Tap {
    id: u64,
    tx: std_mpsc::SyncSender<Msg>,
    /// Bytes dropped since the last chunk that went through.
    skipped: u64,
    source: String,
    store: Arc<Store>,
    reported: bool,
}

impl Tap {
    /// Queues a copy of `bytes` (just read) for scanning; never waits.
    pub(crate) fn chunk(&mut self, bytes: &[u8]) {
        if self.skipped > 0 {
            if self.tx.try_send(Msg::Gap(self.id)).is_err() {
                self.skipped += bytes.len() as u64;
                return;
            }
            self.skipped = 0;
        }
        let msg = Msg::Data(self.id, bytes.to_vec(), SystemTime::now());
        if let Err(std_mpsc::TrySendError::Full(_)) = self.tx.try_send(msg) {
            self.skipped += bytes.len() as u64;
            if !self.reported {
                // Once per stream: a flood faster than the scanner is worth knowing
                // about (a warning among the alerts), not worth one per chunk.
                self.reported = true;
                self.store.record(&mut vec![skipped_alert(&self.source)]);
            }
        }
    }
}

impl Drop for Tap {
    /// The stream ended: its scanner completes what is open. Waits if the queue is full
    /// (briefly: the thread empties it at hundreds of MiB/s), since a lost close would
    /// leave the stream's state behind.
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Close(self.id));
    }
}

fn skipped_alert(source: &str) -> Alert {
    let rule = "corral.scan_skipped";
    let message =
        "output arrives faster than the alert scanner reads it; some of it was not scanned";
    let now = SystemTime::now();
    Alert {
        id: corral_alerts::alert_id(source, rule, message, None),
        source: source.to_owned(),
        rule: rule.to_owned(),
        category: "corral".to_owned(),
        severity: corral_alerts::Severity::Warning,
        message: message.to_owned(),
        location: None,
        function: None,
        code: None,
        cause: None,
        frames: Vec::new(),
        lines: Vec::new(),
        stream: Stream::Stdout,
        count: 1,
        first_seen: now,
        last_seen: now,
    }
}

/// One stream, as the scanning thread keeps it.
struct Scanned {
    scanner: Box<Scanner>,
    lines: Lines,
    stream: Stream,
    redactor: Redactor,
}

impl Scanned {
    fn finish(&mut self, found: &mut Vec<Alert>) {
        let (scanner, stream) = (&mut self.scanner, self.stream);
        self.lines
            .finish(|line| scanner.feed(line, stream, SystemTime::now(), found));
        self.scanner.finish(found);
    }
}

/// The scanning thread: lines out of chunks, scanned as they are (a line is borrowed
/// from its chunk, not copied, unless it spans two); an open group is completed when
/// its stream goes quiet, at a gap and at the end. Only what an alert quotes is
/// redacted: the scanner reads the raw text, nothing of it leaves unredacted.
fn scan_thread(
    rx: std_mpsc::Receiver<Msg>,
    store: Arc<Store>,
    rules: Arc<AlertRules>,
    idle: Duration,
) {
    let mut streams: HashMap<u64, Scanned> = HashMap::new();
    let mut found = Vec::new();
    // Queries waiting for open groups to complete, with their deadlines.
    let mut settling: Vec<(std::time::Instant, tokio::sync::oneshot::Sender<()>)> = Vec::new();
    let tick = TICK.min(idle);
    let mut last_tick = std::time::Instant::now();
    loop {
        let mut pending = streams.values().any(|s| s.scanner.pending());
        // Open groups are checked every tick, even while other streams keep the
        // queue busy (a quiet traceback must not wait for a chatty neighbour).
        if pending && last_tick.elapsed() >= tick {
            last_tick = std::time::Instant::now();
            for s in streams.values_mut() {
                let before = found.len();
                s.scanner.tick(SystemTime::now(), &mut found);
                redact_all(&mut found[before..], &mut s.redactor);
            }
            store.record(&mut found);
            pending = streams.values().any(|s| s.scanner.pending());
        }
        let now = std::time::Instant::now();
        // Past its deadline a waiter is let go (dropping its sender ends its wait).
        settling.retain(|(deadline, _)| *deadline > now);
        if !pending {
            for (_, tx) in settling.drain(..) {
                let _ = tx.send(());
            }
        }
        let msg = if pending {
            match rx.recv_timeout(tick) {
                Ok(msg) => msg,
                Err(std_mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match rx.recv() {
                Ok(msg) => msg,
                Err(_) => return,
            }
        };
        let id = match msg {
            Msg::Open {
                id,
                scanner,
                stream,
                redactor,
                max_line,
            } => {
                streams.insert(
                    id,
                    Scanned {
                        scanner,
                        lines: Lines::new(max_line),
                        stream,
                        redactor,
                    },
                );
                continue;
            }
            Msg::Data(id, bytes, at) => {
                if let Some(s) = streams.get_mut(&id) {
                    s.lines
                        .scan(&bytes, &rules, &mut s.scanner, s.stream, at, &mut found);
                    let signals = s.scanner.take_reloads();
                    if !signals.is_empty() {
                        store.reloaded(s.scanner.source(), signals);
                    }
                }
                id
            }
            Msg::Gap(id) => {
                if let Some(s) = streams.get_mut(&id) {
                    s.lines = Lines::new(s.lines.max_line);
                    s.scanner.finish(&mut found);
                }
                id
            }
            Msg::Close(id) => {
                if let Some(mut s) = streams.remove(&id) {
                    s.finish(&mut found);
                    redact_all(&mut found, &mut s.redactor);
                    store.record(&mut found);
                }
                continue;
            }
            Msg::Settle(tx) => {
                if streams.values().any(|s| s.scanner.pending()) {
                    settling.push((std::time::Instant::now() + idle + tick, tx));
                } else {
                    let _ = tx.send(());
                }
                continue;
            }
        };
        if !found.is_empty() {
            if let Some(s) = streams.get_mut(&id) {
                redact_all(&mut found, &mut s.redactor);
            }
            store.record(&mut found);
        }
    }
}

fn redact_all(found: &mut [Alert], redactor: &mut Redactor) {
    for a in found {
        redact(a, redactor);
    }
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

    /// Like [`Lines::split`], but while `scanner` has no group open, whole runs of lines
    /// that contain no rule's literal are skipped with one search over the chunk (they
    /// cannot start an alert), so an ordinary flood costs a pass of the prefilter, not
    /// a call per line.
    fn scan(
        &mut self,
        mut chunk: &[u8],
        rules: &AlertRules,
        scanner: &mut Scanner,
        stream: Stream,
        at: SystemTime,
        found: &mut Vec<Alert>,
    ) {
        // A line carried over from the last chunk is fed whole.
        if !self.carry.is_empty() {
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                self.take(chunk);
                return;
            };
            self.take(&chunk[..end]);
            scanner.feed(&text(&self.carry), stream, at, found);
            self.carry.clear();
            chunk = &chunk[end + 1..];
        }
        loop {
            if !scanner.pending() {
                match rules.next_candidate(chunk) {
                    Some(at_hit) => {
                        let start = memchr::memrchr(b'\n', &chunk[..at_hit]).map_or(0, |i| i + 1);
                        chunk = &chunk[start..];
                    }
                    None => {
                        // Nothing here starts an alert; the unfinished last line may
                        // still, with what comes next.
                        let start = memchr::memrchr(b'\n', chunk).map_or(0, |i| i + 1);
                        self.take(&chunk[start..]);
                        return;
                    }
                }
            }
            let Some(end) = memchr::memchr(b'\n', chunk) else {
                self.take(chunk);
                return;
            };
            let line = &chunk[..end];
            scanner.feed(
                &text(&line[..line.len().min(self.max_line)]),
                stream,
                at,
                found,
            );
            chunk = &chunk[end + 1..];
        }
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
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
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

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = concat!(
        "GET /health 200\n",
        "INFO ready\n",
        "Traceback (most recent call last):\n",
        "  File \"/srv/app.py\", line 7, in <module>\n",
        "    main()\n",
        "  File \"/srv/app.py\", line 4, in main\n",
        "    raise ValueError(\"bad config\")\n",
        "ValueError: bad config\n",
        "GET /users 200\n",
    );

    /// Every cut of the log into two chunks finds the one traceback, with its message
    /// and location, however the lines fall across the cut.
    #[test]
    fn a_traceback_is_found_wherever_the_chunks_are_cut() {
        let rules = Arc::new(AlertRules::defaults());
        for cut in 0..=LOG.len() {
            let mut scanner = Scanner::new(rules.clone(), "process:t");
            let mut lines = Lines::new(8192);
            let mut found = Vec::new();
            let now = SystemTime::now();
            let (a, b) = LOG.as_bytes().split_at(cut);
            lines.scan(a, &rules, &mut scanner, Stream::Stderr, now, &mut found);
            lines.scan(b, &rules, &mut scanner, Stream::Stderr, now, &mut found);
            lines.finish(|line| scanner.feed(line, Stream::Stderr, now, &mut found));
            scanner.finish(&mut found);
            let tracebacks: Vec<_> = found
                .iter()
                .filter(|a| a.rule == "python.traceback")
                .collect();
            assert_eq!(tracebacks.len(), 1, "cut at {cut}: {found:#?}");
            assert_eq!(
                tracebacks[0].message, "ValueError: bad config",
                "cut at {cut}"
            );
            assert_eq!(
                tracebacks[0]
                    .location
                    .as_ref()
                    .map(|l| l.to_string())
                    .as_deref(),
                Some("/srv/app.py:4"),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn the_scanning_thread_reports_a_new_alert_once_redacted_and_counts_repeats() {
        let bus = EventBus::new(64);
        let mut events = bus.subscribe();
        let alerts = Alerts::new(&Default::default(), bus).unwrap();
        let secret = "hunter2-secret".to_owned();
        let mut tap = alerts.tap(
            &Source::Process("t".into()),
            Stream::Stderr,
            Redactor::new([&secret]),
            8192,
        );
        let line = b"ERROR db: login failed for hunter2-secret\n";
        tap.chunk(line);
        tap.chunk(line);
        drop(tap);
        let ev = events.blocking_recv().unwrap();
        assert_eq!(ev.kind, "alert");
        assert_eq!(ev.source, "process:t");
        let message = ev.data["message"].as_str().unwrap();
        assert!(message.ends_with("login failed for ***"), "{message}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alerts.latest("process:t").is_none_or(|a| a.count < 2) {
            assert!(std::time::Instant::now() < deadline, "no repeat counted");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(events.try_recv().is_err(), "a repeat is not a second event");
    }
}
