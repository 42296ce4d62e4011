//! The cluster tasks of a redis-mode node (the design's ClusterSync): they follow the whole
//! runtime, which a config reload may swap, so they sit above it.
//!
//! - [`writer`]: writes local changes to Redis and publishes them as events, and keeps them in
//!   the bounded replay queue while Redis is unreachable.
//! - [`sync`]: applies peers' events and resynchronises from Redis on every (re)connect and
//!   periodically; [`resync`] reads what changed (the change log, or every record), [`remote`]
//!   turns an event into actor messages, and [`adopt`] a newer connection record into the
//!   messages that make the local state equal to it.
//! - [`learned`]: merges peers' usage-wall deadlines and tool limits (state without an
//!   actor); [`learned_resync`] makes them equal to Redis's records in a resync.
//! - [`membership`]: heartbeats and the live node count.
//! - [`operator`]: operator actions in redis mode are written to Redis before this node
//!   changes, and answer 503 when Redis does not take them.
//! - [`settings`]: runtime settings shared through Redis.
//! - [`permits`]: the leasing tasks of cluster-wide `max_concurrent` caps.

pub mod adopt;
pub mod learned;
pub mod learned_resync;
pub mod membership;
pub mod operator;
pub mod permits;
pub mod remote;
pub mod resync;
pub mod settings;
pub mod sync;
pub mod writer;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actors::supervision;
use crate::cluster::{Cluster, wall_ms};

/// A supervised task that ran this long before dying starts a new burst: its next restart
/// waits the shortest backoff again.
const QUIET_RUN: Duration = Duration::from_secs(60);

/// Where the cluster tasks find the current runtime (it may be swapped by a config reload).
pub type RuntimeSource = Arc<dyn Fn() -> Arc<crate::runtime::Runtime> + Send + Sync>;

/// Starts the cluster tasks on the current tokio runtime: the writer, the event subscriber
/// with its resyncs, and the heartbeat. Call once per process.
pub fn start(cluster: &Arc<Cluster>, runtime: RuntimeSource) {
    let started_at_ms = wall_ms();
    let (c, r) = (cluster.clone(), runtime.clone());
    tokio::spawn(supervise("cluster.writer", cluster.clone(), move || {
        writer::run(c.clone(), r.clone())
    }));
    let (c, r) = (cluster.clone(), runtime.clone());
    tokio::spawn(supervise("cluster.sync", cluster.clone(), move || {
        sync::run(c.clone(), r.clone())
    }));
    let c = cluster.clone();
    tokio::spawn(supervise(
        "cluster.membership",
        cluster.clone(),
        move || membership::run(c.clone(), runtime.clone(), started_at_ms),
    ));
    cluster.metrics.set_degraded(true);
    tracing::info!(
        node_id = %cluster.node_id,
        redis = %cluster.config.redis_url,
        "cluster mode: redis"
    );
}

/// Runs the task `make` builds, and builds and runs it again after it ends (a panic, or a
/// return: these tasks are meant to run for the life of the process), with a backoff that
/// doubles within a burst of deaths. While it is down the node reports itself degraded, and
/// every death is recorded in [`supervision`].
pub async fn supervise<F, Fut>(task: &'static str, cluster: Arc<Cluster>, make: F)
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut recent = 0u32;
    loop {
        supervision::running(task);
        let started = Instant::now();
        let reason = match tokio::spawn(make()).await {
            Ok(()) => "returned".to_owned(),
            Err(e) if e.is_panic() => supervision::panic_reason(&*e.into_panic()),
            Err(e) => format!("cancelled: {e}"),
        };
        if started.elapsed() >= QUIET_RUN {
            recent = 0;
        }
        let delay = supervision::backoff(recent);
        recent = recent.saturating_add(1);
        supervision::died(task, &reason, wall_ms());
        cluster.sync.task_down(true);
        cluster.metrics.set_degraded(true);
        tracing::error!(
            task,
            reason,
            delay_ms = delay.as_millis() as u64,
            "cluster task died; restarting"
        );
        tokio::time::sleep(delay).await;
        cluster.sync.task_down(false);
    }
}
