//! The one connection type every store command goes through, whatever the Redis topology.
//!
//! Why: the operations (scripts, pipelines, single commands) are written once against
//! `redis::aio::ConnectionLike`. A single server and Sentinel hand them a `ConnectionManager`;
//! Redis Cluster hands them a cluster connection. [`StoreConnection`] is both, so no operation
//! knows which topology it runs on.
//!
//! Routing on Redis Cluster: every key of an install carries the install's hash tag
//! ([`super::KeySpace::hash_tagged`]), so all of its state lives on the slot [`InstallRoute`]
//! names. The cluster connection sends *every* command and pipeline to that slot's master,
//! keyed or not. For keyed commands that is where `redis-rs` would send them anyway; for the
//! keyless ones it is what makes them right: `TIME` reads the clock of the shard whose scripts
//! use it, `WAIT` waits for the replica of the shard that took the writes, `PING` probes the
//! shard the install depends on, and `SCRIPT LOAD` (after a `NOSCRIPT`) loads on the master
//! that runs the script, where `redis-rs` would otherwise send it to every node or a random one.
//! The store has no `SCAN`: the resync and the janitor read set indexes (the node set, the
//! lockout indexes) and pipelined keys, which are single-slot like everything else; if a scan
//! is ever added, this routing sends it to the one node that owns the install's keys.
//! Redirections (`MOVED`, `ASK`) after a failover or a resharding are still followed by the
//! cluster connection, which also refreshes its slot map.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// The master of the slot that holds one install's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstallRoute(Route);

impl InstallRoute {
    /// The route of `key`'s slot (any key of the install: they share the hash tag).
    pub fn for_key(key: &str) -> Self {
        Self(Route::with_key(key, SlotAddr::Master))
    }

    fn node(&self) -> SingleNodeRoutingInfo {
        SingleNodeRoutingInfo::SpecificNode(self.0)
    }
}

/// A multiplexed connection to Redis: one server (directly or found through Sentinel), or a
/// Redis Cluster with every command routed to the install's slot. Cheap to clone; clones share
/// the sockets.
#[derive(Clone)]
pub enum StoreConnection {
    /// A single server (or the master Sentinel names).
    Server(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterLink),
}

/// A cluster connection and the route of the install's slot.
#[derive(Clone)]
pub struct ClusterLink {
    connection: ClusterConnection,
    route: InstallRoute,
}

impl ClusterLink {
    pub(crate) fn new(connection: ClusterConnection, route: InstallRoute) -> Self {
        Self { connection, route }
    }
}

impl ConnectionLike for StoreConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Server(manager) => manager.req_packed_command(cmd),
            Self::Cluster(link) => {
                let routing = RoutingInfo::SingleNode(link.route.node());
                Box::pin(link.connection.route_command(cmd.clone(), routing))
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Server(manager) => manager.req_packed_commands(pipeline, offset, count),
            Self::Cluster(link) => {
                let route = link.route.node();
                Box::pin(
                    link.connection
                        .route_pipeline(pipeline.clone(), offset, count, route),
                )
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Server(manager) => manager.get_db(),
            // Redis Cluster has only database 0.
            Self::Cluster(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeySpace;

    #[test]
    fn the_install_route_is_the_slot_of_every_key_of_the_install() {
        let keys = KeySpace::hash_tagged("sy:");
        let route = InstallRoute::for_key(&keys.settings());
        for key in [
            keys.connection("c1"),
            keys.lockout("p", "c9", "m"),
            keys.nodes(),
            keys.leader_lease(),
        ] {
            assert_eq!(
                InstallRoute::for_key(&key),
                route,
                "{key} is on another slot"
            );
        }
        // Another install (prefix) is, in general, on another slot.
        let other = InstallRoute::for_key(&KeySpace::hash_tagged("blue:").settings());
        assert_ne!(other, route);
    }
}
