//! Built-in defaults: exactly the values written in the config contract's `[resilience]` sections
//! (which are in turn the resilience specification's defaults). The lowest precedence layer.

use std::collections::BTreeMap;

use super::model::*;

impl Default for ResilienceSettings {
    fn default() -> Self {
        Self {
            provider_breaker: ProviderBreaker::default(),
            provider_cooldown: ProviderCooldown::default(),
            connection_cooldown: ConnectionCooldown::default(),
            stream_stall_cooldown: StreamStallCooldown { enabled: false },
            model_lockout: ModelLockout::default(),
            request_queue: RequestQueue::default(),
            concurrency: Concurrency::default(),
            wait_for_cooldown: WaitForCooldown::default(),
            combo_cooldown_wait: ComboCooldownWait::default(),
            session_affinity: SessionAffinity { ttl_ms: 0 },
            session_leases: SessionLeases { ttl_ms: 120_000 },
            stream: Stream::default(),
            provider_error_rules: BTreeMap::new(),
        }
    }
}

impl Default for ProviderBreaker {
    fn default() -> Self {
        Self {
            oauth: BreakerProfile {
                failure_threshold: 8,
                degradation_threshold: 5,
                reset_timeout_ms: 60_000,
                max_backoff_multiplier: 8,
                backoff_escalation_count: 2,
            },
            apikey: BreakerProfile {
                failure_threshold: 12,
                degradation_threshold: 7,
                reset_timeout_ms: 30_000,
                max_backoff_multiplier: 4,
                backoff_escalation_count: 3,
            },
            local: BreakerProfile {
                failure_threshold: 2,
                degradation_threshold: 0,
                reset_timeout_ms: 15_000,
                max_backoff_multiplier: 4,
                backoff_escalation_count: 3,
            },
        }
    }
}

impl Default for ProviderCooldown {
    fn default() -> Self {
        Self {
            enabled: false,
            oauth: ProviderCooldownProfile {
                failure_threshold: 10,
                failure_window_ms: 900_000,
                cooldown_ms: 300_000,
            },
            apikey: ProviderCooldownProfile {
                failure_threshold: 15,
                failure_window_ms: 1_800_000,
                cooldown_ms: 600_000,
            },
            min_retry_cooldown_ms: 5000,
            max_retry_cooldown_ms: 300_000,
        }
    }
}

impl Default for ConnectionCooldown {
    fn default() -> Self {
        Self {
            oauth: ConnectionCooldownProfile {
                base_cooldown_ms: 5000,
                max_backoff_steps: 8,
                use_upstream_retry_hints: false,
            },
            apikey: ConnectionCooldownProfile {
                base_cooldown_ms: 3000,
                max_backoff_steps: 5,
                use_upstream_retry_hints: true,
            },
            max_cooldown_ms: 1_800_000,
            expired_retry_max: 3,
            request_rejected_ban_streak: 3,
        }
    }
}

impl Default for ModelLockout {
    fn default() -> Self {
        Self {
            enabled: false,
            error_codes: vec![403, 404, 429, 502, 503, 504],
            base_cooldown_ms: 120_000,
            max_cooldown_ms: 1_800_000,
            max_backoff_steps: 10,
            use_exponential_backoff: true,
        }
    }
}

impl Default for RequestQueue {
    fn default() -> Self {
        Self {
            auto_enable_apikey_providers: true,
            requests_per_minute: 60,
            min_time_between_requests_ms: 350,
            concurrent_requests: 6,
            max_wait_ms: 30_000,
            execution_max_wait_ms: 600_000,
            max_queue_depth: 0,
        }
    }
}

impl Default for Concurrency {
    fn default() -> Self {
        Self {
            semaphore_queue_timeout_ms: 30_000,
            semaphore_max_queue: 20,
            quota_share_fail_open: true,
        }
    }
}

impl Default for WaitForCooldown {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 5,
            max_retry_wait_ms: 90_000,
            budget_ms: 300_000,
        }
    }
}

impl Default for ComboCooldownWait {
    fn default() -> Self {
        Self {
            enabled: true,
            max_wait_ms: 90_000,
            max_attempts: 5,
            budget_ms: 300_000,
        }
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
