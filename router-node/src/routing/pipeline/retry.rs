//! Step 5b, the same-target retry of a combo (`combos.*.config.max_retries` and
//! `retry_delay_ms`).
//!
//! Why: a combo target whose connections all failed on a transient error (408, 429, 5xx, a
//! transport failure) may serve again a moment later; the reference gives each target up to
//! `max_retries + 1` rounds, `retry_delay_ms` apart, before the combo moves on. In Switchyard a
//! round is one pass over the target's connections (each failure already moves to the next
//! connection), so a retry is another round after the delay, over the connections the
//! failures did not put out of reach for longer than the delay.
//!
//! The reference's exceptions hold: no retry after a request-scoped failure (the same input
//! fails again, a 429 for a request larger than the whole rate limit included), after a
//! failure that locked the model or made the connection terminal, or when every failed
//! connection is cooling for longer than the delay (an exhausted quota). The delay is spent
//! inside the request's own budget: a retry whose delay would reach the request's deadline
//! (`combo_timeout_ms`) is not made, so the combo moves on instead of timing out asleep.
//!
//! [`decide`] is pure; the driver ([`super::run_target`]) sleeps and re-admits.

use switchyard_shared::Millis;
use switchyard_shared::admission::{ConnectionBlock, CoolingScope};

/// What one failed attempt of the current round tells the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedAttempt {
    /// The connection's index.
    pub conn: usize,
    /// The (restated) upstream status; `None` for a transport failure.
    pub status: Option<u16>,
    /// The failure was the request's own fault.
    pub request_scoped: bool,
    /// What the failure puts on its connection, `None` when nothing.
    pub block: Option<ConnectionBlock>,
}

/// A target's retry state while its connections are tried.
#[derive(Debug, Default)]
pub struct TargetRetries {
    /// Retries already made on this target.
    pub used: u32,
    /// The failed attempts of the current round, in order.
    pub round: Vec<FailedAttempt>,
}

/// The combo's retry settings and the request's deadline, as the decision reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Extra rounds per target (0 = none; direct requests have none).
    pub max_retries: u32,
    pub delay_ms: Millis,
    /// Time left until the request's deadline, `None` when it has none.
    pub budget_left_ms: Option<Millis>,
}

/// A retry to make: sleep `delay_ms`, then try these connections again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub delay_ms: Millis,
    pub connections: Vec<usize>,
}

/// Statuses worth another round on the same target (the reference's 408/429/5xx).
fn transient(status: Option<u16>) -> bool {
    match status {
        // A transport failure: nothing answered; the reference reads it as a 502.
        None => true,
        Some(s) => s == 408 || s == 429 || (500..=599).contains(&s),
    }
}

/// Whether a connection is usable again once `delay_ms` has passed.
fn free_after(block: Option<ConnectionBlock>, delay_ms: Millis) -> bool {
    match block {
        None => true,
        Some(ConnectionBlock::Cooling {
            remaining_ms,
            scope: CoolingScope::Connection,
            ..
        }) => remaining_ms <= delay_ms,
        // A model lockout or a terminal state: not for this request.
        Some(_) => false,
    }
}

/// Whether the target gets another round after its round `state.round` failed.
pub fn decide(state: &TargetRetries, policy: &RetryPolicy) -> Option<Retry> {
    if state.used >= policy.max_retries {
        return None;
    }
    let last = state.round.last()?;
    let model_locked = matches!(
        last.block,
        Some(ConnectionBlock::Cooling {
            scope: CoolingScope::Model,
            ..
        }) | Some(ConnectionBlock::Terminal(_))
    );
    if last.request_scoped || model_locked || !transient(last.status) {
        return None;
    }
    if policy
        .budget_left_ms
        .is_some_and(|left| policy.delay_ms >= left)
    {
        return None;
    }
    let connections: Vec<usize> = state
        .round
        .iter()
        .filter(|a| !a.request_scoped && free_after(a.block, policy.delay_ms))
        .map(|a| a.conn)
        .collect();
    (!connections.is_empty()).then_some(Retry {
        delay_ms: policy.delay_ms,
        connections,
    })
}

