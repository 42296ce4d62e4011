//! `[egress_lock]`: the egress-bucketed sibling lock (reference §2.3), beyond the contract.
//!
//! Providers that bucket rate limits by the caller's IP (the opencode family) answer every
//! connection behind one egress the same way: a quota or rate 429 on one of them cools the
//! family's other connections of the same `egress` bucket, for no longer than the origin's own
//! cooldown. The list is an explicit choice: widening it is a one-line config change.

use serde::{Deserialize, Serialize};

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
