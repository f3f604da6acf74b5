//! Bytes to lines, for pipes that owe us nothing.
//!
//! A child may write a line across many reads, end lines with CRLF, never end its last
//! line, write one line of a gigabyte, or write bytes that are not UTF-8. [`LineSplitter`]
//! turns any such stream into bounded, valid-UTF-8 lines without ever holding more than
//! `max_line` bytes of one line in memory.

/// Appended to a line that was cut at the length limit.
pub const TRUNCATION_MARKER: &str = " …[truncated]";

/// Incremental splitter: feed it chunks, get complete lines back.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    max_line: usize,
    /// Bytes of the current line dropped beyond `max_line`.
    dropped: u64,
}

impl LineSplitter {
    /// A splitter that keeps at most `max_line` bytes of each line.
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            max_line,
            dropped: 0,
        }
    }

    /// Feeds one chunk; calls `emit` for each line completed by it.
    pub fn push(&mut self, mut chunk: &[u8], mut emit: impl FnMut(String)) {
        while !chunk.is_empty() {
            match memchr(b'\n', chunk) {
                Some(pos) => {
                    self.take(&chunk[..pos]);
                    emit(self.finish_line());
                    chunk = &chunk[pos + 1..];
                }
                None => {
                    self.take(chunk);
                    break;
                }
            }
        }
    }

    /// Flushes a final line that had no newline (at EOF).
    pub fn finish(&mut self, emit: impl FnOnce(String)) {
        if !self.buf.is_empty() || self.dropped > 0 {
            emit(self.finish_line());
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = self.max_line.saturating_sub(self.buf.len());
        let kept = bytes.len().min(room);
        self.buf.extend_from_slice(&bytes[..kept]);
        self.dropped += (bytes.len() - kept) as u64;
    }

    fn finish_line(&mut self) -> String {
        if self.buf.last() == Some(&b'\r') && self.dropped == 0 {
            self.buf.pop();
        }
        let mut line = match String::from_utf8(std::mem::take(&mut self.buf)) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        if self.dropped > 0 {
            // A cut may split a multi-byte character: lossy decoding above turned it into
            // U+FFFD, which is the honest rendering of a cut character.
            line.push_str(TRUNCATION_MARKER);
            self.dropped = 0;
        }
        self.buf = Vec::with_capacity(self.buf.capacity().min(1024));
        line
    }
}

/// Position of `needle` in `hay`; the standard library's slice search is vectorised well
/// enough here that a dedicated crate is not worth a dependency.
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, |l| out.push(l));
        }
        s.finish(|l| out.push(l));
        out
    }

    #[test]
    fn lines_split_across_reads_are_joined() {
        assert_eq!(
            split(&[b"hel", b"lo\nwor", b"ld\n"], 100),
            ["hello", "world"]
        );
    }

    #[test]
    fn crlf_is_stripped() {
        assert_eq!(split(&[b"a\r\nb\r", b"\n"], 100), ["a", "b"]);
    }

    #[test]
    fn partial_last_line_is_flushed_at_eof() {
        assert_eq!(split(&[b"one\ntwo"], 100), ["one", "two"]);
    }

    #[test]
    fn empty_lines_are_kept() {
        assert_eq!(split(&[b"\n\nx\n"], 100), ["", "", "x"]);
    }

    #[test]
    fn runaway_line_is_truncated_with_marker_and_bounded() {
        let big = vec![b'x'; 100_000];
        let out = split(&[&big, &big, b"\nnext\n"], 10);
        assert_eq!(
            out,
            [format!("xxxxxxxxxx{TRUNCATION_MARKER}"), "next".into()]
        );
    }

    #[test]
    fn runaway_line_without_newline_is_flushed_truncated() {
        let out = split(&[&[b'y'; 50]], 8);
        assert_eq!(out, [format!("yyyyyyyy{TRUNCATION_MARKER}")]);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let out = split(&[b"bad \xff\xfe ok\n"], 100);
        assert_eq!(out, ["bad \u{fffd}\u{fffd} ok"]);
    }
}
