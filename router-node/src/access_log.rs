//! The access log: one JSON line per client request, written straight into the log writer.
//!
//! Why not `tracing::info!` through tracing-subscriber's JSON formatter: that formatter
//! collects every field of an event into a map of JSON values and formats the timestamp
//! afresh each time. Counted with callgrind, that was about 26,000 instructions per request,
//! 15 % of the node's user-space work on the JSON path. Here a line is built in one buffer in
//! the same shape as the formatter's lines (`timestamp`, `level`, `message`, the fields, then
//! `target`), and the date and time of day are formatted once a second.
//!
//! The log filter still applies: a `RUST_LOG` that turns the `access` target below info
//! turns these lines off. Where no JSON sink is installed (stdout is a terminal, or a test
//! runs the node in-process), a line goes out as one tracing event instead.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serializer as _;

use crate::logwriter::BatchWriter;

static SINK: OnceLock<BatchWriter> = OnceLock::new();

/// Sends access lines to `sink` from now on (JSON logs only; set once, by `init_tracing`).
pub fn install(sink: BatchWriter) {
    let _ = SINK.set(sink);
}

/// One access line being built. Keys are plain identifiers, written as they are.
#[derive(Debug)]
pub struct Line {
    buf: Vec<u8>,
}

impl Line {
    /// Starts a line with `message`, or `None` when the log filter drops access lines.
    pub fn start(message: &str) -> Option<Self> {
        if !tracing::enabled!(target: "access", tracing::Level::INFO) {
            return None;
        }
        // The thread's buffer from its previous line: no allocation per request.
        let mut buf = LINE_BUF.with_borrow_mut(std::mem::take);
        buf.clear();
        buf.reserve(512);
        buf.extend_from_slice(b"{\"timestamp\":\"");
        write_timestamp(&mut buf, SystemTime::now());
        buf.extend_from_slice(b"\",\"level\":\"INFO\",\"message\":");
        let mut line = Self { buf };
        line.json_str(message);
        Some(line)
    }

    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        self.json_str(value);
        self
    }

    pub fn u64(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key);
        let _ = serde_json::Serializer::new(&mut self.buf).serialize_u64(value);
        self
    }

    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key);
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// Ends the line and hands it to the log writer.
    pub fn finish(mut self) {
        self.buf.extend_from_slice(b",\"target\":\"access\"}\n");
        match SINK.get() {
            Some(sink) => sink.append(&self.buf),
            None => {
                let text = String::from_utf8_lossy(&self.buf);
                tracing::info!(target: "access", "{}", text.trim_end());
            }
        }
        LINE_BUF.with_borrow_mut(|kept| *kept = std::mem::take(&mut self.buf));
    }

    /// Keys are the call sites' identifiers (no quote, backslash or control character), so
    /// they go out as they are, without the escaping scan.
    fn key(&mut self, key: &str) {
        debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        self.buf.extend_from_slice(b",\"");
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
    }

    fn json_str(&mut self, s: &str) {
        // Writing to a Vec cannot fail.
        let _ = serde_json::Serializer::new(&mut self.buf).serialize_str(s);
    }
}

thread_local! {
    /// The last finished line's buffer, reused by the next line on this thread.
    static LINE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

thread_local! {
    /// The last second formatted on this thread, and its `YYYY-MM-DDTHH:MM:SS`.
    static SECOND: RefCell<(u64, [u8; 19])> = const { RefCell::new((u64::MAX, [0; 19])) };
}

/// `2026-11-30T03:44:55.889666Z`: UTC with microseconds, as tracing-subscriber writes it.
fn write_timestamp(buf: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    SECOND.with_borrow_mut(|(cached, text)| {
        if *cached != secs {
            *text = date_time(secs);
            *cached = secs;
        }
        buf.extend_from_slice(text);
    });
    let micros = since.subsec_micros();
    buf.push(b'.');
    for div in [100_000, 10_000, 1_000, 100, 10, 1] {
        buf.push(b'0' + ((micros / div) % 10) as u8);
    }
    buf.push(b'Z');
}

/// `YYYY-MM-DDTHH:MM:SS` of a Unix second (UTC); the epoch if out of range.
fn date_time(secs: u64) -> [u8; 19] {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let mut out = [0u8; 19];
    let year = u32::try_from(t.year()).unwrap_or(0);
    let parts: [(usize, u32, usize); 6] = [
        (0, year, 4),
        (5, u32::from(u8::from(t.month())), 2),
        (8, u32::from(t.day()), 2),
        (11, u32::from(t.hour()), 2),
        (14, u32::from(t.minute()), 2),
        (17, u32::from(t.second()), 2),
    ];
    for (at, value, width) in parts {
        let mut v = value;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    for (at, sep) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')] {
        out[at] = sep;
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_match_the_json_formatters_shape() {
        let mut buf = Vec::new();
        // 2026-11-30T03:44:55.000007Z
        write_timestamp(&mut buf, UNIX_EPOCH + Duration::new(1_796_010_295, 7_000));
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "2026-11-30T03:44:55.000007Z"
        );
        let mut buf = Vec::new();
        write_timestamp(
            &mut buf,
            UNIX_EPOCH + Duration::new(951_782_400, 999_999_000),
        );
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "2000-02-29T00:00:00.999999Z"
        );
        // The per-second cache must not leak one second's text into the next.
        let mut buf = Vec::new();
        write_timestamp(&mut buf, UNIX_EPOCH + Duration::new(951_782_401, 0));
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "2000-02-29T00:00:01.000000Z"
        );
        assert_eq!(&date_time(0), b"1970-01-01T00:00:00");
    }

    #[test]
    fn a_finished_lines_buffer_is_reused_by_the_next_line() {
        let subscriber = tracing_subscriber::registry();
        tracing::subscriber::with_default(subscriber, || {
            let mut line = Line::start("request").expect("access lines enabled");
            line.str("request_id", "req_1").u64("status", 200);
            let first = line.buf.as_ptr();
            line.finish();
            let next = Line::start("request").expect("access lines enabled");
            assert_eq!(next.buf.as_ptr(), first, "the same allocation");
            assert!(
                next.buf.starts_with(b"{\"timestamp\":\""),
                "cleared before reuse"
            );
        });
    }

    #[test]
    fn a_line_is_one_json_object_with_escaped_values() {
        let mut line = Line {
            buf: b"{\"message\":\"request\"".to_vec(),
        };
        line.str("model", "a\"b\\c\n\u{1}é")
            .str("route_target", "p/m\"x")
            .u64("attempts", 18_446_744_073_709_551_615)
            .bool("stream", false);
        line.buf.extend_from_slice(b"}");
        let v: serde_json::Value = serde_json::from_slice(&line.buf).unwrap();
        assert_eq!(v["model"], "a\"b\\c\n\u{1}é");
        assert_eq!(v["route_target"], "p/m\"x");
        assert_eq!(v["attempts"], u64::MAX);
        assert_eq!(v["stream"], false);
    }
}
