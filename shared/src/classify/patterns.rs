//! Text signals in upstream error bodies.
//!
//! The reference matches error text with regular expressions. These are the same signals as
//! ordered-substring combinators over the already lower-cased text: no regex engine on the
//! failure path, no ReDoS surface, and every matcher is linear (or linear times a small fixed
//! window) in the text length. Each function names the reference list it stands for.

/// Bytes that make up a regex `\w` word.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `t` contains any of `needles`.
pub(super) fn any(t: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| t.contains(n))
}

/// Byte offsets just past each occurrence of `needle` that starts a word (`\bneedle`).
fn word_start_ends<'t>(t: &'t str, needle: &'t str) -> impl Iterator<Item = usize> + 't {
    t.match_indices(needle)
        .filter(move |(i, _)| *i == 0 || !is_word_byte(t.as_bytes()[*i - 1]))
        .map(|(i, n)| i + n.len())
}

/// Whether `word` occurs with word boundaries on both sides (`\bword\b`).
pub(super) fn has_word(t: &str, word: &str) -> bool {
    word_start_ends(t, word).any(|end| !t.as_bytes().get(end).is_some_and(|b| is_word_byte(*b)))
}

/// `parts[0].*parts[1].*…`: each part occurs after the end of the previous one. Taking the
/// earliest occurrence of each part is optimal, so this is one left-to-right scan.
pub(super) fn seq(t: &str, parts: &[&str]) -> bool {
    let mut from = 0;
    for part in parts {
        match t.get(from..).and_then(|rest| rest.find(part)) {
            Some(i) => from += i + part.len(),
            None => return false,
        }
    }
    true
}

/// `\bfirst.*(tails[0]|tails[1]|…)`.
pub(super) fn word_then_any(t: &str, first: &str, tails: &[&str]) -> bool {
    word_start_ends(t, first)
        .next()
        .and_then(|end| t.get(end..))
        .is_some_and(|rest| any(rest, tails))
}

/// `parts….*(tails…)`: the parts in order, then any tail after them.
pub(super) fn seq_then_any(t: &str, parts: &[&str], tails: &[&str]) -> bool {
    let mut from = 0;
    for part in parts {
        match t.get(from..).and_then(|rest| rest.find(part)) {
            Some(i) => from += i + part.len(),
            None => return false,
        }
    }
    t.get(from..).is_some_and(|rest| any(rest, tails))
}

/// `a[\s\S]{0,gap}?b`: some occurrence of `a` is followed by `b` starting within `gap` bytes.
pub(super) fn near(t: &str, a: &str, b: &str, gap: usize) -> bool {
    let bytes = t.as_bytes();
    let needle = b.as_bytes();
    t.match_indices(a).any(|(i, _)| {
        let from = i + a.len();
        let to = (from + gap + needle.len()).min(bytes.len());
        bytes
            .get(from..to)
            .is_some_and(|window| window.windows(needle.len()).any(|w| w == needle))
    })
}

/// Byte offsets just past each match of `a.?b` (`a`, at most one character, then `b`).
fn opt_sep_ends<'t>(t: &'t str, a: &'t str, b: &'t str) -> impl Iterator<Item = usize> + 't {
    t.match_indices(a).filter_map(move |(i, _)| {
        let from = i + a.len();
        let rest = t.get(from..)?;
        if rest.starts_with(b) {
            return Some(from + b.len());
        }
        let skip = rest.chars().next()?.len_utf8();
        rest.get(skip..)?
            .starts_with(b)
            .then_some(from + skip + b.len())
    })
}

/// `a.?b`.
pub(super) fn opt_sep(t: &str, a: &str, b: &str) -> bool {
    opt_sep_ends(t, a, b).next().is_some()
}

/// `a.?b.*tail`.
fn opt_sep_then(t: &str, a: &str, b: &str, tail: &str) -> bool {
    opt_sep_ends(t, a, b)
        .next()
        .and_then(|end| t.get(end..))
        .is_some_and(|rest| rest.contains(tail))
}

/// `ACCOUNT_DEACTIVATED_SIGNALS`: the account is gone for good (row 3).
pub(super) fn account_deactivated(t: &str) -> bool {
    any(
        t,
        &[
            "account_deactivated",
            "account has been deactivated",
            "account has been disabled",
            "your account has been suspended",
            "this account is deactivated",
            "verify your account to continue",
            "this service has been disabled in this account",
        ],
    )
}

