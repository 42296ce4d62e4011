use super::*;

pub(super) fn env(event: WireEvent) -> Envelope {
    Envelope {
        origin_node: "n1".to_owned(),
        origin_ts_ms: 1_764_000_000_000,
        seq: 7,
        event,
    }
}

fn s(v: &str) -> String {
    v.to_owned()
}

/// One sample of every variant, with every enum value of the fields somewhere.
fn samples() -> Vec<WireEvent> {
    use FailureReason as F;
    use TerminalStatus as T;
    let mut out = vec![
        WireEvent::CooldownSet {
            connection: s("c1"),
            until_remaining_ms: 60_000,
            backoff_level: 3,
            reason: F::RateLimitExceeded,
            terminal: None,
        },
        WireEvent::CooldownSet {
            connection: s("c2"),
            until_remaining_ms: 0,
            backoff_level: 0,
            reason: F::AuthError,
            terminal: Some(T::Expired),
        },
        WireEvent::CooldownCleared {
            connection: s("c1"),
        },
        WireEvent::CooldownEased {
            connection: s("c1"),
            backoff_level: 2,
            started_epoch_ms: 1_796_010_295_000,
        },
        WireEvent::TerminalReinstated {
            connection: s("c1"),
        },
        WireEvent::LockoutCleared {
            provider: s("glm"),
            connection: s("glm-1"),
            model: s("glm-5"),
        },
        WireEvent::SettingsVersion { version: u64::MAX },
        WireEvent::QueuePaused {
            connection: s("cg"),
            remaining_ms: 2_463,
        },
    ];
    for status in [T::Banned, T::Expired, T::CreditsExhausted] {
        out.push(WireEvent::TerminalSet {
            connection: s("c3"),
            status,
        });
    }
    for reason in [
        F::QuotaExhausted,
        F::RateLimitExceeded,
        F::ModelCapacity,
        F::ServerError,
        F::AuthError,
        F::Unknown,
    ] {
        out.push(WireEvent::LockoutSet {
            provider: s("openai"),
            connection: s("k1"),
            model: s("gpt-4.1"),
            remaining_ms: 120_000,
            failure_count: 2,
            reason,
        });
    }
    use BreakerPhase::{Closed, Degraded, HalfOpen, Open};
    for (from, to) in [
        (Closed, Degraded),
        (Degraded, Open),
        (Open, HalfOpen),
        (HalfOpen, Closed),
    ] {
        out.push(WireEvent::BreakerTransition {
            provider: s("anthropic"),
            from,
            to,
            generation: 42,
            retry_after_ms: 30_000,
        });
    }
    use LeaseEventKind::{Acquired, Expired, Released, Renewed, Revoked};
    for kind in [Acquired, Renewed, Released, Expired, Revoked] {
        out.push(WireEvent::LeaseEvent {
            connection: s("glm-1"),
            generation: 9,
            kind,
        });
    }
    out
}

#[test]
fn every_variant_round_trips() {
    let samples = samples();
    let mut kinds: Vec<&str> = samples.iter().map(WireEvent::kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds.len(), 11, "all eleven kinds present");
    for event in samples {
        let e = env(event);
        let bytes = encode(&e).expect("encodes");
        assert_eq!(bytes[0], WIRE_VERSION);
        assert_eq!(decode(&bytes), Ok(e));
    }
}

#[test]
fn cooldown_set_is_small() {
    let e = env(WireEvent::CooldownSet {
        connection: s("c1"),
        until_remaining_ms: 60_000,
        backoff_level: 3,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
    });
    let bytes = encode(&e).expect("encodes");
    // version 1 + node 3 + ts 9 + seq 1 + variant 1 + conn 3 + ms 3 + level 1 + reason 1 + none 1
    assert_eq!(bytes.len(), 24);
    assert!(bytes.len() < 64);
}

