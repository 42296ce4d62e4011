//! Classification tests for "an error changes only the state it is about" (RESILIENCE.md,
//! clarifications, second round): request-scoped failures, unknown routes, quota windows,
//! concurrency caps, and the corpus wordings that needed recognising.

use super::tests::{UNTIL_MIDNIGHT, apikey, oauth, rule_id};
use super::*;
use crate::outcome::ProviderCategory;

/// Asserts that a classification changes no shared state: no cooldown, no breaker count.
fn assert_request_scoped(c: &Classification, what: &str) {
    assert!(c.request_scoped, "{what}: {c:?}");
    assert_eq!(c.cooldown, CooldownHint::None, "{what}");
    assert_eq!(c.breaker, BreakerOutcome::Ignore, "{what}");
    assert_eq!(c.terminal, TerminalSignal::None, "{what}");
}

#[test]
fn request_scoped_400s_change_no_shared_state() {
    let structured = |code| ClassifyInput {
        structured: StructuredError {
            code: Some(code),
            error_type: Some("invalid_request_error"),
        },
        ..apikey(
            400,
            "This model's maximum context length is 128000 tokens. However, your messages \
             resulted in 130000 tokens. Please reduce the length of the messages.",
        )
    };
    assert_request_scoped(
        &classify(&structured("context_length_exceeded")),
        "openai context_length_exceeded",
    );
    for text in [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "Unsupported parameter: 'temperature' is not supported with this model.",
        "Invalid value for 'response_format': must be one of json_object, text",
        "Your request was rejected as a result of our safety system.",
        "tools.0.custom.input_schema: JSON schema is invalid",
        "Invalid schema for function 'get_weather': None is not of type 'object'.",
        "something nobody has seen before",
    ] {
        for c in [apikey(400, text), oauth(400, text)] {
            assert_request_scoped(&classify(&c), text);
        }
    }
    // Combos move on past a context overflow (row 15) and a generic 400, and stop on a
    // body-specific 400 (row 17).
    assert!(classify(&apikey(400, "prompt is too long: 2 > 1")).should_fallback);
    assert!(classify(&apikey(400, "something nobody has seen before")).should_fallback);
    assert!(!classify(&apikey(400, "malformed tool schema")).should_fallback);
    // Auth and quota signals on a 400 still change state.
    assert!(!classify(&apikey(400, "rate limit reached, slow down")).request_scoped);
    assert!(!classify(&apikey(400, "you exceeded your current quota")).request_scoped);
    assert!(!classify(&apikey(400, "Your account has been suspended")).request_scoped);
}

#[test]
fn unknown_route_404_is_not_a_model_404() {
    for text in [
        "404 page not found",
        r#"{"detail":"Not Found"}"#,
        r#"{"error":{"message":"Invalid URL (POST /v1/responses)","type":"invalid_request_error","param":null,"code":null}}"#,
        r#"{"error":"Unexpected endpoint or method. (POST /v1/responses)"}"#,
        "Cannot POST /v1/responses",
    ] {
        let c = classify(&apikey(404, text));
        assert_request_scoped(&c, text);
        assert!(c.should_fallback, "{text}");
    }
    // A 404 that names a model still locks that model.
    for text in [
        r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","code":"model_not_found"}}"#,
        r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}"#,
        r#"{"error":"model 'llama9' not found, try pulling it first"}"#,
    ] {
        let c = classify(&apikey(404, text));
        assert!(!c.request_scoped, "{text}");
        assert_eq!(c.scope, LockScope::Model, "{text}");
    }
}

#[test]
fn request_scoped_codes_on_5xx_change_no_shared_state() {
    let c = classify(&ClassifyInput {
        structured: StructuredError {
            code: Some("context_length_exceeded"),
            error_type: None,
        },
        ..apikey(500, "internal")
    });
    assert_request_scoped(&c, "500 context_length_exceeded");
    assert_request_scoped(
        &classify(&apikey(503, "prompt is too long for this model")),
        "503 prompt too long",
    );
    assert!(!classify(&apikey(503, "upstream unavailable")).request_scoped);
}

