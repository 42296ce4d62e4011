//! Talking to upstream providers: one attempt against one connection.
//!
//! [`attempt`] sends the client's (model-rewritten) request to a provider and reports one of
//! three outcomes. The split is the **commit point** (docs/router-node.md, "The request path"): until the client has
//! been sent a byte, any failure is an [`AttemptFailure`] the routing pipeline may fail over
//! invisibly; once a stream is committed, failures are delivered in-band and never replayed.
//!
//! - [`AttemptResult::Json`]: a non-stream `2xx` whose body is not an error object.
//! - [`AttemptResult::Stream`]: a `2xx` SSE stream whose readiness gate opened (the first
//!   content, reasoning or tool frame; with stream recovery on, the end of the recovery hold,
//!   see [`hold`]). Everything the upstream sent before that is held back and handed over as
//!   the stream's prefix, byte for byte.
//! - [`AttemptResult::Failed`]: everything before the commit point — a transport error, a
//!   headers timeout, a non-`2xx` status, a `200` whose body or first event is an error, a
//!   readiness timeout, an early EOF or the attempt deadline.
//!
//! A committed stream becomes an actix-web body with [`CommittedStream::into_body`]. It
//! forwards upstream chunks unchanged while tapping them with the shared SSE parser and
//! watchdogs, bridges upstream silence with keep-alive frames (actix only notices a vanished
//! client when it writes), and reports a single [`StreamEnd`] however the stream ends —
//! including when the client disconnects and the body is dropped, which also drops the
//! upstream response and so cancels the upstream request.
//!
//! With mid-stream continuation on, the edge wraps committed chat streams in a
//! [`seams::SeamedBody`]: a plain-text stream that fails after the commit point goes on from
//! another upstream stream in the same client response ([`continuation`] holds its policy).

mod after_commit;
mod attempt;
mod body;
pub mod continuation;
mod frames;
mod gate;
mod headers;
pub mod hold;
mod request;
pub mod seams;
mod stream;
pub mod wait;

#[cfg(test)]
mod tests;

pub use after_commit::failure_after_commit;
pub use attempt::{
    AttemptFailure, AttemptResult, ERROR_BODY_READ_MS, IN_BAND_ERROR_STATUS, JsonSuccess,
    MAX_PREFIX_BYTES, attempt, attempt_holding, attempt_waiting,
};
pub use request::{AttemptRequest, endpoint_url, watch_config};
pub use stream::{CommittedStream, DEFAULT_HEARTBEAT_INTERVAL_MS, OnFinish, StreamEnd};
pub use wait::UpstreamWait;

use switchyard_shared::sse::Format;

use crate::api::errors::ClientFormat;

/// The SSE wire format of a client format (the tap parses and frames in it).
pub fn sse_format(format: ClientFormat) -> Format {
    match format {
        ClientFormat::OpenAiChat => Format::OpenAiChat,
        ClientFormat::OpenAiResponses => Format::OpenAiResponses,
        ClientFormat::Anthropic => Format::Anthropic,
    }
}
