//! What every admin handler shares: the error type, strict body and query parsing, id checks
//! and the conversion of the node's monotonic times into wall-clock milliseconds.
//!
//! Body, id and error rules come from the admin toolkit shared with the coordinator
//! ([`switchyard_shared::admin_kit`]); this module adapts them to actix and the node's
//! [`GatewayError`].
//!
//! Bad input is always answered in the gateway's error envelope with a status, `type` and
//! `code` (and `details: [{field, message}]` when a field is to blame), never with actix's
//! plain-text defaults, so tooling can branch on the code.

use actix_web::http::StatusCode;
use actix_web::http::header::CONTENT_TYPE;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use switchyard_shared::Millis;
use switchyard_shared::admin_kit::{AdminError, body, clear};
use switchyard_store::StoreError;

use super::MAX_BODY_BYTES;
use crate::api::body::read_limited;
use crate::api::errors::{ClientFormat, GatewayError};
use crate::cluster_sync::operator::{self, OperatorWrite};
use crate::runtime::Runtime;

/// In redis mode, writes an operator action to Redis before this node changes anything (see
/// [`crate::cluster_sync::operator`]); `Ok` at once in embedded mode. When Redis does not take
/// it the answer is [`store_unavailable`]: nothing was changed, and nothing is queued.
pub async fn write_cluster(rt: &Runtime, action: OperatorWrite<'_>) -> Result<(), ApiError> {
    operator::write(rt, action)
        .await
        .map_err(|e| store_unavailable(&e, "nothing was changed"))
}

/// 503 `cluster_store_unavailable` for an operator action Redis did not take, naming what
/// failed: `storeError` is Redis's reply code (`OOM`, `READONLY`, `LOADING`, …), `TIMEOUT` or
/// `UNAVAILABLE` (Redis is held for down), and `transient` whether it may pass by itself.
pub fn store_unavailable(e: &StoreError, outcome: &str) -> ApiError {
    tracing::warn!(error = %e, "operator action refused: the cluster store did not take it");
    let reason = e.reason();
    let what = match e {
        StoreError::Unavailable => "is unreachable".to_owned(),
        StoreError::Timeout { .. } => "did not answer in time".to_owned(),
        _ => format!("refused the write ({reason})"),
    };
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        "cluster_store_unavailable",
        format!("The cluster state store (Redis) {what}; {outcome}"),
    )
    .with_field("storeError", reason)
    .with_field("transient", e.transient())
}

/// An admin error: a [`GatewayError`] rendered in the OpenAI-style envelope.
#[derive(Debug)]
pub struct ApiError(pub GatewayError);

impl ApiError {
    pub fn new(
        status: StatusCode,
        error_type: &'static str,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Self(GatewayError::new(status, error_type, code, message))
    }

    /// 400 `invalid_request_error`.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 404 `invalid_request_error`.
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            code,
            message,
        )
    }

    /// 503 when an actor did not answer in time (or is not running).
    pub fn actor_unavailable(what: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "actor_unavailable",
            format!("The actor of {what} did not answer in time; try again"),
        )
    }

    /// Adds a field to the error object.
    pub fn with_field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0 = self.0.with_field(key, value);
        self
    }

    /// Adds `details: [{field, message}]`.
    pub fn with_details(mut self, details: Vec<(String, String)>) -> Self {
        let list: Vec<Value> = details
            .into_iter()
            .map(|(field, message)| json!({"field": field, "message": message}))
            .collect();
        self.0 = self.0.with_field("details", list);
        self
    }

    /// The HTTP response.
    pub fn response(&self) -> HttpResponse {
        self.0.to_response(ClientFormat::OpenAiChat)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.0.status
    }

    fn error_response(&self) -> HttpResponse {
        self.response()
    }
}

impl From<GatewayError> for ApiError {
    fn from(e: GatewayError) -> Self {
        Self(e)
    }
}

/// The admin toolkit's errors in the gateway's envelope (details and the bearer challenge
/// included).
impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut error =
            GatewayError::new(status, e.error_type, e.code.as_str(), e.message.as_str());
        if !e.details.is_empty() {
            error = error.with_field("details", e.details_json());
        }
        if e.challenge {
            error = error.with_header("www-authenticate", "Bearer");
        }
        Self(error)
    }
}

/// What an admin handler returns.
pub type ApiResult = Result<HttpResponse, ApiError>;

