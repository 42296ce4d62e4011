//! The policy modules' own parameter types, read off the effective settings.
//!
//! Policy code (breaker, cooldown, lockout, admission, …) does not know about layers, sources or
//! config files: each module takes its own parameter type. The methods here build those types
//! from a [`ResilienceSettings`] tree, per provider category where the contract has profiles,
//! and resolve derived values (the breaker's degradation band), so there is exactly one
//! parameter type per policy:
//!
//! | settings section | policy type | built by |
//! |---|---|---|
//! | `provider_breaker.<category>` | [`breaker::BreakerProfile`] | [`ResilienceSettings::breaker_profile`] |
//! | `provider_cooldown` | [`provider_cooldown::ProviderCooldownParams`] | [`ResilienceSettings::provider_cooldown`] |
//! | `connection_cooldown`, `stream_stall_cooldown` | [`CooldownParams`] | [`ResilienceSettings::cooldown_params`] |
//! | `model_lockout` | [`LockoutSettings`] | [`ResilienceSettings::lockout`] |
//! | `request_queue` (+ `[connections.rate_limit]`) | [`QueueSettings`] | [`ResilienceSettings::queue_defaults`], [`effective_queue`] |
//! | `concurrency` | [`ConcurrencySettings`] | [`ResilienceSettings::concurrency`] |
//! | `combo_cooldown_wait` | [`ComboWaitSettings`] | [`ResilienceSettings::combo_wait`] |
//! | `wait_for_cooldown` | [`WaitForCooldownSettings`] | [`ResilienceSettings::wait_for_cooldown`] |
//!
//! Where a section has exactly the fields of its policy type, the two convert with `From` both
//! ways; the built-in defaults go the other way, from the policy types' own defaults, so each
//! default number is written once, in the policy module that uses it.
//!
//! The contract defines no `local` profile for either cooldown, so the `local` category uses
//! the `apikey` numbers there. Sections without a policy type ([`Stream`],
//! [`ThroughputWatchdog`], [`SessionAffinity`], [`SessionLeases`]) are read as they are.

use std::ops::RangeInclusive;

use super::layer::{Bounded, Mode, join};
use super::model::*;
use super::{FieldError, ResilienceSettings};
use crate::admission::queue::{
    CONCURRENT_REQUESTS_RANGE, MIN_TIME_BETWEEN_REQUESTS_RANGE_MS, QUEUE_DEPTH_RANGE,
    REQUESTS_PER_MINUTE_RANGE, WAIT_RANGE_MS,
};
use crate::admission::{
    self, ComboWaitSettings, ConcurrencySettings, QueueSettings, WaitForCooldownSettings,
};
use crate::breaker::{self, DEFAULT_HALF_OPEN_REQUESTS};
use crate::config::ConnectionConfig;
use crate::cooldown::CooldownParams;
use crate::lockout::LockoutSettings;
use crate::outcome::ProviderCategory;
use crate::provider_cooldown::{self, WindowParams};

/// `From` in both directions between a settings section and the policy type with exactly the
/// same fields: [`ResilienceSettings`] reads the policy types through it, and the built-in
/// defaults are the policy types' defaults through it. Destructuring both sides makes a field
/// added to either one a compile error here rather than a silently dropped setting.
macro_rules! same_fields {
    ($section:ident <=> $policy:ident { $($field:ident),* $(,)? }) => {
        impl From<$section> for $policy {
            fn from(section: $section) -> Self {
                let $section { $($field),* } = section;
                Self { $($field),* }
            }
        }

        impl From<$policy> for $section {
            fn from(policy: $policy) -> Self {
                let $policy { $($field),* } = policy;
                Self { $($field),* }
            }
        }
    };
}

same_fields!(ModelLockout <=> LockoutSettings {
    enabled,
    error_codes,
    base_cooldown_ms,
    max_cooldown_ms,
    max_backoff_steps,
    use_exponential_backoff,
});
same_fields!(Concurrency <=> ConcurrencySettings {
    semaphore_queue_timeout_ms,
    semaphore_max_queue,
    quota_share_fail_open,
});
same_fields!(ComboCooldownWait <=> ComboWaitSettings {
    enabled,
    max_wait_ms,
    max_attempts,
    budget_ms,
});
same_fields!(WaitForCooldown <=> WaitForCooldownSettings {
    enabled,
    max_retries,
    max_retry_wait_ms,
    budget_ms,
});
same_fields!(ProviderCooldownProfile <=> WindowParams {
    failure_threshold,
    failure_window_ms,
    cooldown_ms,
});

