//! Step 4b, the Claude OAuth usage wall (`low_priority_mode`, `auto_limit_reset`): the
//! attempt on a connection that opted in, with its same-connection retries.
//!
//! While the connection's lane is open every attempt carries `anthropic-usage-limit: slow`.
//! Each answer goes to the connection's [`crate::usage_wall`] state first; a wall 429 it takes
//! over (the lane accepted, a slot wait, the session-limit reset claimed) is retried here on
//! the same connection and never reaches step 5, so the connection is neither cooled, nor
//! counted on the breaker, nor rotated away. Every other answer goes on to step 5 as it came.
//! Connections without the opt-ins pay one branch. In redis mode an accepted lane, a spent
//! budget, a `max_wait` block and the reset's hold are handed to the cluster
//! (`cluster::learned`), so the other nodes take the lane without a wall 429 of their own, and
//! a lane ended before its reset is withdrawn from them.

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{HeaderName, HeaderValue};
use switchyard_shared::Millis;

use super::attempt::{self, Attempted};
use super::{RequestCtx, TargetCtx};
use crate::actors::ConnHandle;
use crate::routing::dispatch::{RouteRequest, RoutedBody};
use crate::routing::limit_reset;
use crate::runtime::RoutingTable;
use crate::usage_wall::{Action, EndReason, Event, Options, ResetOutcome, Signals, Spent};

/// The most same-connection retries one attempt makes at the wall. The waits have their own
/// bounds (`slow-max-wait`, the start budget); this one only stops an upstream that keeps
/// answering in a loop.
const MAX_SAME_CONNECTION_RETRIES: u32 = 32;

/// `anthropic-usage-limit: slow`: the request asks for the low-priority lane.
pub fn slow_header() -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static("anthropic-usage-limit"),
        HeaderValue::from_static("slow"),
    )
}

fn options(conn: &ConnHandle) -> Options {
    Options {
        low_priority: conn.config.low_priority_mode,
        auto_reset: conn.config.auto_limit_reset,
    }
}

/// The attempt, with the usage wall's retries on a connection that opted in.
pub async fn attempt(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &TargetCtx,
    conn: &Arc<ConnHandle>,
    rc: &RequestCtx,
    dispatched: Millis,
) -> Attempted {
    let timeout = rc.target_timeout_ms;
    let opts = options(conn);
    if !opts.any() {
        return attempt::attempt(rt, req, ctx, conn, timeout, dispatched, false).await;
    }
    let mut spent = Spent::default();
    let mut at = dispatched;
    let mut retries = 0;
    loop {
        let (slow, expired) = rt
            .usage_wall
            .with(conn.idx, |s| s.before_dispatch(rt.clock.epoch_ms()))
            .unwrap_or_default();
        record(rt, conn, expired);
        let attempted = attempt::attempt(rt, req, ctx, conn, timeout, at, slow).await;
        let Some(sig) = signals(&attempted) else {
            return attempted;
        };
        spent.sent_slow = slow;
        spent.budget_left_ms = budget_left(rt, ctx, rc, dispatched);
        let mut action = decide(rt, conn, opts, &sig, spent);
        if action == Action::TryReset {
            spent.reset_tried = true;
            action = if claim_reset(rt, ctx, conn).await {
                // Reset (or not limited after all): again at full speed.
                Action::RetrySlow
            } else {
                decide(rt, conn, opts, &sig, spent)
            };
        }
        if retries >= MAX_SAME_CONNECTION_RETRIES {
            return attempted;
        }
        match action {
            Action::Pass | Action::TryReset => return attempted,
            Action::RetrySlow => {}
            Action::Wait(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                spent.waited_ms = spent.waited_ms.saturating_add(ms);
            }
        }
        retries += 1;
        at = rt.clock.now();
    }
}

/// The usage-wall facts of an answer; `None` for an outcome that is no upstream answer.
fn signals(attempted: &Attempted) -> Option<Signals> {
    match attempted {
        Attempted::Failed(f) => Some(Signals::read(f.status, &f.headers)),
        Attempted::Replied(RoutedBody::Json(ok)) => {
            Some(Signals::read(Some(ok.status), &ok.quota_headers))
        }
        Attempted::Replied(RoutedBody::Stream(s)) => {
            Some(Signals::read(Some(200), &s.quota_headers))
        }
        Attempted::Untranslatable(_) | Attempted::ExecutionTimeout(_) => None,
    }
}

