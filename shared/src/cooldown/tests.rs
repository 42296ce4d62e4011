//! Table tests mirroring the cooldown rows of docs/error-effects.md and docs/policy.md (`cooldown`).

use super::*;
use crate::outcome::{
    CooldownHint, FailureReason, ProviderCategory, TerminalSignal, TerminalStatus,
};

const SEC: Millis = 1_000;

fn oauth() -> CooldownParams {
    CooldownParams::for_category(ProviderCategory::Oauth)
}

fn apikey() -> CooldownParams {
    CooldownParams::for_category(ProviderCategory::Apikey)
}

fn failure(reason: FailureReason, hint: CooldownHint) -> ConnEvent {
    ConnEvent::Failure(FailureObservation {
        status: Some(429),
        reason,
        hint,
        terminal: TerminalSignal::None,
        stream_stall: false,
        message: "rate limited".to_owned(),
    })
}

fn scaled() -> ConnEvent {
    failure(
        FailureReason::RateLimitExceeded,
        CooldownHint::ScaledBackoff,
    )
}

fn signal(terminal: TerminalSignal) -> ConnEvent {
    ConnEvent::Failure(FailureObservation {
        status: Some(401),
        reason: FailureReason::AuthError,
        hint: CooldownHint::None,
        terminal,
        stream_stall: false,
        message: "invalid credential".to_owned(),
    })
}

fn stall() -> ConnEvent {
    ConnEvent::Failure(FailureObservation {
        status: None,
        reason: FailureReason::ServerError,
        hint: CooldownHint::ScaledBackoff,
        terminal: TerminalSignal::None,
        stream_stall: true,
        message: "stream stalled".to_owned(),
    })
}

fn remote(
    until: Option<Millis>,
    backoff_level: u32,
    terminal: Option<TerminalStatus>,
) -> ConnEvent {
    ConnEvent::Remote(RemoteCooldown {
        until,
        backoff_level,
        terminal,
    })
}

fn step(state: &ConnState, event: &ConnEvent, params: &CooldownParams, now: Millis) -> ConnState {
    on_event(state, event, params, now).0
}

/// Fails once per lapsed cooldown and returns each cooldown's duration and the level after it.
fn backoff_sequence(params: &CooldownParams, failures: usize) -> Vec<(Millis, u32)> {
    let mut state = ConnState::default();
    let mut now = 1_000_000;
    let mut out = Vec::new();
    for _ in 0..failures {
        let (next, effects) = on_event(&state, &scaled(), params, now);
        match effects.as_slice() {
            [Effect::CooldownSet { until, level, .. }] => {
                assert_eq!(next.rate_limited_until, Some(*until));
                assert_eq!(next.backoff_level, *level);
                out.push((until - now, *level));
                now = *until;
            }
            other => panic!("expected one CooldownSet, got {other:?}"),
        }
        state = next;
    }
    out
}

#[test]
fn category_profiles() {
    let rows = [
        (ProviderCategory::Oauth, 5_000, 8, false),
        (ProviderCategory::Apikey, 3_000, 5, true),
        (ProviderCategory::Local, 2_000, 3, false),
    ];
    for (category, base, steps, hints) in rows {
        let p = CooldownParams::for_category(category);
        assert_eq!(
            (
                p.base_cooldown_ms,
                p.max_backoff_steps,
                p.use_upstream_retry_hints
            ),
            (base, steps, hints),
            "{category:?}"
        );
        assert_eq!(p.max_cooldown_ms, 1_800_000);
        assert_eq!((p.expired_retry_max, p.request_rejected_ban_streak), (3, 3));
        assert!(!p.disable_cooling && !p.stream_stall_cooldown);
    }
    assert_eq!(CooldownParams::default(), apikey());
}

