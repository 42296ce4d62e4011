//! Upstream error bodies: the provider's own `{code, type}`, the status an in-band error
//! stands for, and the `code` the client is told.
//!
//! Providers wrap errors differently: OpenAI and its imitators `{"error":{"message","type",
//! "code"}}`, Anthropic `{"type":"error","error":{"type","message"}}`, Google
//! `[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}]`, vLLM `{"object":"error","type",
//! "code":400}`, Ollama `{"error":"…"}`, Responses stream events `{"type":"error","code"}`.
//! [`parse_error_body`] reads all of them into one [`UpstreamErrorBody`].
//!
//! Two decisions rest on it:
//! - **in-band errors are classified by their type** ([`in_band_status`]): a `200` whose body
//!   is an error object, or an SSE error event before content, is the status its type means
//!   (a rate limit 429, an overload 529, an invalid request 400), not a blanket 502, so a 429
//!   sent in-band never counts on the breaker;
//! - **the provider's code reaches the client** ([`client_code`]), translated where the
//!   provider's format has none: Anthropic's "prompt is too long" is OpenAI's
//!   `context_length_exceeded`, the code coding agents and SDK users compact their context on.

use serde_json::Value;

use super::patterns as p;
use crate::hints::bounded;

/// The structured fields of an upstream error body (owned: they outlive the body's parse).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamErrorBody {
    /// A string `code` (`context_length_exceeded`, `rate_limit_exceeded`, GLM's `"1302"`).
    pub code: Option<String>,
    /// The error `type` (`invalid_request_error`, `rate_limit_error`), or Google's `status`
    /// (`RESOURCE_EXHAUSTED`) when there is no type.
    pub error_type: Option<String>,
    /// A numeric HTTP status inside the body (Google's and vLLM's `code: 429`).
    pub status: Option<u16>,
}

/// A code is passed on to clients only if it looks like one: short, and made of
/// identifier characters (never a sentence, never markup).
const MAX_CODE_LEN: usize = 64;

fn as_code(v: &Value) -> Option<String> {
    let s = v.as_str()?.trim();
    let ok = !s.is_empty()
        && s.len() <= MAX_CODE_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    ok.then(|| s.to_owned())
}

fn as_status(v: &Value) -> Option<u16> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|s| (400..=599).contains(s))
}

/// Reads the structured fields of an error body in any of the envelopes above; a body that
/// is not JSON (or names nothing) gives the default.
pub fn parse_error_body(body: &str) -> UpstreamErrorBody {
    let Ok(value) = serde_json::from_str::<Value>(bounded(body).trim()) else {
        return UpstreamErrorBody::default();
    };
    // Google wraps its error in a one-element array.
    let value = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let mut out = UpstreamErrorBody::default();
    let error = value.get("error").filter(|e| e.is_object());
    // A Responses `response.failed` event carries its error under `response.error`.
    let error = error.or_else(|| {
        value
            .get("response")
            .and_then(|r| r.get("error"))
            .filter(|e| e.is_object())
    });
    for v in error.into_iter().chain(std::iter::once(&value)) {
        if out.code.is_none() {
            out.code = v.get("code").and_then(as_code).filter(|c| !is_numeric(c));
        }
        if out.status.is_none() {
            out.status = v.get("code").and_then(as_status);
        }
        if out.error_type.is_none() {
            out.error_type = v
                .get("type")
                .and_then(as_code)
                // The envelope's own `"type":"error"` names nothing.
                .filter(|t| t != "error")
                .or_else(|| v.get("status").and_then(as_code));
        }
    }
    // GLM sends numeric codes as strings (`"1302"`): a code, but not one a client can act on
    // unless nothing better is known.
    if out.code.is_none() {
        out.code = error
            .and_then(|e| e.get("code"))
            .and_then(as_code)
            .filter(|c| as_status(&Value::String(c.clone())).is_none());
    }
    out
}

fn is_numeric(code: &str) -> bool {
    code.bytes().all(|b| b.is_ascii_digit())
}

/// The status an in-band error means, from its code, then its type, then a numeric status in
/// the body; `None` when nothing names one (the caller keeps its default, 502).
pub fn in_band_status(body: &UpstreamErrorBody) -> Option<u16> {
    let by_name = |name: &str| -> Option<u16> {
        let n = name.to_ascii_lowercase();
        Some(match n.as_str() {
            "rate_limit_error"
            | "rate_limit_exceeded"
            | "rate_limited"
            | "resource_exhausted"
            | "too_many_requests"
            | "insufficient_quota"
            | "requests"
            | "tokens" => 429,
            "overloaded_error" | "overloaded" => 529,
            "service_unavailable" | "unavailable" | "server_is_overloaded" => 503,
            "invalid_request_error"
            | "invalid_argument"
            | "bad_request"
            | "badrequesterror"
            | "context_length_exceeded"
            | "invalid_prompt"
            | "content_filter"
            | "unsupported_parameter"
            | "invalid_request" => 400,
            "authentication_error" | "unauthenticated" | "invalid_api_key" => 401,
            "billing_error" | "payment_required" => 402,
            "permission_error" | "permission_denied" => 403,
            "not_found_error" | "not_found" | "model_not_found" => 404,
            "request_too_large" => 413,
            "timeout_error" | "deadline_exceeded" => 504,
            "api_error" | "server_error" | "internal" | "internal_error" => 500,
            _ => return None,
        })
    };
    body.code
        .as_deref()
        .and_then(by_name)
        .or_else(|| body.error_type.as_deref().and_then(by_name))
        .or(body.status)
}