/// `CREDITS_EXHAUSTED_SIGNALS`: billing credits are gone; only a top-up helps (row 5).
pub(super) fn credits_exhausted(t: &str) -> bool {
    any(
        t,
        &[
            "insufficient_quota",
            "billing_hard_limit_reached",
            "exceeded your current quota",
            "exceeded your current usage quota",
            "credit_balance_too_low",
            "your credit balance is too low",
            "credits exhausted",
            "out of credits",
            "payment required",
            "free tier of the model has been exhausted",
            "insufficient balance",
            "insufficient_balance",
            "insufficient account balance",
            "insufficient credit",
            // GLM 1113: "余额不足或无可用资源包,请充值" (balance too low, top up).
            "余额不足",
            "欠费",
            // Together's 402 `credit_limit`: "Credit limit exceeded. Please navigate to …
            // billing to add credit" (corpus `together/credit-limit-exceeded`).
            "credit limit exceeded",
            // Fireworks' 412 PRECONDITION_FAILED: "Account … is suspended, possibly due to
            // reaching the monthly spending limit or failure to pay past invoices" (corpus
            // `fireworks/account-suspended-spending-limit-412`); xAI says "used all available
            // credits or reached its monthly spending limit".
            "monthly spending limit",
            "failure to pay past invoices",
            "used all available credits",
            // OpenAI: "You have no credits remaining. Add credits to continue using the API".
            "no credits remaining",
        ],
    )
}

/// Daily-quota text (row 6).
pub(super) fn daily_quota(t: &str) -> bool {
    any(
        t,
        &[
            "today's quota",
            "today’s quota",
            "daily quota",
            "try again tomorrow",
        ],
    )
}

/// Subscription-window text (row 7); one phrase is Claude-only because other upstreams use it
/// for a short per-minute throttle.
pub(super) fn subscription_quota(t: &str, provider_id: &str) -> bool {
    any(
        t,
        &[
            "usage limit reached",
            "you've reached your usage limit",
            "you’ve reached your usage limit",
            "you have reached your usage limit",
        ],
    ) || (provider_id == "claude"
        && t.contains("this request would exceed your account's rate limit"))
}

/// Weekly-cap text (row 8).
pub(super) fn weekly_limit(t: &str) -> bool {
    any(
        t,
        &[
            "weekly usage limit",
            "weekly limit reached",
            "reached your weekly",
        ],
    )
}

/// Session-cap text (row 9). Scoped to usage wording so "session expired" is not a quota.
pub(super) fn session_limit(t: &str) -> bool {
    any(t, &["session usage limit", "session limit reached"])
        || (t.contains("reached your session") && t.contains("usage limit"))
}

/// `QUOTA_PATTERNS` (`looksLikeQuotaExhausted`): the body explicitly names a long-period cap.
/// On an API-key 429 this is what allows the quota rows to run at all.
pub(super) fn looks_like_quota_exhausted(t: &str) -> bool {
    seq(t, &["daily", "limit"])
        || seq(t, &["daily", "quota"])
        || opt_sep_then(t, "per", "day", "limit")
        || seq(t, &["monthly", "limit"])
        || seq(t, &["monthly", "quota"])
        || opt_sep_then(t, "per", "month", "limit")
        || seq(t, &["quota", "exceed"])
        || seq(t, &["exceed", "quota"])
        || seq(t, &["insufficient", "quota"])
        || seq(t, &["billing", "cap"])
        || seq(t, &["credit", "exhaust"])
        || opt_sep(t, "hard", "limit")
        || seq(t, &["plan", "limit"])
        || seq(t, &["resource has been exhausted", "reset after"])
        || seq(t, &["限额将在", "重置"])
        || any(
            t,
            &[
                "out of credits",
                "individual quota reached",
                "enable overages",
                "insufficient_g1_credits_balance",
                "daily free allocation",
                "have exhausted their quota",
                "tpd rate limit",
                "insufficient balance",
                "余额不足",
                "使用上限",
                "调用上限",
                "额度已用尽",
                "额度已用完",
            ],
        )
}

/// `classifyErrorText(..) === QUOTA_EXHAUSTED`: the text reads as a quota (row 10).
pub(super) fn text_says_quota(t: &str, provider_id: &str) -> bool {
    any(
        t,
        &[
            "quota exceeded",
            "quota depleted",
            "quota will reset",
            "quota has been exceeded",
            "hour quota",
            "billing",
        ],
    ) || looks_like_quota_exhausted(t)
        || subscription_quota(t, provider_id)
        || credits_exhausted(t)
}

