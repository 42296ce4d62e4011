//! One set of lease operations over the two stores: the in-process table (embedded mode) and
//! Redis (cluster mode).
//!
//! The embedded table is process-wide rather than per runtime: a config reload builds a new
//! runtime, and leases (and above all their generation counters, which must never go back)
//! have to survive that. In cluster mode every operation is a Lua script bounded by the
//! store's per-command timeout; any failure there is [`Unavailable`] and the caller fails
//! closed. Every operation is counted in `switchyard_lease_operations_total{op,result}`.

use std::sync::{Arc, LazyLock, Mutex};

use switchyard_shared::Millis;
use switchyard_store::{
    EmbeddedLeases, FenceCheck, LeaseAcquire, LeaseInfo, LeaseMove, RedisStore, StoreError,
};

use crate::runtime::RoutingTable;

/// The lease service cannot answer (Redis down or too slow): fail closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// The embedded lease table of this process (see the module docs for why it is global).
static EMBEDDED: LazyLock<Mutex<EmbeddedLeases>> =
    LazyLock::new(|| Mutex::new(EmbeddedLeases::new()));

/// The store a runtime's leases live in.
pub enum Backend<'a> {
    Embedded { now: Millis },
    Redis(&'a Arc<RedisStore>),
}

impl<'a> Backend<'a> {
    pub fn of(rt: &'a RoutingTable) -> Self {
        match &rt.cluster {
            Some(c) => Backend::Redis(&c.store),
            None => Backend::Embedded {
                now: rt.clock.now(),
            },
        }
    }

    /// The live leases on `connections`.
    pub async fn live(&self, connections: &[String]) -> Result<Vec<LeaseInfo>, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                let mut table = embedded()?;
                Ok(table
                    .list(*now)
                    .into_iter()
                    .filter(|l| connections.contains(&l.name))
                    .collect())
            }
            Backend::Redis(store) => {
                let keys: Vec<(&str, _)> = connections
                    .iter()
                    .map(|c| (c.as_str(), store.connection_lease_keys(c)))
                    .collect();
                store.read_leases(&keys).await.map_err(unavailable)
            }
        }
    }

    pub async fn acquire(
        &self,
        connection: &str,
        owner_token: &str,
        api_key_id: &str,
        ttl_ms: Millis,
    ) -> Result<LeaseAcquire, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                Ok(embedded()?.acquire(connection, owner_token, api_key_id, ttl_ms, *now))
            }
            Backend::Redis(store) => store
                .lease_acquire(
                    &store.connection_lease_keys(connection),
                    owner_token,
                    api_key_id,
                    ttl_ms,
                )
                .await
                .map_err(unavailable),
        }
    }

    pub async fn renew(
        &self,
        connection: &str,
        owner_token: &str,
        generation: u64,
        ttl_ms: Millis,
    ) -> Result<bool, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                Ok(embedded()?.renew(connection, owner_token, generation, ttl_ms, *now))
            }
            Backend::Redis(store) => store
                .lease_renew(
                    &store.connection_lease_keys(connection),
                    owner_token,
                    generation,
                    ttl_ms,
                )
                .await
                .map_err(unavailable),
        }
    }

    pub async fn release(
        &self,
        connection: &str,
        owner_token: &str,
        generation: u64,
    ) -> Result<bool, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                Ok(embedded()?.release(connection, owner_token, generation, *now))
            }
            Backend::Redis(store) => store
                .lease_release(
                    &store.connection_lease_keys(connection),
                    owner_token,
                    generation,
                )
                .await
                .map_err(unavailable),
        }
    }

    /// Moves the caller's lease from `from` to `to` with its generation (one store step).
    pub async fn move_lease(
        &self,
        from: &str,
        to: &str,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
    ) -> Result<LeaseMove, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                Ok(embedded()?.move_lease(from, to, owner_token, generation, api_key_id, *now))
            }
            Backend::Redis(store) => store
                .lease_move(
                    &store.connection_lease_keys(from),
                    &store.connection_lease_keys(to),
                    owner_token,
                    generation,
                    api_key_id,
                )
                .await
                .map_err(unavailable),
        }
    }

    pub async fn fence(
        &self,
        connection: &str,
        owner_token: &str,
        generation: u64,
        api_key_id: &str,
    ) -> Result<FenceCheck, Unavailable> {
        match self {
            Backend::Embedded { now } => {
                Ok(embedded()?.fence(connection, owner_token, generation, api_key_id, *now))
            }
            Backend::Redis(store) => store
                .lease_fence(
                    &store.connection_lease_keys(connection),
                    owner_token,
                    generation,
                    api_key_id,
                )
                .await
                .map_err(unavailable),
        }
    }
}

fn embedded() -> Result<std::sync::MutexGuard<'static, EmbeddedLeases>, Unavailable> {
    // A poisoned table may be half-updated: refuse rather than guess (fail closed).
    EMBEDDED.lock().map_err(|_| Unavailable)
}

fn unavailable(e: StoreError) -> Unavailable {
    tracing::warn!(error = %e, "lease store unavailable");
    Unavailable
}
