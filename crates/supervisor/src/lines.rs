//! Bytes to lines, for pipes that owe us nothing.
//!
//! A child may write a line across many reads, end lines with CRLF, never end its last
//! line, write one line of a gigabyte, or write bytes that are not UTF-8. [`LineSplitter`]
//! turns any such stream into bounded, valid-UTF-8 lines without ever holding more than
//! `max_line` bytes of one line in memory.

/// Where [`pump`] delivers what it reads.
pub(crate) trait LineSink {
    /// One complete line (at most `max_line` bytes, valid UTF-8).
    fn line(&mut self, line: String);
    /// Each read as it came, before its lines (for the alert scanner's tap).
    fn chunk(&mut self, _bytes: &[u8]) {}
    /// After the lines of one read: a moment to flush.
    fn read_done(&mut self) {}
    /// The end of the stream (after its last line).
    fn end(&mut self) {}
}

/// Reads `reader` to its end (or a read error: the writer is gone either way), splitting
/// it into lines of at most `max_line` bytes for `sink`.
pub(crate) async fn pump(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    max_line: usize,
    sink: &mut impl LineSink,
) {
    use tokio::io::AsyncReadExt;
    let mut splitter = LineSplitter::new(max_line);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                sink.chunk(&buf[..n]);
                splitter.push(&buf[..n], |line| sink.line(line));
                sink.read_done();
            }
        }
    }
    splitter.finish(|line| sink.line(line));
    sink.end();
}

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
        // Invalid bytes became U+FFFD (3 bytes each): the bound is on what is kept, so a
        // line of such bytes is cut again, at a character boundary.
        let mut cut = self.dropped > 0;
        if line.len() > self.max_line {
            line.truncate(floor_char_boundary(&line, self.max_line));
            cut = true;
        }
        if cut {
            // A cut may split a multi-byte character: lossy decoding above turned it into
            // U+FFFD, which is the honest rendering of a cut character.
            line.push_str(TRUNCATION_MARKER);
            self.dropped = 0;
        }
        self.buf = Vec::with_capacity(self.buf.capacity().min(1024));
        line
    }
}

/// The largest character boundary of `s` at or below `at`.
pub fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut end = at.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Position of `needle` in `hay`; the standard library's slice search is vectorised well
/// enough here that a dedicated crate is not worth a dependency.
fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// What [`read_line_bounded`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// A line (with its `\n`, unless the stream ended without one) is in the buffer.
    Line,
    /// The stream ended; the buffer is empty.
    Eof,
    /// The line was longer than the limit: it was discarded as it streamed, and the
    /// buffer holds only its first [`KEPT_PREFIX`] bytes (for its id). `len` is the
    /// line's whole length without the newline.
    TooLong { len: u64 },
}

/// How much of an over-long line [`read_line_bounded`] keeps, so the message's id can
/// still be read from its head.
pub const KEPT_PREFIX: usize = 4096;

/// Reads one `\n`-terminated line into `line` (appending), holding at most `max` bytes
/// of it: a longer line is discarded as it streams — never buffered whole, however long
/// it is or if it never ends — and reported as [`LineRead::TooLong`].
pub async fn read_line_bounded<R>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead>
where
    R: tokio::io::AsyncBufRead + Unpin + ?Sized,
{
    use tokio::io::AsyncBufReadExt;
    // Bytes of the current line seen so far, once it is known to be too long.
    let mut over: Option<u64> = None;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match over {
                Some(len) => LineRead::TooLong { len },
                None if line.is_empty() => LineRead::Eof,
                None => LineRead::Line,
            });
        }
        let (n, found) = match memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let content = if found { n - 1 } else { n };
        if over.is_none() && line.len() + content > max {
            over = Some(line.len() as u64);
            line.truncate(KEPT_PREFIX);
        }
        match &mut over {
            None => line.extend_from_slice(&buf[..n]),
            Some(len) => {
                let room = KEPT_PREFIX.saturating_sub(line.len());
                line.extend_from_slice(&buf[..content.min(room)]);
                *len += content as u64;
            }
        }
        reader.consume(n);
        if found {
            return Ok(match over {
                Some(len) => LineRead::TooLong { len },
                None => LineRead::Line,
            });
        }
    }
}

