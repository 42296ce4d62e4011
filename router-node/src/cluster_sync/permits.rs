//! The permit-leasing tasks of capped connections (redis mode).
//!
//! The local gate's limit is the node's block of the cluster cap. Each task keeps the node's
//! grant in Redis at least as large as the permits that exist locally at every moment, which
//! is what makes the cap hold across nodes:
//! - to grow, it asks Redis first and adds permits only for what was granted;
//! - to shrink, it removes free local permits first and only then reports the lower number.
//!
//! Demand is the permits in use plus the requests waiting for one; a request that finds the
//! gate full wakes the task at once, and the task renews at a third of the lease TTL (sooner
//! while it holds unused permits or is short of them).
//!
//! When a call fails (a slow command, a stalled or unreachable Redis) the gate keeps the block
//! it holds, and no more, until that block's validity lapses on this node's monotonic clock;
//! only then, and a permit TTL after the first failure, does it fall back to a share of the
//! last known live-node count ([`crate::caps::grant`] decides; this task does the I/O).
//! Permits in use that no valid grant covers are reported as
//! `switchyard_permits_over_cap`.
//!
//! An idle connection makes no Redis calls: once Redis has acknowledged a report of zero
//! permits, the task asks again only when demand appears ([`needs_redis`]). A node holding
//! nothing has nothing to renew, and at thousands of capped connections per node the
//! once-a-second renewals of idle ones were most of a cluster's Redis load.
//!
//! After a Redis master switch the promoted replica may lack the last grants, so the task
//! re-asserts what the node holds and grows only a permit TTL later
//! ([`crate::caps::switch_hold`] decides; this task reads the store's master generation after
//! each call).
//!
//! A config reload builds new connection handles with new gates while requests started
//! before it finish on the old ones. A task is therefore keyed by connection id, follows the
//! current runtime, and counts the permits still held on retired gates (which it empties and
//! never refills) in what it reports, until they have drained.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_shared::Millis;

use crate::actors::ConnHandle;
use crate::caps::gates::{known_live_nodes, prepare};
use crate::caps::grant::{Call, Held};
use crate::caps::switch_hold::SwitchHold;
use crate::reload::RuntimeCell;
use crate::state::gate::Gate;

/// How long a node's block of permits outlives its last renewal (a killed node's permits
/// return after this).
pub const PERMIT_TTL_MS: Millis = 3_000;
/// Poll period while the node wants more than it holds, or holds more than it uses.
const REBALANCE_MS: u64 = 100;
/// How often new capped connections (after a reload) get their task.
const SUPERVISE_MS: u64 = 1_000;

/// Starts the leasing tasks (redis mode; nothing in embedded mode). Must run inside the
/// node's async runtime, before the listeners accept requests.
pub fn start(cell: &Arc<RuntimeCell>) {
    let rt = cell.load();
    if rt.table.cluster.is_none() {
        return;
    }
    prepare(&rt.table);
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    spawn_missing(cell, &running);
    let cell = cell.clone();
    actix_web::rt::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(SUPERVISE_MS)).await;
            spawn_missing(&cell, &running);
        }
    });
}

fn spawn_missing(cell: &Arc<RuntimeCell>, running: &Arc<Mutex<HashSet<String>>>) {
    let rt = cell.load();
    let generation = rt
        .table
        .cluster
        .as_ref()
        .map_or(0, |c| c.store.master_generation().generation);
    let Ok(mut set) = running.lock() else {
        return;
    };
    for conn in rt
        .table
        .connections
        .iter()
        .filter(|c| c.config.max_concurrent > 0)
    {
        if set.insert(conn.id.to_string()) {
            let task = Task {
                id: conn.id.to_string(),
                cell: cell.clone(),
                running: running.clone(),
                handles: vec![conn.clone()],
                quiet: false,
                held: Held::default(),
                hold: SwitchHold::new(generation),
                origin: Instant::now(),
            };
            actix_web::rt::spawn(task.run());
        }
    }
}

struct Task {
    id: String,
    cell: Arc<RuntimeCell>,
    running: Arc<Mutex<HashSet<String>>>,
    /// The current handle last, retired ones (still draining) before it.
    handles: Vec<Arc<ConnHandle>>,
    /// Redis acknowledged that this node holds none of the connection's permits.
    quiet: bool,
    /// The node's block as Redis last granted it, and until when it binds.
    held: Held,
    /// After a master switch: no growth until every old grant has lapsed or been re-asserted.
    hold: SwitchHold,
    /// Zero of the task's monotonic clock.
    origin: Instant,
}

impl Task {
    /// Milliseconds on the task's monotonic clock.
    fn now(&self) -> Millis {
        Millis::try_from(self.origin.elapsed().as_millis()).unwrap_or(Millis::MAX)
    }

    /// `at` on the task's monotonic clock (0 when it came before the task).
    fn millis_at(&self, at: Instant) -> Millis {
        Millis::try_from(at.saturating_duration_since(self.origin).as_millis())
            .unwrap_or(Millis::MAX)
    }

