//! Error classification: what one failed attempt means for each resilience layer.
//!
//! A failed attempt (an upstream error status, after [`crate::restatement`], or a transport
//! failure) is classified once into a [`Classification`]: whether to fall back, the reason, what
//! to lock and for how long, any terminal-state signal, the breaker's view and the retry class.
//! The breaker, cooldown and lockout policies consume it; none of them re-reads the error.
//!
//! The HTTP decision flow is the reference's 18-row table (`checkFallbackError`), first match
//! wins, with these **Switchyard decisions**:
//! - **operator rules** (`error_rules`) are consulted right after row 1, for every status
//!   including 400 (the reference's gap), always against the full error text; a matching rule
//!   yields a temporary cooldown at its scope and never a terminal signal;
//! - **built-in provider rules** (openrouter 402, the opencode family, minimax, cloudflare-ai,
//!   agentrouter) run right after row 3, before the generic text rows that shadow them in the
//!   reference;
//! - row 1 uses the header `x-switchyard-fallback-hint: connection_cooldown`; row 2 (the
//!   per-account key-rotation gate) does not apply, Switchyard has no key rotation;
//! - 401 asks for the scaled backoff and signals [`TerminalSignal::AuthFailure`]: `expired`
//!   needs a streak, so the retries need spacing;
//! - a non-project 403 on an OAuth provider signals [`TerminalSignal::RequestRejected`]
//!   (counts towards the `banned` streak) instead of banning at once;
//! - cooldowns for a quota window the upstream named (daily, weekly, session, subscription)
//!   are [`CooldownHint::Upstream`] so `max_cooldown_ms` does not cut them to 30 minutes; daily
//!   windows end at UTC midnight;
//! - row 12's Cloudflare refusal (error 1010, `browser_signature_banned`, `retryable: false`)
//!   is recognised on a 403 of any category, not only API-key providers;
//! - row 14 is subsumed by row 13 (every status it names has a status rule); row 18 asks for
//!   the profile's scaled backoff rather than a fixed base;
//! - **an error changes only the state it is about** (RESILIENCE.md, second-round
//!   clarifications): a request-scoped failure — rows 15 and 17 (any 400 that is neither an
//!   auth nor a quota signal), a 404 that names a route rather than a model, a 413, a 422
//!   that says what is wrong with the request, a 429 for a request larger than the whole
//!   rate limit, a request-scoped `code` or a context overflow on any status — is marked
//!   [`Classification::request_scoped`]: no cooldown, no lockout, no breaker count;
//! - **quota windows are not hints**: rows 6–9 (daily, subscription, weekly, session) set
//!   their window as a [`CooldownHint::Fixed`] duration whatever `use_upstream_retry_hints`
//!   says, and a reset the upstream stated wins over the row's fixed window;
//! - a concurrency cap (GLM's `并发数过高`) rests the connection [`CONCURRENCY_COOLDOWN_MS`]
//!   with its backoff level kept, and locks no model.
//!
//! Invariants: pure (time is `now_epoch_ms`), never panics, reads at most
//! [`crate::hints::MAX_SCAN_BYTES`] of the text; `terminal` is `Banned`/`CreditsExhausted` only with
//! `cooldown == None` (terminal states are not cooldowns); `breaker` is a failure only for
//! 408/500/502/503/504 and connect/reset/timeout transport failures, and never for a
//! request-scoped failure or one marked `skip_provider_breaker`.

mod decide;
mod envelope;
mod input;
mod patterns;
mod redact;
pub mod structured;
mod table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_effects;
#[cfg(test)]
mod tests_structured;
pub mod tool_limit;

use std::fmt;

pub use decide::{GENERIC_400_RULE, OPERATOR_VETO_RULE, TOOL_LIMIT_RULE};
pub use envelope::{
    CONTEXT_LENGTH_EXCEEDED, ROUTE_NOT_FOUND, UpstreamErrorBody, client_code, in_band_status,
    in_band_status_of, parse_error_body,
};
pub use input::{ClassifyInput, ErrorRule, StructuredError, TransportFailure};
pub use redact::{MAX_MESSAGE_CHARS, REDACTED, redact_secrets, sanitize_message};

use crate::Millis;
use crate::outcome::{
    BreakerOutcome, CooldownHint, FailureKind, FailureReason, LockScope, RetryClass, TerminalSignal,
};

/// Response header by which a Switchyard-supervised local service says "this connection is
/// not running yet; cool it, don't blame the provider" (row 1).
pub const SERVICE_HINT_HEADER: &str = "x-switchyard-fallback-hint";
/// Cooldown of row 1.
pub const SERVICE_COOLDOWN_MS: Millis = 5_000;
/// Row 7's cooldown when the upstream names no reset: one hour.
pub const SUBSCRIPTION_COOLDOWN_MS: Millis = 3_600_000;
/// Row 8's cooldown for a weekly cap: one day (the reset anchor is undocumented upstream).
pub const WEEKLY_COOLDOWN_MS: Millis = 24 * 3_600_000;
/// Row 9's cooldown for a session cap: five hours.
pub const SESSION_COOLDOWN_MS: Millis = 5 * 3_600_000;

/// The cooldown of a concurrency-limited 429 (GLM's `并发数过高`): one second, the backoff
/// level unchanged; the cap frees as soon as a request of the same key ends.
pub const CONCURRENCY_COOLDOWN_MS: Millis = 1_000;

/// The rule id of a concurrency-limited 429.
pub const CONCURRENCY_RULE: &str = "concurrency_limited_429";

