//! `[[combos]]`: a client-visible model name routed over several `provider/model` targets.

use serde::{Deserialize, Serialize};

use super::context_relay::ContextRelayOptions;
use super::multi_call::{FusionOptions, PipelineOptions};
use crate::Millis;
use crate::strategy::Strategy;

/// `[[combos]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawComboConfig")]
pub struct ComboConfig {
    /// REQUIRED; clients send `{"model": "<name>"}`.
    pub name: String,
    /// How the targets are ordered per request; [`Strategy::COMBO_DEFAULT`] when absent. An
    /// alias is read as its strategy; an unknown name as [`Strategy::UNKNOWN_FALLBACK`] (the
    /// reference's rule), remembered in `unknown_strategy` for the warning.
    pub strategy: Strategy,
    /// REQUIRED, non-empty.
    pub targets: Vec<ComboTarget>,
    /// `[combos.config]`.
    pub config: ComboOptions,
    /// `[combos.fusion]`, read when `strategy = "fusion"`.
    pub fusion: FusionOptions,
    /// `[combos.pipeline]`, read when `strategy = "pipeline"`.
    pub pipeline: PipelineOptions,
    /// `[combos.context_relay]`, read when `strategy = "context-relay"`.
    pub context_relay: ContextRelayOptions,
    /// The unknown `strategy` name this combo was written with, reported by
    /// [`super::Config::warnings`].
    #[serde(skip)]
    pub unknown_strategy: Option<String>,
}

impl Default for ComboConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            strategy: Strategy::COMBO_DEFAULT,
            targets: Vec::new(),
            config: ComboOptions::default(),
            fusion: FusionOptions::default(),
            pipeline: PipelineOptions::default(),
            context_relay: ContextRelayOptions::default(),
            unknown_strategy: None,
        }
    }
}

/// `[[combos]]` as written: the strategy still a name, so an unknown one can fall back.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawComboConfig {
    name: String,
    strategy: Option<String>,
    targets: Vec<ComboTarget>,
    config: ComboOptions,
    fusion: FusionOptions,
    pipeline: PipelineOptions,
    context_relay: ContextRelayOptions,
}

impl From<RawComboConfig> for ComboConfig {
    fn from(raw: RawComboConfig) -> Self {
        let (strategy, unknown) = match raw.strategy.as_deref() {
            None => (Strategy::COMBO_DEFAULT, None),
            Some(name) => Strategy::parse_lenient(name),
        };
        Self {
            name: raw.name,
            strategy,
            targets: raw.targets,
            config: raw.config,
            fusion: raw.fusion,
            pipeline: raw.pipeline,
            context_relay: raw.context_relay,
            unknown_strategy: unknown.map(|u| u.0),
        }
    }
}

/// One combo target: `{ target = "provider/model", weight?, connection? }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComboTarget {
    /// `provider/model`; the model part (everything after the first `/`) goes upstream.
    pub target: String,
    /// For weighted strategies, 0–100; absent = [`ComboTarget::DEFAULT_WEIGHT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Optional pin to one connection of the target's provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
}

impl ComboTarget {
    /// The weight of a target that does not set one.
    pub const DEFAULT_WEIGHT: u32 = 1;

    /// `(provider, model)`, split at the first `/`; `None` when there is no `/` or either part is
    /// empty.
    pub fn split(&self) -> Option<(&str, &str)> {
        split_provider_model(&self.target)
    }

    pub fn weight(&self) -> u32 {
        self.weight.unwrap_or(Self::DEFAULT_WEIGHT)
    }
}

/// Splits `provider/model` at the first `/`. Model ids may themselves contain `/`.
pub fn split_provider_model(name: &str) -> Option<(&str, &str)> {
    let (provider, model) = name.split_once('/')?;
    (!provider.is_empty() && !model.is_empty()).then_some((provider, model))
}

/// `[combos.config]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComboOptions {
    /// Extra attempts on the same target for 408/429/5xx (0–10).
    pub max_retries: u32,
    /// ≤ 60000.
    pub retry_delay_ms: Millis,
    /// Per target attempt.
    pub timeout_ms: Millis,
    /// 0 = none.
    pub combo_timeout_ms: Millis,
    /// Global cap for one request over all targets.
    pub max_attempts: u32,
}

impl Default for ComboOptions {
    fn default() -> Self {
        Self {
            max_retries: 1,
            retry_delay_ms: 2000,
            timeout_ms: 120_000,
            combo_timeout_ms: 0,
            max_attempts: 30,
        }
    }
}
