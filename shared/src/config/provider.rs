//! `[[providers]]` (one per upstream service) and `[[connections]]` (one per credential at a
//! provider), with the per-provider restatement and error-classification rules.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Millis;
use crate::outcome::{FailureReason, LockScope, ProviderCategory};
use crate::strategy::Strategy;

/// Wire format spoken upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderFormat {
    /// OpenAI chat completions / responses.
    #[default]
    Openai,
    /// Anthropic messages.
    Anthropic,
}

/// How a connection is chosen among a provider's eligible connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionStrategy {
    /// Priority order, lowest `priority` first.
    #[default]
    FillFirst,
    RoundRobin,
    P2c,
    Random,
    LeastUsed,
    StrictRandom,
}

impl From<ConnectionStrategy> for Strategy {
    /// The routing strategy that picks among the provider's connections.
    fn from(strategy: ConnectionStrategy) -> Self {
        match strategy {
            ConnectionStrategy::FillFirst => Self::FillFirst,
            ConnectionStrategy::RoundRobin => Self::RoundRobin,
            ConnectionStrategy::P2c => Self::P2c,
            ConnectionStrategy::Random => Self::Random,
            ConnectionStrategy::LeastUsed => Self::LeastUsed,
            ConnectionStrategy::StrictRandom => Self::StrictRandom,
        }
    }
}

/// `tool_limit_ttl_ms` when absent: 6 hours.
pub const DEFAULT_TOOL_LIMIT_TTL_MS: u64 = 6 * 60 * 60 * 1_000;

/// `[[providers]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// REQUIRED, `[a-z0-9._-]+`.
    pub id: String,
    /// Selects the resilience profile.
    pub category: ProviderCategory,
    pub format: ProviderFormat,
    /// REQUIRED.
    pub base_url: String,
    /// `[]` = pass any model through; otherwise the models this provider serves.
    pub models: Vec<String>,
    /// true: 429/404/5xx lock the model, not the connection.
    pub per_model_quota: bool,
    pub connection_strategy: ConnectionStrategy,
    /// round-robin: requests kept on one connection before rotating.
    pub sticky_round_robin_limit: u32,
    pub timeouts: ProviderTimeouts,
    /// Upstream status restatement, applied before classification (first match wins).
    pub status_restatement: Vec<StatusRestatementRule>,
    /// Operator classification rules (first match wins).
    pub error_rules: Vec<ErrorRule>,
    /// Extra (not in the contract): price per 1000 tokens, for `cost-optimized` combos.
    /// Absent = unknown (ranked after every priced target).
    pub cost_per_1k_tokens: Option<f64>,
    /// Extra (not in the contract): how `/v1/responses` reaches an `openai`-format provider
    /// (passed through to OpenAI's own hosts, translated to chat elsewhere by default).
    pub responses_api: super::ResponsesApi,
    /// Extra (not in the contract): how long a tool limit learned from a "too many tools"
    /// answer holds (ms, 6 h by default; at least 1 s). A success with more tools drops it
    /// earlier.
    pub tool_limit_ttl_ms: u64,
    /// Extra (not in the contract): the HTTP versions offered to the provider (`auto`: HTTP/2
    /// by ALPN where an HTTPS provider offers it, else HTTP/1.1; `http1`: HTTP/1.1 only).
    pub http_version: super::HttpVersion,
    /// Extra (not in the contract): a PEM file of certificate authorities trusted for this
    /// provider on top of the platform's roots (a private gateway's or a test CA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            id: String::new(),
            category: ProviderCategory::Apikey,
            format: ProviderFormat::Openai,
            base_url: String::new(),
            models: Vec::new(),
            per_model_quota: false,
            connection_strategy: ConnectionStrategy::FillFirst,
            sticky_round_robin_limit: 3,
            timeouts: ProviderTimeouts::default(),
            status_restatement: Vec::new(),
            error_rules: Vec::new(),
            cost_per_1k_tokens: None,
            responses_api: super::ResponsesApi::Auto,
            tool_limit_ttl_ms: DEFAULT_TOOL_LIMIT_TTL_MS,
            http_version: super::HttpVersion::Auto,
            ca_file: None,
        }
    }
}

impl ProviderConfig {
    /// Whether this provider serves `model` (an empty list serves every model).
    pub fn serves(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == model)
    }

    /// Whether Responses API requests go to this provider unchanged (an `openai`-format
    /// provider whose `responses_api` allows it); otherwise they are translated.
    pub fn serves_responses_natively(&self) -> bool {
        self.format == ProviderFormat::Openai && self.responses_api.native_for(&self.base_url)
    }

    /// Whether connections of this provider may go without an API key.
    pub fn is_local(&self) -> bool {
        self.category == ProviderCategory::Local
    }
}