    async fn run(mut self) {
        loop {
            let rt = self.cell.load();
            let Some(cluster) = rt.table.cluster.clone() else {
                break;
            };
            let current = rt
                .table
                .connection(&self.id)
                .filter(|c| c.config.max_concurrent > 0)
                .cloned();
            if let Some(c) = &current
                && !self.handles.iter().any(|h| Arc::ptr_eq(h, c))
            {
                self.handles.push(c.clone());
            }
            // Retired gates take no new permits and drop out once drained.
            self.handles.retain(|h| {
                let is_current = current.as_ref().is_some_and(|c| Arc::ptr_eq(h, c));
                if !is_current {
                    h.gate.shrink(h.gate.limit());
                }
                is_current || h.gate.limit() > 0
            });
            let Some(conn) = current else {
                if self.handles.is_empty() {
                    // No longer capped here: hand the block back and stop.
                    let _ = cluster
                        .store
                        .permits_release(&self.id, &cluster.node_id)
                        .await;
                    rt.table.metrics.set_permits_held(&self.id, 0);
                    rt.table.metrics.set_permits_over_cap(&self.id, 0);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(REBALANCE_MS)).await;
                continue;
            };
            let cap = conn.config.max_concurrent;
            let gate = &conn.gate;
            let retired: u32 = self
                .handles
                .iter()
                .filter(|h| !Arc::ptr_eq(h, &conn))
                .map(|h| h.gate.limit())
                .sum();
            let want = gate.in_use().saturating_add(gate.waiting());
            let limit = gate.limit();
            if want < limit {
                gate.shrink(limit - want);
            }
            // The permits that exist on this node now.
            let holding = gate.limit().saturating_add(retired);
            // Never report less than the permits that exist (some may be held right now).
            let ask = want
                .max(gate.limit())
                .saturating_add(retired)
                .min(cap.max(holding));
            let ask = self.hold.bound(self.now(), ask, holding);
            if needs_redis(ask, self.quiet) {
                let sent_at = self.now();
                let reply = cluster
                    .store
                    .permits_acquire(&self.id, &cluster.node_id, ask, cap, PERMIT_TTL_MS)
                    .await;
                let master = cluster.store.master_generation();
                let since = master.since.map_or(0, |at| self.millis_at(at));
                if self
                    .hold
                    .after_call(master.generation, since, PERMIT_TTL_MS)
                    && self.hold.holding(self.now())
                {
                    tracing::info!(connection = %self.id, holding,
                        "the Redis master changed; re-asserting the permits held before growing");
                }
                let granted = match reply {
                    Ok(granted) => {
                        self.quiet = ask == 0;
                        // A call that may have run on a new master grows nothing: the grants
                        // of the old one may be missing there.
                        Some(self.hold.bound(self.now(), granted, holding))
                    }
                    Err(e) => {
                        self.quiet = false;
                        tracing::debug!(connection = %self.id, error = %e,
                            "cluster permits unavailable; keeping the block while it is valid");
                        None
                    }
                };
                let call = Call {
                    sent_at,
                    asked: ask,
                    granted,
                    seen_at: self.now(),
                };
                self.held = self.held.after(call, PERMIT_TTL_MS);
            }
            let now = self.now();
            let limit = self
                .held
                .limit(now, cap, PERMIT_TTL_MS, known_live_nodes(&rt.table));
            resize(gate, limit.saturating_sub(retired));
            let held = gate.limit();
            rt.table
                .metrics
                .set_permits_held(&self.id, held.saturating_add(retired));
            rt.table.metrics.set_permits_over_cap(
                &self.id,
                self.held
                    .over_cap(now, gate.in_use().saturating_add(retired)),
            );
            let busy = gate.in_use().saturating_add(gate.waiting());
            // While calls fail, ask again soon: the block must be renewed before it lapses
            // (a store that is down refuses at once, so this costs Redis nothing).
            let holding_down = self.hold.holding(now);
            let mut period =
                if busy != held || retired > 0 || self.held.failing_since.is_some() || holding_down
                {
                    REBALANCE_MS
                } else {
                    PERMIT_TTL_MS / 3
                };
            // Wake when the block lapses or the fallback begins, not up to a period later.
            if !self.quiet
                && let Some(at) = self.held.next_change(now, PERMIT_TTL_MS)
            {
                period = period.min(at.saturating_sub(now).max(1));
            }
            if let Some(at) = self.hold.ends_at(now) {
                period = period.min(at.saturating_sub(now).max(1));
            }
            drop(rt);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(period)) => {}
                () = gate.demanded() => {}
            }
        }
        if let Ok(mut set) = self.running.lock() {
            set.remove(&self.id);
        }
    }
}

/// Whether the task must talk to Redis: always, unless it wants nothing and Redis already
/// knows it holds nothing (an idle connection stays quiet until demand wakes its task).
fn needs_redis(ask: u32, quiet: bool) -> bool {
    ask > 0 || !quiet
}

/// Moves the gate's limit toward `target`, removing only free permits when lowering.
fn resize(gate: &Gate, target: u32) {
    let limit = gate.limit();
    if target > limit {
        gate.grow(target - limit);
    } else if target < limit {
        gate.shrink(limit - target);
    }
}

#[cfg(test)]
mod tests {
    use super::needs_redis;

    #[test]
    fn only_an_acknowledged_idle_connection_skips_redis() {
        assert!(needs_redis(1, true), "demand always asks");
        assert!(needs_redis(0, false), "a report of zero is made once");
        assert!(!needs_redis(0, true), "then nothing until demand");
    }
}
