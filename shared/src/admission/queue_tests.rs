use super::*;

#[test]
fn defaults_match_the_example_config() {
    let s = QueueSettings::default();
    assert_eq!(s.requests_per_minute, 60);
    assert_eq!(s.min_time_between_requests_ms, 350);
    assert_eq!(s.concurrent_requests, 6);
    assert_eq!(s.max_wait_ms, 30_000);
    assert_eq!(s.execution_max_wait_ms, 600_000);
    assert_eq!(s.max_queue_depth, 0);
    assert_eq!(s.clamped(), s, "defaults are already in range");
    let pacing = s.rate_limit();
    assert_eq!(
        (
            pacing.requests_per_minute,
            pacing.min_time_between_requests_ms
        ),
        (60, 350)
    );
}

#[test]
fn depth_check_table() {
    // (waiting, max_depth, admitted)
    let cases = [
        (0, 0, true), // 0 = unbounded
        (1_000_000, 0, true),
        (0, 2, true),
        (1, 2, true),
        (2, 2, false), // at the cap: rejected
        (5, 2, false), // over the cap
        (0, 1, true),
        (1, 1, false),
        (99_999, 200_000, true), // depth clamps to 100 000
        (100_000, 200_000, false),
    ];
    for (waiting, max_depth, admitted) in cases {
        let r = check_queue_depth(waiting, max_depth);
        assert_eq!(r.is_ok(), admitted, "waiting {waiting}, max {max_depth}");
        if let Err(e) = r {
            assert_eq!(e.code(), "RATE_LIMIT_QUEUE_FULL");
            assert_eq!(e.status(), 429);
            assert_eq!(e.error_type(), "rate_limit_error");
        }
    }
}

#[test]
fn depth_counts_waiting_only() {
    // Six requests executing (the concurrent cap) and none waiting: depth 1 still admits one
    // to wait, because executing requests are bounded by `concurrent_requests`, not the depth.
    let (executing, waiting) = (6, 0);
    assert!(check_queue_depth(waiting, 1).is_ok());
    // Passing the executing count by mistake would reject it.
    assert!(check_queue_depth(executing, 1).is_err());
}

#[test]
fn wait_budget_is_inclusive_and_typed() {
    assert!(check_queue_wait(0, 30_000).is_ok());
    assert!(check_queue_wait(30_000, 30_000).is_ok());
    let e = check_queue_wait(30_001, 30_000).err();
    assert_eq!(
        e,
        Some(AdmissionError::QueueTimeout {
            waited_ms: 30_001,
            max_wait_ms: 30_000
        })
    );
    let e = e.map(|e| (e.status(), e.code(), e.error_type()));
    assert_eq!(
        e,
        Some((429, "RATE_LIMIT_QUEUE_TIMEOUT", "rate_limit_error"))
    );
    // A zero budget clamps to 1 ms rather than rejecting everything.
    assert!(check_queue_wait(1, 0).is_ok());
    assert!(check_queue_wait(2, 0).is_err());
}

#[test]
fn execution_budget_raised_to_headers_timeout() {
    // (execution_max_wait_ms, headers_timeout_ms, budget)
    let cases = [
        (600_000, 0, 600_000),
        (600_000, 300_000, 600_000),
        (600_000, 900_000, 900_000),
        (0, 0, 1),                                    // clamped up to 1 ms
        (u64::MAX, 0, MAX_WAIT_MS),                   // clamped down to 24 h
        (u64::MAX, MAX_WAIT_MS + 1, MAX_WAIT_MS + 1), // a longer headers timeout still wins
    ];
    for (exec, headers, budget) in cases {
        assert_eq!(
            execution_budget_ms(exec, headers),
            budget,
            "{exec} / {headers}"
        );
    }
    assert!(check_execution_time(900_000, 900_000).is_ok());
    let e = check_execution_time(900_001, 900_000).err();
    assert_eq!(
        e.map(|e| (e.status(), e.code())),
        Some((504, "RATE_LIMIT_EXECUTION_TIMEOUT"))
    );
}

