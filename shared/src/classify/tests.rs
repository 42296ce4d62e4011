//! Classification tests: one per decision-table row, the built-in tables, provider rules,
//! the reference's `account-fallback-service` cases, the breaker trigger set, and a property
//! test that classification never panics and keeps its invariants.

use super::table::{self, Action};
use super::*;
use crate::hints::{self, MAX_HINT_MS};
use crate::outcome::ProviderCategory;
use crate::restatement::{RestatementRule, restate};
use proptest::prelude::*;

/// 2023-11-14T22:13:20Z: 1 h 46 min 40 s before UTC midnight.
pub(super) const NOW: u64 = 1_700_000_000_000;
pub(super) const UNTIL_MIDNIGHT: Millis = 6_400_000;
const DAY: Millis = 86_400_000;

/// An API-key provider that uses upstream hints (the apikey default).
pub(super) fn apikey(status: u16, text: &str) -> ClassifyInput<'_> {
    ClassifyInput {
        status,
        error_text: text,
        provider_id: "openai",
        category: ProviderCategory::Apikey,
        use_upstream_retry_hints: true,
        now_epoch_ms: NOW,
        ..ClassifyInput::default()
    }
}

/// An OAuth provider that ignores upstream hints (the oauth default).
pub(super) fn oauth(status: u16, text: &str) -> ClassifyInput<'_> {
    ClassifyInput {
        provider_id: "claude",
        category: ProviderCategory::Oauth,
        use_upstream_retry_hints: false,
        ..apikey(status, text)
    }
}

pub(super) fn rule_id(c: &Classification) -> String {
    c.rule.to_string()
}

const TRIP: BreakerOutcome = BreakerOutcome::Failure(FailureKind::Transient);

// ---------------------------------------------------------------------------------------------
// One test per row of the decision table.

#[test]
fn row01_service_connection_cooldown_hint() {
    let headers = [("X-Switchyard-Fallback-Hint", "Connection_Cooldown")];
    let c = classify(&ClassifyInput {
        headers: &headers,
        ..apikey(503, "service starting")
    });
    assert_eq!(rule_id(&c), "row01_service_connection_cooldown");
    assert!(c.should_fallback);
    assert_eq!(c.cooldown, CooldownHint::Fixed(SERVICE_COOLDOWN_MS));
    assert!(c.skip_provider_breaker);
    assert_eq!(c.breaker, BreakerOutcome::Ignore);
    // Without the header, a 503 is an ordinary breaker failure; on a 500 the header is moot.
    let c = classify(&apikey(503, "service starting"));
    assert_eq!((rule_id(&c).as_str(), c.breaker), ("status_503", TRIP));
    let c = classify(&ClassifyInput {
        headers: &headers,
        ..apikey(500, "")
    });
    assert_eq!(rule_id(&c), "status_500");
}

#[test]
fn row03_account_deactivated_is_a_ban() {
    let c = classify(&apikey(401, "This account has been deactivated"));
    assert_eq!(rule_id(&c), "row03_account_deactivated");
    assert!(c.should_fallback);
    assert_eq!(c.reason, FailureReason::AuthError);
    assert_eq!(c.terminal, TerminalSignal::Banned);
    assert_eq!(c.cooldown, CooldownHint::None);
    assert_eq!(c.scope, LockScope::Connection);
    let c = classify(&oauth(403, "Verify your account to continue."));
    assert_eq!(c.terminal, TerminalSignal::Banned);
}

#[test]
fn row04_gemini_names_the_violated_metric() {
    let gemini = |text| ClassifyInput {
        provider_id: "gemini",
        ..apikey(429, text)
    };
    let per_day = "Quota exceeded for metric generate_content_free_tier_requests, quotaId: \
                   GenerateRequestsPerDayPerProjectPerModel-FreeTier";
    let c = classify(&gemini(per_day));
    assert_eq!(
        (rule_id(&c).as_str(), c.reason),
        ("row04_gemini_per_day", FailureReason::QuotaExhausted)
    );
    let per_minute = "You exceeded your current quota. quotaId: \
                      GenerateContentInputTokensPerModelPerMinute-FreeTier";
    let c = classify(&gemini(per_minute));
    assert_eq!(
        (rule_id(&c).as_str(), c.reason),
        ("row04_gemini_per_minute", FailureReason::RateLimitExceeded)
    );
    assert_eq!(c.terminal, TerminalSignal::None);
    // Other providers never take this row.
    let c = classify(&apikey(429, per_minute));
    assert_ne!(rule_id(&c), "row04_gemini_per_minute");
}

#[test]
fn row05_credits_exhausted_is_terminal() {
    let c = classify(&apikey(402, "credit_balance_too_low"));
    assert_eq!(rule_id(&c), "row05_credits_exhausted");
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
    assert_eq!(c.terminal, TerminalSignal::CreditsExhausted);
    assert_eq!(c.cooldown, CooldownHint::None);
    assert_eq!(c.scope, LockScope::Connection);
    // `*-compatible-*` providers multiplex backends: not a connection-wide credit state.
    let compatible = ClassifyInput {
        provider_id: "openai-compatible-local",
        ..apikey(403, "Insufficient balance")
    };
    assert_eq!(classify(&compatible).terminal, TerminalSignal::None);
}

#[test]
fn row06_daily_quota_locks_until_utc_midnight() {
    let c = classify(&oauth(
        429,
        "You have exceeded today's quota, try again tomorrow",
    ));
    assert_eq!(rule_id(&c), "row06_daily_quota");
    assert!(c.daily_quota);
    assert_eq!(c.cooldown, CooldownHint::Fixed(UNTIL_MIDNIGHT));
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
    // An API-key 429 whose text names a daily cap is a quota too.
    let c = classify(&apikey(429, "daily quota exceeded"));
    assert_eq!(rule_id(&c), "row06_daily_quota");
}

