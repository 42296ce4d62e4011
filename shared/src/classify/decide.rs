//! The HTTP decision table: the reference's 18 rows in order, with Switchyard's operator and
//! provider rules slotted in (see the parent module docs), then terminal resolution, scoping
//! and the breaker view.

use super::patterns as p;
use super::structured::{self, Signals, Verdict};
use super::table::{self, Action, RuleContext};
use super::{
    CONCURRENCY_COOLDOWN_MS, Classification, ClassifyInput, MatchedRule, SERVICE_COOLDOWN_MS,
    SERVICE_HINT_HEADER, SESSION_COOLDOWN_MS, SUBSCRIPTION_COOLDOWN_MS, WEEKLY_COOLDOWN_MS,
    breaker_outcome_for,
};
use crate::Millis;
use crate::hints::{self, MAX_HINT_MS, bounded};
use crate::outcome::{
    BreakerOutcome, CooldownHint, FailureReason, LockScope, ProviderCategory, RetryClass,
    TerminalSignal,
};

/// The rule of a 400 that neither names the body nor any other signal: a combo moves on to its
/// next target, a direct request answers with it.
pub const GENERIC_400_RULE: &str = "row17_generic_400";

/// The rule of a 400 that says the request declares too many tools: a combo moves on, and
/// the provider's limit for the model is recorded.
pub const TOOL_LIMIT_RULE: &str = "tool_limit_400";

/// The rule of a body an operator's exclude marker vetoed: read by its status alone.
pub const OPERATOR_VETO_RULE: &str = "operator_exclude_marker";

/// Structured codes that mark a failure as about the request, not the provider.
const REQUEST_SCOPED_CODES: [&str; 8] = [
    "context_length_exceeded",
    "upstream_empty_response",
    "upstream_response_failed",
    "string_above_max_length",
    "invalid_prompt",
    "content_filter",
    "content_policy_violation",
    "unsupported_parameter",
];

/// Classifies an HTTP error response (no transport failure).
pub(super) fn classify_status(input: &ClassifyInput<'_>) -> Classification {
    let lowered = bounded(input.error_text).to_lowercase();
    let signals = structured::read(input.body, input.provider_id);
    let ctx = Ctx {
        input,
        t: &lowered,
        signals: &signals,
        structured: structured::precedence(&signals),
        quota_signals: input.status != 429
            || input.provider_id.is_empty()
            || input.category == ProviderCategory::Oauth
            || p::looks_like_quota_exhausted(&lowered),
    };
    finish(&ctx, decide(&ctx))
}

struct Ctx<'a> {
    input: &'a ClassifyInput<'a>,
    /// The error text, bounded and lower-cased.
    t: &'a str,
    /// The body's documented fields, and the precedence row they match (read before text).
    signals: &'a Signals,
    structured: Option<&'static structured::Row>,
    /// The reference's `shouldUseQuotaSignal`: quota rows may run. False only for an API-key
    /// 429 whose text does not name a long-period cap (a plain rate limit).
    quota_signals: bool,
}

/// Evidence towards a terminal signal, resolved once at the end (the reference's step 9).
#[derive(Debug, Clone, Copy, Default)]
struct Evidence {
    credits: bool,
    permanent: bool,
    rejected: bool,
    /// The credential is refused on a status other than 401 (Google's invalid key is a
    /// 400): the same auth failure a 401 signals.
    auth: bool,
}

/// A decision before terminal resolution, scoping and the breaker view.
#[derive(Debug, Clone, Copy)]
struct Draft {
    fallback: bool,
    reason: FailureReason,
    cooldown: CooldownHint,
    scope: Option<LockScope>,
    evidence: Evidence,
    daily_quota: bool,
    skip_breaker: bool,
    request_scoped: bool,
    reset_hint_ms: Option<Millis>,
    rule: MatchedRule,
    operator: bool,
    /// An operator or provider rule chose `scope`: the lockout keeps it exactly.
    rule_scope: bool,
}

