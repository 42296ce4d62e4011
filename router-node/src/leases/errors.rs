//! The errors clients see from leases: `{"error":{"message","type":"lease_error","code"}}`.
//!
//! Codes follow the reference gateway's lease registry, so clients written for it keep their
//! handling. No body ever carries the owner token, the connection id or a credential.

use actix_web::http::StatusCode;
use serde_json::json;
use switchyard_shared::Millis;

use super::policy::capacity_retry_after_secs;
use crate::api::errors::{ErrorSource, GatewayError};

/// The `type` of every lease error.
pub const LEASE_ERROR: &str = "lease_error";

fn lease(status: StatusCode, code: &str, message: &str) -> GatewayError {
    GatewayError::new(status, LEASE_ERROR, code, message).with_source(ErrorSource::Downstream)
}

pub fn content_type_required() -> GatewayError {
    lease(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "LEASE_CONTENT_TYPE_REQUIRED",
        "Content-Type must be application/json",
    )
}

pub fn authentication_required() -> GatewayError {
    lease(
        StatusCode::UNAUTHORIZED,
        "LEASE_AUTHENTICATION_REQUIRED",
        "Session leases need an API key: send `Authorization: Bearer <key>` or `x-api-key`",
    )
}

pub fn api_key_invalid() -> GatewayError {
    lease(
        StatusCode::UNAUTHORIZED,
        "LEASE_API_KEY_INVALID",
        "Invalid API key",
    )
}

pub fn scope_required() -> GatewayError {
    lease(
        StatusCode::FORBIDDEN,
        "LEASE_SCOPE_REQUIRED",
        "This API key lacks the `lease:exclusive` scope",
    )
}

pub fn key_configuration_invalid() -> GatewayError {
    lease(
        StatusCode::FORBIDDEN,
        "LEASE_KEY_CONFIGURATION_INVALID",
        "A `lease:exclusive` key must list its allowed connections",
    )
}

pub fn action_invalid(message: &str) -> GatewayError {
    lease(StatusCode::BAD_REQUEST, "LEASE_ACTION_INVALID", message)
}

pub fn context_required() -> GatewayError {
    lease(
        StatusCode::BAD_REQUEST,
        "LEASE_CONTEXT_REQUIRED",
        "Send the lease owner token in `X-Switchyard-Lease-Owner`",
    )
}

pub fn context_invalid(message: &str) -> GatewayError {
    lease(StatusCode::BAD_REQUEST, "LEASE_CONTEXT_INVALID", message)
}

pub fn model_invalid(message: &str) -> GatewayError {
    lease(StatusCode::BAD_REQUEST, "LEASE_MODEL_INVALID", message)
}

pub fn fence_stale() -> GatewayError {
    lease(
        StatusCode::CONFLICT,
        "LEASE_FENCE_STALE",
        "The lease generation is not the live one: the lease expired, was released or moved on",
    )
}

pub fn lease_required() -> GatewayError {
    lease(
        StatusCode::CONFLICT,
        "LEASE_REQUIRED",
        "This API key routes through exclusive session leases: send \
         `X-Switchyard-Lease-Owner` and `X-Switchyard-Lease-Generation`",
    )
}

pub fn connection_mismatch() -> GatewayError {
    lease(
        StatusCode::CONFLICT,
        "LEASE_CONNECTION_MISMATCH",
        "The lease owner holds a lease that does not match this request",
    )
}

pub fn no_eligible_connection() -> GatewayError {
    lease(
        StatusCode::CONFLICT,
        "LEASE_NO_ELIGIBLE_CONNECTION",
        "No connection of this API key serves the model",
    )
}

pub fn eligibility_unavailable(retry_after_ms: Option<Millis>) -> GatewayError {
    let e = lease(
        StatusCode::TOO_MANY_REQUESTS,
        "LEASE_ELIGIBILITY_UNAVAILABLE",
        "Every connection for this lease is cooling down or unavailable",
    );
    match retry_after_ms {
        Some(ms) => e.with_retry_after_ms(ms),
        None => e,
    }
}

/// 429 `WAITING_FOR_CAPACITY`: every free eligible connection is held by a foreign lease.
pub fn capacity_unavailable(retry_after_ms: Millis, eligible: usize, free: usize) -> GatewayError {
    let secs = capacity_retry_after_secs(retry_after_ms);
    let mut e = lease(
        StatusCode::TOO_MANY_REQUESTS,
        "LEASE_CAPACITY_UNAVAILABLE",
        "Exclusive managed session capacity is temporarily unavailable",
    )
    .with_top_level("state", "WAITING_FOR_CAPACITY")
    .with_top_level("reason", "NO_FREE_ELIGIBLE_CONNECTION")
    .with_top_level("retryAfter", json!(secs))
    .with_top_level("eligibleCount", json!(eligible))
    .with_top_level("freeCount", json!(free));
    e.retry_after_secs = Some(secs);
    e
}

pub fn service_unavailable() -> GatewayError {
    lease(
        StatusCode::SERVICE_UNAVAILABLE,
        "LEASE_SERVICE_UNAVAILABLE",
        "The lease service is unavailable; leased requests are refused until it is back",
    )
    .with_source(ErrorSource::Internal)
    .with_retry_after_ms(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::errors::ClientFormat;

    #[test]
    fn capacity_body_matches_the_reference_shape() {
        let e = capacity_unavailable(2_500, 2, 0);
        let b = e.body(ClientFormat::OpenAiChat);
        assert_eq!(e.status.as_u16(), 429);
        assert_eq!(e.retry_after_secs, Some(3));
        assert_eq!(b["state"], "WAITING_FOR_CAPACITY");
        assert_eq!(b["error"]["type"], "lease_error");
        assert_eq!(b["error"]["code"], "LEASE_CAPACITY_UNAVAILABLE");
        assert_eq!(b["retryAfter"], 3);
        assert_eq!(b["eligibleCount"], 2);
        assert_eq!(b["freeCount"], 0);
    }
}
