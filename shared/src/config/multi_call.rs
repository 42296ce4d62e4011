//! `[combos.fusion]` and `[combos.pipeline]`: the options of the two combo strategies that
//! make several upstream calls per client request instead of ordering targets for fallback.
//!
//! Why a section per strategy rather than more `[combos.config]` keys: `[combos.config]` is the
//! config contract's table (its keys are fixed), and these options mean nothing to the other
//! strategies. Both tables may be written on any combo; they are read only when its `strategy`
//! is `fusion` or `pipeline`.

use serde::{Deserialize, Serialize};

use super::error::Collector;
use super::{Config, split_provider_model};
use crate::Millis;
use crate::strategy::Strategy;

/// Largest panel a fusion combo may call at once.
pub const MAX_PANEL: u32 = 10;
/// The panel when `panel_size` is 0: every target, up to this many.
pub const DEFAULT_PANEL: u32 = 5;
/// Longest `[combos.fusion] timeout_ms`.
pub const MAX_FUSION_TIMEOUT_MS: Millis = 600_000;
/// Longest `[combos.pipeline] step_prompt`, in characters.
pub const MAX_STEP_PROMPT_CHARS: usize = 4000;

/// `[combos.fusion]`: a parallel panel, then a judge's synthesis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FusionOptions {
    /// Answers needed before the straggler grace starts, and for the judge to be called.
    pub min_panel: u32,
    /// Targets called at once, in configured order; 0 = every target, up to
    /// [`DEFAULT_PANEL`].
    pub panel_size: u32,
    /// Once `min_panel` answered, how much longer the rest may take.
    pub straggler_grace_ms: Millis,
    /// The panel's hard deadline, from the first call.
    pub timeout_ms: Millis,
    /// The model that synthesises the answers, routed like a client's `model`; empty = the
    /// combo's first target.
    pub judge: String,
}

impl Default for FusionOptions {
    fn default() -> Self {
        Self {
            min_panel: 2,
            panel_size: 0,
            straggler_grace_ms: 8000,
            timeout_ms: 90_000,
            judge: String::new(),
        }
    }
}

impl FusionOptions {
    /// How many targets of `targets` the panel calls at most.
    pub fn panel_limit(&self, targets: usize) -> usize {
        let cap = if self.panel_size == 0 {
            DEFAULT_PANEL
        } else {
            self.panel_size
        };
        targets.min(cap as usize)
    }
}

/// What a pipeline does when a step fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepFailure {
    /// The combo fails with `pipeline_step_failed`, naming the step.
    #[default]
    Fail,
    /// The step is left out; the next step refines the last answer there is.
    Skip,
}

/// `[combos.pipeline]`: the targets as steps, each refining the previous step's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineOptions {
    /// The user message that follows the previous step's answer in the next step's request.
    pub step_prompt: String,
    /// `fail` or `skip`.
    pub on_step_failure: StepFailure,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            step_prompt: "Refine the answer above.".to_owned(),
            on_step_failure: StepFailure::Fail,
        }
    }
}

/// The rules serde cannot express, for every combo's two tables.
pub(super) fn validate(config: &Config, errors: &mut Collector) {
    for (index, combo) in config.combos.iter().enumerate() {
        let path = format!("combos[{index}].fusion");
        let f = &combo.fusion;
        if f.panel_size > MAX_PANEL {
            errors.push(
                format!("{path}.panel_size"),
                format!("must be at most {MAX_PANEL} (0 = every target, up to {DEFAULT_PANEL})"),
            );
        }
        if f.min_panel == 0 {
            errors.push(format!("{path}.min_panel"), "must be at least 1");
        } else if combo.strategy == Strategy::Fusion
            && f.panel_size <= MAX_PANEL
            && f.min_panel as usize > f.panel_limit(combo.targets.len()).max(1)
        {
            errors.push(
                format!("{path}.min_panel"),
                format!(
                    "must be at most the panel ({} of the combo's targets)",
                    f.panel_limit(combo.targets.len())
                ),
            );
        }
        if f.timeout_ms == 0 || f.timeout_ms > MAX_FUSION_TIMEOUT_MS {
            errors.push(
                format!("{path}.timeout_ms"),
                format!("must be between 1 and {MAX_FUSION_TIMEOUT_MS}"),
            );
        }
        if f.straggler_grace_ms > f.timeout_ms {
            errors.push(
                format!("{path}.straggler_grace_ms"),
                "must be at most timeout_ms",
            );
        }
        if let Some(problem) = judge_problem(config, &combo.name, &f.judge) {
            errors.push(format!("{path}.judge"), problem);
        }
        let path = format!("combos[{index}].pipeline");
        let prompt = combo.pipeline.step_prompt.trim();
        if prompt.is_empty() {
            errors.push(format!("{path}.step_prompt"), "must not be empty");
        } else if prompt.chars().count() > MAX_STEP_PROMPT_CHARS {
            errors.push(
                format!("{path}.step_prompt"),
                format!("must be at most {MAX_STEP_PROMPT_CHARS} characters"),
            );
        }
    }
}

/// Why a judge name cannot be routed, if it cannot: it must be empty, a `provider/model` of a
/// configured provider, or another combo that is not itself a multi-call combo (a judge that
/// fans out again would multiply the calls per request).
fn judge_problem(config: &Config, combo: &str, judge: &str) -> Option<String> {
    if judge.is_empty() {
        return None;
    }
    if let Some(other) = config.combos.iter().find(|c| c.name == judge) {
        if other.name == combo {
            return Some("must not be the combo itself".to_owned());
        }
        if other.strategy.is_multi_call() {
            return Some(format!(
                "combo `{judge}` is a `{}` combo itself; use a provider/model or another combo",
                other.strategy
            ));
        }
        return None;
    }
    match split_provider_model(judge) {
        Some((provider, _)) if config.provider(provider).is_some() => None,
        Some((provider, _)) => Some(format!("no provider has id `{provider}`")),
        None => Some(format!(
            "`{judge}` is neither a combo nor a provider/model of a configured provider"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_reference_values() {
        let f = FusionOptions::default();
        assert_eq!(
            (f.min_panel, f.straggler_grace_ms, f.timeout_ms),
            (2, 8000, 90_000)
        );
        assert_eq!(f.panel_limit(3), 3);
        assert_eq!(f.panel_limit(9), 5);
        let sized = FusionOptions { panel_size: 2, ..f };
        assert_eq!(sized.panel_limit(9), 2);
        assert_eq!(
            PipelineOptions::default().step_prompt,
            "Refine the answer above."
        );
    }
}
