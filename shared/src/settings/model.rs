//! The resilience settings tree: every section and key of `[resilience]` in the config contract,
//! with the contract's defaults and the bounds each value must respect.
//!
//! The bounds follow the reference implementation's settings schema where it has one (queue waits
//! 1 ms–24 h, depth 0–100000, model-lockout base 5 s–10 min, …) and are otherwise chosen to
//! reject only values that are clearly typos. Where a policy module enforces a limit itself
//! (breaker thresholds, lockout ranges, queue ranges, wait ceilings), the bound here names that
//! module's constant, so the settings never accept a value the policy would change again.

use std::ops::RangeInclusive;

use super::layer::{ANY, ProviderErrorRules, section};
use super::stream_recovery::StreamRecovery;
use crate::admission::{MAX_WAITS_PER_REQUEST, queue};
use crate::{breaker, lockout};

pub use crate::admission::WAIT_BUDGET_MAX_MS;

/// One day in milliseconds: the ceiling of most durations.
pub const DAY_MS: u64 = 86_400_000;
/// One hour in milliseconds.
pub const HOUR_MS: u64 = 3_600_000;
/// Valid HTTP status codes.
pub const STATUS_CODES: RangeInclusive<u16> =
    lockout::ERROR_CODE_RANGE.0..=lockout::ERROR_CODE_RANGE.1;

const LOCKOUT_BASE_MS: RangeInclusive<u64> =
    lockout::BASE_COOLDOWN_RANGE_MS.0..=lockout::BASE_COOLDOWN_RANGE_MS.1;
const LOCKOUT_MAX_MS: RangeInclusive<u64> =
    lockout::MAX_COOLDOWN_RANGE_MS.0..=lockout::MAX_COOLDOWN_RANGE_MS.1;

section! {
    /// All resilience settings (`[resilience]`).
    ResilienceSettings / ResiliencePatch / ResilienceEffective {
        provider_breaker: ProviderBreaker => ANY,
        provider_cooldown: ProviderCooldown => ANY,
        connection_cooldown: ConnectionCooldown => ANY,
        stream_stall_cooldown: StreamStallCooldown => ANY,
        model_lockout: ModelLockout => ANY,
        request_queue: RequestQueue => ANY,
        concurrency: Concurrency => ANY,
        wait_for_cooldown: WaitForCooldown => ANY,
        combo_cooldown_wait: ComboCooldownWait => ANY,
        session_affinity: SessionAffinity => ANY,
        session_leases: SessionLeases => ANY,
        stream: Stream => ANY,
        stream_recovery: StreamRecovery => ANY,
        /// Extra operator error rules per provider id, added at runtime through
        /// `PATCH /api/resilience` (not part of the file contract, though the file may set them
        /// too). They are consulted before the provider's `[[providers.error_rules]]`.
        provider_error_rules: ProviderErrorRules => ANY,
    }
}

section! {
    /// Provider circuit-breaker profiles by category (`[resilience.provider_breaker]`).
    ProviderBreaker / ProviderBreakerPatch / ProviderBreakerEffective {
        oauth: BreakerProfile => ANY,
        apikey: BreakerProfile => ANY,
        local: BreakerProfile => ANY,
    }
}

section! {
    /// One provider circuit-breaker profile.
    BreakerProfile / BreakerProfilePatch / BreakerProfileEffective {
        /// Failures that open the breaker.
        failure_threshold: u32 => 1..=breaker::MAX_FAILURE_THRESHOLD,
        /// Failures that mark the provider DEGRADED; 0 = derived (60 % of the threshold, rounded
        /// up). Always kept ≤ `failure_threshold − 1`.
        degradation_threshold: u32 => 0..=breaker::MAX_FAILURE_THRESHOLD,
        reset_timeout_ms: u64 => breaker::MIN_RESET_TIMEOUT_MS..=breaker::MAX_RESET_TIMEOUT_MS,
        /// Cap of the reset escalation: `reset · 2^(cycles − escalation_count)` ≤ `reset · this`.
        max_backoff_multiplier: u32 => 1..=1000,
        /// Open cycles before the reset timeout escalates.
        backoff_escalation_count: u32 => 0..=100,
    }
}

section! {
    /// The optional windowed provider cooldown (`[resilience.provider_cooldown]`).
    ProviderCooldown / ProviderCooldownPatch / ProviderCooldownEffective {
        enabled: bool => ANY,
        oauth: ProviderCooldownProfile => ANY,
        apikey: ProviderCooldownProfile => ANY,
        /// Connection-level entries back off exponentially from this…
        min_retry_cooldown_ms: u64 => 0..=DAY_MS,
        /// …to this (kept ≥ the minimum).
        max_retry_cooldown_ms: u64 => 0..=DAY_MS,
    }
}

section! {
    /// When a provider counts as cooling: `failure_threshold` failures within
    /// `failure_window_ms` cool it for `cooldown_ms`.
    ProviderCooldownProfile / ProviderCooldownProfilePatch / ProviderCooldownProfileEffective {
        failure_threshold: u32 => 1..=100_000,
        failure_window_ms: u64 => 1000..=DAY_MS,
        cooldown_ms: u64 => 1000..=DAY_MS,
    }
}

section! {
    /// Connection cooldown (`[resilience.connection_cooldown]`).
    ConnectionCooldown / ConnectionCooldownPatch / ConnectionCooldownEffective {
        oauth: ConnectionCooldownProfile => ANY,
        apikey: ConnectionCooldownProfile => ANY,
        /// Cap of the scaled backoff (upstream hints are not capped by it).
        max_cooldown_ms: u64 => 1000..=DAY_MS,
        /// Consecutive auth failures before `expired` becomes terminal.
        expired_retry_max: u32 => 1..=100,
        /// Consecutive `request_rejected` errors before `banned`.
        request_rejected_ban_streak: u32 => 1..=100,
    }
}

