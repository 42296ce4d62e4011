use proptest::prelude::*;

use super::*;
use crate::outcome::{BreakerOutcome, FailureKind, ProviderCategory};

const FAIL: BreakerOutcome = BreakerOutcome::Failure(FailureKind::Transient);
const OK: BreakerOutcome = BreakerOutcome::Success;

fn transitions(effects: &[BreakerEffect]) -> Vec<(BreakerState, BreakerState, TransitionReason)> {
    effects
        .iter()
        .map(|BreakerEffect::Transition(t)| (t.from, t.to, t.reason))
        .collect()
}

/// Drive a fresh breaker to OPEN at `now` with plain failures.
fn opened(profile: BreakerProfile, now: Millis) -> Breaker {
    let mut b = Breaker::new(profile);
    while b.state() != BreakerState::Open {
        b.on_outcome(None, FAIL, now);
    }
    b
}

/// Fail `n` probes in a row so that `open_cycle_count == n`, ending OPEN; returns the time.
fn fail_probes(b: &mut Breaker, n: u32, mut now: Millis) -> Millis {
    for _ in 0..n {
        now += b.effective_reset_timeout_ms();
        let (admission, _) = b.admit(now);
        let generation = admission.generation();
        assert!(
            generation.is_some(),
            "expected a probe at {now}: {admission:?}"
        );
        b.on_outcome(generation, FAIL, now);
        assert_eq!(b.state(), BreakerState::Open);
    }
    now
}

#[test]
fn profile_table_degrade_open_reset() {
    // (category, degrade at, open at, reset)
    let rows = [
        (ProviderCategory::Oauth, 5, 8, 60_000),
        (ProviderCategory::Apikey, 7, 12, 30_000),
        // Derived ceil(60 % of 2) = 2 is kept at threshold − 1 = 1 like any other value.
        (ProviderCategory::Local, 1, 2, 15_000),
    ];
    for (category, degrade_at, open_at, reset) in rows {
        let mut b = Breaker::for_category(category);
        let mut degraded = None;
        let mut opened = None;
        for n in 1..=20u32 {
            b.on_outcome(None, FAIL, 1_000);
            if degraded.is_none() && b.state() == BreakerState::Degraded {
                degraded = Some(n);
            }
            if b.state() == BreakerState::Open {
                opened = Some(n);
                break;
            }
        }
        let expected_degraded = (degrade_at < open_at).then_some(degrade_at);
        assert_eq!(degraded, expected_degraded, "{category:?} degrade");
        assert_eq!(opened, Some(open_at), "{category:?} open");
        assert_eq!(b.profile().degradation_at(), degrade_at, "{category:?}");
        assert_eq!(b.effective_reset_timeout_ms(), reset, "{category:?} reset");
        assert_eq!(
            b.view(1_000 + reset - 1),
            BreakerView::Open {
                until: 1_000 + reset
            }
        );
        assert_eq!(b.view(1_000 + reset), BreakerView::HalfOpen, "{category:?}");
    }
}

#[test]
fn local_profile_degrades_on_first_failure() {
    let mut b = Breaker::for_category(ProviderCategory::Local);
    let effects = b.on_outcome(None, FAIL, 5);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::Closed,
            BreakerState::Degraded,
            TransitionReason::Degraded
        )]
    );
}

#[test]
fn escalation_values_per_cycle() {
    let apikey = BreakerProfile::for_category(ProviderCategory::Apikey);
    let expected = [
        30_000, 30_000, 30_000, 30_000, 60_000, 120_000, 120_000, 120_000,
    ];
    for (cycles, want) in expected.into_iter().enumerate() {
        let cycles = u32::try_from(cycles).unwrap();
        assert_eq!(
            apikey.effective_reset_timeout_ms(cycles),
            want,
            "apikey {cycles}"
        );
    }
    let oauth = BreakerProfile::for_category(ProviderCategory::Oauth);
    let expected = [
        60_000, 60_000, 60_000, 120_000, 240_000, 480_000, 480_000, 480_000,
    ];
    for (cycles, want) in expected.into_iter().enumerate() {
        let cycles = u32::try_from(cycles).unwrap();
        assert_eq!(
            oauth.effective_reset_timeout_ms(cycles),
            want,
            "oauth {cycles}"
        );
    }
    assert_eq!(oauth.effective_reset_timeout_ms(u32::MAX), 480_000);
}

