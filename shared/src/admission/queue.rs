//! Request-queue admission: one queue per provider+connection (docs/policy.md, `admission`).
//!
//! Why: an API-key connection is throttled locally so a burst never reaches the upstream as a
//! wall of 429s. The queue has two separate budgets, and mixing them up was a reference bug
//! (its job expiry started at dispatch, so the "wait" limit really bounded execution):
//! - the **wait budget** (`max_wait_ms`) bounds time spent *waiting*; its timer stops when
//!   execution starts, and a request that exceeds it never reaches the upstream;
//! - the **execution budget** (`execution_max_wait_ms`) bounds time *after dispatch* and is
//!   raised to the provider's headers timeout when that is longer.
//!
//! **Depth check first.** [`check_queue_depth`] must run before any other work on a request
//! (body translation, compression, token estimation, limiter scheduling): a full queue is the
//! cheapest possible rejection and should stay that way. Depth counts requests *waiting* in the
//! queue, never those executing (`concurrent_requests` bounds those); `0` means unbounded.

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::Rejection;
use crate::Millis;
use crate::outcome::{BreakerOutcome, ProviderCategory};

/// Smallest accepted wait or execution budget.
pub const MIN_WAIT_MS: Millis = 1;
/// Largest accepted wait or execution budget (24 h).
pub const MAX_WAIT_MS: Millis = 24 * 60 * 60 * 1000;
/// Largest accepted queue depth.
pub const MAX_QUEUE_DEPTH: u32 = 100_000;

// The accepted range of every queue number. The settings layer validates the global values and
// the per-connection overrides against these same ranges, so a value the settings accept is
// never clamped again here.

/// Accepted `requests_per_minute`.
pub const REQUESTS_PER_MINUTE_RANGE: RangeInclusive<u32> = 1..=1_000_000;
/// Accepted `min_time_between_requests_ms` (0–1 h).
pub const MIN_TIME_BETWEEN_REQUESTS_RANGE_MS: RangeInclusive<Millis> = 0..=3_600_000;
/// Accepted `concurrent_requests`.
pub const CONCURRENT_REQUESTS_RANGE: RangeInclusive<u32> = 1..=10_000;
/// Accepted wait and execution budgets (1 ms–24 h).
pub const WAIT_RANGE_MS: RangeInclusive<Millis> = MIN_WAIT_MS..=MAX_WAIT_MS;
/// Accepted `max_queue_depth` (`0` = unbounded).
pub const QUEUE_DEPTH_RANGE: RangeInclusive<u32> = 0..=MAX_QUEUE_DEPTH;

fn clamp_into<T: Ord + Copy>(value: T, range: &RangeInclusive<T>) -> T {
    value.clamp(*range.start(), *range.end())
}

/// Effective queue settings for one connection (`[resilience.request_queue]`, then the
/// connection's `[connections.rate_limit]` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSettings {
    /// Reservoir size per sliding minute (1–1 000 000).
    pub requests_per_minute: u32,
    /// Minimum spacing between two dispatches (0–3 600 000 ms).
    pub min_time_between_requests_ms: Millis,
    /// Requests executing at once through this queue (1–10 000).
    pub concurrent_requests: u32,
    /// Wait budget: time in the queue before dispatch (1 ms–24 h).
    pub max_wait_ms: Millis,
    /// Execution budget after dispatch (1 ms–24 h), see [`execution_budget_ms`].
    pub execution_max_wait_ms: Millis,
    /// Requests allowed to *wait*; `0` = unbounded (0–100 000).
    pub max_queue_depth: u32,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            requests_per_minute: 60,
            min_time_between_requests_ms: 350,
            concurrent_requests: 6,
            max_wait_ms: 30_000,
            execution_max_wait_ms: 600_000,
            max_queue_depth: 0,
        }
    }
}

impl QueueSettings {
    /// Every field forced into its documented range. Out-of-range values are clamped rather
    /// than rejected, so a bad runtime setting degrades instead of disabling the queue.
    pub fn clamped(self) -> Self {
        Self {
            requests_per_minute: clamp_into(self.requests_per_minute, &REQUESTS_PER_MINUTE_RANGE),
            min_time_between_requests_ms: clamp_into(
                self.min_time_between_requests_ms,
                &MIN_TIME_BETWEEN_REQUESTS_RANGE_MS,
            ),
            concurrent_requests: clamp_into(self.concurrent_requests, &CONCURRENT_REQUESTS_RANGE),
            max_wait_ms: clamp_wait(self.max_wait_ms),
            execution_max_wait_ms: clamp_wait(self.execution_max_wait_ms),
            max_queue_depth: clamp_depth(self.max_queue_depth),
        }
    }

    /// The pacing part, for this queue's [`super::RateState`].
    pub fn rate_limit(&self) -> super::RateLimit {
        super::RateLimit {
            requests_per_minute: self.requests_per_minute,
            min_time_between_requests_ms: self.min_time_between_requests_ms,
        }
    }

    /// Applies a per-connection override where each non-zero field wins and `0` inherits
    /// (the `[connections.rate_limit]` convention), then clamps.
    pub fn overridden_by(self, o: &QueueSettings) -> Self {
        fn pick<T: PartialEq + Default + Copy>(over: T, base: T) -> T {
            if over == T::default() { base } else { over }
        }
        Self {
            requests_per_minute: pick(o.requests_per_minute, self.requests_per_minute),
            min_time_between_requests_ms: pick(
                o.min_time_between_requests_ms,
                self.min_time_between_requests_ms,
            ),
            concurrent_requests: pick(o.concurrent_requests, self.concurrent_requests),
            max_wait_ms: pick(o.max_wait_ms, self.max_wait_ms),
            execution_max_wait_ms: pick(o.execution_max_wait_ms, self.execution_max_wait_ms),
            max_queue_depth: pick(o.max_queue_depth, self.max_queue_depth),
        }
        .clamped()
    }
}