#[test]
fn backoff_sequences_per_category() {
    let rows: [(CooldownParams, &[Millis]); 3] = [
        (apikey(), &[3, 6, 12, 24, 48, 96, 96, 96]),
        (oauth(), &[5, 10, 20, 40, 80, 160, 320, 640, 1280, 1280]),
        (
            CooldownParams::for_category(ProviderCategory::Local),
            &[2, 4, 8, 16, 16],
        ),
    ];
    for (params, expected_secs) in rows {
        let got = backoff_sequence(&params, expected_secs.len());
        let secs: Vec<Millis> = got.iter().map(|(ms, _)| ms / SEC).collect();
        assert_eq!(secs, expected_secs);
        let levels: Vec<u32> = got.iter().map(|(_, level)| *level).collect();
        let expected_levels: Vec<u32> = (1..=expected_secs.len() as u32)
            .map(|l| l.min(params.max_backoff_steps))
            .collect();
        assert_eq!(levels, expected_levels);
    }
}

#[test]
fn scaled_backoff_caps_at_max_cooldown() {
    let params = CooldownParams {
        max_backoff_steps: 20,
        ..apikey()
    };
    let secs: Vec<Millis> = backoff_sequence(&params, 13)
        .iter()
        .map(|(ms, _)| ms / SEC)
        .collect();
    // 3·2^9 = 1536 s, 3·2^10 = 3072 s > 1800 s.
    assert_eq!(secs[9], 1536);
    assert_eq!(&secs[10..], &[1800, 1800, 1800]);

    let tight = CooldownParams {
        max_cooldown_ms: 60 * SEC,
        ..oauth()
    };
    assert_eq!(scaled_backoff(&tight, 4), (60 * SEC, 5));
    assert_eq!(scaled_backoff(&tight, 8), (60 * SEC, 8));
}

#[test]
fn scaled_backoff_never_overflows() {
    let params = CooldownParams {
        base_cooldown_ms: Millis::MAX / 2,
        max_backoff_steps: u32::MAX,
        max_cooldown_ms: Millis::MAX,
        ..apikey()
    };
    assert_eq!(scaled_backoff(&params, 200), (Millis::MAX, 201));
    assert_eq!(scaled_backoff(&params, u32::MAX).1, u32::MAX);
    let (state, _) = on_event(&ConnState::default(), &scaled(), &params, Millis::MAX - 5);
    assert_eq!(state.rate_limited_until, Some(Millis::MAX));
}

#[test]
fn hint_rows() {
    const HOUR: Millis = 3_600 * SEC;
    const DAY: Millis = 24 * HOUR;
    let level_two = ConnState {
        backoff_level: 2,
        ..ConnState::default()
    };
    // (params, hint, expected cooldown, expected level after; starting from level 2)
    let rows = [
        // Upstream hints replace the backoff, bypass max_cooldown_ms, keep the level.
        (apikey(), CooldownHint::Upstream(HOUR), Some(HOUR), 2),
        (
            apikey(),
            CooldownHint::Upstream(45 * SEC),
            Some(45 * SEC),
            2,
        ),
        // ... but never exceed 30 days.
        (
            apikey(),
            CooldownHint::Upstream(40 * DAY),
            Some(30 * DAY),
            2,
        ),
        // OAuth ignores upstream hints by default: scaled backoff (5 s · 2^2).
        (oauth(), CooldownHint::Upstream(HOUR), Some(20 * SEC), 3),
        // Fixed rule durations are not capped by max_cooldown_ms (only by 30 days) and keep
        // the level.
        (apikey(), CooldownHint::Fixed(120 * SEC), Some(120 * SEC), 2),
        (apikey(), CooldownHint::Fixed(2 * HOUR), Some(2 * HOUR), 2),
        // Scaled backoff: 3 s · 2^2.
        (apikey(), CooldownHint::ScaledBackoff, Some(12 * SEC), 3),
        // No cooldown: the error is recorded, nothing else moves.
        (apikey(), CooldownHint::None, None, 2),
        (apikey(), CooldownHint::Fixed(0), None, 2),
        (apikey(), CooldownHint::Upstream(0), None, 2),
    ];
    let now = 50 * SEC;
    for (params, hint, cooldown, level) in rows {
        let event = failure(FailureReason::QuotaExhausted, hint);
        let (next, effects) = on_event(&level_two, &event, &params, now);
        assert_eq!(next.backoff_level, level, "{hint:?}");
        assert_eq!(next.last_error_type, Some(FailureReason::QuotaExhausted));
        assert_eq!(next.error_code, Some(429));
        assert_eq!(next.last_error_at, Some(now));
        match cooldown {
            Some(ms) => {
                assert_eq!(next.rate_limited_until, Some(now + ms), "{hint:?}");
                assert_eq!(next.status, ConnStatus::Unavailable);
                assert_eq!(
                    effects,
                    [Effect::CooldownSet {
                        until: now + ms,
                        level,
                        reason: FailureReason::QuotaExhausted
                    }]
                );
            }
            None => {
                assert_eq!(next.rate_limited_until, None, "{hint:?}");
                assert_eq!(next.status, ConnStatus::Active);
                assert_eq!(
                    effects,
                    [Effect::ErrorRecorded {
                        reason: FailureReason::QuotaExhausted
                    }]
                );
            }
        }
    }
}