/// The rule id of a 404 whose body names a route, not a model (request-scoped).
pub const ROUTE_NOT_FOUND_RULE: &str = "route_not_found_404";

/// Which rule decided a classification, for logs and debug responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchedRule {
    /// A decision-table row, a built-in table or provider rule, or a transport kind.
    Builtin(&'static str),
    /// The operator rule at this index of the provider's effective rules (the runtime
    /// `provider_error_rules` first, then `error_rules`; see [`ErrorRule::with_runtime`]).
    Operator(usize),
}

impl fmt::Display for MatchedRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin(id) => f.write_str(id),
            Self::Operator(index) => write!(f, "error_rules[{index}]"),
        }
    }
}

/// What one failed attempt means for every layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// Try another connection or target.
    pub should_fallback: bool,
    pub reason: FailureReason,
    /// What the cooldown locks.
    pub scope: LockScope,
    pub cooldown: CooldownHint,
    pub terminal: TerminalSignal,
    pub breaker: BreakerOutcome,
    pub retry: RetryClass,
    /// A daily quota: locked until the next daily reset.
    pub daily_quota: bool,
    /// A Switchyard-side cause: never count it against the provider breaker.
    pub skip_provider_breaker: bool,
    /// The upstream's stated reset for a quota failure, kept even when the profile ignores
    /// hints for its cooldown, so a model lockout can last until the real reset (rows 6–10).
    pub reset_hint_ms: Option<Millis>,
    /// The failure is about this request (context overflow, an invalid parameter, content
    /// policy, an unknown route, any 400 that is neither an auth nor a quota signal): it must
    /// change no shared state, no cooldown, no lockout and no breaker count. Then `cooldown`
    /// is [`CooldownHint::None`] and `breaker` is [`BreakerOutcome::Ignore`].
    pub request_scoped: bool,
    /// An operator or built-in provider rule chose `scope` (MiniMax's per-model quota locks
    /// the model, not its family): a model lockout keeps that scope exactly.
    pub rule_scope: bool,
    pub rule: MatchedRule,
}

impl Classification {
    /// A failure that stops the provider's other connections: a combo moves on to its next
    /// target (or stops, when `should_fallback` is false: the attempt rules) without trying
    /// the target's other connections, and a direct request answers with it as it is. Every
    /// request-scoped failure is one (a 413, a 422, a request-invalid 400, an unknown route, a
    /// context overflow …): the same input reaches the other connections and fails there too,
    /// costing an upstream call each.
    pub fn next_target_only(&self) -> bool {
        self.request_scoped
            || self.rule == MatchedRule::Builtin(GENERIC_400_RULE)
            || self.is_tool_limit()
    }

    /// A 400 that says the request has too many tools ([`tool_limit`]).
    pub fn is_tool_limit(&self) -> bool {
        self.rule == MatchedRule::Builtin(TOOL_LIMIT_RULE)
    }
}

/// The breaker's view of an attempt by status or transport failure alone: 2xx is a success;
/// 408, 500, 502, 503, 504 and connect-refused / reset / timeout / idle-timeout are transient
/// failures; everything else (429, 401/403, other 4xx, readiness failures, stalls, client
/// aborts) must not move the breaker.
pub fn breaker_outcome_for(status: u16, transport: Option<TransportFailure>) -> BreakerOutcome {
    use TransportFailure as T;
    match transport {
        Some(T::ConnectRefused | T::ConnectionReset | T::Timeout | T::IdleTimeout) => {
            BreakerOutcome::Failure(FailureKind::Transient)
        }
        Some(T::ReadinessTimeout | T::EarlyEof | T::Stall | T::ClientAbort) => {
            BreakerOutcome::Ignore
        }
        None => match status {
            200..=299 => BreakerOutcome::Success,
            408 | 500 | 502 | 503 | 504 => BreakerOutcome::Failure(FailureKind::Transient),
            _ => BreakerOutcome::Ignore,
        },
    }
}

/// Classifies one failed attempt. See the module docs for the order and the decisions.
pub fn classify(input: &ClassifyInput<'_>) -> Classification {
    match input.transport {
        Some(transport) => classify_transport(transport),
        None => decide::classify_status(input),
    }
}

fn classify_transport(transport: TransportFailure) -> Classification {
    use TransportFailure as T;
    let (should_fallback, cooldown, reason) = match transport {
        T::ConnectRefused | T::ConnectionReset | T::Timeout | T::IdleTimeout => (
            true,
            CooldownHint::ScaledBackoff,
            FailureReason::ServerError,
        ),
        // Readiness failures and stalls fail over but cool nothing (the reference's direct
        // path); a stall cooldown is the cooldown policy's opt-in.
        T::ReadinessTimeout | T::EarlyEof | T::Stall => {
            (true, CooldownHint::None, FailureReason::ServerError)
        }
        T::ClientAbort => (false, CooldownHint::None, FailureReason::Unknown),
    };
    Classification {
        should_fallback,
        reason,
        scope: LockScope::Connection,
        cooldown,
        terminal: TerminalSignal::None,
        breaker: breaker_outcome_for(0, Some(transport)),
        retry: if should_fallback {
            RetryClass::BeforeFirstByteOnly
        } else {
            RetryClass::NotRetryable
        },
        daily_quota: false,
        skip_provider_breaker: false,
        reset_hint_ms: None,
        request_scoped: false,
        rule_scope: false,
        rule: MatchedRule::Builtin(transport.as_str()),
    }
}
