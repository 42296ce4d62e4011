//! One target of a request, as a fixed sequence of named steps driven by one loop.
//!
//! Why: the steps used to be one 250-line function in which `continue`, early returns and
//! hand-written releases were interleaved, and that is where probe leases leaked. Here every
//! step is a small function that returns a typed verdict ([`Step`] or [`Next`]), and only
//! [`run_target`] loops (the shape of pingora's phases and its retry loop):
//!
//! 1. **eligibility** ([`eligibility`]): the target's provider and its body in the provider's
//!    wire format; the provider cooldown and the breaker gate (perhaps a half-open probe,
//!    held as a [`ProbeGuard`]); then, per attempt, the connection.
//! 2. **fence** ([`fence`]): a leased request still holds the live lease of that connection,
//!    checked before it waits for permits and again at dispatch time if it waited. When the
//!    leased connection is why nothing is left (ineligible, or failed in this request), the
//!    lease moves to a free eligible connection with its generation and step 1 picks again.
//! 3. **permits** ([`permits`]): request queue and concurrency gates (local or cluster-leased
//!    permits), held as one RAII [`Permits`] value.
//! 4. **attempt** ([`attempt`]): the attempt cap, then the upstream attempt itself. On a
//!    connection that opted in to the Claude OAuth usage wall, [`wall`] takes a wall 429
//!    over before step 5 sees it: the same connection is retried in the low-priority lane or
//!    after the session-limit reset, and the connection is neither cooled nor rotated.
//! 5. **observe** ([`outcome`]): the outcome goes to the owning actors; a failure decides
//!    whether to retry on another connection, leave the target or fail the request. When a
//!    combo target's connections are used up, [`retry`] decides whether it gets another
//!    round after `retry_delay_ms` (`max_retries`). A per-target timeout is answered as 524
//!    `target_timeout`; a generic 400 leaves the target at once ([`outcome`]); a "too many
//!    tools" 400 records the provider's limit for the model, and a later request above it
//!    skips the target before step 1's breaker gate ([`tool_limit`]).
//! 6. **release**: the guards. Permits and the probe lease are released when their owners
//!    drop, on every path, including a cancelled request; [`release`] ends a target with its
//!    skip reason.

mod attempt;
mod eligibility;
mod fence;
mod outcome;
mod permits;
pub mod retry;
mod tool_limit;
mod trace;
mod wall;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use bytes::Bytes;
use switchyard_shared::Millis;
use switchyard_shared::config::Target;
use tracing::Instrument;

pub use permits::Permits;

use super::dispatch::{RouteRequest, Routed};
use super::report::{Report, TargetSkip};
use super::translation::Translation;
use crate::actors::ProbeGuard;
use crate::actors::ProviderHandle;
use crate::api::errors::{ClientFormat, GatewayError};
use crate::runtime::RoutingTable;

/// What one request carries from target to target.
#[derive(Default)]
pub struct RequestCtx {
    pub is_combo: bool,
    /// The global cap of attempts over all targets.
    pub max_attempts: u32,
    /// Per-target attempt deadline (combos); 0 = none.
    pub target_timeout_ms: Millis,
    /// Connections that failed or were saturated in this pass.
    pub excluded: Vec<usize>,
    /// Blocks this request's own failures raised (the egress sibling lock, a cooldown, a
    /// lockout), in force for its next choice before the actors publish them.
    pub pending_blocks: Vec<crate::routing::select::PendingBlock>,
    /// The in-request exhaustion set: connections whose failure (401/403, a spent quota, a
    /// terminal state) holds for the rest of this request, across passes.
    pub exhausted: Vec<usize>,
    pub report: Report,
    /// A combo's extra rounds per target (`max_retries`; 0 for direct requests).
    pub max_retries: u32,
    /// The pause before such a round (`retry_delay_ms`).
    pub retry_delay_ms: Millis,
    /// The request's own deadline on the node clock (`combo_timeout_ms`), if it has one.
    pub deadline: Option<Millis>,
    /// Streams truncated inside the recovery hold and reopened (see [`attempt::reopen_or_fail`]).
    pub reopens: u32,
    /// A `quota-share` combo: a capped connection's gate serialises fail-open
    /// ([`crate::routing::quota_share`]).
    pub quota_share: bool,
    /// A `context-relay` request of a session (see [`crate::routing::relay`]).
    pub relay: Option<crate::routing::relay::RelayCtx>,
}