#[test]
fn thundering_herd_is_absorbed() {
    let params = apikey();
    let now = 10 * SEC;
    let (cooling, _) = on_event(&ConnState::default(), &scaled(), &params, now);
    assert_eq!(cooling.backoff_level, 1);
    let herd = [
        scaled(),
        failure(
            FailureReason::QuotaExhausted,
            CooldownHint::Upstream(3_600 * SEC),
        ),
        failure(FailureReason::ServerError, CooldownHint::Fixed(60 * SEC)),
        signal(TerminalSignal::AuthFailure),
        signal(TerminalSignal::RequestRejected),
        stall(),
    ];
    for (offset, event) in [0, 0, 1, 500, 2_000, 2_999].into_iter().zip(&herd) {
        let (next, effects) = on_event(&cooling, event, &params, now + offset);
        assert_eq!(next, cooling, "{event:?}");
        assert_eq!(
            effects,
            [Effect::AlreadyCooling {
                remaining_ms: 3 * SEC - offset
            }]
        );
    }
    // Once the cooldown lapses the next failure escalates from the kept level.
    let (next, _) = on_event(&cooling, &scaled(), &params, now + 3 * SEC);
    assert_eq!(next.backoff_level, 2);
    assert_eq!(next.rate_limited_until, Some(now + 3 * SEC + 6 * SEC));
}

#[test]
fn level_is_kept_when_a_cooldown_lapses() {
    // The reference reset the level to 0 once the cooldown passed; Switchyard keeps it.
    let params = apikey();
    let mut state = ConnState::default();
    for now in [0, 3 * SEC, 9 * SEC] {
        state = step(&state, &scaled(), &params, now);
    }
    assert_eq!(state.backoff_level, 3);
    let much_later = 10 * 3_600 * SEC;
    assert!(is_available(&state, much_later));
    let (next, _) = on_event(&state, &scaled(), &params, much_later);
    assert_eq!(next.rate_limited_until, Some(much_later + 24 * SEC));
    assert_eq!(next.backoff_level, 4);
}