/// Cloudflare error 1010 / `browser_signature_banned` / an explicit `"retryable": false` with a
/// Cloudflare or owner-action signal: the edge refuses this client outright (row 12).
pub(super) fn cloudflare_non_retryable(t: &str) -> bool {
    if t.contains("browser_signature_banned") || t.contains("error 1010") {
        return true;
    }
    let field_is = |keys: &[&str], value: &str| keys.iter().any(|k| json_field_is(t, k, value));
    if field_is(&["error_code", "errorcode"], "1010") {
        return true;
    }
    field_is(&["retryable"], "false")
        && (field_is(&["cloudflare_error", "cloudflareerror"], "true")
            || field_is(&["owner_action_required", "owneractionrequired"], "true")
            || t.contains("cloudflare"))
}

/// Whether a JSON member `"key": value` occurs with a scalar equal to `value` (quotes around
/// the value are ignored, so `"1010"` and `1010` both match).
fn json_field_is(t: &str, key: &str, value: &str) -> bool {
    let b = t.as_bytes();
    t.match_indices(key).any(|(i, k)| {
        if i == 0 || b[i - 1] != b'"' || b.get(i + k.len()) != Some(&b'"') {
            return false;
        }
        let mut j = i + k.len() + 1;
        while b.get(j).is_some_and(u8::is_ascii_whitespace) {
            j += 1;
        }
        if b.get(j) != Some(&b':') {
            return false;
        }
        j += 1;
        while b
            .get(j)
            .is_some_and(|c| c.is_ascii_whitespace() || *c == b'"')
        {
            j += 1;
        }
        let Some(rest) = t.get(j..) else {
            return false;
        };
        rest.starts_with(value)
            && !rest
                .as_bytes()
                .get(value.len())
                .is_some_and(|c| is_word_byte(*c))
    })
}

/// `CONTEXT_OVERFLOW_PATTERNS`: the prompt exceeds the model's context (row 15).
pub(super) fn context_overflow(t: &str) -> bool {
    any(
        t,
        &[
            "input is too long",
            "input too long",
            "too many tokens",
            "prompt is too long",
            "context window",
            "maximum context",
            "token limit",
            "request too large",
            "context length",
            "context size",
        ],
    ) || word_then_any(t, "context", &["too long", "exceeded", "overflow", "limit"])
        || word_then_any(t, "max", &["token"])
}

/// The prompt overflowed the context window, said in words that cannot mean a parameter
/// limit (unlike "max_tokens must be …"): what the client's `context_length_exceeded` code
/// stands for.
pub(super) fn context_overflow_named(t: &str) -> bool {
    any(
        t,
        &[
            "context_length_exceeded",
            "prompt is too long",
            "maximum context length",
            "context length",
            "context window",
            "input is too long",
            "input too long",
            "exceeds the context",
            "reduce the length of the messages",
            "context size",
            "input token count",
            "exceeds the maximum number of tokens",
        ],
    )
}

/// `MALFORMED_REQUEST_PATTERNS`: this model rejected the message format (row 15).
pub(super) fn malformed_request(t: &str) -> bool {
    any(
        t,
        &[
            "improperly formed request",
            "messages must alternate",
            "empty message",
            "empty content",
        ],
    ) || seq(t, &["invalid", "message", "format"])
        || seq_then_any(t, &["function", "name"], &["blank", "empty", "missing"])
        || seq_then_any(t, &["tool_call", "name"], &["blank", "empty", "missing"])
}

/// `PARAM_VALIDATION_PATTERNS`: a model-specific parameter limit (row 15).
pub(super) fn param_validation(t: &str) -> bool {
    seq_then_any(t, &["max_tokens"], &["illegal", "must be", "range"])
        || t.contains("parameter is illegal")
        || seq(t, &["is illegal", "range"])
}

/// The reference's body-specific 400 (combo.ts, #4279): the text names the context, the prompt,
/// tokens, a malformed or invalid input, or calls itself a bad request. Row 15 has already
/// taken the exceptions (context overflow, parameter validation, model-scoped 400s).
pub(super) fn body_specific_400(t: &str) -> bool {
    any(
        t,
        &["context", "prompt", "token", "malformed", "bad request"],
    ) || has_word(t, "invalid")
}

/// Google's `INVALID_ARGUMENT` status is its parameter validation ("Request contains an
/// invalid argument."): the argument another provider's translation may not send at all. It
/// is the reference's parameter-validation exception unless the text also names the prompt,
/// the context or tokens.
pub(super) fn google_param_validation(t: &str) -> bool {
    t.contains("invalid_argument") && !any(t, &["context", "prompt", "token"])
}