/// `[providers.timeouts]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderTimeouts {
    pub connect_ms: Millis,
    /// Until upstream response headers.
    pub headers_ms: Millis,
    /// Stream readiness: the first event that is not a ping/heartbeat.
    pub first_content_ms: Millis,
    /// Gap between upstream chunks.
    pub idle_ms: Millis,
    /// 0 = none; absolute ceiling for one attempt.
    pub attempt_deadline_ms: Millis,
}

impl Default for ProviderTimeouts {
    fn default() -> Self {
        Self {
            connect_ms: 30_000,
            headers_ms: 600_000,
            first_content_ms: 80_000,
            idle_ms: 600_000,
            attempt_deadline_ms: 0,
        }
    }
}

/// `[[providers.status_restatement]]`: turns an upstream status into another before
/// classification, when the lower-cased error text contains a marker and no exclude marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatusRestatementRule {
    /// REQUIRED, unique within the provider.
    pub id: String,
    /// REQUIRED, non-empty.
    pub from_statuses: Vec<u16>,
    /// REQUIRED.
    pub to_status: u16,
    /// Any one of them must occur in the error text. `[]` = restate on status alone.
    pub text_markers: Vec<String>,
    /// Any one of them vetoes the rule.
    pub exclude_markers: Vec<String>,
    /// The `Retry-After` told to the client when upstream gave none.
    pub default_retry_after_ms: Millis,
}

impl Default for StatusRestatementRule {
    fn default() -> Self {
        Self {
            id: String::new(),
            from_statuses: Vec::new(),
            to_status: 0,
            text_markers: Vec::new(),
            exclude_markers: Vec::new(),
            default_retry_after_ms: 60_000,
        }
    }
}

/// `[[providers.error_rules]]`: an operator classification rule, matched as a substring of the
/// full error text (first match wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRule {
    /// The upstream status (after restatement) the rule applies to.
    pub status: u16,
    /// Substring of the error text (`match` in the file).
    #[serde(rename = "match")]
    pub pattern: String,
    pub scope: LockScope,
    /// Absent = the classifier's own reason for that status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FailureReason>,
    /// Absent = the scaled backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<Millis>,
}

impl ErrorRule {
    /// What is wrong with this rule on its own, if anything.
    pub fn problem(&self) -> Option<String> {
        if !(100..=599).contains(&self.status) {
            Some(format!("status {} is out of range 100..=599", self.status))
        } else if self.pattern.trim().is_empty() {
            Some("`match` must not be empty".into())
        } else if self.cooldown_ms == Some(0) {
            Some("`cooldown_ms` must be above 0 (omit it for the scaled backoff)".into())
        } else {
            None
        }
    }
}

/// `[[connections]]`: one credential at a provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionConfig {
    /// REQUIRED, unique.
    pub id: String,
    /// REQUIRED: a provider id.
    pub provider: String,
    /// Environment variable holding the upstream key. REQUIRED unless the provider is local.
    pub api_key_env: Option<String>,
    /// Lower = preferred.
    pub priority: u32,
    /// For weighted strategies.
    pub weight: u32,
    /// 0 = unlimited; in redis mode enforced cluster-wide.
    pub max_concurrent: u32,
    /// Exact upstream model id → cap.
    pub model_concurrency: BTreeMap<String, u32>,
    /// true: never put this connection into transient cooldown.
    pub disable_cooling: bool,
    /// Explicit opt-in to the request queue.
    pub rate_limit_protection: bool,
    /// Per-connection overrides of `[resilience.request_queue]`.
    pub rate_limit: ConnectionRateLimit,
    /// The egress bucket the connection leaves through (a proxy URL or a label). A 429 on an
    /// `[egress_lock]` provider cools the family's connections of the same bucket; none =
    /// never sibling-locked.
    pub egress: Option<String>,
    /// Claude OAuth usage wall: on a wall 429 that offers it, accept the low-priority lane and
    /// retry the same connection with `anthropic-usage-limit: slow` until the announced reset.
    pub low_priority_mode: bool,
    /// Claude OAuth usage wall: on a wall 429, claim the weekly session-limit reset first
    /// (needs `organization_uuid`).
    pub auto_limit_reset: bool,
    /// The Claude organization the session-limit reset is claimed for.
    pub organization_uuid: Option<String>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            id: String::new(),
            provider: String::new(),
            api_key_env: None,
            priority: 1,
            weight: 1,
            max_concurrent: 0,
            model_concurrency: BTreeMap::new(),
            disable_cooling: false,
            rate_limit_protection: false,
            rate_limit: ConnectionRateLimit::default(),
            egress: None,
            low_priority_mode: false,
            auto_limit_reset: false,
            organization_uuid: None,
        }
    }
}

/// `[connections.rate_limit]`: overrides of `[resilience.request_queue]`; 0 = inherit. (So a
/// connection cannot override a global value *to* 0, e.g. to an unbounded depth.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionRateLimit {
    pub requests_per_minute: u32,
    pub min_time_between_requests_ms: Millis,
    pub concurrent_requests: u32,
    pub max_wait_ms: Millis,
    pub execution_max_wait_ms: Millis,
    pub max_queue_depth: u32,
}
