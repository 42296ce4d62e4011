//! Step 5, observe: the attempt's outcome goes to the owning actors, and a failure decides
//! what the driver does next.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::admission::{ConnectionBlock, CoolingScope};
use switchyard_shared::breaker::BreakerView;
use switchyard_shared::classify::Classification;
use switchyard_shared::cooldown::sibling;
use switchyard_shared::outcome::RetryClass;
use switchyard_shared::outcome::{FailureReason, ProviderCategory, TerminalSignal};
use switchyard_shared::strategy::stable_hash;

use super::retry::FailedAttempt;
use super::{Next, Permits, RequestCtx, TargetCtx};
use crate::actors::ConnHandle;
use crate::actors::{self, Admitted};
use crate::routing::dispatch::{RouteRequest, Routed, RoutedBody};
use crate::routing::report::{TargetSkip, UpstreamFailure};
use crate::routing::select::PendingBlock;
use crate::routing::{observe, terminal};
use crate::runtime::RoutingTable;
use crate::upstream::AttemptFailure;

/// A successful attempt and what it holds until the response is finished.
pub struct Success {
    pub body: RoutedBody,
    pub conn: Arc<ConnHandle>,
    pub permits: Permits,
    /// When the attempt started.
    pub started: Millis,
}

/// Reports the success (settling a probe), pins the session and feeds the strategy; the
/// permits travel on with the response.
pub fn on_success(
    rt: &RoutingTable,
    req: &RouteRequest,
    mut ctx: TargetCtx,
    rc: &RequestCtx,
    ok: Success,
) -> Routed {
    let Success {
        body,
        conn,
        permits,
        started,
    } = ok;
    let provider = ctx.provider.clone();
    let probe = ctx.probe.take();
    let generation = probe.as_ref().and_then(actors::ProbeGuard::generation);
    observe::on_success(rt, &provider, &conn, &ctx.model, probe, started);
    super::tool_limit::on_success(rt, req, &provider, &ctx.model);
    let (latency_ms, quota_headers) = match &body {
        RoutedBody::Json(ok) => (ok.elapsed_ms, &ok.quota_headers),
        RoutedBody::Stream(stream) => (stream.ready_after_ms, &stream.quota_headers),
    };
    observe::feed_success(rt, &conn, latency_ms, quota_headers);
    if let Some(session) = &req.session {
        rt.affinity
            .pin(provider.idx, session, conn.idx, rt.clock.now());
    }
    if let Ok(mut s) = provider.strategy_state.lock() {
        s.record_success(stable_hash(conn.id.as_bytes()));
    }
    Routed {
        body,
        conn,
        provider,
        model: ctx.model.clone(),
        target: std::mem::take(&mut ctx.key),
        attempts: rc.report.attempts,
        probe: generation,
        permits,
        translation: ctx.translation.take(),
        side_calls: Vec::new(),
    }
}

/// Judges a failed attempt (settling a probe) and decides: retry on another connection when
/// the failure allows a fallback and the breaker still admits the target, else leave the
/// target, or fail the request when the failure must reach the client as it is.
pub async fn on_failure(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &mut TargetCtx,
    rc: &mut RequestCtx,
    conn: &Arc<ConnHandle>,
    failure: &AttemptFailure,
    target_timed_out: bool,
) -> Next {
    // A probe is used once: later attempts on this target go through the breaker again.
    let probe = ctx.probe.take();
    let was_probe = probe.is_some();
    let judged = observe::on_failure(
        rt,
        &ctx.provider,
        conn,
        &ctx.model,
        &ctx.key,
        failure,
        probe,
        rc.is_combo,
    );
    super::trace::judged(&judged);
    // What this failure blocks is in force for this request's next choice at once; the
    // actors apply it to the snapshots (and the cluster) in their own time.
    if let Some(ConnectionBlock::Cooling {
        remaining_ms,
        scope,
        reason,
    }) = judged.failure.block
    {
        rc.pending_blocks.push(PendingBlock {
            conn: conn.idx,
            until: rt.clock.now().saturating_add(remaining_ms),
            scope,
            model: Some(ctx.model.clone()),
            reason,
        });
    }
    spread_to_egress_siblings(rt, conn, &judged, &mut rc.pending_blocks);
    if let Some(session) = &req.session {
        rt.affinity.evict(ctx.provider.idx, session);
    }
    ctx.retries.round.push(FailedAttempt {
        conn: conn.idx,
        status: judged.failure.status,
        request_scoped: judged.classification.request_scoped,
        block: judged.failure.block,
    });
    if judged.classification.is_tool_limit() {
        super::tool_limit::learn(rt, req, ctx, failure);
    }
    let mut upstream = judged.failure;
    if target_timed_out {
        // The reference's synthetic 524: the target took longer than the combo allows.
        upstream.status = Some(TARGET_TIMEOUT_STATUS);
        upstream.code = Some("target_timeout".to_owned());
        upstream.message = "the target did not answer within the combo's timeout_ms".to_owned();
    }
    if exhausts(&judged.classification, &upstream) {
        rc.exhausted.push(conn.idx);
    }
    rc.report.record_failure(upstream);
    let retryable = judged.classification.should_fallback
        && judged.classification.retry != RetryClass::NotRetryable;
    if !retryable || (judged.classification.next_target_only() && !rc.is_combo) {
        return Next::Fail(terminal::upstream_error(&rc.report));
    }
    rt.metrics.fallback(judged.classification.reason);
    ctx.fallback = true;
    if judged.classification.next_target_only() {
        // A request-scoped error (413, 422, a request-invalid 400 …): the target's other
        // connections would get the same input. The connection itself is fine: another
        // target of a combo may take the request.
        return Next::Skip(TargetSkip::Failed);
    }
    rc.excluded.push(conn.idx);
    readmit(rt, ctx, was_probe).await
}

