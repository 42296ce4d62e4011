//! The built-in rule tables: the reference's `ERROR_RULES` and its provider-specific rules.
//!
//! Both are data, so the decision flow in `mod.rs` stays one readable sequence of rows and a
//! new provider quirk is one table entry.

use crate::Millis;
use crate::hints;
use crate::outcome::{FailureReason, LockScope};

/// What a matched rule asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// A retryable fallback: the upstream hint if the profile uses hints, else the scaled
    /// backoff.
    Backoff,
    /// A fixed cooldown chosen by the rule (0 = none).
    Fixed(Millis),
    /// A reset time the upstream stated (parsed by the rule, or the next UTC midnight for a
    /// daily allocation). Not capped by `max_cooldown_ms`.
    Upstream(Millis),
}

/// An entry of the generic `ERROR_RULES` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ErrorTableRule {
    pub id: &'static str,
    pub reason: FailureReason,
    pub action: Action,
}

const fn rule(id: &'static str, reason: FailureReason, action: Action) -> ErrorTableRule {
    ErrorTableRule { id, reason, action }
}

use Action::{Backoff, Fixed};
use FailureReason::{AuthError, ModelCapacity, QuotaExhausted, RateLimitExceeded, ServerError};

/// Text rules, checked before status rules, first match wins (substring of the lower-cased
/// error text).
pub(super) const TEXT_RULES: [(&str, ErrorTableRule); 15] = [
    (
        "no credentials",
        rule("no_credentials", AuthError, Fixed(120_000)),
    ),
    (
        "request not allowed",
        rule("request_not_allowed", RateLimitExceeded, Fixed(5_000)),
    ),
    (
        "improperly formed request",
        rule("improperly_formed_request", ModelCapacity, Fixed(0)),
    ),
    ("rate limit", rule("rate_limit", RateLimitExceeded, Backoff)),
    (
        "too many requests",
        rule("too_many_requests", RateLimitExceeded, Backoff),
    ),
    (
        "hour quota",
        rule("hour_quota_exceeded", QuotaExhausted, Backoff),
    ),
    (
        "quota has been exceeded",
        rule("quota_has_been_exceeded", QuotaExhausted, Backoff),
    ),
    (
        "quota exceeded",
        rule("quota_exceeded", QuotaExhausted, Backoff),
    ),
    (
        "quota will reset",
        rule("quota_will_reset", QuotaExhausted, Backoff),
    ),
    (
        "exhausted your capacity",
        rule("capacity_exhausted", QuotaExhausted, Backoff),
    ),
    (
        "quota exhausted",
        rule("quota_exhausted", QuotaExhausted, Backoff),
    ),
    (
        "free tier of the model has been exhausted",
        rule("free_tier_exhausted", QuotaExhausted, Backoff),
    ),
    ("capacity", rule("capacity", ModelCapacity, Backoff)),
    ("overloaded", rule("overloaded", ModelCapacity, Backoff)),
    ("high demand", rule("high_demand", ModelCapacity, Backoff)),
];

/// Status rules. **Switchyard:** 401 backs off instead of the reference's 0 ms, because an auth
/// failure turns `expired` only after `expired_retry_max` consecutive failures, and those
/// retries need spacing so a transient OAuth error can heal.
pub(super) const STATUS_RULES: [(u16, ErrorTableRule); 11] = [
    (401, rule("status_401", AuthError, Backoff)),
    (402, rule("status_402", QuotaExhausted, Fixed(0))),
    (403, rule("status_403", QuotaExhausted, Fixed(0))),
    (
        404,
        rule("status_404", FailureReason::Unknown, Fixed(120_000)),
    ),
    (406, rule("status_406", ServerError, Backoff)),
    (408, rule("status_408", ServerError, Backoff)),
    (429, rule("status_429", RateLimitExceeded, Backoff)),
    (500, rule("status_500", ServerError, Backoff)),
    (502, rule("status_502", ServerError, Backoff)),
    (503, rule("status_503", ServerError, Backoff)),
    (504, rule("status_504", ServerError, Backoff)),
];

pub(super) fn by_text(lowered: &str) -> Option<ErrorTableRule> {
    TEXT_RULES
        .iter()
        .find(|(text, _)| lowered.contains(text))
        .map(|(_, r)| *r)
}