#[test]
fn row07_subscription_window_uses_the_upstream_reset_or_an_hour() {
    let text = "Claude Pro usage limit reached";
    let c = classify(&ClassifyInput {
        upstream_hint_ms: Some(7_200_000),
        ..oauth(429, text)
    });
    assert_eq!(rule_id(&c), "row07_subscription_quota");
    // A quota window is not a hint: the stated reset wins over the hour even where the
    // profile ignores hints (the oauth default), and the model lockout lasts as long.
    assert_eq!(c.cooldown, CooldownHint::Fixed(7_200_000));
    assert_eq!(c.reset_hint_ms, Some(7_200_000));
    let with_hints = ClassifyInput {
        upstream_hint_ms: Some(7_200_000),
        use_upstream_retry_hints: true,
        ..oauth(429, text)
    };
    assert_eq!(
        classify(&with_hints).cooldown,
        CooldownHint::Fixed(7_200_000)
    );
    // Without a stated reset: one hour.
    assert_eq!(
        classify(&oauth(429, text)).cooldown,
        CooldownHint::Fixed(SUBSCRIPTION_COOLDOWN_MS)
    );
    // The account-rate-limit wording is a subscription window only on Claude.
    let claude_only = "This request would exceed your account's rate limit.";
    assert_eq!(
        rule_id(&classify(&oauth(429, claude_only))),
        "row07_subscription_quota"
    );
    let elsewhere = ClassifyInput {
        provider_id: "codex",
        ..oauth(429, claude_only)
    };
    assert_ne!(rule_id(&classify(&elsewhere)), "row07_subscription_quota");
}

#[test]
fn row08_weekly_cap_is_unconditional() {
    // An API-key 429: quota rows 5–7 are gated, the weekly row is not.
    let c = classify(&apikey(
        429,
        "you (acct) have reached your weekly usage limit",
    ));
    assert_eq!(rule_id(&c), "row08_weekly_quota");
    assert_eq!(c.cooldown, CooldownHint::Fixed(WEEKLY_COOLDOWN_MS));
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
}

#[test]
fn row09_session_cap_but_not_session_expiry() {
    let c = classify(&apikey(
        429,
        "you (acct) have reached your session usage limit",
    ));
    assert_eq!(rule_id(&c), "row09_session_quota");
    assert_eq!(c.cooldown, CooldownHint::Fixed(SESSION_COOLDOWN_MS));
    let c = classify(&apikey(401, "session expired"));
    assert_ne!(rule_id(&c), "row09_session_quota");
}

#[test]
fn row10_quota_text_with_a_stated_reset() {
    let text = "Quota exceeded for quota metric 'Requests'";
    let hinted = ClassifyInput {
        upstream_hint_ms: Some(90_000),
        ..apikey(403, text)
    };
    let c = classify(&hinted);
    assert_eq!(rule_id(&c), "row10_quota_reset_hint");
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
    assert_eq!(c.cooldown, CooldownHint::Upstream(90_000));
    assert_eq!(c.reset_hint_ms, Some(90_000));
    // A profile that ignores hints still takes the row (and keeps the reset) but backs off.
    let ignoring = ClassifyInput {
        use_upstream_retry_hints: false,
        ..hinted
    };
    let c = classify(&ignoring);
    assert_eq!(
        (c.cooldown, c.reset_hint_ms),
        (CooldownHint::ScaledBackoff, Some(90_000))
    );
    // Without a hint the text rule of row 13 decides.
    assert_eq!(rule_id(&classify(&apikey(429, text))), "quota_exceeded");
}

#[test]
fn row11_route_not_authorized_is_not_a_fallback() {
    let c = classify(&apikey(
        403,
        "Fire Pass API keys are not authorized for this route.",
    ));
    assert_eq!(rule_id(&c), "row11_route_not_authorized");
    assert!(!c.should_fallback);
    assert_eq!(c.retry, RetryClass::NotRetryable);
    assert_eq!(
        (c.cooldown, c.terminal),
        (CooldownHint::None, TerminalSignal::None)
    );
}

#[test]
fn row12_forbidden_on_apikey_and_cloudflare_refusals() {
    let c = classify(&apikey(403, "Forbidden"));
    assert_eq!(rule_id(&c), "row12_apikey_forbidden");
    assert_eq!(c.reason, FailureReason::AuthError);
    assert_eq!(
        (c.cooldown, c.terminal),
        (CooldownHint::ScaledBackoff, TerminalSignal::None)
    );
    for body in [
        r#"{"error_code":1010,"error_name":"browser_signature_banned"}"#,
        "<title>Access denied</title> Error 1010 | Cloudflare",
        r#"{"retryable":false,"cloudflare_error":true,"detail":"blocked"}"#,
        r#"{"retryable": false, "owner_action_required": true}"#,
    ] {
        let c = classify(&apikey(403, body));
        assert_eq!(rule_id(&c), "row12_request_rejected", "{body}");
        assert_eq!(c.terminal, TerminalSignal::RequestRejected);
        assert_eq!(c.cooldown, CooldownHint::None);
        assert!(c.should_fallback);
        assert_eq!(
            classify(&oauth(403, body)).terminal,
            TerminalSignal::RequestRejected
        );
    }
    // Quota wording on a 403 is not an auth failure.
    let c = classify(&apikey(403, "Hour quota exceeded"));
    assert_eq!(
        (rule_id(&c).as_str(), c.reason),
        ("hour_quota_exceeded", FailureReason::QuotaExhausted)
    );
}

