use proptest::prelude::*;

use super::*;

fn limiter(rpm: u32, gap: Millis) -> RateState {
    RateState::new(RateLimit {
        requests_per_minute: rpm,
        min_time_between_requests_ms: gap,
    })
}

#[test]
fn unlimited_admits_everything() {
    let mut r = limiter(0, 0);
    for t in 0..1_000 {
        assert_eq!(r.try_acquire(t), Ok(()));
    }
}

#[test]
fn rpm_burst_then_refuse_until_the_oldest_slot_leaves() {
    let mut r = limiter(3, 0);
    let t0 = 1_700_000_000_500; // mid-slot
    for _ in 0..3 {
        assert_eq!(r.try_acquire(t0), Ok(()));
    }
    // The slot of t0 starts at ..._000 and is counted whole until 61 s after that start.
    let free_at = 1_700_000_000_000 + 61_000;
    assert_eq!(r.try_acquire(t0 + 10), Err(free_at - (t0 + 10)));
    assert_eq!(r.next_slot(t0), free_at);
    assert!(r.try_acquire(free_at - 1).is_err());
    assert_eq!(r.try_acquire(free_at), Ok(()));
}

#[test]
fn refusal_changes_nothing() {
    let mut r = limiter(1, 500);
    assert_eq!(r.try_acquire(10_000), Ok(()));
    let before = r.clone();
    assert!(r.try_acquire(10_100).is_err());
    assert_eq!(
        r, before,
        "all-or-nothing: a refused acquire leaves no trace"
    );
}

#[test]
fn spacing_table() {
    // (gap, first, second, result of the second)
    let cases: [(Millis, Millis, Millis, Result<(), Millis>); 5] = [
        (350, 1_000, 1_349, Err(1)),
        (350, 1_000, 1_350, Ok(())),
        (350, 1_000, 1_000, Err(350)),
        (0, 1_000, 1_000, Ok(())),
        (350, 1_000, 900, Err(350)), // clock stepped back: treated as no time passed
    ];
    for (gap, first, second, want) in cases {
        let mut r = limiter(0, gap);
        assert_eq!(r.try_acquire(first), Ok(()));
        assert_eq!(
            r.try_acquire(second),
            want,
            "gap {gap}, {first} then {second}"
        );
    }
}

#[test]
fn spacing_and_rpm_combine_by_the_later_constraint() {
    let mut r = limiter(2, 350);
    assert_eq!(r.try_acquire(0), Ok(()));
    assert_eq!(r.try_acquire(100), Err(250)); // spacing
    assert_eq!(r.try_acquire(350), Ok(()));
    assert_eq!(r.next_slot(700), 61_000); // rpm, not spacing
}

#[test]
fn set_limit_keeps_history() {
    let mut r = limiter(10, 0);
    for t in 0..5 {
        assert_eq!(r.try_acquire(t), Ok(()));
    }
    r.set_limit(RateLimit {
        requests_per_minute: 5,
        min_time_between_requests_ms: 0,
    });
    assert_eq!(r.limit().requests_per_minute, 5);
    assert_eq!(r.in_window(10), 5);
    assert!(r.try_acquire(10).is_err());
}

#[test]
fn long_idle_gap_resets_the_window() {
    let mut r = limiter(1, 0);
    assert_eq!(r.try_acquire(5_000), Ok(()));
    assert_eq!(r.try_acquire(10_000_000), Ok(()));
    assert_eq!(r.in_window(10_000_000), 1);
}

#[test]
fn no_overflow_near_the_end_of_time() {
    // Arithmetic saturates at the end of time instead of wrapping or panicking.
    let mut r = limiter(1, Millis::MAX);
    assert_eq!(r.try_acquire(Millis::MAX - 1), Ok(()));
    assert_eq!(r.next_slot(Millis::MAX - 1), Millis::MAX);
    let _ = r.try_acquire(Millis::MAX);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Never more than `rpm` admissions in any 60 s window, spacing always honoured, and the
    /// advertised retry delay is exact.
    #[test]
    fn never_more_than_rpm_in_any_window(
        rpm in 1u32..20,
        gap in prop_oneof![Just(0u64), 0u64..2_000],
        start in 0u64..10_000_000_000,
        steps in proptest::collection::vec(0u64..5_000, 1..300),
    ) {
        let mut r = limiter(rpm, gap);
        let mut now = start;
        let mut admitted: Vec<Millis> = Vec::new();
        for step in steps {
            now += step;
            match r.try_acquire(now) {
                Ok(()) => admitted.push(now),
                Err(wait) => {
                    prop_assert!(wait > 0);
                    let mut probe = r.clone();
                    prop_assert!(probe.try_acquire(now + wait - 1).is_err());
                    prop_assert!(probe.try_acquire(now + wait).is_ok());
                }
            }
        }
        for (i, &t) in admitted.iter().enumerate() {
            let in_window = admitted[..=i].iter().filter(|&&a| a + WINDOW_MS > t).count();
            prop_assert!(in_window <= rpm as usize, "{} admissions in the 60 s ending at {}", in_window, t);
            if i > 0 {
                prop_assert!(t - admitted[i - 1] >= gap);
            }
        }
    }
}

#[test]
fn a_pause_holds_admissions_until_it_ends() {
    let mut r = RateState::new(RateLimit::default());
    r.pause_until(5_000);
    assert_eq!(r.try_acquire(1_000), Err(4_000));
    assert_eq!(r.paused_until(1_000), Some(5_000));
    // An earlier pause does not shorten it.
    r.pause_until(2_000);
    assert_eq!(r.next_slot(1_000), 5_000);
    assert_eq!(r.try_acquire(5_000), Ok(()));
    assert_eq!(r.paused_until(5_000), None);
}
