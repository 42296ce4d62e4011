//! Structure before text: what a provider's documented error fields say, read before any
//! text rule.
//!
//! The reference classifies by phrases, and phrases travel between providers: Google answers a
//! free-tier per-minute limit with "You exceeded your current quota, please check your plan and
//! billing details", the sentence OpenAI uses for a spent balance. Read as text, a rate limit
//! of a few seconds becomes a terminal `credits_exhausted`. Each provider family documents
//! fields that say what happened without ambiguity:
//!
//! - **Google** (`google.rpc.Status`): `error.status`, and the typed `details[]`:
//!   `QuotaFailure` (each violation's `quotaId` names its window, `…PerMinute…` or
//!   `…PerDay…`), `RetryInfo.retryDelay` and `ErrorInfo.reason`;
//! - **OpenAI**: `error.code` and `error.type` (`insufficient_quota`, `rate_limit_exceeded`);
//! - **Anthropic**: `error.type` in the `{"type":"error","error":{…}}` envelope
//!   (`billing_error`, `rate_limit_error`, `request_too_large`);
//! - **OpenRouter**: `error.code` (the HTTP status, `402` for credits) and `error.metadata`
//!   (`provider_name`, `raw`: the upstream provider's own error, which is about OpenRouter's
//!   account with that provider, never about this key's balance).
//!
//! [`PRECEDENCE`] is the ordered table of these readings, first match wins; `docs/
//! error-effects.md` shows it (a test checks the page against [`markdown_table`]). A row's
//! [`Verdict`] either decides the classification or, for [`Verdict::NotCredits`], lets the
//! text rows decide with the credits row off: the structure says "not a balance" but not
//! which window. Where no row matches, the text rows decide alone.
//!
//! Pure and bounded: the body is read once (at most [`crate::hints::MAX_SCAN_BYTES`]), at most
//! 32 details and 16 violations are looked at, and nothing here panics.

use serde_json::Value;

use crate::Millis;
use crate::hints::{self, bounded};

/// A provider family whose error fields [`PRECEDENCE`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Google,
    OpenAi,
    Anthropic,
    OpenRouter,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Google => "Google",
            Self::OpenAi => "OpenAI",
            Self::Anthropic => "Anthropic",
            Self::OpenRouter => "OpenRouter",
        }
    }
}

/// The window a Google `QuotaFailure` violation names in its `quotaId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaWindow {
    /// `…PerMinute…`: a short rate window.
    PerMinute,
    /// `…PerDay…`: a daily quota, until the daily reset.
    PerDay,
}

/// The documented fields of one error body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signals {
    pub family: Option<Family>,
    /// Google's `error.status` (`RESOURCE_EXHAUSTED`).
    pub google_status: Option<String>,
    /// The widest window the `QuotaFailure` violations (or `ErrorInfo.metadata.quota_limit`)
    /// name: a per-day violation dominates a per-minute one.
    pub quota_window: Option<QuotaWindow>,
    /// A typed `RetryInfo.retryDelay`.
    pub retry_info_ms: Option<Millis>,
    /// `ErrorInfo.reason` (`RATE_LIMIT_EXCEEDED`, `QUOTA_EXHAUSTED`, `API_KEY_INVALID`).
    pub error_info_reason: Option<String>,
    /// A string `error.code` (OpenAI `insufficient_quota`).
    pub code: Option<String>,
    /// `error.type` (OpenAI and Anthropic).
    pub error_type: Option<String>,
    /// A numeric `error.code` (OpenRouter's `402`).
    pub numeric_code: Option<u64>,
    /// OpenRouter's `error.metadata` names the upstream provider or carries its raw error.
    pub relayed_upstream: bool,
}

/// What a matched row means for the classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A short rate window: cool the connection for the stated delay (`RetryInfo`, else the
    /// upstream's hint, else the scaled backoff). Never terminal: the key is back after it.
    RateLimit,
    /// A spent daily quota: lock this model until the daily reset (midnight UTC, or the
    /// stated delay when that is longer); the connection keeps serving its other models.
    DailyQuota,
    /// The balance or billing is gone: `credits_exhausted` (terminal).
    Credits,
    /// About this request: no cooldown, no lockout, no breaker count.
    RequestScoped,
    /// Not a balance: the text rows decide, with the credits-text row off.
    NotCredits,
    /// The key itself is refused, whatever the HTTP status says (Google answers an invalid
    /// key with a 400): the auth failure a 401 is, never a request-scoped 400.
    AuthFailure,
}