pub(super) fn by_status(status: u16) -> Option<ErrorTableRule> {
    STATUS_RULES
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, r)| *r)
}

/// A built-in provider rule that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProviderRuleMatch {
    pub id: &'static str,
    pub reason: FailureReason,
    pub scope: LockScope,
    pub action: Action,
    /// The rule locks until the next daily reset.
    pub daily_quota: bool,
    /// The rule's `Upstream` duration is a quota window: applied whatever the hints setting.
    pub window: bool,
}

/// What a provider rule sees.
pub(super) struct RuleContext<'a> {
    pub status: u16,
    pub lowered: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub now_epoch_ms: u64,
}

type ProviderRule = fn(&RuleContext<'_>) -> Option<ProviderRuleMatch>;

const fn matched(
    id: &'static str,
    reason: FailureReason,
    scope: LockScope,
    action: Action,
) -> ProviderRuleMatch {
    ProviderRuleMatch {
        id,
        reason,
        scope,
        action,
        daily_quota: false,
        window: false,
    }
}

/// The opencode family: account-wide quotas signalled by body text or exhausted
/// `x-ratelimit-remaining-*` headers, and model-level unavailability.
const OPENCODE_RULES: [ProviderRule; 5] = [
    |c| {
        ((c.status == 400 || c.status == 429) && c.lowered.contains("endpoint is unavailable"))
            .then_some(matched(
                "opencode-endpoint-unavailable",
                ModelCapacity,
                LockScope::Model,
                Fixed(300_000),
            ))
    },
    |c| {
        if c.status != 429 || !c.lowered.contains("monthly usage limit reached") {
            return None;
        }
        let reset = hints::parse_resets_in(c.lowered)?;
        Some(matched(
            "opencode-monthly-quota-resets-in",
            QuotaExhausted,
            LockScope::Connection,
            Action::Upstream(reset),
        ))
    },
    |c| {
        let exhausted = |name| hints::header(c.headers, name) == Some("0");
        (c.status == 429
            && (exhausted("x-ratelimit-remaining-requests")
                || exhausted("x-ratelimit-remaining-tokens")))
        .then_some(matched(
            "opencode-quota-exhausted-headers",
            QuotaExhausted,
            LockScope::Connection,
            Backoff,
        ))
    },
    |c| {
        (c.status == 429
            && [
                "organization_quota_exceeded",
                "account_quota_exceeded",
                "plan_limit_reached",
            ]
            .iter()
            .any(|m| c.lowered.contains(m)))
        .then_some(matched(
            "opencode-quota-exhausted-body",
            QuotaExhausted,
            LockScope::Connection,
            Backoff,
        ))
    },
    |c| {
        (c.status == 400
            && c.lowered
                .contains("upstream request failed: model is unavailable."))
        .then_some(matched(
            "opencode-400-model-unavailable",
            ModelCapacity,
            LockScope::Model,
            Fixed(3_600_000),
        ))
    },
];

/// Minimax reports per-model quota in `x-model-quota-remaining: a=0,b=42`.
const MINIMAX_RULES: [ProviderRule; 1] = [|c| {
    let remaining = hints::header(c.headers, "x-model-quota-remaining")?;
    let any_zero = remaining
        .split(',')
        .any(|pair| pair.split_once('=').is_some_and(|(_, v)| v.trim() == "0"));
    (c.status == 429 && any_zero).then_some(matched(
        "minimax-per-model-quota",
        QuotaExhausted,
        LockScope::Model,
        Backoff,
    ))
}];

/// Cloudflare Workers AI: the free daily neuron allocation is account-wide and resets at UTC
/// midnight.
const CLOUDFLARE_AI_RULES: [ProviderRule; 1] = [|c| {
    (c.status == 429 && c.lowered.contains("daily free allocation")).then_some(ProviderRuleMatch {
        daily_quota: true,
        window: true,
        ..matched(
            "cloudflare-ai-daily-neuron-allocation",
            QuotaExhausted,
            LockScope::Connection,
            Action::Upstream(hints::ms_until_utc_midnight(c.now_epoch_ms)),
        )
    })
}];

/// OpenRouter: any 402 is an exhausted account balance or per-key credit cap.
const OPENROUTER_RULES: [ProviderRule; 1] = [|c| {
    (c.status == 402).then_some(matched(
        "openrouter-credit-exhausted-402",
        QuotaExhausted,
        LockScope::Connection,
        Fixed(120_000),
    ))
}];

/// AgentRouter: `额度不足` ("insufficient quota") is a temporary account quota, whatever the
/// status; `无权访问模型` ("no access to the model") locks only that model.
const AGENTROUTER_RULES: [ProviderRule; 2] = [
    |c| {
        (matches!(c.status, 400 | 403 | 429) && c.lowered.contains("额度不足")).then_some(matched(
            "agentrouter-user-quota-exhausted",
            QuotaExhausted,
            LockScope::Connection,
            Backoff,
        ))
    },
    |c| {
        (c.status == 403 && c.lowered.contains("无权访问模型")).then_some(matched(
            "agentrouter-model-access-denied",
            AuthError,
            LockScope::Model,
            Fixed(6 * 3_600_000),
        ))
    },
];

/// Codex (ChatGPT subscription): `usage_limit_reached` names the spent window's reset in
/// `resets_in_seconds` (the 5-hour or the weekly window, whichever is active), or its
/// `x-codex-*` headers name the spent window and its reset; the whole account waits for it.
const CODEX_RULES: [ProviderRule; 1] = [|c| {
    if c.status != 429 || !c.lowered.contains("usage_limit_reached") {
        return None;
    }
    let reset_ms = json_number_after(c.lowered, "\"resets_in_seconds\":")
        .map(|secs| secs.saturating_mul(1000))
        .or_else(|| spent_window_reset(c.headers, c.now_epoch_ms))?;
    Some(ProviderRuleMatch {
        window: true,
        ..matched(
            "codex-usage-limit-window",
            QuotaExhausted,
            LockScope::Connection,
            Action::Upstream(reset_ms),
        )
    })
}];

/// The unsigned integer right after `key` (spaces allowed), e.g. `"resets_in_seconds": 13872`.
fn json_number_after(text: &str, key: &str) -> Option<Millis> {
    let rest = text.get(text.find(key)? + key.len()..)?.trim_start();
    let end = rest
        .find(|ch: char| !ch.is_ascii_digit())
        .unwrap_or(rest.len());
    rest.get(..end)?.parse().ok().filter(|n| *n > 0)
}

/// The reset of a subscription window the response headers report as spent (Codex
/// `x-codex-{primary,secondary}-used-percent: 100` with its `reset-after-seconds`, Claude's
/// unified wall): a reset the upstream stated, for the quota-window rows when neither a
/// retry header nor the body states one. Of several spent windows the one that resets last
/// binds the account.
pub(super) fn spent_window_reset(headers: &[(&str, &str)], now_epoch_ms: u64) -> Option<Millis> {
    use crate::quota_headers::WindowKind;
    crate::quota_headers::parse(headers, now_epoch_ms)
        .windows
        .iter()
        .filter(|w| {
            matches!(
                w.kind,
                WindowKind::Session | WindowKind::Weekly | WindowKind::Unified
            ) && w.remaining <= 0.0
        })
        .filter_map(|w| w.reset_in_ms)
        .filter(|ms| *ms > 0)
        .max()
}

/// The built-in rules for a provider id, first match wins.
fn rules_for(provider_id: &str) -> &'static [ProviderRule] {
    match provider_id {
        "opencode" | "opencode-go" | "opencode-cli" | "opencode-zen" => &OPENCODE_RULES,
        "minimax" | "minimax-passthrough" => &MINIMAX_RULES,
        "cloudflare-ai" => &CLOUDFLARE_AI_RULES,
        "openrouter" => &OPENROUTER_RULES,
        "agentrouter" => &AGENTROUTER_RULES,
        "codex" => &CODEX_RULES,
        _ => &[],
    }
}

pub(super) fn provider_rule(provider_id: &str, ctx: &RuleContext<'_>) -> Option<ProviderRuleMatch> {
    rules_for(provider_id).iter().find_map(|r| r(ctx))
}