impl Draft {
    fn new(rule: &'static str, reason: FailureReason, cooldown: CooldownHint) -> Self {
        Self {
            fallback: true,
            reason,
            cooldown,
            scope: None,
            evidence: Evidence::default(),
            daily_quota: false,
            skip_breaker: false,
            request_scoped: false,
            reset_hint_ms: None,
            rule: MatchedRule::Builtin(rule),
            operator: false,
            rule_scope: false,
        }
    }

    fn no_fallback(rule: &'static str) -> Self {
        Self {
            fallback: false,
            ..Self::new(rule, FailureReason::Unknown, CooldownHint::None)
        }
    }
}

impl Ctx<'_> {
    /// The upstream hint, if the profile lets it replace the backoff.
    fn usable_hint(&self) -> Option<Millis> {
        let i = self.input;
        i.upstream_hint_ms
            .filter(|ms| i.use_upstream_retry_hints && *ms > 0)
            .map(|ms| ms.min(MAX_HINT_MS))
    }

    /// The reference's `buildRetryableFallback`: the upstream hint, else the scaled backoff.
    fn hinted_or_scaled(&self) -> CooldownHint {
        self.usable_hint()
            .map_or(CooldownHint::ScaledBackoff, CooldownHint::Upstream)
    }

    fn retryable(&self, rule: &'static str, reason: FailureReason) -> Draft {
        Draft::new(rule, reason, self.hinted_or_scaled())
    }

    fn cooldown_for(&self, action: Action) -> CooldownHint {
        match action {
            Action::Backoff => self.hinted_or_scaled(),
            Action::Fixed(0) => CooldownHint::None,
            Action::Fixed(ms) => CooldownHint::Fixed(ms),
            Action::Upstream(ms) => CooldownHint::Upstream(ms.min(MAX_HINT_MS)),
        }
    }
}

