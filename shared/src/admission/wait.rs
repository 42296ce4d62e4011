//! Combo cooldown wait: after a full pass over a combo's targets found nothing to dispatch,
//! either wait out a short transient lockout and re-run the dispatch, or answer at once.
//!
//! Why: a combo whose only obstacle is a rate-limit window of a few seconds should not hand the
//! client a 429 or a 503 it could have avoided; but waiting on a lock that will not lapse soon
//! (quota exhausted until midnight, a bad key, a missing model) only burns the client's time.
//!
//! Rules (as the reference's `comboCooldownRetry`):
//! - the decisive target is the locked one with the **smallest** positive remaining lock;
//! - the wait is `max(remaining, hint) + 50 ms` so the lock has surely lapsed on re-check;
//! - waiting needs: enabled, a transient reason (an allow-list, so unknown reasons fail closed),
//!   `wait <= max_wait_ms`, `attempts < max_attempts`, `wait <= budget_ms - elapsed` (both
//!   bounds inclusive);
//! - otherwise a transient decisive lock answers `429 rate_limit_error` with `retry_after` and
//!   `reset_at`, and anything else answers `503 ALL_TARGETS_SKIPPED` with the skipped targets
//!   grouped by reason and `next_retry_at`.
//!
//! Decision: `circuit_open` is not a lockout reason here (later reference versions wait on it);
//! an open breaker is reported through [`super::pool`] and the breaker's own `Retry-After`.

use serde::{Deserialize, Serialize};

use super::{MAX_WAITS_PER_REQUEST, WAIT_BUDGET_MAX_MS};
use crate::Millis;
use crate::outcome::FailureReason;

/// Added to every wait so the lock has lapsed when the dispatch re-checks it.
pub const COMBO_WAIT_MARGIN_MS: Millis = 50;

/// Why a combo target is locked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockReason {
    RateLimit,
    RateLimited,
    Transient,
    Overloaded,
    ServerError,
    QuotaExhausted,
    AuthError,
    NotFound,
    NotFoundLocal,
    /// Any other reason string; never waited on.
    Other(String),
}

impl LockReason {
    /// Parses the reference's reason strings; unknown strings are kept as [`Self::Other`].
    pub fn parse(s: &str) -> Self {
        match s {
            "rate_limit" => Self::RateLimit,
            "rate_limited" => Self::RateLimited,
            "transient" => Self::Transient,
            "overloaded" => Self::Overloaded,
            "server_error" => Self::ServerError,
            "quota_exhausted" => Self::QuotaExhausted,
            "auth_error" => Self::AuthError,
            "not_found" => Self::NotFound,
            "not_found_local" => Self::NotFoundLocal,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The snake_case name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::RateLimit => "rate_limit",
            Self::RateLimited => "rate_limited",
            Self::Transient => "transient",
            Self::Overloaded => "overloaded",
            Self::ServerError => "server_error",
            Self::QuotaExhausted => "quota_exhausted",
            Self::AuthError => "auth_error",
            Self::NotFound => "not_found",
            Self::NotFoundLocal => "not_found_local",
            Self::Other(s) => s,
        }
    }

    /// Short transient reasons, the only ones worth waiting for.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimit
                | Self::RateLimited
                | Self::Transient
                | Self::Overloaded
                | Self::ServerError
        )
    }
}

impl From<FailureReason> for LockReason {
    /// Classification reasons onto lock reasons; `unknown` stays unknown (never waited on).
    fn from(r: FailureReason) -> Self {
        match r {
            FailureReason::RateLimitExceeded => Self::RateLimited,
            FailureReason::ModelCapacity => Self::Overloaded,
            FailureReason::ServerError => Self::ServerError,
            FailureReason::QuotaExhausted => Self::QuotaExhausted,
            FailureReason::AuthError => Self::AuthError,
            FailureReason::Unknown => Self::Other("unknown".to_owned()),
        }
    }
}

/// A combo target that was skipped because it is locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedTarget {
    /// Target id, e.g. `provider/model` or `provider/connection/model`.
    pub target: String,
    pub reason: LockReason,
    /// Time until the lock lapses; `0` = already lapsed (ignored for the wait).
    pub remaining_ms: Millis,
    /// The upstream's retry hint for this target; `0` = none.
    pub hint_ms: Millis,
}

impl LockedTarget {
    fn obstacle_ms(&self) -> Millis {
        self.remaining_ms.max(self.hint_ms)
    }
}

/// `[resilience.combo_cooldown_wait]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComboWaitSettings {
    pub enabled: bool,
    /// Longest single wait (inclusive).
    pub max_wait_ms: Millis,
    /// Waits allowed per request.
    pub max_attempts: u32,
    /// Total time a request may spend in these waits (inclusive).
    pub budget_ms: Millis,
}

