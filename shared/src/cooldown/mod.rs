//! Connection cooldown and terminal-state policy (docs/policy.md, `cooldown`).
//!
//! One pure state machine decides how a connection (one credential) cools down after failures,
//! when it becomes terminal, and how it recovers. The node's `ConnectionActor` is its sole
//! writer; in cluster mode an extend-only Redis script mirrors the same rules, and peers' states
//! come back in as [`ConnEvent::Remote`]. No I/O and no clock: time is passed in as [`Millis`].
//!
//! Invariants (checked by the property tests):
//! - `rate_limited_until` never moves backwards, except through `Success`, `OperatorClear` and
//!   `Reinstate`.
//! - A terminal status is sticky: only `Reinstate` clears it, a cooldown never overwrites it,
//!   and failures on a terminal connection write nothing.
//! - `backoff_level ≤ max_backoff_steps`, and it rises at most once per cooldown window (the
//!   thundering-herd guard). It is **not** reset when a cooldown lapses; each success lowers it
//!   by one.

pub mod sibling;
mod transition;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Millis;
use crate::outcome::{
    CooldownHint, FailureReason, ProviderCategory, TerminalSignal, TerminalStatus,
};

pub use transition::{on_event, scaled_backoff, success_is_stale};

/// The cap on a cooldown taken from an upstream hint (30 days). Upstream hints bypass
/// `max_cooldown_ms`; this is their only cap.
pub use crate::outcome::MAX_UPSTREAM_HINT_MS;

/// How many characters of an error message [`ConnState::last_error`] keeps.
pub const LAST_ERROR_MAX_CHARS: usize = 100;

/// The effective cooldown settings of one connection: its category profile plus the global
/// `[resilience.connection_cooldown]`, `[resilience.stream_stall_cooldown]` and the connection's
/// own `disable_cooling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CooldownParams {
    /// Base of the scaled backoff (`base · 2^level`).
    pub base_cooldown_ms: Millis,
    /// Highest backoff level; the exponent never exceeds it.
    pub max_backoff_steps: u32,
    /// Whether [`CooldownHint::Upstream`] replaces the scaled backoff. When off, an upstream
    /// hint is treated as [`CooldownHint::ScaledBackoff`].
    pub use_upstream_retry_hints: bool,
    /// Cap on scaled and fixed cooldowns (not on upstream hints).
    pub max_cooldown_ms: Millis,
    /// Consecutive auth failures after which the connection becomes `expired`.
    pub expired_retry_max: u32,
    /// Consecutive request rejections after which the connection becomes `banned`.
    pub request_rejected_ban_streak: u32,
    /// The connection never receives a transient cooldown (terminal states still apply).
    pub disable_cooling: bool,
    /// A stream stall sets a cooldown (otherwise it only records the error).
    pub stream_stall_cooldown: bool,
}

impl CooldownParams {
    /// The default profile of a provider category (docs/policy.md, `cooldown`).
    pub fn for_category(category: ProviderCategory) -> Self {
        let (base_cooldown_ms, max_backoff_steps, use_upstream_retry_hints) = match category {
            ProviderCategory::Oauth => (5_000, 8, false),
            ProviderCategory::Apikey => (3_000, 5, true),
            ProviderCategory::Local => (2_000, 3, false),
        };
        Self {
            base_cooldown_ms,
            max_backoff_steps,
            use_upstream_retry_hints,
            max_cooldown_ms: 1_800_000,
            expired_retry_max: 3,
            request_rejected_ban_streak: 3,
            disable_cooling: false,
            stream_stall_cooldown: false,
        }
    }
}

impl Default for CooldownParams {
    fn default() -> Self {
        Self::for_category(ProviderCategory::default())
    }
}

/// A connection's status (the reference's `test_status`). Serialised as one flat string:
/// `active`, `unavailable`, `banned`, `expired` or `credits_exhausted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConnStatus {
    /// No cooldown since the last success.
    #[default]
    Active,
    /// A cooldown was set since the last success. It may have lapsed: availability is decided
    /// by `rate_limited_until`, not by this status.
    Unavailable,
    /// Out of service until an operator reinstates it.
    Terminal(TerminalStatus),
}

impl ConnStatus {
    /// The snake_case name used in JSON, metrics and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Unavailable => "unavailable",
            Self::Terminal(t) => t.as_str(),
        }
    }

    /// The terminal status, if any.
    pub fn terminal(self) -> Option<TerminalStatus> {
        match self {
            Self::Terminal(t) => Some(t),
            Self::Active | Self::Unavailable => None,
        }
    }
}

impl fmt::Display for ConnStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`ConnStatus`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown connection status `{0}`")]
pub struct UnknownConnStatus(pub String);

