//! Runtime patches: every bad field is named and nothing is applied; good patches merge.

use crate::settings::{FieldError, Persisted, SettingsPatch, apply_patch};

fn reject(json: &str) -> Vec<FieldError> {
    match SettingsPatch::from_json(json) {
        Err(errors) => errors,
        Ok(patch) => apply_patch(&Persisted::default(), &patch)
            .err()
            .unwrap_or_else(|| panic!("expected {json} to be rejected")),
    }
}

#[track_caller]
fn assert_field(errors: &[FieldError], path: &str, needle: &str) {
    assert!(
        errors
            .iter()
            .any(|e| e.path == path && e.message.contains(needle)),
        "no error at `{path}` containing `{needle}` in {errors:#?}"
    );
}

#[test]
fn unknown_keys_are_rejected_with_their_path() {
    let errors = reject(r#"{"provider_breaker":{"apikey":{"failure_treshold":5}}}"#);
    assert_field(
        &errors,
        "provider_breaker.apikey.failure_treshold",
        "unknown field",
    );
    let errors = reject(r#"{"legacy":{}}"#);
    assert_field(&errors, "legacy", "unknown field");
}

#[test]
fn wrong_types_negative_and_overflowing_values_are_rejected() {
    let errors = reject(r#"{"request_queue":{"max_wait_ms":"soon"}}"#);
    assert_field(&errors, "request_queue.max_wait_ms", "invalid type");
    let errors = reject(r#"{"request_queue":{"max_wait_ms":-1}}"#);
    assert_field(&errors, "request_queue.max_wait_ms", "invalid value");
    let errors = reject(r#"{"provider_breaker":{"oauth":{"failure_threshold":5000000000}}}"#);
    assert_field(
        &errors,
        "provider_breaker.oauth.failure_threshold",
        "invalid value",
    );
    let errors = reject(r#"{"model_lockout":{"error_codes":[429, 70000]}}"#);
    assert_field(&errors, "model_lockout.error_codes[1]", "invalid value");
    let errors = reject(r#"{"stream":{"heartbeat_interval_ms":1.5}}"#);
    assert_field(&errors, "stream.heartbeat_interval_ms", "invalid type");
}

#[test]
fn out_of_range_values_are_all_named() {
    let errors = reject(
        r#"{"request_queue":{"max_wait_ms":0,"max_queue_depth":100001},
            "model_lockout":{"base_cooldown_ms":1000,"error_codes":[429,99]},
            "combo_cooldown_wait":{"max_attempts":11}}"#,
    );
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert_field(
        &errors,
        "request_queue.max_wait_ms",
        "0 is out of range 1..=86400000",
    );
    assert_field(
        &errors,
        "request_queue.max_queue_depth",
        "out of range 0..=100000",
    );
    assert_field(&errors, "model_lockout.base_cooldown_ms", "5000..=600000");
    assert_field(&errors, "model_lockout.error_codes[1]", "status code 99");
    assert_field(&errors, "combo_cooldown_wait.max_attempts", "0..=10");
    assert!(
        errors.iter().all(|e| !e.message.contains("clamped")),
        "{errors:#?}"
    );
}

#[test]
fn runtime_error_rules_are_validated() {
    let errors = reject(
        r#"{"provider_error_rules":{"glm":[
            {"status":429,"match":"limit","scope":"connection"},
            {"status":700,"match":"x","scope":"model"},
            {"status":429,"match":"","scope":"model"}]}}"#,
    );
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_field(&errors, "provider_error_rules.glm[1]", "status 700");
    assert_field(&errors, "provider_error_rules.glm[2]", "match");
    let errors =
        reject(r#"{"provider_error_rules":{"glm":[{"status":429,"match":"x","scope":"world"}]}}"#);
    assert_field(
        &errors,
        "provider_error_rules.glm[0].scope",
        "unknown variant",
    );
}

#[test]
fn trailing_garbage_is_rejected() {
    let errors = SettingsPatch::from_json(r#"{} {}"#).unwrap_err();
    assert_eq!(errors[0].path, "");
}

#[test]
fn accepted_patches_merge_newest_value_per_key() {
    let first = SettingsPatch::from_json(
        r#"{"request_queue":{"max_wait_ms":9000,"concurrent_requests":3}}"#,
    )
    .unwrap();
    let second = SettingsPatch::from_json(
        r#"{"request_queue":{"max_wait_ms":8000},"session_affinity":{"ttl_ms":60000}}"#,
    )
    .unwrap();
    let persisted = apply_patch(&Persisted::default(), &first).unwrap();
    let persisted = apply_patch(&persisted, &second).unwrap();
    let queue = &persisted.0.request_queue;
    assert_eq!(queue.max_wait_ms, Some(8000));
    assert_eq!(queue.concurrent_requests, Some(3));
    assert_eq!(persisted.0.session_affinity.ttl_ms, Some(60_000));
}

#[test]
fn a_rejected_patch_changes_nothing() {
    let persisted = super::persisted(r#"{"request_queue":{"max_wait_ms":9000}}"#);
    let bad = SettingsPatch::from_json(
        r#"{"request_queue":{"max_wait_ms":7000,"concurrent_requests":0}}"#,
    )
    .unwrap();
    assert!(apply_patch(&persisted, &bad).is_err());
    assert_eq!(persisted.0.request_queue.max_wait_ms, Some(9000));
}

#[test]
fn persisted_settings_round_trip_as_minimal_json() {
    assert_eq!(serde_json::to_string(&Persisted::default()).unwrap(), "{}");
    assert!(SettingsPatch::from_json("{}").unwrap().is_empty());
    let persisted = super::persisted(
        r#"{"provider_breaker":{"apikey":{"failure_threshold":5}},
            "model_lockout":{"error_codes":[429]}}"#,
    );
    let json = serde_json::to_string(&persisted).unwrap();
    assert_eq!(
        json,
        r#"{"provider_breaker":{"apikey":{"failure_threshold":5}},"model_lockout":{"error_codes":[429]}}"#
    );
    let back: Persisted = serde_json::from_str(&json).unwrap();
    assert_eq!(back, persisted);
}

#[test]
fn relations_between_fields_are_not_patch_errors() {
    // Clamped at build time instead, as for the file.
    let persisted = super::persisted(
        r#"{"provider_breaker":{"apikey":{"failure_threshold":5,"degradation_threshold":9}}}"#,
    );
    let result = super::built("", &crate::settings::EnvLayer::default(), &persisted);
    assert_eq!(
        result
            .values()
            .provider_breaker
            .apikey
            .degradation_threshold,
        4
    );
}
