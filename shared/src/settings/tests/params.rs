//! The policy modules' parameter types, built from the settings.

use crate::admission::execution_budget_ms;
use crate::config::ConnectionConfig;
use crate::outcome::ProviderCategory::{Apikey, Local, Oauth};
use crate::settings::{BreakerProfile, ResilienceSettings, queue_enabled};

#[test]
fn breaker_profiles_resolve_the_degradation_band() {
    let mut settings = ResilienceSettings::default();
    let oauth = settings.breaker_profile(Oauth);
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
    assert_eq!(settings.breaker_profile(Local).degradation_threshold, 1);

    settings.provider_breaker.local = BreakerProfile {
        failure_threshold: 10,
        degradation_threshold: 0,
        ..settings.provider_breaker.local.clone()
    };
    assert_eq!(settings.breaker_profile(Local).degradation_threshold, 6);
    settings.provider_breaker.local.failure_threshold = 1;
    assert_eq!(settings.breaker_profile(Local).degradation_threshold, 0);
}

#[test]
fn cooldown_params_per_category() {
    let settings = ResilienceSettings::default();
    let oauth = settings.cooldown_params(Oauth, false);
    assert_eq!((oauth.base_cooldown_ms, oauth.max_backoff_steps), (5000, 8));
    assert!(!oauth.use_upstream_retry_hints);
    let apikey = settings.cooldown_params(Apikey, false);
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
    assert_eq!(settings.cooldown_params(Local, false), apikey);

    let provider = settings.provider_cooldown();
    assert!(!provider.enabled);
    let window = provider.window(Oauth);
    assert_eq!(
        (
            window.failure_threshold,
            window.failure_window_ms,
            window.cooldown_ms
        ),
        (10, 900_000, 300_000)
    );
    assert_eq!(provider.window(Apikey).failure_threshold, 15);
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
    assert_eq!(
        execution_budget_ms(queue.execution_max_wait_ms, 30_000),
        600_000
    );
    assert_eq!(
        execution_budget_ms(queue.execution_max_wait_ms, 900_000),
        900_000
    );
}

#[test]
fn defaults_build_the_policy_modules_own_defaults() {
    use crate::admission::{
        ComboWaitSettings, ConcurrencySettings, QueueSettings, WaitForCooldownSettings,
    };
    use crate::cooldown::CooldownParams;
    use crate::lockout::LockoutSettings;

    let settings = ResilienceSettings::default();
    for category in [Oauth, Apikey, Local] {
        assert_eq!(
            settings.breaker_profile(category),
            crate::breaker::BreakerProfile::for_category(category)
                .normalized()
                .0,
            "{category:?}"
        );
    }
    for category in [Oauth, Apikey] {
        assert_eq!(
            settings.cooldown_params(category, false),
            CooldownParams::for_category(category),
            "{category:?}"
        );
    }
    assert!(settings.cooldown_params(Apikey, true).disable_cooling);
    assert_eq!(settings.lockout(), LockoutSettings::default());
    assert_eq!(settings.queue_defaults(), QueueSettings::default());
    assert_eq!(settings.concurrency(), ConcurrencySettings::default());
    assert_eq!(settings.combo_wait(), ComboWaitSettings::default());
    assert_eq!(
        settings.wait_for_cooldown(),
        WaitForCooldownSettings::default()
    );

    let provider = settings.provider_cooldown();
    let reference = crate::provider_cooldown::ProviderCooldownParams::default();
    assert_eq!(
        (provider.oauth, provider.apikey),
        (reference.oauth, reference.apikey)
    );
    assert_eq!(
        provider.window(Local),
        provider.window(Apikey),
        "the contract has no local window"
    );
}

#[test]
fn policy_types_follow_the_settings() {
    let mut settings = ResilienceSettings::default();
    settings.stream_stall_cooldown.enabled = true;
    settings.model_lockout.enabled = true;
    settings.model_lockout.error_codes = vec![429];
    settings.concurrency.semaphore_max_queue = 3;
    settings.combo_cooldown_wait.max_attempts = 2;
    settings.wait_for_cooldown.budget_ms = 1000;
    settings.provider_cooldown.apikey.cooldown_ms = 7000;

    assert!(settings.cooldown_params(Oauth, false).stream_stall_cooldown);
    assert!(settings.lockout().applies_to(429));
    assert!(!settings.lockout().applies_to(503));
    assert_eq!(settings.concurrency().semaphore_max_queue, 3);
    assert_eq!(settings.combo_wait().max_attempts, 2);
    assert_eq!(settings.wait_for_cooldown().budget_ms, 1000);
    assert_eq!(settings.provider_cooldown().window(Local).cooldown_ms, 7000);
}
