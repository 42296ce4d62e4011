//! Fenced leases in Redis: exclusive session leases on connections and the coordinator's
//! leader lease.
//!
//! Why: a lease alone cannot make a single writer safe — a holder paused past its TTL wakes
//! up believing it still owns the lease. So every grant carries a generation from a counter
//! that is `INCR`'d, never reset and never given a TTL, and every guarded side effect is fenced
//! on it ([`RedisStore::lease_fence`] before a dispatch, [`RedisStore::fenced_del`] for the
//! janitor). Generations therefore only rise per lease, across expiries, releases and revokes.
//!
//! They also rise across a Redis failover that loses the last writes: a new generation is the
//! counter plus one, raised to the server clock in microseconds when that is higher, so the
//! promoted master (whose counter may have lost grants) issues past every generation the old
//! master gave out. The cost is one `TIME` inside the acquire script; no `WAIT`, which would
//! stall the multiplexed request-path connection.
//!
//! A lease can move to another connection with its generation ([`RedisStore::lease_move`]),
//! when its connection becomes ineligible; the target's counter is raised to it.
//!
//! The owner is stored as the SHA-256 hex of its token ([`owner_hash`]); the token itself never
//! leaves the node. Expiry is Redis's own `PX`, so the only clock involved is the server's.
//! Every operation fails (it never guesses) when Redis cannot answer: callers fail closed.

use std::sync::LazyLock;

use redis::{Script, Value};
use sha2::{Digest, Sha256};

use super::error::StoreError;
use super::redis_store::RedisStore;
use super::replies as reply;
use switchyard_shared::Millis;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_acquire_v2.lua")));
static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_renew_v1.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_release_v1.lua")));
static FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_fence_v1.lua")));
static MOVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_move_v1.lua")));
static REVOKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_revoke_v1.lua")));
static FENCED_DEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/lease_fenced_del_v1.lua")));

/// The two keys of one fenced lease. Both must share a hash tag (see [`super::KeySpace`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseKeys {
    /// Hash `{owner, gen, key}` with `PX`.
    pub lease: String,
    /// Generation counter; never expires, never reset.
    pub fence: String,
}

/// How a lease is stored: the SHA-256 hex of the owner token.
pub fn owner_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A granted (or renewed) lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    pub generation: u64,
    pub ttl_ms: Millis,
}

/// The answer to an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAcquire {
    /// Granted. A re-acquire by the same owner (and api key id) renews and keeps the generation.
    Acquired(LeaseGrant),
    /// Someone else holds it, for about `retry_after_ms` more.
    Held { retry_after_ms: Millis },
}

/// The answer to a fence check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceCheck {
    Valid,
    /// No live lease, another owner, another generation or another api key id.
    Stale,
}

/// The answer to a move of a lease to another connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseMove {
    /// Moved with its generation and remaining time.
    Moved(LeaseGrant),
    /// The caller no longer holds the source lease: nothing changed.
    Stale,
    /// Another lease holds the target, for about `retry_after_ms` more: nothing changed.
    TargetHeld { retry_after_ms: Millis },
}

/// One live lease, as the admin API shows it (never the owner hash in full).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The connection id, or `coordinator` for the leader lease.
    pub name: String,
    /// The first 12 hex digits of the owner hash.
    pub owner_hash_prefix: String,
    pub api_key_id: String,
    pub generation: u64,
    pub remaining_ms: Millis,
}

/// Length of [`LeaseInfo::owner_hash_prefix`].
pub const OWNER_PREFIX_LEN: usize = 12;

impl RedisStore {
    /// The lease keys of an exclusive session lease on a connection.
    pub fn connection_lease_keys(&self, conn: &str) -> LeaseKeys {
        LeaseKeys {
            lease: self.keys().lease(conn),
            fence: self.keys().lease_fence(conn),
        }
    }

    /// The coordinator's leader lease keys.
    pub fn leader_lease_keys(&self) -> LeaseKeys {
        LeaseKeys {
            lease: self.keys().leader_lease(),
            fence: self.keys().leader_fence(),
        }
    }

