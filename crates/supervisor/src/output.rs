//! A dev process's output, kept in memory: one bounded ring per process.
//!
//! Both drains of a process (stdout and stderr, or the one pseudo-terminal) push into
//! the same [`OutputRing`], so its lines are interleaved in the order they arrived. Every
//! line carries its stream, the time it arrived, the run of the process that wrote it
//! (so a restart is visible in the middle of the output) and a sequence number that only
//! grows, so "what is new since line N" is a simple question ([`Query::after_seq`],
//! [`OutputRing::wait_for`]).
//!
//! The ring is bounded by bytes, not lines: each line costs its text plus
//! [`LINE_OVERHEAD`] (so a flood of empty lines is bounded too), the oldest lines are
//! evicted first, and a single line keeps at most [`MAX_LINE`] bytes (the rest is cut
//! with [`TRUNCATION_MARKER`], as for stderr). Pushing takes a mutex for the push alone;
//! queries copy out what they return.

use crate::lines::{LineSink, TRUNCATION_MARKER, floor_char_boundary};
pub use crate::stderr::MAX_LINE;
use corral_config::redact::Redactor;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::io::AsyncRead;
use tokio::sync::watch;

/// What each line costs in the byte bound beyond its text: about the memory of its
/// metadata and queue slot.
pub const LINE_OVERHEAD: usize = 64;

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    /// A pseudo-terminal: stdout and stderr merged by the terminal, not told apart.
    Pty,
}

/// One line of output with where and when it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputLine {
    /// Grows by one with every line of the ring, across runs; the first line is 1.
    pub seq: u64,
    /// The run of the process that wrote it (1 for the first start, +1 per restart).
    pub run: u32,
    pub stream: Stream,
    /// When the line was complete (RFC 3339 with milliseconds, UTC, on the wire).
    #[serde(with = "rfc3339")]
    pub time: SystemTime,
    /// Without its line ending; valid UTF-8 (invalid bytes became U+FFFD).
    pub text: String,
}

/// Which streams a query wants. A [`Stream::Pty`] line matches every filter: on a
/// terminal, stdout and stderr cannot be told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamFilter {
    #[default]
    Both,
    Stdout,
    Stderr,
}

impl StreamFilter {
    /// Whether a line of `stream` passes.
    pub fn matches(self, stream: Stream) -> bool {
        match (self, stream) {
            (StreamFilter::Both, _) | (_, Stream::Pty) => true,
            (StreamFilter::Stdout, s) => s == Stream::Stdout,
            (StreamFilter::Stderr, s) => s == Stream::Stderr,
        }
    }
}

/// How many of the matching lines a query returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    #[default]
    All,
    /// The newest N, oldest first.
    Last(usize),
    /// The oldest N.
    First(usize),
}

/// What to read from a ring; every condition must hold (the default: everything).
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub stream: StreamFilter,
    /// Lines that arrived at or after this time.
    pub since: Option<SystemTime>,
    /// Lines with a sequence number greater than this.
    pub after_seq: Option<u64>,
    /// Lines this matches (anywhere in the line).
    pub grep: Option<Regex>,
    pub limit: Limit,
}

impl Query {
    /// Whether `line` meets the conditions (not the limit).
    pub fn matches(&self, line: &OutputLine) -> bool {
        self.after_seq.is_none_or(|after| line.seq > after)
            && self.since.is_none_or(|since| line.time >= since)
            && self.stream.matches(line.stream)
            && self.grep.as_ref().is_none_or(|re| re.is_match(&line.text))
    }
}

/// The bounded output of one process, shared by its drains and its readers.
#[derive(Debug, Clone)]
pub struct OutputRing {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// The sequence number of the newest line (0: none yet).
    latest: watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    lines: VecDeque<OutputLine>,
    /// Cost of the lines kept (text + [`LINE_OVERHEAD`] each).
    bytes: usize,
    capacity: usize,
    next_seq: u64,
    evicted: u64,
}