/// The egress-bucketed sibling lock (docs/policy.md, `cooldown`): a quota or rate 429 on a connection of
/// the `[egress_lock]` family cools the family's other connections of the same `egress`
/// bucket until the failing connection's own cooldown ends (each sibling's actor keeps a longer
/// cooldown or a terminal state). Only the connection-level effect is spread: the siblings'
/// actors publish it to the cluster like any local cooldown.
///
/// Each sibling the lock applies to (by the same pure policy its actor runs) is also added to
/// the request's `pending` blocks, so this request's next choice never picks it while the
/// actor's message is still on its way.
fn spread_to_egress_siblings(
    rt: &RoutingTable,
    conn: &ConnHandle,
    judged: &observe::Judged,
    pending: &mut Vec<PendingBlock>,
) {
    let c = &judged.classification;
    if !sibling::spreads(
        judged.failure.status,
        c.reason,
        c.terminal,
        c.request_scoped,
    ) {
        return;
    }
    let Some(ConnectionBlock::Cooling { remaining_ms, .. }) = judged.failure.block else {
        return;
    };
    let siblings = sibling::siblings(
        &member(conn),
        rt.connections.iter().map(|h| member(h)),
        rt.egress_lock.active_providers(),
    );
    if siblings.is_empty() {
        return;
    }
    let now = rt.clock.now();
    let until = now.saturating_add(remaining_ms);
    let mut sent = 0;
    let settings = rt.settings.load();
    for idx in siblings {
        if let Some(handle) = rt.connections.get(idx) {
            let category = rt
                .provider(&handle.config.provider)
                .map_or(ProviderCategory::Apikey, |p| p.config.category);
            let params = settings.cooldown_params(category, handle.config.disable_cooling);
            if sibling::sibling_lock(&handle.load().state, until, &params, now).is_some() {
                pending.push(PendingBlock {
                    conn: idx,
                    until,
                    scope: CoolingScope::Connection,
                    model: None,
                    reason: c.reason,
                });
            }
            let lock = actors::SiblingLock {
                until,
                reason: c.reason,
                at: now,
            };
            sent += usize::from(actors::sibling_lock(handle, lock));
        }
    }
    rt.metrics.egress_sibling_locks(&conn.config.provider, sent);
}

/// A connection as the sibling rule sees it.
fn member(h: &ConnHandle) -> sibling::EgressMember<'_> {
    sibling::EgressMember {
        idx: h.idx,
        provider: h.config.provider.as_str(),
        egress: h.config.egress.as_deref(),
    }
}

/// The status of a per-target timeout (the reference's synthetic 524).
pub const TARGET_TIMEOUT_STATUS: u16 = 524;

/// Whether a failure puts its connection in the request's exhaustion set (the reference's
/// in-request exhaustion): a rejected credential (401/403, or a body that says the key is
/// refused whatever its status, as Google's `API_KEY_INVALID` 400 does), a spent quota, or a
/// terminal state keeps the connection out for the rest of the request, even after a cooldown
/// wait.
pub fn exhausts(c: &Classification, failure: &UpstreamFailure) -> bool {
    !c.request_scoped
        && (matches!(failure.status, Some(401 | 403))
            || c.terminal == TerminalSignal::AuthFailure
            || c.reason == FailureReason::QuotaExhausted
            || matches!(failure.block, Some(ConnectionBlock::Terminal(_))))
}

/// Whether the target may go on after a failure. After a failed probe the snapshot still
/// reads half-open until the actor applies the failure, so the actor itself is asked: the
/// admission queues behind the observation, sees a failed probe's reopened breaker, and stops
/// the request here instead of letting it reach the provider's other connections unadmitted.
/// Otherwise the breaker may have opened on this failure: the snapshot is checked.
async fn readmit(rt: &RoutingTable, ctx: &mut TargetCtx, was_probe: bool) -> Next {
    let now = rt.clock.now();
    if was_probe {
        match actors::admit_probe(&ctx.provider, &rt.actor_stats, rt.clock, now).await {
            Admitted::Allowed => Next::Retry,
            Admitted::Probe(probe) => {
                ctx.probe = Some(probe);
                Next::Retry
            }
            Admitted::Rejected { .. } => Next::Skip(TargetSkip::Failed),
        }
    } else if let BreakerView::Open { until } = ctx.provider.breaker.load().view
        && until > now
    {
        Next::Skip(TargetSkip::Failed)
    } else {
        Next::Retry
    }
}
