use proptest::prelude::*;

use super::*;

/// The reference test file's base settings.
fn base() -> ComboWaitSettings {
    ComboWaitSettings {
        enabled: true,
        max_wait_ms: 5_000,
        max_attempts: 2,
        budget_ms: 8_000,
    }
}

fn r(s: &str) -> LockReason {
    LockReason::parse(s)
}

fn lock(target: &str, reason: &str, remaining_ms: Millis, hint_ms: Millis) -> LockedTarget {
    LockedTarget {
        target: target.to_owned(),
        reason: r(reason),
        remaining_ms,
        hint_ms,
    }
}

/// (name, reason, wait, attempt, budget_left, settings, allowed)
type GateCase = (
    &'static str,
    &'static str,
    Millis,
    u32,
    Millis,
    ComboWaitSettings,
    bool,
);

/// Ported from the reference's `combo-cooldown-retry` tests, part 1: the single-wait gate.
/// Input defaults: reason `rate_limit`, wait 3000, attempt 0, budget left 8000.
#[rustfmt::skip]
#[test]
fn reference_gate_cases() {
    let off = ComboWaitSettings { enabled: false, ..base() };
    let cases: [GateCase; 16] = [
        ("happy path",                          "rate_limit",      3_000, 0, 8_000, base(), true),
        ("quota_exhausted excluded",            "quota_exhausted", 3_000, 0, 8_000, base(), false),
        ("auth_error excluded",                 "auth_error",      3_000, 0, 8_000, base(), false),
        ("not_found excluded",                  "not_found",       3_000, 0, 8_000, base(), false),
        ("not_found_local excluded",            "not_found_local", 3_000, 0, 8_000, base(), false),
        ("unknown reason fails closed",         "",                3_000, 0, 8_000, base(), false),
        // Decision: Switchyard does not wait on an open breaker here (see the module docs).
        ("circuit_open is not a lockout",       "circuit_open",    3_000, 0, 8_000, base(), false),
        ("above the ceiling",                   "rate_limit",      5_001, 0, 8_000, base(), false),
        ("at the ceiling (inclusive)",          "rate_limit",      5_000, 0, 8_000, base(), true),
        ("zero wait",                           "rate_limit",      0,     0, 8_000, base(), false),
        ("attempt == max_attempts",             "rate_limit",      3_000, 2, 8_000, base(), false),
        ("last allowed attempt",                "rate_limit",      3_000, 1, 8_000, base(), true),
        ("budget insufficient",                 "rate_limit",      3_000, 0, 2_999, base(), false),
        ("budget exactly the wait (inclusive)", "rate_limit",      3_000, 0, 3_000, base(), true),
        ("disabled",                            "rate_limit",      3_000, 0, 8_000, off,    false),
        // The reference's NaN/Infinity rows: the nearest u64 input is an absurd wait.
        ("absurd wait",                         "rate_limit", Millis::MAX, 0, Millis::MAX, base(), false),
    ];
    for (name, reason, wait, attempt, left, settings, allowed) in cases {
        assert_eq!(combo_wait_allowed(&r(reason), wait, attempt, left, &settings), allowed, "{name}");
    }
    for transient in ["rate_limit", "rate_limited", "transient", "overloaded", "server_error"] {
        assert!(combo_wait_allowed(&r(transient), 3_000, 0, 8_000, &base()), "{transient}");
    }
}

