//! The composite concurrency gate: caps at four levels, always taken in the fixed order
//! global → provider → connection → model (docs/policy.md, `admission`).
//!
//! Why a fixed order: permits are acquired one level at a time and held while waiting at the
//! next, so every request must climb the levels in the same order or two requests could each
//! hold what the other waits for. The first saturated level is where a request queues, which is
//! how "the tightest cap wins".
//!
//! Invariants:
//! - a cap of `0` means unlimited at that level;
//! - waiting is bounded twice: at most `semaphore_max_queue` waiters per level, and at most
//!   `semaphore_queue_timeout_ms` of waiting, giving `SEMAPHORE_QUEUE_FULL` /
//!   `SEMAPHORE_TIMEOUT` (429, `rate_limit_error`); the direct path then tries another
//!   connection;
//! - **a saturated gate never cools, locks or disables anything**: it is Switchyard's own
//!   backpressure, reported to the breaker as [`BreakerOutcome::Ignore`];
//! - quota-share serialisation is fail-open: a full queue or a timeout proceeds without a slot.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::Rejection;
use crate::Millis;
use crate::outcome::BreakerOutcome;

/// One level of the composite gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateLevel {
    Global,
    Provider,
    Connection,
    Model,
}

impl GateLevel {
    /// The snake_case name used in metrics labels and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Provider => "provider",
            Self::Connection => "connection",
            Self::Model => "model",
        }
    }
}

/// The acquisition order. `views[i]` passed to [`first_blocking_gate`] describes
/// `gate_order()[i]`.
pub const fn gate_order() -> [GateLevel; 4] {
    [
        GateLevel::Global,
        GateLevel::Provider,
        GateLevel::Connection,
        GateLevel::Model,
    ]
}

/// A snapshot of one level's semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateView {
    /// Permits at this level; `0` = unlimited.
    pub cap: u32,
    /// Permits held.
    pub in_use: u32,
    /// Requests queued for a permit.
    pub waiting: u32,
}

impl GateView {
    /// Saturated: no free permit, or others already queued ahead (no barging past waiters).
    pub fn is_saturated(&self) -> bool {
        self.cap != 0 && (self.in_use >= self.cap || self.waiting > 0)
    }
}

/// What to do at the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateDecision {
    /// Take a permit at every level now.
    Acquire,
    /// Wait for a permit at this level (earlier levels' permits are held meanwhile).
    Queue,
    /// This level's queue is full: `SEMAPHORE_QUEUE_FULL` at once.
    RejectQueueFull,
}

/// Concurrency settings (`[resilience.concurrency]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConcurrencySettings {
    /// Longest wait for a permit.
    pub semaphore_queue_timeout_ms: Millis,
    /// Most requests waiting per level.
    pub semaphore_max_queue: u32,
    /// Quota-share serialisation proceeds without a slot on a full queue or timeout.
    pub quota_share_fail_open: bool,
}

impl Default for ConcurrencySettings {
    fn default() -> Self {
        Self {
            semaphore_queue_timeout_ms: 30_000,
            semaphore_max_queue: 20,
            quota_share_fail_open: true,
        }
    }
}

/// The first saturated level in [`gate_order`] and what to do there, or `None` when every
/// level has a free permit ([`GateDecision::Acquire`]). Missing trailing views are unlimited;
/// extra views are ignored.
pub fn first_blocking_gate(
    views: &[GateView],
    max_queue: u32,
) -> Option<(GateLevel, GateDecision)> {
    gate_order()
        .into_iter()
        .zip(views)
        .find(|(_, v)| v.is_saturated())
        .map(|(level, v)| {
            let decision = if v.waiting < max_queue {
                GateDecision::Queue
            } else {
                GateDecision::RejectQueueFull
            };
            (level, decision)
        })
}

/// [`first_blocking_gate`] folded into one decision.
pub fn gate_decision(views: &[GateView], max_queue: u32) -> GateDecision {
    first_blocking_gate(views, max_queue).map_or(GateDecision::Acquire, |(_, d)| d)
}

/// Typed gate rejections (429, `rate_limit_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SemaphoreError {
    /// Waited longer than `semaphore_queue_timeout_ms` at `level`.
    #[error("no {} permit within {waited_ms} ms", level.as_str())]
    Timeout { level: GateLevel, waited_ms: Millis },
    /// `level` already had `semaphore_max_queue` waiters.
    #[error("{} permit queue is full ({max_queue} waiting)", level.as_str())]
    QueueFull { level: GateLevel, max_queue: u32 },
}

impl SemaphoreError {
    /// The level that refused.
    pub fn level(&self) -> GateLevel {
        match self {
            Self::Timeout { level, .. } | Self::QueueFull { level, .. } => *level,
        }
    }

    /// A saturated gate never moves the breaker, cools or disables anything.
    pub fn breaker_outcome(&self) -> BreakerOutcome {
        BreakerOutcome::Ignore
    }
}

impl Rejection for SemaphoreError {
    fn status(&self) -> u16 {
        429
    }
    fn code(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "SEMAPHORE_TIMEOUT",
            Self::QueueFull { .. } => "SEMAPHORE_QUEUE_FULL",
        }
    }
    fn error_type(&self) -> &'static str {
        "rate_limit_error"
    }
}

/// The wait bound at a level: waiting exactly the timeout is still allowed.
pub fn check_semaphore_wait(
    level: GateLevel,
    waited_ms: Millis,
    settings: &ConcurrencySettings,
) -> Result<(), SemaphoreError> {
    if waited_ms > settings.semaphore_queue_timeout_ms {
        return Err(SemaphoreError::Timeout { level, waited_ms });
    }
    Ok(())
}

/// What quota-share serialisation does when its semaphore refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaShareOutcome {
    /// Fail-open: dispatch anyway, holding no slot (nothing to release).
    ProceedWithoutSlot,
    /// Fail-closed (only when `quota_share_fail_open = false`).
    Reject(SemaphoreError),
}

/// Quota-share serialisation never rejects a dispatchable request unless fail-open is off.
pub fn quota_share_on_error(
    err: SemaphoreError,
    settings: &ConcurrencySettings,
) -> QuotaShareOutcome {
    if settings.quota_share_fail_open {
        QuotaShareOutcome::ProceedWithoutSlot
    } else {
        QuotaShareOutcome::Reject(err)
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
