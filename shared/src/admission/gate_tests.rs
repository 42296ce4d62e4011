use super::*;

const FREE: GateView = GateView {
    cap: 0,
    in_use: 0,
    waiting: 0,
};

fn v(cap: u32, in_use: u32, waiting: u32) -> GateView {
    GateView {
        cap,
        in_use,
        waiting,
    }
}

#[test]
fn order_is_fixed() {
    assert_eq!(
        gate_order().map(GateLevel::as_str),
        ["global", "provider", "connection", "model"]
    );
}

type GateCase = (Vec<GateView>, Option<(GateLevel, GateDecision)>);

#[rustfmt::skip]
#[test]
fn first_blocking_gate_table() {
    use GateDecision::{Queue, RejectQueueFull};
    use GateLevel::{Connection, Global, Model, Provider};
    let q = 20;
    let cases: Vec<GateCase> = vec![
        (vec![], None),                                   // no views: unlimited everywhere
        (vec![FREE; 4], None),                            // caps of 0 are unlimited
        (vec![v(10, 9, 0), v(5, 4, 0), v(1, 0, 0), v(2, 1, 0)], None),
        (vec![v(10, 10, 0), FREE, FREE, FREE], Some((Global, Queue))),
        (vec![FREE, v(5, 5, 3), FREE, FREE], Some((Provider, Queue))),
        (vec![FREE, FREE, v(1, 1, 19), FREE], Some((Connection, Queue))),
        (vec![FREE, FREE, v(1, 1, 20), FREE], Some((Connection, RejectQueueFull))),
        (vec![FREE, FREE, FREE, v(2, 2, 0)], Some((Model, Queue))),
        // The earliest saturated level wins even if a later one is also saturated.
        (vec![FREE, v(1, 1, 20), v(1, 1, 0), v(1, 1, 0)], Some((Provider, RejectQueueFull))),
        // A free permit with waiters ahead: queue behind them (no barging).
        (vec![v(3, 2, 1), FREE, FREE, FREE], Some((Global, Queue))),
        // Over the cap after a runtime cap decrease is still saturated.
        (vec![FREE, FREE, v(1, 4, 0)], Some((Connection, Queue))),
        // Extra views beyond the four levels are ignored.
        (vec![FREE, FREE, FREE, FREE, v(1, 1, 0)], None),
    ];
    for (views, want) in cases {
        assert_eq!(first_blocking_gate(&views, q), want, "{views:?}");
        let folded = want.map_or(GateDecision::Acquire, |(_, d)| d);
        assert_eq!(gate_decision(&views, q), folded);
    }
}

#[test]
fn zero_max_queue_rejects_instead_of_queueing() {
    assert_eq!(
        first_blocking_gate(&[v(1, 1, 0)], 0),
        Some((GateLevel::Global, GateDecision::RejectQueueFull))
    );
}

#[test]
fn semaphore_errors_are_typed_429s() {
    let s = ConcurrencySettings::default();
    assert_eq!(s.semaphore_max_queue, 20);
    assert_eq!(s.semaphore_queue_timeout_ms, 30_000);
    assert!(s.quota_share_fail_open);

    assert!(check_semaphore_wait(GateLevel::Connection, 30_000, &s).is_ok());
    let e = check_semaphore_wait(GateLevel::Connection, 30_001, &s).err();
    let Some(e) = e else {
        unreachable!("timeout expected")
    };
    assert_eq!(
        (e.status(), e.code(), e.error_type()),
        (429, "SEMAPHORE_TIMEOUT", "rate_limit_error")
    );
    assert_eq!(e.level(), GateLevel::Connection);

    let full = SemaphoreError::QueueFull {
        level: GateLevel::Model,
        max_queue: 20,
    };
    assert_eq!(
        (full.status(), full.code(), full.error_type()),
        (429, "SEMAPHORE_QUEUE_FULL", "rate_limit_error")
    );
    assert!(full.to_string().contains("model"));
}

#[test]
fn saturated_gate_never_cools_anything() {
    for e in [
        SemaphoreError::Timeout {
            level: GateLevel::Global,
            waited_ms: 1,
        },
        SemaphoreError::QueueFull {
            level: GateLevel::Connection,
            max_queue: 20,
        },
    ] {
        assert_eq!(e.breaker_outcome(), BreakerOutcome::Ignore);
    }
}

#[test]
fn quota_share_is_fail_open() {
    let err = SemaphoreError::Timeout {
        level: GateLevel::Connection,
        waited_ms: 30_001,
    };
    let open = ConcurrencySettings::default();
    assert_eq!(
        quota_share_on_error(err, &open),
        QuotaShareOutcome::ProceedWithoutSlot
    );
    let closed = ConcurrencySettings {
        quota_share_fail_open: false,
        ..open
    };
    assert_eq!(
        quota_share_on_error(err, &closed),
        QuotaShareOutcome::Reject(err)
    );
}