impl ResilienceSettings {
    /// The breaker profile of a provider category, with the degradation band resolved as the
    /// breaker resolves it ([`breaker::BreakerProfile::degradation_at`]): never 0 unless
    /// `failure_threshold` is 1, in which case there is no DEGRADED band; always
    /// ≤ `failure_threshold − 1`. The contract has no probe budget, so `half_open_requests` is
    /// [`DEFAULT_HALF_OPEN_REQUESTS`].
    pub fn breaker_profile(&self, category: ProviderCategory) -> breaker::BreakerProfile {
        let BreakerProfile {
            failure_threshold,
            degradation_threshold,
            reset_timeout_ms,
            max_backoff_multiplier,
            backoff_escalation_count,
        } = *match category {
            ProviderCategory::Oauth => &self.provider_breaker.oauth,
            ProviderCategory::Apikey => &self.provider_breaker.apikey,
            ProviderCategory::Local => &self.provider_breaker.local,
        };
        let mut profile = breaker::BreakerProfile {
            failure_threshold: failure_threshold.max(1),
            degradation_threshold,
            reset_timeout_ms,
            max_backoff_multiplier,
            backoff_escalation_count,
            half_open_requests: DEFAULT_HALF_OPEN_REQUESTS,
        };
        profile.degradation_threshold = if profile.failure_threshold > 1 {
            profile.degradation_at()
        } else {
            0
        };
        profile
    }

    /// The windowed provider cooldown (docs/policy.md, `provider_cooldown`) for every category; `local` gets the `apikey`
    /// window.
    pub fn provider_cooldown(&self) -> provider_cooldown::ProviderCooldownParams {
        let ProviderCooldown {
            enabled,
            oauth,
            apikey,
            min_retry_cooldown_ms,
            max_retry_cooldown_ms,
        } = &self.provider_cooldown;
        provider_cooldown::ProviderCooldownParams {
            enabled: *enabled,
            oauth: oauth.clone().into(),
            apikey: apikey.clone().into(),
            local: apikey.clone().into(),
            min_retry_cooldown_ms: *min_retry_cooldown_ms,
            max_retry_cooldown_ms: *max_retry_cooldown_ms,
        }
    }

    /// The connection cooldown parameters of a provider category (`local` uses the `apikey`
    /// profile), for a connection whose `disable_cooling` is as given.
    pub fn cooldown_params(
        &self,
        category: ProviderCategory,
        disable_cooling: bool,
    ) -> CooldownParams {
        let cooldown = &self.connection_cooldown;
        let profile = match category {
            ProviderCategory::Oauth => &cooldown.oauth,
            ProviderCategory::Apikey | ProviderCategory::Local => &cooldown.apikey,
        };
        CooldownParams {
            base_cooldown_ms: profile.base_cooldown_ms,
            max_backoff_steps: profile.max_backoff_steps,
            use_upstream_retry_hints: profile.use_upstream_retry_hints,
            max_cooldown_ms: cooldown.max_cooldown_ms,
            expired_retry_max: cooldown.expired_retry_max,
            request_rejected_ban_streak: cooldown.request_rejected_ban_streak,
            disable_cooling,
            stream_stall_cooldown: self.stream_stall_cooldown.enabled,
        }
    }

    /// The model lockout settings.
    pub fn lockout(&self) -> LockoutSettings {
        self.model_lockout.clone().into()
    }

    /// The global queue numbers, before per-connection overrides (see [`effective_queue`]).
    pub fn queue_defaults(&self) -> QueueSettings {
        let RequestQueue {
            auto_enable_apikey_providers: _,
            requests_per_minute,
            min_time_between_requests_ms,
            concurrent_requests,
            max_wait_ms,
            execution_max_wait_ms,
            max_queue_depth,
        } = self.request_queue;
        QueueSettings {
            requests_per_minute,
            min_time_between_requests_ms,
            concurrent_requests,
            max_wait_ms,
            execution_max_wait_ms,
            max_queue_depth,
        }
    }

