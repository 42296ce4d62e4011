//! Step 4, attempt: the attempt cap, then one upstream attempt with its deadline.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::Millis;

use super::permits::queue_enabled;
use super::{RequestCtx, TargetCtx};
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::errors::GatewayError;
use crate::routing::dispatch::{RouteRequest, RoutedBody};
use crate::routing::{terminal, translation};
use crate::runtime::RoutingTable;
use crate::upstream::{self, AttemptFailure, AttemptRequest, AttemptResult};

/// What one attempt produced.
pub enum Attempted {
    /// An answer for the client (translated into its format when needed).
    Replied(RoutedBody),
    /// A failure for the observe step to judge.
    Failed(AttemptFailure),
    /// The provider answered, but its answer cannot be put into the client's format.
    Untranslatable(GatewayError),
}

/// Counts an attempt against the request's cap (`Err` once the cap is reached) and marks the
/// connection used for the strategies.
pub fn count(
    rc: &mut RequestCtx,
    ctx: &TargetCtx,
    conn: &ConnHandle,
    now: Millis,
) -> Result<(), GatewayError> {
    if rc.report.attempts >= rc.max_attempts {
        return Err(terminal::max_attempts(&rc.report));
    }
    rc.report.attempts += 1;
    let previous = ctx.provider.last_used_conn.swap(conn.idx, Ordering::AcqRel);
    conn.mark_used(now, (previous != usize::MAX).then_some(previous));
    Ok(())
}

/// One upstream attempt on `conn`, timed for the metrics and the request's upstream wait.
pub async fn attempt(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &TargetCtx,
    conn: &Arc<ConnHandle>,
    target_timeout_ms: Millis,
    now: Millis,
) -> Attempted {
    let provider = &ctx.provider;
    let attempt_req = AttemptRequest {
        conn: conn.clone(),
        provider: provider.clone(),
        client_format: ctx.wire,
        body: ctx.upstream_body.clone(),
        stream: req.body.stream,
        forward_headers: req.forward_headers.clone(),
        deadline_ms: earliest(
            attempt_deadline(rt, provider, conn, now),
            (target_timeout_ms > 0).then(|| now + target_timeout_ms),
        ),
        watch: rt.watch_config(&provider.config),
        clock: rt.clock,
    };
    let attempt = upstream::attempt_waiting(attempt_req, &req.upstream_wait);
    match rt.metrics.time_attempt(provider.idx, attempt).await {
        AttemptResult::Json(mut ok) => {
            if let Some(t) = &ctx.translation {
                match translation::json_body(t, &ok.body) {
                    Ok(body) => ok.body = body,
                    Err(e) => return Attempted::Untranslatable(e),
                }
            }
            Attempted::Replied(RoutedBody::Json(ok))
        }
        AttemptResult::Stream(stream) => Attempted::Replied(RoutedBody::Stream(stream)),
        AttemptResult::Failed(failure) => Attempted::Failed(failure),
    }
}

/// The absolute deadline of one attempt: the provider's attempt ceiling and, for queued
/// connections, the execution budget.
fn attempt_deadline(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    now: Millis,
) -> Option<Millis> {
    let ceiling = (provider.config.timeouts.attempt_deadline_ms > 0)
        .then(|| now + provider.config.timeouts.attempt_deadline_ms);
    let execution = queue_enabled(rt, provider, conn).then(|| {
        now + switchyard_shared::admission::execution_budget_ms(
            conn.queue.settings().execution_max_wait_ms,
            provider.config.timeouts.headers_ms,
        )
    });
    earliest(ceiling, execution)
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Millis>, b: Option<Millis>) -> Option<Millis> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::earliest;

    #[test]
    fn the_earliest_deadline_wins_and_none_means_unbounded() {
        assert_eq!(earliest(None, None), None);
        assert_eq!(earliest(Some(5), None), Some(5));
        assert_eq!(earliest(None, Some(7)), Some(7));
        assert_eq!(earliest(Some(9), Some(7)), Some(7));
        assert_eq!(earliest(Some(3), Some(7)), Some(3));
    }
}
