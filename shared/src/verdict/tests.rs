//! The verdict on plain inputs: the same failures the node's corpus replay drives end to end,
//! here without a node.

use super::*;
use crate::outcome::TerminalSignal;

const GEMINI_PER_MINUTE: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;

fn settings() -> ResilienceSettings {
    ResilienceSettings::default()
}

fn ctx<'a>(settings: &'a ResilienceSettings, rules: &'a [RestatementRule]) -> Context<'a> {
    Context {
        provider_id: "p",
        category: ProviderCategory::Apikey,
        per_model_quota: false,
        disable_cooling: false,
        backoff_level: 0,
        queue_max_wait_ms: 30_000,
        model_ref: ModelRef {
            provider: "p",
            connection: "k0",
            model: "m",
            family: None,
            per_model_quota: false,
        },
        restatement_rules: rules,
        file_rules: &[],
        settings,
        is_combo: false,
        now_epoch_ms: 1_800_000_000_000,
    }
}

fn attempt<'a>(status: u16, body: &'a str, headers: &'a [(&'a str, &'a str)]) -> Attempt<'a> {
    Attempt {
        status: Some(status),
        transport: None,
        message: "upstream answered an error",
        body,
        headers,
    }
}

#[test]
fn a_gemini_per_minute_429_paces_the_connection_and_never_ends_the_key() {
    let s = settings();
    let v = judge(
        &attempt(429, GEMINI_PER_MINUTE, &[]),
        &ctx(&s, &[]),
        "m".into(),
    );
    assert_eq!(v.classification.terminal, TerminalSignal::None, "{v:?}");
    assert_eq!(v.body_retry, Some(BodyRetry::Pace(7_000)), "{v:?}");
    assert!(v.lockout.is_none(), "{v:?}");
    assert!(!v.request_scoped());
}

#[test]
fn a_retry_delay_past_the_queue_budget_locks_only_the_model() {
    let s = settings();
    let body = GEMINI_PER_MINUTE.replace("\"7s\"", "\"86399s\"");
    let v = judge(&attempt(429, &body, &[]), &ctx(&s, &[]), "m".into());
    assert_eq!(v.body_retry, Some(BodyRetry::LockModel), "{v:?}");
    let (key, failure) = v.lockout.expect("a model lock");
    assert_eq!(key.connection, "k0");
    assert_eq!(failure.reason, LockReason::QuotaExhausted);
    assert_eq!(
        v.observation.hint,
        CooldownHint::None,
        "the connection is not cooled"
    );
}

#[test]
fn an_operator_exclude_marker_vetoes_the_restatement() {
    let s = settings();
    let rules = [RestatementRule::new(
        "quota-403",
        vec![403],
        429,
        ["额度不足"],
        ["无权访问"],
        None,
    )];
    let restated = judge(
        &attempt(403, r#"{"error":{"message":"额度不足"}}"#, &[]),
        &ctx(&s, &rules),
        "m".into(),
    );
    assert_eq!(restated.status, 429, "{restated:?}");
    let vetoed = judge(
        &attempt(403, r#"{"error":{"message":"额度不足 无权访问"}}"#, &[]),
        &ctx(&s, &rules),
        "m".into(),
    );
    assert_eq!(vetoed.status, 403, "{vetoed:?}");
    assert_eq!(vetoed.retry_after_ms, None);
}

#[test]
fn a_request_scoped_failure_changes_no_connection_and_no_breaker() {
    let s = settings();
    let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    let v = judge(&attempt(400, body, &[]), &ctx(&s, &[]), "m".into());
    assert!(v.request_scoped(), "{v:?}");
    assert_eq!(v.breaker, BreakerOutcome::Ignore);
    assert_eq!(v.strategy, AttemptOutcome::RequestError);
    assert!(v.lockout.is_none());
    assert_eq!(v.code.as_deref(), Some("context_length_exceeded"));
}

#[test]
fn a_429_tells_the_client_its_retry_after_and_a_timeout_has_no_status() {
    let s = settings();
    let headers = [("Retry-After", "12")];
    let v = judge(&attempt(429, "{}", &headers), &ctx(&s, &[]), "m".into());
    assert_eq!(v.retry_after_ms, Some(12_000), "{v:?}");
    let timeout = Attempt {
        status: None,
        transport: Some(TransportFailure::Timeout),
        message: "timed out",
        body: "",
        headers: &[],
    };
    let v = judge(&timeout, &ctx(&s, &[]), "m".into());
    assert_eq!(v.status, 0);
    assert_eq!(v.code, None);
    assert_eq!(v.strategy, AttemptOutcome::Timeout);
    assert_eq!(v.retry_after_ms, None);
}

#[test]
fn the_same_failure_gets_the_same_verdict() {
    let s = settings();
    let a = judge(
        &attempt(429, GEMINI_PER_MINUTE, &[]),
        &ctx(&s, &[]),
        "m".into(),
    );
    let b = judge(
        &attempt(429, GEMINI_PER_MINUTE, &[]),
        &ctx(&s, &[]),
        "m".into(),
    );
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn timeouts_feed_latency_and_request_faults_say_nothing_about_the_connection() {
    for t in [
        TransportFailure::Timeout,
        TransportFailure::ReadinessTimeout,
        TransportFailure::IdleTimeout,
    ] {
        assert_eq!(strategy_outcome(Some(t), false), AttemptOutcome::Timeout);
    }
    assert_eq!(
        strategy_outcome(Some(TransportFailure::ClientAbort), false),
        AttemptOutcome::RequestError
    );
    assert_eq!(strategy_outcome(None, true), AttemptOutcome::RequestError);
    assert_eq!(strategy_outcome(None, false), AttemptOutcome::Failure);
    assert_eq!(
        strategy_outcome(Some(TransportFailure::ConnectRefused), false),
        AttemptOutcome::Failure
    );
}
