//! Management authentication for `/api/cluster/*`, with the node's rules (the admin toolkit's
//! [`admin_kit::auth`]): `Authorization: Bearer <management key>`, digests compared in
//! constant time, 401 / 403 answers a node would give, and an empty
//! `[auth] management_key_env` turns the API off. This is the actix adapter.

use std::future::{Ready, ready};

use actix_web::{FromRequest, HttpRequest, dev::Payload, web};
use switchyard_shared::admin_kit::{self, auth::digest_in};

use crate::error::ApiError;

pub use admin_kit::auth::digest;

/// The digests a caller's key is checked against: all the extractor needs of the replica,
/// registered as its own app data so that authentication does not reach into the service.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    /// The management key's SHA-256; `None` turns the API off.
    pub management: Option<[u8; 32]>,
    /// Client keys' SHA-256: presenting one is a 403, not a 401.
    pub clients: Vec<[u8; 32]>,
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
    let Some(keys) = req.app_data::<web::Data<Keys>>() else {
        return Err(ApiError::internal(
            "internal_error",
            "coordinator not configured",
        ));
    };
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    check(
        keys.management.as_ref(),
        &keys.clients,
        admin_kit::auth::bearer(header),
    )
}

/// The decision for this coordinator's keys.
pub fn check(
    expected: Option<&[u8; 32]>,
    client_keys: &[[u8; 32]],
    token: Option<&str>,
) -> Result<ManagementKey, ApiError> {
    admin_kit::auth::authorize(expected, token, |_, presented| {
        digest_in(presented, client_keys)
    })
    .map(|caller| ManagementKey { id: caller.0 })
    .map_err(ApiError)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_rules() {
        let m = digest("mgmt");
        let c = [digest("client")];
        assert!(check(Some(&m), &c, Some("mgmt")).is_ok());
        assert_eq!(check(Some(&m), &c, None).unwrap_err().0.status, 401);
        let wrong = check(Some(&m), &c, Some("nope")).unwrap_err();
        assert_eq!(wrong.0.code, "invalid_management_key");
        let client = check(Some(&m), &c, Some("client")).unwrap_err();
        assert_eq!(
            (client.0.status, client.0.code.as_str()),
            (403, "client_key_not_allowed")
        );
        let off = check(None, &c, Some("mgmt")).unwrap_err();
        assert_eq!(off.0.code, "management_api_disabled");
    }
}
