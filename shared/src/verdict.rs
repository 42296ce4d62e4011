//! What one failed upstream attempt means, decided whole and without I/O: the status after
//! the operator's restatement, the classification, the connection's observation, the model
//! lockout, a typed `RetryInfo`'s pacing or lock, the breaker's outcome and what the client
//! is told.
//!
//! Why a function of its own: the node's `routing::observe::judge` used to read the attempt,
//! decide and send to the actors in one 300-line body with nine parameters, so the decision
//! could only be tested through a running node. [`judge`] takes plain facts (the attempt, the
//! provider and connection as configured, the effective settings, the wall clock) and returns
//! a [`Verdict`]; the node applies it (actor messages, the queue's pause, metrics, the
//! breaker). Its inputs are passed in, so the same failure always gets the same verdict.

use crate::Millis;
use crate::classify::{
    self, Classification, ClassifyInput, ErrorRule, MatchedRule, StructuredError, TransportFailure,
};
use crate::cooldown::{self, FailureObservation};
use crate::hints;
use crate::lockout::{
    LockFailure, LockKey, LockReason, LockoutScope, ModelRef, resolve_lock_key,
    select_lockout_cooldown,
};
use crate::outcome::{
    BreakerOutcome, CooldownHint, FailureReason, LockScope, ProviderCategory, TerminalSignal,
};
use crate::restatement::{self, RestatementRule};
use crate::settings::ResilienceSettings;
use crate::strategy::AttemptOutcome;

/// The failed attempt as the upstream answered it (or failed to).
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// The upstream's HTTP status; `None` for a transport failure.
    pub status: Option<u16>,
    pub transport: Option<TransportFailure>,
    /// The node's summary of the failure.
    pub message: &'a str,
    pub body: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
}

/// What the verdict depends on besides the attempt.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub provider_id: &'a str,
    pub category: ProviderCategory,
    pub per_model_quota: bool,
    /// The connection's `disable_cooling`.
    pub disable_cooling: bool,
    /// The connection's backoff level now (for a lock that stands in for its cooldown).
    pub backoff_level: u32,
    /// The longest a request may wait in the connection's queue.
    pub queue_max_wait_ms: Millis,
    /// The model on this connection, for its lock key.
    pub model_ref: ModelRef<'a>,
    pub restatement_rules: &'a [RestatementRule],
    /// The provider's error rules from the file (the runtime ones are in `settings`).
    pub file_rules: &'a [ErrorRule],
    pub settings: &'a ResilienceSettings,
    /// The attempt served a combo's target.
    pub is_combo: bool,
    pub now_epoch_ms: Millis,
}

/// A typed `RetryInfo` on a 429, read against the connection's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRetry {
    /// A wait the queue can sit out: the connection's limiter pauses this long.
    Pace(Millis),
    /// A longer one (a spent daily quota): only this model is locked on this connection.
    LockModel,
}

/// The policy's reading of a failed attempt, for the node to apply.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The status after restatement (0 for a transport failure).
    pub status: u16,
    pub classification: Classification,
    /// What the connection's actor is told (nothing when `request_scoped`: the request's own
    /// fault changes no connection).
    pub observation: FailureObservation,
    pub lockout: Option<(LockKey, LockFailure)>,
    pub body_retry: Option<BodyRetry>,
    /// The provider breaker's outcome when the attempt counts for it.
    pub breaker: BreakerOutcome,
    /// The strategies' reading of the attempt (latency, health).
    pub strategy: AttemptOutcome,
    /// The `Retry-After` the client gets (a 429 or 503 only).
    pub retry_after_ms: Option<Millis>,
    /// The provider's own error code for the client, translated where its format has none.
    pub code: Option<String>,
}

impl Verdict {
    /// The request's own fault: no connection, lockout or breaker changes.
    pub fn request_scoped(&self) -> bool {
        self.classification.request_scoped
    }

    /// The failure locks a model, not the whole connection.
    pub fn model_scoped(&self) -> bool {
        self.classification.scope == LockScope::Model
    }
}

