//! The local side of cluster-wide `max_concurrent` caps: what the request path and a config
//! reload need to know about the node's block of permits (the leasing tasks themselves are
//! in [`crate::cluster_sync::permits`]).

use crate::runtime::RoutingTable;

/// The last live-node count this node knew from the heartbeats, for the fallback share
/// without Redis (it keeps its value while Redis is away); `None` until one heartbeat round
/// succeeded, so a node that started while Redis was down does not take itself for alone.
pub fn known_live_nodes(rt: &RoutingTable) -> Option<u32> {
    rt.cluster.as_ref().and_then(|c| c.sync.known_live_nodes())
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
