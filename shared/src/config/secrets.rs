//! Resolving the secrets a config names but never contains.
//!
//! Upstream keys and client keys live in environment variables (`*_env` keys). Resolution is a
//! pure function of an environment lookup so it can be tested without touching the process
//! environment, and its errors name the connection or key id and the variable, never a value.
//! Client keys are kept only as SHA-256 digests: the node authenticates by hashing the presented
//! key and comparing digests in constant time.

use std::collections::HashMap;
use std::fmt;

use sha2::{Digest, Sha256};

use super::error::Collector;
use super::{Config, ConfigErrors};

/// A secret value whose `Debug` output is redacted, so it cannot leak through logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it upstream.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// One client API key: its id and the SHA-256 digest of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    pub id: String,
    pub sha256: [u8; 32],
}

/// Every secret a node needs, resolved once at startup (and again on config reload).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedSecrets {
    /// Upstream key per connection id. Local connections without `api_key_env` have none.
    pub upstream_keys: HashMap<String, Secret>,
    /// Client keys in file order.
    pub client_keys: Vec<ClientKey>,
    /// Digest of the management bearer; `None` when `auth.management_key_env` is `""` (the
    /// management API is then off).
    pub management_key_sha256: Option<[u8; 32]>,
}

/// SHA-256 of a key, as stored and compared.
pub fn sha256(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

impl Config {
    /// Looks up every `*_env` variable through `env` (e.g. `|name| std::env::var(name).ok()`).
    /// A missing or empty variable is an error naming the id and the variable; all such errors
    /// are reported together.
    pub fn resolve_secrets(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ResolvedSecrets, ConfigErrors> {
        let mut errors = Collector::default();
        let mut secrets = ResolvedSecrets::default();

        for (index, connection) in self.connections.iter().enumerate() {
            let Some(variable) = &connection.api_key_env else {
                continue;
            };
            let path = format!("connections[{index}].api_key_env");
            let what = format!("upstream key of connection `{}`", connection.id);
            if let Some(value) = read(env, &mut errors, variable, path, what) {
                secrets
                    .upstream_keys
                    .insert(connection.id.clone(), Secret::new(value));
            }
        }

        let mut owners: HashMap<[u8; 32], &str> = HashMap::new();
        for (index, key) in self.api_keys.iter().enumerate() {
            let digest = match (&key.key_env, &key.key_sha256) {
                (Some(variable), _) => {
                    let path = format!("api_keys[{index}].key_env");
                    let what = format!("client key `{}`", key.id);
                    read(env, &mut errors, variable, path, what).map(|value| sha256(&value))
                }
                (None, Some(hex_digest)) => decode_digest(hex_digest),
                (None, None) => None,
            };
            let Some(digest) = digest else { continue };
            if let Some(owner) = owners.insert(digest, &key.id) {
                errors.push(
                    format!("api_keys[{index}]"),
                    format!(
                        "client key `{}` has the same key as `{owner}`; keys must be distinct",
                        key.id
                    ),
                );
            }
            secrets.client_keys.push(ClientKey {
                id: key.id.clone(),
                sha256: digest,
            });
        }

        let management = &self.auth.management_key_env;
        if !management.is_empty() {
            let what = "management bearer".to_owned();
            secrets.management_key_sha256 = read(
                env,
                &mut errors,
                management,
                "auth.management_key_env".into(),
                what,
            )
            .map(|v| sha256(&v));
        }

        errors.finish().map(|()| secrets)
    }
}

fn decode_digest(hex_digest: &str) -> Option<[u8; 32]> {
    hex::decode(hex_digest).ok()?.try_into().ok()
}

/// One variable, or an error naming it and what it is for (never its value).
fn read(
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Collector,
    variable: &str,
    path: String,
    what: String,
) -> Option<String> {
    let value = env(variable).filter(|value| !value.trim().is_empty());
    if value.is_none() {
        errors.push(
            path,
            format!("environment variable {variable} ({what}) is not set or empty"),
        );
    }
    value
}
