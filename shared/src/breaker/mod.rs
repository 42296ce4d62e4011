//! Provider circuit breaker (docs/policy.md, `breaker`): one per provider, so a provider that keeps failing is
//! skipped as a whole instead of burning every connection's cooldown.
//!
//! Four states — CLOSED, DEGRADED (warning band, traffic flows), OPEN (skipped) and HALF_OPEN
//! (probes allowed) — with the reference's transitions, thresholds and reset escalation. The
//! machine is pure: every method takes `now` and returns the [`BreakerEffect`]s the owning actor
//! applies (metrics, cluster broadcast). There are no timers: reading the breaker (`admit`,
//! `status`, `retry_after_ms`, `refresh`) turns an expired OPEN into HALF_OPEN.
//!
//! Only [`BreakerOutcome::Failure`] and [`BreakerOutcome::Success`] move it;
//! [`BreakerOutcome::Ignore`] (429, 401/403, request-scoped failures, client aborts, Switchyard's
//! own overload rejections) leaves the whole breaker untouched.
//!
//! Where Switchyard deliberately differs from the reference:
//! - **Exactly once.** Each attempt's outcome is reported once, by the caller; nothing here wraps
//!   the dispatch (the reference counted a resolved 5xx as a success, then as a failure).
//! - **Probe leases.** [`Breaker::admit`] answers `Allowed`, `Probe { generation }` or
//!   `Rejected { retry_after_ms }`. OPEN never admits. HALF_OPEN hands out at most
//!   `half_open_requests` leases at once, each expiring at `now + effective reset timeout`; an
//!   expired lease frees its slot (a new probe gets a new generation), and an outcome carrying a
//!   stale or expired generation is ignored. Probe success closes (counters and cycles zeroed);
//!   probe failure reopens with `open_cycle_count + 1`.
//! - **Outcomes without a generation** (admitted while CLOSED/DEGRADED) that arrive while OPEN:
//!   a failure is counted but does not extend the open window (it is anchored at `opened_at`); a
//!   success is ignored — recovery goes through a probe only (the reference closed on it). While
//!   HALF_OPEN they are ignored.
//! - A probe whose outcome is `Ignore` keeps its lease until it expires, because `Ignore` changes
//!   nothing; a caller that knows the probe never reached the upstream hands it back with
//!   [`Breaker::release_probe`].
//! - `retry_after_ms` while HALF_OPEN is 0 when a probe slot is free, else the time until the
//!   earliest lease expires (the reference answered 0).
//! - Not carried over: per-kind thresholds and `cooldownByKind` (they only served 429 trips,
//!   which the spec forbids), the registry and its eviction (the node owns one breaker per
//!   provider).
//!
//! Invariants: the failure count never exceeds the failures reported since the last probe
//! success or manual reset; unexpired probe leases never exceed the budget and exist only while HALF_OPEN; the
//! history keeps the last [`HISTORY_LIMIT`] entries.

mod profile;
mod remote;
#[cfg(test)]
mod tests;
mod types;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::{BreakerOutcome, FailureKind, ProviderCategory};

pub use profile::{
    BreakerProfile, DEFAULT_HALF_OPEN_REQUESTS, MAX_FAILURE_THRESHOLD, MAX_RESET_TIMEOUT_MS,
    MIN_RESET_TIMEOUT_MS,
};
pub use types::{
    Admission, BreakerEffect, BreakerState, BreakerStatus, BreakerView, ProbeGeneration,
    Transition, TransitionReason,
};

/// Transition history entries kept per breaker.
pub const HISTORY_LIMIT: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct ProbeLease {
    generation: ProbeGeneration,
    expires_at: Millis,
}

/// The state proper; leases exist only while HALF_OPEN, the open instant only once opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum Phase {
    Closed,
    Degraded,
    Open {
        opened_at: Millis,
    },
    HalfOpen {
        opened_at: Millis,
        leases: Vec<ProbeLease>,
    },
}

