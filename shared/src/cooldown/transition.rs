//! The transition function of the cooldown state machine.

use crate::Millis;
use crate::outcome::{CooldownHint, TerminalSignal, TerminalStatus};

use super::{
    ConnEvent, ConnState, ConnStatus, CooldownParams, Effect, FailureObservation,
    LAST_ERROR_MAX_CHARS, MAX_UPSTREAM_HINT_MS, RemoteCooldown, is_terminal, remaining_ms,
};

/// Applies one event at `now` and returns the next state with what changed.
///
/// Failures:
/// - on a terminal connection write nothing ([`Effect::SkippedTerminal`]);
/// - while cooling (`rate_limited_until > now`) write nothing ([`Effect::AlreadyCooling`]), so
///   concurrent failures neither extend the cooldown nor raise the level twice. Exception: an
///   immediate terminal signal (`Banned`, `CreditsExhausted`) still applies, because it is
///   definitive and dropping it would put the connection back into service when the cooldown
///   lapses. Counting signals (auth failures, request rejections) are absorbed like any other
///   failure: concurrent requests of one burst are not "consecutive" failures;
/// - otherwise record the error, update the streaks, then either become terminal or set a
///   transient cooldown priced by the hint (see [`scaled_backoff`]).
///
/// `Success` clears every error field, the cooldown and the streaks, and lowers the backoff
/// level by one, unless it is stale ([`success_is_stale`]). The level is deliberately not reset when a cooldown lapses (docs/policy.md, `cooldown`
/// Decision): the reference's reset kept it retrying every few seconds against an exhausted
/// quota. Decaying one step per success means a connection that fails again soon after
/// recovering resumes close to where it was, while a healthy one returns to level 0 after a few
/// requests.
pub fn on_event(
    state: &ConnState,
    event: &ConnEvent,
    params: &CooldownParams,
    now: Millis,
) -> (ConnState, Vec<Effect>) {
    match event {
        ConnEvent::Failure(observation) => on_failure(state, observation, params, now),
        ConnEvent::Success { started } => on_success(state, *started),
        ConnEvent::OperatorClear => on_operator_clear(state),
        ConnEvent::Reinstate => on_reinstate(state),
        ConnEvent::Remote(remote) => on_remote(state, remote, params, now),
    }
}

/// The scaled backoff at `level`: `(base · 2^min(level, max_steps) capped at max_cooldown_ms,
/// min(level + 1, max_steps))`. apikey: 3, 6, 12, 24, 48, 96 s; oauth: 5, 10, …, 1280 s.
pub fn scaled_backoff(params: &CooldownParams, level: u32) -> (Millis, u32) {
    let exponent = level.min(params.max_backoff_steps);
    let factor = 1u64.checked_shl(exponent).unwrap_or(Millis::MAX);
    let cooldown = params
        .base_cooldown_ms
        .saturating_mul(factor)
        .min(params.max_cooldown_ms);
    let next_level = level.saturating_add(1).min(params.max_backoff_steps);
    (cooldown, next_level)
}

