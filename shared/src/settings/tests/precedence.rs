//! default < file < env < persisted < per-connection override, with the two documented
//! exceptions for the environment.

use super::{built, config_with, env, persisted};
use crate::settings::{EnvLayer, Persisted, ResilienceSettings, Source, effective_queue};

#[test]
fn defaults_without_any_layer() {
    let result = built("", &EnvLayer::default(), &Persisted::default());
    assert!(result.warnings.is_empty());
    assert_eq!(result.values(), ResilienceSettings::default());
    assert_eq!(
        result.effective.request_queue.max_wait_ms.source,
        Source::Default
    );
}

#[test]
fn file_beats_default() {
    let result = built(
        "[resilience.request_queue]\nmax_wait_ms = 45000\n",
        &EnvLayer::default(),
        &Persisted::default(),
    );
    let value = &result.effective.request_queue.max_wait_ms;
    assert_eq!((value.value, value.source), (45_000, Source::File));
    let sibling = &result.effective.request_queue.execution_max_wait_ms;
    assert_eq!(
        sibling.source,
        Source::Default,
        "only keys the file sets are from the file"
    );
}

#[test]
fn env_beats_file() {
    let result = built(
        "[resilience.request_queue]\nmax_wait_ms = 45000\n",
        &env(&[("RATE_LIMIT_MAX_WAIT_MS", "5000")]),
        &Persisted::default(),
    );
    let value = &result.effective.request_queue.max_wait_ms;
    assert_eq!((value.value, value.source), (5000, Source::Env));
}

