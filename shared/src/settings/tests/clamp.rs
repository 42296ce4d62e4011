//! Startup layers are clamped into bounds with a warning, never rejected.

use super::{assert_warning, built, persisted};
use crate::settings::{EnvLayer, Persisted, Source};

fn from_file(resilience: &str) -> crate::settings::BuiltSettings {
    built(resilience, &EnvLayer::default(), &Persisted::default())
}

#[test]
fn queue_waits_and_depth_are_clamped() {
    let result = from_file(
        "[resilience.request_queue]\nmax_wait_ms = 100000000\nexecution_max_wait_ms = 0\n\
         max_queue_depth = 100001\n",
    );
    let queue = result.values().request_queue;
    assert_eq!(queue.max_wait_ms, 86_400_000);
    assert_eq!(queue.execution_max_wait_ms, 1);
    assert_eq!(queue.max_queue_depth, 100_000);
    assert_warning(
        &result,
        "resilience.request_queue.max_wait_ms",
        "out of range 1..=86400000; clamped to 86400000",
    );
    assert_warning(
        &result,
        "resilience.request_queue.execution_max_wait_ms",
        "clamped to 1",
    );
    assert_warning(
        &result,
        "resilience.request_queue.max_queue_depth",
        "clamped to 100000",
    );
    assert_eq!(
        result.effective.request_queue.max_wait_ms.source,
        Source::File,
        "a clamped value keeps its source"
    );
}

#[test]
fn degradation_threshold_is_clamped_below_the_failure_threshold() {
    let result = from_file(
        "[resilience.provider_breaker.apikey]\nfailure_threshold = 5\ndegradation_threshold = 9\n\
         [resilience.provider_breaker.oauth]\nfailure_threshold = 1\ndegradation_threshold = 1\n",
    );
    let breakers = result.values().provider_breaker;
    assert_eq!(breakers.apikey.degradation_threshold, 4);
    assert_eq!(breakers.oauth.degradation_threshold, 0);
    assert_warning(
        &result,
        "provider_breaker.apikey.degradation_threshold",
        "at most failure_threshold - 1 = 4",
    );
    assert_warning(
        &result,
        "provider_breaker.oauth.degradation_threshold",
        "= 0",
    );
}

#[test]
fn degradation_is_checked_across_layers() {
    // The file lowers the threshold, a persisted patch raised the band earlier: still clamped.
    let result = built(
        "[resilience.provider_breaker.oauth]\nfailure_threshold = 3\n",
        &EnvLayer::default(),
        &persisted(r#"{"provider_breaker":{"oauth":{"degradation_threshold":6}}}"#),
    );
    assert_eq!(
        result.values().provider_breaker.oauth.degradation_threshold,
        2
    );
}

#[test]
fn model_lockout_bounds() {
    let result = from_file(
        "[resilience.model_lockout]\nbase_cooldown_ms = 1000\nmax_cooldown_ms = 4000000\n\
         max_backoff_steps = 25\nerror_codes = [99, 429, 600]\n",
    );
    let lockout = result.values().model_lockout;
    assert_eq!(lockout.base_cooldown_ms, 5000);
    assert_eq!(lockout.max_cooldown_ms, 3_600_000);
    assert_eq!(lockout.max_backoff_steps, 20);
    assert_eq!(lockout.error_codes, [429]);
    assert_warning(&result, "resilience.model_lockout.error_codes[0]", "99");
    assert_warning(&result, "resilience.model_lockout.error_codes[2]", "600");

    let result = from_file(
        "[resilience.model_lockout]\nbase_cooldown_ms = 600000\nmax_cooldown_ms = 60000\n",
    );
    assert_eq!(result.values().model_lockout.max_cooldown_ms, 600_000);
    assert_warning(
        &result,
        "model_lockout.max_cooldown_ms",
        "below base_cooldown_ms",
    );
}

#[test]
fn wait_budgets_cover_the_single_wait_and_stay_under_five_minutes() {
    let result = from_file(
        "[resilience.wait_for_cooldown]\nmax_retry_wait_ms = 120000\nbudget_ms = 60000\n\
         [resilience.combo_cooldown_wait]\nmax_wait_ms = 90000\nbudget_ms = 900000\n",
    );
    let values = result.values();
    assert_eq!(values.wait_for_cooldown.budget_ms, 120_000);
    assert_eq!(values.combo_cooldown_wait.budget_ms, 300_000);
    assert_warning(&result, "wait_for_cooldown.budget_ms", "raised to 120000");
    assert_warning(
        &result,
        "resilience.combo_cooldown_wait.budget_ms",
        "clamped to 300000",
    );
}

#[test]
fn provider_cooldown_maximum_covers_the_minimum() {
    let result = from_file(
        "[resilience.provider_cooldown]\nmin_retry_cooldown_ms = 10000\nmax_retry_cooldown_ms = 5000\n",
    );
    assert_eq!(
        result.values().provider_cooldown.max_retry_cooldown_ms,
        10_000
    );
    assert_warning(
        &result,
        "provider_cooldown.max_retry_cooldown_ms",
        "min_retry_cooldown_ms",
    );
}

#[test]
fn out_of_range_file_values_still_load() {
    let config = super::config_with(
        "[resilience.request_queue]\nmax_wait_ms = 0\n[resilience.provider_breaker.local]\n\
         failure_threshold = 0\n",
    );
    let result = crate::settings::build(&config, &EnvLayer::default(), &Persisted::default());
    assert_eq!(result.values().provider_breaker.local.failure_threshold, 1);
    assert_eq!(result.warnings.len(), 2, "{:?}", result.warnings);
}

#[test]
fn connection_overrides_are_clamped_with_a_warning() {
    let mut config = super::config_with("");
    config.connections[0].rate_limit.max_queue_depth = 500_000;
    config.connections[0].rate_limit.max_wait_ms = 100_000_000;
    let result = crate::settings::build(&config, &EnvLayer::default(), &Persisted::default());
    assert_warning(
        &result,
        "connections.c.rate_limit.max_queue_depth",
        "clamped to 100000",
    );
    assert_warning(
        &result,
        "connections.c.rate_limit.max_wait_ms",
        "clamped to 86400000",
    );
    let queue = crate::settings::effective_queue(&result.values(), &config.connections[0]);
    assert_eq!(
        (queue.max_queue_depth, queue.max_wait_ms),
        (100_000, 86_400_000)
    );
}

#[test]
fn persisted_values_written_under_older_bounds_are_clamped_too() {
    let stale: Persisted =
        serde_json::from_str(r#"{"request_queue":{"concurrent_requests":0}}"#).unwrap();
    let result = built("", &EnvLayer::default(), &stale);
    assert_eq!(result.values().request_queue.concurrent_requests, 1);
    assert_warning(
        &result,
        "persisted.request_queue.concurrent_requests",
        "clamped to 1",
    );
}
