//! The node side of `quota-share` combos: what the strategy reads about a member, and the
//! per-connection serialisation of its dispatches.
//!
//! Why: several client keys share one subscription account that takes only `max_concurrent`
//! requests at a time. The strategy (`switchyard_shared::strategy`, deficit round robin with
//! power of two choices) only de-prioritises a member at its cap, so with a pool of one it
//! cannot hold anything back; the serialisation here is what does. A quota-share dispatch to a
//! capped connection waits in that connection's concurrency gate (the same gate and line every
//! request to the connection uses, so the account sees at most its cap from this node; queue
//! bounds from `[resilience.concurrency]`). It is **fail-open**, as the reference's `qsconn`
//! semaphore: a full line or a timeout does not refuse the request, unless
//! `quota_share_fail_open = false`; every outcome is counted in
//! `switchyard_quota_share_waits_total{outcome}`. What fail-open lets through still meets the
//! connection's own cap, as in the reference, where the account semaphore stands behind the
//! quota-share one: [`super::pipeline::permits`] waits for the gate once more, and a connection
//! still saturated then is skipped like any saturated connection (the next member, or a typed
//! 429). So `max_concurrent` holds for quota-share combos too (cluster-wide in redis mode). A
//! slot, when there is one, is released exactly once with the attempt's other permits.

use std::sync::atomic::Ordering;

use switchyard_shared::admission::{QuotaShareOutcome, SemaphoreError, quota_share_on_error};
use switchyard_shared::config::Target;
use switchyard_shared::strategy::stable_hash;
use tokio::sync::OwnedSemaphorePermit;

use crate::actors::ConnHandle;
use crate::metrics::labels::QuotaShareWait;
use crate::runtime::RoutingTable;

/// `(in_flight, max_concurrent)` of a combo member: its pinned connection's, or for an
/// unpinned target its provider's in-flight count against the sum of its connections' caps
/// (0, uncapped, when any of them is uncapped).
pub fn member_load(rt: &RoutingTable, target: &Target) -> (u32, u32) {
    if let Some(conn) = target
        .connection
        .as_deref()
        .and_then(|id| rt.connection(id))
    {
        return (
            conn.inflight.load(Ordering::Relaxed),
            conn.config.max_concurrent,
        );
    }
    let Some(provider) = rt.provider(&target.provider) else {
        return (0, 0);
    };
    let caps = provider
        .connections
        .iter()
        .filter_map(|&i| rt.connections.get(i))
        .map(|c| c.config.max_concurrent);
    let cap = if caps.clone().any(|c| c == 0) {
        0
    } else {
        caps.fold(0u32, u32::saturating_add)
    };
    (provider.inflight.load(Ordering::Relaxed), cap)
}

/// A combo member's identity for its deficit counter: the target and its pinned connection,
/// since a shared pool is usually one model pinned to several accounts of one provider.
pub fn member_hash(target: &Target) -> u64 {
    let pin = target.connection.as_deref().unwrap_or("");
    stable_hash(format!("{}/{}\0{pin}", target.provider, target.model).as_bytes())
}

/// Takes a slot of `conn`'s concurrency gate for a quota-share dispatch. `Ok(None)`: no slot
/// to hold (the connection is uncapped, or fail-open let the request through without one).
pub async fn serialise(
    rt: &RoutingTable,
    conn: &ConnHandle,
    max_queue: u32,
    timeout_ms: u64,
) -> Result<Option<OwnedSemaphorePermit>, SemaphoreError> {
    let capped = conn.gate.cap() > 0;
    match conn.gate.acquire(max_queue, timeout_ms).await {
        Ok(permit) => {
            if capped {
                rt.metrics.quota_share_wait(QuotaShareWait::Acquired);
            }
            Ok(permit)
        }
        Err(err) => {
            let settings = rt.settings.load().concurrency();
            let outcome = quota_share_on_error(err, &settings);
            rt.metrics.quota_share_wait(refused(err, outcome));
            match outcome {
                QuotaShareOutcome::ProceedWithoutSlot => {
                    tracing::debug!(connection = %conn.id, %err, "quota-share proceeds without a slot");
                    Ok(None)
                }
                QuotaShareOutcome::Reject(err) => Err(err),
            }
        }
    }
}

/// The metric's `outcome` for a refused wait.
fn refused(err: SemaphoreError, outcome: QuotaShareOutcome) -> QuotaShareWait {
    let open = outcome == QuotaShareOutcome::ProceedWithoutSlot;
    match (err, open) {
        (SemaphoreError::Timeout { .. }, true) => QuotaShareWait::TimeoutProceeded,
        (SemaphoreError::QueueFull { .. }, true) => QuotaShareWait::QueueFullProceeded,
        (SemaphoreError::Timeout { .. }, false) => QuotaShareWait::TimeoutRejected,
        (SemaphoreError::QueueFull { .. }, false) => QuotaShareWait::QueueFullRejected,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use switchyard_shared::admission::{ConcurrencySettings, GateLevel};

    #[actix_rt::test]
    async fn a_capped_connection_serialises_fail_open_and_frees_its_slot_once() {
        let rt = crate::routing::tests::runtime("http://127.0.0.1:9/v1", 30);
        let capped = rt.table.connection("p-2").cloned().unwrap();
        let held = serialise(&rt.table, &capped, 0, 10).await.unwrap();
        assert!(held.is_some(), "p-2 takes one request: a slot");
        // The line is full (max 0 waiting): fail-open dispatches without a slot.
        assert!(
            serialise(&rt.table, &capped, 0, 10)
                .await
                .unwrap()
                .is_none()
        );
        // With room in the line the wait times out, and the request still goes.
        assert!(
            serialise(&rt.table, &capped, 1, 10)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            capped.gate.in_use(),
            1,
            "nothing but the first holds a slot"
        );

        let mut settings = (**rt.table.settings.load()).clone();
        settings.concurrency.quota_share_fail_open = false;
        rt.table.settings.store(Arc::new(settings));
        assert!(matches!(
            serialise(&rt.table, &capped, 0, 10).await,
            Err(SemaphoreError::QueueFull { .. })
        ));
        assert!(matches!(
            serialise(&rt.table, &capped, 1, 10).await,
            Err(SemaphoreError::Timeout { .. })
        ));
        drop(held);
        assert_eq!(capped.gate.in_use(), 0, "the one slot came back");
        let uncapped = rt.table.connection("p-1").cloned().unwrap();
        assert!(
            serialise(&rt.table, &uncapped, 0, 10)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn outcomes_follow_the_fail_open_setting() {
        let timeout = SemaphoreError::Timeout {
            level: GateLevel::Connection,
            waited_ms: 10,
        };
        let full = SemaphoreError::QueueFull {
            level: GateLevel::Connection,
            max_queue: 1,
        };
        let open = ConcurrencySettings::default();
        let closed = ConcurrencySettings {
            quota_share_fail_open: false,
            ..open
        };
        let label = |e, s: &ConcurrencySettings| refused(e, quota_share_on_error(e, s));
        assert_eq!(label(timeout, &open), QuotaShareWait::TimeoutProceeded);
        assert_eq!(label(full, &open), QuotaShareWait::QueueFullProceeded);
        assert_eq!(label(timeout, &closed), QuotaShareWait::TimeoutRejected);
        assert_eq!(label(full, &closed), QuotaShareWait::QueueFullRejected);
    }
}