impl Verdict {
    /// The effect as the docs table states it.
    pub fn effect(self) -> &'static str {
        match self {
            Self::RateLimit => {
                "rate limit: connection cooldown for the `RetryInfo` delay (else the upstream hint, else backoff); never terminal"
            }
            Self::DailyQuota => {
                "daily quota: model lockout until midnight UTC (or the `RetryInfo` delay if longer); no connection cooldown"
            }
            Self::Credits => "credits_exhausted (terminal)",
            Self::RequestScoped => "request-scoped: no cooldown, no lockout, no breaker count",
            Self::NotCredits => "never credits_exhausted; the text rows decide the window",
            Self::AuthFailure => {
                "auth failure of the key, as a 401: backoff, `expired` after `expired_retry_max` consecutive failures; never request-scoped"
            }
        }
    }
}

/// One row of the precedence table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The rule id the classification reports.
    pub id: &'static str,
    pub family: Family,
    /// The structured condition, as the docs table states it.
    pub condition: &'static str,
    pub verdict: Verdict,
    matches: fn(&Signals) -> bool,
}

const fn row(
    id: &'static str,
    family: Family,
    condition: &'static str,
    verdict: Verdict,
    matches: fn(&Signals) -> bool,
) -> Row {
    Row {
        id,
        family,
        condition,
        verdict,
        matches,
    }
}

fn is(field: Option<&String>, values: &[&str]) -> bool {
    field.is_some_and(|f| values.iter().any(|v| f.eq_ignore_ascii_case(v)))
}

fn resource_exhausted(s: &Signals) -> bool {
    s.family == Some(Family::Google) && is(s.google_status.as_ref(), &["RESOURCE_EXHAUSTED"])
}

/// The structured readings in order, first match wins.
pub const PRECEDENCE: [Row; 12] = [
    // First: an invalid key is about the credential whatever else the body says.
    row(
        "google_api_key_invalid",
        Family::Google,
        "`ErrorInfo.reason` `API_KEY_INVALID` (the Gemini API sends it with `error.status` `INVALID_ARGUMENT` and HTTP 400)",
        Verdict::AuthFailure,
        |s| {
            s.family == Some(Family::Google)
                && is(s.error_info_reason.as_ref(), &["API_KEY_INVALID"])
        },
    ),
    row(
        "google_quota_failure_per_day",
        Family::Google,
        "`error.status` `RESOURCE_EXHAUSTED`, a `QuotaFailure` violation (or `ErrorInfo` `quota_limit`) whose `quotaId` is per day",
        Verdict::DailyQuota,
        |s| resource_exhausted(s) && s.quota_window == Some(QuotaWindow::PerDay),
    ),
    row(
        "google_quota_failure_per_minute",
        Family::Google,
        "`error.status` `RESOURCE_EXHAUSTED`, a `QuotaFailure` violation whose `quotaId` is per minute",
        Verdict::RateLimit,
        |s| resource_exhausted(s) && s.quota_window == Some(QuotaWindow::PerMinute),
    ),
    row(
        "google_error_info_rate_limit",
        Family::Google,
        "`error.status` `RESOURCE_EXHAUSTED`, `ErrorInfo.reason` `RATE_LIMIT_EXCEEDED`",
        Verdict::RateLimit,
        |s| resource_exhausted(s) && is(s.error_info_reason.as_ref(), &["RATE_LIMIT_EXCEEDED"]),
    ),
    row(
        "google_resource_exhausted",
        Family::Google,
        "any other `RESOURCE_EXHAUSTED` (`ErrorInfo.reason` `QUOTA_EXHAUSTED`, no details)",
        Verdict::NotCredits,
        resource_exhausted,
    ),
    row(
        "openrouter_402",
        Family::OpenRouter,
        "`error.code` 402",
        Verdict::Credits,
        |s| s.family == Some(Family::OpenRouter) && s.numeric_code == Some(402),
    ),
    row(
        "openrouter_upstream_raw",
        Family::OpenRouter,
        "`error.metadata` with `provider_name` or `raw` (the upstream provider's own error)",
        Verdict::NotCredits,
        |s| s.family == Some(Family::OpenRouter) && s.relayed_upstream,
    ),
    row(
        "anthropic_billing_error",
        Family::Anthropic,
        "`error.type` `billing_error`",
        Verdict::Credits,
        |s| s.family == Some(Family::Anthropic) && is(s.error_type.as_ref(), &["billing_error"]),
    ),
    row(
        "anthropic_rate_limit_error",
        Family::Anthropic,
        "`error.type` `rate_limit_error` or `overloaded_error`",
        Verdict::NotCredits,
        |s| {
            s.family == Some(Family::Anthropic)
                && is(
                    s.error_type.as_ref(),
                    &["rate_limit_error", "overloaded_error"],
                )
        },
    ),
    row(
        "anthropic_request_too_large",
        Family::Anthropic,
        "`error.type` `request_too_large`",
        Verdict::RequestScoped,
        |s| {
            s.family == Some(Family::Anthropic) && is(s.error_type.as_ref(), &["request_too_large"])
        },
    ),
    row(
        "openai_insufficient_quota",
        Family::OpenAi,
        "`error.code` or `error.type` `insufficient_quota`, `billing_hard_limit_reached`, `billing_not_active`",
        Verdict::Credits,
        |s| {
            const CODES: [&str; 3] = [
                "insufficient_quota",
                "billing_hard_limit_reached",
                "billing_not_active",
            ];
            s.family == Some(Family::OpenAi)
                && (is(s.code.as_ref(), &CODES) || is(s.error_type.as_ref(), &CODES))
        },
    ),
    row(
        "openai_rate_limit_exceeded",
        Family::OpenAi,
        "`error.code` `rate_limit_exceeded` or `error.type` `requests` / `tokens` (the `x-ratelimit-*` headers and the text say which window)",
        Verdict::NotCredits,
        |s| {
            s.family == Some(Family::OpenAi)
                && (is(s.code.as_ref(), &["rate_limit_exceeded"])
                    || is(s.error_type.as_ref(), &["requests", "tokens"]))
        },
    ),
];

