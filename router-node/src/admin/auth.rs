//! Management authentication: `Authorization: Bearer <management key>`, decided by the admin
//! toolkit shared with the coordinator ([`admin_kit::auth`]); this is the actix adapter.
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
use switchyard_shared::admin_kit;

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

/// The actix adapter of [`admin_kit::auth::authorize`], with this node's keys.
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
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    admin_kit::auth::authorize(
        rt.management_key_sha256.as_ref(),
        admin_kit::auth::bearer(header),
        |token, _| rt.keys.find(token.as_bytes()).is_some(),
    )
    .map(|caller| ManagementKey { id: caller.0 })
    .map_err(ApiError::from)
}
