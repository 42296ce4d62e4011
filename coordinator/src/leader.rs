//! The leader lease: exactly one coordinator replica runs the janitor.
//!
//! Every replica serves reads and actions; only the holder of the fenced leader lease
//! (`KeySpace::leader_lease`, the same lease machinery as connection leases, its owner stored as
//! a hash and its `api_key_id` field carrying the replica id for display) runs janitor tasks.
//!
//! Safety comes from two sides:
//! - **Local validity.** A replica counts its lease from the moment *before* it sent the
//!   acquire or renew, minus a margin, on the monotonic clock. It stops janitor work once that
//!   deadline passes, which is before Redis expires the lease. A replica that was frozen
//!   (SIGSTOP, a long GC-like pause) wakes up past its deadline and does nothing until it
//!   holds the lease again.
//! - **Fencing.** Every janitor write is a script that first checks the lease still carries
//!   the replica's generation, so even a write that slips past the local check is refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_store::LeaseAcquire;

use crate::janitor::{Janitor, Scope};
use crate::leadership::valid_until;
use crate::service::Coordinator;

/// Acquires and renews the leader lease every third of its TTL; never returns.
pub async fn run(co: Arc<Coordinator>) {
    let ttl = co.settings.lease_ttl_ms;
    let keys = co.store.leader_lease_keys();
    let mut tick = tokio::time::interval(Duration::from_millis((ttl / 3).max(50)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let sent = Instant::now();
        match co.leadership.held() {
            Some(held) => {
                match co
                    .store
                    .lease_renew(&keys, &co.owner_token, held.generation, ttl)
                    .await
                {
                    Ok(true) => co.leadership.set(held.generation, valid_until(sent, ttl)),
                    Ok(false) => {
                        co.leadership.clear();
                        tracing::warn!(
                            generation = held.generation,
                            "leadership lost: the leader lease is gone or held by another replica; janitor stopped"
                        );
                    }
                    Err(e) if sent >= held.valid_until => {
                        co.leadership.clear();
                        tracing::warn!(error = %e, "leadership lost: cannot renew the leader lease in time; janitor stopped");
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot renew the leader lease; retrying"),
                }
            }
            None => match co
                .store
                .lease_acquire(&keys, &co.owner_token, &co.settings.coordinator_id, ttl)
                .await
            {
                Ok(LeaseAcquire::Acquired(grant)) => {
                    co.leadership.set(grant.generation, valid_until(sent, ttl));
                    tracing::info!(generation = grant.generation, "became leader");
                }
                Ok(LeaseAcquire::Held { .. }) => {}
                Err(e) => tracing::debug!(error = %e, "cannot try the leader lease"),
            },
        }
        co.metrics.set_leader(co.leadership.current().is_some());
    }
}

/// Runs a janitor pass every interval while this replica leads; never returns.
pub async fn run_janitor(co: Arc<Coordinator>) {
    let mut janitor = Janitor::default();
    let mut tick = tokio::time::interval(Duration::from_millis(co.settings.janitor_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Checked right before the pass: a replica that just woke from a pause past its
        // deadline does nothing.
        let Some(generation) = co.leadership.current() else {
            continue;
        };
        match janitor.pass(&janitor_scope(&co), generation).await {
            Ok(report) if report.fenced => {
                co.metrics.janitor("fenced");
                co.leadership.clear();
                tracing::warn!(
                    generation,
                    "janitor write fenced: another replica leads; janitor stopped"
                );
            }
            Ok(report) => {
                co.metrics.janitor("ok");
                if report.nodes_pruned > 0 || report.permits_freed > 0 || report.index_pruned > 0 {
                    tracing::info!(
                        generation,
                        nodes_pruned = report.nodes_pruned,
                        permits_freed = report.permits_freed,
                        lockout_index_pruned = report.index_pruned,
                        "janitor pass"
                    );
                }
            }
            Err(e) => {
                co.metrics.janitor("error");
                tracing::warn!(error = %e, "janitor pass failed");
            }
        }
    }
}

/// What the janitor works on, taken from the replica.
pub fn janitor_scope(co: &Coordinator) -> Scope<'_> {
    Scope {
        store: &co.store,
        grace: Duration::from_millis(co.settings.config.cluster.node_ttl_ms),
        connections: co
            .catalogue
            .connections
            .iter()
            .map(|(c, _)| c.as_str())
            .collect(),
        coordinator_id: &co.settings.coordinator_id,
    }
}

/// Gives the lease up on shutdown so another replica takes over at once.
pub async fn release(co: &Coordinator) {
    if let Some(generation) = co.leadership.clear() {
        let keys = co.store.leader_lease_keys();
        let _ = co
            .store
            .lease_release(&keys, &co.owner_token, generation)
            .await;
    }
}
