//! The cluster tasks of a redis-mode node (the design's ClusterSync): they follow the whole
//! runtime, which a config reload may swap, so they sit above it.
//!
//! - [`writer`]: writes local changes to Redis and publishes them as events, and keeps them in
//!   the bounded replay queue while Redis is unreachable.
//! - [`sync`]: applies peers' events and resynchronises from Redis on every (re)connect and
//!   periodically; [`remote`] turns an event into actor messages, and [`adopt`] a newer
//!   connection record into the messages that make the local state equal to it.
//! - [`membership`]: heartbeats and the live node count.
//! - [`operator`]: operator actions in redis mode fail closed while Redis is unreachable.
//! - [`settings`]: runtime settings shared through Redis.
//! - [`permits`]: the leasing tasks of cluster-wide `max_concurrent` caps.

pub mod adopt;
pub mod membership;
pub mod operator;
pub mod permits;
pub mod remote;
pub mod settings;
pub mod sync;
pub mod writer;

use std::sync::Arc;

use crate::cluster::{Cluster, wall_ms};

/// Where the cluster tasks find the current runtime (it may be swapped by a config reload).
pub type RuntimeSource = Arc<dyn Fn() -> Arc<crate::runtime::Runtime> + Send + Sync>;

/// Starts the cluster tasks on the current tokio runtime: the writer, the event subscriber
/// with its resyncs, and the heartbeat. Call once per process.
pub fn start(cluster: &Arc<Cluster>, runtime: RuntimeSource) {
    let started_at_ms = wall_ms();
    tokio::spawn(writer::run(cluster.clone(), runtime.clone()));
    tokio::spawn(sync::run(cluster.clone(), runtime.clone()));
    tokio::spawn(membership::run(cluster.clone(), runtime, started_at_ms));
    cluster.metrics.set_degraded(true);
    tracing::info!(
        node_id = %cluster.node_id,
        redis = %cluster.config.redis_url,
        "cluster mode: redis"
    );
}
