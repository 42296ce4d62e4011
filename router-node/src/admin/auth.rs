//! Management authentication: `Authorization: Bearer <management key>`.
//!
//! The key comes from the environment variable named by `[auth] management_key_env`; the node
//! keeps only its SHA-256 and compares digests in constant time, so timing says nothing about
//! the key. Answers are distinct on purpose, because operators debug them:
//!
//! - no bearer, or a wrong one → 401 `authentication_error` (`missing_management_key` /
//!   `invalid_management_key`);
//! - a configured *client* API key → 403 `permission_error` `client_key_not_allowed` (a client
//!   key must never steer the node, and saying so beats a confusing 401);
//! - `management_key_env = ""` → 403 `management_api_disabled` on every call.
//!
//! Audit logs name the caller by [`ManagementKey::id`], a short fingerprint of the key's digest,
//! never by the key.

use std::future::{Ready, ready};

use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ApiError;
use crate::reload::RuntimeCell;

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
    let Some(rt) = req
        .app_data::<web::Data<RuntimeCell>>()
        .map(|cell| cell.load())
    else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "internal_error",
            "runtime not configured",
        ));
    };
    let Some(expected) = rt.management_key_sha256 else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "management_api_disabled",
            "The management API is disabled on this node (auth.management_key_env is empty)",
        ));
    };
    let Some(token) = bearer(req) else {
        return Err(unauthorized(
            "missing_management_key",
            "Missing management key: send `Authorization: Bearer <management key>`",
        ));
    };
    let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    if bool::from(digest.ct_eq(&expected)) {
        return Ok(ManagementKey {
            id: format!("mgmt-{}", hex::encode(&digest[..4])),
        });
    }
    if rt.keys.find(token.as_bytes()).is_some() {
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
    let mut error = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        code,
        message,
    );
    error.0 = error.0.with_header("www-authenticate", "Bearer");
    error
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
