//! The local side of cluster-wide `max_concurrent` caps: what the request path and a config
//! reload need to know about the node's block of permits (the leasing tasks themselves are
//! in [`crate::cluster_sync::permits`]).

use crate::runtime::RoutingTable;

/// The number of live nodes, for the fallback share without Redis.
///
/// The last known count from the heartbeats (at least 1; it keeps its last value while Redis
/// is away, which is exactly when the fallback needs it).
pub fn live_nodes(rt: &RoutingTable) -> u32 {
    rt.cluster.as_ref().map_or(1, |c| c.live_nodes())
}

/// Empties the capped gates of a runtime about to serve (redis mode): it holds nothing until
/// Redis grants a block. Called for the first runtime and for every reloaded one.
pub fn prepare(rt: &RoutingTable) {
    if rt.cluster.is_none() {
        return;
    }
    for conn in rt
        .connections
        .iter()
        .filter(|c| c.config.max_concurrent > 0)
    {
        conn.gate.shrink(conn.gate.limit());
    }
}