#[test]
fn quota_windows_are_not_hints() {
    // The oauth profile ignores upstream hints; the windows apply anyway, as fixed durations
    // (which the cooldown policy applies on every profile).
    for (text, window) in [
        ("You've reached your weekly usage limit", WEEKLY_COOLDOWN_MS),
        (
            "session limit reached for this account",
            SESSION_COOLDOWN_MS,
        ),
        ("Claude usage limit reached", SUBSCRIPTION_COOLDOWN_MS),
        ("daily quota exhausted, try again tomorrow", UNTIL_MIDNIGHT),
    ] {
        let c = classify(&oauth(429, text));
        assert_eq!(c.cooldown, CooldownHint::Fixed(window), "{text}");
        assert_eq!(c.reset_hint_ms, Some(window), "{text}");
        assert_eq!(c.reason, FailureReason::QuotaExhausted, "{text}");
        // A reset the upstream stated wins over the fixed window.
        let stated = classify(&ClassifyInput {
            upstream_hint_ms: Some(3 * 3_600_000),
            ..oauth(429, text)
        });
        assert_eq!(
            stated.cooldown,
            CooldownHint::Fixed(3 * 3_600_000),
            "{text}"
        );
    }
    // Through the cooldown policy: 24 h on the oauth profile, not 5 s · 2^level.
    let c = classify(&oauth(429, "weekly limit reached"));
    let params = crate::cooldown::CooldownParams::for_category(ProviderCategory::Oauth);
    let (state, _) = crate::cooldown::on_event(
        &crate::cooldown::ConnState::default(),
        &crate::cooldown::ConnEvent::Failure(crate::cooldown::FailureObservation {
            status: Some(429),
            reason: c.reason,
            hint: c.cooldown,
            terminal: c.terminal,
            stream_stall: false,
            message: "weekly limit reached".to_owned(),
        }),
        &params,
        1_000,
    );
    assert_eq!(state.rate_limited_until, Some(1_000 + WEEKLY_COOLDOWN_MS));
}

#[test]
fn concurrency_limited_429_rests_one_second_without_locking_the_model() {
    let text = r#"{"error":{"code":"1302","message":"您当前使用该API的并发数过高，请降低并发，或联系客服增加限额。"}}"#;
    for input in [
        apikey(429, text),
        ClassifyInput {
            is_combo: true,
            ..apikey(429, text)
        },
    ] {
        let c = classify(&input);
        assert_eq!(rule_id(&c), "concurrency_limited_429");
        assert_eq!(c.cooldown, CooldownHint::Fixed(CONCURRENCY_COOLDOWN_MS));
        assert_eq!(c.scope, LockScope::Connection);
        assert_eq!(c.breaker, BreakerOutcome::Ignore);
        assert!(c.should_fallback);
    }
}

#[test]
fn a_request_larger_than_the_rate_limit_is_request_scoped() {
    let text = "Request too large for gpt-4o in organization org-xyz on tokens per min (TPM): \
                Limit 30000, Requested 41205. The input or output tokens must be reduced in \
                order to run successfully.";
    let c = classify(&apikey(429, text));
    assert_request_scoped(&c, text);
    assert!(c.should_fallback);
    // A plain token rate limit still cools the connection.
    assert!(
        !classify(&apikey(
            429,
            "Rate limit reached for gpt-4o on tokens per min"
        ))
        .request_scoped
    );
}