impl Phase {
    fn state(&self) -> BreakerState {
        match self {
            Self::Closed => BreakerState::Closed,
            Self::Degraded => BreakerState::Degraded,
            Self::Open { .. } => BreakerState::Open,
            Self::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

/// One provider's breaker. Serializable so the state store can persist it; after restoring,
/// call [`Breaker::set_profile`] with the configured profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    profile: BreakerProfile,
    phase: Phase,
    failure_count: u32,
    last_failure_kind: Option<FailureKind>,
    last_failure_at: Option<Millis>,
    open_cycle_count: u32,
    last_generation: u64,
    history: VecDeque<Transition>,
    /// The end of an OPEN adopted from the cluster (see `apply_remote`): the shared breaker's
    /// deadline, which this node's `opened_at + timeout` cannot always express (a node clock
    /// that started less than one timeout ago). Cleared by every transition.
    #[serde(default)]
    remote_open_until: Option<Millis>,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new(BreakerProfile::default())
    }
}

impl Breaker {
    /// A CLOSED breaker. The profile is normalised silently (warnings belong to config
    /// loading, see [`BreakerProfile::normalized`]).
    pub fn new(profile: BreakerProfile) -> Self {
        Self {
            profile: profile.normalized().0,
            phase: Phase::Closed,
            failure_count: 0,
            last_failure_kind: None,
            last_failure_at: None,
            open_cycle_count: 0,
            last_generation: 0,
            history: VecDeque::new(),
            remote_open_until: None,
        }
    }

    pub fn for_category(category: ProviderCategory) -> Self {
        Self::new(BreakerProfile::for_category(category))
    }

    pub fn profile(&self) -> &BreakerProfile {
        &self.profile
    }

    /// Replace the profile (config reload). Counters and state are kept; the new thresholds
    /// apply from the next outcome, the new timeouts at once.
    pub fn set_profile(&mut self, profile: BreakerProfile) {
        self.profile = profile.normalized().0;
    }

    /// The stored state, without the lazy OPEN → HALF_OPEN step (see [`Breaker::view`]).
    pub fn state(&self) -> BreakerState {
        self.phase.state()
    }

    pub fn failure_count(&self) -> u32 {
        self.failure_count
    }

    pub fn open_cycle_count(&self) -> u32 {
        self.open_cycle_count
    }

    pub fn last_failure_kind(&self) -> Option<FailureKind> {
        self.last_failure_kind
    }

    pub fn last_failure_at(&self) -> Option<Millis> {
        self.last_failure_at
    }

    /// When the current OPEN (or the OPEN that led to HALF_OPEN) began.
    pub fn opened_at(&self) -> Option<Millis> {
        match self.phase {
            Phase::Open { opened_at } | Phase::HalfOpen { opened_at, .. } => Some(opened_at),
            Phase::Closed | Phase::Degraded => None,
        }
    }

    /// Oldest first, at most [`HISTORY_LIMIT`] entries.
    pub fn history(&self) -> &VecDeque<Transition> {
        &self.history
    }

    /// The OPEN duration for the current open cycle count.
    pub fn effective_reset_timeout_ms(&self) -> Millis {
        self.profile
            .effective_reset_timeout_ms(self.open_cycle_count)
    }

    /// What the state is at `now`, including an elapsed OPEN read as HALF_OPEN. Read-only.
    pub fn view(&self, now: Millis) -> BreakerView {
        match &self.phase {
            Phase::Closed => BreakerView::Closed,
            // The lazy quiet decay, as `refresh` would apply it.
            Phase::Degraded if self.quiet_elapsed(now) => BreakerView::Closed,
            Phase::Degraded => BreakerView::Degraded,
            Phase::Open { opened_at } => {
                let until = self.open_until(*opened_at);
                if now >= until {
                    BreakerView::HalfOpen
                } else {
                    BreakerView::Open { until }
                }
            }
            Phase::HalfOpen { .. } => BreakerView::HalfOpen,
        }
    }

