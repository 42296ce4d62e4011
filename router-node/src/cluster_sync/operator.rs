//! The redis-mode precondition of operator actions: Redis must answer first.
//!
//! Why: an operator clear, lockout clear, reinstatement or breaker reset made on a node cut
//! off from Redis would change that node only, and replaying it once Redis is back would wipe
//! whatever newer state (a fresh 429) another node wrote meanwhile. So in redis mode these
//! actions fail closed while Redis is unreachable, as a settings patch does: the admin handler
//! asks [`require_store`] after validating the request and before changing anything, and
//! answers 503 `cluster_store_unavailable` when it fails. The writer never replays them either
//! ([`crate::cluster::replay::replayable`]).

use switchyard_shared::store::StoreError;

use crate::runtime::Runtime;

/// `Ok` in embedded mode, or when Redis answers a `PING` within the command timeout (at once
/// an error while the store's health gate holds Redis for down).
pub async fn require_store(rt: &Runtime) -> Result<(), StoreError> {
    match &rt.cluster {
        Some(cluster) => cluster.store.ping().await,
        None => Ok(()),
    }
}
