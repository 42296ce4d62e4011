//! Client authentication by API key.
//!
//! Keys are never stored: only their SHA-256. A presented key is hashed and compared against
//! every configured hash in constant time (no early exit), so response timing says nothing
//! about which bytes matched. Keys come from `Authorization: Bearer …` or `x-api-key`.

use std::sync::Arc;

use actix_web::http::header::{AUTHORIZATION, HeaderMap, HeaderName};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchyard_shared::config::glob_match;

use super::errors::GatewayError;

/// One configured client key: its id (safe to log) and policy.
#[derive(Debug, Clone)]
pub struct ClientKey {
    pub id: String,
    pub sha256: [u8; 32],
    pub allowed_models: Vec<String>,
    pub allowed_connections: Vec<String>,
    pub scopes: Vec<String>,
    pub requests_per_minute: u32,
}

impl ClientKey {
    /// Whether the key may use this client model name (glob patterns, `*` and `?`).
    pub fn allows_model(&self, model: &str) -> bool {
        self.allowed_models.is_empty() || self.allowed_models.iter().any(|p| glob_match(p, model))
    }

    /// Whether the key may use this connection (`[]` = all).
    pub fn allows_connection(&self, connection: &str) -> bool {
        self.allowed_connections.is_empty()
            || self.allowed_connections.iter().any(|c| c == connection)
    }
}

/// The configured keys and whether anonymous clients are allowed.
#[derive(Debug, Clone, Default)]
pub struct KeyStore {
    /// Shared so a request holds its key's policy without copying it.
    keys: Vec<Arc<ClientKey>>,
    require_api_key: bool,
}

impl KeyStore {
    pub fn new(keys: Vec<ClientKey>, require_api_key: bool) -> Self {
        Self {
            keys: keys.into_iter().map(Arc::new).collect(),
            require_api_key,
        }
    }

    /// Authenticates a request: `Ok(Some(key))`, `Ok(None)` for an allowed anonymous client,
    /// or 401.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<&Arc<ClientKey>>, GatewayError> {
        let Some(presented) = presented_key(headers) else {
            return if self.require_api_key {
                Err(GatewayError::unauthorized(
                    "Missing API key: send `Authorization: Bearer <key>` or `x-api-key`",
                ))
            } else {
                Ok(None)
            };
        };
        match self.find(presented.as_bytes()) {
            Some(key) => Ok(Some(key)),
            None if !self.require_api_key => Ok(None),
            None => Err(GatewayError::unauthorized("Invalid API key")),
        }
    }

    /// Finds the key whose hash matches, comparing against every key without early exit.
    pub fn find(&self, presented: &[u8]) -> Option<&Arc<ClientKey>> {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        let mut found = None;
        for key in &self.keys {
            if bool::from(key.sha256.ct_eq(&digest)) && found.is_none() {
                found = Some(key);
            }
        }
        found
    }
}

/// `x-api-key` as a ready header name: looking a header up by `&str` parses the name on
/// every call.
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// The key from `Authorization: Bearer` or `x-api-key`, if any, borrowed from the headers
/// (it is only hashed, so it is never copied).
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        let token = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(v)
            .trim();
        if !token.is_empty() {
            return Some(token);
        }
    }
    headers
        .get(X_API_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// SHA-256 of a key, for building the store.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};

    fn key(id: &str, secret: &str) -> ClientKey {
        ClientKey {
            id: id.into(),
            sha256: hash_key(secret),
            allowed_models: vec!["openai/*".into(), "coding".into()],
            allowed_connections: vec![],
            scopes: vec![],
            requests_per_minute: 0,
        }
    }

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        );
        h
    }

    #[test]
    fn bearer_and_x_api_key_authenticate() {
        let store = KeyStore::new(vec![key("a", "sk-a"), key("b", "sk-b")], true);
        let k = store
            .authenticate(&headers("authorization", "Bearer sk-b"))
            .unwrap();
        assert_eq!(k.unwrap().id, "b");
        let k = store.authenticate(&headers("x-api-key", "sk-a")).unwrap();
        assert_eq!(k.unwrap().id, "a");
    }

    #[test]
    fn wrong_or_missing_key_is_401_when_required() {
        let store = KeyStore::new(vec![key("a", "sk-a")], true);
        let e = store
            .authenticate(&headers("authorization", "Bearer nope"))
            .unwrap_err();
        assert_eq!(e.status.as_u16(), 401);
        assert_eq!(e.code, "invalid_api_key");
        assert!(store.authenticate(&HeaderMap::new()).is_err());
        let open = KeyStore::new(vec![key("a", "sk-a")], false);
        assert!(open.authenticate(&HeaderMap::new()).unwrap().is_none());
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("openai/*", "openai/gpt-4o"));
        assert!(!glob_match("openai/*", "glm/glm-5"));
        assert!(glob_match("gpt-?o", "gpt-4o"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        let k = key("a", "x");
        assert!(k.allows_model("coding"));
        assert!(!k.allows_model("codingx"));
    }
}
