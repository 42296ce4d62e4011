//! Built-in defaults: the values written in the config contract's `[resilience]` sections
//! (which are in turn the resilience specification's defaults). The lowest precedence layer.
//!
//! Each number is written once. Where a policy module owns a setting, its own defaults are the
//! contract's (`BreakerProfile::for_category`, `CooldownParams::for_category`,
//! `ProviderCooldownParams::default`, `LockoutSettings::default`, the admission settings'
//! `Default`s) and are mapped into the settings tree here; only the sections no policy module
//! reads yet keep their numbers in this file. The contract test checks that the example config
//! restates exactly these values.

use std::collections::BTreeMap;

use super::model::*;
use crate::admission::{
    ComboWaitSettings, ConcurrencySettings, QueueSettings, WaitForCooldownSettings,
};
use crate::breaker;
use crate::cooldown::CooldownParams;
use crate::lockout::LockoutSettings;
use crate::outcome::ProviderCategory;
use crate::provider_cooldown::ProviderCooldownParams;

impl Default for ResilienceSettings {
    fn default() -> Self {
        Self {
            provider_breaker: ProviderBreaker::default(),
            provider_cooldown: ProviderCooldown::default(),
            connection_cooldown: ConnectionCooldown::default(),
            stream_stall_cooldown: StreamStallCooldown {
                enabled: CooldownParams::default().stream_stall_cooldown,
            },
            model_lockout: ModelLockout::default(),
            request_queue: RequestQueue::default(),
            concurrency: Concurrency::default(),
            wait_for_cooldown: WaitForCooldown::default(),
            combo_cooldown_wait: ComboCooldownWait::default(),
            session_affinity: SessionAffinity { ttl_ms: 0 },
            session_leases: SessionLeases { ttl_ms: 120_000 },
            stream: Stream::default(),
            stream_recovery: super::StreamRecovery::default(),
            provider_error_rules: BTreeMap::new(),
        }
    }
}

impl Default for ProviderBreaker {
    fn default() -> Self {
        Self {
            oauth: breaker_default(ProviderCategory::Oauth),
            apikey: breaker_default(ProviderCategory::Apikey),
            local: breaker_default(ProviderCategory::Local),
        }
    }
}

/// The category's profile as the breaker defines it (the contract has no probe budget).
fn breaker_default(category: ProviderCategory) -> BreakerProfile {
    let breaker::BreakerProfile {
        failure_threshold,
        degradation_threshold,
        reset_timeout_ms,
        max_backoff_multiplier,
        backoff_escalation_count,
        half_open_requests: _,
    } = breaker::BreakerProfile::for_category(category);
    BreakerProfile {
        failure_threshold,
        degradation_threshold,
        reset_timeout_ms,
        max_backoff_multiplier,
        backoff_escalation_count,
    }
}

impl Default for ProviderCooldown {
    /// The contract has no `local` window, so the policy's `local` default is not carried.
    fn default() -> Self {
        let ProviderCooldownParams {
            enabled,
            oauth,
            apikey,
            local: _,
            min_retry_cooldown_ms,
            max_retry_cooldown_ms,
        } = ProviderCooldownParams::default();
        Self {
            enabled,
            oauth: oauth.into(),
            apikey: apikey.into(),
            min_retry_cooldown_ms,
            max_retry_cooldown_ms,
        }
    }
}

impl Default for ConnectionCooldown {
    fn default() -> Self {
        let profile = |category| {
            let params = CooldownParams::for_category(category);
            ConnectionCooldownProfile {
                base_cooldown_ms: params.base_cooldown_ms,
                max_backoff_steps: params.max_backoff_steps,
                use_upstream_retry_hints: params.use_upstream_retry_hints,
            }
        };
        let shared = CooldownParams::default();
        Self {
            oauth: profile(ProviderCategory::Oauth),
            apikey: profile(ProviderCategory::Apikey),
            max_cooldown_ms: shared.max_cooldown_ms,
            expired_retry_max: shared.expired_retry_max,
            request_rejected_ban_streak: shared.request_rejected_ban_streak,
        }
    }
}

impl Default for ModelLockout {
    fn default() -> Self {
        LockoutSettings::default().into()
    }
}

impl Default for RequestQueue {
    fn default() -> Self {
        let QueueSettings {
            requests_per_minute,
            min_time_between_requests_ms,
            concurrent_requests,
            max_wait_ms,
            execution_max_wait_ms,
            max_queue_depth,
        } = QueueSettings::default();
        Self {
            auto_enable_apikey_providers: true,
            requests_per_minute,
            min_time_between_requests_ms,
            concurrent_requests,
            max_wait_ms,
            execution_max_wait_ms,
            max_queue_depth,
        }
    }
}

impl Default for Concurrency {
    fn default() -> Self {
        ConcurrencySettings::default().into()
    }
}

impl Default for WaitForCooldown {
    fn default() -> Self {
        WaitForCooldownSettings::default().into()
    }
}

impl Default for ComboCooldownWait {
    fn default() -> Self {
        ComboWaitSettings::default().into()
    }
}

impl Default for Stream {
    fn default() -> Self {
        Self {
            early_keepalive_after_ms: 2000,
            heartbeat_interval_ms: 15_000,
            throughput_watchdog: ThroughputWatchdog {
                enabled: false,
                warmup_ms: 30_000,
                window_ms: 30_000,
                min_useful_bytes_per_second: 1,
                min_useful_bytes: 1,
            },
        }
    }
}
