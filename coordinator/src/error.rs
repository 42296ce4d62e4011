//! The error envelope of the coordinator's API, the same shape as a node's admin API:
//! `{"error": {"message", "type", "code", "details"?}}` with a matching HTTP status, so tooling
//! written against a node works against the coordinator.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::{Value, json};

/// An API error: status, `type`, `code`, message and optional field details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_type: &'static str,
    pub code: String,
    pub message: String,
    pub details: Vec<(String, String)>,
    /// Sent as `WWW-Authenticate: Bearer` (401 only).
    pub challenge: bool,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        error_type: &'static str,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            error_type,
            code: code.to_owned(),
            message: message.into(),
            details: Vec::new(),
            challenge: false,
        }
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 503: Redis did not answer; nothing was changed (or read).
    pub fn store_unavailable(e: &switchyard_shared::store::StoreError) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "state_store_unavailable",
            format!("The shared state store did not answer: {}", e.kind()),
        )
    }

    /// A 400 naming one field.
    pub fn field(field: &str, message: &str) -> Self {
        Self::bad_request("invalid_request", message)
            .with_details(vec![(field.to_owned(), message.to_owned())])
    }

    pub fn with_details(mut self, details: Vec<(String, String)>) -> Self {
        self.details = details;
        self
    }

    pub fn body(&self) -> Value {
        let mut error = json!({
            "message": self.message,
            "type": self.error_type,
            "code": self.code,
        });
        if !self.details.is_empty() {
            error["details"] = self
                .details
                .iter()
                .map(|(f, m)| json!({"field": f, "message": m}))
                .collect();
        }
        json!({ "error": error })
    }
}

impl std::fmt::Display for ApiError {
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

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status);
        if self.challenge {
            builder.insert_header(("www-authenticate", "Bearer"));
        }
        builder
            .content_type("application/json")
            .body(self.body().to_string())
    }
}

/// What a handler returns.
pub type ApiResult = Result<HttpResponse, ApiError>;
