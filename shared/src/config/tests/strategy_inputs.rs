//! Combo strategy aliases and unknown names, `[[model_catalog]]` and `[quota_preflight]`.

use super::{BASE, assert_error, base, parse_err};
use crate::config::Config;
use crate::quota_headers::WindowKind;
use crate::strategy::{ModelTier, Strategy};

fn with(extra: &str) -> Config {
    Config::from_toml_str(&format!("{BASE}\n{extra}")).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_unknown_combo_strategy_runs_as_priority_with_a_warning() {
    let config = with(
        "[[combos]]\nname = \"c\"\nstrategy = \"fastest\"\ntargets = [{ target = \"openai/gpt-4.1\" }]\n",
    );
    assert_eq!(config.combos[1].strategy, Strategy::Priority);
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path, "combos[1].strategy");
    assert!(warnings[0].message.contains("`fastest`"), "{warnings:?}");
    assert!(warnings[0].message.contains("`priority`"), "{warnings:?}");
    assert!(base().warnings().is_empty());
    // Unknown keys in a combo are still errors.
    let errors = parse_err("[[combos]]\nname = \"c\"\nstrateg = \"auto\"\ntargets = []\n");
    assert_error(&errors, "combos[1].strateg", "unknown field `strateg`");
}

#[test]
fn combo_strategy_aliases_parse_without_warnings() {
    for (alias, strategy) in Strategy::ALIASES {
        let config = with(&format!(
            "[[combos]]\nname = \"c\"\nstrategy = \"{alias}\"\ntargets = [{{ target = \"openai/gpt-4.1\" }}]\n"
        ));
        assert_eq!(config.combos[1].strategy, strategy, "{alias}");
        assert!(config.warnings().is_empty());
    }
    // Absent: the combo default.
    let config = with("[[combos]]\nname = \"c\"\ntargets = [{ target = \"openai/gpt-4.1\" }]\n");
    assert_eq!(config.combos[1].strategy, Strategy::COMBO_DEFAULT);
}

#[test]
fn model_catalog_entries_override_the_default_catalog() {
    let config = with(
        "[[model_catalog]]\nmodel = \"gpt-4.1\"\ninput_per_1m = 1.0\n\
         [[model_catalog]]\nmodel = \"my-local\"\ncontext_window = 32768\ntier = \"economy\"\n",
    );
    assert_eq!(config.model_catalog.len(), 2);
    let catalog = config.catalog();
    let gpt = catalog.get("gpt-4.1");
    assert_eq!(gpt.and_then(|m| m.input_per_1m), Some(1.0));
    assert_eq!(gpt.and_then(|m| m.output_per_1m), Some(8.0));
    assert_eq!(
        catalog.get("my-local").map(|m| (m.context_window, m.tier)),
        Some((Some(32_768), Some(ModelTier::Economy)))
    );
    assert!(base().model_catalog.is_empty());
    assert_eq!(
        base().catalog(),
        crate::model_catalog::ModelCatalog::builtin()
    );
}

#[test]
fn model_catalog_entries_are_validated() {
    let errors = parse_err(
        "[[model_catalog]]\nmodel = \"\"\n\
         [[model_catalog]]\nmodel = \"x\"\ncontext_window = 0\ninput_per_1m = -1.0\n\
         [[model_catalog]]\nmodel = \"X\"\n",
    );
    assert_error(&errors, "model_catalog[0].model", "is required");
    assert_error(&errors, "model_catalog[1].context_window", "above 0");
    assert_error(&errors, "model_catalog[1].input_per_1m", "non-negative");
    assert_error(&errors, "model_catalog[2].model", "listed twice");
    let errors = parse_err("[[model_catalog]]\nmodel = \"x\"\ntier = \"gold\"\n");
    assert_error(&errors, "model_catalog[0].tier", "unknown variant `gold`");
}

#[test]
fn quota_preflight_defaults_and_per_provider_windows() {
    let p = base().quota_preflight;
    assert!(!p.enabled);
    let t = p.thresholds("openai");
    assert_eq!((t.default_percent, t.warn_percent), (2.0, 20.0));
    assert!(t.windows.is_empty());
    let config = with(
        "[quota_preflight]\nenabled = true\ndefault_threshold_percent = 3\n\
         [quota_preflight.windows]\nsession = 5\nweekly = 4\n\
         [quota_preflight.providers.codex]\nweekly = 1\n",
    );
    let p = &config.quota_preflight;
    assert!(p.enabled);
    let codex = p.thresholds("codex");
    assert_eq!(codex.percent(WindowKind::Session), 5.0);
    assert_eq!(codex.percent(WindowKind::Weekly), 1.0);
    assert_eq!(codex.percent(WindowKind::Tokens), 3.0);
    assert_eq!(p.thresholds("openai").percent(WindowKind::Weekly), 4.0);
}

#[test]
fn quota_preflight_values_are_validated() {
    let errors = parse_err(
        "[quota_preflight]\nwarn_threshold_percent = 120\n\
         [quota_preflight.windows]\nmonthly = 5\n\
         [quota_preflight.providers.codex]\nsession = -1\n",
    );
    assert_error(
        &errors,
        "quota_preflight.warn_threshold_percent",
        "percentage",
    );
    assert_error(
        &errors,
        "quota_preflight.windows.monthly",
        "unknown quota window",
    );
    assert_error(
        &errors,
        "quota_preflight.providers.codex.session",
        "percentage",
    );
}
