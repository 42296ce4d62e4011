//! Wait-for-cooldown on a direct (non-combo) request: when every connection of the provider is
//! blocked, wait for the earliest to come back or give the final answer (spec Clarifications).
//!
//! Why: a direct request has nowhere else to go, so a short wait beats a 429; but the wait is
//! bounded per wait (`max_retry_wait_ms`, 90 s), in total (`budget_ms`, 300 s) and in count
//! (`max_retries`, 5), and the final answer must say when to come back.
//!
//! Rules:
//! - terminal connections (banned, expired, credits exhausted) never come back on their own and
//!   are ignored for the wait; when **every** connection is terminal the answer is
//!   `401 all_connections_terminal` with the dominant status (the most common; ties go to the
//!   more severe: banned, then credits_exhausted, then expired);
//! - otherwise wait `earliest` (the smallest remaining cooldown) when enabled,
//!   `retries < max_retries`, `earliest <= max_retry_wait_ms` and `earliest <= budget_ms -
//!   elapsed` (inclusive);
//! - else `429 rate_limit_error` with `Retry-After` = the earliest expiry and code
//!   `connection_cooldown`, or `model_cooldown` when only model lockouts block.

use serde::{Deserialize, Serialize};

use super::{MAX_WAITS_PER_REQUEST, Rejection, WAIT_BUDGET_MAX_MS};
use crate::Millis;
use crate::outcome::{FailureReason, TerminalStatus};

/// `[resilience.wait_for_cooldown]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitForCooldownSettings {
    pub enabled: bool,
    /// Waits (restarts of the whole attempt loop) allowed per request.
    pub max_retries: u32,
    /// Longest single wait (inclusive).
    pub max_retry_wait_ms: Millis,
    /// Total waiting allowed per request (inclusive).
    pub budget_ms: Millis,
}

impl Default for WaitForCooldownSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 5,
            max_retry_wait_ms: 90_000,
            budget_ms: 300_000,
        }
    }
}

impl WaitForCooldownSettings {
    /// The reference's ranges: retries 0–10, wait 0–300 000, `max_wait <= budget <= 300 000`.
    pub fn clamped(self) -> Self {
        let max_retry_wait_ms = self.max_retry_wait_ms.min(WAIT_BUDGET_MAX_MS);
        Self {
            enabled: self.enabled,
            max_retries: self.max_retries.min(MAX_WAITS_PER_REQUEST),
            max_retry_wait_ms,
            budget_ms: self.budget_ms.clamp(max_retry_wait_ms, WAIT_BUDGET_MAX_MS),
        }
    }
}

/// What a cooldown blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoolingScope {
    /// The whole connection is cooling.
    Connection,
    /// Only the requested model is locked on this connection.
    Model,
}

/// Why one connection cannot take the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionBlock {
    Cooling {
        remaining_ms: Millis,
        scope: CoolingScope,
        reason: FailureReason,
    },
    Terminal(TerminalStatus),
}

/// One blocked connection of the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedConnection {
    pub connection: String,
    pub block: ConnectionBlock,
}

/// A cooling connection as listed in the 429 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoolingConnection {
    pub connection: String,
    pub remaining_ms: Millis,
    pub scope: CoolingScope,
    pub reason: FailureReason,
}

/// The 429 `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CooldownCode {
    ConnectionCooldown,
    ModelCooldown,
}

impl CooldownCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectionCooldown => "connection_cooldown",
            Self::ModelCooldown => "model_cooldown",
        }
    }
}

/// The 429 answer when every connection is cooling and waiting is over or not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownRejection {
    pub cooldown_code: CooldownCode,
    /// Time until the earliest connection comes back.
    pub retry_after_ms: Millis,
    /// `retry_after_ms` in whole seconds, rounded up.
    pub reset_seconds: u64,
    /// Per-connection reasons, in input order (terminal connections are not listed).
    pub connections: Vec<CoolingConnection>,
}

