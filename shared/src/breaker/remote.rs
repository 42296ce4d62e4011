//! Merging the cluster's shared breaker into a node's local breaker.
//!
//! Why: in cluster mode the CLOSED → OPEN decision is taken once, cluster-wide, by the store;
//! each node then mirrors it so its hot path rejects locally without asking Redis. The merge
//! is extend-only for OPEN (a node never shortens an open window it already has), OPEN wins
//! over HALF_OPEN, and CLOSED only arrives through an explicit transition (a probe success or
//! an operator reset somewhere), never through the mere absence of failures. Pure: time is
//! passed in.

use super::{Breaker, BreakerEffect, BreakerState, Phase, TransitionReason};
use crate::Millis;

impl Breaker {
    /// Applies the cluster's phase `to` at `now`; `retry_after_ms` is the cluster's remaining
    /// open time (OPEN). Returns the transitions it recorded (reason `cluster`).
    pub fn apply_remote(
        &mut self,
        to: BreakerState,
        retry_after_ms: Millis,
        now: Millis,
    ) -> Vec<BreakerEffect> {
        let mut effects = Vec::new();
        match to {
            BreakerState::Open => {
                let until = now.saturating_add(retry_after_ms);
                match self.phase {
                    Phase::Open { opened_at } if self.open_until(opened_at) >= until => {}
                    Phase::Open { .. } => self.remote_open_until = Some(until),
                    Phase::Closed | Phase::Degraded | Phase::HalfOpen { .. } => {
                        self.enter(
                            Phase::Open { opened_at: now },
                            TransitionReason::Cluster,
                            now,
                            &mut effects,
                        );
                        // After `enter`, which clears it.
                        self.remote_open_until = Some(until);
                    }
                }
            }
            BreakerState::HalfOpen => match self.phase {
                Phase::HalfOpen { .. } => {}
                Phase::Open { opened_at } => self.enter(
                    Phase::HalfOpen {
                        opened_at,
                        leases: Vec::new(),
                    },
                    TransitionReason::Cluster,
                    now,
                    &mut effects,
                ),
                Phase::Closed | Phase::Degraded => self.enter(
                    Phase::HalfOpen {
                        opened_at: now,
                        leases: Vec::new(),
                    },
                    TransitionReason::Cluster,
                    now,
                    &mut effects,
                ),
            },
            BreakerState::Closed => {
                if self.phase == Phase::Closed {
                    self.failure_count = 0;
                } else {
                    self.close(TransitionReason::Cluster, now, &mut effects);
                }
            }
            // The shared breaker has no warning band; a node keeps its own.
            BreakerState::Degraded => {}
        }
        effects
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Admission, BreakerProfile, BreakerView};
    use super::*;
    use crate::outcome::{BreakerOutcome, FailureKind};

    fn breaker() -> Breaker {
        Breaker::new(BreakerProfile {
            failure_threshold: 3,
            degradation_threshold: 0,
            reset_timeout_ms: 10_000,
            max_backoff_multiplier: 4,
            backoff_escalation_count: 3,
            half_open_requests: 1,
        })
    }

    #[test]
    fn remote_open_opens_for_the_cluster_remaining_time() {
        let mut b = breaker();
        let effects = b.apply_remote(BreakerState::Open, 4_000, 1_000);
        assert_eq!(effects.len(), 1);
        assert_eq!(b.view(1_000), BreakerView::Open { until: 5_000 });
        assert_eq!(b.view(5_000), BreakerView::HalfOpen);
        let BreakerEffect::Transition(t) = effects[0];
        assert_eq!(t.reason, TransitionReason::Cluster);
        assert_eq!((t.from, t.to), (BreakerState::Closed, BreakerState::Open));
    }

    #[test]
    fn remote_open_only_extends() {
        let mut b = breaker();
        b.apply_remote(BreakerState::Open, 8_000, 0);
        assert!(b.apply_remote(BreakerState::Open, 2_000, 1_000).is_empty());
        assert_eq!(b.view(1_000), BreakerView::Open { until: 8_000 });
        assert!(b.apply_remote(BreakerState::Open, 20_000, 1_000).is_empty());
        assert_eq!(b.view(1_000), BreakerView::Open { until: 21_000 });
    }

    #[test]
    fn remote_half_open_admits_only_through_a_local_probe_slot() {
        let mut b = breaker();
        b.apply_remote(BreakerState::HalfOpen, 0, 100);
        assert_eq!(b.view(100), BreakerView::HalfOpen);
        let (first, _) = b.admit(100);
        assert!(matches!(first, Admission::Probe { .. }));
        let (second, _) = b.admit(100);
        assert!(matches!(second, Admission::Rejected { .. }));
    }

    #[test]
    fn remote_close_zeroes_the_counters_and_a_closed_breaker_forgets_failures() {
        let mut b = breaker();
        b.on_outcome(None, BreakerOutcome::Failure(FailureKind::Transient), 0);
        assert_eq!(b.failure_count(), 1);
        assert!(b.apply_remote(BreakerState::Closed, 0, 10).is_empty());
        assert_eq!(b.failure_count(), 0);
        b.apply_remote(BreakerState::Open, 5_000, 20);
        let effects = b.apply_remote(BreakerState::Closed, 0, 30);
        assert_eq!(effects.len(), 1);
        assert_eq!(b.view(30), BreakerView::Closed);
        assert_eq!(b.open_cycle_count(), 0);
    }

    #[test]
    fn the_cluster_deadline_holds_on_a_young_node_clock_and_a_local_transition_drops_it() {
        let mut b = breaker();
        // Node time 100 ms: `opened_at + 10 s` could not end at 2.1 s.
        b.apply_remote(BreakerState::Open, 2_000, 100);
        assert_eq!(b.view(100), BreakerView::Open { until: 2_100 });
        let (probe, _) = b.admit(2_100);
        let Admission::Probe { generation } = probe else {
            panic!("a probe is due: {probe:?}");
        };
        b.on_outcome(
            Some(generation),
            BreakerOutcome::Failure(FailureKind::Transient),
            2_200,
        );
        // The local reopen uses the node's own escalated timeout again.
        assert_eq!(
            b.view(2_200),
            BreakerView::Open {
                until: 2_200 + b.effective_reset_timeout_ms()
            }
        );
    }

    #[test]
    fn remote_open_replaces_a_local_half_open_and_its_leases() {
        let mut b = breaker();
        b.apply_remote(BreakerState::HalfOpen, 0, 0);
        let (probe, _) = b.admit(0);
        assert!(matches!(probe, Admission::Probe { .. }));
        b.apply_remote(BreakerState::Open, 3_000, 10);
        assert_eq!(b.view(10), BreakerView::Open { until: 3_010 });
        assert_eq!(b.probes_in_flight(10), 0);
    }
}