/// The connection's decision on an answer, with its event counted.
fn decide(
    rt: &RoutingTable,
    conn: &ConnHandle,
    opts: Options,
    sig: &Signals,
    spent: Spent,
) -> Action {
    let jitter = rand::random_range(-1.0..=1.0);
    let now = rt.clock.epoch_ms();
    let Some((decision, lane_before)) = rt.usage_wall.with(conn.idx, |s| {
        let before = s.lane;
        (s.on_answer(opts, sig, spent, now, jitter), before)
    }) else {
        return Action::Pass;
    };
    record(rt, conn, decision.event);
    if let Some(event) = decision.event {
        tracing::info!(connection = %conn.id, event = event.label(), "usage wall");
        match event {
            Event::Accepted => share(rt, conn, true),
            // An early end withdraws the lane from every node (with the budget or block it
            // set); the lane's own expiry needs no word.
            Event::Ended(reason) if reason.is_shared() => {
                let reset_ms = lane_before.map_or(0, |l| l.reset_at.saturating_sub(now));
                end_shared(rt, conn, reason, reset_ms);
            }
            _ => {}
        }
    }
    decision.action
}

/// Hands the connection's deadlines to the cluster (redis mode; a spawned write, never
/// waited on). Only the accept shares the lane itself: any other write carrying this node's
/// copy of the lane could open again a lane another node ended.
fn share(rt: &RoutingTable, conn: &ConnHandle, with_lane: bool) {
    let Some(cluster) = &rt.cluster else {
        return;
    };
    let now = rt.clock.epoch_ms();
    if let Some(mut shared) = rt.usage_wall.with(conn.idx, |s| s.shared(now)) {
        if !with_lane {
            shared.lane_ms = 0;
            shared.lane_reset_ms = 0;
        }
        cluster.share_usage_wall(&conn.id, shared);
    }
}

/// This node ended the connection's lane early: the cluster withdraws it (redis mode).
fn end_shared(rt: &RoutingTable, conn: &ConnHandle, reason: EndReason, reset_ms: Millis) {
    let Some(cluster) = &rt.cluster else {
        return;
    };
    let now = rt.clock.epoch_ms();
    if let Some(shared) = rt.usage_wall.with(conn.idx, |s| s.shared(now)) {
        cluster.end_usage_wall_lane(&conn.id, reason, reset_ms, shared);
    }
}

fn record(rt: &RoutingTable, conn: &ConnHandle, event: Option<Event>) {
    if let Some(event) = event {
        rt.metrics.usage_wall_event(&conn.id, event.label());
    }
}

/// What is left of the request's start budget: the provider's `headers_ms` from the first
/// dispatch, and the request's own deadline (`combo_timeout_ms`); `None` when neither bounds
/// it.
fn budget_left(
    rt: &RoutingTable,
    ctx: &TargetCtx,
    rc: &RequestCtx,
    first: Millis,
) -> Option<Millis> {
    let now = rt.clock.now();
    let headers_ms = ctx.provider.config.timeouts.headers_ms;
    let start = (headers_ms > 0).then(|| first.saturating_add(headers_ms).saturating_sub(now));
    let request = rc.deadline.map(|d| d.saturating_sub(now));
    match (start, request) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Claims the session-limit reset for this request, unless another request is at it or it is
/// not due; `true` when the request goes again at full speed.
async fn claim_reset(rt: &RoutingTable, ctx: &TargetCtx, conn: &ConnHandle) -> bool {
    let Some(org) = conn.config.organization_uuid.as_deref() else {
        return false;
    };
    let began = rt
        .usage_wall
        .with(conn.idx, |s| s.reset.begin(rt.clock.epoch_ms()))
        .unwrap_or(false);
    if !began {
        return false;
    }
    let mut claim = PendingClaim {
        rt,
        conn,
        settled: false,
    };
    let outcome = limit_reset::claim(conn, &ctx.provider.config.base_url, org).await;
    claim.settle(outcome)
}

/// A claim under way: settled exactly once, as an error when the request is dropped mid-call,
/// so the connection never stays marked as claiming.
struct PendingClaim<'a> {
    rt: &'a RoutingTable,
    conn: &'a ConnHandle,
    settled: bool,
}

impl PendingClaim<'_> {
    fn settle(&mut self, outcome: ResetOutcome) -> bool {
        self.settled = true;
        self.rt
            .metrics
            .usage_wall_event(&self.conn.id, outcome.label());
        tracing::info!(connection = %self.conn.id, outcome = outcome.label(), "session-limit reset");
        let now = self.rt.clock.epoch_ms();
        let again = self
            .rt
            .usage_wall
            .with(self.conn.idx, |s| s.reset.settle(outcome, now))
            .unwrap_or(false);
        share(self.rt, self.conn, false);
        again
    }
}

impl Drop for PendingClaim<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.settle(ResetOutcome::Error);
        }
    }
}
