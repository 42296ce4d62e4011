//! A small model catalog: context window, list price and tier per model, as data.
//!
//! `context-optimized` needs each target's context window and `auto` its price and tier; the
//! upstream APIs do not say them, so Switchyard ships a default catalog for common models
//! (`model_catalog.toml`, with its sources) and lets the config override or extend it with
//! `[[model_catalog]]` entries. Lookups tolerate dated and routed ids (`gpt-4o-2024-08-06`,
//! `openai/gpt-4o`) by matching the longest listed prefix.

use serde::{Deserialize, Serialize};

use crate::strategy::ModelTier;

/// The default catalog, embedded.
const BUILTIN: &str = include_str!("model_catalog.toml");

/// Typical prompt-to-completion token ratio used to blend input and output prices into one
/// cost per token (agent and chat traffic sends several prompt tokens per completion token).
const INPUT_SHARE: f64 = 0.75;

/// One model: a `[[model]]` row of the default catalog, or a `[[model_catalog]]` entry of the
/// config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// The bare model id (case-insensitive).
    pub model: String,
    /// Tokens of context (prompt plus completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// USD per 1M input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_per_1m: Option<f64>,
    /// USD per 1M output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_per_1m: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<ModelTier>,
}

impl ModelInfo {
    /// A blended USD price per 1k tokens (75 % input, 25 % output), the unit of
    /// [`crate::strategy::Candidate::cost`]; `None` unless both prices are known.
    pub fn cost_per_1k(&self) -> Option<f64> {
        let valid = |x: Option<f64>| x.filter(|v| v.is_finite() && *v >= 0.0);
        let (i, o) = (valid(self.input_per_1m)?, valid(self.output_per_1m)?);
        Some((INPUT_SHARE * i + (1.0 - INPUT_SHARE) * o) / 1000.0)
    }

    /// `other`'s known fields over this one's.
    fn overlay(&mut self, other: &ModelInfo) {
        self.context_window = other.context_window.or(self.context_window);
        self.input_per_1m = other.input_per_1m.or(self.input_per_1m);
        self.output_per_1m = other.output_per_1m.or(self.output_per_1m);
        self.tier = other.tier.or(self.tier);
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    model: Vec<ModelInfo>,
}

/// A set of models, looked up by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCatalog {
    models: Vec<ModelInfo>,
}

impl ModelCatalog {
    /// The embedded default catalog (empty if it failed to parse, which a test rules out).
    pub fn builtin() -> Self {
        let models = toml::from_str::<CatalogFile>(BUILTIN)
            .map(|f| f.model)
            .unwrap_or_default();
        Self { models }
    }

    /// The default catalog with the config's entries applied: an entry for a listed model
    /// replaces the fields it sets, any other entry adds a model.
    pub fn with_overrides(overrides: &[ModelInfo]) -> Self {
        let mut catalog = Self::builtin();
        for entry in overrides {
            match catalog
                .models
                .iter_mut()
                .find(|m| m.model.eq_ignore_ascii_case(&entry.model))
            {
                Some(existing) => existing.overlay(entry),
                None => catalog.models.push(entry.clone()),
            }
        }
        catalog
    }

    pub fn models(&self) -> &[ModelInfo] {
        &self.models
    }

    /// The entry for `model`: an exact (case-insensitive) match, else the longest listed id
    /// that `model` starts with followed by `-`, `@`, `:` or `.` (dated and tagged ids), after
    /// dropping any `provider/` prefix.
    pub fn get(&self, model: &str) -> Option<&ModelInfo> {
        let bare = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        self.models
            .iter()
            .filter(|m| {
                let id = m.model.to_ascii_lowercase();
                bare == id
                    || bare
                        .strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.starts_with(['-', '@', ':', '.']))
            })
            .max_by_key(|m| m.model.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_catalog_parses_and_covers_the_common_models() {
        let parsed = toml::from_str::<CatalogFile>(BUILTIN);
        assert!(parsed.is_ok(), "{parsed:?}");
        let c = ModelCatalog::builtin();
        for id in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "o3",
            "o4-mini",
            "gpt-5",
            "claude-sonnet-4-5",
            "claude-opus-4-1",
            "claude-haiku-4-5",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "deepseek-chat",
            "deepseek-reasoner",
            "glm-4.6",
            "llama-3.3-70b-versatile",
        ] {
            let m = c.get(id);
            assert!(
                m.is_some_and(|m| m.context_window.is_some()
                    && m.cost_per_1k().is_some()
                    && m.tier.is_some()),
                "{id}: {m:?}"
            );
        }
        let mut ids: Vec<String> = c.models().iter().map(|m| m.model.to_lowercase()).collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate ids");
    }

    #[test]
    fn dated_routed_and_cased_ids_match_the_longest_prefix() {
        let c = ModelCatalog::builtin();
        let id = |m: &str| c.get(m).map(|i| i.model.clone());
        assert_eq!(id("gpt-4o-2024-08-06").as_deref(), Some("gpt-4o"));
        assert_eq!(id("gpt-4o-mini-2024-07-18").as_deref(), Some("gpt-4o-mini"));
        assert_eq!(id("openai/GPT-4.1-mini").as_deref(), Some("gpt-4.1-mini"));
        assert_eq!(
            id("claude-sonnet-4-5-20250929").as_deref(),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(
            id("claude-sonnet-4-20250514").as_deref(),
            Some("claude-sonnet-4")
        );
        // A prefix must end at a separator: gpt-4 is not gpt-4o, o3-pro-x is o3's family.
        assert_eq!(id("gpt-4"), None);
        assert_eq!(id("gpt-4oz"), None);
        assert_eq!(id("o3-2025-04-16").as_deref(), Some("o3"));
        assert_eq!(id("totally-unknown"), None);
    }

    #[test]
    fn blended_cost_is_per_1k_tokens() {
        let c = ModelCatalog::builtin();
        // gpt-4o: 0.75 * 2.50 + 0.25 * 10.00 = 4.375 USD per 1M = 0.004375 per 1k.
        let cost = c.get("gpt-4o").and_then(ModelInfo::cost_per_1k);
        assert!(
            cost.is_some_and(|x| (x - 0.004_375).abs() < 1e-12),
            "{cost:?}"
        );
        let partial = ModelInfo {
            model: "x".into(),
            context_window: None,
            input_per_1m: Some(1.0),
            output_per_1m: None,
            tier: None,
        };
        assert_eq!(partial.cost_per_1k(), None);
    }

    #[test]
    fn config_entries_override_fields_and_add_models() {
        let overrides = [
            ModelInfo {
                model: "GPT-4o".into(),
                context_window: None,
                input_per_1m: Some(1.0),
                output_per_1m: Some(1.0),
                tier: None,
            },
            ModelInfo {
                model: "qwen3-coder".into(),
                context_window: Some(262_144),
                input_per_1m: None,
                output_per_1m: None,
                tier: Some(ModelTier::Standard),
            },
        ];
        let c = ModelCatalog::with_overrides(&overrides);
        let gpt = c.get("gpt-4o");
        assert_eq!(gpt.and_then(|m| m.context_window), Some(128_000));
        assert_eq!(gpt.and_then(|m| m.input_per_1m), Some(1.0));
        assert_eq!(gpt.and_then(|m| m.tier), Some(ModelTier::Standard));
        assert_eq!(
            c.get("qwen3-coder-480b").and_then(|m| m.context_window),
            Some(262_144)
        );
        assert_eq!(c.models().len(), ModelCatalog::builtin().models().len() + 1);
    }
}
