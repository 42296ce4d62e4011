//! The permit-leasing task of one capped connection (redis mode).
//!
//! The local gate's limit is the node's block of the cluster cap. The task keeps the node's
//! grant in Redis at least as large as that limit at every moment, which is what makes the
//! cap hold across nodes:
//! - to grow, it asks Redis first and adds permits only for what was granted;
//! - to shrink, it removes free local permits first and only then reports the lower number.
//!
//! Demand is the permits in use plus the requests waiting for one; a request that finds the
//! gate full wakes the task at once, and the task renews at a third of the lease TTL (faster
//! while it holds unused permits or is short of permits). With Redis unreachable the gate
//! falls back to a local share, `ceil(cap / live_nodes)`.

use std::sync::Arc;
use std::time::Duration;

use switchyard_shared::Millis;
use switchyard_shared::store::{RedisStore, local_share};

use crate::cluster::Cluster;
use crate::metrics::Metrics;
use crate::runtime::Runtime;
use crate::state::ConnHandle;

/// How long a node's block of permits outlives its last renewal (a killed node's permits
/// return after this).
pub const PERMIT_TTL_MS: Millis = 3_000;
/// Poll period while the node wants more than it holds, or holds more than it uses.
const REBALANCE_MS: u64 = 100;

/// The number of live nodes, for the fallback share without Redis.
///
/// Hook: cluster membership (heartbeats) is not wired into this module yet, so this counts
/// only this node; the fallback is then the whole cap.
pub fn live_nodes(_rt: &Runtime) -> u32 {
    1
}

/// Starts one leasing task per capped connection in redis mode; nothing in embedded mode.
/// Must run inside the node's async runtime, before the listeners accept requests.
pub fn start(rt: &Arc<Runtime>) {
    let Some(cluster) = rt.cluster.clone() else {
        return;
    };
    for conn in &rt.connections {
        let cap = conn.config.max_concurrent;
        if cap == 0 {
            continue;
        }
        // Hold nothing until Redis grants a block: never more than the cluster allows.
        conn.gate.shrink(cap);
        rt.metrics.set_permits_held(&conn.id, 0);
        let task = Task {
            conn: conn.clone(),
            cluster: cluster.clone(),
            metrics: rt.metrics.clone(),
            cap,
            fallback: local_share(cap, live_nodes(rt)),
        };
        actix_web::rt::spawn(task.run());
    }
}

struct Task {
    conn: Arc<ConnHandle>,
    cluster: Arc<Cluster>,
    metrics: Arc<Metrics>,
    cap: u32,
    fallback: u32,
}

impl Task {
    async fn run(self) {
        let gate = &self.conn.gate;
        let store: &RedisStore = &self.cluster.store;
        loop {
            let want = gate.in_use().saturating_add(gate.waiting()).min(self.cap);
            let limit = gate.limit();
            if want < limit {
                gate.shrink(limit - want);
            }
            // Never report less than the permits that exist (some may be held right now).
            let ask = want.max(gate.limit());
            let outcome = store
                .permits_acquire(
                    &self.conn.id,
                    &self.cluster.node_id,
                    ask,
                    self.cap,
                    PERMIT_TTL_MS,
                )
                .await;
            let target = match outcome {
                Ok(granted) => granted,
                Err(e) => {
                    tracing::debug!(connection = %self.conn.id, error = %e,
                        "cluster permits unavailable; using the local share");
                    self.fallback
                }
            };
            resize(gate, target);
            let held = gate.limit();
            self.metrics.set_permits_held(&self.conn.id, held);
            let busy = gate.in_use().saturating_add(gate.waiting());
            let period = if busy != held {
                REBALANCE_MS
            } else {
                PERMIT_TTL_MS / 3
            };
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(period)) => {}
                () = gate.demanded() => {}
            }
        }
    }
}

/// Moves the gate's limit toward `target`, removing only free permits when lowering.
fn resize(gate: &crate::state::gate::Gate, target: u32) {
    let limit = gate.limit();
    if target > limit {
        gate.grow(target - limit);
    } else if target < limit {
        gate.shrink(limit - target);
    }
}
