//! Unit tests of the settings layers: precedence, clamping, patches and parameter structs.

mod clamp;
mod params;
mod patch;
mod precedence;

use std::collections::HashMap;

use super::{BuiltSettings, EnvLayer, Persisted, SettingsPatch, build};
use crate::config::Config;

/// A valid config whose `[resilience]` section is `resilience` (TOML body, may be empty).
fn config_with(resilience: &str) -> Config {
    let source = format!(
        "[auth]\nrequire_api_key = false\n\
         [[providers]]\nid = \"p\"\nbase_url = \"https://p.example\"\n\
         [[connections]]\nid = \"c\"\nprovider = \"p\"\napi_key_env = \"K\"\n\
         {resilience}"
    );
    Config::from_toml_str(&source).unwrap_or_else(|errors| panic!("{errors}"))
}

fn env(pairs: &[(&str, &str)]) -> EnvLayer {
    let map: HashMap<&str, &str> = pairs.iter().copied().collect();
    EnvLayer::from_lookup(&|name| map.get(name).map(|v| (*v).to_owned()))
}

fn persisted(json: &str) -> Persisted {
    let patch = SettingsPatch::from_json(json).unwrap_or_else(|e| panic!("{e:?}"));
    super::apply_patch(&Persisted::default(), &patch).unwrap_or_else(|e| panic!("{e:?}"))
}

fn built(resilience: &str, env: &EnvLayer, persisted: &Persisted) -> BuiltSettings {
    build(&config_with(resilience), env, persisted)
}

/// Asserts a warning exists at `path` whose message contains `needle`.
#[track_caller]
fn assert_warning(built: &BuiltSettings, path: &str, needle: &str) {
    assert!(
        built
            .warnings
            .iter()
            .any(|w| w.path == path && w.message.contains(needle)),
        "no warning at `{path}` containing `{needle}` in {:#?}",
        built.warnings
    );
}