/// One target while its connections are tried.
pub struct TargetCtx {
    /// `provider/model`.
    pub key: String,
    pub provider: Arc<ProviderHandle>,
    pub model: Arc<str>,
    /// A combo target's pin to one connection.
    pub pinned: Option<Arc<str>>,
    /// The wire format the provider speaks.
    pub wire: ClientFormat,
    /// The body in the provider's wire format, built once per target.
    pub upstream_body: Bytes,
    pub translation: Option<Translation>,
    /// The half-open probe lease this target holds, if any.
    pub probe: Option<ProbeGuard>,
    /// Why the last connection was refused permits, when that is why the target ends.
    pub gate_rejection: Option<TargetSkip>,
    /// A connection of this target failed or was saturated: the pin no longer binds.
    pub fallback: bool,
    /// The same-target retries of a combo: the current round's failures, rounds made.
    pub retries: retry::TargetRetries,
}

/// A step's verdict on the target.
#[derive(Debug)]
pub enum Step<T> {
    /// Go on, with this.
    Go(T),
    /// Leave the target for this pass, for this reason.
    Skip(TargetSkip),
}

/// What the driver does after a failed attempt.
#[derive(Debug)]
pub enum Next {
    /// Try the target's next connection.
    Retry,
    /// Leave the target for this pass.
    Skip(TargetSkip),
    /// End the request with this error.
    Fail(GatewayError),
}

