//! Label values, each from a closed set.
//!
//! Prometheus keeps one time series per label combination, so a label that takes client text
//! (a model name, a path, an error message) lets any client grow the node's memory and the
//! monitoring system's storage without bound. Every label here is an enum with a fixed list of
//! values, or (for providers, connections and models) an id from the configuration; anything
//! outside the set is folded into `other`. The enums are also array indices, which is what
//! lets the hot path reach a pre-resolved child without formatting or hashing label strings.

use switchyard_shared::breaker::BreakerState;
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::sse::StreamAbort;

use crate::api::errors::ClientFormat;

/// The value of every label outside its configured set.
pub const OTHER: &str = "other";

/// Defines a fieldless enum whose variants are array indices, with one label value each.
macro_rules! label_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $label:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in index order.
            pub const ALL: [Self; [$(stringify!($variant)),+].len()] = [$(Self::$variant),+];
            /// Number of values.
            pub const COUNT: usize = Self::ALL.len();

            /// The label value.
            pub fn label(self) -> &'static str {
                match self {
                    $(Self::$variant => $label,)+
                }
            }

            /// The position in [`Self::ALL`].
            pub fn index(self) -> usize {
                self as usize
            }

            /// Every label value, in index order.
            pub fn labels() -> [&'static str; Self::COUNT] {
                Self::ALL.map(Self::label)
            }
        }
    };
}

label_enum! {
    /// `route`: the client API route (its path pattern).
    Route {
        ChatCompletions => "/v1/chat/completions",
        Messages => "/v1/messages",
        Responses => "/v1/responses",
        Models => "/v1/models",
    }
}

impl From<ClientFormat> for Route {
    fn from(format: ClientFormat) -> Self {
        match format {
            ClientFormat::OpenAiChat => Self::ChatCompletions,
            ClientFormat::OpenAiResponses => Self::Responses,
            ClientFormat::Anthropic => Self::Messages,
        }
    }
}

label_enum! {
    /// `status_class` of a response.
    StatusClass {
        Success => "2xx",
        ClientError => "4xx",
        ServerError => "5xx",
    }
}

impl StatusClass {
    /// The class of an HTTP status. The client routes never answer 1xx or 3xx; anything below
    /// 400 counts as a success so the label keeps exactly three values.
    pub fn of(status: u16) -> Self {
        match status {
            500.. => Self::ServerError,
            400..=499 => Self::ClientError,
            _ => Self::Success,
        }
    }
}

label_enum! {
    /// `type` of a concurrency-gate or request-queue rejection (the rejection's error code).
    RejectionType {
        SemaphoreTimeout => "SEMAPHORE_TIMEOUT",
        SemaphoreQueueFull => "SEMAPHORE_QUEUE_FULL",
        RateLimitQueueFull => "RATE_LIMIT_QUEUE_FULL",
        RateLimitQueueTimeout => "RATE_LIMIT_QUEUE_TIMEOUT",
        Other => "other",
    }
}

impl RejectionType {
    /// The type of a rejection code; an unknown code is `other`.
    pub fn of_code(code: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|t| *t != Self::Other && t.label() == code)
            .unwrap_or(Self::Other)
    }
}

label_enum! {
    /// `outcome` of quota-share serialisation at a capped connection.
    QuotaShareWait {
        /// A slot, at once or after waiting in line.
        Acquired => "acquired",
        /// The wait timed out; dispatched without a slot (fail-open).
        TimeoutProceeded => "timeout_proceeded",
        /// The line was full; dispatched without a slot (fail-open).
        QueueFullProceeded => "queue_full_proceeded",
        /// The wait timed out and fail-open is off: the connection was skipped.
        TimeoutRejected => "timeout_rejected",
        /// The line was full and fail-open is off: the connection was skipped.
        QueueFullRejected => "queue_full_rejected",
    }
}

label_enum! {
    /// `reason` a target was skipped (the reasons of `skippedTargets`).
    SkipReason {
        CircuitOpen => "circuit_open",
        ProviderCooldown => "provider_cooldown",
        ConnectionCooldown => "connection_cooldown",
        ModelLockout => "model_lockout",
        QuotaCutoff => "quota_cutoff",
        Terminal => "terminal",
        NotAllowed => "not_allowed",
        NoConnections => "no_connections",
        ConcurrencyCap => "concurrency_cap",
        RequestExhaustion => "request_exhaustion",
        ToolLimit => "tool_limit",
        Failed => "failed",
        Other => "other",
    }
}

/// What the metrics read from a skipped target. The routing report's skip type implements it,
/// so the metrics never depend on the request path that uses them.
pub trait SkipLabel {
    /// The skip's reason label (one of [`SkipReason`]'s, else counted as `other`).
    fn reason(&self) -> &'static str;
    /// The rejection code when a concurrency gate or the request queue refused the request.
    fn rejection_code(&self) -> Option<&'static str>;
}

impl SkipReason {
    /// The reason of a skip record.
    pub fn of(skip: &impl SkipLabel) -> Self {
        let reason = skip.reason();
        Self::ALL
            .into_iter()
            .find(|r| *r != Self::Other && r.label() == reason)
            .unwrap_or(Self::Other)
    }
}

