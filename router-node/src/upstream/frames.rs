//! Cutting a byte stream into whole SSE events, raw bytes kept.
//!
//! Why not the shared parser: mid-stream continuation ([`super::seams`]) forwards most events
//! byte for byte and holds some back (an error event, everything after it), so it needs each
//! event's own bytes with its terminating blank line, which the parser does not keep. The
//! event's `data` is then read from those bytes with [`event_data`].

use bytes::{Bytes, BytesMut};

/// Bytes without an event boundary past which they are handed out as one (opaque) event, so
/// that memory stays bounded and the client is not starved.
pub const MAX_PENDING_BYTES: usize = 1 << 20;

/// Splits pushed bytes into whole events (each ending with its blank line).
#[derive(Debug, Default)]
pub struct Framer {
    buf: BytesMut,
    /// Where scanning resumes, and the line-break state there.
    scan: usize,
    breaks: u8,
    cr: bool,
}

impl Framer {
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole event, if one is complete (or [`MAX_PENDING_BYTES`] are pending).
    pub fn next_event(&mut self) -> Option<Bytes> {
        let mut i = self.scan;
        while i < self.buf.len() {
            let b = self.buf[i];
            match b {
                b'\n' if self.cr => self.cr = false,
                b'\n' => self.breaks += 1,
                b'\r' => {
                    self.breaks += 1;
                    self.cr = true;
                }
                _ => {
                    self.breaks = 0;
                    self.cr = false;
                }
            }
            if self.breaks >= 2 {
                let mut end = i + 1;
                if b == b'\r' {
                    match self.buf.get(end) {
                        Some(b'\n') => end += 1,
                        Some(_) => {}
                        // A `\r` at the end may be the first half of `\r\n`: wait for more.
                        None => {
                            self.breaks -= 1;
                            self.cr = false;
                            self.scan = i;
                            return self.overflow();
                        }
                    }
                }
                return Some(self.cut(end));
            }
            i += 1;
        }
        self.scan = i;
        self.overflow()
    }

    fn overflow(&mut self) -> Option<Bytes> {
        (self.buf.len() >= MAX_PENDING_BYTES).then(|| self.cut(self.buf.len()))
    }

    fn cut(&mut self, end: usize) -> Bytes {
        self.scan = 0;
        self.breaks = 0;
        self.cr = false;
        self.buf.split_to(end).freeze()
    }

    /// What is left: a partial event (the stream ended inside it).
    pub fn take_rest(&mut self) -> Bytes {
        self.cut(self.buf.len())
    }
}

/// The `data` lines of one raw event, joined with `\n` (empty for a comment or keep-alive).
pub fn event_data(raw: &[u8]) -> Vec<u8> {
    let mut data: Vec<u8> = Vec::new();
    let mut first = true;
    for line in raw.split(|&b| b == b'\n' || b == b'\r') {
        let Some(value) = line.strip_prefix(b"data") else {
            continue;
        };
        let value = match value.first() {
            None => value,
            Some(b':') => value.get(1..).unwrap_or_default(),
            // `dataX: …` is another field.
            Some(_) => continue,
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if !first {
            data.push(b'\n');
        }
        first = false;
        data.extend_from_slice(value);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&str]) -> (Vec<String>, String) {
        let mut f = Framer::default();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c.as_bytes());
            while let Some(e) = f.next_event() {
                out.push(String::from_utf8_lossy(&e).into_owned());
            }
        }
        let rest = String::from_utf8_lossy(&f.take_rest()).into_owned();
        (out, rest)
    }

    #[test]
    fn events_are_cut_at_blank_lines_whatever_the_chunking() {
        let (out, rest) = events(&["data: a\n\nda", "ta: b\n", "\n: keep-alive\n\ndata: c"]);
        assert_eq!(out, ["data: a\n\n", "data: b\n\n", ": keep-alive\n\n"]);
        assert_eq!(rest, "data: c");
        let (out, rest) = events(&["data: a\r\n\r", "\ndata: b\r\n\r\n"]);
        assert_eq!(out, ["data: a\r\n\r\n", "data: b\r\n\r\n"]);
        assert_eq!(rest, "");
        let (out, _) = events(&["data: a\r\rdata: b\n\n"]);
        assert_eq!(out, ["data: a\r\r", "data: b\n\n"]);
    }

    #[test]
    fn pending_bytes_are_bounded() {
        let mut f = Framer::default();
        f.push(&vec![b'x'; MAX_PENDING_BYTES]);
        assert_eq!(f.next_event().map(|e| e.len()), Some(MAX_PENDING_BYTES));
        assert!(f.take_rest().is_empty());
    }

    #[test]
    fn data_lines_are_joined() {
        assert_eq!(
            event_data(b"event: x\ndata: {\"a\":\ndata:1}\n\n"),
            b"{\"a\":\n1}"
        );
        assert_eq!(event_data(b": keep-alive\n\n"), b"");
        assert_eq!(event_data(b"data: [DONE]\r\n\r\n"), b"[DONE]");
        assert_eq!(event_data(b"dataX: y\n\n"), b"");
    }
}