/// (name, locked targets, settings, Some((wait, target)) or None = no wait)
type ResolveCase = (
    &'static str,
    Vec<LockedTarget>,
    ComboWaitSettings,
    Option<(Millis, &'static str)>,
);

/// Ported from the reference's `combo-cooldown-retry` tests, part 2: resolving the decisive
/// target (`resolveComboCooldownWaitDecision`).
#[rustfmt::skip]
#[test]
fn reference_resolve_cases() {
    const M: Millis = COMBO_WAIT_MARGIN_MS;
    assert_eq!(M, 50, "the margin is a pinned constant");
    let off = ComboWaitSettings { enabled: false, ..base() };
    let cases: Vec<ResolveCase> = vec![
        ("transient lock within budget", vec![lock("c1", "rate_limit", 2_000, 2_000)], base(), Some((2_000 + M, "c1"))),
        ("quota_exhausted lock", vec![lock("c1", "quota_exhausted", 3_000, 2_000)], base(), None),
        ("disabled", vec![lock("c1", "rate_limit", 3_000, 2_000)], off, None),
        ("no locked target", vec![], base(), None),
        ("lapsed lock ignored", vec![lock("c1", "rate_limit", 0, 2_000)], base(), None),
        ("soonest of many",
            vec![lock("a", "rate_limit", 3_000, 0), lock("b", "rate_limit", 2_000, 0)],
            base(), Some((2_000 + M, "b"))),
        ("remaining + margin without hint", vec![lock("c1", "rate_limit", 1_500, 0)], base(), Some((1_500 + M, "c1"))),
        ("longer hint wins", vec![lock("c1", "rate_limit", 1_000, 3_000)], base(), Some((3_000 + M, "c1"))),
        ("hint above the ceiling", vec![lock("c1", "rate_limit", 1_000, 6_000)], base(), None),
        ("lock above the ceiling", vec![lock("c1", "rate_limit", 6_000, 0)], base(), None),
    ];
    for (name, targets, settings, want) in cases {
        let got = match decide_combo_wait(&targets, 0, 0, 0, &settings) {
            ComboWaitDecision::Wait { ms, target, .. } => Some((ms, target)),
            _ => None,
        };
        assert_eq!(got, want.map(|(ms, t)| (ms, t.to_owned())), "{name}");
    }
}

#[test]
fn budget_is_inclusive_after_elapsed_time() {
    let s = ComboWaitSettings::default();
    let t = [lock("c1", "rate_limit", 9_950, 0)]; // wait = 10 000
    let at_edge = decide_combo_wait(&t, 1, 290_000, 0, &s);
    assert!(
        matches!(at_edge, ComboWaitDecision::Wait { ms: 10_000, .. }),
        "{at_edge:?}"
    );
    let over = decide_combo_wait(&t, 1, 290_001, 0, &s);
    assert_eq!(
        over,
        ComboWaitDecision::RateLimited {
            retry_after_ms: 9_950,
            reset_at: 9_950
        }
    );
    let exhausted = decide_combo_wait(&t, 5, 0, 0, &s);
    assert!(
        matches!(exhausted, ComboWaitDecision::RateLimited { .. }),
        "attempts exhausted"
    );
}

#[test]
fn transient_obstacle_without_wait_is_a_429() {
    let s = ComboWaitSettings {
        max_wait_ms: 1_000,
        ..ComboWaitSettings::default()
    };
    let t = [
        lock("a", "overloaded", 4_000, 6_000),
        lock("b", "quota_exhausted", 9_000, 0),
    ];
    let d = decide_combo_wait(&t, 0, 0, 1_000_000, &s);
    assert_eq!(
        d,
        ComboWaitDecision::RateLimited {
            retry_after_ms: 6_000,
            reset_at: 1_006_000
        }
    );
    assert_eq!(
        (d.status(), d.code(), d.error_type()),
        (
            Some(429),
            Some("rate_limit_exceeded"),
            Some("rate_limit_error")
        )
    );
}

#[test]
fn non_transient_obstacle_is_all_targets_skipped_grouped_by_reason() {
    let t = [
        lock("a", "quota_exhausted", 3_600_000, 0),
        lock("b", "auth_error", 0, 0),
        lock("c", "quota_exhausted", 60_000, 0),
        lock("d", "rate_limit", 120_000, 0), // not the soonest
    ];
    let d = decide_combo_wait(&t, 0, 0, 10, &ComboWaitSettings::default());
    let want = ComboWaitDecision::AllTargetsSkipped {
        skipped_targets: vec![
            SkipGroup {
                reason: LockReason::QuotaExhausted,
                targets: vec!["a".into(), "c".into()],
            },
            SkipGroup {
                reason: LockReason::AuthError,
                targets: vec!["b".into()],
            },
            SkipGroup {
                reason: LockReason::RateLimit,
                targets: vec!["d".into()],
            },
        ],
        next_retry_at: Some(60_010),
    };
    assert_eq!(d, want);
    assert_eq!(
        (d.status(), d.code(), d.error_type()),
        (
            Some(503),
            Some("ALL_TARGETS_SKIPPED"),
            Some("service_unavailable")
        )
    );
    let none = decide_combo_wait(&[], 0, 0, 10, &ComboWaitSettings::default());
    assert_eq!(
        none,
        ComboWaitDecision::AllTargetsSkipped {
            skipped_targets: vec![],
            next_retry_at: None
        }
    );
    assert_eq!(none.status(), Some(503));
}

#[test]
fn reasons_round_trip_and_map_from_classification() {
    for s in [
        "rate_limit",
        "rate_limited",
        "transient",
        "overloaded",
        "server_error",
        "quota_exhausted",
        "auth_error",
        "not_found",
        "not_found_local",
        "circuit_open",
    ] {
        assert_eq!(r(s).as_str(), s);
    }
    use crate::outcome::FailureReason as F;
    assert!(LockReason::from(F::RateLimitExceeded).is_transient());
    assert!(LockReason::from(F::ModelCapacity).is_transient());
    assert!(LockReason::from(F::ServerError).is_transient());
    assert!(!LockReason::from(F::QuotaExhausted).is_transient());
    assert!(!LockReason::from(F::AuthError).is_transient());
    assert!(!LockReason::from(F::Unknown).is_transient());
}

#[test]
fn settings_clamp_to_reference_ranges() {
    let s = ComboWaitSettings {
        enabled: true,
        max_wait_ms: 400_000,
        max_attempts: 50,
        budget_ms: 1,
    }
    .clamped();
    assert_eq!(
        (s.max_wait_ms, s.max_attempts, s.budget_ms),
        (300_000, 10, 300_000)
    );
    let s = ComboWaitSettings {
        enabled: true,
        max_wait_ms: 90_000,
        max_attempts: 5,
        budget_ms: 60_000,
    }
    .clamped();
    assert_eq!(s.budget_ms, 90_000, "budget is at least max_wait");
    assert_eq!(
        ComboWaitSettings::default().clamped(),
        ComboWaitSettings::default()
    );
}

fn arb_reason() -> impl Strategy<Value = LockReason> {
    prop_oneof![
        Just("rate_limit"),
        Just("overloaded"),
        Just("server_error"),
        Just("quota_exhausted"),
        Just("auth_error"),
        Just("not_found"),
        Just("mystery"),
    ]
    .prop_map(LockReason::parse)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A wait never exceeds `max_wait_ms` nor the remaining budget, is never on a
    /// non-transient reason, and always outlasts the decisive lock.
    #[test]
    fn wait_is_always_bounded(
        targets in proptest::collection::vec(
            ("[a-z]{1,3}", arb_reason(), 0u64..400_000, 0u64..400_000)
                .prop_map(|(target, reason, remaining_ms, hint_ms)| LockedTarget { target, reason, remaining_ms, hint_ms }),
            0..8,
        ),
        attempts in 0u32..8,
        elapsed in 0u64..400_000,
        max_wait in 0u64..400_000,
        max_attempts in 0u32..8,
        budget in 0u64..400_000,
    ) {
        let s = ComboWaitSettings { enabled: true, max_wait_ms: max_wait, max_attempts, budget_ms: budget };
        if let ComboWaitDecision::Wait { ms, reason, target } = decide_combo_wait(&targets, attempts, elapsed, 0, &s) {
            prop_assert!(ms <= max_wait);
            prop_assert!(elapsed.saturating_add(ms) <= budget);
            prop_assert!(attempts < max_attempts);
            prop_assert!(reason.is_transient());
            let t = targets.iter().find(|t| t.target == target && t.reason == reason);
            prop_assert!(t.is_some_and(|t| ms > t.remaining_ms && ms > t.hint_ms));
        }
    }
}