/// The decision table, first match wins.
fn decide(c: &Ctx<'_>) -> Draft {
    use FailureReason::*;
    let i = c.input;
    let t = c.t;
    let status = i.status;

    // Row 1: a supervised local service is not running yet. Cool the connection briefly; the
    // provider is not at fault.
    if status == 503
        && hints::header(i.headers, SERVICE_HINT_HEADER)
            .is_some_and(|v| v.eq_ignore_ascii_case("connection_cooldown"))
    {
        let cooldown = CooldownHint::Fixed(SERVICE_COOLDOWN_MS);
        return Draft {
            skip_breaker: true,
            ..Draft::new("row01_service_connection_cooldown", ServerError, cooldown)
        };
    }

    // Row 2 (key-rotation gate): not applicable.

    // Operator rules: every status, full text, never terminal.
    if let Some((index, rule)) = i
        .operator_rules
        .iter()
        .enumerate()
        .find(|(_, r)| r.matches(status, t))
    {
        let cooldown = match rule.cooldown_ms() {
            Some(0) => CooldownHint::None,
            Some(ms) => CooldownHint::Fixed(ms),
            None => c.hinted_or_scaled(),
        };
        return Draft {
            scope: Some(rule.scope()),
            rule: MatchedRule::Operator(index),
            operator: true,
            rule_scope: true,
            ..Draft::new("", rule.reason(), cooldown)
        };
    }

    // An operator's exclude marker says what this body is: no built-in reading of its text
    // (quota, credits, provider rules) applies. It is the status alone, relayed: no cooldown,
    // no terminal state; a combo moves on.
    if i.operator_veto {
        let reason = if matches!(status, 401 | 403) {
            AuthError
        } else {
            Unknown
        };
        return Draft {
            scope: Some(LockScope::Connection),
            ..Draft::new(OPERATOR_VETO_RULE, reason, CooldownHint::None)
        };
    }

    // Structure before text: the fields the provider's API documents decide first.
    let compatible = i.provider_id.starts_with("openai-compatible-")
        || i.provider_id.starts_with("anthropic-compatible-");
    if let Some(row) = c.structured {
        match row.verdict {
            Verdict::RateLimit => {
                let hint = c
                    .signals
                    .retry_info_ms
                    .or(i.upstream_hint_ms)
                    .filter(|ms| i.use_upstream_retry_hints && *ms > 0)
                    .map(|ms| ms.min(MAX_HINT_MS));
                let cooldown = hint.map_or(CooldownHint::ScaledBackoff, CooldownHint::Upstream);
                return Draft::new(row.id, RateLimitExceeded, cooldown);
            }
            Verdict::DailyQuota => {
                let until_reset = hints::ms_until_utc_midnight(i.now_epoch_ms)
                    .max(c.signals.retry_info_ms.unwrap_or(0))
                    .min(MAX_HINT_MS);
                return Draft {
                    scope: Some(LockScope::Model),
                    daily_quota: true,
                    reset_hint_ms: Some(until_reset),
                    rule_scope: true,
                    ..Draft::new(row.id, QuotaExhausted, CooldownHint::Fixed(until_reset))
                };
            }
            Verdict::Credits if !compatible => {
                let evidence = Evidence {
                    credits: true,
                    ..Evidence::default()
                };
                return Draft {
                    evidence,
                    ..Draft::new(row.id, QuotaExhausted, CooldownHint::None)
                };
            }
            Verdict::RequestScoped => return request_scoped_draft(row.id),
            Verdict::AuthFailure => {
                let evidence = Evidence {
                    auth: true,
                    ..Evidence::default()
                };
                return Draft {
                    evidence,
                    ..c.retryable(row.id, AuthError)
                };
            }
            Verdict::Credits | Verdict::NotCredits => {}
        }
    }
    let credits_text_allowed = !c
        .structured
        .is_some_and(|r| r.verdict == Verdict::NotCredits);

    // Row 3: the account is deactivated or suspended for good.
    if p::account_deactivated(t) {
        let evidence = Evidence {
            permanent: true,
            ..Evidence::default()
        };
        return Draft {
            evidence,
            ..Draft::new("row03_account_deactivated", AuthError, CooldownHint::None)
        };
    }

    // Built-in provider rules.
    let rule_ctx = RuleContext {
        status,
        lowered: t,
        headers: i.headers,
        now_epoch_ms: i.now_epoch_ms,
    };
    if let Some(m) = table::provider_rule(i.provider_id, &rule_ctx) {
        // A quota window (a daily allocation, Codex's 5-hour and weekly limits) is like rows
        // 6–9: not subject to the hints setting, and the model lockout lasts as long.
        let (cooldown, reset_hint_ms) = match m.action {
            table::Action::Upstream(ms) if m.window => {
                let ms = ms.min(MAX_HINT_MS);
                (CooldownHint::Fixed(ms), (ms > 0).then_some(ms))
            }
            action => (c.cooldown_for(action), None),
        };
        return Draft {
            scope: Some(m.scope),
            daily_quota: m.daily_quota,
            reset_hint_ms,
            rule_scope: true,
            ..Draft::new(m.id, m.reason, cooldown)
        };
    }

    // Row 4: Gemini names the violated metric; per-day is a quota, per-minute a rate limit.
    // (The reference's fallback to local per-model request counters is not ported.)
    if i.provider_id == "gemini" && status == 429 {
        match p::gemini_metric(t) {
            Some(p::GeminiMetric::PerDay) => {
                return c.retryable("row04_gemini_per_day", QuotaExhausted);
            }
            Some(p::GeminiMetric::PerMinute) => {
                return c.retryable("row04_gemini_per_minute", RateLimitExceeded);
            }
            None => {}
        }
    }

    // Row 5: billing credits exhausted. `*-compatible-*` providers multiplex upstreams, so a
    // credits message there is about one model's backend, not the connection.
    if c.quota_signals && credits_text_allowed && p::credits_exhausted(t) && !compatible {
        let evidence = Evidence {
            credits: true,
            ..Evidence::default()
        };
        return Draft {
            evidence,
            ..Draft::new(
                "row05_credits_exhausted",
                QuotaExhausted,
                CooldownHint::None,
            )
        };
    }

    // The upstream's stated reset, whether or not the profile lets it set the cooldown: a
    // retry header or the body, else the reset of a window the quota headers say is spent.
    let stated_reset = i
        .upstream_hint_ms
        .filter(|ms| *ms > 0)
        .or_else(|| table::spent_window_reset(i.headers, i.now_epoch_ms))
        .map(|ms| ms.min(MAX_HINT_MS));

    // Rows 6–9 are quota windows, not hints: they set their window whatever
    // `use_upstream_retry_hints` says (that setting governs only generic hints on transient
    // 429s), and a reset the upstream stated wins over the row's fixed window. The window is
    // a rule-chosen duration ([`CooldownHint::Fixed`]: applied on every profile, not cut by
    // `max_cooldown_ms`, backoff level kept) and also the reset a model lockout lasts until.
    let window = |rule: &'static str, fixed_ms: Millis| {
        let ms = stated_reset.unwrap_or(fixed_ms);
        Draft {
            reset_hint_ms: (ms > 0).then_some(ms),
            ..Draft::new(rule, QuotaExhausted, CooldownHint::Fixed(ms))
        }
    };

    // Row 6: a daily quota, until the next UTC midnight.
    if c.quota_signals && p::daily_quota(t) {
        let until_midnight = hints::ms_until_utc_midnight(i.now_epoch_ms);
        return Draft {
            daily_quota: true,
            ..window("row06_daily_quota", until_midnight)
        };
    }

    // Row 9 ahead of row 7 when the text names the five-hour window itself ("5-hour usage
    // limit reached" also says "usage limit reached").
    if p::five_hour_window(t) {
        return window("row09_session_quota", SESSION_COOLDOWN_MS);
    }

    // Row 7: a subscription window: the upstream's reset, else an hour.
    if c.quota_signals && p::subscription_quota(t, i.provider_id) {
        return window("row07_subscription_quota", SUBSCRIPTION_COOLDOWN_MS);
    }

    // Rows 8 and 9: weekly and session caps, whatever the category.
    if p::weekly_limit(t) {
        return window("row08_weekly_quota", WEEKLY_COOLDOWN_MS);
    }
    if p::session_limit(t) {
        return window("row09_session_quota", SESSION_COOLDOWN_MS);
    }

    // Row 10: quota text with a reset the upstream stated.
    if c.quota_signals && stated_reset.is_some() && p::text_says_quota(t, i.provider_id) {
        return Draft {
            reset_hint_ms: stated_reset,
            ..c.retryable("row10_quota_reset_hint", QuotaExhausted)
        };
    }

    // Row 11: the key is valid but not for this route (e.g. a model-listing endpoint).
    if status == 403 && t.contains("not authorized for this route") {
        return Draft::no_fallback("row11_route_not_authorized");
    }

    // Row 12: a 403 that is not a quota message.
    if status == 403
        && !p::any(
            t,
            &[
                "has not been used in project",
                "hour quota",
                "quota has been exceeded",
            ],
        )
    {
        if p::cloudflare_non_retryable(t) {
            let evidence = Evidence {
                rejected: true,
                ..Evidence::default()
            };
            return Draft {
                evidence,
                ..Draft::new("row12_request_rejected", AuthError, CooldownHint::None)
            };
        }
        if i.category == ProviderCategory::Apikey {
            return c.retryable("row12_apikey_forbidden", AuthError);
        }
    }

    // OpenAI's "Request too large for gpt-4o … on tokens per min (TPM)": this one request is
    // bigger than the whole per-minute budget, so no wait helps and nothing is throttled.
    // Anthropic's "Extra usage is required for long context requests" on a subscription:
    // this request needs a plan feature, the account is not throttled.
    if status == 429 && (t.contains("request too large") || t.contains("required for long context"))
    {
        return request_scoped_draft("request_larger_than_rate_limit_429");
    }

    // A concurrency cap (GLM's `并发数过高`, "too many concurrent requests") is not a rate
    // window: rest the connection one second, keep its backoff level, never lock the model.
    if status == 429 && p::concurrency_limited(t) {
        return Draft {
            scope: Some(LockScope::Connection),
            ..Draft::new(
                super::CONCURRENCY_RULE,
                RateLimitExceeded,
                CooldownHint::Fixed(CONCURRENCY_COOLDOWN_MS),
            )
        };
    }

    // A 404 that names a route, not a model (`404 page not found`, `{"detail":"Not Found"}`,
    // "Invalid URL (POST /v1/responses)"): this provider does not serve the endpoint the
    // request used. That says nothing about the model or the credential.
    if status == 404 && p::unknown_route(t) {
        return request_scoped_draft(super::ROUTE_NOT_FOUND_RULE);
    }

    // Row 13: the generic ERROR_RULES. A plain API-key 429 is matched by status only, so
    // "quota" words in a rate-limit body do not turn it into a quota.
    let table_rule = if status == 429 && !c.quota_signals {
        table::by_status(429)
    } else {
        table::by_text(t).or_else(|| table::by_status(status))
    };
    if let Some(rule) = table_rule {
        let oauth_forbidden = status == 403
            && i.category == ProviderCategory::Oauth
            && !p::any(t, &["project", "service_disabled"]);
        let evidence = Evidence {
            rejected: oauth_forbidden,
            ..Evidence::default()
        };
        return Draft {
            evidence,
            ..Draft::new(rule.id, rule.reason, c.cooldown_for(rule.action))
        };
    }

    // Row 14 (406/408/429/5xx → retryable) is subsumed by row 13: each of those statuses has
    // a status rule.

    // Too many tools for this provider and model (a 400, or Mistral's 422): another target
    // may take them; its words ("invalid 'tools'") must not read as a body-specific 400.
    if matches!(status, 400 | 422) && super::tool_limit::says_too_many_tools(t) {
        return request_scoped_draft(TOOL_LIMIT_RULE);
    }

    if status == 400 {
        // Row 15: a 400 about this model or this request: move on without cooling anything.
        let access_text = !p::auth_credential_error(t) && p::model_access_denied(t);
        let code = i.structured.code.unwrap_or("");
        let kind = i.structured.error_type.unwrap_or("");
        let structured_access = ["model_not_found", "deployment_not_found"]
            .iter()
            .any(|c| code.eq_ignore_ascii_case(c))
            || kind.eq_ignore_ascii_case("not_found_error")
            || (kind.eq_ignore_ascii_case("permission_error") && access_text);
        if structured_access
            || access_text
            || p::context_overflow(t)
            || p::malformed_request(t)
            || p::param_validation(t)
            || p::nim_function_degraded(t)
        {
            return Draft {
                scope: Some(LockScope::Model),
                request_scoped: true,
                ..Draft::new("row15_model_scoped_400", ModelCapacity, CooldownHint::None)
            };
        }
        // Row 16: throttling reported as a 400.
        if p::rate_limit_text(t) {
            return c.retryable("row16_rate_limited_400", RateLimitExceeded);
        }
        // Row 17: a 400 whose text says what is wrong with the body (the same input fails on
        // every target) stops a combo, as the reference's body-specific 400 does (#4279).
        if p::body_specific_400(t) && !p::google_param_validation(t) {
            return Draft {
                request_scoped: true,
                ..Draft::no_fallback("row17_client_error_400")
            };
        }
        // Any other 400 is recorded and the combo moves on to its next target; the
        // provider's other connections would see the same input, so they are not tried.
        return request_scoped_draft(GENERIC_400_RULE);
    }

    // A payload too large, or an unprocessable request whose text says what is wrong with it
    // (Mistral answers invalid parameters with 422), is about the request, like a 400.
    if status == 413
        || (status == 422
            && (p::context_overflow(t)
                || p::malformed_request(t)
                || p::param_validation(t)
                || p::any(t, &["validation error", "invalid_request", "extra inputs"])))
    {
        return request_scoped_draft("request_scoped_4xx");
    }

    // Row 18: anything else (409, unlisted 5xx …).
    Draft::new("row18_other", Unknown, CooldownHint::ScaledBackoff)
}