/// Pins the byte layout, including the variant order of the shared outcome enums: if this test
/// fails, the wire format changed and needs a new version (see the module docs).
#[test]
fn golden_bytes() {
    let e = Envelope {
        origin_node: s("n"),
        origin_ts_ms: 5,
        seq: 6,
        event: WireEvent::CooldownSet {
            connection: s("c"),
            until_remaining_ms: 300, // varint: 251 then u16 LE
            backoff_level: 2,
            reason: FailureReason::ServerError,
            terminal: Some(TerminalStatus::CreditsExhausted),
        },
    };
    let want = [1, 1, b'n', 5, 6, 0, 1, b'c', 251, 44, 1, 2, 3, 1, 2];
    assert_eq!(encode(&e).expect("encodes"), want);
    let lease = env(WireEvent::LeaseEvent {
        connection: s("x"),
        generation: 1,
        kind: LeaseEventKind::Revoked,
    });
    let bytes = encode(&lease).expect("encodes");
    assert_eq!(&bytes[bytes.len() - 5..], [8, 1, b'x', 1, 4]);
    let breaker = env(WireEvent::BreakerTransition {
        provider: s("p"),
        from: BreakerPhase::Open,
        to: BreakerPhase::HalfOpen,
        generation: 0,
        retry_after_ms: 0,
    });
    let bytes = encode(&breaker).expect("encodes");
    assert_eq!(&bytes[bytes.len() - 7..], [6, 1, b'p', 2, 3, 0, 0]);
    // The newest variant is appended: index 14, after `UsageWallLaneEnded` (13).
    let paused = env(WireEvent::QueuePaused {
        connection: s("q"),
        remaining_ms: 2_000, // varint: 251 then u16 LE
    });
    let bytes = encode(&paused).expect("encodes");
    assert_eq!(&bytes[bytes.len() - 6..], [14, 1, b'q', 251, 208, 7]);
}

/// A node of an older release meets an event appended after its last variant: it gets an
/// error it counts and drops (never a panic, never a misread as another event), which is what
/// a rolling upgrade relies on when a newer node publishes `QueuePaused`.
#[test]
fn an_event_appended_later_is_an_error_for_a_decoder_that_does_not_know_it() {
    let bytes = encode(&env(WireEvent::QueuePaused {
        connection: s("q"),
        remaining_ms: 2_000,
    }))
    .expect("encodes");
    let variant_at = bytes.len() - 6;
    assert_eq!(bytes[variant_at], 14);
    let mut unknown = bytes.clone();
    unknown[variant_at] = 15; // one past the last variant this build knows
    assert!(
        matches!(decode(&unknown), Err(WireError::Malformed(_))),
        "{:?}",
        decode(&unknown)
    );
}

#[test]
fn rejects_bad_input() {
    let good = encode(&env(WireEvent::CooldownCleared {
        connection: s("c1"),
    }))
    .expect("encodes");
    assert_eq!(decode(&[]), Err(WireError::Truncated));
    assert_eq!(decode(&[WIRE_VERSION]), Err(WireError::Truncated));
    for v in [0u8, 2, 255] {
        let mut other = good.clone();
        other[0] = v;
        assert_eq!(decode(&other), Err(WireError::UnknownVersion(v)));
    }
    for cut in 1..good.len() {
        assert_eq!(
            decode(&good[..cut]),
            Err(WireError::Truncated),
            "prefix of {cut} bytes"
        );
    }
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0, 0]);
    assert_eq!(
        decode(&trailing),
        Err(WireError::TrailingBytes { extra: 2 })
    );

    let oversized = vec![WIRE_VERSION; MAX_MESSAGE_BYTES + 1];
    assert_eq!(
        decode(&oversized),
        Err(WireError::TooLarge {
            len: MAX_MESSAGE_BYTES + 1,
            max: MAX_MESSAGE_BYTES
        })
    );

    // Unknown event variant index.
    let mut bad_variant = good.clone();
    let variant_at = good.len() - 4; // variant, then the connection id "c1" (length + 2 bytes)
    bad_variant[variant_at] = 200;
    assert!(
        matches!(decode(&bad_variant), Err(WireError::Malformed(_))),
        "{:?}",
        decode(&bad_variant)
    );
    // A string length prefix far beyond the input (varint 0xFC = u32 follows).
    let huge_len = [WIRE_VERSION, 0xFC, 0xFF, 0xFF, 0xFF, 0x7F];
    assert!(matches!(
        decode(&huge_len),
        Err(WireError::Malformed(_) | WireError::Truncated)
    ));
    // Invalid UTF-8 in the node id.
    let bad_utf8 = [WIRE_VERSION, 1, 0xFF, 0, 0, 1, 1, b'c'];
    assert!(matches!(decode(&bad_utf8), Err(WireError::Malformed(_))));
}

#[test]
fn encode_refuses_what_receivers_would_reject() {
    let mut e = env(WireEvent::CooldownCleared { connection: s("c") });
    e.origin_node = "n".repeat(MAX_MESSAGE_BYTES);
    assert!(matches!(encode(&e), Err(WireError::TooLarge { .. })));
    e.origin_node = "n".repeat(MAX_MESSAGE_BYTES - 64);
    let bytes = encode(&e).expect("just under the limit");
    assert_eq!(decode(&bytes), Ok(e));
}

#[test]
fn propagation_delay_saturates() {
    let e = env(WireEvent::SettingsVersion { version: 1 });
    assert_eq!(e.propagation_delay_ms(e.origin_ts_ms + 12), 12);
    assert_eq!(
        e.propagation_delay_ms(0),
        0,
        "receiver clock behind the sender's"
    );
}
