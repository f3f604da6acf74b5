//! What a terminal would show of a line: ANSI escapes removed, and of a line that a
//! progress bar rewrote with `\r`, only the last text written.
//!
//! The common line has neither ESC nor `\r`; one `memchr2` finds that out and the line
//! is borrowed as it is.

use std::borrow::Cow;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// `line` without its line ending, ANSI escapes and overwritten `\r` segments.
pub fn clean(line: &str) -> Cow<'_, str> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if memchr::memchr2(ESC, b'\r', line.as_bytes()).is_none() {
        return Cow::Borrowed(line);
    }
    let stripped = strip_ansi(line);
    if !stripped.contains('\r') {
        return Cow::Owned(stripped);
    }
    // The last segment with something in it: "50%\r100%\r" shows "100%", and a bar
    // that clears itself with "\r   \r" before the final text still shows that text.
    let last = stripped
        .rsplit('\r')
        .find(|segment| !segment.trim().is_empty())
        .unwrap_or("");
    Cow::Owned(last.to_owned())
}

/// Removes CSI (`ESC [ … final`), OSC (`ESC ] … BEL` or `ESC ] … ESC \`), the other
/// string controls (DCS, SOS, PM, APC), two- and three-byte escapes, and a stray ESC.
/// Every cut is at an ASCII byte, so the result stays valid UTF-8.
fn strip_ansi(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut start = 0;
    let mut i = 0;
    while let Some(offset) = memchr::memchr(ESC, &bytes[i..]) {
        let esc = i + offset;
        out.push_str(&line[start..esc]);
        i = esc + 1;
        match bytes.get(i) {
            Some(b'[') => {
                i += 1;
                while i < bytes.len() && (0x20..=0x3f).contains(&bytes[i]) {
                    i += 1;
                }
                if i < bytes.len() && (0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
            }
            Some(b']' | b'P' | b'X' | b'^' | b'_') => {
                i += 1;
                // Up to BEL or ST (ESC \); an unterminated string runs to the end.
                loop {
                    match bytes.get(i) {
                        None => break,
                        Some(&BEL) => {
                            i += 1;
                            break;
                        }
                        Some(&ESC) if bytes.get(i + 1) == Some(&b'\\') => {
                            i += 2;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            Some(&b) if (0x20..=0x2f).contains(&b) => {
                // `ESC ( B` and friends: intermediates, then one final byte.
                while i < bytes.len() && (0x20..=0x2f).contains(&bytes[i]) {
                    i += 1;
                }
                if i < bytes.len() && bytes[i].is_ascii() {
                    i += 1;
                }
            }
            Some(&b) if (0x30..=0x7e).contains(&b) => i += 1,
            // A stray ESC (at the end, or before text): only the ESC goes.
            _ => {}
        }
        start = i;
    }
    out.push_str(&line[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_borrowed_without_their_line_ending() {
        assert!(matches!(clean("GET / 200"), Cow::Borrowed("GET / 200")));
        assert!(matches!(clean("GET / 200\r\n"), Cow::Borrowed("GET / 200")));
    }

    #[test]
    fn csi_osc_and_stray_escapes_are_removed() {
        assert_eq!(clean("\x1b[1m\x1b[31merror\x1b[0m: boom"), "error: boom");
        assert_eq!(clean("\x1b[38;5;196mred\x1b[39m"), "red");
        // An OSC 8 hyperlink keeps its text; both terminators are understood.
        assert_eq!(
            clean("see \x1b]8;;file:///a.rs\x1b\\a.rs\x1b]8;;\x07 now"),
            "see a.rs now"
        );
        assert_eq!(clean("\x1b]0;title\x07ready"), "ready");
        assert_eq!(clean("\x1b(Bplain\x1b7"), "plain");
        assert_eq!(clean("stray\x1b"), "stray");
        assert_eq!(clean("\x1b[31mcafé ✘\x1b[0m"), "café ✘");
        assert_eq!(clean("cut \x1b[3"), "cut ");
    }

    #[test]
    fn carriage_returns_keep_the_last_written_text() {
        assert_eq!(clean("10%\r50%\r100% done"), "100% done");
        assert_eq!(clean("building\r\x1b[K\rError: failed\r"), "Error: failed");
        assert_eq!(clean("progress 3/9\r        \r"), "progress 3/9");
        assert_eq!(clean("\r\r"), "");
    }
}