#[test]
fn failed_probes_escalate_the_open_window() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let now = fail_probes(&mut b, 4, 0);
    assert_eq!(b.open_cycle_count(), 4);
    assert_eq!(b.effective_reset_timeout_ms(), 60_000);
    assert_eq!(
        b.view(now + 59_999),
        BreakerView::Open {
            until: now + 60_000
        }
    );
    let now = fail_probes(&mut b, 1, now);
    assert_eq!(b.effective_reset_timeout_ms(), 120_000);
    let (status, _) = b.status(now);
    assert_eq!(status.effective_reset_timeout, 120_000);
    assert_eq!(status.retry_after_ms, 120_000);
    assert_eq!(status.open_cycle_count, 5);
}

#[test]
fn lazy_recovery_on_read() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 100);
    assert!(!b.can_execute(30_099));
    let (retry, effects) = b.retry_after_ms(30_099);
    assert_eq!((retry, effects.len()), (1, 0));
    assert_eq!(b.state(), BreakerState::Open);

    // Nothing moves without a read; the first read after the window does the transition.
    assert!(b.can_execute(30_100));
    assert_eq!(b.state(), BreakerState::Open);
    let (status, effects) = b.status(30_100);
    assert_eq!(status.state, BreakerState::HalfOpen);
    assert_eq!(status.retry_after_ms, 0);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::Open,
            BreakerState::HalfOpen,
            TransitionReason::TimeoutElapsed
        )]
    );
    // A second read has nothing left to do.
    assert!(b.refresh(30_200).is_empty());
}

#[test]
fn open_never_admits() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Oauth), 0);
    for now in [0, 1, 30_000, 59_999] {
        let (admission, effects) = b.admit(now);
        assert_eq!(
            admission,
            Admission::Rejected {
                retry_after_ms: 60_000 - now
            }
        );
        assert!(effects.is_empty());
    }
}

#[test]
fn probe_lease_admits_once() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let (first, effects) = b.admit(30_000);
    assert_eq!(
        first,
        Admission::Probe {
            generation: ProbeGeneration(1)
        }
    );
    assert_eq!(effects.len(), 1);
    assert_eq!(b.probes_in_flight(30_000), 1);
    for now in [30_000, 30_001, 59_999] {
        let (again, _) = b.admit(now);
        assert_eq!(
            again,
            Admission::Rejected {
                retry_after_ms: 60_000 - now
            }
        );
    }
    assert!(!b.can_execute(45_000));
}

#[test]
fn probe_success_closes_and_zeroes() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let now = fail_probes(&mut b, 2, 0);
    let now = now + b.effective_reset_timeout_ms();
    let (admission, _) = b.admit(now);
    let effects = b.on_outcome(admission.generation(), OK, now + 5);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::HalfOpen,
            BreakerState::Closed,
            TransitionReason::ProbeSuccess
        )]
    );
    assert_eq!(b.failure_count(), 0);
    assert_eq!(b.open_cycle_count(), 0);
    assert_eq!(b.last_failure_kind(), None);
    assert_eq!(b.probes_in_flight(now + 5), 0);
    assert_eq!(b.admit(now + 5).0, Admission::Allowed);
}

#[test]
fn probe_failure_reopens_with_next_cycle() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let count = b.failure_count();
    let (admission, _) = b.admit(30_000);
    let effects = b.on_outcome(admission.generation(), FAIL, 30_010);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::HalfOpen,
            BreakerState::Open,
            TransitionReason::ProbeFailed
        )]
    );
    assert_eq!(b.open_cycle_count(), 1);
    assert_eq!(b.failure_count(), count + 1);
    assert_eq!(b.opened_at(), Some(30_010));
    assert_eq!(b.view(30_011), BreakerView::Open { until: 60_010 });
}

#[test]
fn expired_probe_lets_another_probe_through() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let (first, _) = b.admit(30_000);
    let (second, effects) = b.admit(60_000);
    assert_eq!(
        second,
        Admission::Probe {
            generation: ProbeGeneration(2)
        }
    );
    assert_ne!(first.generation(), second.generation());
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::HalfOpen,
            BreakerState::HalfOpen,
            TransitionReason::ProbeExpired
        )]
    );
}

