//! Property tests: arbitrary envelopes round-trip, hostile bytes never panic.

use proptest::prelude::*;

use super::tests::env;
use super::*;

fn arb_reason() -> impl Strategy<Value = FailureReason> {
    use FailureReason as F;
    prop_oneof![
        Just(F::QuotaExhausted),
        Just(F::RateLimitExceeded),
        Just(F::ModelCapacity),
        Just(F::ServerError),
        Just(F::AuthError),
        Just(F::Unknown),
    ]
}

fn arb_terminal() -> impl Strategy<Value = TerminalStatus> {
    prop_oneof![
        Just(TerminalStatus::Banned),
        Just(TerminalStatus::Expired),
        Just(TerminalStatus::CreditsExhausted)
    ]
}

fn arb_phase() -> impl Strategy<Value = BreakerPhase> {
    use BreakerPhase::{Closed, Degraded, HalfOpen, Open};
    prop_oneof![Just(Closed), Just(Degraded), Just(Open), Just(HalfOpen)]
}

fn arb_kind() -> impl Strategy<Value = LeaseEventKind> {
    use LeaseEventKind::{Acquired, Expired, Released, Renewed, Revoked};
    prop_oneof![
        Just(Acquired),
        Just(Renewed),
        Just(Released),
        Just(Expired),
        Just(Revoked)
    ]
}

fn arb_event() -> impl Strategy<Value = WireEvent> {
    let id = || "\\PC{0,24}";
    prop_oneof![
        (
            id(),
            any::<u64>(),
            any::<u32>(),
            arb_reason(),
            proptest::option::of(arb_terminal())
        )
            .prop_map(
                |(connection, until_remaining_ms, backoff_level, reason, terminal)| {
                    WireEvent::CooldownSet {
                        connection,
                        until_remaining_ms,
                        backoff_level,
                        reason,
                        terminal,
                    }
                }
            ),
        id().prop_map(|connection| WireEvent::CooldownCleared { connection }),
        (id(), any::<u32>(), any::<u64>()).prop_map(
            |(connection, backoff_level, started_epoch_ms)| WireEvent::CooldownEased {
                connection,
                backoff_level,
                started_epoch_ms,
            }
        ),
        (id(), arb_terminal())
            .prop_map(|(connection, status)| WireEvent::TerminalSet { connection, status }),
        id().prop_map(|connection| WireEvent::TerminalReinstated { connection }),
        (id(), id(), id(), any::<u64>(), any::<u32>(), arb_reason()).prop_map(
            |(provider, connection, model, remaining_ms, failure_count, reason)| {
                WireEvent::LockoutSet {
                    provider,
                    connection,
                    model,
                    remaining_ms,
                    failure_count,
                    reason,
                }
            }
        ),
        (id(), id(), id()).prop_map(|(provider, connection, model)| WireEvent::LockoutCleared {
            provider,
            connection,
            model
        }),
        (id(), arb_phase(), arb_phase(), any::<u64>(), any::<u64>()).prop_map(
            |(provider, from, to, generation, retry_after_ms)| WireEvent::BreakerTransition {
                provider,
                from,
                to,
                generation,
                retry_after_ms,
            }
        ),
        any::<u64>().prop_map(|version| WireEvent::SettingsVersion { version }),
        (id(), any::<u64>(), arb_kind()).prop_map(|(connection, generation, kind)| {
            WireEvent::LeaseEvent {
                connection,
                generation,
                kind,
            }
        }),
        (id(), any::<u64>()).prop_map(|(connection, remaining_ms)| WireEvent::QueuePaused {
            connection,
            remaining_ms,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_envelopes_round_trip(
        origin_node in "\\PC{0,32}",
        origin_ts_ms in any::<u64>(),
        seq in any::<u64>(),
        event in arb_event(),
    ) {
        let e = Envelope { origin_node, origin_ts_ms, seq, event };
        let bytes = encode(&e).expect("small envelopes encode");
        prop_assert!(bytes.len() <= MAX_MESSAGE_BYTES);
        prop_assert_eq!(decode(&bytes), Ok(e));
    }

    /// Hostile input never panics.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
        let mut versioned = bytes;
        versioned.insert(0, WIRE_VERSION);
        let _ = decode(&versioned);
    }

    /// Flipping any byte of a valid message gives an error or a (different) valid envelope,
    /// never a panic.
    #[test]
    fn corrupted_messages_never_panic(event in arb_event(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = encode(&env(event)).expect("encodes");
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let _ = decode(&bytes);
    }
}