#[test]
fn immediate_terminal_signals() {
    let rows = [
        (TerminalSignal::Banned, TerminalStatus::Banned),
        (
            TerminalSignal::CreditsExhausted,
            TerminalStatus::CreditsExhausted,
        ),
    ];
    for (sig, terminal) in rows {
        for start in [
            ConnState::default(),
            // Even while cooling: a definitive signal is not dropped by the herd guard.
            step(&ConnState::default(), &scaled(), &apikey(), 0),
        ] {
            let (next, effects) = on_event(&start, &signal(sig), &apikey(), SEC);
            assert_eq!(effects, [Effect::BecameTerminal(terminal)]);
            assert_eq!(next.status, ConnStatus::Terminal(terminal));
            assert_eq!(
                next.rate_limited_until, start.rate_limited_until,
                "no new cooldown"
            );
            assert_eq!(next.backoff_level, start.backoff_level);
            assert_eq!(next.last_error.as_deref(), Some("invalid credential"));
            assert!(is_terminal(&next));
            assert!(!is_available(&next, Millis::MAX));
            assert!(!needs_success_report(&next));

            // Sticky: failures, successes, clears and peers change nothing.
            for event in [
                scaled(),
                signal(TerminalSignal::CreditsExhausted),
                ConnEvent::Success { started: 2 * SEC },
                ConnEvent::OperatorClear,
                remote(Some(10 * SEC), 4, Some(TerminalStatus::Expired)),
            ] {
                let (after, effects) = on_event(&next, &event, &apikey(), 2 * SEC);
                assert_eq!(after, next, "{event:?}");
                assert_eq!(effects, [Effect::SkippedTerminal]);
            }
        }
    }
}

#[test]
fn expired_only_after_consecutive_auth_failures() {
    let params = oauth();
    let auth = signal(TerminalSignal::AuthFailure);
    let mut state = ConnState::default();
    let mut now = 0;
    // Two transient cooldowns with the scaled backoff, then terminal.
    for (cooldown, level) in [(5 * SEC, 1), (10 * SEC, 2)] {
        let (next, effects) = on_event(&state, &auth, &params, now);
        assert_eq!(
            effects,
            [Effect::CooldownSet {
                until: now + cooldown,
                level,
                reason: FailureReason::AuthError
            }]
        );
        state = next;
        now += cooldown;
    }
    assert_eq!(state.consecutive_auth_failures, 2);
    let (expired, effects) = on_event(&state, &auth, &params, now);
    assert_eq!(effects, [Effect::BecameTerminal(TerminalStatus::Expired)]);
    assert_eq!(
        expired.status,
        ConnStatus::Terminal(TerminalStatus::Expired)
    );
    assert_eq!(
        expired.backoff_level, 2,
        "terminal does not raise the level"
    );

    // Reaching the limit needs *consecutive* failures: a success or another kind resets it.
    for breaker in [
        ConnEvent::Success {
            started: Millis::MAX,
        },
        scaled(),
        signal(TerminalSignal::RequestRejected),
    ] {
        let mut s = ConnState::default();
        let mut t = 0;
        for event in [&auth, &auth, &breaker, &auth, &auth] {
            s = step(&s, event, &params, t);
            t += 1_000 * SEC;
        }
        assert!(!is_terminal(&s), "{breaker:?}");
        assert_eq!(s.consecutive_auth_failures, 2);
    }
}

#[test]
fn auth_failure_during_a_cooldown_does_not_count() {
    let params = oauth();
    let auth = signal(TerminalSignal::AuthFailure);
    let state = step(&ConnState::default(), &auth, &params, 0);
    let after = step(&step(&state, &auth, &params, 1), &auth, &params, 2);
    assert_eq!(after.consecutive_auth_failures, 1);
    assert!(!is_terminal(&after));
}

#[test]
fn request_rejected_ban_streak() {
    let params = apikey();
    let rejected = signal(TerminalSignal::RequestRejected);
    let mut state = ConnState::default();
    let mut now = 0;
    for streak in 1..=2 {
        let (next, effects) = on_event(&state, &rejected, &params, now);
        assert!(
            matches!(effects.as_slice(), [Effect::CooldownSet { .. }]),
            "{effects:?}"
        );
        assert_eq!(next.request_rejected_streak, streak);
        now = next.rate_limited_until.unwrap_or(now);
        state = next;
    }
    let (banned, effects) = on_event(&state, &rejected, &params, now);
    assert_eq!(effects, [Effect::BecameTerminal(TerminalStatus::Banned)]);
    assert_eq!(banned.status, ConnStatus::Terminal(TerminalStatus::Banned));

    let lenient = CooldownParams {
        request_rejected_ban_streak: 5,
        ..params
    };
    let mut s = ConnState::default();
    for i in 0..4 {
        s = step(&s, &rejected, &lenient, i * 1_000 * SEC);
    }
    assert!(!is_terminal(&s));
}

