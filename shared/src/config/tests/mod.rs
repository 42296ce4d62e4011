//! Unit tests of the config loader: parse errors, semantic validation, secrets and model
//! resolution. The full contract file is exercised by `shared/tests/config_contract.rs`.

mod multi_call;
mod parse;
mod resolve;
mod secrets;
mod semantic;
mod strategy_inputs;

use super::{Config, ConfigErrors};

/// A small valid config: two providers share a model, one local provider passes everything
/// through, and a combo routes over all three.
pub(super) const BASE: &str = r#"
[auth]
require_api_key = false

[[providers]]
id = "openai"
base_url = "https://api.openai.com/v1"
models = ["gpt-4.1", "shared-model"]

[[providers]]
id = "other"
base_url = "https://other.example/v1"
models = ["shared-model", "only-other", "vendor/model-x"]

[[providers]]
id = "local"
category = "local"
base_url = "http://127.0.0.1:11434/v1"

[[connections]]
id = "openai-1"
provider = "openai"
api_key_env = "OPENAI_KEY"

[[connections]]
id = "other-1"
provider = "other"
api_key_env = "OTHER_KEY"

[[connections]]
id = "local-1"
provider = "local"

[[combos]]
name = "mix"
strategy = "weighted"
targets = [
  { target = "openai/gpt-4.1", weight = 5 },
  { target = "other/only-other", connection = "other-1" },
  { target = "local/llama3" },
]
"#;

pub(super) fn base() -> Config {
    Config::from_toml_str(BASE).unwrap_or_else(|errors| panic!("{errors}"))
}

/// Parses `BASE` followed by `extra`, expecting failure.
pub(super) fn parse_err(extra: &str) -> ConfigErrors {
    match Config::from_toml_str(&format!("{BASE}\n{extra}")) {
        Ok(_) => panic!("expected an error for:\n{extra}"),
        Err(errors) => errors,
    }
}

/// Validates a mutated config, expecting failure.
pub(super) fn invalid(config: &Config) -> ConfigErrors {
    match config.validate() {
        Ok(()) => panic!("expected validation errors"),
        Err(errors) => errors,
    }
}

/// Asserts an error exists at `path` whose message contains `needle`.
#[track_caller]
pub(super) fn assert_error(errors: &ConfigErrors, path: &str, needle: &str) {
    assert!(
        errors
            .errors
            .iter()
            .any(|e| e.path == path && e.message.contains(needle)),
        "no error at `{path}` containing `{needle}` in:\n{errors}"
    );
}

#[test]
fn base_config_is_valid() {
    base();
}
