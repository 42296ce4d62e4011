use super::*;

fn cooling(id: &str, remaining_ms: Millis, scope: CoolingScope) -> BlockedConnection {
    BlockedConnection {
        connection: id.to_owned(),
        block: ConnectionBlock::Cooling {
            remaining_ms,
            scope,
            reason: FailureReason::RateLimitExceeded,
        },
    }
}

fn terminal(id: &str, s: TerminalStatus) -> BlockedConnection {
    BlockedConnection {
        connection: id.to_owned(),
        block: ConnectionBlock::Terminal(s),
    }
}

use CoolingScope::{Connection as Conn, Model};
use TerminalStatus::{Banned, CreditsExhausted, Expired};

#[derive(Debug, PartialEq)]
enum Want {
    Wait(Millis),
    Cooling(&'static str, Millis),
    Terminal(TerminalStatus),
    Nothing,
}

fn summarise(d: DirectWaitDecision) -> Want {
    match d {
        DirectWaitDecision::Wait { ms, .. } => Want::Wait(ms),
        DirectWaitDecision::Cooling(c) => Want::Cooling(c.code(), c.retry_after_ms),
        DirectWaitDecision::AllTerminal(t) => Want::Terminal(t.dominant),
        DirectWaitDecision::NoConnections => Want::Nothing,
    }
}

/// (name, connections, retries so far, elapsed, settings, want)
type DirectCase = (
    &'static str,
    Vec<BlockedConnection>,
    u32,
    Millis,
    WaitForCooldownSettings,
    Want,
);

#[rustfmt::skip]
#[test]
fn direct_wait_table() {
    let on = WaitForCooldownSettings::default();
    let off = WaitForCooldownSettings { enabled: false, ..on };
    let cc = "connection_cooldown";
    let cases: Vec<DirectCase> = vec![
        ("waits for the earliest", vec![cooling("a", 40_000, Conn), cooling("b", 5_000, Conn)], 0, 0, on, Want::Wait(5_000)),
        ("at max_retry_wait (inclusive)", vec![cooling("a", 90_000, Conn)], 0, 0, on, Want::Wait(90_000)),
        ("beyond max_retry_wait", vec![cooling("a", 90_001, Conn)], 0, 0, on, Want::Cooling(cc, 90_001)),
        ("budget exactly enough", vec![cooling("a", 10_000, Conn)], 1, 290_000, on, Want::Wait(10_000)),
        ("budget short by 1 ms", vec![cooling("a", 10_000, Conn)], 1, 290_001, on, Want::Cooling(cc, 10_000)),
        ("last allowed retry", vec![cooling("a", 1_000, Conn)], 4, 0, on, Want::Wait(1_000)),
        ("retries exhausted", vec![cooling("a", 1_000, Conn)], 5, 0, on, Want::Cooling(cc, 1_000)),
        ("disabled answers at once", vec![cooling("a", 1_000, Conn)], 0, 0, off, Want::Cooling(cc, 1_000)),
        ("only model lockouts", vec![cooling("a", 200_000, Model), cooling("b", 100_000, Model)], 0, 0, on,
            Want::Cooling("model_cooldown", 100_000)),
        ("mixed scopes", vec![cooling("a", 200_000, Model), cooling("b", 100_000, Conn)], 0, 0, on, Want::Cooling(cc, 100_000)),
        ("terminal ones are ignored for the wait", vec![terminal("x", Banned), cooling("a", 2_000, Conn)], 0, 0, on,
            Want::Wait(2_000)),
        ("terminal + model lockout", vec![terminal("x", Expired), cooling("a", 200_000, Model)], 0, 0, on,
            Want::Cooling("model_cooldown", 200_000)),
        ("all terminal", vec![terminal("x", Expired), terminal("y", Expired), terminal("z", Banned)], 0, 0, on,
            Want::Terminal(Expired)),
        ("terminal tie goes to the more severe", vec![terminal("x", Expired), terminal("y", Banned)], 0, 0, on,
            Want::Terminal(Banned)),
        ("credits beat expired on a tie", vec![terminal("x", Expired), terminal("y", CreditsExhausted)], 0, 0, on,
            Want::Terminal(CreditsExhausted)),
        ("no connections", vec![], 0, 0, on, Want::Nothing),
    ];
    for (name, conns, retries, elapsed, settings, want) in cases {
        assert_eq!(summarise(decide_direct_wait(&conns, retries, elapsed, &settings)), want, "{name}");
    }
}

#[test]
fn cooling_answer_carries_reset_seconds_and_reasons() {
    let conns = [
        cooling("a", 65_001, Conn),
        terminal("t", Banned),
        cooling("b", 70_000, Model),
    ];
    let d = decide_direct_wait(&conns, 5, 0, &WaitForCooldownSettings::default());
    let DirectWaitDecision::Cooling(c) = d else {
        panic!("expected a 429, got {d:?}")
    };
    assert_eq!(
        (c.status(), c.code(), c.error_type()),
        (429, "connection_cooldown", "rate_limit_error")
    );
    assert_eq!(c.retry_after_ms, 65_001);
    assert_eq!(c.reset_seconds, 66);
    assert_eq!(crate::admission::retry_after_secs(c.retry_after_ms), 66);
    let ids: Vec<&str> = c
        .connections
        .iter()
        .map(|c| c.connection.as_str())
        .collect();
    assert_eq!(
        ids,
        ["a", "b"],
        "terminal connections are not listed as cooling"
    );
    assert!(
        c.connections
            .iter()
            .all(|c| c.reason == FailureReason::RateLimitExceeded)
    );
}

#[test]
fn terminal_answer_is_a_401() {
    let d = decide_direct_wait(
        &[terminal("x", CreditsExhausted)],
        0,
        0,
        &WaitForCooldownSettings::default(),
    );
    let DirectWaitDecision::AllTerminal(t) = d else {
        panic!("expected a 401, got {d:?}")
    };
    assert_eq!(
        (t.status(), t.code(), t.error_type()),
        (401, "all_connections_terminal", "authentication_error")
    );
    assert_eq!(t.connections, vec![("x".to_owned(), CreditsExhausted)]);
}

#[test]
fn wait_counts_retries_and_clamps() {
    let d = decide_direct_wait(
        &[cooling("a", 1, Conn)],
        2,
        0,
        &WaitForCooldownSettings::default(),
    );
    assert_eq!(d, DirectWaitDecision::Wait { ms: 1, retry: 3 });
    let s = WaitForCooldownSettings {
        enabled: true,
        max_retries: 99,
        max_retry_wait_ms: 999_999,
        budget_ms: 5,
    }
    .clamped();
    assert_eq!(
        (s.max_retries, s.max_retry_wait_ms, s.budget_ms),
        (10, 300_000, 300_000)
    );
    assert_eq!(
        WaitForCooldownSettings::default().clamped(),
        WaitForCooldownSettings::default()
    );
}

mod prop {
    use proptest::prelude::*;