impl FromStr for ConnStatus {
    type Err = UnknownConnStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "active" => Self::Active,
            "unavailable" => Self::Unavailable,
            "banned" => Self::Terminal(TerminalStatus::Banned),
            "expired" => Self::Terminal(TerminalStatus::Expired),
            "credits_exhausted" => Self::Terminal(TerminalStatus::CreditsExhausted),
            other => return Err(UnknownConnStatus(other.to_owned())),
        })
    }
}

impl Serialize for ConnStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ConnStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The cooldown and terminal state of one connection, as persisted (JSON) and as mirrored in
/// the cluster hash. Missing fields deserialise to their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnState {
    /// The connection is not selected before this instant.
    pub rate_limited_until: Option<Millis>,
    pub status: ConnStatus,
    /// Exponent of the next scaled backoff.
    pub backoff_level: u32,
    /// The first [`LAST_ERROR_MAX_CHARS`] characters of the last failure's message.
    pub last_error: Option<String>,
    pub last_error_type: Option<FailureReason>,
    /// HTTP status of the last failure (`None` for transport failures).
    pub error_code: Option<u16>,
    pub last_error_at: Option<Millis>,
    /// Consecutive auth failures, towards `expired`.
    pub consecutive_auth_failures: u32,
    /// Consecutive request rejections, towards `banned`.
    pub request_rejected_streak: u32,
}

/// One classified failed attempt on the connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureObservation {
    /// Upstream HTTP status (`None` for transport failures and stalls).
    pub status: Option<u16>,
    pub reason: FailureReason,
    pub hint: CooldownHint,
    pub terminal: TerminalSignal,
    /// A content-stall abort of a stream.
    pub stream_stall: bool,
    /// The error message, already redacted by the caller; only a prefix is kept.
    pub message: String,
}

/// A cluster peer's view of the connection, merged extend-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RemoteCooldown {
    pub until: Option<Millis>,
    pub backoff_level: u32,
    pub terminal: Option<TerminalStatus>,
}

/// Everything that can change a connection's cooldown state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnEvent {
    Failure(FailureObservation),
    /// An attempt dispatched at `started` succeeded. It changes nothing when the connection's
    /// last failure (seen here or merged from a peer) came after `started`: see
    /// [`success_is_stale`].
    Success {
        started: Millis,
    },
    /// An operator clears a cooldown and the error fields. Never clears a terminal state.
    OperatorClear,
    /// An operator reinstates the connection (or its credential changed): back to a fresh state,
    /// terminal or not.
    Reinstate,
    /// A cluster peer's state.
    Remote(RemoteCooldown),
}

/// What a transition did, for the actor to persist, publish, log and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Effect {
    /// A transient cooldown was set by this node (publish it to the cluster).
    CooldownSet {
        until: Millis,
        level: u32,
        reason: FailureReason,
    },
    /// The failure was recorded but set no cooldown.
    ErrorRecorded { reason: FailureReason },
    /// The connection became terminal by this node's decision.
    BecameTerminal(TerminalStatus),
    /// The failure arrived while the connection was cooling and changed nothing.
    AlreadyCooling { remaining_ms: Millis },
    /// The event was ignored because the connection is terminal.
    SkippedTerminal,
    /// The cooldown, error fields and streaks were cleared.
    Cleared,
    /// A success lowered the backoff level to `level`.
    LevelDecayed { level: u32 },
    /// An operator lifted a terminal state.
    Reinstated(TerminalStatus),
    /// A peer's state was merged. Never re-published: it came from the cluster.
    MergedRemote {
        until: Option<Millis>,
        level: u32,
        terminal: Option<TerminalStatus>,
    },
}

/// Whether the connection is terminal.
pub fn is_terminal(state: &ConnState) -> bool {
    state.status.terminal().is_some()
}

/// Milliseconds until the cooldown lapses (0 when not cooling). Ignores terminal states, which
/// have no expiry: check [`is_terminal`].
pub fn remaining_ms(state: &ConnState, now: Millis) -> Millis {
    state
        .rate_limited_until
        .map_or(0, |until| until.saturating_sub(now))
}

/// Whether the connection may be selected at `now`: not terminal and not cooling.
pub fn is_available(state: &ConnState, now: Millis) -> bool {
    !is_terminal(state) && remaining_ms(state, now) == 0
}

/// Whether a success must be sent to the actor. False in the steady state (level 0, no error
/// fields, no cooldown) and for terminal connections, where a success would change nothing; so
/// ordinary successes cost no message.
pub fn needs_success_report(state: &ConnState) -> bool {
    !is_terminal(state) && *state != ConnState::default()
}
