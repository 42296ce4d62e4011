//! The items the SSE parser reports.

use thiserror::Error;

/// One dispatched event. Slices borrow the fed chunk or the parser's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event` field; `None` when absent or empty (the type is then `message`).
    pub event: Option<&'a [u8]>,
    /// The `data` lines joined with `\n`.
    pub data: &'a [u8],
    /// The `id` field if this event set one (ids containing NUL are ignored, as specified).
    pub id: Option<&'a [u8]>,
    /// The last valid `retry` value seen in this event's block.
    pub retry: Option<u64>,
}

impl<'a> SseEvent<'a> {
    /// The event type, defaulting to `message` as the specification does.
    pub fn event_name(&self) -> &'a [u8] {
        self.event.unwrap_or(b"message")
    }

    /// The data as UTF-8, or `None` when it is not valid UTF-8.
    pub fn data_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.data).ok()
    }
}

/// What the parser reports, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    Event(SseEvent<'a>),
    /// A comment line's text after `:` (one leading space removed), e.g. a keep-alive.
    Comment(&'a [u8]),
    /// A recoverable framing error; parsing continues.
    Error(SseError),
}

/// Framing errors. They never stop the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SseError {
    #[error("SSE event exceeds the {limit}-byte limit; skipped to the next blank line")]
    EventTooLarge { limit: usize },
}