    /// The concurrency-gate queueing settings.
    pub fn concurrency(&self) -> ConcurrencySettings {
        self.concurrency.clone().into()
    }

    /// The combo cooldown-wait settings.
    pub fn combo_wait(&self) -> ComboWaitSettings {
        self.combo_cooldown_wait.clone().into()
    }

    /// The direct-request wait-for-cooldown settings.
    pub fn wait_for_cooldown(&self) -> WaitForCooldownSettings {
        self.wait_for_cooldown.clone().into()
    }
}

/// The queue numbers of one connection: its `[connections.rate_limit]` overrides (0 = inherit)
/// on top of the global settings, clamped into the same bounds as the global values
/// ([`QueueSettings::overridden_by`]).
pub fn effective_queue(
    settings: &ResilienceSettings,
    connection: &ConnectionConfig,
) -> QueueSettings {
    settings
        .queue_defaults()
        .overridden_by(&queue_overrides(connection))
}

/// Whether the request queue throttles this connection: explicitly opted in with
/// `rate_limit_protection`, or an apikey connection while `auto_enable_apikey_providers` is on.
/// (`rate_limit_protection = false` never opts a connection out.) `RATE_LIMIT_AUTO_ENABLE` is
/// already folded into the settings (see [`mod@super::env`]).
pub fn queue_enabled(
    settings: &ResilienceSettings,
    connection: &ConnectionConfig,
    category: ProviderCategory,
) -> bool {
    admission::queue_enabled(
        category,
        connection.rate_limit_protection,
        settings.request_queue.auto_enable_apikey_providers,
        None,
    )
}

/// A connection's `[connections.rate_limit]` as a queue override (0 = inherit).
fn queue_overrides(connection: &ConnectionConfig) -> QueueSettings {
    let limits = &connection.rate_limit;
    QueueSettings {
        requests_per_minute: limits.requests_per_minute,
        min_time_between_requests_ms: limits.min_time_between_requests_ms,
        concurrent_requests: limits.concurrent_requests,
        max_wait_ms: limits.max_wait_ms,
        execution_max_wait_ms: limits.execution_max_wait_ms,
        max_queue_depth: limits.max_queue_depth,
    }
}

/// Pushes a warning for every override of `connection` that is out of bounds (the bounds
/// [`QueueSettings::clamped`] enforces).
pub(super) fn override_warnings(connection: &ConnectionConfig, warnings: &mut Vec<FieldError>) {
    let limits = queue_overrides(connection);
    let base = format!("connections.{}.rate_limit", connection.id);
    let path = |name: &str| join(&base, name);
    warn_out_of_bounds(
        limits.requests_per_minute,
        &REQUESTS_PER_MINUTE_RANGE,
        &path("requests_per_minute"),
        warnings,
    );
    warn_out_of_bounds(
        limits.concurrent_requests,
        &CONCURRENT_REQUESTS_RANGE,
        &path("concurrent_requests"),
        warnings,
    );
    warn_out_of_bounds(
        limits.max_queue_depth,
        &QUEUE_DEPTH_RANGE,
        &path("max_queue_depth"),
        warnings,
    );
    warn_out_of_bounds(
        limits.min_time_between_requests_ms,
        &MIN_TIME_BETWEEN_REQUESTS_RANGE_MS,
        &path("min_time_between_requests_ms"),
        warnings,
    );
    warn_out_of_bounds(
        limits.max_wait_ms,
        &WAIT_RANGE_MS,
        &path("max_wait_ms"),
        warnings,
    );
    warn_out_of_bounds(
        limits.execution_max_wait_ms,
        &WAIT_RANGE_MS,
        &path("execution_max_wait_ms"),
        warnings,
    );
}

/// Warns when an override is set (non-zero) and outside `bounds`.
fn warn_out_of_bounds<T>(
    value: T,
    bounds: &RangeInclusive<T>,
    path: &str,
    warnings: &mut Vec<FieldError>,
) where
    T: Bounded<Bounds = RangeInclusive<T>> + Default + PartialEq,
{
    if value != T::default() {
        let mut value = value;
        value.bound(bounds, Mode::Clamp, path, warnings);
    }
}
