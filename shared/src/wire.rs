//! Events that router nodes exchange over Redis pub/sub, and their binary encoding.
//!
//! Why: a 429 seen by one node must stop every node from using that key, so cooldowns,
//! terminal states, lockouts, breaker transitions, settings versions and lease changes are
//! broadcast. These messages are small and frequent, so they are bincode, not JSON.
//!
//! **Time on the wire is relative.** Events carry *remaining* milliseconds, never instants:
//! node clocks are skewed, and "cool for 30 000 ms" means the same on every node while
//! "cool until 12:00:03.250" does not. A receiver sets `until = its own now + remaining`, which
//! is late by the propagation delay: a slightly longer cooldown, the safe direction.
//! `origin_ts_ms` (the sender's epoch ms) only feeds the propagation-delay metric and never
//! drives state.
//!
//! **Encoding.** One version byte ([`WIRE_VERSION`]), then `bincode` 2 (serde, `standard()`:
//! little-endian varints). [`decode`] rejects unknown versions, truncated or trailing input and
//! anything over [`MAX_MESSAGE_BYTES`], and never panics on hostile bytes.
//!
//! **No serde attributes that change the shape.** bincode is not self-describing: it writes
//! fields in declaration order and enum variants by index, with no names. `flatten`, `skip`,
//! `skip_serializing_if`, `tag` and `untagged`, and `deserialize_any` types such as
//! `serde_json::Value`, either need a self-describing format or make the writer and the reader
//! disagree about what comes next, which loses or misreads data silently. `rename_all` is
//! harmless here (names are not written).
//!
//! **Evolution is append-only.**
//! - Never reorder, remove or retype a field or a variant; never insert one in the middle.
//!   That includes the shared enums used here ([`FailureReason`], [`TerminalStatus`]): their
//!   variant order is part of this format, and a golden-bytes test pins it.
//! - New events are new variants at the **end** of [`WireEvent`]; ship them only once every
//!   node decodes them (an old node drops what it cannot decode and counts it).
//! - Changing an existing event means a new variant, or a new [`WIRE_VERSION`] that nodes
//!   learn to decode before anyone sends it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Millis;
use crate::outcome::{FailureReason, TerminalStatus};

/// The format version written as the first byte of every message.
pub const WIRE_VERSION: u8 = 1;

/// Largest message accepted or produced, version byte included (64 KiB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// One broadcast event with its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sending node's id; receivers ignore their own messages.
    pub origin_node: String,
    /// Sender's wall clock at publish, epoch ms. Only for the propagation-delay metric.
    pub origin_ts_ms: u64,
    /// Per-sender sequence number, to spot gaps and duplicates.
    pub seq: u64,
    pub event: WireEvent,
}

impl Envelope {
    /// Propagation delay seen by a receiver whose wall clock reads `receiver_epoch_ms`
    /// (0 when the clocks disagree the other way).
    pub fn propagation_delay_ms(&self, receiver_epoch_ms: u64) -> u64 {
        receiver_epoch_ms.saturating_sub(self.origin_ts_ms)
    }
}

/// The events. Variant order is part of the format: append only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireEvent {
    /// A connection cooled (extend-only on the receiver).
    CooldownSet {
        connection: String,
        until_remaining_ms: Millis,
        backoff_level: u32,
        reason: FailureReason,
        /// Set when the same failure also made the connection terminal.
        terminal: Option<TerminalStatus>,
    },
    CooldownCleared {
        connection: String,
    },
    TerminalSet {
        connection: String,
        status: TerminalStatus,
    },
    TerminalReinstated {
        connection: String,
    },
    /// A model locked on a connection (extend-only on the receiver).
    LockoutSet {
        provider: String,
        connection: String,
        model: String,
        remaining_ms: Millis,
        failure_count: u32,
        reason: FailureReason,
    },
    LockoutCleared {
        provider: String,
        connection: String,
        model: String,
    },
    /// A provider breaker changed state; a lower `generation` than the receiver's is stale.
    BreakerTransition {
        provider: String,
        from: BreakerPhase,
        to: BreakerPhase,
        generation: u64,
        retry_after_ms: Millis,
    },
    /// Runtime settings changed; the highest version wins.
    SettingsVersion {
        version: u64,
    },
    LeaseEvent {
        connection: String,
        generation: u64,
        kind: LeaseEventKind,
    },
    /// A success ended a running cooldown in the shared store (its level lowered by one).
    /// The receiver applies it as a success of an attempt dispatched at `started_epoch_ms`
    /// (wall clock): a receiver that saw a failure after that keeps its cooldown.
    CooldownEased {
        connection: String,
        backoff_level: u32,
        started_epoch_ms: u64,
    },
    /// A connection's Claude OAuth usage-wall state after a merge in Redis (extend-only):
    /// each field is the remaining time of one deadline, 0 = none. `lane_ms` is how long
    /// requests carry the slow header, `lane_reset_ms` the announced reset inside it;
    /// `reset_backoff` says whether `reset_hold_ms` is the error back-off (else the next
    /// available reset).
    UsageWallShared {
        connection: String,
        lane_ms: Millis,
        lane_reset_ms: Millis,
        reaccept_blocked_ms: Millis,
        budget_exhausted_ms: Millis,
        reset_hold_ms: Millis,
        reset_backoff: bool,
    },
    /// A tool limit learned for `provider`'s `model` (the lower one wins), live for
    /// `remaining_ms`.
    ToolLimitLearned {
        provider: String,
        model: String,
        limit: u32,
        remaining_ms: Millis,
    },
    /// A request with `tools` tools succeeded on `provider`'s `model`: a learned limit below
    /// that is dropped.
    ToolLimitCleared {
        provider: String,
        model: String,
        tools: u32,
    },
    /// A node ended `connection`'s low-priority lane before its reset, for `reason` (the end
    /// reason's label: `weekly_limit`, `budget_exhausted`, `off`, …). `lane_reset_ms` is the
    /// time left to the ended lane's reset (0 = passed): a receiver ends its own copy of the
    /// lane when that copy's reset is not later (the same lane), and keeps a newer one.
    UsageWallLaneEnded {
        connection: String,
        reason: String,
        lane_reset_ms: Millis,
    },
    /// An upstream's typed `RetryInfo` 429 paused `connection`'s request queue on the sender
    /// for `remaining_ms` more. The receiver pauses its own queue of that connection
    /// extend-only, capped at its queue wait budget. Event only: no Redis key, no replay.
    QueuePaused {
        connection: String,
        remaining_ms: Millis,
    },
}

