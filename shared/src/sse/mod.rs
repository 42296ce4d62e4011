//! The SSE tap: parse upstream event streams without touching them.
//!
//! Switchyard proxies streams byte for byte: upstream chunks are forwarded unchanged and, on
//! the side, fed to a [`SseParser`].
//!
//! Everything here is pure: no I/O and no clock reads.
//!
//! Invariants:
//! - the parser's output depends only on the byte stream, never on chunk boundaries;
//! - parser memory is bounded by its per-event limit (1 MiB by default), whatever the input;
//! - nothing panics on arbitrary input.

mod event;
pub mod parser;
mod slots;

#[cfg(test)]
mod tests;

pub use parser::{DEFAULT_MAX_EVENT_BYTES, SseError, SseEvent, SseItem, SseParser};