section! {
    /// Connection cooldown numbers of one category.
    ConnectionCooldownProfile / ConnectionCooldownProfilePatch / ConnectionCooldownProfileEffective {
        /// Backoff is `base · 2^level`.
        base_cooldown_ms: u64 => 0..=DAY_MS,
        max_backoff_steps: u32 => 0..=32,
        use_upstream_retry_hints: bool => ANY,
    }
}

section! {
    /// Whether a content-stall abort cools the connection (`[resilience.stream_stall_cooldown]`).
    StreamStallCooldown / StreamStallCooldownPatch / StreamStallCooldownEffective {
        enabled: bool => ANY,
    }
}

section! {
    /// Model lockout (`[resilience.model_lockout]`).
    ModelLockout / ModelLockoutPatch / ModelLockoutEffective {
        enabled: bool => ANY,
        error_codes: Vec<u16> => STATUS_CODES,
        base_cooldown_ms: u64 => LOCKOUT_BASE_MS,
        /// Kept ≥ `base_cooldown_ms`.
        max_cooldown_ms: u64 => LOCKOUT_MAX_MS,
        max_backoff_steps: u32 => 0..=lockout::MAX_BACKOFF_STEPS_LIMIT,
        use_exponential_backoff: bool => ANY,
    }
}

section! {
    /// Request-queue admission defaults (`[resilience.request_queue]`).
    RequestQueue / RequestQueuePatch / RequestQueueEffective {
        /// Throttle every active apikey connection through the queue.
        auto_enable_apikey_providers: bool => ANY,
        requests_per_minute: u32 => queue::REQUESTS_PER_MINUTE_RANGE,
        min_time_between_requests_ms: u64 => queue::MIN_TIME_BETWEEN_REQUESTS_RANGE_MS,
        /// Bounds the requests executing at once (queue depth counts only the waiting ones).
        concurrent_requests: u32 => queue::CONCURRENT_REQUESTS_RANGE,
        /// Queue wait budget; its timer stops when execution starts.
        max_wait_ms: u64 => queue::WAIT_RANGE_MS,
        /// Execution budget after dispatch.
        execution_max_wait_ms: u64 => queue::WAIT_RANGE_MS,
        /// 0 = unbounded.
        max_queue_depth: u32 => queue::QUEUE_DEPTH_RANGE,
    }
}

section! {
    /// Concurrency-gate queueing (`[resilience.concurrency]`).
    Concurrency / ConcurrencyPatch / ConcurrencyEffective {
        semaphore_queue_timeout_ms: u64 => 1..=HOUR_MS,
        semaphore_max_queue: u32 => 0..=100_000,
        quota_share_fail_open: bool => ANY,
    }
}

section! {
    /// Waiting for a cooldown on direct requests (`[resilience.wait_for_cooldown]`).
    WaitForCooldown / WaitForCooldownPatch / WaitForCooldownEffective {
        enabled: bool => ANY,
        max_retries: u32 => 0..=MAX_WAITS_PER_REQUEST,
        max_retry_wait_ms: u64 => 0..=WAIT_BUDGET_MAX_MS,
        /// Kept ≥ `max_retry_wait_ms`.
        budget_ms: u64 => 0..=WAIT_BUDGET_MAX_MS,
    }
}

section! {
    /// Waiting for a transient lockout inside a combo (`[resilience.combo_cooldown_wait]`).
    ComboCooldownWait / ComboCooldownWaitPatch / ComboCooldownWaitEffective {
        enabled: bool => ANY,
        max_wait_ms: u64 => 0..=WAIT_BUDGET_MAX_MS,
        max_attempts: u32 => 0..=MAX_WAITS_PER_REQUEST,
        /// Kept ≥ `max_wait_ms`.
        budget_ms: u64 => 0..=WAIT_BUDGET_MAX_MS,
    }
}

section! {
    /// Session-affinity soft pins (`[resilience.session_affinity]`).
    SessionAffinity / SessionAffinityPatch / SessionAffinityEffective {
        /// 0 = off.
        ttl_ms: u64 => 0..=DAY_MS,
    }
}

section! {
    /// Exclusive session leases (`[resilience.session_leases]`).
    SessionLeases / SessionLeasesPatch / SessionLeasesEffective {
        ttl_ms: u64 => 1000..=DAY_MS,
    }
}

section! {
    /// Streaming behaviour (`[resilience.stream]`).
    Stream / StreamPatch / StreamEffective {
        /// Streaming clients get 200 + keep-alives when routing takes longer than this.
        early_keepalive_after_ms: u64 => 0..=WAIT_BUDGET_MAX_MS,
        heartbeat_interval_ms: u64 => 1000..=WAIT_BUDGET_MAX_MS,
        throughput_watchdog: ThroughputWatchdog => ANY,
    }
}

section! {
    /// The throughput watchdog (`[resilience.stream.throughput_watchdog]`).
    ThroughputWatchdog / ThroughputWatchdogPatch / ThroughputWatchdogEffective {
        enabled: bool => ANY,
        warmup_ms: u64 => 0..=HOUR_MS,
        window_ms: u64 => 1000..=HOUR_MS,
        min_useful_bytes_per_second: u64 => 0..=1_000_000_000,
        min_useful_bytes: u64 => 0..=1_000_000_000_000,
    }
}
