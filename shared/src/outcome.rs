//! The shared vocabulary of attempt outcomes.
//!
//! Classification ([`crate::classify`]) produces these types; the breaker, cooldown and lockout
//! policies consume them. Keeping them in one small module lets each policy evolve on its own
//! while agreeing on what a failure *is*.

use serde::{Deserialize, Serialize};

use crate::Millis;

/// The provider category selects the resilience profile (breaker thresholds, cooldown base).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ProviderCategory {
    /// Session or subscription accounts.
    Oauth,
    /// Metered API keys.
    #[default]
    Apikey,
    /// Local model servers (Ollama, LM Studio).
    Local,
}

impl ProviderCategory {
    /// The lowercase name used in config files, metrics labels and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oauth => "oauth",
            Self::Apikey => "apikey",
            Self::Local => "local",
        }
    }
}

/// Why an attempt failed (the reference's `RateLimitReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    QuotaExhausted,
    RateLimitExceeded,
    ModelCapacity,
    ServerError,
    AuthError,
    Unknown,
}

impl FailureReason {
    /// The snake_case name used in config files, metrics labels and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QuotaExhausted => "quota_exhausted",
            Self::RateLimitExceeded => "rate_limit_exceeded",
            Self::ModelCapacity => "model_capacity",
            Self::ServerError => "server_error",
            Self::AuthError => "auth_error",
            Self::Unknown => "unknown",
        }
    }
}

/// What a failure locks: one model on a connection, the whole connection, or the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockScope {
    Model,
    Connection,
    Provider,
}

/// Terminal connection states. They are not cooldowns: they persist until an operator
/// reinstates the connection or its credential changes, and no cooldown overwrites them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalStatus {
    Banned,
    Expired,
    CreditsExhausted,
}

impl TerminalStatus {
    /// The snake_case name used in JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Banned => "banned",
            Self::Expired => "expired",
            Self::CreditsExhausted => "credits_exhausted",
        }
    }
}

/// A classification's hint towards a terminal state. The cooldown policy decides whether the
/// connection actually becomes terminal (e.g. `expired` only after `expired_retry_max`
/// consecutive auth failures, `banned` after a streak of request rejections).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TerminalSignal {
    #[default]
    None,
    /// 401 / invalid or expired credential: counts towards `expired`.
    AuthFailure,
    /// Ban keywords, account deactivated: `banned` at once.
    Banned,
    /// The upstream refused this request outright (e.g. a Cloudflare 1010 or
    /// `browser_signature_banned`): counts towards the `banned` streak.
    RequestRejected,
    /// Credits or billing exhausted: `credits_exhausted` at once.
    CreditsExhausted,
}

/// The only cap on a duration the upstream told us ([`CooldownHint::Upstream`]): 30 days. Every
/// policy that honours upstream hints (connection cooldown, model lockout, hint parsing) caps
/// with this one value.
pub const MAX_UPSTREAM_HINT_MS: Millis = 30 * 24 * 60 * 60 * 1000;

/// How long a failure should cool its scope, before the cooldown policy applies caps and the
/// thundering-herd guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CooldownHint {
    /// No cooldown (e.g. a request-scoped 400: move on without cooling).
    None,
    /// The scaled exponential backoff of the profile (`base · 2^level`).
    ScaledBackoff,
    /// A fixed duration chosen by a rule (built-in or operator); like an upstream hint it is not
    /// capped by `max_cooldown_ms`, only by the 30-day cap.
    Fixed(Millis),
    /// A duration the upstream told us (`Retry-After`, reset headers, reset text). It replaces
    /// the scaled backoff and is not capped by `max_cooldown_ms` (only by
    /// [`MAX_UPSTREAM_HINT_MS`]).
    Upstream(Millis),
}

/// Whether an attempt may be retried elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryClass {
    /// Fall back to another connection or target, before or after the first byte.
    Retryable,
    /// Fall back only while nothing has been sent to the client (before the commit point).
    BeforeFirstByteOnly,
    /// Return the error to the client; trying elsewhere would fail the same way.
    NotRetryable,
}

/// The breaker's view of one attempt. Each attempt is reported **exactly once**.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BreakerOutcome {
    Success,
    /// A trigger failure: 408, 500, 502, 503, 504 or a transport failure.
    Failure(FailureKind),
    /// Anything that must not move the breaker: 429, 401/403, request-scoped failures, client
    /// aborts and Switchyard's own overload rejections.
    Ignore,
}

/// The kind of the last breaker failure, shown in health output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Transient,
    RateLimit,
    QuotaExhausted,
}
