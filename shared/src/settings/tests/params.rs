//! The plain parameter structs handed to the policy modules.

use crate::config::ConnectionConfig;
use crate::outcome::ProviderCategory::{Apikey, Local, Oauth};
use crate::settings::{BreakerProfile, ResilienceSettings, queue_enabled};

#[test]
fn breaker_params_resolve_the_degradation_band() {
    let mut settings = ResilienceSettings::default();
    let oauth = settings.breaker_params(Oauth);
    assert_eq!(
        (oauth.failure_threshold, oauth.degradation_threshold),
        (8, 5)
    );
    assert_eq!(oauth.reset_timeout_ms, 60_000);
    assert_eq!(
        (oauth.max_backoff_multiplier, oauth.backoff_escalation_count),
        (8, 2)
    );
    // local: 0 = derived = ceil(60 % of 2) = 2, kept below the threshold → 1.
    assert_eq!(settings.breaker_params(Local).degradation_threshold, 1);

    settings.provider_breaker.local = BreakerProfile {
        failure_threshold: 10,
        degradation_threshold: 0,
        ..settings.provider_breaker.local.clone()
    };
    assert_eq!(settings.breaker_params(Local).degradation_threshold, 6);
    settings.provider_breaker.local.failure_threshold = 1;
    assert_eq!(settings.breaker_params(Local).degradation_threshold, 0);
}

#[test]
fn cooldown_params_per_category() {
    let settings = ResilienceSettings::default();
    let oauth = settings.connection_cooldown_params(Oauth);
    assert_eq!((oauth.base_cooldown_ms, oauth.max_backoff_steps), (5000, 8));
    assert!(!oauth.use_upstream_retry_hints);
    let apikey = settings.connection_cooldown_params(Apikey);
    assert_eq!(
        (apikey.base_cooldown_ms, apikey.max_backoff_steps),
        (3000, 5)
    );
    assert!(apikey.use_upstream_retry_hints);
    assert_eq!(apikey.max_cooldown_ms, 1_800_000);
    assert_eq!(
        (apikey.expired_retry_max, apikey.request_rejected_ban_streak),
        (3, 3)
    );
    assert!(!apikey.stream_stall_cooldown);
    assert_eq!(settings.connection_cooldown_params(Local), apikey);

    let window = settings.provider_cooldown_params(Oauth);
    assert!(!window.enabled);
    assert_eq!(
        (
            window.failure_threshold,
            window.failure_window_ms,
            window.cooldown_ms
        ),
        (10, 900_000, 300_000)
    );
    assert_eq!(
        settings.provider_cooldown_params(Apikey).failure_threshold,
        15
    );
}

#[test]
fn queue_applies_to_apikey_connections_by_default_and_to_opted_in_ones() {
    let mut settings = ResilienceSettings::default();
    let mut connection = ConnectionConfig::default();
    assert!(queue_enabled(&settings, &connection, Apikey));
    assert!(!queue_enabled(&settings, &connection, Oauth));
    connection.rate_limit_protection = true;
    assert!(queue_enabled(&settings, &connection, Oauth));
    settings.request_queue.auto_enable_apikey_providers = false;
    connection.rate_limit_protection = false;
    assert!(!queue_enabled(&settings, &connection, Apikey));
}

#[test]
fn execution_budget_is_raised_to_the_headers_timeout() {
    let queue = ResilienceSettings::default().queue_defaults();
    assert_eq!(queue.execution_budget_ms(30_000), 600_000);
    assert_eq!(queue.execution_budget_ms(900_000), 900_000);
}