/// Reads a JSON body strictly: a non-JSON content type is 415, more than
/// [`MAX_BODY_BYTES`] is 413, and a syntax error, wrong type or unknown field is 400 naming the
/// field. An empty body is `Ok(None)`.
pub async fn read_json<T: DeserializeOwned>(
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<Option<T>, ApiError> {
    let raw = read_raw(req, payload).await?;
    Ok(body::parse(&raw)?)
}

/// Like [`read_json`], but an empty body is a 400.
pub async fn require_json<T: DeserializeOwned>(
    req: &HttpRequest,
    payload: web::Payload,
) -> Result<T, ApiError> {
    read_json(req, payload)
        .await?
        .ok_or_else(|| body::missing_body().into())
}

/// The body as text with the content-type and size checks of [`read_json`].
pub async fn read_raw(req: &HttpRequest, payload: web::Payload) -> Result<bytes::Bytes, ApiError> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .map(|ct| ct.to_str().unwrap_or(""));
    body::check_content_type(content_type)?;
    let length = req
        .headers()
        .get(actix_web::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    Ok(read_limited(payload, length, MAX_BODY_BYTES).await?)
}

/// Parses the query string into `T` (which should deny unknown fields): 400 `invalid_query`.
pub fn parse_query<T: DeserializeOwned>(req: &HttpRequest) -> Result<T, ApiError> {
    web::Query::<T>::from_query(req.query_string())
        .map(web::Query::into_inner)
        .map_err(|e| ApiError::bad_request("invalid_query", format!("Invalid query: {e}")))
}

/// Checks an id taken from a path or body before it is looked up: ids are short, printable and
/// never contain `/`, `%` or `..` (400 `invalid_id`).
pub fn check_id(id: &str, what: &str) -> Result<(), ApiError> {
    Ok(body::check_id(id, what)?)
}

/// The index of a configured provider, or 404 `provider_not_found`.
pub fn provider_idx(rt: &Runtime, id: &str) -> Result<usize, ApiError> {
    check_id(id, "provider")?;
    rt.table
        .provider_by_id
        .get(id)
        .copied()
        .ok_or_else(|| clear::provider_not_found(id).into())
}

/// The index of a configured connection, or 404 `connection_not_found`.
pub fn connection_idx(rt: &Runtime, id: &str) -> Result<usize, ApiError> {
    check_id(id, "connection")?;
    rt.table
        .conn_by_id
        .get(id)
        .copied()
        .ok_or_else(|| clear::connection_not_found(id).into())
}

/// The node's configured providers and connections, as the admin toolkit's clear
/// validation looks them up.
pub struct Catalogue<'a>(pub &'a Runtime);

impl clear::Catalogue for Catalogue<'_> {
    fn has_provider(&self, id: &str) -> bool {
        self.0.table.provider_by_id.contains_key(id)
    }

    fn provider_of(&self, connection: &str) -> Option<&str> {
        let conn = self
            .0
            .table
            .connections
            .get(*self.0.table.conn_by_id.get(connection)?)?;
        self.0
            .table
            .providers
            .get(conn.provider_idx)
            .map(|p| &*p.id)
    }
}

/// One reading of both clocks, to turn the node's monotonic policy times into Unix epoch
/// milliseconds (what operators can compare with their own clocks).
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub mono: Millis,
    pub epoch: u64,
}

impl Now {
    pub fn read(rt: &Runtime) -> Self {
        Self {
            mono: rt.table.clock.now(),
            epoch: rt.table.clock.epoch_ms(),
        }
    }

    /// The epoch milliseconds of monotonic time `at` (past or future).
    pub fn epoch_of(&self, at: Millis) -> u64 {
        if at >= self.mono {
            self.epoch.saturating_add(at - self.mono)
        } else {
            self.epoch.saturating_sub(self.mono - at)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules are the toolkit's (tested there); this checks the adapter keeps the answer.
    #[test]
    fn toolkit_errors_keep_status_code_details_and_challenge() {
        let e = check_id("a/b", "connection").unwrap_err();
        assert_eq!(
            (e.0.status, e.0.code.as_str()),
            (StatusCode::BAD_REQUEST, "invalid_id")
        );
        let mut auth = AdminError::field("x", "bad");
        auth.challenge = true;
        let e = ApiError::from(auth);
        assert_eq!(e.0.fields["details"][0]["field"], "x");
        assert!(
            e.0.headers
                .iter()
                .any(|(n, v)| n == "www-authenticate" && v == "Bearer")
        );
    }

    #[test]
    fn monotonic_times_map_to_epoch_both_ways() {
        let now = Now {
            mono: 10_000,
            epoch: 1_700_000_000_000,
        };
        assert_eq!(now.epoch_of(10_000), 1_700_000_000_000);
        assert_eq!(now.epoch_of(9_000), 1_699_999_999_000);
        assert_eq!(now.epoch_of(12_500), 1_700_000_002_500);
    }
}