#[test]
fn row13_plain_apikey_429_matches_by_status_only() {
    // "capacity" is a text rule, but an API-key 429 without quota wording is a rate limit.
    let c = classify(&apikey(429, "Too much capacity in use"));
    assert_eq!(rule_id(&c), "status_429");
    assert_eq!(c.reason, FailureReason::RateLimitExceeded);
    // Other statuses match text rules first.
    let c = classify(&apikey(500, "The model is overloaded"));
    assert_eq!(
        (rule_id(&c).as_str(), c.reason),
        ("overloaded", FailureReason::ModelCapacity)
    );
    assert_eq!(c.breaker, TRIP);
}

#[test]
fn row13_oauth_forbidden_counts_towards_the_ban_streak() {
    let c = classify(&oauth(403, "Forbidden"));
    assert_eq!(rule_id(&c), "status_403");
    assert_eq!(c.terminal, TerminalSignal::RequestRejected);
    let c = classify(&oauth(
        403,
        "Cloud Code API has not been enabled for project 123",
    ));
    assert_eq!(c.terminal, TerminalSignal::None);
}

#[test]
fn row14_retryable_statuses_are_subsumed_by_status_rules() {
    for status in [406, 408, 429, 500, 502, 503, 504] {
        let c = classify(&apikey(status, ""));
        assert!(c.should_fallback, "{status}");
        assert_eq!(c.retry, RetryClass::Retryable);
        assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
        let expected = if status == 429 {
            FailureReason::RateLimitExceeded
        } else {
            FailureReason::ServerError
        };
        assert_eq!(c.reason, expected, "{status}");
    }
}

#[test]
fn row15_model_or_request_scoped_400_moves_on_without_cooling() {
    for text in [
        "The model `foo` does not exist or is not available",
        "This model's maximum context length is 8192 tokens",
        "prompt is too long: 210000 tokens > 200000 maximum",
        "messages must alternate between user and assistant",
        "max_tokens must be less than or equal to 4096",
        "Function 'abc-123': DEGRADED function cannot be invoked",
        "Model gpt-x does not support tools",
    ] {
        let c = classify(&apikey(400, text));
        assert_eq!(rule_id(&c), "row15_model_scoped_400", "{text}");
        assert!(c.should_fallback);
        assert_eq!(c.reason, FailureReason::ModelCapacity);
        assert_eq!(c.cooldown, CooldownHint::None);
        assert_eq!(c.scope, LockScope::Model);
        assert_eq!(c.breaker, BreakerOutcome::Ignore);
    }
    let structured = |code, kind, text| ClassifyInput {
        structured: StructuredError {
            code,
            error_type: kind,
        },
        ..apikey(400, text)
    };
    let by_code = structured(Some("model_not_found"), None, "unauthorized-ish blob");
    assert_eq!(rule_id(&classify(&by_code)), "row15_model_scoped_400");
    let by_type = structured(None, Some("not_found_error"), "model: claude-x");
    assert_eq!(rule_id(&classify(&by_type)), "row15_model_scoped_400");
    let permission_on_model = structured(
        None,
        Some("permission_error"),
        "Your key has no access to this model",
    );
    assert_eq!(
        rule_id(&classify(&permission_on_model)),
        "row15_model_scoped_400"
    );
    let permission_on_feature = structured(
        None,
        Some("permission_error"),
        "Your org lacks the batch feature",
    );
    assert_eq!(
        rule_id(&classify(&permission_on_feature)),
        "row17_generic_400"
    );
}

#[test]
fn row16_throttling_reported_as_400() {
    for text in [
        "Detected high-frequency non-compliant requests from you.",
        "请求过于频繁",
    ] {
        let c = classify(&apikey(400, text));
        assert_eq!(rule_id(&c), "row16_rate_limited_400", "{text}");
        assert_eq!(c.reason, FailureReason::RateLimitExceeded);
        assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
    }
    // "rate limit" wording is caught by the text rule of row 13 first, to the same effect.
    let c = classify(&apikey(400, "rate limit exceeded"));
    assert_eq!(
        (rule_id(&c).as_str(), c.reason),
        ("rate_limit", FailureReason::RateLimitExceeded)
    );
}

#[test]
fn row17_other_400_is_returned_to_the_client() {
    let c = classify(&apikey(400, "bad request payload"));
    assert_eq!(rule_id(&c), "row17_client_error_400");
    assert!(!c.should_fallback);
    assert_eq!(c.retry, RetryClass::NotRetryable);
    assert_eq!(c.reason, FailureReason::Unknown);
    assert_eq!(c.cooldown, CooldownHint::None);
    // A bad credential phrased around a model stays an error, not a model fallback.
    let c = classify(&apikey(400, "Invalid API key provided for model gpt-4o"));
    assert_eq!(rule_id(&c), "row17_client_error_400");
    // Every body-specific word of the reference stops the combo.
    for text in [
        "the context is odd",
        "prompt rejected",
        "bad token count",
        "malformed body",
        "invalid field `foo`",
        "Bad Request",
    ] {
        let c = classify(&apikey(400, text));
        assert_eq!(rule_id(&c), "row17_client_error_400", "{text}");
        // It stops the combo, and like every request-scoped error the provider's other
        // connections.
        assert!(!c.should_fallback && c.next_target_only(), "{text}");
    }
}

