//! The in-process lease backend for embedded mode (one node, no Redis).
//!
//! Why: exclusive session leases must behave the same whether a node runs alone or in a
//! cluster, so this mirrors the Redis scripts rule for rule — generations from a counter per
//! name that is never reset, the owner kept as the SHA-256 of its token, a re-acquire by the
//! same owner renewing with the same generation — with time passed in. It holds no lock; the
//! node wraps it in a `Mutex`.

use std::collections::HashMap;

use super::leases::{
    FenceCheck, LeaseAcquire, LeaseGrant, LeaseInfo, LeaseMove, OWNER_PREFIX_LEN, owner_hash,
};
use switchyard_shared::Millis;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    owner_hash: String,
    api_key_id: String,
    generation: u64,
    expires_at: Millis,
}

/// Leases by name (a connection id), each with its own generation counter.
#[derive(Debug, Default, Clone)]
pub struct EmbeddedLeases {
    held: HashMap<String, Held>,
    /// The last generation issued per name; entries are never removed.
    generations: HashMap<String, u64>,
}

impl EmbeddedLeases {
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants the lease, renews it for its owner (same generation), or reports who is in the way.
    pub fn acquire(
        &mut self,
        name: &str,
        owner_token: &str,
        api_key_id: &str,
        ttl_ms: Millis,
        now: Millis,
    ) -> LeaseAcquire {
        let ttl_ms = ttl_ms.max(1);
        let owner = owner_hash(owner_token);
        if let Some(held) = self.live_mut(name, now) {
            if held.owner_hash == owner && held.api_key_id == api_key_id {
                held.expires_at = now.saturating_add(ttl_ms);
                return LeaseAcquire::Acquired(LeaseGrant {
                    generation: held.generation,
                    ttl_ms,
                });
            }
            return LeaseAcquire::Held {
                retry_after_ms: held.expires_at.saturating_sub(now).max(1),
            };
        }
        let counter = self.generations.entry(name.to_owned()).or_insert(0);
        *counter = counter.saturating_add(1);
        let generation = *counter;
        self.held.insert(
            name.to_owned(),
            Held {
                owner_hash: owner,
                api_key_id: api_key_id.to_owned(),
                generation,
                expires_at: now.saturating_add(ttl_ms),
            },
        );
        LeaseAcquire::Acquired(LeaseGrant { generation, ttl_ms })
    }

    /// Extends the lease if the caller holds it with this generation.
    pub fn renew(
        &mut self,
        name: &str,
        owner_token: &str,
        generation: u64,
        ttl_ms: Millis,
        now: Millis,
    ) -> bool {
        let owner = owner_hash(owner_token);
        match self.live_mut(name, now) {
            Some(held) if held.owner_hash == owner && held.generation == generation => {
                held.expires_at = now.saturating_add(ttl_ms.max(1));
                true
            }
            _ => false,
        }
    }

    /// Drops the lease if the caller holds it with this generation.
    pub fn release(&mut self, name: &str, owner_token: &str, generation: u64, now: Millis) -> bool {
        let owner = owner_hash(owner_token);
        match self.live_mut(name, now) {
            Some(held) if held.owner_hash == owner && held.generation == generation => {
                self.held.remove(name);
                true
            }
            _ => false,
        }
    }

    /// Whether the caller holds the live lease with this generation for this api key id.
    pub fn fence(
        &mut self,
        name: &str,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
        now: Millis,
    ) -> FenceCheck {
        let owner = owner_hash(owner_token);
        match self.live_mut(name, now) {
            Some(held)
                if held.owner_hash == owner
                    && held.generation == generation
                    && held.api_key_id == api_key_id =>
            {
                FenceCheck::Valid
            }
            _ => FenceCheck::Stale,
        }
    }

    /// Moves the caller's lease from `from` to `to` with its generation and remaining time, as
    /// the Redis move script does: the holder is checked on `from`, `to` must be free, and
    /// `to`'s counter is raised to the generation.
    pub fn move_lease(
        &mut self,
        from: &str,
        to: &str,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
        now: Millis,
    ) -> LeaseMove {
        if self.fence(from, owner_token, generation, api_key_id, now) != FenceCheck::Valid {
            return LeaseMove::Stale;
        }
        if let Some(held) = self.live_mut(to, now) {
            return LeaseMove::TargetHeld {
                retry_after_ms: held.expires_at.saturating_sub(now).max(1),
            };
        }
        let Some(held) = self.held.remove(from) else {
            return LeaseMove::Stale;
        };
        let ttl_ms = held.expires_at.saturating_sub(now);
        let counter = self.generations.entry(to.to_owned()).or_insert(0);
        *counter = (*counter).max(generation);
        self.held.insert(to.to_owned(), held);
        LeaseMove::Moved(LeaseGrant { generation, ttl_ms })
    }

    /// Operator action: drops the lease whoever holds it; the generation keeps counting.
    /// (An expired lease that was not yet purged still counts as revoked.)
    pub fn revoke(&mut self, name: &str) -> bool {
        self.held.remove(name).is_some()
    }

    /// The live leases, sorted by name. Purges expired ones.
    pub fn list(&mut self, now: Millis) -> Vec<LeaseInfo> {
        self.held.retain(|_, held| held.expires_at > now);
        let mut leases: Vec<LeaseInfo> = self
            .held
            .iter()
            .map(|(name, held)| LeaseInfo {
                name: name.clone(),
                owner_hash_prefix: held.owner_hash.chars().take(OWNER_PREFIX_LEN).collect(),
                api_key_id: held.api_key_id.clone(),
                generation: held.generation,
                remaining_ms: held.expires_at.saturating_sub(now),
            })
            .collect();
        leases.sort_by(|a, b| a.name.cmp(&b.name));
        leases
    }

    /// The live lease of `name`, dropping it first if it has expired.
    fn live_mut(&mut self, name: &str, now: Millis) -> Option<&mut Held> {
        if self
            .held
            .get(name)
            .is_some_and(|held| held.expires_at <= now)
        {
            self.held.remove(name);
        }
        self.held.get_mut(name)
    }
}

#[cfg(test)]
#[path = "embedded_tests.rs"]
mod tests;
