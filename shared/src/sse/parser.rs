//! Incremental SSE tap parser.
//!
//! The proxy forwards upstream bytes unchanged and feeds each chunk here on the side. The parser
//! follows the WHATWG event-stream rules: `\n`, `\r\n` and `\r` line endings (a `\r\n` split
//! across chunks is one terminator), a leading BOM, `:` comments, the `event`, `data`, `id` and
//! `retry` fields, multi-line data joined with `\n`, and dispatch on a blank line. A block
//! without any `data` line is not dispatched; an incomplete block at EOF is discarded.
//!
//! Invariants:
//! - **Chunk-split invariance:** the sequence of [`SseItem`]s depends only on the bytes, never
//!   on how they were split into chunks (a property test checks this, including overflow).
//! - **Bounded memory:** the bytes an event retains (its `data`, `event` and `id` lines, each
//!   counted with one terminator byte) plus any partial line never exceed `max_event_bytes`.
//!   Crossing the limit yields [`SseError::EventTooLarge`] once, drops the event and skips to
//!   the next blank line. Each internal buffer's capacity is capped at the limit too.
//! - **Zero-copy when possible:** an event whose lines all lie within the current chunk is
//!   handed out borrowing the chunk; only lines that straddle chunks are copied.

use memchr::memchr2;

pub use super::event::{SseError, SseEvent, SseItem};
use super::slots::{Overlay, Slot, keep, materialize, push_bounded, resolve, shrink, split_field};

/// Default per-event buffer limit: 1 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
const BOM_DONE: u8 = 3;

/// The incremental parser. Feed chunks in order; call [`SseParser::finish`] at EOF.
#[derive(Debug, Clone)]
pub struct SseParser {
    max: usize,
    /// Bytes of a leading BOM matched so far; `BOM_DONE` once decided.
    bom_seen: u8,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to that terminator.
    skip_lf: bool,
    /// After an overflow: ignore lines until the next blank one.
    discarding: bool,
    /// Length of the unterminated line carried from earlier chunks (kept in `line`, unless
    /// discarding).
    partial_len: usize,
    /// Bytes retained by the event being assembled (see the module invariants).
    used: usize,
    line: Vec<u8>,
    event: Vec<u8>,
    data: Vec<u8>,
    id: Vec<u8>,
    has_event: bool,
    has_data: bool,
    has_id: bool,
    retry: Option<u64>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the default 1 MiB event limit.
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A parser whose events (and partial lines) may retain at most `max_event_bytes`.
    pub fn with_limit(max_event_bytes: usize) -> Self {
        Self {
            max: max_event_bytes,
            bom_seen: 0,
            skip_lf: false,
            discarding: false,
            partial_len: 0,
            used: 0,
            line: Vec::new(),
            event: Vec::new(),
            data: Vec::new(),
            id: Vec::new(),
            has_event: false,
            has_data: false,
            has_id: false,
            retry: None,
        }
    }

    /// The configured per-event limit.
    pub fn max_event_bytes(&self) -> usize {
        self.max
    }

    /// Total capacity of the internal buffers (at most four times the limit).
    pub fn buffered_capacity(&self) -> usize {
        self.line.capacity() + self.event.capacity() + self.data.capacity() + self.id.capacity()
    }

    /// Parses one chunk, calling `sink` for every item it completes, in stream order.
    pub fn feed(&mut self, chunk: &[u8], sink: &mut impl FnMut(SseItem<'_>)) {
        let mut rest = chunk;
        if self.bom_seen != BOM_DONE {
            rest = self.strip_bom(rest, sink);
            if self.bom_seen != BOM_DONE {
                return;
            }
        }
        if self.skip_lf {
            let Some(&first) = rest.first() else { return };
            self.skip_lf = false;
            if first == b'\n' {
                rest = &rest[1..];
            }
        }
        if self.partial_len > 0 {
            let Some(end) = memchr2(b'\n', b'\r', rest) else {
                self.append_partial(rest, sink);
                return;
            };
            self.append_partial(&rest[..end], sink);
            if !self.discarding {
                // The carried line is owned, so nothing from it may stay borrowed.
                let mut line = std::mem::take(&mut self.line);
                let mut ov = self.overlay();
                self.on_line(&mut ov, &line, false, sink);
                self.store(ov);
                line.clear();
                shrink(&mut line);
                self.line = line;
            }
            self.partial_len = 0;
            rest = self.after_terminator(rest, end);
        }
        let mut ov = self.overlay();
        while let Some(end) = memchr2(b'\n', b'\r', rest) {
            self.on_line(&mut ov, &rest[..end], true, sink);
            rest = self.after_terminator(rest, end);
        }
        self.store(ov);
        self.append_partial(rest, sink);
    }

    /// Ends the stream. An unterminated event is discarded, as specified; returns whether
    /// anything was pending (a truncated stream). The parser is reset for reuse.
    pub fn finish(&mut self) -> bool {
        let pending = self.partial_len > 0
            || self.has_data
            || self.has_event
            || self.has_id
            || self.retry.is_some()
            || self.discarding
            || (1..BOM_DONE).contains(&self.bom_seen);
        *self = Self::with_limit(self.max);
        pending
    }

    fn strip_bom<'c>(
        &mut self,
        mut rest: &'c [u8],
        sink: &mut impl FnMut(SseItem<'_>),
    ) -> &'c [u8] {
        while let Some(&byte) = rest.first() {
            let seen = usize::from(self.bom_seen);
            if BOM.get(seen) == Some(&byte) {
                rest = &rest[1..];
                self.bom_seen += 1;
                if self.bom_seen == BOM_DONE {
                    break;
                }
            } else {
                // Not a BOM after all: the bytes matched so far start the first line.
                self.bom_seen = BOM_DONE;
                self.append_partial(&BOM[..seen], sink);
                break;
            }
        }
        rest
    }

