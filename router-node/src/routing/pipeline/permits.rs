//! Step 3, permits: the request queue, then the concurrency gates (connection → model).
//!
//! Every permit is owned: [`Permits`] holds the queue's execution slot, the gates' semaphore
//! permits (in redis mode the connection gate's permits are the node's block of the cluster
//! cap) and the in-flight counts, and gives all of them back exactly once when it is dropped.
//! Global and provider caps are not configured in this version; their place in the order is
//! documented in `admission`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::admission::{AdmissionError, Rejection, SemaphoreError};
use switchyard_shared::outcome::ProviderCategory;
use tokio::sync::OwnedSemaphorePermit;

use super::{RequestCtx, TargetCtx};
use crate::actors::{ConnHandle, ProviderHandle};
use crate::metrics::labels::FallbackReason;
use crate::routing::report::TargetSkip;
use crate::runtime::RoutingTable;
use crate::state::QueuePermit;

/// Permits and in-flight counts of one dispatched attempt, released exactly once on drop.
pub struct Permits {
    _conn: Option<OwnedSemaphorePermit>,
    _model: Option<OwnedSemaphorePermit>,
    _queue: Option<QueuePermit>,
    conn: Arc<ConnHandle>,
    provider: Arc<ProviderHandle>,
    released: bool,
}

impl Permits {
    /// Gives everything back now, for an answer that is already read and is only kept (a
    /// fusion panel answer held as the fallback while the judge runs); dropping the value
    /// later gives back nothing twice.
    pub fn release_now(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        self._conn = None;
        self._model = None;
        self._queue = None;
        self.conn.inflight.fetch_sub(1, Ordering::AcqRel);
        self.provider.inflight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Counts one attempt in flight on `conn` and its provider until the value is dropped.
    fn new(
        conn_permit: Option<OwnedSemaphorePermit>,
        model_permit: Option<OwnedSemaphorePermit>,
        queue: Option<QueuePermit>,
        conn: &Arc<ConnHandle>,
        provider: &Arc<ProviderHandle>,
    ) -> Self {
        conn.inflight.fetch_add(1, Ordering::AcqRel);
        provider.inflight.fetch_add(1, Ordering::AcqRel);
        Self {
            _conn: conn_permit,
            _model: model_permit,
            _queue: queue,
            conn: conn.clone(),
            provider: provider.clone(),
            released: false,
        }
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        self.release_now();
    }
}

/// Queue admission then the composite gate. `Err`: the connection is saturated, with why.
/// For a `quota-share` combo the connection gate serialises fail-open
/// ([`crate::routing::quota_share::serialise`]).
pub async fn acquire(
    rt: &RoutingTable,
    provider: &Arc<ProviderHandle>,
    conn: &Arc<ConnHandle>,
    model: &str,
    quota_share: bool,
) -> Result<Permits, TargetSkip> {
    let queue = if queue_enabled(rt, provider, conn) {
        Some(admit_queue(rt, conn).await?)
    } else {
        None
    };
    let (max_queue, timeout) = {
        let s = rt.settings.load();
        (
            s.concurrency.semaphore_max_queue,
            s.concurrency.semaphore_queue_timeout_ms,
        )
    };
    let conn_permit = if quota_share {
        match crate::routing::quota_share::serialise(rt, conn, max_queue, timeout).await {
            // Fail-open let the request past the serialisation without a slot: the
            // connection's own cap (the reference's account semaphore) still decides, so a
            // quota-share combo never sends an account more than `max_concurrent`.
            Ok(None) if conn.gate.cap() > 0 => conn.gate.acquire(max_queue, timeout).await,
            other => other,
        }
    } else {
        conn.gate.acquire(max_queue, timeout).await
    }
    .map_err(gate_skip)?;
    let model_permit = match conn.model_gates.get(model) {
        Some(g) => g.acquire(max_queue, timeout).await.map_err(gate_skip)?,
        None => None,
    };
    Ok(Permits::new(
        conn_permit,
        model_permit,
        queue,
        conn,
        provider,
    ))
}

/// The connection's request queue, then the cluster's requests-per-minute bucket within what
/// is left of the same wait budget (the local queue paces this node, the bucket all nodes).
async fn admit_queue(rt: &RoutingTable, conn: &Arc<ConnHandle>) -> Result<QueuePermit, TargetSkip> {
    let p = conn
        .queue
        .admit(&rt.clock)
        .await
        .map_err(|e| saturated(&e, None))?;
    let q = conn.queue.settings();
    let left = q.max_wait_ms.saturating_sub(p.waited_ms);
    if let Err(e) = crate::caps::rpm::pace_connection(rt, conn, q.requests_per_minute, left).await {
        let timeout = AdmissionError::QueueTimeout {
            waited_ms: p.waited_ms.saturating_add(e.waited_ms),
            max_wait_ms: q.max_wait_ms,
        };
        return Err(saturated(&timeout, Some(e.retry_after_ms)));
    }
    rt.metrics.queue_waited(p.waited_ms);
    Ok(p)
}

fn saturated(e: &AdmissionError, retry_after_ms: Option<u64>) -> TargetSkip {
    TargetSkip::Saturated {
        code: e.code(),
        status: e.status(),
        error_type: e.error_type(),
        retry_after_ms,
    }
}

fn gate_skip(e: SemaphoreError) -> TargetSkip {
    TargetSkip::Saturated {
        code: e.code(),
        status: e.status(),
        error_type: e.error_type(),
        retry_after_ms: None,
    }
}

/// A saturated connection: counted, excluded for this request, and remembered as the
/// target's reason should no other connection take the request.
pub fn refused(
    rt: &RoutingTable,
    ctx: &mut TargetCtx,
    rc: &mut RequestCtx,
    conn: &ConnHandle,
    skip: TargetSkip,
) {
    rt.metrics.rejected(&skip);
    rt.metrics.fallback(FallbackReason::ConcurrencyCap);
    rc.excluded.push(conn.idx);
    ctx.gate_rejection = Some(skip);
    ctx.fallback = true;
}

/// Whether the connection's request queue applies: set on the connection (or by an operator),
/// or by the setting that enables it for every API-key provider.
pub fn queue_enabled(rt: &RoutingTable, provider: &ProviderHandle, conn: &ConnHandle) -> bool {
    let explicit = conn
        .load()
        .rate_limit_protection
        .unwrap_or(conn.config.rate_limit_protection);
    explicit
        || (provider.config.category == ProviderCategory::Apikey
            && rt
                .settings
                .load()
                .request_queue
                .auto_enable_apikey_providers)
}
