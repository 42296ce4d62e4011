//! Queue and concurrency admission, and the "wait or answer now" decisions.
//!
//! Why: every request passes several local gates before it reaches an upstream (the request
//! queue, the composite concurrency gate, the per-key and per-connection rate limiters), and
//! when the pool is blocked by resilience timers something must decide between waiting and an
//! immediate, well-typed answer. Keeping those rules here, pure, lets them be table-tested and
//! shared by every node.
//!
//! Invariants:
//! - nothing here reads a clock or does I/O: time arrives as [`crate::Millis`];
//! - every decision is total (no panics) and saturating on overflow;
//! - Switchyard's own admission rejections ([`AdmissionError`], [`SemaphoreError`]) are never
//!   upstream failures: they report [`crate::outcome::BreakerOutcome::Ignore`] and never cool,
//!   lock or disable a connection, model or provider;
//! - a wait decision never exceeds its per-wait ceiling nor the remaining wait budget.

pub mod bucket;
pub mod direct;
pub mod gate;
pub mod pool;
pub mod queue;
pub mod wait;

pub use bucket::{RateLimit, RateState};
pub use direct::{
    BlockedConnection, ConnectionBlock, CooldownCode, CooldownRejection, CoolingConnection,
    CoolingScope, DirectWaitDecision, TerminalRejection, WaitForCooldownSettings,
    decide_direct_wait,
};
pub use gate::{
    ConcurrencySettings, GateDecision, GateLevel, GateView, QuotaShareOutcome, SemaphoreError,
    check_semaphore_wait, first_blocking_gate, gate_decision, gate_order, quota_share_on_error,
};
pub use pool::{EmptyPoolOutcome, ExcludedTarget, ExclusionReason, classify_empty_pool};
pub use queue::{
    AdmissionError, QueueSettings, check_execution_time, check_queue_depth, check_queue_wait,
    execution_budget_ms, queue_enabled,
};
pub use wait::{
    COMBO_WAIT_MARGIN_MS, ComboWaitDecision, ComboWaitSettings, LockReason, LockedTarget,
    SkipGroup, combo_wait_allowed, decide_combo_wait,
};

/// The ceiling of a cooldown-aware wait and of its budget (5 minutes), for both the direct
/// ([`WaitForCooldownSettings`]) and the combo ([`ComboWaitSettings`]) wait.
pub const WAIT_BUDGET_MAX_MS: crate::Millis = 300_000;
/// The most waits one request may make, direct or combo.
pub const MAX_WAITS_PER_REQUEST: u32 = 10;

/// The client-facing shape of a rejection: HTTP status, the `error.code` and the `error.type`
/// of the OpenAI envelope. The edge maps these into the response body; the types here only
/// decide them.
pub trait Rejection {
    /// HTTP status code.
    fn status(&self) -> u16;
    /// The stable `error.code` string.
    fn code(&self) -> &'static str;
    /// The `error.type` string.
    fn error_type(&self) -> &'static str;
}

/// `Retry-After` in whole seconds for a delay in milliseconds: rounded up, at least 1.
pub fn retry_after_secs(ms: crate::Millis) -> u64 {
    ms.div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::retry_after_secs;

    #[test]
    fn retry_after_rounds_up_and_is_at_least_one_second() {
        for (ms, secs) in [(0, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (65_000, 65)] {
            assert_eq!(retry_after_secs(ms), secs, "{ms} ms");
        }
    }
}
