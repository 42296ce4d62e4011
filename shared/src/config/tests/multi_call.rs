//! `[combos.fusion]` and `[combos.pipeline]`: parsed from TOML, with defaults, and validated.

use super::{BASE, assert_error, base, invalid};
use crate::config::{ComboConfig, ComboTarget, Config, StepFailure};
use crate::strategy::Strategy;

fn combo(name: &str, strategy: Strategy, targets: &[&str]) -> ComboConfig {
    ComboConfig {
        name: name.into(),
        strategy,
        targets: targets
            .iter()
            .map(|t| ComboTarget {
                target: (*t).into(),
                weight: None,
                connection: None,
            })
            .collect(),
        ..ComboConfig::default()
    }
}

#[test]
fn the_tables_parse_with_their_defaults() {
    let text = format!(
        "{BASE}\n[[combos]]\nname = \"fuse\"\nstrategy = \"fusion\"\n\
         targets = [{{ target = \"openai/gpt-4.1\" }}, {{ target = \"other/only-other\" }}]\n\
         [combos.fusion]\nmin_panel = 1\njudge = \"mix\"\n\
         [combos.pipeline]\non_step_failure = \"skip\"\n"
    );
    let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let c = &config.combos[1];
    assert_eq!(c.strategy, Strategy::Fusion);
    assert_eq!(c.fusion.min_panel, 1);
    assert_eq!(c.fusion.judge, "mix");
    assert_eq!(c.fusion.straggler_grace_ms, 8000);
    assert_eq!(c.pipeline.on_step_failure, StepFailure::Skip);
    assert_eq!(c.pipeline.step_prompt, "Refine the answer above.");
    // The resolved combo carries them to the router.
    let index = crate::config::ModelIndex::build(&config);
    match index.resolve("fuse") {
        Ok(crate::config::Resolved::Combo(route)) => assert_eq!(route.fusion.judge, "mix"),
        other => panic!("{other:?}"),
    }
    let unknown = format!(
        "{BASE}\n[[combos]]\nname = \"x\"\ntargets = [{{ target = \"openai/gpt-4.1\" }}]\n\
         [combos.fusion]\npanel = 2\n"
    );
    let errors = Config::from_toml_str(&unknown).expect_err("unknown keys are refused");
    assert!(errors.to_string().contains("panel"), "{errors}");
}

#[test]
fn fusion_and_pipeline_options_are_validated() {
    let mut config = base();
    let mut fuse = combo(
        "fuse",
        Strategy::Fusion,
        &["openai/gpt-4.1", "local/llama3"],
    );
    fuse.fusion.min_panel = 3;
    fuse.fusion.panel_size = 11;
    fuse.fusion.timeout_ms = 0;
    fuse.fusion.judge = "fuse".into();
    config.combos.push(fuse);
    let mut pipe = combo("pipe", Strategy::Pipeline, &["openai/gpt-4.1"]);
    pipe.pipeline.step_prompt = "  ".into();
    pipe.fusion.judge = "ghost/model".into();
    config.combos.push(pipe);
    let mut judged = combo(
        "judged",
        Strategy::Fusion,
        &["openai/gpt-4.1", "local/llama3"],
    );
    judged.fusion.judge = "pipe".into();
    judged.fusion.straggler_grace_ms = 100_000;
    config.combos.push(judged);
    let errors = invalid(&config);
    assert_error(&errors, "combos[1].fusion.panel_size", "at most 10");
    assert_error(&errors, "combos[1].fusion.timeout_ms", "between 1 and");
    assert_error(&errors, "combos[1].fusion.judge", "the combo itself");
    assert_error(
        &errors,
        "combos[2].pipeline.step_prompt",
        "must not be empty",
    );
    assert_error(
        &errors,
        "combos[2].fusion.judge",
        "no provider has id `ghost`",
    );
    assert_error(&errors, "combos[3].fusion.judge", "`pipeline` combo");
    assert_error(&errors, "combos[3].fusion.straggler_grace_ms", "timeout_ms");

    let mut config = base();
    let mut fuse = combo(
        "fuse",
        Strategy::Fusion,
        &["openai/gpt-4.1", "local/llama3"],
    );
    fuse.fusion.min_panel = 3;
    config.combos.push(fuse);
    assert_error(
        &invalid(&config),
        "combos[1].fusion.min_panel",
        "at most the panel (2",
    );
    config.combos[1].fusion.min_panel = 2;
    config.combos[1].fusion.judge = "openai/gpt-4.1".into();
    config.validate().unwrap_or_else(|e| panic!("{e}"));
}
