//! Node membership: this node's heartbeat, and the count of live nodes.
//!
//! Why: the coordinator and operators see the cluster through these documents (JSON under a
//! key with a TTL, readable with `redis-cli GET`), and cluster-wide caps fall back to
//! `ceil(cap / live_nodes)` per node when Redis is gone, which needs the last known count.
//!
//! A dead node's id (its heartbeat key expired) is left in the node set for
//! [`PRUNE_AFTER_TTLS`] × `node_ttl_ms`: the coordinator shows it `down` for `node_ttl_ms` and
//! then its janitor removes it and frees its permits. Nodes prune only what is still there
//! long after, so the set stays bounded when no coordinator runs. (They used to prune at once,
//! within one heartbeat of the expiry, so the coordinator rarely saw a node down.)
//!
//! A round (the write and the count) is one script call whatever the cluster's size
//! (`store::membership`); it read every peer's key before, nodes² reads per interval.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use switchyard_store::NodeHeartbeat;

use super::RuntimeSource;
use crate::cluster::{Cluster, wall_ms};
use crate::runtime::Runtime;

/// How many `node_ttl_ms` a dead node's id stays in the node set before a node prunes it.
pub const PRUNE_AFTER_TTLS: u32 = 2;

/// The dead ids to prune now: those seen dead for at least `grace`. `missing_since` remembers
/// since when each id has been seen dead; ids no longer dead are forgotten, pruned ones too.
pub fn overdue(
    missing_since: &mut HashMap<String, Instant>,
    dead: &[String],
    now: Instant,
    grace: Duration,
) -> Vec<String> {
    missing_since.retain(|id, _| dead.contains(id));
    let mut out = Vec::new();
    for id in dead {
        let since = *missing_since.entry(id.clone()).or_insert(now);
        if now.duration_since(since) >= grace {
            out.push(id.clone());
        }
    }
    for id in &out {
        missing_since.remove(id);
    }
    out
}

/// Writes a heartbeat every `heartbeat_interval_ms` and refreshes the live node count.
pub async fn run(cluster: Arc<Cluster>, runtime: RuntimeSource, started_at_ms: u64) {
    let every = Duration::from_millis(cluster.config.heartbeat_interval_ms.max(100));
    let grace =
        Duration::from_millis(cluster.config.node_ttl_ms.max(1)).saturating_mul(PRUNE_AFTER_TTLS);
    let mut missing_since = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let rt = runtime();
        let doc = heartbeat(&cluster, &rt, started_at_ms).to_json();
        let ttl = cluster.config.node_ttl_ms.max(1);
        if let Ok(round) = cluster
            .store
            .membership_round(&cluster.node_id, &doc, ttl)
            .await
        {
            cluster.sync.set_live_nodes(round.live);
            let prune = overdue(&mut missing_since, &round.dead, Instant::now(), grace);
            if let Err(e) = cluster.store.prune_nodes(&prune).await {
                tracing::debug!(error = %e, "cannot prune dead node ids");
            }
        }
        cluster.metrics.set_degraded(cluster.degraded());
    }
}

/// This node's heartbeat document now.
pub fn heartbeat(cluster: &Cluster, rt: &Runtime, started_at_ms: u64) -> NodeHeartbeat {
    let now = rt.table.clock.now();
    let breakers: BTreeMap<String, String> = rt
        .table
        .providers
        .iter()
        .map(|p| {
            let state = p.breaker.load().state().as_str().to_ascii_lowercase();
            (p.id.to_string(), state)
        })
        .collect();
    let mut connections: BTreeMap<String, u64> = BTreeMap::new();
    for conn in &rt.table.connections {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_ids_are_pruned_only_after_the_grace() {
        let t0 = Instant::now();
        let grace = Duration::from_secs(6);
        let mut since = HashMap::new();
        let dead = vec!["a".to_owned(), "b".to_owned()];
        assert!(overdue(&mut since, &dead, t0, grace).is_empty());
        assert!(overdue(&mut since, &dead[..1], t0 + Duration::from_secs(5), grace).is_empty());
        // b came back (not dead any more): its clock restarts when it dies again.
        assert_eq!(
            overdue(&mut since, &dead, t0 + Duration::from_secs(6), grace),
            vec!["a".to_owned()]
        );
        assert!(overdue(&mut since, &dead[1..], t0 + Duration::from_secs(11), grace).is_empty());
        assert_eq!(
            overdue(&mut since, &dead[1..], t0 + Duration::from_secs(12), grace),
            vec!["b".to_owned()]
        );
        assert!(since.is_empty());
    }
}