#[test]
fn late_result_of_expired_probe_is_ignored() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let (first, _) = b.admit(30_000);
    // Expired, nobody re-probed yet: the late success does not close.
    let effects = b.on_outcome(first.generation(), OK, 60_000);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::HalfOpen,
            BreakerState::HalfOpen,
            TransitionReason::ProbeExpired
        )]
    );
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // A newer probe is live; a late failure of the old one must not reopen.
    let (second, _) = b.admit(60_001);
    let before = b.clone();
    assert!(b.on_outcome(first.generation(), FAIL, 60_002).is_empty());
    assert_eq!(b, before);
    // The live probe still decides.
    b.on_outcome(second.generation(), OK, 60_003);
    assert_eq!(b.state(), BreakerState::Closed);
    // A generation from a finished episode is stale too.
    let before = b.clone();
    b.on_outcome(second.generation(), FAIL, 60_004);
    assert_eq!(b, before);
}

#[test]
fn released_probe_frees_the_slot() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let (first, _) = b.admit(30_000);
    let generation = first.generation().unwrap();
    assert!(b.release_probe(generation, 30_001));
    assert!(!b.release_probe(generation, 30_002));
    let (second, _) = b.admit(30_003);
    assert_eq!(second.generation(), Some(ProbeGeneration(2)));
}

#[test]
fn probe_budget_above_one() {
    let profile = BreakerProfile {
        half_open_requests: 2,
        ..BreakerProfile::for_category(ProviderCategory::Local)
    };
    let mut b = opened(profile, 0);
    assert!(matches!(b.admit(15_000).0, Admission::Probe { .. }));
    let (second, _) = b.admit(15_001);
    assert!(matches!(second, Admission::Probe { .. }));
    assert_eq!(
        b.admit(15_002).0,
        Admission::Rejected {
            retry_after_ms: 14_998
        }
    );
    // The first settled probe decides for the episode; the other becomes stale.
    b.on_outcome(second.generation(), FAIL, 15_003);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.probes_in_flight(15_003), 0);
}

#[test]
fn rate_limits_and_ignores_never_trip() {
    let mut b = Breaker::for_category(ProviderCategory::Local);
    let before = b.clone();
    for now in 0..1_000 {
        assert!(b.on_outcome(None, BreakerOutcome::Ignore, now).is_empty());
    }
    assert_eq!(b, before);
    // Not even a due lazy transition happens on an ignored outcome.
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Local), 0);
    let before = b.clone();
    b.on_outcome(None, BreakerOutcome::Ignore, 1_000_000);
    assert_eq!(b, before);
}

#[test]
fn each_resolved_5xx_counts_once() {
    // The reference counted a resolved 5xx as a success and then a failure, so the count
    // hovered around 1. Here N failed attempts are N failures.
    let mut b = Breaker::for_category(ProviderCategory::Apikey);
    for i in 1..=11 {
        b.on_outcome(None, FAIL, i);
        assert_eq!(b.failure_count(), u32::try_from(i).unwrap());
    }
    b.on_outcome(None, FAIL, 12);
    assert_eq!(b.state(), BreakerState::Open);
    // A probe that gets a 503 reopens instead of closing.
    let (probe, _) = b.admit(30_012);
    b.on_outcome(probe.generation(), FAIL, 30_013);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn late_plain_outcomes_while_open_and_half_open() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let count = b.failure_count();
    // A failure counts but does not push the window out.
    assert!(b.on_outcome(None, FAIL, 20_000).is_empty());
    assert_eq!(b.failure_count(), count + 1);
    assert_eq!(b.last_failure_at(), Some(20_000));
    assert_eq!(b.view(20_001), BreakerView::Open { until: 30_000 });
    // A success does not close.
    b.on_outcome(None, OK, 20_002);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.failure_count(), count + 1);
    // While HALF_OPEN plain outcomes change nothing.
    b.refresh(30_000);
    let (probe, _) = b.admit(30_000);
    let before = b.clone();
    b.on_outcome(None, FAIL, 30_001);
    b.on_outcome(None, OK, 30_002);
    assert_eq!(b, before);
    b.on_outcome(probe.generation(), OK, 30_003);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn degraded_band_and_recovery() {
    let mut b = Breaker::for_category(ProviderCategory::Apikey);
    for _ in 0..7 {
        b.on_outcome(None, FAIL, 1);
    }
    assert_eq!(b.state(), BreakerState::Degraded);
    assert_eq!(b.admit(1).0, Admission::Allowed);
    let effects = b.on_outcome(None, OK, 2);
    assert_eq!(b.failure_count(), 6);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::Degraded,
            BreakerState::Closed,
            TransitionReason::Recovery
        )]
    );
    // Climbing two above the band takes two successes to leave it.
    for _ in 0..3 {
        b.on_outcome(None, FAIL, 3);
    }
    assert_eq!((b.state(), b.failure_count()), (BreakerState::Degraded, 9));
    b.on_outcome(None, OK, 4);
    assert_eq!((b.state(), b.failure_count()), (BreakerState::Degraded, 8));
    b.on_outcome(None, OK, 5);
    assert_eq!((b.state(), b.failure_count()), (BreakerState::Closed, 7));
    // Successes in CLOSED only decrement, never below zero.
    for _ in 0..10 {
        b.on_outcome(None, OK, 6);
    }
    assert_eq!(b.failure_count(), 0);
}

