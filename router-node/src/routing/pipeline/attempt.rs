//! Step 4, attempt: the attempt cap, then one upstream attempt with its deadline.
//!
//! Every budget of an attempt is measured from its dispatch, after the queue and the
//! semaphores: those waits are Switchyard's own and count against `max_wait_ms` alone. When
//! the queue's execution budget (`execution_max_wait_ms`) is what ends the attempt, the
//! request ends with 504 `RATE_LIMIT_EXECUTION_TIMEOUT` and nothing is reported to the
//! actors: Switchyard cut the request, so the connection is neither cooled nor counted on the
//! breaker.
//!
//! With `[resilience.stream_recovery]` on, a streamed attempt holds its start back (see
//! [`crate::upstream::hold`]); a truncation inside the hold is a failure like any other before
//! the commit point, and [`reopen_or_fail`] counts it against `max_reopens`: within the limit
//! the request goes on to its next attempt, past it the request ends with a definite 502
//! `STREAM_RECOVERY_EXHAUSTED` rather than another broken stream.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use switchyard_shared::Millis;
use switchyard_shared::admission::Rejection;

use super::permits::queue_enabled;
use super::{Next, RequestCtx, TargetCtx};
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
    /// Switchyard's own execution budget ended the attempt: no state changes.
    ExecutionTimeout(GatewayError),
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
/// `dispatched` is the node time after the permits were granted: the budgets start there.
/// `slow`: the connection is in the Claude usage wall's low-priority lane ([`super::wall`]).
pub async fn attempt(
    rt: &RoutingTable,
    req: &RouteRequest,
    ctx: &TargetCtx,
    conn: &Arc<ConnHandle>,
    target_timeout_ms: Millis,
    dispatched: Millis,
    slow: bool,
) -> Attempted {
    let provider = &ctx.provider;
    let now = dispatched;
    let execution = execution_deadline(rt, provider, conn, now);
    let mut forward_headers = super::trace::forward_headers(req);
    if slow {
        forward_headers.push(super::wall::slow_header());
    }
    let attempt_req = AttemptRequest {
        conn: conn.clone(),
        provider: provider.clone(),
        client_format: ctx.wire,
        body: ctx.upstream_body.clone(),
        stream: req.body.stream,
        // With `traceparent` of this attempt's span when traces are on.
        forward_headers,
        deadline_ms: earliest(
            earliest(ceiling(provider, now), execution.map(|(at, _)| at)),
            (target_timeout_ms > 0).then(|| now + target_timeout_ms),
        ),
        watch: rt.watch_config(&provider.config),
        clock: rt.clock,
    };
    let hold = req
        .body
        .stream
        .then(|| upstream::hold::HoldPolicy::from_settings(&rt.settings.load().stream_recovery))
        .flatten();
    // The attempt adds its own waits on the upstream to the request's `UpstreamWait`.
    let started = std::time::Instant::now();
    let result = upstream::attempt_holding(attempt_req, &req.upstream_wait, hold).await;
    rt.metrics
        .observe_attempt(provider.idx, started.elapsed(), &result);
    match result {
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
        AttemptResult::Failed(failure) => match execution {
            Some((at, budget)) if ended_by(&failure, at, rt.clock.now()) => {
                Attempted::ExecutionTimeout(execution_timeout(budget))
            }
            _ => Attempted::Failed(failure),
        },
    }
}

/// After the observe step judged a failed attempt: a truncation inside the recovery hold
/// counts as a reopen; past `max_reopens` the request ends with 502
/// `STREAM_RECOVERY_EXHAUSTED` instead of whatever `next` said.
pub fn reopen_or_fail(
    rt: &RoutingTable,
    rc: &mut RequestCtx,
    failure: &AttemptFailure,
    next: Next,
) -> Next {
    if !failure.truncated_in_hold || matches!(next, Next::Fail(_)) {
        return next;
    }
    rc.reopens += 1;
    let max_reopens = rt.settings.load().stream_recovery.max_reopens;
    if rc.reopens > max_reopens {
        rt.metrics.stream_recovery("reopen", "exhausted");
        tracing::info!(
            reopens = max_reopens,
            "stream truncated inside the recovery hold; reopens exhausted"
        );
        return Next::Fail(reopens_exhausted(max_reopens));
    }
    rt.metrics.stream_recovery("reopen", "reopened");
    tracing::debug!(
        reopen = rc.reopens,
        message = %failure.message,
        "stream truncated inside the recovery hold; reopening"
    );
    next
}

/// Hands the request's reopen count to a committed stream (for its access line).
pub fn note_reopens(body: &mut RoutedBody, rc: &RequestCtx) {
    if let RoutedBody::Stream(stream) = body {
        stream.reopens = rc.reopens;
    }
}

/// 502 `STREAM_RECOVERY_EXHAUSTED`: every reopen the settings allow was truncated too.
fn reopens_exhausted(max_reopens: u32) -> GatewayError {
    GatewayError::new(
        actix_web::http::StatusCode::BAD_GATEWAY,
        "server_error",
        "STREAM_RECOVERY_EXHAUSTED",
        format!(
            "The upstream stream was truncated again after {max_reopens} reopen(s); no answer \
             was delivered."
        ),
    )
}

/// Whether a combo's per-target timeout (`timeout_ms`) is what ended the attempt: a timeout
/// at or after it. The reference answers it with a synthetic 524.
pub fn target_timed_out(
    failure: &AttemptFailure,
    target_timeout_ms: Millis,
    dispatched: Millis,
    rt: &RoutingTable,
) -> bool {
    target_timeout_ms > 0 && ended_by(failure, dispatched + target_timeout_ms, rt.clock.now())
}

/// Whether a failure is the deadline passing at or after `at` (a timeout, not an answer).
fn ended_by(failure: &AttemptFailure, at: Millis, now: Millis) -> bool {
    failure.status.is_none()
        && failure.transport == Some(switchyard_shared::classify::TransportFailure::Timeout)
        && now >= at
}

/// 504 `RATE_LIMIT_EXECUTION_TIMEOUT`: the queue's execution budget ended the attempt.
fn execution_timeout(budget_ms: Millis) -> GatewayError {
    let e = switchyard_shared::admission::AdmissionError::ExecutionTimeout {
        elapsed_ms: budget_ms,
        budget_ms,
    };
    GatewayError::new(
        actix_web::http::StatusCode::GATEWAY_TIMEOUT,
        e.error_type(),
        e.code(),
        e.to_string(),
    )
}

/// The provider's attempt ceiling, from dispatch.
fn ceiling(provider: &ProviderHandle, now: Millis) -> Option<Millis> {
    let ms = provider.config.timeouts.attempt_deadline_ms;
    (ms > 0).then(|| now + ms)
}

/// For a queued connection, the execution budget from dispatch: its absolute deadline and
/// its length.
fn execution_deadline(
    rt: &RoutingTable,
    provider: &ProviderHandle,
    conn: &ConnHandle,
    now: Millis,
) -> Option<(Millis, Millis)> {
    queue_enabled(rt, provider, conn).then(|| {
        let budget = switchyard_shared::admission::execution_budget_ms(
            conn.queue.settings().execution_max_wait_ms,
            provider.config.timeouts.headers_ms,
        );
        (now + budget, budget)
    })
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
