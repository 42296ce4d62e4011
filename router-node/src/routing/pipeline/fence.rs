//! Step 2, fence: a leased request reaches the provider only while it holds the live lease.
//!
//! The fence is checked before the request waits for permits, so a stale holder is refused
//! without taking a queue slot, and again at dispatch time when getting the permits took time:
//! a lease can expire or move while its holder waits in a queue.
//!
//! When the leased connection is the reason a target has nothing left (it cools, is locked
//! out, turned terminal or failed in this request), the lease moves to another free eligible
//! connection with the same generation and the request picks again ([`relocate`]).

use switchyard_shared::Millis;

use super::{RequestCtx, TargetCtx};
use crate::actors::ConnHandle;
use crate::api::errors::GatewayError;
use crate::leases;
use crate::leases::policy::SeatView;
use crate::routing::dispatch::RouteRequest;
use crate::routing::report::TargetSkip;
use crate::routing::select;
use crate::runtime::RoutingTable;
use switchyard_shared::quota_preflight::Preflight;

/// When the lease was last found valid; `None` for a request without a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced(Option<Millis>);

impl Fenced {
    /// A lease found valid at `at`.
    #[cfg(test)]
    pub fn at(at: Millis) -> Self {
        Self(Some(at))
    }
}

/// The fence before permits. Ordinary requests pass without a store round trip.
pub async fn before_permits(
    rt: &RoutingTable,
    req: &RouteRequest,
    conn: &ConnHandle,
) -> Result<Fenced, GatewayError> {
    let Some(lease) = &req.lease else {
        return Ok(Fenced(None));
    };
    leases::fence::check(rt, lease, &conn.id).await?;
    Ok(Fenced(Some(rt.clock.now())))
}

/// The fence at dispatch time: checked again unless no time has passed since `fenced`.
pub async fn at_dispatch(
    rt: &RoutingTable,
    req: &RouteRequest,
    conn: &ConnHandle,
    fenced: Fenced,
) -> Result<(), GatewayError> {
    match (&req.lease, fenced) {
        (Some(lease), Fenced(Some(at))) if needs_recheck(at, rt.clock.now()) => {
            leases::fence::check(rt, lease, &conn.id).await
        }
        // Checked this very millisecond, or no lease to fence.
        _ => Ok(()),
    }
}

/// Whether a target skip of a leased request may be the leased connection becoming
/// ineligible (cooling, locked, terminal, cut off, failed here), so the lease may move. A full
/// gate or a key that may not use the provider is not.
pub fn may_move(req: &RouteRequest, skip: &TargetSkip) -> bool {
    req.lease.is_some()
        && matches!(
            skip,
            TargetSkip::Blocked { .. }
                | TargetSkip::QuotaCutoff { .. }
                | TargetSkip::RequestExhaustion
                | TargetSkip::Failed
        )
}

/// Moves the request's lease off its connection when that connection is ineligible for the
/// target's model at `now` (or failed in this request), to a free eligible connection of the
/// key ([`leases::moves::move_to_free`]). `Ok(true)`: the request now holds the lease on
/// another connection and picks again. `Ok(false)`: nothing moved.
pub async fn relocate(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &TargetCtx,
    rc: &RequestCtx,
    now: Millis,
) -> Result<bool, GatewayError> {
    let (Some(claim), Some(key)) = (&req.lease, req.key.as_deref()) else {
        return Ok(false);
    };
    // Each move lands on a connection this request has not failed on; the count bounds the
    // moves even if snapshots change meanwhile.
    if claim.moves() as usize >= key.allowed_connections.len() {
        return Ok(false);
    }
    let current = claim.connection();
    let Some(seat) = seat_view(rt, ctx, &current, &rc.excluded, now) else {
        return Ok(false);
    };
    let Some(reason) = leases::policy::move_reason(&seat, now) else {
        return Ok(false);
    };
    let others: Vec<String> = key
        .allowed_connections
        .iter()
        .filter(|c| **c != current)
        .cloned()
        .collect();
    let mut candidates = if others.is_empty() {
        Vec::new()
    } else {
        select::eligible(
            rt,
            &ctx.provider,
            &ctx.model,
            None,
            &others,
            true,
            &rc.excluded,
            &rc.pending_blocks,
            now,
        )
        .candidates
    };
    if candidates.is_empty() {
        rt.metrics.lease_op("move", "no_target");
        return Ok(false);
    }
    candidates.sort_by_key(|c| c.priority);
    let eligible: Vec<String> = candidates
        .iter()
        .filter_map(|c| rt.connections.get(c.index))
        .map(|h| h.id.to_string())
        .collect();
    leases::moves::move_to_free(rt, claim, reason, &eligible).await
}

/// What the snapshots say about the leased connection; `None` when it is not one of the
/// target provider's connections (the lease serves another target).
fn seat_view(
    rt: &RoutingTable,
    ctx: &TargetCtx,
    current: &str,
    excluded: &[usize],
    now: Millis,
) -> Option<SeatView> {
    let conn = rt.connection(current)?;
    if !ctx.provider.connections.contains(&conn.idx) {
        return None;
    }
    let snap = conn.load();
    let quota_cut = ctx
        .provider
        .quota_preflight
        .as_ref()
        .is_some_and(|t| matches!(conn.quota_preflight(t, now), Preflight::Cutoff { .. }));
    Some(SeatView {
        terminal: snap.terminal().is_some(),
        cooling_until: now.saturating_add(snap.cooldown_remaining(now)),
        locked_until: snap
            .model_lock(&ctx.provider.model_ref(&conn.id, &ctx.model), now)
            .map(|l| l.until),
        quota_cut,
        failed_in_request: excluded.contains(&conn.idx),
    })
}

/// Whether a fence checked at `checked_at` must be checked again at `now`.
fn needs_recheck(checked_at: Millis, now: Millis) -> bool {
    now > checked_at
}

#[cfg(test)]
mod tests {
    use super::needs_recheck;

    #[test]
    fn a_fence_is_rechecked_once_time_has_passed() {
        assert!(!needs_recheck(100, 100));
        assert!(needs_recheck(100, 101));
        assert!(needs_recheck(100, 5_000));
    }
}