#[test]
fn clamps() {
    let wild = QueueSettings {
        requests_per_minute: 0,
        min_time_between_requests_ms: u64::MAX,
        concurrent_requests: 1_000_000,
        max_wait_ms: 0,
        execution_max_wait_ms: u64::MAX,
        max_queue_depth: u32::MAX,
    }
    .clamped();
    assert_eq!(wild.requests_per_minute, 1);
    assert_eq!(wild.min_time_between_requests_ms, 3_600_000);
    assert_eq!(wild.concurrent_requests, 10_000);
    assert_eq!(wild.max_wait_ms, 1);
    assert_eq!(wild.execution_max_wait_ms, 24 * 60 * 60 * 1000);
    assert_eq!(wild.max_queue_depth, 100_000);
    assert_eq!(clamp_wait(MAX_WAIT_MS), MAX_WAIT_MS);
    assert_eq!(clamp_depth(0), 0, "0 stays unbounded");
}

#[test]
fn connection_override_zero_inherits() {
    let base = QueueSettings::default();
    let o = QueueSettings {
        requests_per_minute: 10,
        min_time_between_requests_ms: 0,
        concurrent_requests: 0,
        max_wait_ms: 5_000,
        execution_max_wait_ms: 0,
        max_queue_depth: 3,
    };
    let eff = base.overridden_by(&o);
    assert_eq!(eff.requests_per_minute, 10);
    assert_eq!(eff.min_time_between_requests_ms, 350);
    assert_eq!(eff.concurrent_requests, 6);
    assert_eq!(eff.max_wait_ms, 5_000);
    assert_eq!(eff.execution_max_wait_ms, 600_000);
    assert_eq!(eff.max_queue_depth, 3);
}

#[test]
fn queue_enabled_table() {
    use ProviderCategory::{Apikey, Local, Oauth};
    // (category, explicit, auto, env, enabled)
    let cases = [
        (Apikey, false, true, None, true), // auto-enable covers every apikey connection
        (Apikey, false, false, None, false),
        (Apikey, false, false, Some(true), true), // env forces on over the persisted value
        (Apikey, false, true, Some(false), false), // env forces off over the persisted value
        (Apikey, true, true, Some(false), true),  // the explicit opt-in always wins
        (Apikey, true, false, None, true),
        (Oauth, false, true, None, false), // auto-enable is for apikey only
        (Oauth, false, true, Some(true), false),
        (Oauth, true, false, None, true), // explicit opt-in works for any category
        (Local, false, true, Some(true), false),
        (Local, true, false, Some(false), true),
    ];
    for (cat, explicit, auto, env, enabled) in cases {
        assert_eq!(
            queue_enabled(cat, explicit, auto, env),
            enabled,
            "{cat:?} explicit={explicit} auto={auto} env={env:?}"
        );
    }
    // `rate_limit_protection = false` is the same input as "not set": it cannot opt out.
    assert!(queue_enabled(Apikey, false, true, None));
}

#[test]
fn queue_rejections_never_touch_the_breaker() {
    for e in [
        AdmissionError::QueueFull {
            waiting: 1,
            max_depth: 1,
        },
        AdmissionError::QueueTimeout {
            waited_ms: 2,
            max_wait_ms: 1,
        },
    ] {
        assert!(!e.reached_upstream());
        assert_eq!(e.breaker_outcome(), Some(BreakerOutcome::Ignore));
        assert!(!e.to_string().is_empty());
    }
    let exec = AdmissionError::ExecutionTimeout {
        elapsed_ms: 2,
        budget_ms: 1,
    };
    assert!(exec.reached_upstream());
    assert_eq!(
        exec.breaker_outcome(),
        None,
        "classified like any attempt timeout"
    );
}