/// The `code` the client sees for an upstream error: the provider's own string code, else
/// the code the client's format uses for what the text says (`context_length_exceeded` for a
/// prompt over the context window, e.g. Anthropic's "prompt is too long"), else the
/// provider's numeric code. `None`: the caller's default for the status.
pub fn client_code(body: &UpstreamErrorBody, error_text: &str) -> Option<String> {
    let t = bounded(error_text).to_lowercase();
    // A recognised context overflow is always `context_length_exceeded`, whatever generic
    // code the provider put next to it (DeepSeek's `invalid_request_error`, GLM's `1261`).
    if p::context_overflow_named(&t) {
        return Some(CONTEXT_LENGTH_EXCEEDED.to_owned());
    }
    body.code.clone()
}

/// The OpenAI code for a prompt over the model's context window.
pub const CONTEXT_LENGTH_EXCEEDED: &str = "context_length_exceeded";

/// The client code of a 404 that names a route, not a model.
pub const ROUTE_NOT_FOUND: &str = "route_not_found";

/// [`in_band_status`] of a raw error body, plus one case only the text shows: an error that
/// names an endpoint and no type (LM Studio's `{"error":"Unexpected endpoint or method. (POST
/// /v1/responses)"}` sent with a 200) is an unknown route, a 404.
pub fn in_band_status_of(body: &str) -> Option<u16> {
    in_band_status(&parse_error_body(body))
        .or_else(|| p::unknown_route(&bounded(body).to_lowercase()).then_some(404))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_envelope() {
        let b = parse_error_body(
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(b.code.as_deref(), Some("context_length_exceeded"));
        assert_eq!(b.error_type.as_deref(), Some("invalid_request_error"));
        assert_eq!(in_band_status(&b), Some(400));
        assert_eq!(
            client_code(&b, "").as_deref(),
            Some("context_length_exceeded")
        );
    }

    #[test]
    fn anthropic_envelope_and_translated_context_code() {
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        let b = parse_error_body(body);
        assert_eq!(b.code, None);
        assert_eq!(b.error_type.as_deref(), Some("invalid_request_error"));
        assert_eq!(
            client_code(&b, body).as_deref(),
            Some("context_length_exceeded")
        );
        let rate = parse_error_body(
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        );
        assert_eq!(in_band_status(&rate), Some(429));
        assert_eq!(client_code(&rate, "slow down"), None);
        let overloaded = parse_error_body(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(in_band_status(&overloaded), Some(529));
    }

    #[test]
    fn google_array_vllm_and_plain_bodies() {
        let g = parse_error_body(
            r#"[{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}]"#,
        );
        assert_eq!(g.status, Some(429));
        assert_eq!(g.error_type.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(in_band_status(&g), Some(429));
        let v = parse_error_body(
            r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert_eq!(v.code, None);
        assert_eq!(in_band_status(&v), Some(400));
        assert_eq!(
            parse_error_body("404 page not found"),
            UpstreamErrorBody::default()
        );
        assert_eq!(
            in_band_status(&parse_error_body(r#"{"error":"boom"}"#)),
            None
        );
    }

    #[test]
    fn numeric_string_codes_are_kept_last() {
        let glm = parse_error_body(
            r#"{"error":{"code":"1302","message":"您当前使用该API的并发数过高"}}"#,
        );
        assert_eq!(in_band_status(&glm), None);
        assert_eq!(glm.code.as_deref(), Some("1302"));
        assert_eq!(client_code(&glm, "").as_deref(), Some("1302"));
        let glm_context =
            parse_error_body(r#"{"error":{"code":"1261","message":"Prompt is too long"}}"#);
        assert_eq!(
            client_code(&glm_context, "Prompt is too long").as_deref(),
            Some("context_length_exceeded")
        );
    }

    #[test]
    fn context_overflow_wins_over_a_generic_code_and_routes_are_404() {
        let deepseek = parse_error_body(
            r#"{"error":{"message":"This model's maximum context length is 65536 tokens.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#,
        );
        assert_eq!(
            client_code(
                &deepseek,
                "This model's maximum context length is 65536 tokens."
            )
            .as_deref(),
            Some(CONTEXT_LENGTH_EXCEEDED)
        );
        assert_eq!(
            in_band_status_of(r#"{"error":"Unexpected endpoint or method. (POST /v1/responses)"}"#),
            Some(404)
        );
        assert_eq!(in_band_status_of(r#"{"error":"boom"}"#), None);
    }

    #[test]
    fn codes_that_are_not_identifiers_are_dropped() {
        let b = parse_error_body(r#"{"error":{"code":"<b>oops</b>","type":"x y"}}"#);
        assert_eq!(b.code, None);
        assert_eq!(b.error_type, None);
    }

    #[test]
    fn responses_stream_error_events() {
        let e = parse_error_body(
            r#"{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached"}"#,
        );
        assert_eq!(in_band_status(&e), Some(429));
        let failed = parse_error_body(
            r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"x"}}}"#,
        );
        assert_eq!(in_band_status(&failed), Some(500));
    }
}