impl Rejection for CooldownRejection {
    fn status(&self) -> u16 {
        429
    }
    fn code(&self) -> &'static str {
        self.cooldown_code.as_str()
    }
    fn error_type(&self) -> &'static str {
        "rate_limit_error"
    }
}

/// The 401 answer when every connection is terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRejection {
    pub dominant: TerminalStatus,
    pub connections: Vec<(String, TerminalStatus)>,
}

impl Rejection for TerminalRejection {
    fn status(&self) -> u16 {
        401
    }
    fn code(&self) -> &'static str {
        "all_connections_terminal"
    }
    fn error_type(&self) -> &'static str {
        "authentication_error"
    }
}

/// The outcome of [`decide_direct_wait`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectWaitDecision {
    /// Sleep `ms`, then restart the attempt loop; `retry` is this wait's 1-based number.
    Wait {
        ms: Millis,
        retry: u32,
    },
    Cooling(CooldownRejection),
    AllTerminal(TerminalRejection),
    /// No connection at all: not a cooldown question (the caller answers "no active
    /// credentials").
    NoConnections,
}

/// Decides for a direct request whose every connection is blocked. `retries` = waits already
/// made, `elapsed_ms` = time already spent waiting.
pub fn decide_direct_wait(
    blocked: &[BlockedConnection],
    retries: u32,
    elapsed_ms: Millis,
    settings: &WaitForCooldownSettings,
) -> DirectWaitDecision {
    let cooling: Vec<CoolingConnection> = blocked
        .iter()
        .filter_map(|b| match b.block {
            ConnectionBlock::Cooling {
                remaining_ms,
                scope,
                reason,
            } => Some(CoolingConnection {
                connection: b.connection.clone(),
                remaining_ms,
                scope,
                reason,
            }),
            ConnectionBlock::Terminal(_) => None,
        })
        .collect();
    let Some(earliest) = cooling.iter().map(|c| c.remaining_ms).min() else {
        return all_terminal(blocked);
    };
    let budget_left = settings.budget_ms.saturating_sub(elapsed_ms);
    if settings.enabled
        && retries < settings.max_retries
        && earliest <= settings.max_retry_wait_ms
        && earliest <= budget_left
    {
        return DirectWaitDecision::Wait {
            ms: earliest,
            retry: retries.saturating_add(1),
        };
    }
    let model_only = cooling.iter().all(|c| c.scope == CoolingScope::Model);
    DirectWaitDecision::Cooling(CooldownRejection {
        cooldown_code: if model_only {
            CooldownCode::ModelCooldown
        } else {
            CooldownCode::ConnectionCooldown
        },
        retry_after_ms: earliest,
        reset_seconds: earliest.div_ceil(1000),
        connections: cooling,
    })
}

fn all_terminal(blocked: &[BlockedConnection]) -> DirectWaitDecision {
    let connections: Vec<(String, TerminalStatus)> = blocked
        .iter()
        .filter_map(|b| match b.block {
            ConnectionBlock::Terminal(s) => Some((b.connection.clone(), s)),
            ConnectionBlock::Cooling { .. } => None,
        })
        .collect();
    // `max_by_key` keeps the last of equal maxima, so listing the statuses from least to most
    // severe sends ties to the more severe one.
    let by_severity = [
        TerminalStatus::Expired,
        TerminalStatus::CreditsExhausted,
        TerminalStatus::Banned,
    ];
    let dominant = by_severity
        .into_iter()
        .map(|s| (connections.iter().filter(|(_, c)| *c == s).count(), s))
        .filter(|(n, _)| *n > 0)
        .max_by_key(|(n, _)| *n)
        .map(|(_, s)| s);
    match dominant {
        Some(dominant) => DirectWaitDecision::AllTerminal(TerminalRejection {
            dominant,
            connections,
        }),
        None => DirectWaitDecision::NoConnections,
    }
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
