//! One error type for everything a client can be told, rendered at the edge.
//!
//! Every client-facing error has a status, a `type` and a `code` (the OpenAI envelope
//! `{"error":{"message","type","code",…}}`); Anthropic-format routes get Anthropic's envelope
//! `{"type":"error","error":{"type","message","code",…}}`, whose SDKs ignore the extra fields.
//! Messages are sanitised before they get here: no keys, no bearer values, no file paths.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

/// Which wire format the client speaks; it decides the error envelope and SSE framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFormat {
    /// `/v1/chat/completions`
    OpenAiChat,
    /// `/v1/responses`
    OpenAiResponses,
    /// `/v1/messages`
    Anthropic,
}

/// Where an error came from (pingora-style), for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorSource {
    /// The upstream provider answered with it or failed.
    Upstream,
    /// The client sent something we refuse.
    Downstream,
    /// Switchyard itself (policy decisions, overload, bugs).
    Internal,
}

/// A client-facing error.
#[derive(Debug, Clone)]
pub struct GatewayError {
    pub status: StatusCode,
    pub error_type: &'static str,
    pub code: String,
    pub message: String,
    pub source: ErrorSource,
    /// `Retry-After` in whole seconds (≥ 1 when present).
    pub retry_after_secs: Option<u64>,
    /// Extra fields inside the `error` object (e.g. `provider`, `retry_after`, `reset_seconds`).
    pub fields: Map<String, Value>,
    /// Extra top-level fields (e.g. `diagnostics`).
    pub top_level: Map<String, Value>,
    /// Extra response headers (`x-switchyard-*`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl GatewayError {
    /// A new error with the given status, type, code and message.
    pub fn new(
        status: StatusCode,
        error_type: &'static str,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            error_type,
            code: code.into(),
            message: message.into(),
            source: ErrorSource::Internal,
            retry_after_secs: None,
            fields: Map::new(),
            top_level: Map::new(),
            headers: Vec::new(),
        }
    }

    /// The client sent something we refuse (400 family).
    pub fn bad_request(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
        .with_source(ErrorSource::Downstream)
    }

    /// 401 for a missing or wrong API key.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            message,
        )
        .with_source(ErrorSource::Downstream)
    }

    /// 403 for a key that may not do this.
    pub fn forbidden(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "permission_error", code, message)
            .with_source(ErrorSource::Downstream)
    }

    /// 500 for our own bugs; the message never carries internals.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            message,
        )
    }

    pub fn with_source(mut self, source: ErrorSource) -> Self {
        self.source = source;
        self
    }

    /// Sets `Retry-After` from milliseconds, rounded up to whole seconds, at least 1.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_secs = Some(ms.div_ceil(1000).max(1));
        self
    }

    pub fn with_field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_owned(), value.into());
        self
    }

    pub fn with_top_level(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.top_level.insert(key.to_owned(), value.into());
        self
    }

    /// Adds a header; invalid header text is dropped rather than failing the response.
    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    /// The JSON body in the client's envelope.
    pub fn body(&self, format: ClientFormat) -> Value {
        let mut error = Map::new();
        match format {
            ClientFormat::Anthropic => {
                error.insert(
                    "type".into(),
                    anthropic_type(self.status, self.error_type).into(),
                );
                error.insert("message".into(), self.message.clone().into());
                error.insert("code".into(), self.code.clone().into());
            }
            ClientFormat::OpenAiChat | ClientFormat::OpenAiResponses => {
                error.insert("message".into(), self.message.clone().into());
                error.insert("type".into(), self.error_type.into());
                error.insert("code".into(), self.code.clone().into());
            }
        }
        for (k, v) in &self.fields {
            error.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let mut body = Map::new();
        if format == ClientFormat::Anthropic {
            body.insert("type".into(), "error".into());
        }
        body.insert("error".into(), Value::Object(error));
        for (k, v) in &self.top_level {
            body.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(body)
    }

    /// The full HTTP response in the client's envelope.
    pub fn to_response(&self, format: ClientFormat) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        if let Some(secs) = self.retry_after_secs {
            builder.insert_header(("retry-after", secs.to_string()));
        }
        for (name, value) in &self.headers {
            builder.insert_header((name.clone(), value.clone()));
        }
        builder
            .content_type("application/json")
            .body(self.body(format).to_string())
    }
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

/// Anthropic's error `type` names for our statuses, so its SDK raises the right exception class.
fn anthropic_type(status: StatusCode, ours: &'static str) -> &'static str {
    match status.as_u16() {
        400 | 405 | 409 | 415 | 422 if ours == "invalid_request_error" => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

/// A compact JSON error frame body for logs and in-band SSE errors.
pub fn error_json(error_type: &str, code: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": error_type, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_envelope_has_type_and_code_and_fields() {
        let e = GatewayError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "provider_circuit_open",
            "Provider openai circuit breaker is open",
        )
        .with_retry_after_ms(1200)
        .with_field("provider", "openai");
        let b = e.body(ClientFormat::OpenAiChat);
        assert_eq!(b["error"]["type"], "server_error");
        assert_eq!(b["error"]["code"], "provider_circuit_open");
        assert_eq!(b["error"]["provider"], "openai");
        assert_eq!(e.retry_after_secs, Some(2));
    }

    #[test]
    fn anthropic_envelope_maps_types() {
        let e = GatewayError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "x", "m");
        let b = e.body(ClientFormat::Anthropic);
        assert_eq!(b["type"], "error");
        assert_eq!(b["error"]["type"], "rate_limit_error");
        assert_eq!(b["error"]["code"], "x");
        let e = GatewayError::internal("boom");
        assert_eq!(
            e.body(ClientFormat::Anthropic)["error"]["type"],
            "api_error"
        );
        let e = GatewayError::bad_request("invalid_json", "bad");
        assert_eq!(
            e.body(ClientFormat::Anthropic)["error"]["type"],
            "invalid_request_error"
        );
    }

    #[test]
    fn retry_after_is_at_least_one_second() {
        assert_eq!(
            GatewayError::internal("x")
                .with_retry_after_ms(0)
                .retry_after_secs,
            Some(1)
        );
        assert_eq!(
            GatewayError::internal("x")
                .with_retry_after_ms(1000)
                .retry_after_secs,
            Some(1)
        );
        assert_eq!(
            GatewayError::internal("x")
                .with_retry_after_ms(1001)
                .retry_after_secs,
            Some(2)
        );
    }
}