#[test]
fn disable_cooling_records_but_never_cools() {
    let params = CooldownParams {
        disable_cooling: true,
        ..apikey()
    };
    let events = [
        scaled(),
        failure(
            FailureReason::QuotaExhausted,
            CooldownHint::Upstream(60 * SEC),
        ),
        failure(FailureReason::ServerError, CooldownHint::Fixed(60 * SEC)),
        signal(TerminalSignal::AuthFailure),
    ];
    for event in &events {
        let (next, effects) = on_event(&ConnState::default(), event, &params, SEC);
        assert!(
            matches!(effects.as_slice(), [Effect::ErrorRecorded { .. }]),
            "{effects:?}"
        );
        assert_eq!(next.rate_limited_until, None);
        assert_eq!(next.backoff_level, 0);
        assert!(next.last_error.is_some() && next.last_error_at == Some(SEC));
        assert!(is_available(&next, SEC));
    }
    // Terminal states still apply, counting ones included.
    let (next, effects) = on_event(
        &ConnState::default(),
        &signal(TerminalSignal::CreditsExhausted),
        &params,
        0,
    );
    assert_eq!(
        effects,
        [Effect::BecameTerminal(TerminalStatus::CreditsExhausted)]
    );
    assert!(is_terminal(&next));
    let mut s = ConnState::default();
    for now in 0..3 {
        s = step(&s, &signal(TerminalSignal::AuthFailure), &params, now);
    }
    assert_eq!(s.status, ConnStatus::Terminal(TerminalStatus::Expired));
    // A peer's cooldown does not apply either.
    let (next, _) = on_event(
        &ConnState::default(),
        &remote(Some(60 * SEC), 2, None),
        &params,
        0,
    );
    assert_eq!(next.rate_limited_until, None);
    assert_eq!(next.backoff_level, 2);
}

#[test]
fn stream_stall_cools_only_when_enabled() {
    let (next, effects) = on_event(&ConnState::default(), &stall(), &apikey(), SEC);
    assert_eq!(
        effects,
        [Effect::ErrorRecorded {
            reason: FailureReason::ServerError
        }]
    );
    assert_eq!((next.rate_limited_until, next.backoff_level), (None, 0));
    assert_eq!(next.last_error.as_deref(), Some("stream stalled"));
    assert_eq!(next.error_code, None);

    let params = CooldownParams {
        stream_stall_cooldown: true,
        ..apikey()
    };
    let (next, effects) = on_event(&ConnState::default(), &stall(), &params, SEC);
    assert_eq!(
        effects,
        [Effect::CooldownSet {
            until: 4 * SEC,
            level: 1,
            reason: FailureReason::ServerError
        }]
    );
    assert_eq!(next.rate_limited_until, Some(4 * SEC));
}

#[test]
fn an_enabled_stall_cooldown_cools_a_stall_that_carries_no_hint() {
    // Classification gives a stall no hint of its own (`CooldownHint::None`).
    let event = ConnEvent::Failure(FailureObservation {
        status: None,
        reason: FailureReason::ServerError,
        hint: CooldownHint::None,
        terminal: TerminalSignal::None,
        stream_stall: true,
        message: "stream stalled".to_owned(),
    });
    let (next, _) = on_event(&ConnState::default(), &event, &apikey(), SEC);
    assert_eq!(next.rate_limited_until, None, "off by default");
    let params = CooldownParams {
        stream_stall_cooldown: true,
        ..apikey()
    };
    let (next, effects) = on_event(&ConnState::default(), &event, &params, SEC);
    assert_eq!(
        effects,
        [Effect::CooldownSet {
            until: 4 * SEC,
            level: 1,
            reason: FailureReason::ServerError
        }]
    );
    assert_eq!(next.rate_limited_until, Some(4 * SEC));
}

