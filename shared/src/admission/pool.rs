//! A weighted pool with nothing to dispatch: "cooling down, come back later" (503) or "nothing
//! here can run" (404)?
//!
//! Why: answering 404 for a pool that is configured and merely waiting on resilience timers
//! makes clients (Claude Code among them) conclude the model does not exist. So:
//! - if **any** excluded target is held by a resilience timer (a model lockout, an open
//!   breaker, a provider cooldown, or an availability probe that found every connection
//!   cooling), the answer is `503 all_targets_cooling_down` with `Retry-After` = the earliest
//!   lapse, listing every excluded target with its reason, `unavailable` ones included;
//! - only when no timer is involved (or the pool is empty) is it `404 no_executable_targets`.

use serde::{Deserialize, Serialize};

use super::Rejection;
use crate::Millis;

/// Why a target was excluded before dispatch (the `diagnostics.excluded[].reason` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    ModelLockout,
    CircuitOpen,
    ProviderCooldown,
    /// The availability probe found no usable connection.
    Unavailable,
}

impl ExclusionReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelLockout => "model_lockout",
            Self::CircuitOpen => "circuit_open",
            Self::ProviderCooldown => "provider_cooldown",
            Self::Unavailable => "unavailable",
        }
    }

    /// Reasons that are resilience timers by nature. `unavailable` is one only when it comes
    /// with a remaining time (every connection cooling).
    pub fn is_timer(self) -> bool {
        !matches!(self, Self::Unavailable)
    }
}

/// One excluded target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludedTarget {
    pub target: String,
    pub reason: ExclusionReason,
    /// Time until the timer lapses; `0` = unknown or no timer.
    pub remaining_ms: Millis,
}

impl ExcludedTarget {
    fn held_by_timer(&self) -> bool {
        self.reason.is_timer() || self.remaining_ms > 0
    }
}

/// The answer for an emptied pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmptyPoolOutcome {
    /// 503 `all_targets_cooling_down`; `retry_after_ms` is the earliest known lapse (`0` when
    /// every timer has just lapsed: retry at once, `Retry-After: 1`).
    AllTargetsCoolingDown {
        retry_after_ms: Millis,
        excluded: Vec<ExcludedTarget>,
    },
    /// 404 `no_executable_targets`.
    NoExecutableTargets { excluded: Vec<ExcludedTarget> },
}

impl Rejection for EmptyPoolOutcome {
    fn status(&self) -> u16 {
        match self {
            Self::AllTargetsCoolingDown { .. } => 503,
            Self::NoExecutableTargets { .. } => 404,
        }
    }
    fn code(&self) -> &'static str {
        match self {
            Self::AllTargetsCoolingDown { .. } => "all_targets_cooling_down",
            Self::NoExecutableTargets { .. } => "no_executable_targets",
        }
    }
    fn error_type(&self) -> &'static str {
        match self {
            Self::AllTargetsCoolingDown { .. } => "service_unavailable",
            Self::NoExecutableTargets { .. } => "invalid_request_error",
        }
    }
}

/// Classifies a pool in which every target was excluded before dispatch.
pub fn classify_empty_pool(excluded: &[ExcludedTarget]) -> EmptyPoolOutcome {
    if !excluded.iter().any(ExcludedTarget::held_by_timer) {
        return EmptyPoolOutcome::NoExecutableTargets {
            excluded: excluded.to_vec(),
        };
    }
    let retry_after_ms = excluded
        .iter()
        .map(|e| e.remaining_ms)
        .filter(|&ms| ms > 0)
        .min()
        .unwrap_or(0);
    EmptyPoolOutcome::AllTargetsCoolingDown {
        retry_after_ms,
        excluded: excluded.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExclusionReason::{CircuitOpen, ModelLockout, ProviderCooldown, Unavailable};

    fn x(target: &str, reason: ExclusionReason, remaining_ms: Millis) -> ExcludedTarget {
        ExcludedTarget {
            target: target.to_owned(),
            reason,
            remaining_ms,
        }
    }

    /// (name, excluded targets, Some(retry_after) = 503, None = 404)
    type PoolCase = (&'static str, Vec<ExcludedTarget>, Option<Millis>);

    #[rustfmt::skip]
    #[test]
    fn empty_pool_table() {
        let cases: Vec<PoolCase> = vec![
            ("every target model-locked",
                vec![x("openai/a", ModelLockout, 60_000), x("claude/b", ModelLockout, 120_000)], Some(60_000)),
            ("lockout + open breaker",
                vec![x("openai/a", ModelLockout, 60_000), x("claude/b", CircuitOpen, 30_000)], Some(30_000)),
            ("provider cooldown", vec![x("glm/x", ProviderCooldown, 5_000)], Some(5_000)),
            ("availability probe only",
                vec![x("openai/a", Unavailable, 0), x("claude/b", Unavailable, 0)], None),
            ("cooling + unavailable is still 503",
                vec![x("openai/a", ModelLockout, 60_000), x("claude/b", Unavailable, 0)], Some(60_000)),
            ("probe found every connection cooling", vec![x("openai/a", Unavailable, 5_000)], Some(5_000)),
            ("connection cooldown mixed with missing credentials",
                vec![x("openai/a", Unavailable, 1_200), x("claude/b", Unavailable, 0)], Some(1_200)),
            ("timer just lapsed", vec![x("openai/a", CircuitOpen, 0)], Some(0)),
            ("empty pool", vec![], None),
        ];
        for (name, excluded, want) in cases {
            let got = classify_empty_pool(&excluded);
            match (&got, want) {
                (EmptyPoolOutcome::AllTargetsCoolingDown { retry_after_ms, excluded: e }, Some(ms)) => {
                    assert_eq!(*retry_after_ms, ms, "{name}");
                    assert_eq!(e, &excluded, "{name}: every excluded target is listed");
                }
                (EmptyPoolOutcome::NoExecutableTargets { excluded: e }, None) => {
                    assert_eq!(e, &excluded, "{name}")
                }
                _ => panic!("{name}: got {got:?}"),
            }
        }
    }

    #[test]
    fn shapes() {
        let c = classify_empty_pool(&[x("a", ModelLockout, 1)]);
        assert_eq!(
            (c.status(), c.code(), c.error_type()),
            (503, "all_targets_cooling_down", "service_unavailable")
        );
        let n = classify_empty_pool(&[]);
        assert_eq!(
            (n.status(), n.code(), n.error_type()),
            (404, "no_executable_targets", "invalid_request_error")
        );
        let names =
            [ModelLockout, CircuitOpen, ProviderCooldown, Unavailable].map(ExclusionReason::as_str);
        assert_eq!(
            names,
            [
                "model_lockout",
                "circuit_open",
                "provider_cooldown",
                "unavailable"
            ]
        );
    }
}