/// Judges a failed attempt. `client_message` is what the client and the log may see (the
/// node's summary with the upstream's own message, secrets removed); it goes into the
/// observation as is.
pub fn judge(attempt: &Attempt<'_>, ctx: &Context<'_>, client_message: String) -> Verdict {
    let epoch = ctx.now_epoch_ms;
    let settings = ctx.settings;
    let retry_after = attempt
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
        .and_then(|(_, v)| hints::parse_retry_after(v, epoch));
    let mut status = attempt.status.unwrap_or(0);
    let mut client_retry_after = None;
    let rules = ctx.restatement_rules;
    let mut operator_veto = false;
    if let Some(s) = attempt.status {
        match restatement::restate(s, attempt.message, attempt.body, rules, retry_after) {
            Some(r) => {
                status = r.status;
                client_retry_after = r.retry_after_ms;
            }
            // An exclude marker vetoes every reading of the body, not only the restatement.
            None => {
                operator_veto =
                    restatement::vetoed(s, attempt.message, attempt.body, rules).is_some();
            }
        }
    }
    let hint = hints::upstream_hint(attempt.headers, attempt.body, epoch);
    let use_hints = settings
        .cooldown_params(ctx.category, ctx.disable_cooling)
        .use_upstream_retry_hints;
    // Runtime rules (PATCH or `[resilience.provider_error_rules]`) go first, read per failure
    // so that a patch applies to the next one.
    let merged;
    let operator = match settings.provider_error_rules.get(ctx.provider_id) {
        Some(runtime) if !runtime.is_empty() => {
            merged = ErrorRule::with_runtime(runtime, ctx.file_rules);
            merged.as_slice()
        }
        _ => ctx.file_rules,
    };
    let text = format!("{} {}", attempt.message, attempt.body);
    let upstream_error = classify::parse_error_body(attempt.body);
    let classification = classify::classify(&ClassifyInput {
        status,
        transport: attempt.transport,
        error_text: &text,
        body: attempt.body,
        structured: StructuredError {
            code: upstream_error.code.as_deref(),
            error_type: upstream_error.error_type.as_deref(),
        },
        headers: attempt.headers,
        upstream_hint_ms: hint,
        provider_id: ctx.provider_id,
        category: ctx.category,
        per_model_quota: ctx.per_model_quota,
        use_upstream_retry_hints: use_hints,
        operator_rules: operator,
        now_epoch_ms: epoch,
        is_combo: ctx.is_combo,
        request_scoped: false,
        operator_veto,
    });

    // Connection cooldown or model lockout. A request-scoped failure (context overflow, an
    // invalid parameter, an unknown route …) changes neither: it is this request's fault.
    let request_scoped = classification.request_scoped;
    let model_scoped = classification.scope == LockScope::Model;
    // A terminal state is about the credential: the connection is out, no lock is needed.
    let terminal = matches!(
        classification.terminal,
        TerminalSignal::Banned | TerminalSignal::CreditsExhausted
    );
    let mut lockout = if request_scoped || terminal {
        None
    } else {
        model_lockout(ctx, &classification, status)
    };
    let mut observation = FailureObservation {
        status: attempt.status,
        reason: classification.reason,
        // A model-scoped failure locks the model, not the whole connection.
        hint: if model_scoped {
            CooldownHint::None
        } else {
            classification.cooldown
        },
        terminal: classification.terminal,
        stream_stall: attempt.transport == Some(TransportFailure::Stall),
        message: client_message,
    };
    // A typed `RetryInfo` on a 429: a wait the queue can sit out paces the connection's
    // limiter; a longer one (a spent daily quota) locks only this model on this connection.
    let mut body_retry = None;
    if status == 429
        && !request_scoped
        && !terminal
        && let Some(delay) = hints::typed_retry_info_ms(attempt.body)
    {
        match hints::body_retry(delay, ctx.queue_max_wait_ms) {
            hints::BodyRetry::Pace(ms) => body_retry = Some(BodyRetry::Pace(ms)),
            hints::BodyRetry::LockModel(ms) => {
                let key = resolve_lock_key(&ctx.model_ref, status, Some(LockoutScope::Model));
                lockout = Some((
                    key,
                    LockFailure {
                        reason: LockReason::QuotaExhausted,
                        hint: CooldownHint::Upstream(ms),
                        reset_after_ms: settings.breaker_profile(ctx.category).reset_timeout_ms,
                    },
                ));
                observation.hint = CooldownHint::None;
                body_retry = Some(BodyRetry::LockModel);
            }
        }
    }
    // Provider breaker: exactly one outcome per attempt (an ignored one hands a probe back).
    let breaker = if classification.skip_provider_breaker || request_scoped {
        BreakerOutcome::Ignore
    } else {
        classification.breaker
    };
    let retry_after_ms = client_retry_after
        .or(hint)
        .filter(|_| matches!(status, 429 | 503));
    // The provider's own code, translated where its format has none (Anthropic's "prompt is
    // too long" is `context_length_exceeded`); a stream readiness failure keeps its own.
    let code = if status == 0 {
        None
    } else if classification.rule == MatchedRule::Builtin(classify::ROUTE_NOT_FOUND_RULE) {
        Some(classify::ROUTE_NOT_FOUND.to_owned())
    } else {
        classify::client_code(&upstream_error, &text)
    };
    Verdict {
        status,
        strategy: strategy_outcome(attempt.transport, request_scoped),
        observation,
        lockout,
        body_retry,
        breaker,
        retry_after_ms,
        code,
        classification,
    }
}