#[test]
fn manual_reset_closes_everything() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Oauth), 0);
    fail_probes(&mut b, 3, 0);
    let effects = b.reset(500_000);
    assert_eq!(
        transitions(&effects),
        [(
            BreakerState::Open,
            BreakerState::Closed,
            TransitionReason::ManualReset
        )]
    );
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!((b.failure_count(), b.open_cycle_count()), (0, 0));
    assert_eq!(b.effective_reset_timeout_ms(), 60_000);
    assert_eq!(b.opened_at(), None);
}

#[test]
fn history_keeps_last_twenty() {
    let mut b = Breaker::for_category(ProviderCategory::Local);
    let mut now = 0;
    for _ in 0..30 {
        now += 1;
        b.on_outcome(None, FAIL, now);
        b.on_outcome(None, FAIL, now);
        now += b.effective_reset_timeout_ms();
        let (probe, _) = b.admit(now);
        b.on_outcome(probe.generation(), OK, now);
    }
    assert_eq!(b.history().len(), HISTORY_LIMIT);
    let last = b.history().back().unwrap();
    assert_eq!(
        (last.reason, last.at),
        (TransitionReason::ProbeSuccess, now)
    );
}

#[test]
fn status_serializes_like_the_reference() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    let (status, _) = b.status(1_000);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["state"], "OPEN");
    assert_eq!(json["failureCount"], 12);
    assert_eq!(json["retryAfterMs"], 29_000);
    assert_eq!(json["lastFailureKind"], "transient");
    assert_eq!(json["openCycleCount"], 0);
    assert_eq!(json["effectiveResetTimeout"], 30_000);
    assert_eq!(json["degradationThreshold"], 7);
    let history = json["transitionHistory"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1]["from"], "DEGRADED");
    assert_eq!(history[1]["to"], "OPEN");
    assert_eq!(history[1]["reason"], "threshold");
    assert_eq!(history[1]["timestamp"], 0);
    assert_eq!(history[1]["failureCount"], 12);
}

#[test]
fn persisted_breaker_round_trips() {
    let mut b = opened(BreakerProfile::for_category(ProviderCategory::Apikey), 0);
    b.admit(30_000);
    let json = serde_json::to_string(&b).unwrap();
    let restored: Breaker = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, b);
}

#[test]
fn normalized_clamps_with_named_warnings() {
    let (p, warnings) = BreakerProfile {
        failure_threshold: 5,
        degradation_threshold: 9,
        ..BreakerProfile::default()
    }
    .normalized();
    assert_eq!(p.degradation_threshold, 4);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("degradation_threshold"),
        "{warnings:?}"
    );

    let (p, warnings) = BreakerProfile {
        failure_threshold: 0,
        degradation_threshold: 0,
        reset_timeout_ms: 10,
        max_backoff_multiplier: 0,
        backoff_escalation_count: 0,
        half_open_requests: 0,
    }
    .normalized();
    assert_eq!(p.failure_threshold, 1);
    assert_eq!(p.degradation_threshold, 1);
    assert_eq!(p.reset_timeout_ms, MIN_RESET_TIMEOUT_MS);
    assert_eq!((p.max_backoff_multiplier, p.half_open_requests), (1, 1));
    for field in [
        "failure_threshold",
        "reset_timeout_ms",
        "max_backoff_multiplier",
        "half_open_requests",
    ] {
        assert!(
            warnings.iter().any(|w| w.starts_with(field)),
            "{field}: {warnings:?}"
        );
    }

    // Derived thresholds resolve silently; the shipped profiles are already valid.
    for category in [
        ProviderCategory::Oauth,
        ProviderCategory::Apikey,
        ProviderCategory::Local,
    ] {
        let (p, warnings) = BreakerProfile::for_category(category).normalized();
        assert!(warnings.is_empty(), "{category:?}: {warnings:?}");
        assert!(p.degradation_threshold < p.failure_threshold);
    }
    let (p, _) = BreakerProfile {
        failure_threshold: 10,
        degradation_threshold: 0,
        ..BreakerProfile::default()
    }
    .normalized();
    assert_eq!(p.degradation_threshold, 6);
}

