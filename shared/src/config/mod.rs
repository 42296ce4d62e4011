//! The config contract: typed loading and validation of `switchyard.toml`.
//!
//! A file in the shape of the project's reference example must load unchanged, so the structs
//! here mirror it key for key, with the example's values as defaults. Everything else is an
//! error that names its key path: unknown keys (a typo such as `conect_ms` must not silently
//! fall back to a default), wrong types, and the semantic rules checked by [`Config::validate`],
//! which collects *every* problem so `switchyard-node --check` can list them all at once.
//!
//! Secrets never live in the file: `*_env` keys name environment variables, resolved by
//! [`Config::resolve_secrets`]. Client model names are resolved to targets by [`ModelIndex`].
//!
//! Keys beyond the contract (kept few): `[server] client_request_timeout_ms`,
//! `[[providers]] cost_per_1k_tokens`, `[[providers]] responses_api`, `[translation]`,
//! `[[api_keys]] key_sha256` (named by the contract as the
//! alternative to `key_env`), `[resilience.provider_error_rules]` (see [`crate::settings`]),
//! `[[model_catalog]]` (see [`crate::model_catalog`]) and `[quota_preflight]` (see
//! [`crate::quota_preflight`]).
//!
//! Some problems are warnings rather than errors ([`Config::warnings`]): a combo `strategy`
//! that names no known strategy runs as `priority`, as the reference does.

mod combo;
mod context_relay;
mod egress;
mod error;
mod fallback;
mod multi_call;
mod provider;
mod resolve;
mod secrets;
mod server;
mod strategy_inputs;
#[cfg(test)]
mod stream_recovery;
mod translation;
mod upstream_transport;
mod usage_wall;
mod validate;

#[cfg(test)]
mod tests;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::settings::ResiliencePatch;

pub use combo::{ComboConfig, ComboOptions, ComboTarget, split_provider_model};
pub use context_relay::ContextRelayOptions;
pub use egress::EgressLockConfig;
pub use error::{ConfigError, ConfigErrors};
pub use fallback::{EmergencyFallback, FallbackConfig, global_fallback_applies};
pub use multi_call::{FusionOptions, PipelineOptions, StepFailure};
pub use provider::{
    ConnectionConfig, ConnectionRateLimit, ConnectionStrategy, ErrorRule, ProviderConfig,
    ProviderFormat, ProviderTimeouts, StatusRestatementRule,
};
pub use resolve::{ComboRoute, ModelIndex, ResolveError, Resolved, Target, resolve_model};
pub use secrets::{ClientKey, ResolvedSecrets, Secret};
pub use server::{
    ApiKeyConfig, AuthConfig, ClusterConfig, ClusterMode, KNOWN_SCOPES, SCOPE_LEASE_EXCLUSIVE,
    ServerConfig, glob_match,
};
pub use strategy_inputs::QuotaPreflightConfig;
pub use translation::{ResponsesApi, TranslationConfig, is_openai_responses_host};
pub use upstream_transport::HttpVersion;

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub api_keys: Vec<ApiKeyConfig>,
    pub cluster: ClusterConfig,
    pub providers: Vec<ProviderConfig>,
    pub connections: Vec<ConnectionConfig>,
    pub combos: Vec<ComboConfig>,
    /// The file layer of the resilience settings: only the keys the file sets. The effective
    /// values (defaults, environment and runtime layers folded in) come from
    /// [`crate::settings::build`].
    pub resilience: ResiliencePatch,
    /// Extra (not in the contract): `[translation]`, the parameter policy of cross-format
    /// requests.
    pub translation: TranslationConfig,
    /// Overrides and additions to the default model catalog.
    pub model_catalog: Vec<crate::model_catalog::ModelInfo>,
    pub quota_preflight: QuotaPreflightConfig,
    /// `[fallback]`: the global fallback model and the emergency fallback.
    pub fallback: FallbackConfig,
    /// `[egress_lock]`: the egress-bucketed sibling lock.
    pub egress_lock: EgressLockConfig,
}

impl Config {
    /// Parses and validates a config. Syntax and type errors stop at the first one (with its key
    /// path and line); semantic errors are all reported.
    pub fn from_toml_str(source: &str) -> Result<Self, ConfigErrors> {
        let deserializer = toml::Deserializer::parse(source)
            .map_err(|error| ConfigErrors::single("", toml_message(source, &error)))?;
        let config: Self = serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            let path = if path == "." { String::new() } else { path };
            ConfigErrors::single(path, toml_message(source, error.inner()))
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigErrors> {
        let path = path.as_ref();
        let source = std::fs::read_to_string(path).map_err(|error| {
            ConfigErrors::single("", format!("cannot read {}: {error}", path.display()))
        })?;
        Self::from_toml_str(&source)
    }

    /// Every semantic problem, each naming its key path.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        validate::validate(self)
    }

    /// Problems that do not stop the config from loading, each naming its key path: log them
    /// at startup and on `--check`.
    pub fn warnings(&self) -> Vec<ConfigError> {
        self.combos
            .iter()
            .enumerate()
            .filter_map(|(index, combo)| {
                let name = combo.unknown_strategy.as_deref()?;
                Some(ConfigError::new(
                    format!("combos[{index}].strategy"),
                    format!(
                        "unknown routing strategy `{name}`; using `{}`",
                        crate::strategy::Strategy::UNKNOWN_FALLBACK
                    ),
                ))
            })
            .collect()
    }

    /// The model catalog: the default one with `[[model_catalog]]` applied.
    pub fn catalog(&self) -> crate::model_catalog::ModelCatalog {
        crate::model_catalog::ModelCatalog::with_overrides(&self.model_catalog)
    }

    pub fn provider(&self, id: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|provider| provider.id == id)
    }

    pub fn connection(&self, id: &str) -> Option<&ConnectionConfig> {
        self.connections
            .iter()
            .find(|connection| connection.id == id)
    }

    pub fn combo(&self, name: &str) -> Option<&ComboConfig> {
        self.combos.iter().find(|combo| combo.name == name)
    }

    pub fn api_key(&self, id: &str) -> Option<&ApiKeyConfig> {
        self.api_keys.iter().find(|key| key.id == id)
    }

    /// The connections of a provider, in file order.
    pub fn connections_of<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a ConnectionConfig> + 'a {
        self.connections
            .iter()
            .filter(move |connection| connection.provider == provider)
    }
}

/// The message of a TOML error with its line and column, without the multi-line snippet.
fn toml_message(source: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    match error.span() {
        Some(span) => format!("{message} (at {})", error::location(source, span.start)),
        None => message.to_owned(),
    }
}
