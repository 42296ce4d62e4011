//! `[[model_catalog]]` and `[quota_preflight]`: the inputs of the catalog-aware strategies and
//! of the quota preflight, beyond the reference contract (additive; both may be absent).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::Collector;
use crate::model_catalog::ModelInfo;
use crate::quota_headers::WindowKind;
use crate::quota_preflight::Thresholds;

/// `[quota_preflight]`: skip a connection whose reported quota window is nearly spent (skip
/// reason `quota_cutoff`). Percentages are of the window *remaining*, 0–100.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaPreflightConfig {
    /// Off by default, as in the reference.
    pub enabled: bool,
    /// Cut off at or below this remaining percent.
    pub default_threshold_percent: f64,
    /// Report a window as low at or below this remaining percent.
    pub warn_threshold_percent: f64,
    /// Per window (`session`, `weekly`, `requests`, `tokens`, `input_tokens`,
    /// `output_tokens`, `unified`) for every provider.
    pub windows: BTreeMap<String, f64>,
    /// Per provider id, per window; wins over `windows`.
    pub providers: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Default for QuotaPreflightConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            default_threshold_percent: 2.0,
            warn_threshold_percent: 20.0,
            windows: BTreeMap::new(),
            providers: BTreeMap::new(),
        }
    }
}

impl QuotaPreflightConfig {
    /// The thresholds that apply to `provider`'s connections. Unknown window names are left
    /// out (validation reports them).
    pub fn thresholds(&self, provider: &str) -> Thresholds {
        let mut windows: Vec<(WindowKind, f64)> = Vec::new();
        let layers = [Some(&self.windows), self.providers.get(provider)];
        for layer in layers.into_iter().flatten() {
            for (name, percent) in layer {
                if let Some(kind) = WindowKind::parse(name) {
                    windows.retain(|(k, _)| *k != kind);
                    windows.push((kind, *percent));
                }
            }
        }
        Thresholds {
            default_percent: self.default_threshold_percent,
            warn_percent: self.warn_threshold_percent,
            windows,
        }
    }
}

fn percent(value: f64, path: &str, errors: &mut Collector) {
    if !(value.is_finite() && (0.0..=100.0).contains(&value)) {
        errors.push(path, "must be a percentage from 0 to 100");
    }
}

fn windows(layer: &BTreeMap<String, f64>, path: &str, errors: &mut Collector) {
    for (name, value) in layer {
        if WindowKind::parse(name).is_none() {
            let known: Vec<&str> = WindowKind::ALL.iter().map(|k| k.as_str()).collect();
            errors.push(
                format!("{path}.{name}"),
                format!("unknown quota window; expected one of {}", known.join(", ")),
            );
        }
        percent(*value, &format!("{path}.{name}"), errors);
    }
}

pub(super) fn validate_preflight(p: &QuotaPreflightConfig, errors: &mut Collector) {
    let path = "quota_preflight";
    percent(
        p.default_threshold_percent,
        &format!("{path}.default_threshold_percent"),
        errors,
    );
    percent(
        p.warn_threshold_percent,
        &format!("{path}.warn_threshold_percent"),
        errors,
    );
    windows(&p.windows, &format!("{path}.windows"), errors);
    for (provider, layer) in &p.providers {
        windows(layer, &format!("{path}.providers.{provider}"), errors);
    }
}

pub(super) fn validate_catalog(entries: &[ModelInfo], errors: &mut Collector) {
    let mut seen = std::collections::HashSet::new();
    for (index, m) in entries.iter().enumerate() {
        let path = format!("model_catalog[{index}]");
        if m.model.trim().is_empty() {
            errors.push(format!("{path}.model"), "is required");
        } else if !seen.insert(m.model.to_ascii_lowercase()) {
            errors.push(
                format!("{path}.model"),
                format!("`{}` is listed twice", m.model),
            );
        }
        if m.context_window == Some(0) {
            errors.push(format!("{path}.context_window"), "must be above 0");
        }
        for (name, price) in [
            ("input_per_1m", m.input_per_1m),
            ("output_per_1m", m.output_per_1m),
        ] {
            if price.is_some_and(|p| !(p.is_finite() && p >= 0.0)) {
                errors.push(format!("{path}.{name}"), "must be a non-negative number");
            }
        }
    }
}