#[test]
fn persisted_beats_the_queue_budget_env_variables() {
    let result = built(
        "",
        &env(&[
            ("RATE_LIMIT_MAX_WAIT_MS", "5000"),
            ("RATE_LIMIT_EXECUTION_MAX_WAIT_MS", "6000"),
            ("RATE_LIMIT_MAX_QUEUE_DEPTH", "7"),
        ]),
        &persisted(r#"{"request_queue":{"max_wait_ms":9000,"max_queue_depth":3}}"#),
    );
    let queue = &result.effective.request_queue;
    assert_eq!(
        (queue.max_wait_ms.value, queue.max_wait_ms.source),
        (9000, Source::Persisted)
    );
    assert_eq!(
        (queue.max_queue_depth.value, queue.max_queue_depth.source),
        (3, Source::Persisted)
    );
    let execution = &queue.execution_max_wait_ms;
    assert_eq!((execution.value, execution.source), (6000, Source::Env));
}

#[test]
fn auto_enable_env_beats_persisted() {
    let result = built(
        "",
        &env(&[("RATE_LIMIT_AUTO_ENABLE", "false")]),
        &persisted(r#"{"request_queue":{"auto_enable_apikey_providers":true}}"#),
    );
    let value = &result.effective.request_queue.auto_enable_apikey_providers;
    assert_eq!((value.value, value.source), (false, Source::Env));
    // Without the variable the persisted value wins over the file.
    let result = built(
        "[resilience.request_queue]\nauto_enable_apikey_providers = false\n",
        &EnvLayer::default(),
        &persisted(r#"{"request_queue":{"auto_enable_apikey_providers":true}}"#),
    );
    let value = &result.effective.request_queue.auto_enable_apikey_providers;
    assert_eq!((value.value, value.source), (true, Source::Persisted));
}

#[test]
fn provider_cooldown_variables() {
    let result = built(
        "",
        &env(&[
            ("SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_THRESHOLD", "4"),
            (
                "SWITCHYARD_PROVIDER_BREAKER_OAUTH_FAILURE_WINDOW_MS",
                "60000",
            ),
            ("SWITCHYARD_PROVIDER_BREAKER_API_KEY_COOLDOWN_MS", "120000"),
            ("PROVIDER_COOLDOWN_ENABLED", "YES"),
            ("PROVIDER_COOLDOWN_MIN_MS", "1000"),
            ("PROVIDER_COOLDOWN_MAX_MS", "2000"),
        ]),
        &Persisted::default(),
    );
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
    let cooldown = result.values().provider_cooldown;
    assert!(cooldown.enabled);
    assert_eq!(cooldown.oauth.failure_threshold, 4);
    assert_eq!(cooldown.oauth.failure_window_ms, 60_000);
    assert_eq!(cooldown.oauth.cooldown_ms, 300_000);
    assert_eq!(cooldown.apikey.cooldown_ms, 120_000);
    assert_eq!(
        (
            cooldown.min_retry_cooldown_ms,
            cooldown.max_retry_cooldown_ms
        ),
        (1000, 2000)
    );
}

#[test]
fn per_connection_override_beats_everything_and_zero_inherits() {
    let mut config = config_with("");
    config.connections[0].rate_limit.max_wait_ms = 1234;
    config.connections[0].rate_limit.concurrent_requests = 2;
    let settings = super::build(
        &config,
        &env(&[("RATE_LIMIT_MAX_WAIT_MS", "5000")]),
        &persisted(r#"{"request_queue":{"max_wait_ms":9000,"requests_per_minute":10}}"#),
    )
    .values();
    let queue = effective_queue(&settings, &config.connections[0]);
    assert_eq!(queue.max_wait_ms, 1234);
    assert_eq!(queue.concurrent_requests, 2);
    assert_eq!(
        queue.requests_per_minute, 10,
        "0 inherits the persisted value"
    );
    assert_eq!(
        queue.execution_max_wait_ms, 600_000,
        "0 inherits the default"
    );
}

#[test]
fn invalid_env_values_are_ignored_with_a_warning_naming_the_variable() {
    let layer = env(&[
        ("RATE_LIMIT_MAX_WAIT_MS", "soon"),
        ("RATE_LIMIT_AUTO_ENABLE", "maybe"),
        ("RATE_LIMIT_MAX_QUEUE_DEPTH", "-4"),
        ("PROVIDER_COOLDOWN_MIN_MS", ""),
    ]);
    assert_eq!(layer.warnings.len(), 3, "{:?}", layer.warnings);
    for name in [
        "RATE_LIMIT_MAX_WAIT_MS",
        "RATE_LIMIT_AUTO_ENABLE",
        "RATE_LIMIT_MAX_QUEUE_DEPTH",
    ] {
        assert!(
            layer
                .warnings
                .iter()
                .any(|w| w.path == name && w.message.contains("ignored")),
            "{name}: {:?}",
            layer.warnings
        );
    }
    let result = built(
        "[resilience.request_queue]\nmax_wait_ms = 45000\n",
        &layer,
        &Persisted::default(),
    );
    assert_eq!(result.effective.request_queue.max_wait_ms.value, 45_000);
    assert_eq!(
        result.warnings.len(),
        3,
        "env warnings are part of the build"
    );
}

#[test]
fn out_of_range_env_values_are_clamped_with_a_warning_naming_the_variable() {
    let layer = env(&[
        ("RATE_LIMIT_MAX_WAIT_MS", "0"),
        ("RATE_LIMIT_MAX_QUEUE_DEPTH", "200000"),
    ]);
    let result = built("", &layer, &Persisted::default());
    assert_eq!(result.effective.request_queue.max_wait_ms.value, 1);
    assert_eq!(
        result.effective.request_queue.max_queue_depth.value,
        100_000
    );
    super::assert_warning(&result, "RATE_LIMIT_MAX_WAIT_MS", "clamped to 1");
    super::assert_warning(&result, "RATE_LIMIT_MAX_QUEUE_DEPTH", "clamped to 100000");
}

#[test]
fn every_documented_variable_is_read() {
    let names: Vec<_> = crate::settings::env::variable_names().collect();
    assert_eq!(names.len(), 13);
    for name in &names {
        let layer = EnvLayer::from_lookup(&|asked| (asked == *name).then(|| "1".to_owned()));
        assert!(
            !crate::settings::layer::PatchValue::is_unset(&layer.defaults)
                || !crate::settings::layer::PatchValue::is_unset(&layer.forced),
            "{name} sets nothing"
        );
    }
}

#[test]
fn effective_settings_serialize_with_values_and_sources() {
    let result = built(
        "[resilience.model_lockout]\nenabled = true\n",
        &EnvLayer::default(),
        &Persisted::default(),
    );
    let json = serde_json::to_value(&result.effective).unwrap();
    assert_eq!(
        json["model_lockout"]["enabled"],
        serde_json::json!({"value": true, "source": "file"})
    );
    assert_eq!(
        json["model_lockout"]["error_codes"]["value"],
        serde_json::json!([403, 404, 429, 502, 503, 504])
    );
    assert_eq!(
        json["stream"]["throughput_watchdog"]["warmup_ms"]["source"],
        "default"
    );
}
