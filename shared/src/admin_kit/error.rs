//! The admin error envelope: every error has a status, a `type` and a `code`, plus
//! `details: [{field, message}]` when a field is to blame.

use serde_json::{Value, json};

/// One field a request got wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDetail {
    /// Dotted path (`connectionIds[2]`, `provider_breaker.apikey.failure_threshold`); empty for
    /// the body as a whole.
    pub field: String,
    pub message: String,
}

/// An admin API error, independent of the HTTP framework: `status` is the HTTP status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    pub status: u16,
    /// `invalid_request_error`, `authentication_error`, `permission_error` or `server_error`.
    pub error_type: &'static str,
    pub code: String,
    pub message: String,
    pub details: Vec<FieldDetail>,
    /// Answer with `WWW-Authenticate: Bearer` (a 401 for a missing or wrong key).
    pub challenge: bool,
}

impl AdminError {
    pub fn new(
        status: u16,
        error_type: &'static str,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            error_type,
            code: code.into(),
            message: message.into(),
            details: Vec::new(),
            challenge: false,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", code, message)
    }

    /// 404 `invalid_request_error`.
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(404, "invalid_request_error", code, message)
    }

    /// 500 `server_error`; the message must not carry internals.
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        Self::new(500, "server_error", code, message)
    }

    /// 400 `invalid_request` naming one field (message and detail alike).
    pub fn field(field: &str, message: &str) -> Self {
        Self::bad_request("invalid_request", message).with_details(vec![(field, message)])
    }

    /// Replaces `details` with `(field, message)` pairs.
    pub fn with_details<F: Into<String>, M: Into<String>>(
        mut self,
        details: impl IntoIterator<Item = (F, M)>,
    ) -> Self {
        self.details = details
            .into_iter()
            .map(|(field, message)| FieldDetail {
                field: field.into(),
                message: message.into(),
            })
            .collect();
        self
    }

    /// `details` as JSON, for frameworks that build the envelope themselves.
    pub fn details_json(&self) -> Value {
        self.details
            .iter()
            .map(|d| json!({"field": d.field, "message": d.message}))
            .collect()
    }

    /// The envelope: `{"error": {"message", "type", "code", "details"?}}`.
    pub fn body(&self) -> Value {
        let mut error = json!({
            "message": self.message,
            "type": self.error_type,
            "code": self.code,
        });
        if !self.details.is_empty() {
            error["details"] = self.details_json();
        }
        json!({ "error": error })
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for AdminError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_has_type_code_and_details_only_when_present() {
        let plain = AdminError::not_found("provider_not_found", "No provider").body();
        assert_eq!(plain["error"]["type"], "invalid_request_error");
        assert_eq!(plain["error"]["code"], "provider_not_found");
        assert_eq!(plain["error"]["message"], "No provider");
        assert!(plain["error"].get("details").is_none());
        let field = AdminError::field("model", "`model` must be 1 to 256 characters");
        assert_eq!(field.status, 400);
        let body = field.body();
        assert_eq!(body["error"]["code"], "invalid_request");
        assert_eq!(body["error"]["details"][0]["field"], "model");
        assert_eq!(
            field.to_string(),
            "400 invalid_request: `model` must be 1 to 256 characters"
        );
    }
}