/// Clamps a wait or execution budget to 1 ms–24 h.
pub fn clamp_wait(ms: Millis) -> Millis {
    clamp_into(ms, &WAIT_RANGE_MS)
}

/// Clamps a queue depth to 0–100 000 (`0` stays "unbounded").
pub fn clamp_depth(depth: u32) -> u32 {
    clamp_into(depth, &QUEUE_DEPTH_RANGE)
}

/// Typed queue errors. The two queue rejections are local backpressure; only
/// [`AdmissionError::ExecutionTimeout`] concerns a request the upstream actually received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AdmissionError {
    /// The queue already holds `max_depth` waiting requests.
    #[error("request queue is full ({waiting} waiting, max_queue_depth {max_depth})")]
    QueueFull { waiting: u32, max_depth: u32 },
    /// The request waited longer than the wait budget and was never dispatched.
    #[error("request waited {waited_ms} ms in the queue (max_wait_ms {max_wait_ms})")]
    QueueTimeout {
        waited_ms: Millis,
        max_wait_ms: Millis,
    },
    /// The dispatched request ran longer than the execution budget.
    #[error("request executed for {elapsed_ms} ms (execution budget {budget_ms} ms)")]
    ExecutionTimeout {
        elapsed_ms: Millis,
        budget_ms: Millis,
    },
}

impl AdmissionError {
    /// Whether the request reached the upstream (only an execution timeout did).
    pub fn reached_upstream(&self) -> bool {
        matches!(self, Self::ExecutionTimeout { .. })
    }

    /// The breaker's view. Queue rejections are Switchyard's own backpressure and never move
    /// the breaker, cool or disable anything (`Some(Ignore)`). An execution timeout is `None`:
    /// the caller classifies it like any other attempt timeout.
    pub fn breaker_outcome(&self) -> Option<BreakerOutcome> {
        if self.reached_upstream() {
            None
        } else {
            Some(BreakerOutcome::Ignore)
        }
    }
}

impl Rejection for AdmissionError {
    /// `QUEUE_TIMEOUT` is a 429 like `QUEUE_FULL`: it is local backpressure, and answering it
    /// as a 502/503 made it look like an upstream outage in the reference.
    fn status(&self) -> u16 {
        match self {
            Self::QueueFull { .. } | Self::QueueTimeout { .. } => 429,
            Self::ExecutionTimeout { .. } => 504,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            Self::QueueFull { .. } => "RATE_LIMIT_QUEUE_FULL",
            Self::QueueTimeout { .. } => "RATE_LIMIT_QUEUE_TIMEOUT",
            Self::ExecutionTimeout { .. } => "RATE_LIMIT_EXECUTION_TIMEOUT",
        }
    }
    fn error_type(&self) -> &'static str {
        match self {
            Self::QueueFull { .. } | Self::QueueTimeout { .. } => "rate_limit_error",
            Self::ExecutionTimeout { .. } => "server_error",
        }
    }
}

/// The depth check, to run **before any other work** on the request. `waiting` counts
/// requests waiting in this queue (not executing ones); `max_depth == 0` means unbounded.
/// Rejects when the queue already holds `max_depth` waiting requests.
pub fn check_queue_depth(waiting: u32, max_depth: u32) -> Result<(), AdmissionError> {
    let max_depth = clamp_depth(max_depth);
    if max_depth != 0 && waiting >= max_depth {
        return Err(AdmissionError::QueueFull { waiting, max_depth });
    }
    Ok(())
}

/// The wait budget: `waited_ms` is time spent waiting (the timer stops at dispatch). Waiting
/// exactly `max_wait_ms` is still allowed.
pub fn check_queue_wait(waited_ms: Millis, max_wait_ms: Millis) -> Result<(), AdmissionError> {
    let max_wait_ms = clamp_wait(max_wait_ms);
    if waited_ms > max_wait_ms {
        return Err(AdmissionError::QueueTimeout {
            waited_ms,
            max_wait_ms,
        });
    }
    Ok(())
}

/// The execution budget after dispatch: `execution_max_wait_ms` (clamped), raised to the
/// provider's headers timeout when that is longer, so the queue never cuts off a request the
/// upstream client is still allowed to wait for.
pub fn execution_budget_ms(
    execution_max_wait_ms: Millis,
    provider_headers_timeout_ms: Millis,
) -> Millis {
    clamp_wait(execution_max_wait_ms).max(provider_headers_timeout_ms)
}

/// Checks time spent executing against a budget from [`execution_budget_ms`] (inclusive).
pub fn check_execution_time(elapsed_ms: Millis, budget_ms: Millis) -> Result<(), AdmissionError> {
    if elapsed_ms > budget_ms {
        return Err(AdmissionError::ExecutionTimeout {
            elapsed_ms,
            budget_ms,
        });
    }
    Ok(())
}

/// Whether a connection goes through the request queue.
///
/// - `explicit_flag` (`rate_limit_protection = true`) always opts in;
/// - otherwise every apikey connection is auto-enabled when `auto_enable_apikey` is on, and
///   `env_override` (`RATE_LIMIT_AUTO_ENABLE`) beats the persisted `auto_enable_apikey`;
/// - `rate_limit_protection = false` does **not** opt an auto-enabled connection out.
///
/// The caller asks only for active connections; inactive ones are never dispatched to.
pub fn queue_enabled(
    category: ProviderCategory,
    explicit_flag: bool,
    auto_enable_apikey: bool,
    env_override: Option<bool>,
) -> bool {
    explicit_flag
        || (category == ProviderCategory::Apikey && env_override.unwrap_or(auto_enable_apikey))
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
