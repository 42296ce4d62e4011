//! What an actor hands to the cluster writer: one local state change to write and broadcast,
//! through the narrow [`StatePublisher`] the actors are given.
//!
//! Why a type of its own: actors are synchronous and never wait on Redis, so they describe
//! the change (in relative milliseconds, which mean the same on every node) and `try_send` it
//! to the writer task. Remote changes are never turned into these, which is what keeps a
//! node from echoing its peers' events back to Redis.

use std::sync::Arc;

use switchyard_shared::Millis;
use switchyard_shared::breaker::BreakerProfile;
use switchyard_shared::lockout::{LockReason, LockTarget};
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::BreakerParams;

/// Where actors hand their local changes (in redis mode: the cluster writer). Actors know
/// only this trait, so the actor layer never depends on how the cluster shares state.
pub trait StatePublisher: Send + Sync + std::fmt::Debug {
    /// Queues a local change for writing and broadcast; never waits.
    fn publish(&self, change: LocalChange);
    /// The cluster probe generation bound to local probe `local` of `provider`, removing the
    /// binding (so a probe's outcome is fenced by the cluster's generation).
    fn take_probe(&self, provider: &Arc<str>, local: u64) -> Option<u64>;
    /// Local probe `local` of `provider` was handed back without an outcome (it never reached
    /// upstream): hand back its cluster probe lease too, so another node may probe now.
    fn release_probe(&self, provider: &Arc<str>, local: u64) {
        let _ = self.take_probe(provider, local);
    }
}

/// The shared breaker's parameters for a local profile.
pub fn breaker_params(profile: &BreakerProfile) -> BreakerParams {
    BreakerParams::from_profile(profile)
}

/// A change made by this node's actors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalChange {
    /// A failure cooled the connection (extend-only in Redis, herd-guarded level).
    Cooldown {
        conn: Arc<str>,
        duration_ms: Millis,
        level: u32,
        reason: FailureReason,
        last_error: String,
    },
    /// A failure made the connection terminal.
    Terminal {
        conn: Arc<str>,
        status: TerminalStatus,
    },
    /// A success cleared or decayed the connection's state.
    /// `started_epoch_ms`: when the successful attempt was dispatched (wall clock).
    Success {
        conn: Arc<str>,
        started_epoch_ms: u64,
    },
    /// Operator clear of the cooldown and every lockout (never a terminal state).
    Cleared { conn: Arc<str> },
    /// Operator reinstatement of a terminal connection.
    Reinstated { conn: Arc<str> },
    Lockout {
        provider: Arc<str>,
        conn: Arc<str>,
        model: String,
        remaining_ms: Millis,
        failure_count: u32,
        reason: FailureReason,
    },
    LockoutDecay {
        provider: Arc<str>,
        conn: Arc<str>,
        model: String,
    },
    /// Operator clear of one model's lockout, or all of them (`model: None`).
    LockoutCleared {
        provider: Arc<str>,
        conn: Arc<str>,
        model: Option<String>,
    },
    /// A plain (non-probe) breaker failure, counted in the cluster-wide window.
    BreakerFailure {
        provider: Arc<str>,
        params: BreakerParams,
    },
    /// A plain success while this node's breaker view was not clean.
    BreakerSuccess { provider: Arc<str> },
    /// The cluster probe's outcome, fenced by its cluster generation.
    ProbeResult {
        provider: Arc<str>,
        generation: u64,
        success: bool,
        params: BreakerParams,
    },
    /// Operator reset of the breaker.
    BreakerReset { provider: Arc<str> },
    /// A cluster probe lease whose probe never reached upstream, handed back early.
    ProbeRelease { provider: Arc<str>, generation: u64 },
}

impl LocalChange {
    /// A stable label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cooldown { .. } => "cooldown_set",
            Self::Terminal { .. } => "terminal_set",
            Self::Success { .. } => "cooldown_success",
            Self::Cleared { .. } => "cooldown_cleared",
            Self::Reinstated { .. } => "terminal_reinstated",
            Self::Lockout { .. } => "lockout_set",
            Self::LockoutDecay { .. } => "lockout_decay",
            Self::LockoutCleared { .. } => "lockout_cleared",
            Self::BreakerFailure { .. } => "breaker_failure",
            Self::BreakerSuccess { .. } => "breaker_success",
            Self::ProbeResult { .. } => "breaker_probe_result",
            Self::BreakerReset { .. } => "breaker_reset",
            Self::ProbeRelease { .. } => "breaker_probe_release",
        }
    }
}

/// A change with the origin's wall clock at observation (epoch ms), which the event carries so
/// receivers can measure the whole propagation delay, Redis write included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    pub change: LocalChange,
    pub wall_ms: u64,
}

/// Prefix that marks a quota-family lock in the wire's `model` field (the wire carries one
/// string; a family must not collide with a model of the same name).
const FAMILY_PREFIX: &str = "family:";

/// The wire/store name of a lock target.
pub fn lock_target_name(target: &LockTarget) -> String {
    match target {
        LockTarget::Model(m) => m.clone(),
        LockTarget::Family(f) => format!("{FAMILY_PREFIX}{f}"),
    }
}

/// The lock target a wire/store name stands for.
pub fn lock_target_of(name: &str) -> LockTarget {
    match name.strip_prefix(FAMILY_PREFIX) {
        Some(family) => LockTarget::Family(family.to_owned()),
        None => LockTarget::Model(name.to_owned()),
    }
}

/// The wire reason of a lock (the wire speaks [`FailureReason`]).
pub fn failure_reason_of(reason: LockReason) -> FailureReason {
    match reason {
        LockReason::RateLimited => FailureReason::RateLimitExceeded,
        LockReason::QuotaExhausted => FailureReason::QuotaExhausted,
        LockReason::ServerError => FailureReason::ServerError,
        LockReason::ModelCapacity => FailureReason::ModelCapacity,
        LockReason::Forbidden => FailureReason::AuthError,
        LockReason::NotFound | LockReason::QualityFailure | LockReason::Unknown => {
            FailureReason::Unknown
        }
    }
}

/// The lock reason a wire reason stands for (the inverse of [`failure_reason_of`] where one
/// exists).
pub fn lock_reason_of(reason: FailureReason) -> LockReason {
    match reason {
        FailureReason::RateLimitExceeded => LockReason::RateLimited,
        FailureReason::QuotaExhausted => LockReason::QuotaExhausted,
        FailureReason::ServerError => LockReason::ServerError,
        FailureReason::ModelCapacity => LockReason::ModelCapacity,
        FailureReason::AuthError => LockReason::Forbidden,
        FailureReason::Unknown => LockReason::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_targets_round_trip_without_collisions() {
        for target in [
            LockTarget::Model("gpt-4o".into()),
            LockTarget::Family("gpt-4o".into()),
        ] {
            assert_eq!(lock_target_of(&lock_target_name(&target)), target);
        }
        assert_ne!(
            lock_target_name(&LockTarget::Model("x".into())),
            lock_target_name(&LockTarget::Family("x".into()))
        );
    }

    #[test]
    fn lock_reasons_survive_the_wire() {
        for reason in [
            LockReason::RateLimited,
            LockReason::QuotaExhausted,
            LockReason::ServerError,
            LockReason::ModelCapacity,
            LockReason::Forbidden,
        ] {
            assert_eq!(lock_reason_of(failure_reason_of(reason)), reason);
        }
    }
}
