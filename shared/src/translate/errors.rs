//! Error envelopes, translated into the client's format.
//!
//! A provider's error must reach the client in the shape its SDK parses: OpenAI's
//! `{"error":{"message","type","param","code"}}` or Anthropic's
//! `{"type":"error","error":{"type","message"}}`, in a JSON body or as an in-band stream
//! event. The error type is mapped to the nearest one of the client's vocabulary; the
//! provider's own type survives as the `code` when the mapping changed it, so nothing is lost.

use serde_json::{Value, json};

use crate::sse::{Format, UpstreamStreamError, format_error_event};

/// The longest error message kept, in bytes.
const MAX_MESSAGE_BYTES: usize = 2048;

/// The client-format error type for a provider error type.
pub fn map_error_type(client: Format, error_type: &str) -> &str {
    match client {
        Format::Anthropic => match error_type {
            "invalid_request_error"
            | "authentication_error"
            | "permission_error"
            | "not_found_error"
            | "request_too_large"
            | "rate_limit_error"
            | "api_error"
            | "overloaded_error" => error_type,
            "insufficient_quota" | "rate_limit_exceeded" | "requests" | "tokens" => {
                "rate_limit_error"
            }
            "invalid_api_key" => "authentication_error",
            _ => "api_error",
        },
        Format::OpenAiChat | Format::OpenAiResponses => match error_type {
            "api_error" | "overloaded_error" | "timeout_error" => "server_error",
            "request_too_large" => "invalid_request_error",
            other => other,
        },
    }
}

/// The Anthropic error type for an HTTP status, for bodies that name none.
fn type_for_status(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// A provider's error body (any format, or not JSON at all) in the client's envelope.
pub fn translate_error_body(client: Format, status: u16, body: &[u8]) -> Value {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let inner = parsed
        .as_ref()
        .map(|v| v.get("error").filter(|e| e.is_object()).unwrap_or(v));
    let text = |key: &str| {
        inner
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let lossy;
    let message = match text("message") {
        Some(m) => m,
        None => {
            lossy = String::from_utf8_lossy(body);
            lossy.as_ref()
        }
    };
    let message = bounded(message, MAX_MESSAGE_BYTES);
    let provider_type = text("type")
        .filter(|t| *t != "error")
        .unwrap_or_else(|| type_for_status(status));
    let error_type = map_error_type(client, provider_type);
    let code = inner
        .and_then(|e| e.get("code"))
        .filter(|c| !c.is_null())
        .cloned()
        .unwrap_or_else(|| Value::from(provider_type));
    match client {
        Format::Anthropic => json!({
            "type": "error",
            "error": {"type": error_type, "message": message},
        }),
        Format::OpenAiChat | Format::OpenAiResponses => json!({
            "error": {
                "message": message,
                "type": error_type,
                "param": inner.and_then(|e| e.get("param")).cloned().unwrap_or(Value::Null),
                "code": code,
            },
        }),
    }
}

/// An in-band stream error, as a frame in the client's format.
pub(crate) fn error_frame(client: Format, error: &UpstreamStreamError) -> Vec<u8> {
    let code = error.code.as_deref().unwrap_or(&error.error_type);
    format_error_event(
        client,
        map_error_type(client, &error.error_type),
        code,
        &error.message,
    )
}

fn bounded(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