impl Default for ComboWaitSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            max_wait_ms: 90_000,
            max_attempts: 5,
            budget_ms: 300_000,
        }
    }
}

impl ComboWaitSettings {
    /// The reference's ranges: wait 0–300 000, attempts 0–10, `max_wait <= budget <= 300 000`.
    pub fn clamped(self) -> Self {
        let max_wait_ms = self.max_wait_ms.min(WAIT_BUDGET_MAX_MS);
        Self {
            enabled: self.enabled,
            max_wait_ms,
            max_attempts: self.max_attempts.min(MAX_WAITS_PER_REQUEST),
            budget_ms: self.budget_ms.clamp(max_wait_ms, WAIT_BUDGET_MAX_MS),
        }
    }
}

/// Targets skipped for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipGroup {
    pub reason: LockReason,
    pub targets: Vec<String>,
}

/// The outcome of [`decide_combo_wait`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComboWaitDecision {
    /// Sleep `ms` (keep-alives for streaming clients), then re-run the whole dispatch.
    Wait {
        ms: Millis,
        target: String,
        reason: LockReason,
    },
    /// 429 `rate_limit_error`: the obstacle is a transient lockout, but waiting is not allowed.
    RateLimited {
        retry_after_ms: Millis,
        reset_at: Millis,
    },
    /// 503 `ALL_TARGETS_SKIPPED`, grouped by reason in first-seen order.
    AllTargetsSkipped {
        skipped_targets: Vec<SkipGroup>,
        next_retry_at: Option<Millis>,
    },
}

impl ComboWaitDecision {
    /// HTTP status of the answer; `None` for [`ComboWaitDecision::Wait`], which is not one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Wait { .. } => None,
            Self::RateLimited { .. } => Some(429),
            Self::AllTargetsSkipped { .. } => Some(503),
        }
    }

    /// `error.code` of the answer.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::Wait { .. } => None,
            Self::RateLimited { .. } => Some("rate_limit_exceeded"),
            Self::AllTargetsSkipped { .. } => Some("ALL_TARGETS_SKIPPED"),
        }
    }

    /// `error.type` of the answer.
    pub fn error_type(&self) -> Option<&'static str> {
        match self {
            Self::Wait { .. } => None,
            Self::RateLimited { .. } => Some("rate_limit_error"),
            Self::AllTargetsSkipped { .. } => Some("service_unavailable"),
        }
    }
}

/// The gate of one wait (the reference's `shouldWaitForComboCooldown`).
pub fn combo_wait_allowed(
    reason: &LockReason,
    wait_ms: Millis,
    attempts: u32,
    budget_left_ms: Millis,
    settings: &ComboWaitSettings,
) -> bool {
    settings.enabled
        && reason.is_transient()
        && wait_ms > 0
        && wait_ms <= settings.max_wait_ms
        && attempts < settings.max_attempts
        && wait_ms <= budget_left_ms
}

/// Decides after a failed pass. `attempts` = waits already made for this request,
/// `elapsed_ms` = time already spent waiting, `now` only dates `reset_at` / `next_retry_at`.
pub fn decide_combo_wait(
    targets: &[LockedTarget],
    attempts: u32,
    elapsed_ms: Millis,
    now: Millis,
    settings: &ComboWaitSettings,
) -> ComboWaitDecision {
    let soonest = targets
        .iter()
        .filter(|t| t.remaining_ms > 0)
        .min_by_key(|t| t.remaining_ms);
    if let Some(t) = soonest {
        let budget_left = settings.budget_ms.saturating_sub(elapsed_ms);
        let wait = t.obstacle_ms().saturating_add(COMBO_WAIT_MARGIN_MS);
        if combo_wait_allowed(&t.reason, wait, attempts, budget_left, settings) {
            return ComboWaitDecision::Wait {
                ms: wait,
                target: t.target.clone(),
                reason: t.reason.clone(),
            };
        }
        if t.reason.is_transient() {
            let retry_after_ms = t.obstacle_ms();
            return ComboWaitDecision::RateLimited {
                retry_after_ms,
                reset_at: now.saturating_add(retry_after_ms),
            };
        }
    }
    let mut groups: Vec<SkipGroup> = Vec::new();
    for t in targets {
        match groups.iter_mut().find(|g| g.reason == t.reason) {
            Some(g) => g.targets.push(t.target.clone()),
            None => groups.push(SkipGroup {
                reason: t.reason.clone(),
                targets: vec![t.target.clone()],
            }),
        }
    }
    let next_retry_at = targets
        .iter()
        .filter(|t| t.obstacle_ms() > 0)
        .map(|t| now.saturating_add(t.obstacle_ms()))
        .min();
    ComboWaitDecision::AllTargetsSkipped {
        skipped_targets: groups,
        next_retry_at,
    }
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;