    fn after_terminator<'c>(&mut self, rest: &'c [u8], end: usize) -> &'c [u8] {
        if rest[end] == b'\r' {
            match rest.get(end + 1) {
                Some(b'\n') => &rest[end + 2..],
                Some(_) => &rest[end + 1..],
                None => {
                    self.skip_lf = true;
                    &[]
                }
            }
        } else {
            &rest[end + 1..]
        }
    }

    fn append_partial(&mut self, bytes: &[u8], sink: &mut impl FnMut(SseItem<'_>)) {
        if bytes.is_empty() {
            return;
        }
        self.partial_len = self.partial_len.saturating_add(bytes.len());
        if self.discarding {
            return;
        }
        if self.over_limit(self.partial_len) {
            self.overflow(sink);
            return;
        }
        push_bounded(&mut self.line, bytes, self.max);
    }

    /// Whether a non-empty line of `len` bytes would take the event past the limit. Partial
    /// and complete lines use the same rule, which keeps overflow chunk-split invariant.
    fn over_limit(&self, len: usize) -> bool {
        self.used.saturating_add(len).saturating_add(1) > self.max
    }

    fn on_line<'c>(
        &mut self,
        ov: &mut Overlay<'c>,
        line: &'c [u8],
        borrowable: bool,
        sink: &mut impl FnMut(SseItem<'_>),
    ) {
        if self.discarding {
            self.discarding = !line.is_empty();
            return;
        }
        if line.is_empty() {
            self.dispatch(ov, sink);
            return;
        }
        if self.over_limit(line.len()) {
            *ov = Overlay::default();
            self.overflow(sink);
            return;
        }
        let (name, value) = split_field(line);
        match name {
            None => sink(SseItem::Comment(value)),
            Some(b"data") => {
                self.used += line.len() + 1;
                ov.data = match ov.data {
                    Slot::Unset if borrowable => Slot::Chunk(value),
                    Slot::Unset => {
                        self.data.clear();
                        push_bounded(&mut self.data, value, self.max);
                        Slot::Owned
                    }
                    Slot::Chunk(prev) => {
                        self.data.clear();
                        push_bounded(&mut self.data, prev, self.max);
                        push_bounded(&mut self.data, b"\n", self.max);
                        push_bounded(&mut self.data, value, self.max);
                        Slot::Owned
                    }
                    Slot::Owned => {
                        push_bounded(&mut self.data, b"\n", self.max);
                        push_bounded(&mut self.data, value, self.max);
                        Slot::Owned
                    }
                };
            }
            Some(b"event") => {
                self.used += line.len() + 1;
                ov.event = keep(&mut self.event, value, borrowable, self.max);
            }
            Some(b"id") if !value.contains(&0) => {
                self.used += line.len() + 1;
                ov.id = keep(&mut self.id, value, borrowable, self.max);
            }
            Some(b"retry") => {
                if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                    // Digits only, so the text is ASCII; an overflowing value is ignored.
                    if let Some(ms) = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()) {
                        self.retry = Some(ms);
                    }
                }
            }
            Some(_) => {}
        }
    }

    fn dispatch(&mut self, ov: &mut Overlay<'_>, sink: &mut impl FnMut(SseItem<'_>)) {
        let done = std::mem::take(ov);
        if !matches!(done.data, Slot::Unset) {
            sink(SseItem::Event(SseEvent {
                event: resolve(done.event, &self.event).filter(|e| !e.is_empty()),
                data: resolve(done.data, &self.data).unwrap_or_default(),
                id: resolve(done.id, &self.id),
                retry: self.retry,
            }));
        }
        self.reset_event();
    }

    fn overflow(&mut self, sink: &mut impl FnMut(SseItem<'_>)) {
        self.reset_event();
        self.line.clear();
        shrink(&mut self.line);
        self.discarding = true;
        sink(SseItem::Error(SseError::EventTooLarge { limit: self.max }));
    }

    fn reset_event(&mut self) {
        for buf in [&mut self.event, &mut self.data, &mut self.id] {
            buf.clear();
            shrink(buf);
        }
        self.has_event = false;
        self.has_data = false;
        self.has_id = false;
        self.retry = None;
        self.used = 0;
    }

    fn overlay<'c>(&self) -> Overlay<'c> {
        let slot = |present: bool| if present { Slot::Owned } else { Slot::Unset };
        Overlay {
            event: slot(self.has_event),
            data: slot(self.has_data),
            id: slot(self.has_id),
        }
    }

    /// Copies whatever still borrows the chunk into owned buffers before the chunk goes away.
    fn store(&mut self, ov: Overlay<'_>) {
        self.has_event = materialize(ov.event, &mut self.event, self.max);
        self.has_data = materialize(ov.data, &mut self.data, self.max);
        self.has_id = materialize(ov.id, &mut self.id, self.max);
    }
}
