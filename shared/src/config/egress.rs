//! `[egress_lock]`: the egress-bucketed sibling lock (docs/policy.md, `cooldown`), beyond the contract.
//!
//! Providers that bucket rate limits by the caller's IP (the opencode family) answer every
//! connection behind one egress the same way: a quota or rate 429 on one of them cools the
//! family's other connections of the same `egress` bucket, for no longer than the origin's own
//! cooldown. The list is an explicit choice: widening it is a one-line config change.

use serde::{Deserialize, Serialize};

use super::Config;
use super::error::Collector;

/// The reference's default family.
pub const DEFAULT_EGRESS_LOCK_PROVIDERS: [&str; 4] =
    ["opencode", "opencode-go", "opencode-cli", "opencode-zen"];

/// `[egress_lock]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressLockConfig {
    /// The off switch (on by default; it only acts on connections that declare `egress`).
    pub enabled: bool,
    /// Provider ids treated as one IP-bucketed family.
    pub providers: Vec<String>,
}

impl Default for EgressLockConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            providers: DEFAULT_EGRESS_LOCK_PROVIDERS
                .iter()
                .map(|p| (*p).to_owned())
                .collect(),
        }
    }
}

impl EgressLockConfig {
    /// The family when the lock is on; empty (nothing spreads) when it is off.
    pub fn active_providers(&self) -> &[String] {
        if self.enabled { &self.providers } else { &[] }
    }
}

/// An empty bucket or provider id means nothing: reported rather than silently ignored.
pub(super) fn validate(config: &Config, errors: &mut Collector) {
    for (i, conn) in config.connections.iter().enumerate() {
        if conn.egress.as_deref().is_some_and(|e| e.trim().is_empty()) {
            errors.push(
                format!("connections[{i}].egress"),
                "must not be empty (omit it for no egress bucket)",
            );
        }
    }
    for (i, provider) in config.egress_lock.providers.iter().enumerate() {
        if provider.trim().is_empty() {
            errors.push(format!("egress_lock.providers[{i}]"), "must not be empty");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buckets_and_provider_ids_are_refused() {
        let text = "[egress_lock]\nproviders = [\"\"]\n\n[[providers]]\nid = \"opencode\"\n\
                    category = \"apikey\"\nformat = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
                    models = [\"m\"]\n\n[[connections]]\nid = \"a\"\nprovider = \"opencode\"\n\
                    api_key_env = \"K\"\negress = \" \"\n";
        let errors = Config::from_toml_str(text).err().map(|e| e.to_string());
        let errors = errors.unwrap_or_default();
        assert!(errors.contains("connections[0].egress"), "{errors}");
        assert!(errors.contains("egress_lock.providers[0]"), "{errors}");
    }

    #[test]
    fn the_default_family_is_the_opencode_family_and_off_means_empty() {
        let on = EgressLockConfig::default();
        assert!(on.active_providers().iter().any(|p| p == "opencode-go"));
        let off = EgressLockConfig {
            enabled: false,
            ..EgressLockConfig::default()
        };
        assert!(off.active_providers().is_empty());
    }
}
