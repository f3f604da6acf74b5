//! Content codings the proxy can undo: gzip, deflate (zlib, or raw as some servers send
//! it) and brotli, as streaming decoders fed chunk by chunk.

use std::io::Write;

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

/// A streaming decoder: feed it the coded bytes as they come, take the plain bytes out.
pub struct Decoder {
    inner: Inner,
}

enum Inner {
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    /// zlib-wrapped deflate, as the RFC says; raw deflate is detected from the first
    /// byte and switched to.
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Raw(flate2::write::DeflateDecoder<Vec<u8>>),
    /// Deflate before its first two bytes (which tell zlib from raw), and those seen.
    DeflateUnknown(Vec<u8>),
    Brotli(Box<brotli::DecompressorWriter<Vec<u8>>>),
}

impl Decoder {
    pub fn new(coding: Coding) -> Decoder {
        let inner = match coding {
            Coding::Gzip => Inner::Gzip(flate2::write::MultiGzDecoder::new(Vec::new())),
            Coding::Deflate => Inner::DeflateUnknown(Vec::new()),
            Coding::Brotli => {
                Inner::Brotli(Box::new(brotli::DecompressorWriter::new(Vec::new(), 4096)))
            }
        };
        Decoder { inner }
    }

    /// Decodes `coded`, returning the plain bytes it completed (maybe none yet).
    pub fn feed(&mut self, coded: &[u8]) -> std::io::Result<Vec<u8>> {
        if coded.is_empty() {
            return Ok(Vec::new());
        }
        let mut head = Vec::new();
        if let Inner::DeflateUnknown(seen) = &mut self.inner {
            seen.extend_from_slice(coded);
            if seen.len() < 2 {
                return Ok(Vec::new());
            }
            // A zlib header's low nibble is CM = 8 and the two bytes are a multiple of
            // 31; raw deflate has no header.
            let zlib =
                seen[0] & 0x0f == 8 && (u16::from(seen[0]) << 8 | u16::from(seen[1])) % 31 == 0;
            head = std::mem::take(seen);
            self.inner = if zlib {
                Inner::Zlib(flate2::write::ZlibDecoder::new(Vec::new()))
            } else {
                Inner::Raw(flate2::write::DeflateDecoder::new(Vec::new()))
            };
        }
        let coded = if head.is_empty() { coded } else { &head[..] };
        match &mut self.inner {
            Inner::Gzip(d) => {
                d.write_all(coded)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Inner::Zlib(d) => {
                d.write_all(coded)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Inner::Raw(d) => {
                d.write_all(coded)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Inner::Brotli(d) => {
                d.write_all(coded)?;
                Ok(std::mem::take(d.get_mut()))
            }
            Inner::DeflateUnknown(_) => unreachable!("resolved above"),
        }
    }

    /// Ends the stream, returning what was still buffered; an error when the coded
    /// stream was cut short.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        match self.inner {
            Inner::Gzip(d) => d.finish(),
            Inner::Zlib(d) => d.finish(),
            Inner::Raw(d) => d.finish(),
            Inner::Brotli(d) => d.into_inner().map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "brotli stream cut short")
            }),
            Inner::DeflateUnknown(seen) if seen.is_empty() => Ok(Vec::new()),
            Inner::DeflateUnknown(_) => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "deflate stream cut short",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(coding: Coding, coded: &[u8], plain: &[u8]) {
        // One byte at a time: the decoder must not assume whole frames.
        let mut d = Decoder::new(coding);
        let mut out = Vec::new();
        for b in coded {
            out.extend(d.feed(std::slice::from_ref(b)).unwrap());
        }
        out.extend(d.finish().unwrap());
        assert_eq!(out, plain);
    }

    fn text() -> Vec<u8> {
        (0..2000)
            .map(|i| format!("<p>line {i}</p>\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn gzip_zlib_raw_deflate_and_brotli_decode_byte_by_byte() {
        use flate2::Compression;
        let plain = text();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&plain).unwrap();
        roundtrip(Coding::Gzip, &gz.finish().unwrap(), &plain);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&plain).unwrap();
        roundtrip(Coding::Deflate, &z.finish().unwrap(), &plain);
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(&plain).unwrap();
        roundtrip(Coding::Deflate, &raw.finish().unwrap(), &plain);
        let mut br = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
        br.write_all(&plain).unwrap();
        roundtrip(Coding::Brotli, &br.into_inner(), &plain);
    }

    #[test]
    fn a_cut_stream_is_an_error_at_finish() {
        let plain = text();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).unwrap();
        let coded = gz.finish().unwrap();
        let mut d = Decoder::new(Coding::Gzip);
        d.feed(&coded[..coded.len() / 2]).unwrap();
        assert!(d.finish().is_err());
    }

    #[test]
    fn only_single_known_codings_parse() {
        assert_eq!(Coding::parse(" GZIP "), Some(Coding::Gzip));
        assert_eq!(Coding::parse("br"), Some(Coding::Brotli));
        assert_eq!(Coding::parse("zstd"), None);
        assert_eq!(Coding::parse("gzip, br"), None);
        assert_eq!(Coding::parse("identity"), None);
    }
}
