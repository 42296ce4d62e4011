//! Plain parameter structs for the policy modules.
//!
//! The policy code (breaker, cooldown, lockout, admission, …) should not know about layers,
//! sources or config files: it takes numbers. These structs flatten the settings tree per
//! provider category and resolve derived values (the breaker's degradation band), so a policy
//! module's own parameter type is one trivial `From` away. Sections that are already plain
//! numbers ([`Concurrency`], [`WaitForCooldown`], [`ComboCooldownWait`], [`Stream`],
//! [`ThroughputWatchdog`], [`SessionAffinity`], [`SessionLeases`], [`ModelLockout`]) are used as
//! they are.

use serde::Serialize;

use super::layer::{Bounded, Mode, join};
use super::model::*;
use super::{FieldError, ResilienceSettings};
use crate::config::ConnectionConfig;
use crate::outcome::ProviderCategory;

/// Provider circuit-breaker numbers for one category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BreakerParams {
    pub failure_threshold: u32,
    /// Resolved: never 0 unless `failure_threshold` is 1, in which case there is no DEGRADED
    /// band; always ≤ `failure_threshold − 1`.
    pub degradation_threshold: u32,
    pub reset_timeout_ms: u64,
    pub max_backoff_multiplier: u32,
    pub backoff_escalation_count: u32,
}

/// The windowed provider cooldown for one category (§1b). The `local` category uses the
/// `apikey` window (the contract defines no local one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProviderCooldownParams {
    pub enabled: bool,
    pub failure_threshold: u32,
    pub failure_window_ms: u64,
    pub cooldown_ms: u64,
    pub min_retry_cooldown_ms: u64,
    pub max_retry_cooldown_ms: u64,
}

/// Connection cooldown numbers for one category. The `local` category uses the `apikey`
/// numbers (the contract defines no local profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConnectionCooldownParams {
    pub base_cooldown_ms: u64,
    pub max_backoff_steps: u32,
    pub use_upstream_retry_hints: bool,
    pub max_cooldown_ms: u64,
    pub expired_retry_max: u32,
    pub request_rejected_ban_streak: u32,
    /// Whether a content-stall abort sets a cooldown.
    pub stream_stall_cooldown: bool,
}

/// Request-queue numbers for one connection, overrides applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueSettings {
    pub requests_per_minute: u32,
    pub min_time_between_requests_ms: u64,
    /// Bounds executing requests.
    pub concurrent_requests: u32,
    /// Queue wait budget.
    pub max_wait_ms: u64,
    /// Execution budget after dispatch (see [`QueueSettings::execution_budget_ms`]).
    pub execution_max_wait_ms: u64,
    /// Waiting requests; 0 = unbounded.
    pub max_queue_depth: u32,
}

impl QueueSettings {
    /// The execution budget, raised to the provider's headers timeout when that is longer (a
    /// slow-to-answer upstream must not be cut off by the queue before its own timeout).
    pub fn execution_budget_ms(&self, headers_timeout_ms: u64) -> u64 {
        self.execution_max_wait_ms.max(headers_timeout_ms)
    }
}

impl ResilienceSettings {
    /// Breaker numbers of a provider category, with the degradation band resolved.
    pub fn breaker_params(&self, category: ProviderCategory) -> BreakerParams {
        let profile = match category {
            ProviderCategory::Oauth => &self.provider_breaker.oauth,
            ProviderCategory::Apikey => &self.provider_breaker.apikey,
            ProviderCategory::Local => &self.provider_breaker.local,
        };
        let threshold = profile.failure_threshold.max(1);
        let derived = if profile.degradation_threshold == 0 {
            (threshold * 3).div_ceil(5)
        } else {
            profile.degradation_threshold
        };
        BreakerParams {
            failure_threshold: threshold,
            degradation_threshold: derived.min(threshold - 1),
            reset_timeout_ms: profile.reset_timeout_ms,
            max_backoff_multiplier: profile.max_backoff_multiplier,
            backoff_escalation_count: profile.backoff_escalation_count,
        }
    }

    /// Windowed provider cooldown numbers of a provider category.
    pub fn provider_cooldown_params(&self, category: ProviderCategory) -> ProviderCooldownParams {
        let cooldown = &self.provider_cooldown;
        let profile = match category {
            ProviderCategory::Oauth => &cooldown.oauth,
            ProviderCategory::Apikey | ProviderCategory::Local => &cooldown.apikey,
        };
        ProviderCooldownParams {
            enabled: cooldown.enabled,
            failure_threshold: profile.failure_threshold,
            failure_window_ms: profile.failure_window_ms,
            cooldown_ms: profile.cooldown_ms,
            min_retry_cooldown_ms: cooldown.min_retry_cooldown_ms,
            max_retry_cooldown_ms: cooldown.max_retry_cooldown_ms,
        }
    }