#[test]
fn profile_deserializes_with_default_probe_budget() {
    let p: BreakerProfile = serde_json::from_str(
        r#"{"failure_threshold":8,"degradation_threshold":5,"reset_timeout_ms":60000,
            "max_backoff_multiplier":8,"backoff_escalation_count":2}"#,
    )
    .unwrap();
    assert_eq!(p, BreakerProfile::for_category(ProviderCategory::Oauth));
}

// ---- property tests ----

#[derive(Debug, Clone)]
enum Event {
    Admit,
    /// Report the outcome of the `ticket`-th outstanding admission (or a plain one if none).
    Outcome(usize, BreakerOutcome),
    AdvanceTime(Millis),
    Release(usize),
    Reset,
}

fn outcome() -> impl Strategy<Value = BreakerOutcome> {
    prop_oneof![
        Just(BreakerOutcome::Success),
        Just(BreakerOutcome::Ignore),
        prop_oneof![
            Just(FailureKind::Transient),
            Just(FailureKind::RateLimit),
            Just(FailureKind::QuotaExhausted),
        ]
        .prop_map(BreakerOutcome::Failure),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => Just(Event::Admit),
        5 => (any::<usize>(), outcome()).prop_map(|(i, o)| Event::Outcome(i, o)),
        3 => (0u64..2_500).prop_map(Event::AdvanceTime),
        1 => any::<usize>().prop_map(Event::Release),
        1 => Just(Event::Reset),
    ]
}

