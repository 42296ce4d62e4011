//! `[resilience.stream_recovery]`: holding the start of a stream back so that an early
//! truncation can be reopened on another attempt before the client has seen a byte.
//!
//! Why a resilience section: the numbers are operator policy like the stream watchdogs, so
//! they take part in the same precedence chain (file < environment < persisted runtime
//! setting) and show their source in `GET /api/resilience`. Off by default: holding a stream
//! delays its first byte by up to `hold_ms`.

use super::layer::{ANY, section};

/// The largest hold, in bytes: the readiness gate's own prefix cap (8 MiB).
pub const MAX_HOLD_BYTES: u64 = 8 << 20;
/// The longest hold: a minute (longer defeats streaming).
pub const MAX_HOLD_MS: u64 = 60_000;
/// The most reopens one request may make.
pub const MAX_REOPENS_LIMIT: u32 = 10;
/// The most mid-stream continuations one stream may make.
pub const MAX_CONTINUATIONS_LIMIT: u32 = 4;

section! {
    /// Stream recovery (`[resilience.stream_recovery]`).
    StreamRecovery / StreamRecoveryPatch / StreamRecoveryEffective {
        /// Off by default: the commit point stays at the first content frame.
        enabled: bool => ANY,
        /// The hold ends this long after the upstream response headers…
        hold_ms: u64 => 1..=MAX_HOLD_MS,
        /// …or once this many bytes are held, or at the upstream's clean end.
        hold_bytes: u64 => 1024..=MAX_HOLD_BYTES,
        /// Truncations inside the hold that one request may reopen; the next one ends the
        /// request with a definite error.
        max_reopens: u32 => 0..=MAX_REOPENS_LIMIT,
        /// Continuing a failed plain-text OpenAI chat stream on another target after the
        /// commit point, with the text so far as the assistant's prefix. Off by default;
        /// independent of `enabled` (which turns the hold on).
        midstream_continuation: bool => ANY,
        /// Continuations one stream may make; the failure after the last ends the stream as
        /// it would without continuation.
        max_continuations: u32 => 1..=MAX_CONTINUATIONS_LIMIT,
    }
}

impl Default for StreamRecovery {
    fn default() -> Self {
        Self {
            enabled: false,
            hold_ms: 750,
            hold_bytes: 65_536,
            max_reopens: 4,
            midstream_continuation: false,
            max_continuations: 1,
        }
    }
}