/// Tries one target over its eligible connections. `Ok(None)`: move on (reason recorded).
pub async fn run_target(
    rt: &RoutingTable,
    req: &RouteRequest,
    rc: &mut RequestCtx,
    target: &Target,
) -> Result<Option<Routed>, GatewayError> {
    let mut ctx = match eligibility::prepare(rt, req, target)? {
        Step::Go(ctx) => ctx,
        Step::Skip(skip) => {
            let key = super::dispatch::target_key(target);
            rc.report.skip(&key, &target.provider, skip);
            return Ok(None);
        }
    };
    if let Some(limit) = ctx.provider.tool_limit(&ctx.model, rt.clock.now())
        && tool_limit::tool_count(&req.body.raw) > limit as usize
    {
        return Ok(release(ctx, rc, TargetSkip::ToolLimit { limit }));
    }
    match eligibility::breaker_gate(rt, &ctx.provider).await {
        Step::Go(probe) => ctx.probe = probe,
        Step::Skip(skip) => return Ok(release(ctx, rc, skip)),
    }
    loop {
        let now = rt.clock.now();
        let conn = match eligibility::pick_connection(rt, req, &mut ctx, rc, now) {
            Step::Go(conn) => conn,
            Step::Skip(TargetSkip::Failed) if retry_round(rt, &mut ctx, rc, now).await => {
                continue;
            }
            // A leased connection that became ineligible: the lease moves, and the request
            // with it (docs/leases.md, "the lease moves").
            Step::Skip(skip) if fence::may_move(req, &skip) => {
                if fence::relocate(rt, req, &ctx, rc, now).await? {
                    continue;
                }
                return Ok(release(ctx, rc, skip));
            }
            Step::Skip(skip) => return Ok(release(ctx, rc, skip)),
        };
        // A session moving to another connection: its conversation may go as a summary.
        crate::routing::relay::before_dispatch(rt, req, &mut ctx, rc, &conn).await;
        let fenced = fence::before_permits(rt, req, &conn).await?;
        let permits =
            match permits::acquire(rt, &ctx.provider, &conn, &ctx.model, rc.quota_share).await {
                Ok(p) => p,
                Err(skip) => {
                    permits::refused(rt, &mut ctx, rc, &conn, skip);
                    continue;
                }
            };
        fence::at_dispatch(rt, req, &conn, fenced).await?;
        // A cluster probe's lease may have lapsed while it waited: then it must not go.
        if let (Some(cluster), Some(probe)) = (&rt.cluster, &ctx.probe)
            && !crate::cluster::probe::fence_holds(cluster, &ctx.provider.id, probe).await
        {
            let retry_after_ms = crate::cluster::probe::MAX_DENIAL_MS;
            return Ok(release(ctx, rc, TargetSkip::CircuitOpen { retry_after_ms }));
        }
        // The budgets start here: the queue and semaphore waits were Switchyard's own.
        let dispatched = rt.clock.now();
        attempt::count(rc, &ctx, &conn, dispatched)?;
        let span = trace::attempt_span(&ctx, &conn);
        // Traces off (the default), the attempt is awaited as it is: wrapped in a disabled
        // span it was moved twice more, about 3 KiB each time, on every request.
        let attempted = if span.is_none() {
            wall::attempt(rt, req, &ctx, &conn, rc, dispatched).await
        } else {
            wall::attempt(rt, req, &ctx, &conn, rc, dispatched)
                .instrument(span.clone())
                .await
        };
        match attempted {
            attempt::Attempted::Replied(mut body) => {
                attempt::note_reopens(&mut body, rc);
                trace::replied(&span, &body);
                let ok = outcome::Success {
                    body,
                    conn,
                    permits,
                    started: dispatched,
                };
                return Ok(Some(outcome::on_success(rt, req, ctx, rc, ok)));
            }
            attempt::Attempted::Failed(failure) => {
                drop(permits);
                let timed_out =
                    attempt::target_timed_out(&failure, rc.target_timeout_ms, dispatched, rt);
                let next = outcome::on_failure(rt, req, &mut ctx, rc, &conn, &failure, timed_out)
                    .instrument(span.clone())
                    .await;
                let next = attempt::reopen_or_fail(rt, rc, &failure, next);
                trace::next(&span, &next);
                match next {
                    Next::Retry => {}
                    Next::Skip(skip) => return Ok(release(ctx, rc, skip)),
                    Next::Fail(e) => return Err(e),
                }
            }
            // The probe lease and the permits go back as this returns.
            attempt::Attempted::Untranslatable(e) | attempt::Attempted::ExecutionTimeout(e) => {
                trace::ended(&span, &e.code);
                return Err(e);
            }
        }
    }
}

/// A combo target whose connections all failed: when [`retry::decide`] allows another round,
/// sleeps its delay (inside the request's deadline), hands the retried connections back and
/// says so; the breaker is asked again, since it may have opened meanwhile.
async fn retry_round(
    rt: &RoutingTable,
    ctx: &mut TargetCtx,
    rc: &mut RequestCtx,
    now: Millis,
) -> bool {
    let policy = retry::RetryPolicy {
        max_retries: rc.max_retries,
        delay_ms: rc.retry_delay_ms,
        budget_left_ms: rc.deadline.map(|d| d.saturating_sub(now)),
    };
    let Some(plan) = retry::decide(&ctx.retries, &policy) else {
        return false;
    };
    tracing::debug!(
        target_key = %ctx.key,
        delay_ms = plan.delay_ms,
        round = ctx.retries.used + 1,
        "combo target retried after its delay"
    );
    if plan.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(plan.delay_ms)).await;
    }
    ctx.retries.used += 1;
    ctx.retries.round.clear();
    rc.excluded.retain(|c| !plan.connections.contains(c));
    if ctx.probe.is_some() {
        return true;
    }
    match eligibility::breaker_gate(rt, &ctx.provider).await {
        Step::Go(probe) => {
            ctx.probe = probe;
            true
        }
        Step::Skip(_) => false,
    }
}

/// Ends a target with its skip reason. Dropping `ctx` hands back a probe lease it still holds.
fn release(ctx: TargetCtx, rc: &mut RequestCtx, skip: TargetSkip) -> Option<Routed> {
    rc.report.skip(&ctx.key, &ctx.provider.id, skip);
    None
}
