//! The breaker's vocabulary: states, history entries, effects, admissions and read views.

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::FailureKind;

/// The four breaker states, spelled as in the reference's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BreakerState {
    Closed,
    Degraded,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// The name used in JSON and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "CLOSED",
            Self::Degraded => "DEGRADED",
            Self::Open => "OPEN",
            Self::HalfOpen => "HALF_OPEN",
        }
    }
}

/// Why a history entry was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionReason {
    /// The failure threshold was reached.
    Threshold,
    /// The degradation threshold was reached.
    Degraded,
    /// A success brought a DEGRADED breaker back under the band.
    Recovery,
    /// The open window elapsed; probes may go through.
    TimeoutElapsed,
    ProbeSuccess,
    ProbeFailed,
    /// A probe lease lapsed without an outcome (HALF_OPEN stays HALF_OPEN).
    ProbeExpired,
    ManualReset,
    /// The cluster's shared breaker changed (a peer's transition, or a resync).
    Cluster,
    /// A DEGRADED breaker saw no failure for its quiet window (the longest OPEN hold).
    QuietDecay,
    /// An operator's connection test succeeded on a DEGRADED breaker.
    ConnectionTest,
}

impl TransitionReason {
    /// The kebab-case name used in JSON and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Threshold => "threshold",
            Self::Degraded => "degraded",
            Self::Recovery => "recovery",
            Self::TimeoutElapsed => "timeout-elapsed",
            Self::ProbeSuccess => "probe-success",
            Self::ProbeFailed => "probe-failed",
            Self::ProbeExpired => "probe-expired",
            Self::ManualReset => "manual-reset",
            Self::Cluster => "cluster",
            Self::QuietDecay => "quiet-decay",
            Self::ConnectionTest => "connection-test",
        }
    }
}

/// One history entry. `failure_count` is the count at the moment of the transition, before a
/// close or reset zeroes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub from: BreakerState,
    pub to: BreakerState,
    #[serde(rename = "timestamp")]
    pub at: Millis,
    pub failure_count: u32,
    pub reason: TransitionReason,
}

/// What the owning actor must do after a call. Every history entry is emitted: all of them
/// change the state except `probe-expired` and a manual reset of a breaker that was already
/// CLOSED, where `from == to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BreakerEffect {
    Transition(Transition),
}

/// Identifies one probe lease; outcomes must carry it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProbeGeneration(pub u64);

/// The breaker's answer to "may this attempt go to the provider?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Admission {
    /// CLOSED or DEGRADED: report the outcome without a generation.
    Allowed,
    /// HALF_OPEN: this attempt holds a probe lease; report its outcome with the generation.
    Probe { generation: ProbeGeneration },
    /// OPEN, or HALF_OPEN with every probe slot taken.
    Rejected { retry_after_ms: Millis },
}

impl Admission {
    pub fn is_admitted(&self) -> bool {
        !matches!(self, Self::Rejected { .. })
    }

    /// The generation to report the outcome with (`None` for `Allowed`).
    pub fn generation(&self) -> Option<ProbeGeneration> {
        match self {
            Self::Probe { generation } => Some(*generation),
            _ => None,
        }
    }
}

/// A cheap, copyable read of the breaker for the hot path (no lease, no mutation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BreakerView {
    Closed,
    Degraded,
    Open { until: Millis },
    HalfOpen,
}

impl BreakerView {
    pub fn state(self) -> BreakerState {
        match self {
            Self::Closed => BreakerState::Closed,
            Self::Degraded => BreakerState::Degraded,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen => BreakerState::HalfOpen,
        }
    }
}

/// The JSON status object of `GET /api/monitoring/health` (the reference's `getStatus()`
/// without `name`, which the caller adds, and without the per-kind counters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakerStatus {
    pub state: BreakerState,
    pub failure_count: u32,
    pub last_failure_time: Option<Millis>,
    pub retry_after_ms: Millis,
    pub last_failure_kind: Option<FailureKind>,
    pub open_cycle_count: u32,
    pub degradation_threshold: u32,
    pub effective_reset_timeout: Millis,
    pub opened_at: Option<Millis>,
    pub probes_in_flight: u32,
    pub transition_history: Vec<Transition>,
}
