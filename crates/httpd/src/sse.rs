//! Server-sent events, read incrementally, by the WHATWG `text/event-stream` rules: lines
//! end in LF, CRLF or CR; `data` lines join with LF; a blank line dispatches; `id`
//! without a NUL sets the last event id; `retry` sets the reconnection delay; `:` lines
//! are comments. (What a remote server answers and streams: `corral_remote`.)

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `message` unless the stream named it.
    pub event: String,
    pub data: String,
}

/// The parser's state across chunks.
#[derive(Debug, Default)]
pub struct Parser {
    /// The unfinished line.
    line: Vec<u8>,
    /// A CR ended the last line: an LF right after it belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    /// The last event id (kept across events, as the stream's resumption point).
    pub last_id: Option<String>,
    /// The reconnection delay the server asked for, in ms.
    pub retry_ms: Option<u64>,
    /// The largest event (or line, of any field) accepted, in bytes: however the input
    /// is cut into chunks, the same input is refused.
    limit: usize,
}

/// An event or a line over the size limit.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLarge;

impl Parser {
    pub fn new(limit: usize) -> Parser {
        Parser {
            limit,
            ..Parser::default()
        }
    }

    /// Feeds `chunk`; every event it completes goes to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    self.line.extend_from_slice(&rest[..i]);
                    if self.line.len() > self.limit {
                        return Err(TooLarge);
                    }
                    self.after_cr = rest[i] == b'\r';
                    rest = &rest[i + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, out)?;
                }
                None => {
                    self.line.extend_from_slice(rest);
                    rest = &[];
                }
            }
            if self.line.len() > self.limit {
                return Err(TooLarge);
            }
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                let event = std::mem::take(&mut self.event);
                out.push(Event {
                    event: if event.is_empty() {
                        "message".to_owned()
                    } else {
                        event
                    },
                    data,
                });
            }
            self.event.clear();
            self.has_data = false;
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if self.data.len() + value.len() > self.limit {
                    return Err(TooLarge);
                }
                self.data.push_str(&value);
                self.data.push('\n');
                self.has_data = true;
            }
            b"event" => self.event = value.into_owned(),
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            b"retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> (Vec<Event>, Parser) {
        let mut p = Parser::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).unwrap();
        }
        (out, p)
    }

    #[test]
    fn events_across_chunks_and_line_endings() {
        let (out, p) = parse(&[
            b"id: 1\r",
            b"\ndata: {\"a\":",
            b"1}\r\n\r\n: comment\n",
            b"event: endpoint\ndata: /messages?s=1\n\nretry: 2500\n",
            b"data: x\ndata: y\n\n",
        ]);
        assert_eq!(
            out,
            [
                Event {
                    event: "message".into(),
                    data: "{\"a\":1}".into()
                },
                Event {
                    event: "endpoint".into(),
                    data: "/messages?s=1".into()
                },
                Event {
                    event: "message".into(),
                    data: "x\ny".into()
                },
            ]
        );
        assert_eq!(p.last_id.as_deref(), Some("1"));
        assert_eq!(p.retry_ms, Some(2500));
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_an_id_persists() {
        let (out, p) = parse(&[b"id: 7\n\nevent: x\n\n"]);
        assert!(out.is_empty());
        assert_eq!(p.last_id.as_deref(), Some("7"));
    }

    #[test]
    fn a_line_over_the_limit_is_refused() {
        let mut p = Parser::new(8);
        let mut out = Vec::new();
        assert_eq!(p.feed(b"data: 0123456789", &mut out), Err(TooLarge));
        let mut p = Parser::new(8);
        assert_eq!(
            p.feed(b"data: 0123\ndata: 4567\ndata: 89\n", &mut out),
            Err(TooLarge)
        );
    }
}