/// Terminal resolution, scoping and the breaker view of a decision.
fn finish(c: &Ctx<'_>, d: Draft) -> Classification {
    let i = c.input;
    let terminal = if d.operator || !d.fallback {
        TerminalSignal::None
    } else if d.evidence.credits || i.status == 402 {
        TerminalSignal::CreditsExhausted
    } else if d.evidence.permanent {
        TerminalSignal::Banned
    } else if d.evidence.rejected {
        TerminalSignal::RequestRejected
    } else if i.status == 401 || d.evidence.auth {
        TerminalSignal::AuthFailure
    } else {
        TerminalSignal::None
    };
    let cooldown = match terminal {
        TerminalSignal::Banned | TerminalSignal::CreditsExhausted => CooldownHint::None,
        _ => d.cooldown,
    };
    // Operator rules and terminal signals are never overridden: they are about the credential.
    let request_scoped = !d.operator
        && terminal == TerminalSignal::None
        && (d.request_scoped
            || i.request_scoped
            || i.structured.code.is_some_and(|code| {
                REQUEST_SCOPED_CODES
                    .iter()
                    .any(|c| code.eq_ignore_ascii_case(c))
            })
            // A 5xx whose body says the prompt overflowed the context is the request's fault.
            || (i.status >= 500 && p::context_overflow(c.t)));
    let cooldown = if request_scoped {
        CooldownHint::None
    } else {
        cooldown
    };
    // A terminal signal is about the credential, not the provider (MiniMax answers an empty
    // balance with a 500): it never counts on the breaker.
    let credential_terminal = matches!(
        terminal,
        TerminalSignal::Banned | TerminalSignal::CreditsExhausted
    );
    let breaker = if d.skip_breaker || request_scoped || credential_terminal {
        BreakerOutcome::Ignore
    } else {
        breaker_outcome_for(i.status, None)
    };
    Classification {
        should_fallback: d.fallback,
        reason: d.reason,
        scope: d
            .scope
            .unwrap_or_else(|| default_scope(i, d.reason, terminal)),
        cooldown,
        terminal,
        breaker,
        retry: if d.fallback {
            RetryClass::Retryable
        } else {
            RetryClass::NotRetryable
        },
        daily_quota: d.daily_quota,
        skip_provider_breaker: d.skip_breaker,
        reset_hint_ms: d.reset_hint_ms,
        request_scoped,
        rule_scope: d.rule_scope,
        rule: d.rule,
    }
}

/// A request-scoped failure: move on (a combo tries its next target), cool nothing.
fn request_scoped_draft(rule: &'static str) -> Draft {
    Draft {
        request_scoped: true,
        ..Draft::new(rule, FailureReason::Unknown, CooldownHint::None)
    }
}

/// The lock scope when no rule chose one: a terminal signal is about the credential; a 404 is
/// about the model; per-model-quota providers lock the model on 403/429/5xx (the reference's
/// steps 6 and 11); a combo's transient 429 locks the model in memory instead of cooling the
/// connection (step 14); everything else cools the connection.
fn default_scope(
    i: &ClassifyInput<'_>,
    reason: FailureReason,
    terminal: TerminalSignal,
) -> LockScope {
    let immediate_or_auth = matches!(
        terminal,
        TerminalSignal::Banned | TerminalSignal::CreditsExhausted | TerminalSignal::AuthFailure
    );
    if immediate_or_auth {
        LockScope::Connection
    } else if i.status == 404
        || (i.per_model_quota && (matches!(i.status, 403 | 429) || i.status >= 500))
        || (i.is_combo && i.status == 429 && reason == FailureReason::RateLimitExceeded)
    {
        LockScope::Model
    } else {
        LockScope::Connection
    }
}