/// The raw text of the top-level `"id"` member of a JSON-RPC message — a number or a
/// string — read from as much of the message as there is (an over-long message's head,
/// a message broken further on), without parsing the rest. `None` when the id is not
/// there, or something before it cannot be read.
pub fn top_level_id(msg: &[u8]) -> Option<&str> {
    let raw = top_level_member(msg, b"id")?;
    let text = std::str::from_utf8(raw).ok()?;
    let _: &serde_json::value::RawValue = serde_json::from_str(text).ok()?;
    matches!(raw[0], b'"' | b'-' | b'0'..=b'9').then_some(text)
}

/// The raw bytes of the top-level member `name` of the JSON object `msg` is (or begins
/// with), skimming the members before it; `None` when it is not there or something
/// before it cannot be read.
pub fn top_level_member<'a>(msg: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let ws = |mut i: usize| {
        while msg.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if msg.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = ws(i);
        if msg.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(msg, i)?;
        let key = &msg[i + 1..key_end - 1];
        i = ws(key_end);
        if msg.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        let end = value_end(msg, i)?;
        if key == name {
            return Some(&msg[i..end]);
        }
        i = ws(end);
        if msg.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// Where the JSON value starting at `start` ends (exclusive), skimming strings and
/// nesting; `None` when it runs past the end of `msg`.
fn value_end(msg: &[u8], start: usize) -> Option<usize> {
    match *msg.get(start)? {
        b'"' => string_end(msg, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match *msg.get(i)? {
                    b'"' => {
                        i = string_end(msg, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = start;
            while !matches!(
                *msg.get(i)?,
                b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'
            ) {
                i += 1;
            }
            Some(i)
        }
    }
}

/// Where the string starting at `start` (its opening quote) ends, after the closing one.
fn string_end(msg: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        match *msg.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
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

    #[test]
    fn the_top_level_id_is_read_from_a_head_or_a_broken_message() {
        assert_eq!(
            top_level_id(br#"{"jsonrpc":"2.0","id":7,"result":{"x"#),
            Some("7")
        );
        assert_eq!(
            top_level_id(b"{\"id\": \"a\\\"b\" , \"result\":\"\xff\"}"),
            Some(r#""a\"b""#)
        );
        assert_eq!(
            top_level_id(br#"{"params":{"id":1,"s":"}"},"id":2,"method":"x""#),
            Some("2")
        );
        assert_eq!(top_level_id(br#"{"result":{"id":1},"id"#), None);
        assert_eq!(
            top_level_id(br#"{"id":12"#),
            None,
            "a cut number is not an id"
        );
        assert_eq!(top_level_id(br#"{"id":null}"#), None);
        assert_eq!(top_level_id(b"[1]"), None);
    }

    #[tokio::test]
    async fn an_over_long_line_is_discarded_as_it_streams_keeping_its_head() {
        let mut input: Vec<u8> = b"{\"id\":3,\"x\":\"".to_vec();
        input.extend(std::iter::repeat_n(b'y', 100_000));
        input.extend_from_slice(b"\"}\nnext\nlast");
        let mut r = tokio::io::BufReader::with_capacity(1024, &input[..]);
        let mut line = Vec::new();
        let got = read_line_bounded(&mut r, &mut line, 10_000).await.unwrap();
        let len = input.iter().position(|&b| b == b'\n').unwrap() as u64;
        assert_eq!(got, LineRead::TooLong { len });
        assert_eq!(line.len(), KEPT_PREFIX);
        assert_eq!(top_level_id(&line), Some("3"));
        assert!(line.capacity() < 20_000, "{}", line.capacity());
        line.clear();
        assert_eq!(
            read_line_bounded(&mut r, &mut line, 10).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"next\n");
        line.clear();
        assert_eq!(
            read_line_bounded(&mut r, &mut line, 10).await.unwrap(),
            LineRead::Line
        );
        assert_eq!(line, b"last");
        line.clear();
        assert_eq!(
            read_line_bounded(&mut r, &mut line, 10).await.unwrap(),
            LineRead::Eof
        );
    }
}