    use super::*;

    fn arb_block() -> impl Strategy<Value = ConnectionBlock> {
        prop_oneof![
            (0u64..400_000, any::<bool>()).prop_map(|(remaining_ms, model)| {
                ConnectionBlock::Cooling {
                    remaining_ms,
                    scope: if model { Model } else { Conn },
                    reason: FailureReason::RateLimitExceeded,
                }
            }),
            prop_oneof![Just(Banned), Just(Expired), Just(CreditsExhausted)]
                .prop_map(ConnectionBlock::Terminal),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A direct wait never exceeds `max_retry_wait_ms`, the remaining budget or the retry
        /// count, and is always the earliest cooling connection's remaining time.
        #[test]
        fn direct_wait_is_always_bounded(
            blocks in proptest::collection::vec(arb_block(), 0..6),
            retries in 0u32..8,
            elapsed in 0u64..400_000,
            max_retries in 0u32..8,
            max_wait in 0u64..400_000,
            budget in 0u64..400_000,
        ) {
            let conns: Vec<BlockedConnection> = blocks
                .into_iter()
                .enumerate()
                .map(|(i, block)| BlockedConnection { connection: format!("c{i}"), block })
                .collect();
            let s = WaitForCooldownSettings {
                enabled: true, max_retries, max_retry_wait_ms: max_wait, budget_ms: budget,
            };
            if let DirectWaitDecision::Wait { ms, retry } = decide_direct_wait(&conns, retries, elapsed, &s) {
                prop_assert!(ms <= max_wait);
                prop_assert!(elapsed.saturating_add(ms) <= budget);
                prop_assert!(retry <= max_retries);
                let earliest = conns.iter().filter_map(|c| match c.block {
                    ConnectionBlock::Cooling { remaining_ms, .. } => Some(remaining_ms),
                    ConnectionBlock::Terminal(_) => None,
                }).min();
                prop_assert_eq!(Some(ms), earliest);
            }
        }
    }
}