#[test]
fn success_clears_errors_and_decays_level_by_one() {
    let params = oauth();
    let mut state = ConnState::default();
    for now in [0, 5 * SEC, 15 * SEC] {
        state = step(&state, &scaled(), &params, now);
    }
    assert_eq!(state.backoff_level, 3);
    assert!(needs_success_report(&state));

    // A success while still cooling (an attempt dispatched after the failure) clears it too.
    let (next, effects) = on_event(
        &state,
        &ConnEvent::Success { started: 16 * SEC },
        &params,
        16 * SEC,
    );
    assert_eq!(
        effects,
        [Effect::Cleared, Effect::LevelDecayed { level: 2 }]
    );
    assert_eq!(
        next,
        ConnState {
            backoff_level: 2,
            ..ConnState::default()
        }
    );
    assert!(is_available(&next, 16 * SEC));

    let (next, effects) = on_event(
        &next,
        &ConnEvent::Success { started: 17 * SEC },
        &params,
        17 * SEC,
    );
    assert_eq!(effects, [Effect::LevelDecayed { level: 1 }]);
    assert!(needs_success_report(&next));
    let (next, _) = on_event(
        &next,
        &ConnEvent::Success { started: 18 * SEC },
        &params,
        18 * SEC,
    );
    assert_eq!(next, ConnState::default());
    assert!(!needs_success_report(&next));

    // Steady state: a success is a no-op.
    let (same, effects) = on_event(
        &next,
        &ConnEvent::Success { started: 19 * SEC },
        &params,
        19 * SEC,
    );
    assert_eq!((same, effects), (ConnState::default(), vec![]));

    // An error with no cooldown still needs reporting so it gets cleared.
    let errored = step(
        &ConnState::default(),
        &failure(FailureReason::Unknown, CooldownHint::None),
        &params,
        0,
    );
    assert!(needs_success_report(&errored));
    assert_eq!(
        on_event(&errored, &ConnEvent::Success { started: 1 }, &params, 1),
        (ConnState::default(), vec![Effect::Cleared])
    );
}

#[test]
fn operator_clear_versus_reinstate() {
    let params = apikey();
    let mut cooling = ConnState::default();
    for now in [0, 3 * SEC] {
        cooling = step(&cooling, &signal(TerminalSignal::AuthFailure), &params, now);
    }
    assert!(!is_available(&cooling, 4 * SEC));

    // OperatorClear: usable now, errors and streaks gone, backoff memory kept.
    let (cleared, effects) = on_event(&cooling, &ConnEvent::OperatorClear, &params, 4 * SEC);
    assert_eq!(effects, [Effect::Cleared]);
    assert_eq!(
        cleared,
        ConnState {
            backoff_level: 2,
            ..ConnState::default()
        }
    );
    assert_eq!(
        on_event(&cleared, &ConnEvent::OperatorClear, &params, 5 * SEC),
        (cleared.clone(), vec![])
    );

    // OperatorClear never lifts a terminal state; Reinstate does, back to a fresh state.
    let banned = step(&cooling, &signal(TerminalSignal::Banned), &params, 4 * SEC);
    let (still, effects) = on_event(&banned, &ConnEvent::OperatorClear, &params, 5 * SEC);
    assert_eq!(
        (still, effects),
        (banned.clone(), vec![Effect::SkippedTerminal])
    );
    let (fresh, effects) = on_event(&banned, &ConnEvent::Reinstate, &params, 5 * SEC);
    assert_eq!(effects, [Effect::Reinstated(TerminalStatus::Banned)]);
    assert_eq!(fresh, ConnState::default());

    // Reinstate on a non-terminal connection resets it fully, level included.
    assert_eq!(
        on_event(&cooling, &ConnEvent::Reinstate, &params, 5 * SEC),
        (ConnState::default(), vec![Effect::Cleared])
    );
    assert_eq!(
        on_event(
            &ConnState::default(),
            &ConnEvent::Reinstate,
            &params,
            5 * SEC
        ),
        (ConnState::default(), vec![])
    );
}

