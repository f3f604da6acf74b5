//! Content codings the proxy can undo: gzip, deflate (zlib, or raw as some servers send
//! it) and brotli, as streaming decoders fed chunk by chunk.

use crate::Shared;
use corral_events::{Event, Kind};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A coding named by `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    Deflate,
    Brotli,
}

impl Coding {
    /// The coding a `Content-Encoding` value names: `None` for identity or one not
    /// supported (zstd, several codings stacked).
    pub fn parse(value: &str) -> Option<Coding> {
        match value.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "deflate" => Some(Coding::Deflate),
            "br" => Some(Coding::Brotli),
            _ => None,
        }
    }
}

/// The plain bytes one bounded step hands out at most, unless its caller asks for fewer.
pub const STEP: usize = 32 * 1024;

/// Coded bytes given to a flate2 decoder per `write`. flate2's write-side decoders emit
/// at most one output buffer (32 KiB) per `write`, whatever the input, so the slice only
/// keeps each step short; the bound itself is the budget checked between writes.
const SLICE: usize = 4 * 1024;

/// A streaming decoder with an output budget: [`Decoder::decode`] takes coded bytes as
/// they come and hands out at most the plain bytes it is asked for, keeping what it
/// decoded beyond that (at most one flate2 buffer, or nothing for brotli) and leaving
/// the coded input it did not consume to the caller. A decompression bomb is thus never
/// materialized: the caller decides, step by step, whether to go on.
pub struct Decoder {
    inner: Inner,
    /// Plain bytes decoded but not handed out yet (over a step's budget).
    pending: Vec<u8>,
    /// Brotli: the stream has more output without more input.
    more: bool,
    /// flate2: `try_finish` ran (its output may still be pending).
    finished: bool,
}

enum Inner {
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    /// zlib-wrapped deflate, as the RFC says; raw deflate is detected from the first
    /// byte and switched to.
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Raw(flate2::write::DeflateDecoder<Vec<u8>>),
    /// Deflate before its first two bytes (which tell zlib from raw), and those seen.
    DeflateUnknown(Vec<u8>),
    /// brotli's stream API, so that each call's output is bounded by the buffer given
    /// (its writer would write out all a few input bytes decode to in one call).
    Brotli(Box<Brotli>),
}

struct Brotli {
    state: brotli::BrotliState<
        brotli::enc::StandardAlloc,
        brotli::enc::StandardAlloc,
        brotli::enc::StandardAlloc,
    >,
    buf: Vec<u8>,
    /// The stream ended (data after it is ignored).
    ended: bool,
}

impl Decoder {
    pub fn new(coding: Coding) -> Decoder {
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(flate2::write::MultiGzDecoder::new(Vec::new())),
            Coding::Deflate => Inner::DeflateUnknown(Vec::new()),
            Coding::Brotli => Inner::Brotli(Box::new(Brotli {
                state: brotli::BrotliState::new(
                    brotli::enc::StandardAlloc::default(),
                    brotli::enc::StandardAlloc::default(),
                    brotli::enc::StandardAlloc::default(),
                ),
                buf: vec![0; STEP],
                ended: false,
            })),
        };
        Decoder {
            inner,
            pending: Vec::new(),
            more: false,
            finished: false,
        }
    }

    /// Decodes from `coded`, appending at most `budget` plain bytes to `out`; returns
    /// how many bytes of `coded` it consumed (the rest is for the next call). It stops
    /// when the budget is spent or `coded` is consumed; with `coded` empty it only hands
    /// out what it still holds ([`Decoder::has_pending`]).
    pub fn decode(
        &mut self,
        coded: &[u8],
        budget: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<usize> {
        let limit = out.len() + budget;
        self.hand_out(out, limit);
        let mut used = 0;
        while out.len() < limit && (used < coded.len() || self.more_brotli()) {
            if let Inner::DeflateUnknown(seen) = &mut self.inner {
                seen.push(coded[used]);
                used += 1;
                if seen.len() == 2 {
                    self.resolve_deflate()?;
                }
                continue;
            }
            let end = (used + SLICE).min(coded.len());
            used += self.step(&coded[used..end])?;
            self.hand_out(out, limit);
        }
        if used == coded.len() && out.len() < limit {
            // What the last write decoded sits in flate2's buffer until the next write:
            // a page streamed in pieces should not wait for its next piece.
            self.flush()?;
            self.hand_out(out, limit);
        }
        Ok(used)
    }

    /// Whether plain bytes are waiting to be handed out without more input.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.more_brotli()
    }

    /// After the last coded byte: appends at most `budget` of the bytes still held to
    /// `out`; `Ok(true)` once all are out, `Ok(false)` to be called again. An error when
    /// the coded stream was cut short (gzip and brotli know their end).
    pub fn finish(&mut self, budget: usize, out: &mut Vec<u8>) -> std::io::Result<bool> {
        let limit = out.len() + budget;
        self.hand_out(out, limit);
        if !self.pending.is_empty() {
            return Ok(false);
        }
        let cut = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "stream cut short");
        match &mut self.inner {
            Inner::DeflateUnknown(seen) => {
                return if seen.is_empty() {
                    Ok(true)
                } else {
                    Err(cut())
                };
            }
            Inner::Brotli(_) => {
                while !self.brotli_ended() && out.len() < limit {
                    self.step(&[])?;
                    self.hand_out(out, limit);
                    if !self.more && !self.brotli_ended() {
                        return Err(cut());
                    }
                }
                return Ok(self.brotli_ended() && self.pending.is_empty());
            }
            _ if self.finished => {}
            Inner::Gzip(d) => d.try_finish()?,
            Inner::Zlib(d) => d.try_finish()?,
            Inner::Raw(d) => d.try_finish()?,
        }
        self.finished = true;
        self.collect();
        self.hand_out(out, limit);
        Ok(self.pending.is_empty())
    }

    /// Moves pending bytes to `out` up to `limit` bytes in all.
    fn hand_out(&mut self, out: &mut Vec<u8>, limit: usize) {
        let n = limit.saturating_sub(out.len()).min(self.pending.len());
        out.extend_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
    }

    fn more_brotli(&self) -> bool {
        self.more
    }

    fn brotli_ended(&self) -> bool {
        matches!(&self.inner, Inner::Brotli(b) if b.ended)
    }

    /// Picks zlib or raw deflate from the two bytes seen, and gives them to it.
    fn resolve_deflate(&mut self) -> std::io::Result<()> {
        let Inner::DeflateUnknown(seen) = &mut self.inner else {
            return Ok(());
        };
        // A zlib header's low nibble is CM = 8 and the two bytes are a multiple of 31;
        // raw deflate has no header.
        let zlib = seen[0] & 0x0f == 8 && (u16::from(seen[0]) << 8 | u16::from(seen[1])) % 31 == 0;
        let head = std::mem::take(seen);
        self.inner = if zlib {
            Inner::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
        } else {
            Inner::Raw(flate2::write::DeflateDecoder::new(Vec::new()))
        };
        let mut at = 0;
        while at < head.len() {
            at += self.step(&head[at..])?;
        }
        Ok(())
    }

    /// One write of at most [`SLICE`] coded bytes (or, for brotli, one call with an
    /// output buffer of [`STEP`]); its output goes to `pending`. Returns the input used.
    fn step(&mut self, coded: &[u8]) -> std::io::Result<usize> {
        use std::io::Write;
        let used = match &mut self.inner {
            Inner::Gzip(d) => d.write(coded)?,
            Inner::Zlib(d) => d.write(coded)?,
            Inner::Raw(d) => d.write(coded)?,
            Inner::Brotli(b) => {
                if b.ended {
                    return Ok(coded.len());
                }
                let (mut avail_in, mut in_at) = (coded.len(), 0);
                let (mut avail_out, mut out_at, mut total) = (b.buf.len(), 0, 0);
                let result = brotli::BrotliDecompressStream(
                    &mut avail_in,
                    &mut in_at,
                    coded,
                    &mut avail_out,
                    &mut out_at,
                    &mut b.buf,
                    &mut total,
                    &mut b.state,
                );
                self.pending.extend_from_slice(&b.buf[..out_at]);
                self.more = false;
                return match result {
                    brotli::BrotliResult::ResultFailure => Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "invalid brotli stream",
                    )),
                    brotli::BrotliResult::ResultSuccess => {
                        b.ended = true;
                        Ok(coded.len())
                    }
                    brotli::BrotliResult::NeedsMoreOutput => {
                        self.more = true;
                        Ok(in_at)
                    }
                    brotli::BrotliResult::NeedsMoreInput => Ok(in_at),
                };
            }
            Inner::DeflateUnknown(_) => unreachable!("resolved before any step"),
        };
        self.collect();
        // A flate stream that ended takes nothing more: what follows it is ignored.
        Ok(if used == 0 { coded.len() } else { used })
    }

    /// flate2's `flush`: writes out what its last `write` decoded.
    fn flush(&mut self) -> std::io::Result<()> {
        use std::io::Write;
        match &mut self.inner {
            Inner::Gzip(d) => d.flush()?,
            Inner::Zlib(d) => d.flush()?,
            Inner::Raw(d) => d.flush()?,
            _ => return Ok(()),
        }
        self.collect();
        Ok(())
    }

    /// Moves what a flate2 decoder wrote to `pending`.
    fn collect(&mut self) {
        let written = match &mut self.inner {
            Inner::Gzip(d) => d.get_mut(),
            Inner::Zlib(d) => d.get_mut(),
            Inner::Raw(d) => d.get_mut(),
            _ => return,
        };
        if self.pending.is_empty() {
            std::mem::swap(&mut self.pending, written);
        } else {
            self.pending.append(written);
        }
    }
}

/// Decodes all of `coded` (a whole body) unless it decodes to more than `limit` bytes:
/// `Ok(None)` then, having decoded no more than `limit` + one step.
pub fn decode_within(
    coding: Coding,
    coded: &[u8],
    limit: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut decoder = Decoder::new(coding);
    let mut plain = Vec::new();
    let mut used = 0;
    loop {
        let room = (limit + 1 - plain.len()).min(STEP);
        if used < coded.len() || decoder.has_pending() {
            used += decoder.decode(&coded[used..], room, &mut plain)?;
        } else if decoder.finish(room, &mut plain)? {
            return Ok(Some(plain));
        }
        if plain.len() > limit {
            return Ok(None);
        }
    }
}

/// Lets one `proxy.error` per limit reason through per [`LimitGate::WINDOW`]: a page
/// reloading a bomb, or reports naming one, must not write an event per request into
/// the journal. Unlike [`crate::forward::ErrorGate`] it keeps every reason's window, so
/// two limits tripping in turn still make one event each per window.
#[derive(Default)]
pub(crate) struct LimitGate {
    last: Mutex<HashMap<&'static str, Instant>>,
}

impl LimitGate {
    pub(crate) const WINDOW: Duration = Duration::from_secs(10);

    /// Whether an event for `reason` goes out now.
    pub(crate) fn pass(&self, reason: &'static str) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match last.get(reason) {
            Some(at) if now.duration_since(*at) < Self::WINDOW => false,
            _ => {
                last.insert(reason, now);
                true
            }
        }
    }
}

/// Says, in one `proxy.error` event (rate-limited by [`LimitGate`]), that a limit made
/// the proxy skip something: `error` is the reason (one fixed text per limit), `path`
/// what it was skipped for.
pub(crate) fn over_limit(shared: &Shared, reason: &'static str, path: &str) {
    if shared.limits.pass(reason) {
        shared.bus.emit(
            Event::new(Kind::ProxyError, shared.source())
                .with("error", reason)
                .with("path", path.to_owned())
                .with("target", shared.target.url.clone()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Decodes `coded` fed in pieces of `piece` bytes, with a budget of `budget` a step;
    /// checks no step hands out more than its budget.
    fn decode_all(coding: Coding, coded: &[u8], piece: usize, budget: usize) -> Vec<u8> {
        let mut d = Decoder::new(coding);
        let mut out = Vec::new();
        for mut piece in coded.chunks(piece) {
            while !piece.is_empty() || d.has_pending() {
                let mut step = Vec::new();
                let used = d.decode(piece, budget, &mut step).unwrap();
                assert!(step.len() <= budget, "a step of {} bytes", step.len());
                piece = &piece[used..];
                out.extend(step);
            }
        }
        loop {
            let mut step = Vec::new();
            let done = d.finish(budget, &mut step).unwrap();
            assert!(step.len() <= budget, "a final step of {} bytes", step.len());
            out.extend(step);
            if done {
                return out;
            }
        }
    }

    fn text() -> Vec<u8> {
        (0..2000)
            .map(|i| format!("<p>line {i}</p>\n"))
            .collect::<String>()
            .into_bytes()
    }

    fn gzip(plain: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(plain).unwrap();
        gz.finish().unwrap()
    }

    fn brotli(plain: &[u8]) -> Vec<u8> {
        let mut br = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        br.write_all(plain).unwrap();
        br.into_inner()
    }

    #[test]
    fn gzip_zlib_raw_deflate_and_brotli_decode_byte_by_byte() {
        use flate2::Compression;
        let plain = text();
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&plain).unwrap();
        let zlib = z.finish().unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(&plain).unwrap();
        let raw = raw.finish().unwrap();
        for (coding, coded) in [
            (Coding::Gzip, gzip(&plain)),
            (Coding::Deflate, zlib),
            (Coding::Deflate, raw),
            (Coding::Brotli, brotli(&plain)),
        ] {
            // One byte at a time: the decoder must not assume whole frames; and budgets
            // small and large.
            for (piece, budget) in [(1, STEP), (coded.len(), 1000), (7, 1)] {
                assert_eq!(
                    decode_all(coding, &coded, piece, budget),
                    plain,
                    "{coding:?} in pieces of {piece}, {budget} a step"
                );
            }
        }
    }

    /// A bomb (64 MiB of spaces in a few KiB) decodes step by step, never more than a
    /// step's budget at once, and a caller that stops early has not decoded the rest.
    #[test]
    fn a_bomb_is_decoded_only_as_far_as_asked() {
        let plain = vec![b' '; 64 << 20];
        for (coding, coded) in [
            (Coding::Gzip, gzip(&plain)),
            (Coding::Brotli, brotli(&plain)),
        ] {
            let mut d = Decoder::new(coding);
            let mut out = Vec::new();
            let used = d.decode(&coded, STEP, &mut out).unwrap();
            assert_eq!(out.len(), STEP, "{coding:?}");
            assert!(used < coded.len(), "{coding:?}: all input taken at once");
            assert!(
                d.pending.len() <= 2 * STEP,
                "{coding:?}: {} held",
                d.pending.len()
            );
            assert_eq!(decode_within(coding, &coded, 1 << 20).unwrap(), None);
            assert_eq!(
                decode_within(coding, &coded, 64 << 20)
                    .unwrap()
                    .map(|p| p.len()),
                Some(64 << 20)
            );
        }
    }

    #[test]
    fn a_cut_stream_is_an_error_at_finish() {
        for coded in [gzip(&text()), brotli(&text())] {
            let coding = if coded[0] == 0x1f {
                Coding::Gzip
            } else {
                Coding::Brotli
            };
            let mut d = Decoder::new(coding);
            let mut out = Vec::new();
            let half = &coded[..coded.len() / 2];
            let mut used = 0;
            while used < half.len() || d.has_pending() {
                used += d.decode(&half[used..], STEP, &mut out).unwrap();
            }
            let mut result = Ok(false);
            while result.as_ref().is_ok_and(|done| !done) {
                result = d.finish(STEP, &mut out);
            }
            assert!(result.is_err(), "{coding:?}");
        }
    }

    #[test]
    fn only_single_known_codings_parse() {
        assert_eq!(Coding::parse(" GZIP "), Some(Coding::Gzip));
        assert_eq!(Coding::parse("br"), Some(Coding::Brotli));
        assert_eq!(Coding::parse("zstd"), None);
        assert_eq!(Coding::parse("gzip, br"), None);
        assert_eq!(Coding::parse("identity"), None);
    }

    #[test]
    fn a_limit_reason_passes_once_per_window_whatever_comes_between() {
        let gate = LimitGate::default();
        assert!(gate.pass("a"));
        assert!(gate.pass("b"));
        assert!(!gate.pass("a"));
        assert!(!gate.pass("b"));
        gate.last
            .lock()
            .unwrap()
            .insert("a", Instant::now() - LimitGate::WINDOW);
        assert!(gate.pass("a"));
        assert!(!gate.pass("a"));
    }
}