#[test]
fn corpus_wordings_are_recognised() {
    // Fireworks names another API, not a model: an unknown route.
    let c = classify(&apikey(
        404,
        r#"{"error":{"object":"error","type":"invalid_request_error","message":"model is missing conversation_config, please use /completions API instead"}}"#,
    ));
    assert_eq!(rule_id(&c), ROUTE_NOT_FOUND_RULE);
    // Context overflow in llama.cpp's and LM Studio's words: row 15, so a combo moves on.
    for text in [
        "the request exceeds the available context size. try increasing the context size",
        "The number of tokens to keep from the initial prompt is greater than the context length",
    ] {
        let c = classify(&apikey(400, text));
        assert_eq!(rule_id(&c), "row15_model_scoped_400", "{text}");
        assert!(c.should_fallback && c.request_scoped, "{text}");
    }
    // A decommissioned model is model-scoped: a combo moves on.
    let c = classify(&apikey(
        400,
        "The model `llama-3.1-70b-versatile` has been decommissioned and is no longer supported.",
    ));
    assert_eq!(rule_id(&c), "row15_model_scoped_400");
    // GLM 1113 in Chinese: credits exhausted.
    let c = classify(&ClassifyInput {
        provider_id: "glm",
        ..apikey(
            429,
            r#"{"error":{"code":"1113","message":"余额不足或无可用资源包,请充值。"}}"#,
        )
    });
    assert_eq!(c.terminal, TerminalSignal::CreditsExhausted);
    // A subscription without long-context access: the request needs a feature.
    assert!(
        classify(&oauth(
            429,
            "Extra usage is required for long context requests."
        ))
        .request_scoped
    );
}

/// Codex answers a spent plan window with a 429 whose headers state the window and its reset
/// (`x-codex-primary-used-percent: 100`, `…-reset-after-seconds`); without a reset in the body
/// that header reset is the window's length, not the connection's backoff.
#[test]
fn a_spent_codex_window_in_the_headers_sets_the_quota_window() {
    let text =
        r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached"}}"#;
    let codex = |headers| ClassifyInput {
        provider_id: "codex",
        headers,
        ..oauth(429, text)
    };
    let headers = [
        ("x-codex-primary-used-percent", "100"),
        ("x-codex-primary-window-minutes", "300"),
        ("x-codex-primary-reset-after-seconds", "13873"),
        ("x-codex-secondary-used-percent", "80"),
        ("x-codex-secondary-window-minutes", "10080"),
        ("x-codex-secondary-reset-after-seconds", "316705"),
    ];
    let without = classify(&codex(&[]));
    assert_eq!(without.cooldown, CooldownHint::ScaledBackoff, "{without:?}");
    let with = classify(&codex(&headers));
    assert_eq!(rule_id(&with), "codex-usage-limit-window");
    assert_eq!(with.cooldown, CooldownHint::Fixed(13_873_000), "{with:?}");
    assert_eq!(with.reset_hint_ms, Some(13_873_000));
    // Both windows spent: the account waits for the later reset.
    let both = [
        ("x-codex-primary-used-percent", "100"),
        ("x-codex-primary-reset-after-seconds", "13873"),
        ("x-codex-secondary-used-percent", "100"),
        ("x-codex-secondary-reset-after-seconds", "316705"),
    ];
    let c = classify(&codex(&both));
    assert_eq!(c.cooldown, CooldownHint::Fixed(316_705_000), "{c:?}");
    // A window that is not spent states no reset for the error.
    let open = [
        ("x-codex-primary-used-percent", "40"),
        ("x-codex-primary-reset-after-seconds", "13873"),
    ];
    assert_eq!(
        classify(&codex(&open)).cooldown,
        CooldownHint::ScaledBackoff
    );
    // The generic quota-window rows read the same headers: a subscription text with a spent
    // window waits for its reset, not for the row's fixed hour.
    let c = classify(&ClassifyInput {
        headers: &headers,
        ..oauth(429, "You've reached your usage limit.")
    });
    assert_eq!(rule_id(&c), "row07_subscription_quota", "{c:?}");
    assert_eq!(c.cooldown, CooldownHint::Fixed(13_873_000), "{c:?}");
}
