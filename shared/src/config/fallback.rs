//! `[fallback]`: the last resorts after routing failed (docs/router-node.md, "Last resorts").
//!
//! - `global_fallback_model`: a combo that ends in 502 or 503 gets one more attempt on this
//!   `provider/model` (the reference's `settings.globalFallbackModel`);
//! - `[fallback.emergency]`: a direct request that fails with one of `statuses` is retried
//!   once on `target`, with the request's output-token limit clamped to `max_tokens` (the
//!   reference's `OMNIROUTE_EMERGENCY_FALLBACK`).
//!
//! Both are off by default and make exactly one extra dispatch, never a chain.

use serde::{Deserialize, Serialize};

use super::error::Collector;
use super::{Config, split_provider_model};

/// `[fallback]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FallbackConfig {
    /// `provider/model` tried once when a combo ends in 502/503; empty = off.
    pub global_fallback_model: String,
    pub emergency: EmergencyFallback,
}

/// `[fallback.emergency]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmergencyFallback {
    pub enabled: bool,
    /// `provider/model` of the one retry.
    pub target: String,
    /// The final statuses of a direct request that trigger it.
    pub statuses: Vec<u16>,
    /// The output-token limit of the retried request is clamped to this (`max_tokens`,
    /// `max_completion_tokens`, `max_output_tokens`), and set when the request had none.
    pub max_tokens: u32,
}

impl Default for EmergencyFallback {
    fn default() -> Self {
        Self {
            enabled: false,
            target: String::new(),
            statuses: vec![429, 500, 502, 503, 504],
            max_tokens: 4096,
        }
    }
}

impl EmergencyFallback {
    /// Whether a direct request that ended with `status` is retried on the target.
    pub fn applies_to(&self, status: u16) -> bool {
        self.enabled && !self.target.is_empty() && self.statuses.contains(&status)
    }
}

/// Whether a combo that ended with `status` gets its one attempt on the global fallback model.
pub fn global_fallback_applies(model: &str, status: u16) -> bool {
    !model.is_empty() && matches!(status, 502 | 503)
}

/// Both targets name a configured `provider/model`; the emergency limits are sane.
pub(super) fn validate(config: &Config, errors: &mut Collector) {
    let f = &config.fallback;
    let check = |name: &str, path: &str, errors: &mut Collector| {
        let Some((provider, _)) = split_provider_model(name) else {
            errors.push(path, format!("`{name}` is not a provider/model"));
            return;
        };
        if !config.providers.iter().any(|p| p.id == provider) {
            errors.push(path, format!("unknown provider `{provider}`"));
        }
    };
    if !f.global_fallback_model.is_empty() {
        check(
            &f.global_fallback_model,
            "fallback.global_fallback_model",
            errors,
        );
    }
    let e = &f.emergency;
    if e.enabled && e.target.is_empty() {
        errors.push("fallback.emergency.target", "required when enabled");
    } else if !e.target.is_empty() {
        check(&e.target, "fallback.emergency.target", errors);
    }
    if e.max_tokens == 0 {
        errors.push("fallback.emergency.max_tokens", "must be at least 1");
    }
    if e.statuses.iter().any(|s| !(400..=599).contains(s)) {
        errors.push("fallback.emergency.statuses", "statuses are 400-599");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_resorts_apply_only_to_their_statuses() {
        assert!(global_fallback_applies("p/m", 502));
        assert!(global_fallback_applies("p/m", 503));
        assert!(!global_fallback_applies("p/m", 429));
        assert!(!global_fallback_applies("", 503));
        let mut e = EmergencyFallback::default();
        assert!(!e.applies_to(503), "off by default");
        e.enabled = true;
        assert!(!e.applies_to(503), "no target");
        e.target = "p/m".into();
        assert!(e.applies_to(503) && e.applies_to(429));
        assert!(!e.applies_to(400));
    }
}