#[test]
fn remote_merge_is_extend_only() {
    let params = apikey();
    let now = 100 * SEC;
    let local = ConnState {
        rate_limited_until: Some(now + 30 * SEC),
        status: ConnStatus::Unavailable,
        backoff_level: 3,
        ..ConnState::default()
    };
    // (remote until, remote level) -> (merged until, merged level)
    let rows = [
        (Some(now + 60 * SEC), 1, Some(now + 60 * SEC), 3),
        (Some(now + 10 * SEC), 4, Some(now + 30 * SEC), 4),
        (None, 0, Some(now + 30 * SEC), 3),
        (Some(now + 10 * SEC), 99, Some(now + 30 * SEC), 5),
        (Some(Millis::MAX), 0, Some(now + MAX_UPSTREAM_HINT_MS), 3),
    ];
    for (until, level, merged_until, merged_level) in rows {
        let (next, effects) = on_event(&local, &remote(until, level, None), &params, now);
        assert_eq!(next.rate_limited_until, merged_until, "{until:?} {level}");
        assert_eq!(next.backoff_level, merged_level);
        assert_eq!(next.status, ConnStatus::Unavailable);
        if next == local {
            assert!(effects.is_empty());
        } else {
            assert_eq!(
                effects,
                [Effect::MergedRemote {
                    until: merged_until,
                    level: merged_level,
                    terminal: None
                }]
            );
        }
    }

    // A peer's cooldown makes an active connection unavailable.
    let (next, _) = on_event(
        &ConnState::default(),
        &remote(Some(now + SEC), 1, None),
        &params,
        now,
    );
    assert_eq!(next.status, ConnStatus::Unavailable);
    assert!(!is_available(&next, now));
    assert_eq!(remaining_ms(&next, now), SEC);
    // A stale replay does not make it unavailable.
    let (next, _) = on_event(
        &ConnState::default(),
        &remote(Some(now - SEC), 0, None),
        &params,
        now,
    );
    assert_eq!(next.status, ConnStatus::Active);
    assert!(is_available(&next, now));

    // A peer's terminal state is adopted and sticky; a later peer cannot change its kind.
    let expired = remote(None, 0, Some(TerminalStatus::Expired));
    let (next, effects) = on_event(&local, &expired, &params, now);
    assert_eq!(next.status, ConnStatus::Terminal(TerminalStatus::Expired));
    assert_eq!(next.rate_limited_until, local.rate_limited_until);
    assert_eq!(
        effects,
        [Effect::MergedRemote {
            until: local.rate_limited_until,
            level: 3,
            terminal: Some(TerminalStatus::Expired)
        }]
    );
    let banned = remote(None, 0, Some(TerminalStatus::Banned));
    assert_eq!(
        on_event(&next, &banned, &params, now),
        (next.clone(), vec![Effect::SkippedTerminal])
    );
}

#[test]
fn read_helpers() {
    let state = ConnState {
        rate_limited_until: Some(10 * SEC),
        status: ConnStatus::Unavailable,
        ..ConnState::default()
    };
    assert_eq!(remaining_ms(&state, 4 * SEC), 6 * SEC);
    assert_eq!(remaining_ms(&state, 10 * SEC), 0);
    assert_eq!(remaining_ms(&state, 11 * SEC), 0);
    assert!(!is_available(&state, 4 * SEC));
    assert!(is_available(&state, 10 * SEC));
    assert!(!is_terminal(&state));
    assert_eq!(remaining_ms(&ConnState::default(), 0), 0);
}

#[test]
fn last_error_keeps_the_first_hundred_characters() {
    let long: String = "é".repeat(150);
    let event = ConnEvent::Failure(FailureObservation {
        status: Some(500),
        reason: FailureReason::ServerError,
        hint: CooldownHint::None,
        terminal: TerminalSignal::None,
        stream_stall: false,
        message: long,
    });
    let state = step(&ConnState::default(), &event, &apikey(), 0);
    let kept = state.last_error.unwrap_or_default();
    assert_eq!(kept.chars().count(), LAST_ERROR_MAX_CHARS);
    assert_eq!(kept, "é".repeat(100));
}