#[test]
fn row17_a_generic_400_moves_a_combo_to_its_next_target() {
    for text in [
        "something nobody has seen before",
        // Google's parameter validation: the reference's exception to "invalid".
        r#"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}"#,
    ] {
        let c = classify(&apikey(400, text));
        assert_eq!(rule_id(&c), "row17_generic_400", "{text}");
        assert!(c.should_fallback && c.next_target_only(), "{text}");
        assert!(c.request_scoped, "{text}");
        assert_eq!(c.cooldown, CooldownHint::None);
        assert_eq!(c.breaker, BreakerOutcome::Ignore);
    }
    // INVALID_ARGUMENT that names the prompt is about the body.
    let c = classify(&apikey(
        400,
        r#"{"error":{"message":"The prompt is invalid","status":"INVALID_ARGUMENT"}}"#,
    ));
    assert_eq!(rule_id(&c), "row17_client_error_400");
}

#[test]
fn row18_anything_else_backs_off() {
    for status in [409, 422, 529, 418] {
        let c = classify(&apikey(status, "conflict"));
        assert_eq!(rule_id(&c), "row18_other", "{status}");
        assert!(c.should_fallback);
        assert_eq!(c.reason, FailureReason::Unknown);
        assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
        assert_eq!(c.breaker, BreakerOutcome::Ignore);
    }
}

// ---------------------------------------------------------------------------------------------
// The built-in ERROR_RULES table.

#[test]
fn error_rules_text_entries() {
    for (text, rule) in table::TEXT_RULES {
        assert_eq!(table::by_text(text).map(|r| r.id), Some(rule.id), "{text}");
        // Through the classifier, on a status without its own row or status rule.
        let c = classify(&apikey(418, text));
        if text == "free tier of the model has been exhausted" {
            // Shadowed by row 5's credits signal, as in the reference.
            assert_eq!(rule_id(&c), "row05_credits_exhausted");
            continue;
        }
        assert_eq!(rule_id(&c), rule.id, "{text}");
        assert_eq!(c.reason, rule.reason, "{text}");
        let expected = match rule.action {
            Action::Backoff => CooldownHint::ScaledBackoff,
            Action::Fixed(0) => CooldownHint::None,
            Action::Fixed(ms) => CooldownHint::Fixed(ms),
            Action::Upstream(ms) => CooldownHint::Upstream(ms),
        };
        assert_eq!(c.cooldown, expected, "{text}");
    }
    assert_eq!(
        table::by_text("no credentials").map(|r| r.action),
        Some(Action::Fixed(120_000))
    );
    assert_eq!(
        table::by_text("request not allowed").map(|r| r.action),
        Some(Action::Fixed(5_000))
    );
}

#[test]
fn error_rules_status_entries() {
    for (status, rule) in table::STATUS_RULES {
        // A local provider: no API-key 403 row, no OAuth ban streak.
        let local = ClassifyInput {
            category: ProviderCategory::Local,
            ..apikey(status, "")
        };
        let c = classify(&local);
        assert_eq!(rule_id(&c), rule.id, "{status}");
        assert_eq!(c.reason, rule.reason, "{status}");
    }
    let local = |status| ClassifyInput {
        category: ProviderCategory::Local,
        ..apikey(status, "")
    };
    let c = classify(&local(404));
    assert_eq!(
        (c.cooldown, c.scope),
        (CooldownHint::Fixed(120_000), LockScope::Model)
    );
    let c = classify(&local(403));
    assert_eq!(
        (c.cooldown, c.reason),
        (CooldownHint::None, FailureReason::QuotaExhausted)
    );
    let c = classify(&local(402));
    assert_eq!(
        (c.cooldown, c.terminal),
        (CooldownHint::None, TerminalSignal::CreditsExhausted)
    );
    let c = classify(&local(401));
    assert_eq!(
        (c.cooldown, c.terminal),
        (CooldownHint::ScaledBackoff, TerminalSignal::AuthFailure)
    );
}

// ---------------------------------------------------------------------------------------------
// Built-in provider rules.

#[test]
fn openrouter_402_is_credits_exhausted_on_the_connection() {
    let c = classify(&ClassifyInput {
        provider_id: "openrouter",
        ..apikey(402, "Payment needed")
    });
    assert_eq!(rule_id(&c), "openrouter-credit-exhausted-402");
    assert_eq!(c.terminal, TerminalSignal::CreditsExhausted);
    assert_eq!(
        (c.cooldown, c.scope),
        (CooldownHint::None, LockScope::Connection)
    );
}

