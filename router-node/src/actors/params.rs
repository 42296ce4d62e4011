//! Conversions from the settings tree to the pure policies' own parameter types.
//!
//! The policy modules in `switchyard-shared` take plain numbers and know nothing about settings
//! layers; the settings module flattens its tree per provider category. Both types live in
//! `shared`, so the orphan rule rules out `From` impls here: these small functions are the one
//! place where the two vocabularies meet, which keeps a renamed field a compile error in one
//! spot.

use switchyard_shared::Millis;
use switchyard_shared::breaker::{BreakerProfile, DEFAULT_HALF_OPEN_REQUESTS};
use switchyard_shared::config::ConnectionConfig;
use switchyard_shared::cooldown::CooldownParams;
use switchyard_shared::lockout::LockoutSettings;
use switchyard_shared::outcome::ProviderCategory;
use switchyard_shared::settings::{
    BreakerParams, ConnectionCooldownParams, ModelLockout, ResilienceSettings,
};

/// The cooldown policy's parameters: the category's numbers plus the connection's own
/// `disable_cooling`, which the settings tree does not know about.
pub fn cooldown_params(params: &ConnectionCooldownParams, disable_cooling: bool) -> CooldownParams {
    CooldownParams {
        base_cooldown_ms: params.base_cooldown_ms,
        max_backoff_steps: params.max_backoff_steps,
        use_upstream_retry_hints: params.use_upstream_retry_hints,
        max_cooldown_ms: params.max_cooldown_ms,
        expired_retry_max: params.expired_retry_max,
        request_rejected_ban_streak: params.request_rejected_ban_streak,
        disable_cooling,
        stream_stall_cooldown: params.stream_stall_cooldown,
    }
}

/// The breaker profile of a category. The settings contract has no probe budget, so a
/// HALF_OPEN breaker admits the default single probe.
pub fn breaker_profile(params: &BreakerParams) -> BreakerProfile {
    BreakerProfile {
        failure_threshold: params.failure_threshold,
        degradation_threshold: params.degradation_threshold,
        reset_timeout_ms: params.reset_timeout_ms,
        max_backoff_multiplier: params.max_backoff_multiplier,
        backoff_escalation_count: params.backoff_escalation_count,
        half_open_requests: DEFAULT_HALF_OPEN_REQUESTS,
    }
}

/// The lockout policy's settings from `[resilience.model_lockout]`.
pub fn lockout_settings(section: &ModelLockout) -> LockoutSettings {
    LockoutSettings {
        enabled: section.enabled,
        error_codes: section.error_codes.clone(),
        base_cooldown_ms: section.base_cooldown_ms,
        max_cooldown_ms: section.max_cooldown_ms,
        max_backoff_steps: section.max_backoff_steps,
        use_exponential_backoff: section.use_exponential_backoff,
    }
}

/// Everything a connection actor needs besides its handle. The breaker actor keeps one per
/// provider so it can (re)start children without the settings tree.
#[derive(Debug, Clone)]
pub struct ConnActorParams {
    pub cooldown: CooldownParams,
    pub lockout: LockoutSettings,
    /// The provider breaker's reset timeout: the lockout escalation window used when an
    /// observation does not bring its own (`LockFailure::reset_after_ms == 0`).
    pub lockout_reset_after_ms: Millis,
}

impl ConnActorParams {
    /// The parameters of `connection` on a provider of `category`.
    pub fn new(
        settings: &ResilienceSettings,
        category: ProviderCategory,
        connection: &ConnectionConfig,
    ) -> Self {
        Self {
            cooldown: cooldown_params(
                &settings.connection_cooldown_params(category),
                connection.disable_cooling,
            ),
            lockout: lockout_settings(&settings.model_lockout),
            lockout_reset_after_ms: settings.breaker_params(category).reset_timeout_ms,
        }
    }
}
