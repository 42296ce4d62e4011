//! Runtime settings patches (`PATCH /api/resilience`) and the persisted layer they build up.
//!
//! A patch mirrors the `[resilience]` sections of the config file with snake_case keys, e.g.
//! `{"provider_breaker":{"apikey":{"failure_threshold":5}}}`. Unlike the file and environment
//! layers, which are clamped so a node always starts, a patch is rejected as a whole when any
//! field is wrong (unknown key, wrong type, negative, overflowing or out of range): the operator
//! is waiting for the answer and can correct it. Every bad field is named.
//!
//! The persisted layer is the merge of every accepted patch. It is plain JSON so the node can
//! keep it in its state store (memory plus file in embedded mode, a Redis hash in redis mode).

use serde::{Deserialize, Serialize};

use super::layer::{Layer, Mode};
use super::{FieldError, ResiliencePatch, ResilienceSettings};

/// A partial update of the resilience settings (the body of `PATCH /api/resilience`).
pub type SettingsPatch = ResiliencePatch;

/// The accumulated runtime settings: every accepted patch merged, newest value per key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Persisted(pub SettingsPatch);

impl SettingsPatch {
    /// Parses a patch, naming the field of the first syntax, type or unknown-key error.
    pub fn from_json(body: &str) -> Result<Self, Vec<FieldError>> {
        let mut de = serde_json::Deserializer::from_str(body);
        let patch: Self = serde_path_to_error::deserialize(&mut de).map_err(|error| {
            let path = error.path().to_string();
            let path = if path == "." { String::new() } else { path };
            vec![FieldError::new(path, error.into_inner().to_string())]
        })?;
        de.end()
            .map_err(|error| vec![FieldError::new("", error.to_string())])?;
        Ok(patch)
    }

    /// Every out-of-range field, each named by its path. Empty when the patch is acceptable.
    pub fn check(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut probe = self.clone();
        ResilienceSettings::bound(&mut probe, &(), Mode::Reject, "", &mut errors);
        errors
    }

    /// Whether the patch sets nothing.
    pub fn is_empty(&self) -> bool {
        super::layer::PatchValue::is_unset(self)
    }
}

/// Validates `patch` and folds it into the persisted layer, returning the new persisted layer.
/// Nothing is applied when any field is invalid. Relations between fields
/// (`degradation_threshold ≤ failure_threshold − 1`, maxima ≥ minima) are not errors here: they
/// are clamped with a warning when the effective settings are built, exactly as for the file.
pub fn apply_patch(
    persisted: &Persisted,
    patch: &SettingsPatch,
) -> Result<Persisted, Vec<FieldError>> {
    let errors = patch.check();
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut merged = persisted.0.clone();
    ResilienceSettings::merge(&mut merged, patch);
    Ok(Persisted(merged))
}