/// The lock a failure puts on its model, if it is model-scoped or takes the combo path of the
/// lockout (`model_lockout.enabled`, the status in `error_codes`; a concurrency cap frees in a
/// second and locks nothing).
fn model_lockout(
    ctx: &Context<'_>,
    classification: &Classification,
    status: u16,
) -> Option<(LockKey, LockFailure)> {
    let settings = ctx.settings;
    let model_scoped = classification.scope == LockScope::Model;
    let combo_path = ctx.is_combo
        && settings.model_lockout.enabled
        && settings.model_lockout.error_codes.contains(&status)
        && classification.rule != MatchedRule::Builtin(classify::CONCURRENCY_RULE);
    if !(model_scoped || combo_path) {
        return None;
    }
    let epoch = ctx.now_epoch_ms;
    let stated = classification
        .reset_hint_ms
        .or(match classification.cooldown {
            CooldownHint::Upstream(ms) | CooldownHint::Fixed(ms) => Some(ms),
            CooldownHint::None | CooldownHint::ScaledBackoff => None,
        });
    let lock_hint = if combo_path {
        // The reference's `selectLockoutCooldownMs`: a stated reset longer than the base is
        // used exactly, otherwise the lockout's own backoff.
        select_lockout_cooldown(stated, &settings.lockout())
    } else {
        match (classification.reset_hint_ms, classification.cooldown) {
            (Some(ms), _) => CooldownHint::Upstream(ms),
            (None, CooldownHint::None) => CooldownHint::ScaledBackoff,
            (None, other) => other,
        }
    };
    // A spent quota with no stated reset is locked until the daily reset (the reference's
    // `recordModelLockoutFailure`), not for the transient backoff.
    let lock_hint = match lock_hint {
        CooldownHint::ScaledBackoff
            if classification.reason == FailureReason::QuotaExhausted && stated.is_none() =>
        {
            CooldownHint::Upstream(hints::ms_until_utc_midnight(epoch))
        }
        other => other,
    };
    // With `model_lockout.enabled = false` the lockout's own 120 s escalation is off: a lock
    // that stands in for the connection cooldown (a combo's transient 429, a per-model-quota
    // failure) lasts what the cooldown would have, the connection's scaled backoff (3 s on an
    // API key), as the same 429 costs on a direct request.
    let lock_hint = match lock_hint {
        CooldownHint::ScaledBackoff if !settings.model_lockout.enabled => {
            let params = settings.cooldown_params(ctx.category, ctx.disable_cooling);
            CooldownHint::Fixed(cooldown::scaled_backoff(&params, ctx.backoff_level).0)
        }
        other => other,
    };
    let requested = (classification.rule_scope && model_scoped).then_some(LockoutScope::Model);
    let key = resolve_lock_key(&ctx.model_ref, status, requested);
    let reason = if status == 404 {
        LockReason::NotFound
    } else {
        LockReason::from(classification.reason)
    };
    Some((
        key,
        LockFailure {
            reason,
            hint: lock_hint,
            reset_after_ms: settings.breaker_profile(ctx.category).reset_timeout_ms,
        },
    ))
}

/// How the latency and health strategies read a failed attempt: a timeout feeds the latency
/// average, a request's own fault (or the client leaving) says nothing about the connection.
pub fn strategy_outcome(
    transport: Option<TransportFailure>,
    request_scoped: bool,
) -> AttemptOutcome {
    match transport {
        Some(TransportFailure::ClientAbort) => AttemptOutcome::RequestError,
        Some(
            TransportFailure::Timeout
            | TransportFailure::ReadinessTimeout
            | TransportFailure::IdleTimeout,
        ) => AttemptOutcome::Timeout,
        _ if request_scoped => AttemptOutcome::RequestError,
        _ => AttemptOutcome::Failure,
    }
}

#[cfg(test)]
mod tests;