#[cfg(test)]
mod tests {
    use switchyard_shared::outcome::{FailureReason, TerminalStatus};

    use super::*;

    fn failed(conn: usize, status: Option<u16>, block: Option<ConnectionBlock>) -> FailedAttempt {
        FailedAttempt {
            conn,
            status,
            request_scoped: false,
            block,
        }
    }

    fn cooling(remaining_ms: Millis, scope: CoolingScope) -> Option<ConnectionBlock> {
        Some(ConnectionBlock::Cooling {
            remaining_ms,
            scope,
            reason: FailureReason::ServerError,
        })
    }

    fn policy(max_retries: u32) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            delay_ms: 2_000,
            budget_left_ms: None,
        }
    }

    fn round(attempts: Vec<FailedAttempt>) -> TargetRetries {
        TargetRetries {
            used: 0,
            round: attempts,
        }
    }

    #[test]
    fn transient_failures_retry_after_the_delay_up_to_max_retries() {
        for status in [Some(408), Some(429), Some(500), Some(503), Some(529), None] {
            let state = round(vec![failed(3, status, None)]);
            assert_eq!(
                decide(&state, &policy(1)),
                Some(Retry {
                    delay_ms: 2_000,
                    connections: vec![3]
                }),
                "{status:?}"
            );
            assert_eq!(decide(&state, &policy(0)), None, "max_retries 0");
            let spent = TargetRetries {
                used: 1,
                ..round(vec![failed(3, status, None)])
            };
            assert_eq!(decide(&spent, &policy(1)), None, "retries spent");
        }
    }

    #[test]
    fn other_failures_move_on() {
        for status in [400, 401, 403, 404, 409, 422] {
            let state = round(vec![failed(0, Some(status), None)]);
            assert_eq!(decide(&state, &policy(3)), None, "{status}");
        }
        // A request-scoped 429 (a request larger than the whole rate limit) fails again.
        let state = round(vec![FailedAttempt {
            request_scoped: true,
            ..failed(0, Some(429), None)
        }]);
        assert_eq!(decide(&state, &policy(3)), None);
        // The model just got locked, or the connection is out for good.
        let locked = round(vec![failed(
            0,
            Some(429),
            cooling(500, CoolingScope::Model),
        )]);
        assert_eq!(decide(&locked, &policy(3)), None);
        let terminal = round(vec![failed(
            0,
            Some(500),
            Some(ConnectionBlock::Terminal(TerminalStatus::Banned)),
        )]);
        assert_eq!(decide(&terminal, &policy(3)), None);
        // No failure recorded: nothing to retry.
        assert_eq!(decide(&TargetRetries::default(), &policy(3)), None);
    }

    #[test]
    fn only_connections_free_by_the_end_of_the_delay_are_retried() {
        let state = round(vec![
            failed(0, Some(503), cooling(2_000, CoolingScope::Connection)),
            failed(1, Some(429), cooling(3_600_000, CoolingScope::Connection)),
            failed(2, Some(502), None),
        ]);
        assert_eq!(
            decide(&state, &policy(1)).map(|r| r.connections),
            Some(vec![0, 2])
        );
        // Every connection cooling past the delay (an exhausted quota): move on.
        let state = round(vec![
            failed(0, Some(429), cooling(60_000, CoolingScope::Connection)),
            failed(1, Some(503), cooling(2_001, CoolingScope::Connection)),
        ]);
        assert_eq!(decide(&state, &policy(1)), None);
    }

    #[test]
    fn the_delay_never_reaches_the_deadline() {
        let state = round(vec![failed(0, Some(503), None)]);
        let within = RetryPolicy {
            budget_left_ms: Some(2_001),
            ..policy(1)
        };
        assert!(decide(&state, &within).is_some());
        for left in [2_000, 1_000, 0] {
            let short = RetryPolicy {
                budget_left_ms: Some(left),
                ..policy(1)
            };
            assert_eq!(decide(&state, &short), None, "{left} ms left");
        }
    }
}