fn profile() -> impl Strategy<Value = BreakerProfile> {
    (1u32..6, 0u32..7, 1_000u64..2_000, 1u32..8, 0u32..3, 1u32..4).prop_map(
        |(t, d, reset, mult, esc, probes)| BreakerProfile {
            failure_threshold: t,
            degradation_threshold: d,
            reset_timeout_ms: reset,
            max_backoff_multiplier: mult,
            backoff_escalation_count: esc,
            half_open_requests: probes,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn breaker_invariants(profile in profile(), events in prop::collection::vec(event(), 1..120)) {
        let mut b = Breaker::new(profile);
        let budget = b.profile().half_open_requests as usize;
        let mut now: Millis = 0;
        let mut tickets: Vec<Option<ProbeGeneration>> = Vec::new();
        // Probe grants of the current HALF_OPEN episode: (generation, expiry).
        let mut grants: Vec<(ProbeGeneration, Millis)> = Vec::new();
        let mut failures_since_reset: u32 = 0;

        for event in events {
            let state_before = b.state();
            let effects = match event {
                Event::Admit => {
                    let view = b.view(now);
                    let (admission, effects) = b.admit(now);
                    match admission {
                        Admission::Allowed => prop_assert!(matches!(
                            view, BreakerView::Closed | BreakerView::Degraded)),
                        Admission::Probe { generation } => {
                            prop_assert_eq!(view, BreakerView::HalfOpen);
                            grants.push((generation, now + b.effective_reset_timeout_ms()));
                        }
                        Admission::Rejected { retry_after_ms } => {
                            prop_assert!(retry_after_ms > 0);
                        }
                    }
                    if let BreakerView::Open { .. } = view {
                        prop_assert!(!admission.is_admitted(), "OPEN admitted");
                    }
                    if admission.is_admitted() {
                        tickets.push(admission.generation());
                    }
                    effects
                }
                Event::Outcome(i, outcome) => {
                    let generation = if tickets.is_empty() {
                        None
                    } else {
                        tickets.remove(i % tickets.len())
                    };
                    let before = b.clone();
                    let effects = b.on_outcome(generation, outcome, now);
                    match outcome {
                        BreakerOutcome::Ignore => {
                            prop_assert_eq!(&b, &before);
                            prop_assert!(effects.is_empty());
                        }
                        BreakerOutcome::Failure(_) => failures_since_reset += 1,
                        BreakerOutcome::Success => {}
                    }
                    if let Some(generation) = generation {
                        grants.retain(|(g, _)| *g != generation);
                    }
                    effects
                }
                Event::AdvanceTime(ms) => {
                    now += ms;
                    Vec::new()
                }
                Event::Release(i) => {
                    if !tickets.is_empty() {
                        let i = i % tickets.len();
                        if let Some(generation) = tickets[i] {
                            tickets.remove(i);
                            b.release_probe(generation, now);
                            grants.retain(|(g, _)| *g != generation);
                        }
                    }
                    Vec::new()
                }
                Event::Reset => {
                    let effects = b.reset(now);
                    prop_assert_eq!(b.state(), BreakerState::Closed);
                    prop_assert_eq!(b.view(now), BreakerView::Closed);
                    prop_assert_eq!(b.failure_count(), 0);
                    failures_since_reset = 0;
                    effects
                }
            };

            // Every state change is announced, and the effects chain up to the new state.
            if let Some(BreakerEffect::Transition(last)) = effects.last() {
                prop_assert_eq!(last.to, b.state());
            } else {
                prop_assert_eq!(state_before, b.state());
            }
            if b.state() != BreakerState::HalfOpen {
                grants.clear();
            }
            let outstanding = grants.iter().filter(|(_, expiry)| *expiry > now).count();
            prop_assert!(outstanding <= budget, "{} probes outstanding", outstanding);
            prop_assert!(b.probes_in_flight(now) <= budget);
            prop_assert!(b.failure_count() <= failures_since_reset);
            prop_assert!(b.history().len() <= HISTORY_LIMIT);
            if b.state() == BreakerState::Open {
                prop_assert!(!b.can_execute(now) || b.view(now) == BreakerView::HalfOpen);
            }
        }
    }
}

fn degraded_breaker() -> Breaker {
    let mut b = Breaker::new(BreakerProfile {
        failure_threshold: 5,
        degradation_threshold: 2,
        reset_timeout_ms: 10_000,
        max_backoff_multiplier: 4,
        ..BreakerProfile::default()
    });
    for at in [1_000, 2_000] {
        b.on_outcome(None, BreakerOutcome::Failure(FailureKind::Transient), at);
    }
    assert_eq!(b.state(), BreakerState::Degraded);
    b
}

#[test]
fn a_quiet_degraded_breaker_decays_to_closed_after_the_longest_open_hold() {
    let mut b = degraded_breaker();
    assert_eq!(b.quiet_window_ms(), 40_000);
    // Just short of the window (from the last failure at 2 000): still DEGRADED.
    b.refresh(41_999);
    assert_eq!(b.state(), BreakerState::Degraded);
    let effects = b.refresh(42_000);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.failure_count(), 0);
    assert!(matches!(
        effects.as_slice(),
        [BreakerEffect::Transition(t)] if t.reason == TransitionReason::QuietDecay
    ));
}

#[test]
fn a_failure_after_the_quiet_window_starts_from_closed() {
    let mut b = degraded_breaker();
    // Three more failures would open a stale DEGRADED breaker (2 + 3 = 5).
    for at in [50_000, 50_001, 50_002] {
        b.on_outcome(None, BreakerOutcome::Failure(FailureKind::Transient), at);
    }
    assert_ne!(b.state(), BreakerState::Open);
    assert_eq!(b.failure_count(), 3);
}

#[test]
fn a_connection_test_closes_only_a_degraded_breaker() {
    let mut b = degraded_breaker();
    let effects = b.connection_test_passed(3_000);
    assert_eq!(b.state(), BreakerState::Closed);
    assert!(matches!(
        effects.as_slice(),
        [BreakerEffect::Transition(t)] if t.reason == TransitionReason::ConnectionTest
    ));
    // CLOSED stays CLOSED without a history entry.
    assert!(b.connection_test_passed(4_000).is_empty());
}