    /// Whether [`Breaker::admit`] would admit at `now`. Read-only.
    pub fn can_execute(&self, now: Millis) -> bool {
        match &self.phase {
            Phase::Closed | Phase::Degraded => true,
            Phase::Open { opened_at } => now >= self.open_until(*opened_at),
            Phase::HalfOpen { leases, .. } => self.free_probe_slots(leases, now) > 0,
        }
    }

    /// Unexpired probe leases at `now`. Read-only.
    pub fn probes_in_flight(&self, now: Millis) -> usize {
        match &self.phase {
            Phase::HalfOpen { leases, .. } => live_leases(leases, now),
            _ => 0,
        }
    }

    /// How long a DEGRADED breaker must go without a failure to return to CLOSED: the
    /// longest OPEN hold, `reset_timeout_ms × max_backoff_multiplier` (the seed's decay; at
    /// least one reset timeout).
    pub fn quiet_window_ms(&self) -> Millis {
        self.profile
            .reset_timeout_ms
            .saturating_mul(u64::from(self.profile.max_backoff_multiplier.max(1)))
    }

    /// Whether the last failure is at least the quiet window before `now`.
    fn quiet_elapsed(&self, now: Millis) -> bool {
        self.last_failure_at
            .is_some_and(|at| now.saturating_sub(at) >= self.quiet_window_ms())
    }

    /// An operator's connection test succeeded: a DEGRADED breaker returns to CLOSED with its
    /// counts cleared. Any other state is left alone (an OPEN breaker recovers through its
    /// probe).
    pub fn connection_test_passed(&mut self, now: Millis) -> Vec<BreakerEffect> {
        let mut effects = self.refresh(now);
        if self.phase == Phase::Degraded {
            self.close(TransitionReason::ConnectionTest, now, &mut effects);
        }
        effects
    }

    /// Apply the lazy transitions due at `now`: an elapsed OPEN becomes HALF_OPEN, a DEGRADED
    /// breaker quiet for its [`Self::quiet_window_ms`] becomes CLOSED, and lapsed probe
    /// leases are dropped (each recorded as `probe-expired`).
    pub fn refresh(&mut self, now: Millis) -> Vec<BreakerEffect> {
        let mut effects = Vec::new();
        if self.phase == Phase::Degraded && self.quiet_elapsed(now) {
            self.close(TransitionReason::QuietDecay, now, &mut effects);
        }
        if let Phase::Open { opened_at } = self.phase
            && now >= self.open_until(opened_at)
        {
            self.enter(
                Phase::HalfOpen {
                    opened_at,
                    leases: Vec::new(),
                },
                TransitionReason::TimeoutElapsed,
                now,
                &mut effects,
            );
        }
        let mut expired = 0;
        if let Phase::HalfOpen { leases, .. } = &mut self.phase {
            let before = leases.len();
            leases.retain(|lease| lease.expires_at > now);
            expired = before - leases.len();
        }
        for _ in 0..expired {
            self.record(
                BreakerState::HalfOpen,
                TransitionReason::ProbeExpired,
                now,
                &mut effects,
            );
        }
        effects
    }

    /// May an attempt go to the provider now? A `Probe` admission holds a lease until its
    /// outcome is reported, it is released, or it expires.
    pub fn admit(&mut self, now: Millis) -> (Admission, Vec<BreakerEffect>) {
        let effects = self.refresh(now);
        let budget = self.probe_budget();
        let lease_ttl = self.effective_reset_timeout_ms();
        let admission = match &mut self.phase {
            Phase::Closed | Phase::Degraded => Some(Admission::Allowed),
            Phase::HalfOpen { leases, .. } if leases.len() < budget => {
                self.last_generation += 1;
                let generation = ProbeGeneration(self.last_generation);
                leases.push(ProbeLease {
                    generation,
                    expires_at: now.saturating_add(lease_ttl),
                });
                Some(Admission::Probe { generation })
            }
            Phase::Open { .. } | Phase::HalfOpen { .. } => None,
        };
        let admission = admission.unwrap_or_else(|| Admission::Rejected {
            retry_after_ms: self.retry_after_after_refresh(now),
        });
        (admission, effects)
    }

