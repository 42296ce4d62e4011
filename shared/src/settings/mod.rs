//! The effective resilience settings and their precedence chain.
//!
//! Resilience numbers come from five places, lowest to highest:
//! built-in default < config file < environment < persisted runtime setting
//! (`PATCH /api/resilience`) < per-connection override. Two environment variables break the
//! plain order on purpose: `RATE_LIMIT_AUTO_ENABLE` beats the persisted value, while the queue
//! budget variables only set a default that a persisted value beats (see [`mod@env`]).
//!
//! Operators need to know *why* a value is what it is, so every effective value carries its
//! [`Source`] ([`ResilienceEffective`] serializes as `{"value": …, "source": "file"}` leaves for
//! `GET /api/resilience`). Values are clamped into their bounds with a warning instead of
//! failing startup; runtime patches, by contrast, are rejected with the offending field named
//! ([`apply_patch`]), because the operator is there to correct them.
//!
//! Policy modules take their own parameter types (`breaker::BreakerProfile`,
//! `cooldown::CooldownParams`, `admission::QueueSettings`, …); [`params`] builds them from the
//! effective values ([`ResilienceSettings::breaker_profile`], [`effective_queue`], …).

pub mod env;
pub mod layer;
pub mod params;

mod defaults;
mod model;
mod normalize;
mod patch;
mod stream_recovery;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::Config;

pub use env::EnvLayer;
pub use layer::{Layer, Mode, ProviderErrorRules};
pub use model::*;
pub use params::{effective_queue, queue_enabled};
pub use patch::{Persisted, SettingsPatch, apply_patch};
pub use stream_recovery::{
    MAX_CONTINUATIONS_LIMIT, MAX_HOLD_BYTES, MAX_HOLD_MS, MAX_REOPENS_LIMIT, StreamRecovery,
    StreamRecoveryEffective, StreamRecoveryPatch,
};

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Default,
    File,
    Env,
    Persisted,
    Override,
}

/// A value and the layer that set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

/// A problem with one setting, named by its dotted path (`provider_breaker.apikey.failure_threshold`,
/// or the environment variable's name for the environment layer). Used both for rejected patch
/// fields and for clamping warnings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// The outcome of [`build`]: the effective settings and every warning produced on the way
/// (values clamped into bounds, unparseable environment variables). Log the warnings at startup
/// and show them in `switchyard-node --check`.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltSettings {
    pub effective: ResilienceEffective,
    pub warnings: Vec<FieldError>,
}

impl BuiltSettings {
    /// The plain values the policy code reads.
    pub fn values(&self) -> ResilienceSettings {
        self.effective.values()
    }
}

/// Computes the effective settings from the layers. Pure: the environment has already been read
/// into `env` (see [`EnvLayer::from_lookup`]).
///
/// Per-connection overrides are not folded in here (they are per connection); use
/// [`effective_queue`]. Their out-of-range values are reported among the warnings.
pub fn build(config: &Config, env: &EnvLayer, persisted: &Persisted) -> BuiltSettings {
    let mut warnings = Vec::new();

    let mut file = config.resilience.clone();
    ResilienceSettings::bound(&mut file, &(), Mode::Clamp, "resilience", &mut warnings);
    warnings.extend(env.warnings.iter().cloned());
    let mut stored = persisted.0.clone();
    ResilienceSettings::bound(&mut stored, &(), Mode::Clamp, "persisted", &mut warnings);

    let mut effective = ResilienceSettings::default().sourced(Source::Default);
    ResilienceSettings::apply(&mut effective, &file, Source::File);
    ResilienceSettings::apply(&mut effective, &env.defaults, Source::Env);
    ResilienceSettings::apply(&mut effective, &stored, Source::Persisted);
    ResilienceSettings::apply(&mut effective, &env.forced, Source::Env);
    normalize::cross_field(&mut effective, &mut warnings);

    for connection in &config.connections {
        params::override_warnings(connection, &mut warnings);
    }
    BuiltSettings {
        effective,
        warnings,
    }
}
