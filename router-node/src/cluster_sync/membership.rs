//! Node membership: this node's heartbeat, and the count of live nodes.
//!
//! Why: the coordinator and operators see the cluster through these documents (JSON under a
//! key with a TTL, readable with `redis-cli GET`), and cluster-wide caps fall back to
//! `ceil(cap / live_nodes)` per node when Redis is gone, which needs the last known count.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use switchyard_shared::store::NodeHeartbeat;

use super::RuntimeSource;
use crate::cluster::{Cluster, wall_ms};
use crate::runtime::Runtime;

/// Writes a heartbeat every `heartbeat_interval_ms` and refreshes the live node count.
pub async fn run(cluster: Arc<Cluster>, runtime: RuntimeSource, started_at_ms: u64) {
    let every = Duration::from_millis(cluster.config.heartbeat_interval_ms.max(100));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let rt = runtime();
        let doc = heartbeat(&cluster, &rt, started_at_ms).to_json();
        let ttl = cluster.config.node_ttl_ms.max(1);
        if cluster
            .store
            .heartbeat(&cluster.node_id, &doc, ttl)
            .await
            .is_ok()
            && let Ok(nodes) = cluster.store.read_nodes().await
        {
            let live = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
            cluster.sync.set_live_nodes(live);
        }
        cluster.metrics.set_degraded(cluster.degraded());
    }
}

/// This node's heartbeat document now.
pub fn heartbeat(cluster: &Cluster, rt: &Runtime, started_at_ms: u64) -> NodeHeartbeat {
    let now = rt.clock.now();
    let breakers: BTreeMap<String, String> = rt
        .providers
        .iter()
        .map(|p| {
            let state = p.breaker.load().state().as_str().to_ascii_lowercase();
            (p.id.to_string(), state)
        })
        .collect();
    let mut connections: BTreeMap<String, u64> = BTreeMap::new();
    for conn in &rt.connections {
        let snap = conn.load();
        let class = if snap.terminal().is_some() {
            "terminal"
        } else if snap.cooldown_remaining(now) > 0 {
            "cooldown"
        } else {
            "active"
        };
        *connections.entry(class.to_owned()).or_default() += 1;
    }
    let sent_at_ms = wall_ms();
    NodeHeartbeat {
        node_id: cluster.node_id.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        client_address: rt.config.server.listen.clone(),
        admin_address: rt.config.server.admin_listen.clone(),
        sent_at_ms,
        started_at_ms,
        uptime_ms: sent_at_ms.saturating_sub(started_at_ms),
        inflight: rt.stats.inflight.load(Ordering::Relaxed).max(0),
        draining: rt.lifecycle.draining.load(Ordering::Acquire),
        redis_state: cluster.store.state().as_str().to_owned(),
        breakers,
        connections,
        permits: BTreeMap::new(),
        settings_version: cluster.sync.settings_version.load(Ordering::Relaxed),
    }
}
