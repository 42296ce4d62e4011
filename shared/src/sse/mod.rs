//! The SSE tap: parse, inspect and police upstream event streams without touching them.
//!
//! Switchyard proxies streams byte for byte: upstream chunks are forwarded unchanged and, on
//! the side, fed to a [`SseParser`]. Each parsed event is classified by [`inspect()`] for its
//! wire [`Format`], and the resulting [`EventInfo`] drives the stream watchdogs
//! ([`StreamWatch`]) and the attempt outcome (usage, finish reason, in-band errors). When
//! Switchyard must speak itself after the commit point — an error, a keep-alive — the
//! [`writer`] functions produce frames in the client's format.
//!
//! Everything here is pure: no I/O and no clock reads. Time is a [`crate::Millis`] passed in,
//! so the watchdogs can be driven by tables and a fake clock.
//!
//! Invariants:
//! - the parser's output depends only on the byte stream, never on chunk boundaries;
//! - parser memory is bounded by its per-event limit (1 MiB by default), whatever the input;
//! - nothing panics on arbitrary input.

mod event;
mod formats;
pub mod inspect;
mod json;
pub mod parser;
mod slots;
pub mod throughput;
pub mod watch;
pub mod watchdog;
pub mod writer;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use inspect::{
    EventInfo, EventKind, FinishReason, StreamInspector, UpstreamStreamError, Usage, inspect,
    inspect_item,
};
pub use json::WireUsage;
pub use parser::{DEFAULT_MAX_EVENT_BYTES, SseError, SseEvent, SseItem, SseParser};
pub use throughput::{ThroughputSettings, ThroughputWatchdog};
pub use watch::{StreamWatch, TurnSummary, WatchConfig};
pub use watchdog::{GapKind, GapWatchdog, Readiness, ReadinessState, StreamAbort};
pub use writer::{format_error_event, keep_alive_frame};

/// The wire format of a stream, which decides what its events mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Format {
    /// `POST /v1/chat/completions`: `chat.completion.chunk` data lines and `data: [DONE]`.
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// `POST /v1/responses`: named `response.*` events.
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// `POST /v1/messages`: named `message_*` / `content_block_*` events.
    #[serde(rename = "anthropic")]
    Anthropic,
}