/// The first row of [`PRECEDENCE`] that the signals match.
pub fn precedence(signals: &Signals) -> Option<&'static Row> {
    signals.family?;
    PRECEDENCE.iter().find(|r| (r.matches)(signals))
}

/// The docs table of [`PRECEDENCE`]: what `docs/error-effects.md` shows between its
/// `structure-table` markers.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| # | family | structured fields | rule | effect |\n|---|---|---|---|---|\n");
    for (i, r) in PRECEDENCE.iter().enumerate() {
        out.push_str(&format!(
            "| S{} | {} | {} | `{}` | {} |\n",
            i + 1,
            r.family.as_str(),
            r.condition,
            r.id,
            r.verdict.effect()
        ));
    }
    out
}

/// The google.rpc.Code names a Google `error.status` can take.
const GOOGLE_STATUSES: [&str; 16] = [
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

const MAX_DETAILS: usize = 32;
const MAX_VIOLATIONS: usize = 16;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 128)
        .map(str::to_owned)
}

/// The window a quota id names (`GenerateRequestsPerDayPerProjectPerModel-FreeTier`,
/// `GenerateContentInputTokensPerModelPerMinute-FreeTier`).
fn window_of(quota_id: &str) -> Option<QuotaWindow> {
    let id = quota_id.to_ascii_lowercase();
    if id.contains("perday") || id.contains("per_day") {
        Some(QuotaWindow::PerDay)
    } else if id.contains("perminute") || id.contains("per_minute") {
        Some(QuotaWindow::PerMinute)
    } else {
        None
    }
}

fn wider(a: Option<QuotaWindow>, b: Option<QuotaWindow>) -> Option<QuotaWindow> {
    match (a, b) {
        (Some(QuotaWindow::PerDay), _) | (_, Some(QuotaWindow::PerDay)) => {
            Some(QuotaWindow::PerDay)
        }
        (x, None) => x,
        (None, y) => y,
        (x, _) => x,
    }
}

fn google_details(error: &Value, out: &mut Signals) -> bool {
    let Some(details) = error.get("details").and_then(Value::as_array) else {
        return false;
    };
    let mut typed = false;
    for d in details.iter().take(MAX_DETAILS) {
        let Some(kind) = d.get("@type").and_then(Value::as_str) else {
            continue;
        };
        let Some(kind) = kind.strip_prefix("type.googleapis.com/google.rpc.") else {
            continue;
        };
        typed = true;
        match kind {
            "QuotaFailure" => {
                let violations = d.get("violations").and_then(Value::as_array);
                for v in violations.into_iter().flatten().take(MAX_VIOLATIONS) {
                    let w = text(v, "quotaId").as_deref().and_then(window_of);
                    out.quota_window = wider(out.quota_window, w);
                }
            }
            "ErrorInfo" => {
                if out.error_info_reason.is_none() {
                    out.error_info_reason = text(d, "reason");
                }
                let limit = d
                    .get("metadata")
                    .and_then(|m| text(m, "quota_limit"))
                    .as_deref()
                    .and_then(window_of);
                out.quota_window = wider(out.quota_window, limit);
            }
            _ => {}
        }
    }
    typed
}