fn on_failure(
    state: &ConnState,
    observation: &FailureObservation,
    params: &CooldownParams,
    now: Millis,
) -> (ConnState, Vec<Effect>) {
    if is_terminal(state) {
        return (state.clone(), vec![Effect::SkippedTerminal]);
    }
    let immediate = match observation.terminal {
        TerminalSignal::Banned => Some(TerminalStatus::Banned),
        TerminalSignal::CreditsExhausted => Some(TerminalStatus::CreditsExhausted),
        TerminalSignal::None | TerminalSignal::AuthFailure | TerminalSignal::RequestRejected => {
            None
        }
    };

    let remaining = remaining_ms(state, now);
    if remaining > 0 {
        return match immediate {
            Some(terminal) => {
                let mut next = state.clone();
                record_error(&mut next, observation, now);
                next.status = ConnStatus::Terminal(terminal);
                (next, vec![Effect::BecameTerminal(terminal)])
            }
            None => (
                state.clone(),
                vec![Effect::AlreadyCooling {
                    remaining_ms: remaining,
                }],
            ),
        };
    }

    let mut next = state.clone();
    record_error(&mut next, observation, now);
    match observation.terminal {
        TerminalSignal::AuthFailure => {
            next.consecutive_auth_failures = next.consecutive_auth_failures.saturating_add(1);
            next.request_rejected_streak = 0;
        }
        TerminalSignal::RequestRejected => {
            next.request_rejected_streak = next.request_rejected_streak.saturating_add(1);
            next.consecutive_auth_failures = 0;
        }
        TerminalSignal::None | TerminalSignal::Banned | TerminalSignal::CreditsExhausted => {
            next.consecutive_auth_failures = 0;
            next.request_rejected_streak = 0;
        }
    }

    let terminal = immediate.or(match observation.terminal {
        TerminalSignal::RequestRejected
            if next.request_rejected_streak >= params.request_rejected_ban_streak =>
        {
            Some(TerminalStatus::Banned)
        }
        TerminalSignal::AuthFailure
            if next.consecutive_auth_failures >= params.expired_retry_max =>
        {
            Some(TerminalStatus::Expired)
        }
        _ => None,
    });
    if let Some(terminal) = terminal {
        // A terminal state forces no cooldown; an existing (lapsed) one is left as it is so the
        // cooldown deadline stays monotonic.
        next.status = ConnStatus::Terminal(terminal);
        return (next, vec![Effect::BecameTerminal(terminal)]);
    }

    let reason = observation.reason;
    match transient_cooldown(state.backoff_level, observation, params) {
        Some((cooldown, level)) => {
            let until = now.saturating_add(cooldown);
            next.rate_limited_until = Some(next.rate_limited_until.map_or(until, |u| u.max(until)));
            next.backoff_level = level;
            next.status = ConnStatus::Unavailable;
            (
                next,
                vec![Effect::CooldownSet {
                    until,
                    level,
                    reason,
                }],
            )
        }
        None => (next, vec![Effect::ErrorRecorded { reason }]),
    }
}

/// The transient cooldown a non-terminal failure earns, as `(duration, new level)`, or `None`.
/// The level rises only with a cooldown it priced, so it rises at most once per window.
fn transient_cooldown(
    level: u32,
    observation: &FailureObservation,
    params: &CooldownParams,
) -> Option<(Millis, u32)> {
    if params.disable_cooling || (observation.stream_stall && !params.stream_stall_cooldown) {
        return None;
    }
    let kept_level = level.min(params.max_backoff_steps);
    let hint = match (observation.terminal, observation.hint) {
        // Auth failures and request rejections below their terminal threshold rest the
        // connection with the scaled backoff, so transient errors heal before the streak ends.
        (
            TerminalSignal::AuthFailure | TerminalSignal::RequestRejected,
            CooldownHint::None | CooldownHint::Fixed(0),
        ) => CooldownHint::ScaledBackoff,
        // A stall carries no hint of its own (classification leaves it to this opt-in); when
        // the operator enabled `stream_stall_cooldown`, it earns the scaled backoff.
        (_, CooldownHint::None) if observation.stream_stall => CooldownHint::ScaledBackoff,
        (_, hint) => hint,
    };
    // Fixed and upstream durations keep the level (the reference zeroed it after a hint, which
    // would forget the escalation the next time the upstream sends no hint).
    let (cooldown, next_level) = match hint {
        CooldownHint::None => return None,
        CooldownHint::ScaledBackoff => scaled_backoff(params, level),
        // A rule's fixed duration (built-in table or an operator's `cooldown_ms`) is a deliberate
        // choice, like the reference's rule cooldowns: `max_cooldown_ms` caps only the scaled
        // backoff, so an operator's one-hour quota rule really rests the key for an hour.
        CooldownHint::Fixed(ms) => (ms.min(MAX_UPSTREAM_HINT_MS), kept_level),
        CooldownHint::Upstream(ms) if params.use_upstream_retry_hints => {
            (ms.min(MAX_UPSTREAM_HINT_MS), kept_level)
        }
        CooldownHint::Upstream(_) => scaled_backoff(params, level),
    };
    (cooldown > 0).then_some((cooldown, next_level))
}

fn record_error(next: &mut ConnState, observation: &FailureObservation, now: Millis) {
    let message = &observation.message;
    let kept = match message.char_indices().nth(LAST_ERROR_MAX_CHARS) {
        Some((end, _)) => message.get(..end).unwrap_or(message),
        None => message,
    };
    next.last_error = Some(kept.to_owned());
    next.last_error_type = Some(observation.reason);
    next.error_code = observation.status;
    next.last_error_at = Some(now);
}