label_enum! {
    /// `reason` a request moved on to another connection or target after a failed attempt
    /// (the failure's classification) or a saturated connection.
    FallbackReason {
        QuotaExhausted => "quota_exhausted",
        RateLimitExceeded => "rate_limit_exceeded",
        ModelCapacity => "model_capacity",
        ServerError => "server_error",
        AuthError => "auth_error",
        Unknown => "unknown",
        ConcurrencyCap => "concurrency_cap",
    }
}

impl From<FailureReason> for FallbackReason {
    fn from(reason: FailureReason) -> Self {
        match reason {
            FailureReason::QuotaExhausted => Self::QuotaExhausted,
            FailureReason::RateLimitExceeded => Self::RateLimitExceeded,
            FailureReason::ModelCapacity => Self::ModelCapacity,
            FailureReason::ServerError => Self::ServerError,
            FailureReason::AuthError => Self::AuthError,
            FailureReason::Unknown => Self::Unknown,
        }
    }
}

label_enum! {
    /// `reason` of a connection cooldown (the failure's classification).
    CooldownReason {
        QuotaExhausted => "quota_exhausted",
        RateLimitExceeded => "rate_limit_exceeded",
        ModelCapacity => "model_capacity",
        ServerError => "server_error",
        AuthError => "auth_error",
        Unknown => "unknown",
    }
}

impl From<FailureReason> for CooldownReason {
    fn from(reason: FailureReason) -> Self {
        match reason {
            FailureReason::QuotaExhausted => Self::QuotaExhausted,
            FailureReason::RateLimitExceeded => Self::RateLimitExceeded,
            FailureReason::ModelCapacity => Self::ModelCapacity,
            FailureReason::ServerError => Self::ServerError,
            FailureReason::AuthError => Self::AuthError,
            FailureReason::Unknown => Self::Unknown,
        }
    }
}

label_enum! {
    /// `kind` of stream watchdog that ended a stream, before or after the commit point.
    AbortKind {
        ReadinessTimeout => "readiness_timeout",
        EarlyEof => "early_eof",
        IdleTimeout => "idle_timeout",
        Stall => "stall",
        ThroughputTooLow => "throughput_too_low",
    }
}

impl From<StreamAbort> for AbortKind {
    fn from(abort: StreamAbort) -> Self {
        match abort {
            StreamAbort::ReadinessTimeout { .. } => Self::ReadinessTimeout,
            StreamAbort::EarlyEof => Self::EarlyEof,
            StreamAbort::IdleTimeout { .. } => Self::IdleTimeout,
            StreamAbort::Stall { .. } => Self::Stall,
            StreamAbort::ThroughputTooLow { .. } => Self::ThroughputTooLow,
        }
    }
}

label_enum! {
    /// `kind` of a failed upstream attempt (before or after the commit point), for the
    /// per-provider error rate.
    AttemptFailureKind {
        RateLimited => "rate_limited",
        ClientError => "http_4xx",
        ServerError => "http_5xx",
        InBand => "in_band",
        StreamAbort => "stream_abort",
        Transport => "transport",
    }
}

impl AttemptFailureKind {
    /// Pure: the kind of a failure from what the attempt saw (a watchdog abort first, then a
    /// failure without a status, then an in-band error, then the status).
    pub fn of(stream_abort: bool, status: Option<u16>, in_band: bool) -> Self {
        match (stream_abort, status) {
            (true, _) => Self::StreamAbort,
            (false, None) => Self::Transport,
            (false, Some(_)) if in_band => Self::InBand,
            (false, Some(429)) => Self::RateLimited,
            (false, Some(400..=499)) => Self::ClientError,
            (false, Some(_)) => Self::ServerError,
        }
    }
}

label_enum! {
    /// `token_type` of token usage, as the upstream's usage object reports it. Cache tokens are
    /// split into reads and writes because providers bill them differently.
    TokenType {
        Input => "input",
        Output => "output",
        CacheRead => "cache_read",
        CacheCreation => "cache_creation",
    }
}

label_enum! {
    /// `state` of a connection.
    ConnectionState {
        Active => "active",
        Cooldown => "cooldown",
        Terminal => "terminal",
    }
}

label_enum! {
    /// `actor` whose mailbox dropped an observation.
    ActorKind {
        Connection => "connection",
        Breaker => "breaker",
    }
}

label_enum! {
    /// A breaker state, as the `from` / `to` labels of transitions. The index is also the
    /// value of the `switchyard_breaker_state` gauge.
    BreakerLabel {
        Closed => "closed",
        Degraded => "degraded",
        HalfOpen => "half_open",
        Open => "open",
    }
}

impl From<BreakerState> for BreakerLabel {
    fn from(state: BreakerState) -> Self {
        match state {
            BreakerState::Closed => Self::Closed,
            BreakerState::Degraded => Self::Degraded,
            BreakerState::HalfOpen => Self::HalfOpen,
            BreakerState::Open => Self::Open,
        }
    }
}
