//! Management authentication for `/api/cluster/*`, with the node's rules.
//!
//! `Authorization: Bearer <management key>`; only the key's SHA-256 is kept and digests are
//! compared in constant time. No or a wrong bearer is 401 (`missing_management_key` /
//! `invalid_management_key`), a configured client key is 403 `client_key_not_allowed`, and an
//! empty `[auth] management_key_env` turns the API off (403 `management_api_disabled`). Audit
//! logs name the caller by [`ManagementKey::id`], a fingerprint of the digest, never the key.

use std::future::{Ready, ready};
use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::service::Coordinator;

/// SHA-256 of a key.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// An authenticated management caller (use it as a handler argument).
#[derive(Debug, Clone)]
pub struct ManagementKey {
    /// `mgmt-` plus the first 8 hex digits of the key's SHA-256: safe to log.
    pub id: String,
}

impl FromRequest for ManagementKey {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req))
    }
}

fn authenticate(req: &HttpRequest) -> Result<ManagementKey, ApiError> {
    let Some(co) = req.app_data::<web::Data<Arc<Coordinator>>>() else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            "coordinator not configured",
        ));
    };
    check(
        co.settings.management_key_sha256.as_ref(),
        &co.settings.client_key_sha256,
        bearer(req).as_deref(),
    )
}

/// The decision, separate from actix so it can be tested.
pub fn check(
    expected: Option<&[u8; 32]>,
    client_keys: &[[u8; 32]],
    token: Option<&str>,
) -> Result<ManagementKey, ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "management_api_disabled",
            "The management API is disabled (auth.management_key_env is empty)",
        ));
    };
    let Some(token) = token else {
        return Err(unauthorized(
            "missing_management_key",
            "Missing management key: send `Authorization: Bearer <management key>`",
        ));
    };
    let presented = digest(token);
    if bool::from(presented.ct_eq(expected)) {
        return Ok(ManagementKey {
            id: format!("mgmt-{}", hex::encode(&presented[..4])),
        });
    }
    // Compare against every client key without early exit.
    let mut client = false;
    for key in client_keys {
        client |= bool::from(key.ct_eq(&presented));
    }
    if client {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "client_key_not_allowed",
            "A client API key cannot use the management API",
        ));
    }
    Err(unauthorized(
        "invalid_management_key",
        "Invalid management key",
    ))
}

fn unauthorized(code: &str, message: &str) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        code,
        message,
    );
    e.challenge = true;
    e
}

/// The bearer token of `Authorization`, if any (scheme case-insensitive).
fn bearer(req: &HttpRequest) -> Option<String> {
    let value = req.headers().get("authorization")?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_rules() {
        let m = digest("mgmt");
        let c = [digest("client")];
        assert!(check(Some(&m), &c, Some("mgmt")).is_ok());
        assert_eq!(check(Some(&m), &c, None).unwrap_err().status, 401);
        let wrong = check(Some(&m), &c, Some("nope")).unwrap_err();
        assert_eq!(wrong.code, "invalid_management_key");
        let client = check(Some(&m), &c, Some("client")).unwrap_err();
        assert_eq!(
            (client.status.as_u16(), client.code.as_str()),
            (403, "client_key_not_allowed")
        );
        let off = check(None, &c, Some("mgmt")).unwrap_err();
        assert_eq!(off.code, "management_api_disabled");
    }
}