/// `MODEL_ACCESS_DENIED_PATTERNS`: this account cannot use this model (row 15).
pub(super) fn model_access_denied(t: &str) -> bool {
    const DOES_NOT_SUPPORT: [&str; 3] = ["does not support", "doesn't support", "unsupported"];
    any(
        t,
        &[
            "invalid model",
            "unsupported model",
            "please select a different model",
            "has been decommissioned",
            "no longer supported",
        ],
    ) || word_start_ends(t, "model").next().is_some_and(|end| {
        let rest = t.get(end..).unwrap_or("");
        seq_then_any(
            rest,
            &["not"],
            &["available", "found", "supported", "accessible"],
        ) || any(rest, &["does not exist", "doesn't exist"])
    }) || DOES_NOT_SUPPORT
        .iter()
        .any(|d| near(t, "model", d, 80) || near(t, d, "model", 80))
        || seq(t, &["access", "denied", "model"])
        || seq(t, &["model", "access", "denied"])
        || ["access", "permission"]
            .iter()
            .any(|w| near(t, w, "model", 60) || near(t, "model", w, 60))
}

/// `AUTH_CREDENTIAL_ERROR_PATTERNS`: the credential itself is bad. Suppresses the text-based
/// model-access detection so "invalid api key for model X" surfaces as the auth error it is.
pub(super) fn auth_credential_error(t: &str) -> bool {
    const BAD: [&str; 5] = ["invalid", "incorrect", "expired", "missing", "revoked"];
    const API_KEY: [&str; 4] = ["api key", "api_key", "api-key", "apikey"];
    let bad_then = |nouns: &[&str], adjectives: &[&str]| {
        adjectives.iter().any(|adj| {
            word_start_ends(t, adj).any(|end| {
                let rest = t.get(end..).unwrap_or("");
                let trimmed = rest.trim_start();
                trimmed.len() < rest.len() && nouns.iter().any(|n| trimmed.starts_with(n))
            })
        })
    };
    let key_then_bad = API_KEY.iter().any(|key| {
        t.match_indices(key).any(|(i, k)| {
            let rest = t.get(i + k.len()..).unwrap_or("");
            let rest = rest.trim_start();
            let rest = rest.strip_prefix("is ").map_or(rest, str::trim_start);
            BAD.iter().any(|b| rest.starts_with(b)) || rest.starts_with("not valid")
        })
    });
    bad_then(&API_KEY, &BAD)
        || key_then_bad
        || any(
            t,
            &[
                "authentication failed",
                "authentication error",
                "authentication required",
                "not authenticated",
            ],
        )
        || bad_then(
            &["token", "credential", "bearer"],
            &["invalid", "expired", "missing", "revoked"],
        )
        || has_word(t, "unauthorized")
}

/// `RATE_LIMIT_TEXT_PATTERNS`: throttling reported with a 400 (row 16).
pub(super) fn rate_limit_text(t: &str) -> bool {
    opt_sep(t, "high", "frequency")
        || opt_sep(t, "rate", "limit")
        || any(t, &["non-compliant", "too many requests", "频繁", "频率"])
}

/// A usage cap that names the five-hour window (MiniMax's "5-hour usage limit reached", GLM's
/// `5 小时的使用上限`, Ollama Cloud's session limit): row 9's session window.
pub(super) fn five_hour_window(t: &str) -> bool {
    any(
        t,
        &[
            "5-hour usage limit",
            "5-hour limit",
            "five-hour usage limit",
            "5 小时的使用上限",
            "5小时的使用上限",
        ],
    )
}

/// A 429 that says too many requests run at once, not too many per window: GLM's
/// `并发数过高` / "High concurrency usage of this API" (code 1302), "too many concurrent
/// requests", "concurrency limit".
pub(super) fn concurrency_limited(t: &str) -> bool {
    any(
        t,
        &[
            "并发数过高",
            "并发",
            "high concurrency",
            "concurrent requests",
            "concurrency limit",
            "concurrency_limit",
        ],
    )
}

