//! Management authentication: `Authorization: Bearer <management key>`.
//!
//! Only the key's SHA-256 is kept and digests are compared in constant time, so timing says
//! nothing about the key. The answers are distinct on purpose, because operators debug them:
//! no or a wrong bearer is 401 (`missing_management_key` / `invalid_management_key`), a
//! configured *client* key is 403 `client_key_not_allowed` (a client key must never steer the
//! gateway, and saying so beats a confusing 401), and a disabled API (no management key
//! configured) is 403 `management_api_disabled`. Audit logs name the caller by
//! [`CallerId`], a fingerprint of the digest, never by the key.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AdminError;

/// SHA-256 of a key.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// `mgmt-` plus the first 8 hex digits of the key's SHA-256: safe to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerId(pub String);

/// The bearer token of an `Authorization` header value, if any (scheme case-insensitive).
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, token) = authorization?.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The decision. `expected` is the management key's digest (`None`: the API is disabled);
/// `is_client_key` says whether a presented token that is not the management key is a
/// configured client key (each binary keeps its client keys its own way).
pub fn authorize(
    expected: Option<&[u8; 32]>,
    token: Option<&str>,
    is_client_key: impl FnOnce(&str, &[u8; 32]) -> bool,
) -> Result<CallerId, AdminError> {
    let Some(expected) = expected else {
        return Err(AdminError::new(
            403,
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
        return Ok(CallerId(format!("mgmt-{}", hex::encode(&presented[..4]))));
    }
    if is_client_key(token, &presented) {
        return Err(AdminError::new(
            403,
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

/// Whether `presented` is one of `digests`, comparing with every one without early exit.
pub fn digest_in(presented: &[u8; 32], digests: &[[u8; 32]]) -> bool {
    let mut found = false;
    for key in digests {
        found |= bool::from(key.ct_eq(presented));
    }
    found
}

fn unauthorized(code: &str, message: &str) -> AdminError {
    let mut e = AdminError::new(401, "authentication_error", code, message);
    e.challenge = true;
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(token: Option<&str>) -> Result<CallerId, AdminError> {
        let m = digest("mgmt");
        let clients = [digest("client")];
        authorize(Some(&m), token, |_, d| digest_in(d, &clients))
    }

    #[test]
    fn the_answers_are_distinct() {
        let ok = check(Some("mgmt")).unwrap();
        assert_eq!(ok.0, format!("mgmt-{}", &hex::encode(digest("mgmt"))[..8]));
        let missing = check(None).unwrap_err();
        assert_eq!((missing.status, missing.challenge), (401, true));
        assert_eq!(missing.code, "missing_management_key");
        let wrong = check(Some("nope")).unwrap_err();
        assert_eq!(
            (wrong.status, wrong.code.as_str()),
            (401, "invalid_management_key")
        );
        let client = check(Some("client")).unwrap_err();
        assert_eq!(
            (client.status, client.code.as_str()),
            (403, "client_key_not_allowed")
        );
        assert!(!client.challenge);
        let off = authorize(None, Some("mgmt"), |_, _| false).unwrap_err();
        assert_eq!(
            (off.status, off.code.as_str()),
            (403, "management_api_disabled")
        );
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_needs_a_token() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("  bearer   abc  ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(Some("abc")), None);
        assert_eq!(bearer(None), None);
    }
}