    /// Hand back a probe lease whose attempt never reached the provider (e.g. rejected by
    /// Switchyard's own queue). Returns whether a live lease was released.
    pub fn release_probe(&mut self, generation: ProbeGeneration, now: Millis) -> bool {
        if let Phase::HalfOpen { leases, .. } = &mut self.phase {
            let before = leases.len();
            leases.retain(|lease| lease.generation != generation || lease.expires_at <= now);
            return leases.len() < before;
        }
        false
    }

    /// Account one attempt's outcome. `generation` is the one from `Admission::Probe`, or
    /// `None` for an attempt admitted as `Allowed`.
    pub fn on_outcome(
        &mut self,
        generation: Option<ProbeGeneration>,
        outcome: BreakerOutcome,
        now: Millis,
    ) -> Vec<BreakerEffect> {
        if outcome == BreakerOutcome::Ignore {
            return Vec::new();
        }
        let mut effects = self.refresh(now);
        match generation {
            Some(generation) => self.on_probe_outcome(generation, outcome, now, &mut effects),
            None => self.on_plain_outcome(outcome, now, &mut effects),
        }
        effects
    }

    /// Time until the provider may be tried: 0 when CLOSED/DEGRADED or a probe slot is free.
    pub fn retry_after_ms(&mut self, now: Millis) -> (Millis, Vec<BreakerEffect>) {
        let effects = self.refresh(now);
        (self.retry_after_after_refresh(now), effects)
    }

    /// The health status object, after the lazy transitions due at `now`.
    pub fn status(&mut self, now: Millis) -> (BreakerStatus, Vec<BreakerEffect>) {
        let effects = self.refresh(now);
        let status = BreakerStatus {
            state: self.state(),
            failure_count: self.failure_count,
            last_failure_time: self.last_failure_at,
            retry_after_ms: self.retry_after_after_refresh(now),
            last_failure_kind: self.last_failure_kind,
            open_cycle_count: self.open_cycle_count,
            degradation_threshold: self.profile.degradation_at(),
            effective_reset_timeout: self.effective_reset_timeout_ms(),
            opened_at: self.opened_at(),
            probes_in_flight: u32::try_from(self.probes_in_flight(now)).unwrap_or(u32::MAX),
            transition_history: self.history.iter().copied().collect(),
        };
        (status, effects)
    }

    /// Manual reset (`POST /api/resilience/reset`): CLOSED, counters and cycles zeroed, leases
    /// dropped.
    pub fn reset(&mut self, now: Millis) -> Vec<BreakerEffect> {
        let mut effects = Vec::new();
        self.close(TransitionReason::ManualReset, now, &mut effects);
        effects
    }

    fn on_probe_outcome(
        &mut self,
        generation: ProbeGeneration,
        outcome: BreakerOutcome,
        now: Millis,
        effects: &mut Vec<BreakerEffect>,
    ) {
        let Phase::HalfOpen { leases, .. } = &self.phase else {
            return;
        };
        if !leases.iter().any(|lease| lease.generation == generation) {
            return;
        }
        match outcome {
            BreakerOutcome::Success => self.close(TransitionReason::ProbeSuccess, now, effects),
            BreakerOutcome::Failure(kind) => {
                self.count_failure(kind, now);
                self.open_cycle_count = self.open_cycle_count.saturating_add(1);
                self.enter(
                    Phase::Open { opened_at: now },
                    TransitionReason::ProbeFailed,
                    now,
                    effects,
                );
            }
            BreakerOutcome::Ignore => {}
        }
    }