    /// Connection cooldown numbers of a provider category.
    pub fn connection_cooldown_params(
        &self,
        category: ProviderCategory,
    ) -> ConnectionCooldownParams {
        let cooldown = &self.connection_cooldown;
        let profile = match category {
            ProviderCategory::Oauth => &cooldown.oauth,
            ProviderCategory::Apikey | ProviderCategory::Local => &cooldown.apikey,
        };
        ConnectionCooldownParams {
            base_cooldown_ms: profile.base_cooldown_ms,
            max_backoff_steps: profile.max_backoff_steps,
            use_upstream_retry_hints: profile.use_upstream_retry_hints,
            max_cooldown_ms: cooldown.max_cooldown_ms,
            expired_retry_max: cooldown.expired_retry_max,
            request_rejected_ban_streak: cooldown.request_rejected_ban_streak,
            stream_stall_cooldown: self.stream_stall_cooldown.enabled,
        }
    }

    /// The global queue numbers, before per-connection overrides.
    pub fn queue_defaults(&self) -> QueueSettings {
        let queue = &self.request_queue;
        QueueSettings {
            requests_per_minute: queue.requests_per_minute,
            min_time_between_requests_ms: queue.min_time_between_requests_ms,
            concurrent_requests: queue.concurrent_requests,
            max_wait_ms: queue.max_wait_ms,
            execution_max_wait_ms: queue.execution_max_wait_ms,
            max_queue_depth: queue.max_queue_depth,
        }
    }
}

/// The queue numbers of one connection: its `[connections.rate_limit]` overrides (0 = inherit)
/// on top of the global settings, clamped into the same bounds as the global values.
pub fn effective_queue(
    settings: &ResilienceSettings,
    connection: &ConnectionConfig,
) -> QueueSettings {
    let mut queue = settings.queue_defaults();
    apply_overrides(&mut queue, connection, &mut Vec::new());
    queue
}

/// Whether the request queue throttles this connection: explicitly opted in with
/// `rate_limit_protection`, or an apikey connection while `auto_enable_apikey_providers` is on.
/// (`rate_limit_protection = false` never opts a connection out.)
pub fn queue_enabled(
    settings: &ResilienceSettings,
    connection: &ConnectionConfig,
    category: ProviderCategory,
) -> bool {
    connection.rate_limit_protection
        || (category == ProviderCategory::Apikey
            && settings.request_queue.auto_enable_apikey_providers)
}

/// Pushes a warning for every override of `connection` that is out of bounds.
pub(super) fn override_warnings(connection: &ConnectionConfig, warnings: &mut Vec<FieldError>) {
    let mut scratch = ResilienceSettings::default().queue_defaults();
    apply_overrides(&mut scratch, connection, warnings);
}

fn apply_overrides(
    queue: &mut QueueSettings,
    connection: &ConnectionConfig,
    warnings: &mut Vec<FieldError>,
) {
    let limits = &connection.rate_limit;
    let base = format!("connections.{}.rate_limit", connection.id);
    let mut take_u32 = |target: &mut u32, value: u32, name: &str, bounds| {
        if value != 0 {
            let mut value = value;
            value.bound(&bounds, Mode::Clamp, &join(&base, name), warnings);
            *target = value;
        }
    };
    take_u32(
        &mut queue.requests_per_minute,
        limits.requests_per_minute,
        "requests_per_minute",
        1..=1_000_000,
    );
    take_u32(
        &mut queue.concurrent_requests,
        limits.concurrent_requests,
        "concurrent_requests",
        1..=10_000,
    );
    take_u32(
        &mut queue.max_queue_depth,
        limits.max_queue_depth,
        "max_queue_depth",
        0..=100_000,
    );
    let mut take_u64 = |target: &mut u64, value: u64, name: &str, bounds| {
        if value != 0 {
            let mut value = value;
            value.bound(&bounds, Mode::Clamp, &join(&base, name), warnings);
            *target = value;
        }
    };
    take_u64(
        &mut queue.min_time_between_requests_ms,
        limits.min_time_between_requests_ms,
        "min_time_between_requests_ms",
        0..=HOUR_MS,
    );
    take_u64(
        &mut queue.max_wait_ms,
        limits.max_wait_ms,
        "max_wait_ms",
        1..=DAY_MS,
    );
    take_u64(
        &mut queue.execution_max_wait_ms,
        limits.execution_max_wait_ms,
        "execution_max_wait_ms",
        1..=DAY_MS,
    );
}
