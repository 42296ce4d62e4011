//! The parameters a connection actor runs with.
//!
//! The settings tree hands each policy its own parameter types; a connection actor also needs
//! its connection's `disable_cooling` and the provider breaker's reset timeout (the lockout
//! escalation window), gathered here once per connection.

use switchyard_shared::Millis;
use switchyard_shared::config::ConnectionConfig;
use switchyard_shared::cooldown::CooldownParams;
use switchyard_shared::lockout::LockoutSettings;
use switchyard_shared::outcome::ProviderCategory;
use switchyard_shared::settings::ResilienceSettings;

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
            cooldown: settings.cooldown_params(category, connection.disable_cooling),
            lockout: settings.lockout(),
            lockout_reset_after_ms: settings.breaker_profile(category).reset_timeout_ms,
        }
    }
}