    fn on_plain_outcome(
        &mut self,
        outcome: BreakerOutcome,
        now: Millis,
        effects: &mut Vec<BreakerEffect>,
    ) {
        let threshold = self.profile.failure_threshold;
        let band = self.profile.degradation_at();
        match (&self.phase, outcome) {
            (Phase::Closed | Phase::Degraded, BreakerOutcome::Success) => {
                self.failure_count = self.failure_count.saturating_sub(1);
                if self.phase == Phase::Degraded && self.failure_count <= band {
                    self.enter(Phase::Closed, TransitionReason::Recovery, now, effects);
                }
            }
            (Phase::Closed | Phase::Degraded, BreakerOutcome::Failure(kind)) => {
                self.count_failure(kind, now);
                if self.failure_count >= threshold {
                    self.enter(
                        Phase::Open { opened_at: now },
                        TransitionReason::Threshold,
                        now,
                        effects,
                    );
                } else if self.phase == Phase::Closed && self.failure_count >= band {
                    self.enter(Phase::Degraded, TransitionReason::Degraded, now, effects);
                }
            }
            // Counted for the status, but the open window stays anchored at `opened_at`.
            (Phase::Open { .. }, BreakerOutcome::Failure(kind)) => self.count_failure(kind, now),
            // Recovery goes through a probe; late plain outcomes carry no evidence about it.
            (Phase::Open { .. }, _) | (Phase::HalfOpen { .. }, _) => {}
            (_, BreakerOutcome::Ignore) => {}
        }
    }

    fn count_failure(&mut self, kind: FailureKind, now: Millis) {
        self.failure_count = self.failure_count.saturating_add(1);
        self.last_failure_kind = Some(kind);
        self.last_failure_at = Some(now);
    }

    fn close(&mut self, reason: TransitionReason, now: Millis, effects: &mut Vec<BreakerEffect>) {
        self.enter(Phase::Closed, reason, now, effects);
        self.failure_count = 0;
        self.open_cycle_count = 0;
        self.last_failure_kind = None;
    }

    fn enter(
        &mut self,
        phase: Phase,
        reason: TransitionReason,
        now: Millis,
        effects: &mut Vec<BreakerEffect>,
    ) {
        let from = self.phase.state();
        self.phase = phase;
        self.remote_open_until = None;
        self.record(from, reason, now, effects);
    }

    /// Append a history entry from `from` to the current state and emit it.
    fn record(
        &mut self,
        from: BreakerState,
        reason: TransitionReason,
        now: Millis,
        effects: &mut Vec<BreakerEffect>,
    ) {
        let transition = Transition {
            from,
            to: self.phase.state(),
            at: now,
            failure_count: self.failure_count,
            reason,
        };
        if self.history.len() >= HISTORY_LIMIT {
            self.history.pop_front();
        }
        self.history.push_back(transition);
        effects.push(BreakerEffect::Transition(transition));
    }

    fn open_until(&self, opened_at: Millis) -> Millis {
        self.remote_open_until
            .unwrap_or_else(|| opened_at.saturating_add(self.effective_reset_timeout_ms()))
    }

    fn probe_budget(&self) -> usize {
        usize::try_from(self.profile.half_open_requests.max(1)).unwrap_or(usize::MAX)
    }

    fn free_probe_slots(&self, leases: &[ProbeLease], now: Millis) -> usize {
        self.probe_budget().saturating_sub(live_leases(leases, now))
    }

    fn retry_after_after_refresh(&self, now: Millis) -> Millis {
        match &self.phase {
            Phase::Closed | Phase::Degraded => 0,
            Phase::Open { opened_at } => self.open_until(*opened_at).saturating_sub(now),
            Phase::HalfOpen { leases, .. } => {
                if leases.len() < self.probe_budget() {
                    0
                } else {
                    earliest_expiry(leases).saturating_sub(now)
                }
            }
        }
    }
}

fn live_leases(leases: &[ProbeLease], now: Millis) -> usize {
    leases.iter().filter(|lease| lease.expires_at > now).count()
}

fn earliest_expiry(leases: &[ProbeLease]) -> Millis {
    leases
        .iter()
        .map(|lease| lease.expires_at)
        .min()
        .unwrap_or(0)
}
