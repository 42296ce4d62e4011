//! The input of classification, and the operator rules it consults.

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::{FailureReason, LockScope, ProviderCategory};

/// A failure below HTTP: no status reached us, or the stream failed after the headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportFailure {
    /// TCP/TLS connect refused or failed.
    ConnectRefused,
    /// The connection was reset.
    ConnectionReset,
    /// Connect or response-headers timeout.
    Timeout,
    /// No non-ping stream event within the readiness budget (`STREAM_READINESS_TIMEOUT`).
    ReadinessTimeout,
    /// The stream ended before its first event (`STREAM_EARLY_EOF`).
    EarlyEof,
    /// No chunk at all for the idle timeout (`stream_idle_timeout`).
    IdleTimeout,
    /// Chunks, but no content, for the stall budget (or throughput too low).
    Stall,
    /// The client went away; nothing is wrong upstream.
    ClientAbort,
}

impl TransportFailure {
    /// The snake_case name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectRefused => "connect_refused",
            Self::ConnectionReset => "connection_reset",
            Self::Timeout => "timeout",
            Self::ReadinessTimeout => "readiness_timeout",
            Self::EarlyEof => "early_eof",
            Self::IdleTimeout => "idle_timeout",
            Self::Stall => "stall",
            Self::ClientAbort => "client_abort",
        }
    }
}

/// The structured `{code, type}` of an upstream error body, when it has one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StructuredError<'a> {
    pub code: Option<&'a str>,
    pub error_type: Option<&'a str>,
}

/// Everything classification looks at. Build it with struct-update syntax from `default()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClassifyInput<'a> {
    /// The (restated) HTTP status. Ignored when `transport` is set.
    pub status: u16,
    pub transport: Option<TransportFailure>,
    /// The full error text: message and body.
    pub error_text: &'a str,
    /// The upstream's raw error body, for the structured fields its provider documents
    /// ([`super::structured`]); empty when there is none.
    pub body: &'a str,
    pub structured: StructuredError<'a>,
    /// Upstream response headers (names match case-insensitively).
    pub headers: &'a [(&'a str, &'a str)],
    /// The parsed upstream hint, i.e. [`crate::hints::upstream_hint`] of the headers and text.
    pub upstream_hint_ms: Option<Millis>,
    pub provider_id: &'a str,
    pub category: ProviderCategory,
    /// The provider's quotas are per model (passthrough/compatible providers, gemini …).
    pub per_model_quota: bool,
    /// The profile lets an upstream hint replace the scaled backoff.
    pub use_upstream_retry_hints: bool,
    /// This provider's `error_rules`, in order.
    pub operator_rules: &'a [ErrorRule],
    /// Wall clock, epoch milliseconds (for daily resets).
    pub now_epoch_ms: u64,
    /// The attempt belongs to a combo.
    pub is_combo: bool,
    /// The caller knows this failure is about the request, not the provider (context too
    /// long, empty upstream response, response validation failed).
    pub request_scoped: bool,
    /// An operator's exclude marker (`status_restatement`'s `exclude_markers`) matched this
    /// body: the operator says what it is, so no built-in reading of its text (quota,
    /// credits, provider rules) may apply. See [`crate::restatement::vetoed`].
    pub operator_veto: bool,
}

/// An operator classification rule (`[[providers.error_rules]]`): a status and a substring of
/// the lower-cased error text decide the reason, the lock scope and optionally the cooldown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ErrorRuleSpec")]
pub struct ErrorRule {
    status: u16,
    #[serde(rename = "match")]
    match_text: String,
    scope: LockScope,
    reason: FailureReason,
    cooldown_ms: Option<Millis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorRuleSpec {
    status: u16,
    #[serde(rename = "match", default)]
    match_text: String,
    scope: LockScope,
    #[serde(default = "unknown_reason")]
    reason: FailureReason,
    #[serde(default)]
    cooldown_ms: Option<Millis>,
}

fn unknown_reason() -> FailureReason {
    FailureReason::Unknown
}

impl From<ErrorRuleSpec> for ErrorRule {
    fn from(s: ErrorRuleSpec) -> Self {
        Self::new(s.status, &s.match_text, s.scope, s.reason, s.cooldown_ms)
    }
}

impl ErrorRule {
    /// Builds a rule; `match_text` is lower-cased (empty matches any text of that status).
    pub fn new(
        status: u16,
        match_text: &str,
        scope: LockScope,
        reason: FailureReason,
        cooldown_ms: Option<Millis>,
    ) -> Self {
        Self {
            status,
            match_text: match_text.to_lowercase(),
            scope,
            reason,
            cooldown_ms,
        }
    }
    pub fn status(&self) -> u16 {
        self.status
    }
    /// Lower-cased.
    pub fn match_text(&self) -> &str {
        &self.match_text
    }
    pub fn scope(&self) -> LockScope {
        self.scope
    }
    pub fn reason(&self) -> FailureReason {
        self.reason
    }
    pub fn cooldown_ms(&self) -> Option<Millis> {
        self.cooldown_ms
    }
    /// The provider's effective rules in the order they are consulted: the runtime rules
    /// (`provider_error_rules`, set by `PATCH /api/resilience` or the file's
    /// `[resilience.provider_error_rules]`) first, then its `[[providers.error_rules]]`. A
    /// runtime rule is read exactly as the same rule in the file.
    pub fn with_runtime(runtime: &[crate::config::ErrorRule], file: &[ErrorRule]) -> Vec<Self> {
        runtime
            .iter()
            .map(Self::from)
            .chain(file.iter().cloned())
            .collect()
    }

    /// Whether the rule applies to `status` and the lower-cased error text.
    pub(super) fn matches(&self, status: u16, lowered: &str) -> bool {
        self.status == status && lowered.contains(self.match_text.as_str())
    }
}

impl From<&crate::config::ErrorRule> for ErrorRule {
    /// The file's rule as classification reads it: an absent reason is the classifier's own
    /// reason for that status ([`FailureReason::Unknown`]), an absent cooldown the backoff.
    fn from(r: &crate::config::ErrorRule) -> Self {
        Self::new(
            r.status,
            &r.pattern,
            r.scope,
            r.reason.unwrap_or(FailureReason::Unknown),
            r.cooldown_ms,
        )
    }
}
