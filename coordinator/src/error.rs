//! The error envelope of the coordinator's API: the admin toolkit's
//! ([`switchyard_shared::admin_kit::AdminError`], the same shape as a node's admin API) as an
//! actix response.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use switchyard_shared::admin_kit::AdminError;

/// An API error: the toolkit's error, answerable by actix.
#[derive(Debug, Clone)]
pub struct ApiError(pub AdminError);

impl ApiError {
    pub fn new(
        status: StatusCode,
        error_type: &'static str,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Self(AdminError::new(status.as_u16(), error_type, code, message))
    }

    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self(AdminError::not_found(code, message))
    }

    /// 503: Redis did not answer; nothing was changed (or read).
    pub fn store_unavailable(e: &switchyard_store::StoreError) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "state_store_unavailable",
            format!("The shared state store did not answer: {}", e.kind()),
        )
    }

    /// 500 `internal_error` (or another code) with a message fit for an operator.
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        Self(AdminError::internal(code, message))
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        Self(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut builder = HttpResponse::build(self.status_code());
        if self.0.challenge {
            builder.insert_header(("www-authenticate", "Bearer"));
        }
        builder
            .content_type("application/json")
            .body(self.0.body().to_string())
    }
}

/// What a handler returns.
pub type ApiResult = Result<HttpResponse, ApiError>;