#[test]
fn opencode_rules() {
    let oc = |status, text| ClassifyInput {
        provider_id: "opencode-go",
        ..apikey(status, text)
    };
    let monthly = "[429] Monthly usage limit reached. Resets in 13 days. To continue …";
    let c = classify(&oc(429, monthly));
    assert_eq!(rule_id(&c), "opencode-monthly-quota-resets-in");
    assert_eq!(c.cooldown, CooldownHint::Upstream(13 * DAY));
    assert_eq!(
        (c.reason, c.scope),
        (FailureReason::QuotaExhausted, LockScope::Connection)
    );

    let headers = [("X-RateLimit-Remaining-Requests", "0")];
    let c = classify(&ClassifyInput {
        headers: &headers,
        ..oc(429, "rate limit reached")
    });
    assert_eq!(rule_id(&c), "opencode-quota-exhausted-headers");
    assert_eq!(
        (c.reason, c.scope),
        (FailureReason::QuotaExhausted, LockScope::Connection)
    );

    let c = classify(&oc(429, r#"{"error":{"code":"plan_limit_reached"}}"#));
    assert_eq!(rule_id(&c), "opencode-quota-exhausted-body");

    let c = classify(&oc(400, "The endpoint is unavailable"));
    assert_eq!(rule_id(&c), "opencode-endpoint-unavailable");
    assert_eq!(
        (c.cooldown, c.scope),
        (CooldownHint::Fixed(300_000), LockScope::Model)
    );

    let c = classify(&oc(400, "Upstream request failed: model is unavailable."));
    assert_eq!(rule_id(&c), "opencode-400-model-unavailable");
    assert_eq!(c.cooldown, CooldownHint::Fixed(3_600_000));

    // Other providers never see these rules.
    let c = classify(&apikey(429, monthly));
    assert_ne!(rule_id(&c), "opencode-monthly-quota-resets-in");
}

#[test]
fn minimax_per_model_quota_header() {
    let headers = [("x-model-quota-remaining", "haiku=0, sonnet=42")];
    let c = classify(&ClassifyInput {
        provider_id: "minimax",
        headers: &headers,
        ..apikey(429, "rate limit exceeded")
    });
    assert_eq!(rule_id(&c), "minimax-per-model-quota");
    assert_eq!(
        (c.reason, c.scope),
        (FailureReason::QuotaExhausted, LockScope::Model)
    );
}

#[test]
fn cloudflare_ai_daily_allocation_locks_until_midnight() {
    let text = "you have used up your daily free allocation of 10,000 neurons";
    let c = classify(&ClassifyInput {
        provider_id: "cloudflare-ai",
        ..apikey(429, text)
    });
    assert_eq!(rule_id(&c), "cloudflare-ai-daily-neuron-allocation");
    assert!(c.daily_quota);
    assert_eq!(c.cooldown, CooldownHint::Fixed(UNTIL_MIDNIGHT));
}

#[test]
fn agentrouter_quota_after_restatement_and_model_access() {
    let rules = [RestatementRule::new(
        "agentrouter-quota-misstatus",
        vec![400, 403],
        429,
        ["额度不足"],
        ["无权访问"],
        Some(60_000),
    )];
    let body = r#"{"error":{"message":"用户额度不足","type":"insufficient_user_quota"}}"#;
    let restated = restate(403, "", body, &rules, None).expect("restated");
    assert_eq!(
        (restated.status, restated.retry_after_ms),
        (429, Some(60_000))
    );
    let c = classify(&ClassifyInput {
        provider_id: "agentrouter",
        ..apikey(restated.status, body)
    });
    assert_eq!(rule_id(&c), "agentrouter-user-quota-exhausted");
    assert_eq!(
        (c.reason, c.scope),
        (FailureReason::QuotaExhausted, LockScope::Connection)
    );
    assert_eq!(c.breaker, BreakerOutcome::Ignore);

    let denied = "无权访问模型 claude-sonnet-4";
    assert_eq!(restate(403, denied, "", &rules, None), None);
    let c = classify(&ClassifyInput {
        provider_id: "agentrouter",
        ..apikey(403, denied)
    });
    assert_eq!(rule_id(&c), "agentrouter-model-access-denied");
    assert_eq!(
        (c.reason, c.scope),
        (FailureReason::AuthError, LockScope::Model)
    );
    assert_eq!(c.cooldown, CooldownHint::Fixed(6 * 3_600_000));
    assert_eq!(c.terminal, TerminalSignal::None);
}

// ---------------------------------------------------------------------------------------------
// Operator rules (Switchyard decisions).

#[test]
fn operator_rule_applies_to_a_400() {
    let rules = [ErrorRule::new(
        400,
        "Model Is Warming Up",
        LockScope::Model,
        FailureReason::ModelCapacity,
        Some(30_000),
    )];
    let c = classify(&ClassifyInput {
        operator_rules: &rules,
        ..apikey(400, "error: model is warming up, retry shortly")
    });
    assert_eq!(c.rule, MatchedRule::Operator(0));
    assert_eq!(rule_id(&c), "error_rules[0]");
    assert!(c.should_fallback);
    assert_eq!(
        (c.scope, c.cooldown),
        (LockScope::Model, CooldownHint::Fixed(30_000))
    );
    assert_eq!(c.reason, FailureReason::ModelCapacity);
    // Without the rule an unrecognised 400 only moves a combo on; it cools nothing and the
    // other connections of the target are not tried.
    let c = classify(&apikey(400, "error: model is warming up, retry shortly"));
    assert!(c.next_target_only() && c.cooldown == CooldownHint::None);
}

#[test]
fn operator_connection_quota_rule_is_never_terminal() {
    let rules = [ErrorRule::new(
        402,
        "",
        LockScope::Connection,
        FailureReason::QuotaExhausted,
        Some(600_000),
    )];
    let c = classify(&ClassifyInput {
        operator_rules: &rules,
        ..apikey(402, "credit_balance_too_low")
    });
    assert_eq!(c.terminal, TerminalSignal::None);
    assert_eq!(c.cooldown, CooldownHint::Fixed(600_000));
    assert_eq!(c.scope, LockScope::Connection);
    // Even over ban wording: the operator said what this error means.
    let rules = [ErrorRule::new(
        403,
        "account has been disabled",
        LockScope::Connection,
        FailureReason::QuotaExhausted,
        None,
    )];
    let c = classify(&ClassifyInput {
        operator_rules: &rules,
        upstream_hint_ms: Some(42_000),
        ..apikey(403, "Your account has been disabled until tomorrow")
    });
    assert_eq!(c.terminal, TerminalSignal::None);
    // No cooldown in the rule: the upstream hint, else the scaled backoff.
    assert_eq!(c.cooldown, CooldownHint::Upstream(42_000));
}

#[test]
fn operator_rule_from_the_example_config_beats_generic_rows() {
    let toml = r#"
        status = 429
        match = "monthly usage limit reached"
        scope = "connection"
        reason = "quota_exhausted"
        cooldown_ms = 3600000
    "#;
    let rule: ErrorRule = toml::from_str(toml).expect("valid rule");
    let rules = [rule];
    let text = "Monthly usage limit reached. Resets in 13 days.";
    let c = classify(&ClassifyInput {
        operator_rules: &rules,
        ..apikey(429, text)
    });
    assert_eq!(c.rule, MatchedRule::Operator(0));
    assert_eq!(c.cooldown, CooldownHint::Fixed(3_600_000));
    // Status must match too; otherwise the table decides.
    let c = classify(&ClassifyInput {
        operator_rules: &rules,
        ..apikey(403, text)
    });
    assert_ne!(c.rule, MatchedRule::Operator(0));
    // First match wins.
    let two = [
        ErrorRule::new(
            500,
            "boom",
            LockScope::Provider,
            FailureReason::ServerError,
            None,
        ),
        ErrorRule::new(500, "", LockScope::Connection, FailureReason::Unknown, None),
    ];
    let c = classify(&ClassifyInput {
        operator_rules: &two,
        ..apikey(500, "BOOM")
    });
    assert_eq!(
        (c.rule, c.scope),
        (MatchedRule::Operator(0), LockScope::Provider)
    );
    // A 500 is still a provider failure for the breaker.
    assert_eq!(c.breaker, TRIP);
}

#[test]
fn operator_rule_config_shape() {
    let rule: ErrorRule =
        toml::from_str("status = 400\nmatch = \"ABC\"\nscope = \"model\"").expect("valid");
    assert_eq!(rule.match_text(), "abc");
    assert_eq!(rule.reason(), FailureReason::Unknown);
    assert_eq!(rule.cooldown_ms(), None);
    assert!(toml::from_str::<ErrorRule>("status = 400\nscope = \"model\"\nmatc = \"x\"").is_err());
    assert!(toml::from_str::<ErrorRule>("status = 400\nscope = \"everything\"").is_err());
}

// ---------------------------------------------------------------------------------------------
// The reference's account-fallback-service cases.

/// Classifies with the hint parsed from `headers` and `text`, as the router does.
fn with_headers<'a>(base: ClassifyInput<'a>, headers: &'a [(&'a str, &'a str)]) -> Classification {
    let hint = hints::upstream_hint(headers, base.error_text, NOW);
    classify(&ClassifyInput {
        headers,
        upstream_hint_ms: hint,
        ..base
    })
}

#[test]
fn service_free_tier_exhausted_is_credits() {
    let c = classify(&ClassifyInput {
        provider_id: "",
        ..apikey(429, "free tier of the model has been exhausted")
    });
    assert_eq!(c.terminal, TerminalSignal::CreditsExhausted);
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
}

#[test]
fn service_apikey_429_credit_text_stays_a_rate_limit() {
    let c = classify(&ClassifyInput {
        use_upstream_retry_hints: false,
        ..apikey(429, "credit_balance_too_low")
    });
    assert_eq!(c.reason, FailureReason::RateLimitExceeded);
    assert_eq!(c.terminal, TerminalSignal::None);
    assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
}

#[test]
fn service_oauth_429_credit_text_is_credits() {
    let c = classify(&ClassifyInput {
        provider_id: "codex",
        ..oauth(429, "credit_balance_too_low")
    });
    assert_eq!(c.terminal, TerminalSignal::CreditsExhausted);
}

#[test]
fn service_apikey_429_explicit_quota_text_is_a_quota() {
    let c = classify(&apikey(429, "quota exceeded"));
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
    assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
}

#[test]
fn service_retry_after_seconds() {
    let c = with_headers(apikey(429, "Rate limit hit"), &[("retry-after", "120")]);
    assert_eq!(c.reason, FailureReason::RateLimitExceeded);
    assert_eq!(c.cooldown, CooldownHint::Upstream(120_000));
}

#[test]
fn service_retry_after_http_date() {
    let c = with_headers(
        apikey(429, "Rate limit hit"),
        &[("Retry-After", "Tue, 14 Nov 2023 22:14:50 GMT")],
    );
    assert_eq!(c.cooldown, CooldownHint::Upstream(90_000));
}

#[test]
fn service_x_ratelimit_reset_seconds_on_5xx() {
    let reset = ((NOW + 90_000) / 1000).to_string();
    let c = with_headers(
        apikey(503, "upstream unavailable"),
        &[("x-ratelimit-reset", &reset)],
    );
    assert_eq!(c.reason, FailureReason::ServerError);
    assert_eq!(c.cooldown, CooldownHint::Upstream(90_000));
    assert_eq!(c.breaker, TRIP);
}

#[test]
fn service_x_ratelimit_reset_millis() {
    let reset = (NOW + 45_000).to_string();
    let c = with_headers(apikey(429, ""), &[("X-RateLimit-Reset", &reset)]);
    assert_eq!(c.cooldown, CooldownHint::Upstream(45_000));
}

#[test]
fn service_oauth_ignores_retry_after_by_default() {
    let c = with_headers(oauth(429, "Rate limit hit"), &[("retry-after", "120")]);
    assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
}

#[test]
fn service_parse_cap_is_30_days() {
    let text = "Quota exceeded. Resets in 999999h";
    let c = with_headers(
        ClassifyInput {
            use_upstream_retry_hints: true,
            ..oauth(429, text)
        },
        &[],
    );
    assert_eq!(rule_id(&c), "row10_quota_reset_hint");
    assert_eq!(c.cooldown, CooldownHint::Upstream(30 * DAY));
}

#[test]
fn service_antigravity_quota_locks_for_the_full_window() {
    let text = "Individual quota reached. Contact your administrator to enable overages. \
                Resets in 164h27m24s.";
    let base = ClassifyInput {
        provider_id: "antigravity",
        use_upstream_retry_hints: true,
        ..oauth(429, text)
    };
    let c = with_headers(base, &[]);
    assert!(c.should_fallback);
    assert_eq!(c.reason, FailureReason::QuotaExhausted);
    assert_eq!(
        c.cooldown,
        CooldownHint::Upstream((164 * 3600 + 27 * 60 + 24) * 1000)
    );
}

#[test]
fn service_scaled_429_defers_to_the_cap_but_retry_after_bypasses_it() {
    // 8396: the scaled backoff is capped by the cooldown policy; an upstream value is not.
    let c = classify(&apikey(429, "slow down"));
    assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
    let c = with_headers(apikey(429, "slow down"), &[("retry-after", "7200")]);
    assert_eq!(c.cooldown, CooldownHint::Upstream(7_200_000));
}

#[test]
fn service_unauthorized_counts_towards_expired() {
    let c = classify(&oauth(401, "Unauthorized"));
    assert_eq!(c.reason, FailureReason::AuthError);
    assert_eq!(c.terminal, TerminalSignal::AuthFailure);
    assert_eq!(c.cooldown, CooldownHint::ScaledBackoff);
    assert_eq!(c.scope, LockScope::Connection);
    assert_eq!(c.breaker, BreakerOutcome::Ignore);
}

#[test]
fn service_404_locks_the_model() {
    let c = classify(&apikey(404, "model not found"));
    assert_eq!(
        (c.scope, c.cooldown),
        (LockScope::Model, CooldownHint::Fixed(120_000))
    );
    assert_eq!(c.breaker, BreakerOutcome::Ignore);
}

#[test]
fn service_lock_scope_by_provider_and_combo() {
    assert_eq!(classify(&apikey(429, "")).scope, LockScope::Connection);
    let per_model = ClassifyInput {
        per_model_quota: true,
        ..apikey(429, "")
    };
    assert_eq!(classify(&per_model).scope, LockScope::Model);
    let per_model_5xx = ClassifyInput {
        per_model_quota: true,
        ..apikey(502, "")
    };
    assert_eq!(classify(&per_model_5xx).scope, LockScope::Model);
    let combo = ClassifyInput {
        is_combo: true,
        ..apikey(429, "")
    };
    assert_eq!(classify(&combo).scope, LockScope::Model);
    // A combo's 429 that is a quota still cools the connection.
    let combo_quota = ClassifyInput {
        is_combo: true,
        ..apikey(429, "quota exceeded")
    };
    assert_eq!(classify(&combo_quota).scope, LockScope::Connection);
}

#[test]
fn service_request_scoped_failures_never_trip_the_breaker() {
    let flagged = ClassifyInput {
        request_scoped: true,
        ..apikey(502, "empty response")
    };
    assert_eq!(classify(&flagged).breaker, BreakerOutcome::Ignore);
    let by_code = ClassifyInput {
        structured: StructuredError {
            code: Some("context_length_exceeded"),
            error_type: None,
        },
        ..apikey(500, "")
    };
    assert_eq!(classify(&by_code).breaker, BreakerOutcome::Ignore);
    assert!(classify(&by_code).should_fallback);
}

#[test]
fn service_empty_text_5xx_is_a_transient_failure() {
    let c = classify(&apikey(500, ""));
    assert_eq!(c.reason, FailureReason::ServerError);
    assert_eq!(c.breaker, TRIP);
    assert_eq!(c.retry, RetryClass::Retryable);
}

// ---------------------------------------------------------------------------------------------
// The breaker trigger set and transport failures.

#[test]
fn status_429_never_trips_the_breaker() {
    assert_eq!(breaker_outcome_for(429, None), BreakerOutcome::Ignore);
    for text in [
        "",
        "rate limit",
        "quota exceeded",
        "usage limit reached",
        "overloaded",
    ] {
        assert_eq!(
            classify(&apikey(429, text)).breaker,
            BreakerOutcome::Ignore,
            "{text}"
        );
        assert_eq!(
            classify(&oauth(429, text)).breaker,
            BreakerOutcome::Ignore,
            "{text}"
        );
    }
}

#[test]
fn trigger_statuses_trip_the_breaker() {
    for status in [408, 500, 502, 503, 504] {
        assert_eq!(breaker_outcome_for(status, None), TRIP, "{status}");
        assert_eq!(classify(&apikey(status, "")).breaker, TRIP, "{status}");
    }
    for status in [400, 401, 402, 403, 404, 409, 422, 501, 529] {
        assert_eq!(
            breaker_outcome_for(status, None),
            BreakerOutcome::Ignore,
            "{status}"
        );
    }
    assert_eq!(breaker_outcome_for(200, None), BreakerOutcome::Success);
}

#[test]
fn transport_failures() {
    use TransportFailure as T;
    for (t, trips, cooldown) in [
        (T::ConnectRefused, true, CooldownHint::ScaledBackoff),
        (T::ConnectionReset, true, CooldownHint::ScaledBackoff),
        (T::Timeout, true, CooldownHint::ScaledBackoff),
        (T::IdleTimeout, true, CooldownHint::ScaledBackoff),
        (T::ReadinessTimeout, false, CooldownHint::None),
        (T::EarlyEof, false, CooldownHint::None),
        (T::Stall, false, CooldownHint::None),
    ] {
        let c = classify(&ClassifyInput {
            transport: Some(t),
            ..apikey(0, "")
        });
        assert!(c.should_fallback, "{t:?}");
        assert_eq!(c.retry, RetryClass::BeforeFirstByteOnly, "{t:?}");
        assert_eq!(c.cooldown, cooldown, "{t:?}");
        assert_eq!(c.breaker == TRIP, trips, "{t:?}");
        assert_eq!(breaker_outcome_for(0, Some(t)), c.breaker);
        assert_eq!(rule_id(&c), t.as_str());
    }
    // A transport failure wins over any status the caller left in the input.
    let abort = ClassifyInput {
        transport: Some(T::ClientAbort),
        ..apikey(503, "")
    };
    let c = classify(&abort);
    assert!(!c.should_fallback);
    assert_eq!(c.retry, RetryClass::NotRetryable);
    assert_eq!(c.breaker, BreakerOutcome::Ignore);
}

// ---------------------------------------------------------------------------------------------
// Properties.

fn category() -> impl Strategy<Value = ProviderCategory> {
    prop::sample::select(vec![
        ProviderCategory::Oauth,
        ProviderCategory::Apikey,
        ProviderCategory::Local,
    ])
}

fn transport() -> impl Strategy<Value = Option<TransportFailure>> {
    use TransportFailure as T;
    prop::option::weighted(
        0.2,
        prop::sample::select(vec![
            T::ConnectRefused,
            T::ConnectionReset,
            T::Timeout,
            T::ReadinessTimeout,
            T::EarlyEof,
            T::IdleTimeout,
            T::Stall,
            T::ClientAbort,
        ]),
    )
}

/// Error text that often contains the signals the table looks for.
fn error_text() -> impl Strategy<Value = String> {
    let signal = prop::sample::select(vec![
        "rate limit",
        "quota exceeded",
        "usage limit reached",
        "account has been disabled",
        "credit_balance_too_low",
        "today's quota",
        "weekly usage limit",
        "resets in 3h",
        "model not found",
        "context window",
        "error 1010",
        "额度不足",
        "\"retryable\": false",
        "please retry in 5s",
        "invalid api key",
        "capacity",
        "not authorized for this route",
    ]);
    (
        any::<String>(),
        prop::collection::vec(signal, 0..4),
        any::<String>(),
    )
        .prop_map(|(a, signals, b)| format!("{a}{}{b}", signals.concat()))
}

proptest! {
    #[test]
    fn classification_never_panics_and_keeps_its_invariants(
        status in prop_oneof![any::<u16>(), prop::sample::select(vec![
            400u16, 401, 402, 403, 404, 406, 408, 409, 429, 500, 502, 503, 504,
        ])],
        transport in transport(),
        text in error_text(),
        header_name in prop::sample::select(vec![
            "retry-after", "x-ratelimit-reset", "x-ratelimit-remaining-requests",
            "x-model-quota-remaining", "x-switchyard-fallback-hint", "anything",
        ]),
        header_value in any::<String>(),
        provider in prop::sample::select(vec![
            "", "openai", "gemini", "claude", "openrouter", "opencode", "minimax",
            "cloudflare-ai", "agentrouter", "openai-compatible-x",
        ]),
        category in category(),
        flags in any::<[bool; 4]>(),
        hint in any::<Option<u64>>(),
        now in any::<u64>(),
        rule_status in prop::sample::select(vec![400u16, 402, 429, 500]),
        rule_text in any::<String>(),
        code in prop::option::of(prop::sample::select(vec![
            "model_not_found", "context_length_exceeded", "permission_error", "x",
        ])),
    ) {
        let headers = [(header_name, header_value.as_str())];
        let rules = [ErrorRule::new(
            rule_status, &rule_text, LockScope::Connection, FailureReason::QuotaExhausted, None,
        )];
        let input = ClassifyInput {
            status,
            transport,
            error_text: &text,
            body: &text,
            structured: StructuredError { code, error_type: code },
            headers: &headers,
            upstream_hint_ms: hint,
            provider_id: provider,
            category,
            per_model_quota: flags[0],
            use_upstream_retry_hints: flags[1],
            operator_rules: if flags[2] { &rules } else { &[] },
            now_epoch_ms: now,
            is_combo: flags[3],
            request_scoped: false,
            operator_veto: false,
        };
        let c = classify(&input);
        if matches!(c.terminal, TerminalSignal::Banned | TerminalSignal::CreditsExhausted) {
            prop_assert_eq!(c.cooldown, CooldownHint::None);
        }
        if let CooldownHint::Upstream(ms) = c.cooldown {
            prop_assert!(ms > 0 && ms <= MAX_HINT_MS);
        }
        if let Some(ms) = c.reset_hint_ms {
            prop_assert!(ms > 0 && ms <= MAX_HINT_MS);
        }
        if !c.should_fallback {
            prop_assert_eq!(c.retry, RetryClass::NotRetryable);
            prop_assert_eq!(c.terminal, TerminalSignal::None);
        }
        if let BreakerOutcome::Failure(_) = c.breaker {
            prop_assert!(
                transport.is_some() || matches!(status, 408 | 500 | 502 | 503 | 504),
                "breaker failure for status {}", status
            );
        }
        if status == 429 && transport.is_none() {
            prop_assert_eq!(c.breaker, BreakerOutcome::Ignore);
        }
        if let MatchedRule::Operator(_) = c.rule {
            prop_assert_eq!(c.terminal, TerminalSignal::None);
        }
        prop_assert_eq!(c, classify(&input), "classification is deterministic");
    }
}