/// Whether a success comes from an attempt that started before the connection's last failure
/// (seen here or merged from a cluster peer). Such a success says nothing about the connection
/// after that failure, so it must not clear what the failure set: otherwise a request already
/// in flight when a 429 or a stalled stream cooled the connection lifts the cooldown as soon
/// as it completes, and traffic returns to a connection that is meant to rest.
pub fn success_is_stale(state: &ConnState, attempt_started: Millis) -> bool {
    state
        .last_error_at
        .is_some_and(|failed| failed > attempt_started)
}

fn on_success(state: &ConnState, started: Millis) -> (ConnState, Vec<Effect>) {
    if is_terminal(state) {
        return (state.clone(), vec![Effect::SkippedTerminal]);
    }
    if success_is_stale(state, started) {
        return (state.clone(), Vec::new());
    }
    let level = state.backoff_level.saturating_sub(1);
    let next = ConnState {
        backoff_level: level,
        ..ConnState::default()
    };
    let mut effects = Vec::new();
    if has_error_fields(state) {
        effects.push(Effect::Cleared);
    }
    if level < state.backoff_level {
        effects.push(Effect::LevelDecayed { level });
    }
    (next, effects)
}

fn on_operator_clear(state: &ConnState) -> (ConnState, Vec<Effect>) {
    if is_terminal(state) {
        return (state.clone(), vec![Effect::SkippedTerminal]);
    }
    // The level is kept: clearing makes the connection usable now, but the backoff memory
    // still decays only through successes.
    let next = ConnState {
        backoff_level: state.backoff_level,
        ..ConnState::default()
    };
    let effects = if has_error_fields(state) {
        vec![Effect::Cleared]
    } else {
        Vec::new()
    };
    (next, effects)
}

fn on_reinstate(state: &ConnState) -> (ConnState, Vec<Effect>) {
    let effects = match state.status.terminal() {
        Some(terminal) => vec![Effect::Reinstated(terminal)],
        None if *state != ConnState::default() => vec![Effect::Cleared],
        None => Vec::new(),
    };
    (ConnState::default(), effects)
}

fn on_remote(
    state: &ConnState,
    remote: &RemoteCooldown,
    params: &CooldownParams,
    now: Millis,
) -> (ConnState, Vec<Effect>) {
    if is_terminal(state) {
        return (state.clone(), vec![Effect::SkippedTerminal]);
    }
    let mut next = state.clone();
    if let Some(until) = remote.until
        && !params.disable_cooling
    {
        // A peer's deadline is trusted only up to the longest cooldown this node could set.
        let ceiling = now.saturating_add(MAX_UPSTREAM_HINT_MS.max(params.max_cooldown_ms));
        let until = until.min(ceiling);
        if next.rate_limited_until.is_none_or(|local| until > local) {
            next.rate_limited_until = Some(until);
            // A peer's failure is a failure seen here now, for success_is_stale.
            next.last_error_at = Some(now);
        }
    }
    next.backoff_level = next
        .backoff_level
        .max(remote.backoff_level.min(params.max_backoff_steps));
    if let Some(terminal) = remote.terminal {
        next.status = ConnStatus::Terminal(terminal);
    } else if remaining_ms(&next, now) > 0 {
        next.status = ConnStatus::Unavailable;
    }
    let effects = if next == *state {
        Vec::new()
    } else {
        vec![Effect::MergedRemote {
            until: next.rate_limited_until,
            level: next.backoff_level,
            terminal: remote.terminal,
        }]
    };
    (next, effects)
}

/// Whether anything besides the backoff level differs from a fresh state.
fn has_error_fields(state: &ConnState) -> bool {
    let ConnState {
        rate_limited_until,
        status,
        backoff_level: _,
        last_error,
        last_error_type,
        error_code,
        last_error_at,
        consecutive_auth_failures,
        request_rejected_streak,
    } = state;
    rate_limited_until.is_some()
        || *status != ConnStatus::Active
        || last_error.is_some()
        || last_error_type.is_some()
        || error_code.is_some()
        || last_error_at.is_some()
        || *consecutive_auth_failures > 0
        || *request_rejected_streak > 0
}
