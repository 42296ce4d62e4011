//! Property tests: the module's invariants over random event sequences with advancing time.

use proptest::prelude::*;

use super::*;
use crate::outcome::{
    CooldownHint, FailureReason, ProviderCategory, TerminalSignal, TerminalStatus,
};

fn params() -> impl Strategy<Value = CooldownParams> {
    (
        prop_oneof![
            Just(ProviderCategory::Oauth),
            Just(ProviderCategory::Apikey),
            Just(ProviderCategory::Local),
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        1u32..5,
        1u32..5,
    )
        .prop_map(
            |(category, hints, disable, stall, expired, ban)| CooldownParams {
                use_upstream_retry_hints: hints,
                disable_cooling: disable,
                stream_stall_cooldown: stall,
                expired_retry_max: expired,
                request_rejected_ban_streak: ban,
                ..CooldownParams::for_category(category)
            },
        )
}

fn terminal_status() -> impl Strategy<Value = TerminalStatus> {
    prop_oneof![
        Just(TerminalStatus::Banned),
        Just(TerminalStatus::Expired),
        Just(TerminalStatus::CreditsExhausted),
    ]
}

fn observation() -> impl Strategy<Value = FailureObservation> {
    let reason = prop_oneof![
        Just(FailureReason::QuotaExhausted),
        Just(FailureReason::RateLimitExceeded),
        Just(FailureReason::ModelCapacity),
        Just(FailureReason::ServerError),
        Just(FailureReason::AuthError),
        Just(FailureReason::Unknown),
    ];
    let hint = prop_oneof![
        2 => Just(CooldownHint::None),
        4 => Just(CooldownHint::ScaledBackoff),
        1 => (0u64..4_000_000).prop_map(CooldownHint::Fixed),
        1 => (0u64..4_000_000_000).prop_map(CooldownHint::Upstream),
    ];
    // Terminal signals are rarer than plain failures so sequences also explore deep backoff.
    let terminal = prop_oneof![
        12 => Just(TerminalSignal::None),
        3 => Just(TerminalSignal::AuthFailure),
        3 => Just(TerminalSignal::RequestRejected),
        1 => Just(TerminalSignal::Banned),
        1 => Just(TerminalSignal::CreditsExhausted),
    ];
    (
        proptest::option::of(400u16..600),
        reason,
        hint,
        terminal,
        proptest::bool::weighted(0.15),
        ".{0,120}",
    )
        .prop_map(|(status, reason, hint, terminal, stream_stall, message)| {
            FailureObservation {
                status,
                reason,
                hint,
                terminal,
                stream_stall,
                message,
            }
        })
}

fn event() -> impl Strategy<Value = ConnEvent> {
    prop_oneof![
        10 => observation().prop_map(ConnEvent::Failure),
        3 => (0u64..30_000_000).prop_map(|started| ConnEvent::Success { started }),
        1 => Just(ConnEvent::OperatorClear),
        1 => Just(ConnEvent::Reinstate),
        2 => (
            proptest::option::of(0u64..20_000_000),
            0u32..12,
            proptest::option::weighted(0.1, terminal_status()),
        )
            .prop_map(|(until, backoff_level, terminal)| ConnEvent::Remote(RemoteCooldown {
                until,
                backoff_level,
                terminal,
            })),
    ]
}

/// Events with the time elapsed since the previous one; a third of them arrive at the same
/// instant as their predecessor (concurrent completions).
fn timeline(max_len: usize) -> impl Strategy<Value = Vec<(Millis, ConnEvent)>> {
    let gap = prop_oneof![
        1 => Just(0u64),
        1 => 1u64..5_000,
        1 => 5_000u64..2_000_000,
    ];
    proptest::collection::vec((gap, event()), 0..max_len)
}

fn resets_deadline(event: &ConnEvent) -> bool {
    matches!(
        event,
        ConnEvent::Success { .. } | ConnEvent::OperatorClear | ConnEvent::Reinstate
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn invariants_hold_over_random_sequences(params in params(), events in timeline(40)) {
        let ceiling = MAX_UPSTREAM_HINT_MS.max(params.max_cooldown_ms);
        let mut state = ConnState::default();
        let mut now: Millis = 1_000_000;
        for (gap, event) in events {
            now += gap;
            let (next, effects) = on_event(&state, &event, &params, now);

            prop_assert!(next.backoff_level <= params.max_backoff_steps);
            if !resets_deadline(&event) {
                prop_assert!(
                    next.rate_limited_until >= state.rate_limited_until,
                    "deadline moved back on {:?}", event
                );
            }
            if next.rate_limited_until != state.rate_limited_until
                && let Some(until) = next.rate_limited_until
            {
                prop_assert!(until <= now + ceiling);
            }
            if let Some(terminal) = state.status.terminal() {
                if matches!(event, ConnEvent::Reinstate) {
                    prop_assert_eq!(&next, &ConnState::default());
                    prop_assert_eq!(&effects, &vec![Effect::Reinstated(terminal)]);
                } else {
                    // Sticky, and nothing else is written either.
                    prop_assert_eq!(&next, &state);
                    prop_assert_eq!(&effects, &vec![Effect::SkippedTerminal]);
                }
            }
            if params.disable_cooling && next.rate_limited_until != state.rate_limited_until {
                prop_assert!(resets_deadline(&event));
            }
            if let ConnEvent::Failure(observation) = &event
                && remaining_ms(&state, now) > 0
                && !is_terminal(&next)
            {
                // The herd guard: a failure during a cooldown writes nothing.
                prop_assert_eq!(&next, &state);
                prop_assert!(!matches!(
                    observation.terminal,
                    TerminalSignal::Banned | TerminalSignal::CreditsExhausted
                ));
            }
            if next.backoff_level > state.backoff_level && !matches!(event, ConnEvent::Remote(_)) {
                // The level rises only with a cooldown it priced.
                let set_cooldown = effects.iter().any(|e| matches!(e, Effect::CooldownSet { .. }));
                prop_assert!(set_cooldown);
                prop_assert_eq!(next.backoff_level, state.backoff_level + 1);
            }
            if !needs_success_report(&state) && matches!(event, ConnEvent::Success { .. }) {
                // Skipping the report on the hot path loses nothing.
                prop_assert_eq!(&next, &state);
            }
            if let Some(message) = &next.last_error {
                prop_assert!(message.chars().count() <= LAST_ERROR_MAX_CHARS);
            }

            let json = serde_json::to_string(&next);
            prop_assert!(json.is_ok());
            let back: Result<ConnState, _> = serde_json::from_str(&json.unwrap_or_default());
            prop_assert_eq!(back.ok(), Some(next.clone()));
            state = next;
        }
    }

    #[test]
    fn concurrent_failures_raise_the_level_at_most_once(
        params in params(),
        history in timeline(25),
        burst in proptest::collection::vec(observation(), 1..10),
    ) {
        let mut state = ConnState::default();
        let mut now: Millis = 1_000_000;
        for (gap, event) in history {
            now += gap;
            state = on_event(&state, &event, &params, now).0;
        }
        let before = state.clone();
        for observation in burst {
            state = on_event(&state, &ConnEvent::Failure(observation), &params, now).0;
        }
        prop_assert!(state.backoff_level <= before.backoff_level + 1);
        if remaining_ms(&before, now) > 0 || is_terminal(&before) {
            prop_assert_eq!(state.backoff_level, before.backoff_level);
            prop_assert_eq!(state.rate_limited_until, before.rate_limited_until);
        }
    }

    #[test]
    fn terminal_is_sticky_until_reinstated(
        params in params(),
        terminal in terminal_status(),
        events in timeline(30),
    ) {
        let mut state = ConnState {
            status: ConnStatus::Terminal(terminal),
            ..ConnState::default()
        };
        let mut now: Millis = 0;
        for (gap, event) in events {
            now += gap;
            let reinstate = matches!(event, ConnEvent::Reinstate);
            let (next, _) = on_event(&state, &event, &params, now);
            if reinstate {
                prop_assert!(!is_terminal(&next));
                break;
            }
            prop_assert_eq!(next.status, ConnStatus::Terminal(terminal));
            prop_assert!(!is_available(&next, now));
            state = next;
        }
    }
}