/// Reads the documented fields of an error body. `provider_id` only tells an OpenRouter body
/// without metadata (its `402`) from another gateway's numeric code.
pub fn read(body: &str, provider_id: &str) -> Signals {
    let mut out = Signals::default();
    let Ok(value) = serde_json::from_str::<Value>(bounded(body).trim()) else {
        return out;
    };
    // Google's OpenAI-compatible endpoint wraps its error in an array.
    let value = match &value {
        Value::Array(items) => match items.first() {
            Some(first) => first,
            None => return out,
        },
        other => other,
    };
    let Some(error) = value.get("error").filter(|e| e.is_object()) else {
        return out;
    };
    out.code = text(error, "code");
    out.error_type = text(error, "type");
    out.numeric_code = error.get("code").and_then(Value::as_u64);
    let status = text(error, "status");
    let google_status = status
        .as_deref()
        .is_some_and(|s| GOOGLE_STATUSES.contains(&s));
    let typed_details = google_details(error, &mut out);
    let metadata = error.get("metadata").filter(|m| m.is_object());
    out.family = if google_status || typed_details {
        out.google_status = status;
        out.retry_info_ms = hints::typed_retry_info_ms(body);
        Some(Family::Google)
    } else if value.get("type").and_then(Value::as_str) == Some("error") {
        Some(Family::Anthropic)
    } else if provider_id == "openrouter"
        || metadata.is_some_and(|m| m.get("provider_name").is_some() || m.get("raw").is_some())
    {
        out.relayed_upstream =
            metadata.is_some_and(|m| m.get("provider_name").is_some() || m.get("raw").is_some());
        Some(Family::OpenRouter)
    } else if out.code.is_some() || out.error_type.is_some() {
        Some(Family::OpenAi)
    } else {
        None
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Google's per-minute free-tier 429 (RooCodeInc/Roo-Code#3883).
    pub(crate) const GEMINI_PER_MINUTE: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;

    #[test]
    fn google_per_minute_quota_failure_is_a_rate_limit_with_its_delay() {
        let s = read(GEMINI_PER_MINUTE, "my-gemini");
        assert_eq!(s.family, Some(Family::Google));
        assert_eq!(s.quota_window, Some(QuotaWindow::PerMinute));
        assert_eq!(s.retry_info_ms, Some(26_000));
        let r = precedence(&s).map(|r| (r.id, r.verdict));
        assert_eq!(
            r,
            Some(("google_quota_failure_per_minute", Verdict::RateLimit))
        );
    }

    #[test]
    fn a_per_day_violation_dominates_a_per_minute_one() {
        let body = GEMINI_PER_MINUTE.replace(
            r#"{"quotaMetric""#,
            r#"{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"},{"quotaMetric""#,
        );
        let s = read(&body, "gemini");
        assert_eq!(s.quota_window, Some(QuotaWindow::PerDay));
        assert_eq!(precedence(&s).map(|r| r.verdict), Some(Verdict::DailyQuota));
    }

    #[test]
    fn each_family_is_told_by_its_envelope() {
        let openai = read(
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            "openai",
        );
        assert_eq!(openai.family, Some(Family::OpenAi));
        assert_eq!(
            precedence(&openai).map(|r| r.verdict),
            Some(Verdict::Credits)
        );
        let anthropic = read(
            r#"{"type":"error","error":{"type":"billing_error","message":"x"}}"#,
            "anthropic",
        );
        assert_eq!(
            precedence(&anthropic).map(|r| r.id),
            Some("anthropic_billing_error")
        );
        let relayed = read(
            r#"{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"OpenAI","raw":"{\"error\":{\"code\":\"insufficient_quota\"}}"}}}"#,
            "my-router",
        );
        assert_eq!(relayed.family, Some(Family::OpenRouter));
        assert_eq!(
            precedence(&relayed).map(|r| r.verdict),
            Some(Verdict::NotCredits)
        );
        let or402 = read(
            r#"{"error":{"code":402,"message":"Insufficient credits"}}"#,
            "openrouter",
        );
        assert_eq!(
            precedence(&or402).map(|r| r.verdict),
            Some(Verdict::Credits)
        );
        // vLLM's numeric code on another provider is no OpenRouter 402.
        let vllm = read(r#"{"error":{"code":402,"message":"x"}}"#, "vllm");
        assert!(precedence(&vllm).is_none());
        for junk in [
            "",
            "not json",
            "[]",
            r#"{"error":"text"}"#,
            "{\"error\":{}}",
        ] {
            assert!(precedence(&read(junk, "x")).is_none(), "{junk}");
        }
    }
}