    pub async fn lease_acquire(
        &self,
        keys: &LeaseKeys,
        owner_token: &str,
        api_key_id: &str,
        ttl_ms: Millis,
    ) -> Result<LeaseAcquire, StoreError> {
        const CMD: &str = "lease_acquire";
        let owner = owner_hash(owner_token);
        let value: Value = self
            .run(CMD, |mut con| async move {
                ACQUIRE
                    .key(&keys.lease)
                    .key(&keys.fence)
                    .arg(&owner)
                    .arg(api_key_id)
                    .arg(ttl_ms.max(1))
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let [granted, generation, ttl] = reply::int_array::<3>(CMD, &value)?;
        let generation = reply::non_negative(CMD, generation)?;
        let ttl = reply::non_negative(CMD, ttl)?;
        match granted {
            1 => Ok(LeaseAcquire::Acquired(LeaseGrant {
                generation,
                ttl_ms: ttl,
            })),
            0 => Ok(LeaseAcquire::Held {
                retry_after_ms: ttl.max(1),
            }),
            other => Err(reply::protocol(CMD, format!("acquired flag {other}"))),
        }
    }

    /// Extends the lease; `false` means it is lost and the caller must stop acting as owner.
    pub async fn lease_renew(
        &self,
        keys: &LeaseKeys,
        owner_token: &str,
        generation: u64,
        ttl_ms: Millis,
    ) -> Result<bool, StoreError> {
        const CMD: &str = "lease_renew";
        let owner = owner_hash(owner_token);
        let value: Value = self
            .run(CMD, |mut con| async move {
                RENEW
                    .key(&keys.lease)
                    .arg(&owner)
                    .arg(generation)
                    .arg(ttl_ms.max(1))
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        reply::flag(CMD, &value)
    }

    /// Drops the lease if the caller still holds it; `false` when it did not.
    pub async fn lease_release(
        &self,
        keys: &LeaseKeys,
        owner_token: &str,
        generation: u64,
    ) -> Result<bool, StoreError> {
        const CMD: &str = "lease_release";
        let owner = owner_hash(owner_token);
        let value: Value = self
            .run(CMD, |mut con| async move {
                RELEASE
                    .key(&keys.lease)
                    .arg(&owner)
                    .arg(generation)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        reply::flag(CMD, &value)
    }

    /// Whether the caller holds the live lease with this generation for this api key id.
    pub async fn lease_fence(
        &self,
        keys: &LeaseKeys,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
    ) -> Result<FenceCheck, StoreError> {
        const CMD: &str = "lease_fence";
        let owner = owner_hash(owner_token);
        let value: Value = self
            .run(CMD, |mut con| async move {
                FENCE
                    .key(&keys.lease)
                    .arg(&owner)
                    .arg(generation)
                    .arg(api_key_id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        Ok(if reply::flag(CMD, &value)? {
            FenceCheck::Valid
        } else {
            FenceCheck::Stale
        })
    }

    /// Moves the caller's lease from `from` to `to`, keeping its generation and remaining
    /// time, in one script: the holder and generation are checked on `from`, `to` must be
    /// free, and `to`'s counter is raised to the generation.
    ///
    /// In Redis Cluster both leases must hash to one slot, as for any script.
    pub async fn lease_move(
        &self,
        from: &LeaseKeys,
        to: &LeaseKeys,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
    ) -> Result<LeaseMove, StoreError> {
        const CMD: &str = "lease_move";
        let owner = owner_hash(owner_token);
        let value: Value = self
            .run(CMD, |mut con| async move {
                MOVE.key(&from.lease)
                    .key(&to.lease)
                    .key(&to.fence)
                    .arg(&owner)
                    .arg(generation)
                    .arg(api_key_id)
                    .invoke_async(&mut con)
                    .await
            })
            .await?;
        let [moved, generation, ttl] = reply::int_array::<3>(CMD, &value)?;
        let ttl = reply::non_negative(CMD, ttl)?;
        match moved {
            1 => Ok(LeaseMove::Moved(LeaseGrant {
                generation: reply::non_negative(CMD, generation)?,
                ttl_ms: ttl,
            })),
            0 => Ok(LeaseMove::Stale),
            -1 => Ok(LeaseMove::TargetHeld {
                retry_after_ms: ttl.max(1),
            }),
            other => Err(reply::protocol(CMD, format!("moved flag {other}"))),
        }
    }

    /// Operator action: drops the lease whoever holds it. The generation keeps counting, so
    /// the revoked holder is stale for good. `false` when there was no lease.
    pub async fn lease_revoke(&self, keys: &LeaseKeys) -> Result<bool, StoreError> {
        const CMD: &str = "lease_revoke";
        let value: Value = self
            .run(CMD, |mut con| async move {
                REVOKE.key(&keys.lease).invoke_async(&mut con).await
            })
            .await?;
        reply::flag(CMD, &value)
    }

    /// Deletes `victims` only while the lease still carries `generation` (the coordinator's
    /// janitor). `false` means fenced: a newer holder exists and nothing was deleted.
    ///
    /// In Redis Cluster the victims must share the lease's hash slot, as for any script.
    pub async fn fenced_del(
        &self,
        keys: &LeaseKeys,
        generation: u64,
        victims: &[String],
    ) -> Result<bool, StoreError> {
        const CMD: &str = "lease_fenced_del";
        let value: Value = self
            .run(CMD, |mut con| async move {
                let mut invocation = FENCED_DEL.key(&keys.lease);
                for victim in victims {
                    invocation.key(victim);
                }
                invocation.arg(generation).invoke_async(&mut con).await
            })
            .await?;
        match reply::int(CMD, &value)? {
            -1 => Ok(false),
            n if n >= 0 => Ok(true),
            other => Err(reply::protocol(CMD, format!("fenced_del reply {other}"))),
        }
    }

    /// The live leases among `names_and_keys`, in one round trip (a pipeline of `HMGET` and
    /// `PTTL` per lease). Missing or expired leases are left out.
    pub async fn read_leases(
        &self,
        names_and_keys: &[(&str, LeaseKeys)],
    ) -> Result<Vec<LeaseInfo>, StoreError> {
        const CMD: &str = "read_leases";
        if names_and_keys.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = self
            .run(CMD, |mut con| async move {
                let mut pipe = redis::pipe();
                for (_, keys) in names_and_keys {
                    pipe.cmd("HMGET")
                        .arg(&keys.lease)
                        .arg("owner")
                        .arg("gen")
                        .arg("key");
                    pipe.cmd("PTTL").arg(&keys.lease);
                }
                pipe.query_async(&mut con).await
            })
            .await?;
        let replies = reply::array(CMD, &value)?;
        if replies.len() != names_and_keys.len() * 2 {
            return Err(reply::protocol(
                CMD,
                format!(
                    "{} replies for {} leases",
                    replies.len(),
                    names_and_keys.len()
                ),
            ));
        }
        let mut leases = Vec::new();
        for ((name, _), pair) in names_and_keys.iter().zip(replies.chunks_exact(2)) {
            let fields = reply::array(CMD, &pair[0])?;
            let [owner, generation, key] = match fields {
                [a, b, c] => [a, b, c],
                _ => return Err(reply::protocol(CMD, "HMGET reply of the wrong length")),
            };
            let pttl = reply::int(CMD, &pair[1])?;
            let Some(owner) = reply::opt_string(CMD, owner)? else {
                continue; // no lease (or it expired between the two commands)
            };
            if pttl == -2 {
                continue;
            }
            let generation = reply::opt_string(CMD, generation)?
                .and_then(|g| g.parse::<u64>().ok())
                .ok_or_else(|| reply::protocol(CMD, "lease without a generation"))?;
            leases.push(LeaseInfo {
                name: (*name).to_owned(),
                owner_hash_prefix: owner.chars().take(OWNER_PREFIX_LEN).collect(),
                api_key_id: reply::opt_string(CMD, key)?.unwrap_or_default(),
                generation,
                // -1 (no expiry) cannot happen for our leases; show it as 0, not as forever.
                remaining_ms: u64::try_from(pttl).unwrap_or(0),
            });
        }
        Ok(leases)
    }
}

#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