/// A 404 whose body names a route, not a model: Go's and Ollama's `404 page not found`,
/// FastAPI's (vLLM) `{"detail":"Not Found"}`, OpenAI's "Invalid URL (POST /v1/responses)",
/// LM Studio's "Unexpected endpoint or method", Express's "Cannot POST /v1/…", llama.cpp's
/// "File Not Found". A body that mentions a model is a model 404 and stays one.
pub(super) fn unknown_route(t: &str) -> bool {
    // Fireworks: "model is missing conversation_config, please use /completions API instead".
    if seq(t, &["use /", "api instead"]) {
        return true;
    }
    if t.contains("model") || t.contains("deployment") {
        return false;
    }
    any(
        t,
        &[
            "page not found",
            "invalid url",
            "unexpected endpoint",
            "cannot post",
            "file not found",
            "no route",
            "unknown route",
            "unknown endpoint",
            "endpoint not found",
            "route not found",
            "not_found_route",
            "\"detail\":\"not found\"",
            "\"detail\": \"not found\"",
        ],
    ) || seq(t, &["post", "/v1/"])
}

/// NVIDIA NIM "function … DEGRADED": the hosted function for this model is down (row 15).
pub(super) fn nim_function_degraded(t: &str) -> bool {
    seq(t, &["function", "degraded"])
}

/// Which Gemini quota metric a 429 names (row 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GeminiMetric {
    /// Requests per day: a quota, until the daily reset.
    PerDay,
    /// Requests or tokens per minute: a short rate limit.
    PerMinute,
}

/// Gemini names the violated metric in its quota ids (`…PerDayPerProjectPerModel…`,
/// `…PerMinute…`) or as `rpd` / `rpm` / `tpm`. A per-day violation dominates.
pub(super) fn gemini_metric(t: &str) -> Option<GeminiMetric> {
    if any(t, &["perday", "per_day", "per day"]) || has_word(t, "rpd") {
        Some(GeminiMetric::PerDay)
    } else if any(t, &["perminute", "per_minute", "per minute"])
        || has_word(t, "rpm")
        || has_word(t, "tpm")
    {
        Some(GeminiMetric::PerMinute)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinators() {
        assert!(seq("a context is too long", &["context", "too long"]));
        assert!(!seq("too long context", &["context", "too long"]));
        assert!(has_word("401 unauthorized.", "unauthorized"));
        assert!(!has_word("preunauthorized", "unauthorized"));
        assert!(near(
            "model x does not support tools",
            "model",
            "does not support",
            80
        ));
        assert!(!near(
            &format!("model{}unsupported", " ".repeat(90)),
            "model",
            "unsupported",
            80
        ));
        assert!(opt_sep("high-frequency", "high", "frequency"));
        assert!(opt_sep("highfrequency", "high", "frequency"));
        assert!(!opt_sep("high  frequency", "high", "frequency"));
        assert!(opt_sep("rate·limit", "rate", "limit"));
        assert!(word_then_any("max_tokens too big", "max", &["token"]));
        assert!(!word_then_any("climax token", "max", &["token"]));
    }

    #[test]
    fn json_fields() {
        assert!(json_field_is(
            r#"{"error_code": 1010}"#,
            "error_code",
            "1010"
        ));
        assert!(json_field_is(
            r#"{"error_code":"1010"}"#,
            "error_code",
            "1010"
        ));
        assert!(!json_field_is(
            r#"{"error_code":10100}"#,
            "error_code",
            "1010"
        ));
        assert!(!json_field_is(
            r#"{"my_error_code":1010}"#,
            "error_code",
            "1010"
        ));
        assert!(cloudflare_non_retryable(
            r#"{"retryable":false,"cloudflare_error":true}"#
        ));
        assert!(cloudflare_non_retryable(
            r#"{"retryable": false, "title": "cloudflare"}"#
        ));
        assert!(!cloudflare_non_retryable(
            r#"{"retryable":true,"cloudflare_error":true}"#
        ));
        assert!(!cloudflare_non_retryable(r#"{"retryable":false}"#));
    }

    #[test]
    fn auth_credential_patterns() {
        assert!(auth_credential_error(
            "invalid api key provided for model gpt-4o"
        ));
        assert!(auth_credential_error("the api_key is revoked"));
        assert!(auth_credential_error("apikey not valid"));
        assert!(auth_credential_error("expired token"));
        assert!(auth_credential_error("401 unauthorized"));
        assert!(!auth_credential_error(
            "the model `foo` does not exist or is not available"
        ));
    }

    #[test]
    fn quota_look() {
        assert!(looks_like_quota_exhausted(
            "you exceeded your current quota"
        ));
        assert!(looks_like_quota_exhausted("requests per day limit reached"));
        assert!(looks_like_quota_exhausted("monthly usage limit reached"));
        assert!(!looks_like_quota_exhausted("rate limit hit, slow down"));
        assert!(!looks_like_quota_exhausted("credit_balance_too_low"));
    }
}