impl WireEvent {
    /// A stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CooldownSet { .. } => "cooldown_set",
            Self::CooldownCleared { .. } => "cooldown_cleared",
            Self::TerminalSet { .. } => "terminal_set",
            Self::TerminalReinstated { .. } => "terminal_reinstated",
            Self::LockoutSet { .. } => "lockout_set",
            Self::LockoutCleared { .. } => "lockout_cleared",
            Self::BreakerTransition { .. } => "breaker_transition",
            Self::SettingsVersion { .. } => "settings_version",
            Self::LeaseEvent { .. } => "lease_event",
            Self::CooldownEased { .. } => "cooldown_eased",
            Self::UsageWallShared { .. } => "usage_wall_shared",
            Self::ToolLimitLearned { .. } => "tool_limit_learned",
            Self::ToolLimitCleared { .. } => "tool_limit_cleared",
            Self::UsageWallLaneEnded { .. } => "usage_wall_lane_ended",
            Self::QueuePaused { .. } => "queue_paused",
        }
    }
}

/// Breaker states as written on the wire; the breaker module maps its own state onto these so
/// that refactoring it cannot change the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerPhase {
    Closed,
    Degraded,
    Open,
    HalfOpen,
}

/// What happened to an exclusive session lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseEventKind {
    Acquired,
    Renewed,
    Released,
    Expired,
    Revoked,
}

/// Why a message could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("message is {len} bytes, over the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("unknown wire version {0}")]
    UnknownVersion(u8),
    #[error("message is truncated")]
    Truncated,
    #[error("{extra} unexpected bytes after the message")]
    TrailingBytes { extra: usize },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("cannot encode message: {0}")]
    Encode(String),
}

fn config() -> impl bincode::config::Config {
    // The limit caps what a length prefix may make the decoder allocate.
    bincode::config::standard().with_limit::<MAX_MESSAGE_BYTES>()
}

/// Encodes `env` as the version byte followed by bincode. Fails rather than produce a message
/// receivers would reject (over [`MAX_MESSAGE_BYTES`]).
pub fn encode(env: &Envelope) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(64);
    out.push(WIRE_VERSION);
    bincode::serde::encode_into_std_write(env, &mut out, config())
        .map_err(|e| WireError::Encode(e.to_string()))?;
    if out.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge {
            len: out.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    Ok(out)
}

/// Decodes one message. Total: every input gives an envelope or a [`WireError`].
pub fn decode(bytes: &[u8]) -> Result<Envelope, WireError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(WireError::TooLarge {
            len: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    let (&version, body) = bytes.split_first().ok_or(WireError::Truncated)?;
    if version != WIRE_VERSION {
        return Err(WireError::UnknownVersion(version));
    }
    let (env, read): (Envelope, usize) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| match e {
            bincode::error::DecodeError::UnexpectedEnd { .. } => WireError::Truncated,
            // A length prefix beyond the limit cannot be satisfied by an input within it.
            bincode::error::DecodeError::LimitExceeded => {
                WireError::Malformed("length prefix exceeds the message limit".to_owned())
            }
            other => WireError::Malformed(other.to_string()),
        })?;
    if read != body.len() {
        return Err(WireError::TrailingBytes {
            extra: body.len().saturating_sub(read),
        });
    }
    Ok(env)
}

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;