#[test]
fn state_round_trips_through_json() {
    let state = ConnState {
        rate_limited_until: Some(1_700_000_000_000),
        status: ConnStatus::Terminal(TerminalStatus::CreditsExhausted),
        backoff_level: 4,
        last_error: Some("insufficient_quota".to_owned()),
        last_error_type: Some(FailureReason::QuotaExhausted),
        error_code: Some(402),
        last_error_at: Some(1_699_999_999_000),
        consecutive_auth_failures: 0,
        request_rejected_streak: 1,
    };
    let json = serde_json::to_value(&state).unwrap_or_default();
    assert_eq!(json["status"], "credits_exhausted");
    assert_eq!(json["last_error_type"], "quota_exhausted");
    assert_eq!(json["rate_limited_until"], 1_700_000_000_000u64);
    let back: ConnState = serde_json::from_value(json).unwrap_or_default();
    assert_eq!(back, state);

    for status in [
        ConnStatus::Active,
        ConnStatus::Unavailable,
        ConnStatus::Terminal(TerminalStatus::Banned),
        ConnStatus::Terminal(TerminalStatus::Expired),
        ConnStatus::Terminal(TerminalStatus::CreditsExhausted),
    ] {
        assert_eq!(status.as_str().parse::<ConnStatus>(), Ok(status));
        assert_eq!(status.to_string(), status.as_str());
    }
    assert!("cooling".parse::<ConnStatus>().is_err());
    assert!(serde_json::from_str::<ConnState>(r#"{"status":"cooling"}"#).is_err());

    // Missing fields take their defaults, so older rows still load.
    let partial: Result<ConnState, _> = serde_json::from_str(r#"{"backoff_level":2}"#);
    assert_eq!(
        partial.ok(),
        Some(ConnState {
            backoff_level: 2,
            ..ConnState::default()
        })
    );
}

#[test]
fn a_success_older_than_the_last_failure_is_stale_and_remote_failures_count() {
    let params = CooldownParams::default();
    let fresh = ConnState::default();
    assert!(!success_is_stale(&fresh, 0), "nothing failed yet");
    let failure = ConnEvent::Failure(FailureObservation {
        status: Some(429),
        reason: FailureReason::RateLimitExceeded,
        hint: CooldownHint::Fixed(2 * SEC),
        terminal: TerminalSignal::None,
        stream_stall: false,
        message: "slow down".into(),
    });
    let (cooling, _) = on_event(&fresh, &failure, &params, 10 * SEC);
    assert!(
        success_is_stale(&cooling, 10 * SEC - 1),
        "started before the failure"
    );
    assert!(!success_is_stale(&cooling, 10 * SEC), "started with it");
    assert!(!success_is_stale(&cooling, 11 * SEC));
    // A peer's cooldown merged at 20 s makes earlier attempts stale too.
    let remote = ConnEvent::Remote(RemoteCooldown {
        until: Some(25 * SEC),
        backoff_level: 1,
        terminal: None,
    });
    let (merged, _) = on_event(&fresh, &remote, &params, 20 * SEC);
    assert!(success_is_stale(&merged, 19 * SEC));
    assert!(!success_is_stale(&merged, 21 * SEC));
    // The transition applies it: a stale success leaves the cooldown, a fresh one clears it.
    let stale = ConnEvent::Success { started: 19 * SEC };
    assert_eq!(
        on_event(&merged, &stale, &params, 21 * SEC),
        (merged.clone(), vec![])
    );
    let fresh_success = ConnEvent::Success { started: 21 * SEC };
    let (cleared, effects) = on_event(&merged, &fresh_success, &params, 22 * SEC);
    assert!(effects.contains(&Effect::Cleared), "{effects:?}");
    assert!(is_available(&cleared, 22 * SEC));
}