/// What a ring holds, for status displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingStats {
    pub lines: usize,
    pub bytes: usize,
    pub capacity: usize,
    /// Lines dropped to stay within the capacity, in all.
    pub evicted: u64,
    /// The newest line's sequence number (0: none yet).
    pub latest_seq: u64,
}

impl OutputRing {
    /// A ring holding at most `capacity` bytes (see the module docs for what counts);
    /// the newest line is kept even when it alone is larger.
    pub fn new(capacity: u64) -> Self {
        OutputRing {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    lines: VecDeque::new(),
                    bytes: 0,
                    capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
                    next_seq: 1,
                    evicted: 0,
                }),
                latest: watch::channel(0).0,
            }),
        }
    }

    /// Appends one line (cut to [`MAX_LINE`] bytes with a marker), evicting the oldest
    /// beyond the capacity, and wakes the waiters. Returns its sequence number.
    pub fn push(&self, run: u32, stream: Stream, text: String) -> u64 {
        self.push_batch(run, stream, &mut vec![text], SystemTime::now())
    }

    /// Appends the lines of one read at once, all stamped `time`: one lock, one wake-up
    /// (the drain's way; [`OutputRing::push`] costs both per line).
    /// Returns the last line's sequence number (the newest one's when `lines` is empty).
    pub fn push_batch(
        &self,
        run: u32,
        stream: Stream,
        lines: &mut Vec<String>,
        time: SystemTime,
    ) -> u64 {
        if lines.is_empty() {
            return self.latest_seq();
        }
        let seq = {
            let mut state = self.inner.state.lock().unwrap();
            for mut text in lines.drain(..) {
                if text.len() > MAX_LINE {
                    text.truncate(floor_char_boundary(&text, MAX_LINE));
                    text.push_str(TRUNCATION_MARKER);
                }
                let seq = state.next_seq;
                state.next_seq += 1;
                state.bytes += text.len() + LINE_OVERHEAD;
                state.lines.push_back(OutputLine {
                    seq,
                    run,
                    stream,
                    time,
                    text,
                });
            }
            while state.bytes > state.capacity && state.lines.len() > 1 {
                let old = state.lines.pop_front().expect("more than one line");
                state.bytes -= old.text.len() + LINE_OVERHEAD;
                state.evicted += 1;
            }
            state.next_seq - 1
        };
        self.inner.latest.send_replace(seq);
        seq
    }

    /// The lines `query` asks for, oldest first.
    pub fn query(&self, query: &Query) -> Vec<OutputLine> {
        let state = self.inner.state.lock().unwrap();
        // Sequence numbers are consecutive in the ring: skip what `after_seq` excludes.
        let skip = match (query.after_seq, state.lines.front()) {
            (Some(after), Some(first)) => usize::try_from(after.saturating_sub(first.seq - 1))
                .unwrap_or(usize::MAX)
                .min(state.lines.len()),
            _ => 0,
        };
        let matching = state.lines.range(skip..).filter(|l| query.matches(l));
        match query.limit {
            Limit::All => matching.cloned().collect(),
            Limit::First(n) => matching.take(n).cloned().collect(),
            Limit::Last(n) => {
                let mut last: Vec<OutputLine> = Vec::new();
                // Walk back from the newest, so a small N over a big ring is cheap.
                for line in state.lines.range(skip..).rev() {
                    if last.len() == n {
                        break;
                    }
                    if query.matches(line) {
                        last.push(line.clone());
                    }
                }
                last.reverse();
                last
            }
        }
    }

    /// The newest line's sequence number (0: none yet): "new output" is what comes
    /// after it.
    pub fn latest_seq(&self) -> u64 {
        *self.inner.latest.borrow()
    }

    /// A receiver of the newest sequence number, changed by every push.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.latest.subscribe()
    }

    /// Waits for the first line after `after_seq` that `query` matches (its `after_seq`
    /// and `limit` are ignored) and returns it; pending until one comes, so bound it
    /// with a timeout or a cancellation. A burst larger than the whole ring between two
    /// wake-ups can evict a line before it is looked at.
    pub async fn wait_for(&self, after_seq: u64, query: &Query) -> OutputLine {
        let mut rx = self.subscribe();
        let mut query = query.clone();
        query.limit = Limit::First(1);
        let mut cursor = after_seq;
        loop {
            // Mark the current value seen before looking, so a push after the look wakes us.
            let latest = *rx.borrow_and_update();
            query.after_seq = Some(cursor);
            if let Some(line) = self.query(&query).pop() {
                return line;
            }
            cursor = cursor.max(latest);
            if rx.changed().await.is_err() {
                // The sender lives in `self`: cannot happen while we hold it.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Counts and sizes.
    pub fn stats(&self) -> RingStats {
        let state = self.inner.state.lock().unwrap();
        RingStats {
            lines: state.lines.len(),
            bytes: state.bytes,
            capacity: state.capacity,
            evicted: state.evicted,
            latest_seq: state.next_seq - 1,
        }
    }
}

/// Reads `reader` to its end (or a read error: the child is gone either way), splitting
/// lines (at most [`MAX_LINE`] bytes each), redacting each with `redactor`, pushing it
/// to `ring` as `run`'s `stream`, after handing it to `also` (the log file, the console;
/// the line is cut and redacted already).
pub async fn drain(
    reader: impl AsyncRead + Unpin,
    ring: OutputRing,
    run: u32,
    stream: Stream,
    redactor: Redactor,
    also: impl FnMut(&str),
) {
    struct Sink<F> {
        ring: OutputRing,
        run: u32,
        stream: Stream,
        redactor: Redactor,
        also: F,
    }
    impl<F: FnMut(&str)> LineSink for Sink<F> {
        fn line(&mut self, line: String) {
            let line = match self.redactor.line(&line) {
                std::borrow::Cow::Borrowed(_) => line,
                std::borrow::Cow::Owned(redacted) => redacted,
            };
            (self.also)(&line);
            self.ring.push(self.run, self.stream, line);
        }
    }
    let mut sink = Sink {
        ring,
        run,
        stream,
        redactor,
        also,
    };
    crate::lines::pump(reader, MAX_LINE, &mut sink).await;
}

/// `SystemTime` as an RFC 3339 string with milliseconds.
mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_millis(*time))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339_weak(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn texts(lines: &[OutputLine]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[tokio::test]
    async fn two_drains_interleave_in_arrival_order() {
        let ring = OutputRing::new(1 << 20);
        let (mut out_w, out_r) = tokio::io::duplex(1024);
        let (mut err_w, err_r) = tokio::io::duplex(1024);
        let out = tokio::spawn(drain(
            out_r,
            ring.clone(),
            1,
            Stream::Stdout,
            Redactor::default(),
            |_| {},
        ));
        let err = tokio::spawn(drain(
            err_r,
            ring.clone(),
            1,
            Stream::Stderr,
            Redactor::default(),
            |_| {},
        ));
        use tokio::io::AsyncWriteExt;
        // Each write waits until its line is in the ring, so the arrival order is known.
        let mut rx = ring.subscribe();
        for i in 0..6u64 {
            let (w, text) = if i % 2 == 0 {
                (&mut out_w, format!("out {i}\n"))
            } else {
                (&mut err_w, format!("err {i}\n"))
            };
            w.write_all(text.as_bytes()).await.unwrap();
            tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| *s == i + 1))
                .await
                .expect("the line arrives")
                .unwrap();
        }
        drop((out_w, err_w));
        out.await.unwrap();
        err.await.unwrap();
        let all = ring.query(&Query::default());
        assert_eq!(
            texts(&all),
            ["out 0", "err 1", "out 2", "err 3", "out 4", "err 5"]
        );
        let streams: Vec<Stream> = all.iter().map(|l| l.stream).collect();
        assert_eq!(streams[..2], [Stream::Stdout, Stream::Stderr]);
        let seqs: Vec<u64> = all.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        assert!(all.windows(2).all(|w| w[0].time <= w[1].time));
    }

    #[test]
    fn the_byte_bound_evicts_the_oldest_lines() {
        let cost = 10 + LINE_OVERHEAD;
        let ring = OutputRing::new((cost * 3) as u64);
        for i in 0..5 {
            ring.push(1, Stream::Stdout, format!("line {i:05}"));
        }
        let all = ring.query(&Query::default());
        assert_eq!(texts(&all), ["line 00002", "line 00003", "line 00004"]);
        assert_eq!(
            ring.stats(),
            RingStats {
                lines: 3,
                bytes: cost * 3,
                capacity: cost * 3,
                evicted: 2,
                latest_seq: 5
            }
        );
        // A line bigger than the whole ring replaces everything but is kept.
        ring.push(1, Stream::Stdout, "x".repeat(cost * 5));
        let all = ring.query(&Query::default());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].seq, 6);
        assert_eq!(ring.stats().evicted, 5);
    }

    #[test]
    fn empty_lines_count_against_the_bound() {
        let ring = OutputRing::new((LINE_OVERHEAD * 100) as u64);
        for _ in 0..10_000 {
            ring.push(1, Stream::Stdout, String::new());
        }
        assert_eq!(ring.stats().lines, 100);
    }

    #[test]
    fn queries_combine() {
        let ring = OutputRing::new(1 << 20);
        ring.push(1, Stream::Stdout, "compiling".into());
        ring.push(1, Stream::Stderr, "warning: unused".into());
        ring.push(1, Stream::Stdout, "ready on :5173".into());
        std::thread::sleep(Duration::from_millis(5));
        let later = SystemTime::now();
        ring.push(2, Stream::Stderr, "error: boom".into());
        ring.push(2, Stream::Stdout, "ready on :5173".into());
        ring.push(2, Stream::Pty, "both streams".into());

        let q = |f: fn(&mut Query)| {
            let mut q = Query::default();
            f(&mut q);
            texts(&ring.query(&q))
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(q(|_| {}).len(), 6);
        assert_eq!(
            q(|q| q.limit = Limit::Last(2)),
            ["ready on :5173", "both streams"]
        );
        assert_eq!(
            q(|q| q.limit = Limit::First(2)),
            ["compiling", "warning: unused"]
        );
        assert_eq!(
            q(|q| q.stream = StreamFilter::Stderr),
            ["warning: unused", "error: boom", "both streams"]
        );
        assert_eq!(
            q(|q| q.stream = StreamFilter::Stdout),
            [
                "compiling",
                "ready on :5173",
                "ready on :5173",
                "both streams"
            ]
        );
        assert_eq!(
            q(|q| q.grep = Some(Regex::new("^(warning|error):").unwrap())),
            ["warning: unused", "error: boom"]
        );
        assert_eq!(
            q(|q| q.after_seq = Some(4)),
            ["ready on :5173", "both streams"]
        );
        assert_eq!(q(|q| q.after_seq = Some(99)), Vec::<String>::new());
        assert_eq!(q(|q| q.after_seq = Some(0)).len(), 6);
        let since = ring.query(&Query {
            since: Some(later),
            ..Query::default()
        });
        assert_eq!(since.iter().map(|l| l.seq).collect::<Vec<_>>(), [4, 5, 6]);
        assert!(since.iter().all(|l| l.run == 2));
        let combined = ring.query(&Query {
            stream: StreamFilter::Stdout,
            grep: Some(Regex::new("ready").unwrap()),
            after_seq: Some(1),
            since: None,
            limit: Limit::Last(1),
        });
        assert_eq!((combined[0].seq, combined[0].run), (5, 2));
        assert_eq!(combined.len(), 1);
    }

    #[test]
    fn after_seq_skips_correctly_once_lines_were_evicted() {
        let ring = OutputRing::new((LINE_OVERHEAD * 3 + 4) as u64);
        for i in 1..=10 {
            ring.push(1, Stream::Stdout, i.to_string());
        }
        let seqs = |after| {
            ring.query(&Query {
                after_seq: Some(after),
                ..Query::default()
            })
            .iter()
            .map(|l| l.seq)
            .collect::<Vec<_>>()
        };
        assert_eq!(seqs(0), [8, 9, 10]);
        assert_eq!(seqs(8), [9, 10]);
        assert_eq!(seqs(10), Vec::<u64>::new());
    }

    #[tokio::test]
    async fn a_one_mebibyte_line_is_capped() {
        let ring = OutputRing::new(1 << 20);
        let mut input = vec![b'a'; 1 << 20];
        input.extend_from_slice(b"\nnext\n");
        drain(
            &input[..],
            ring.clone(),
            1,
            Stream::Stdout,
            Redactor::default(),
            |_| {},
        )
        .await;
        let all = ring.query(&Query::default());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].text.len(), MAX_LINE + TRUNCATION_MARKER.len());
        assert!(all[0].text.ends_with(TRUNCATION_MARKER));
        assert_eq!(all[1].text, "next");
        // Pushed directly, too.
        ring.push(1, Stream::Stderr, "é".repeat(1 << 19));
        let last = ring.query(&Query {
            limit: Limit::Last(1),
            ..Query::default()
        });
        assert!(last[0].text.len() <= MAX_LINE + TRUNCATION_MARKER.len());
        assert!(last[0].text.starts_with("éé"));
    }

    #[tokio::test]
    async fn the_drain_redacts_and_hands_each_line_on() {
        let ring = OutputRing::new(1 << 20);
        let secret = "s3cret-value-99".to_owned();
        let mut seen = Vec::new();
        let input: &[u8] = b"key s3cret-value-99\r\nplain";
        drain(
            input,
            ring.clone(),
            3,
            Stream::Stderr,
            Redactor::new([&secret]),
            |l| seen.push(l.to_owned()),
        )
        .await;
        assert_eq!(seen, ["key ***", "plain"]);
        assert_eq!(ring.query(&Query::default())[0].run, 3);
    }

    #[tokio::test]
    async fn wait_for_returns_the_first_new_matching_line() {
        let ring = OutputRing::new(1 << 20);
        ring.push(1, Stream::Stdout, "ready (old run)".into());
        let after = ring.latest_seq();
        let query = Query {
            grep: Some(Regex::new("ready").unwrap()),
            ..Query::default()
        };
        let waiter = {
            let ring = ring.clone();
            let query = query.clone();
            tokio::spawn(async move { ring.wait_for(after, &query).await })
        };
        // Lines that do not match, then the one that does, from another task.
        let pusher = {
            let ring = ring.clone();
            tokio::spawn(async move {
                for i in 0..50 {
                    ring.push(2, Stream::Stdout, format!("compiling {i}"));
                    tokio::task::yield_now().await;
                }
                ring.push(2, Stream::Stderr, "ready in 30 ms".into());
                ring.push(2, Stream::Stderr, "ready again".into());
            })
        };
        let line = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the waiter wakes")
            .unwrap();
        assert_eq!(
            (line.seq, line.run, line.text.as_str()),
            (52, 2, "ready in 30 ms")
        );
        pusher.await.unwrap();
        // An already-present line answers at once.
        let line = ring.wait_for(0, &query).await;
        assert_eq!(line.seq, 1);
    }

    #[test]
    fn lines_serialize_with_a_readable_time() {
        let line = OutputLine {
            seq: 7,
            run: 2,
            stream: Stream::Pty,
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            text: "hi".into(),
        };
        let json = serde_json::to_string(&line).unwrap();
        assert_eq!(
            json,
            r#"{"seq":7,"run":2,"stream":"pty","time":"2023-11-14T22:13:20.123Z","text":"hi"}"#
        );
        assert_eq!(serde_json::from_str::<OutputLine>(&json).unwrap(), line);
    }
}
