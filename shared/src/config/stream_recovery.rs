//! How `[resilience.stream_recovery]` loads from a file. The table has no file rules of its
//! own: every value is bounded by [`crate::settings::StreamRecovery`] and clamped with a
//! warning naming the key, like every resilience value (a runtime `PATCH` is rejected
//! instead). What is pinned here: an unknown key is an error naming it, mid-stream
//! continuation loads when asked for, and out-of-range values clamp with a warning.

use crate::config::Config;
use crate::settings::{self, EnvLayer, Persisted};

const VALID: &str = "[auth]\nrequire_api_key = false\n\
     [[providers]]\nid = \"p\"\nbase_url = \"https://p.example\"\n\
     [[connections]]\nid = \"c\"\nprovider = \"p\"\napi_key_env = \"K\"\n";

fn errors_of(toml: &str) -> String {
    match Config::from_toml_str(toml) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

/// The effective section and the warned paths of a whole valid file with `table` appended.
fn built(table: &str) -> (settings::StreamRecovery, Vec<String>) {
    // A whole valid file: a bare table would not load, and a default config has recovery off.
    let config = Config::from_toml_str(&format!("{VALID}[resilience.stream_recovery]\n{table}"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    let built = settings::build(&config, &EnvLayer::default(), &Persisted::default());
    let warned = built.warnings.iter().map(|w| w.path.clone()).collect();
    (built.values().stream_recovery, warned)
}

#[test]
fn midstream_continuation_loads_and_unknown_keys_are_named() {
    let (values, warned) = built("midstream_continuation = true\nmax_continuations = 3\n");
    assert!(values.midstream_continuation && !values.enabled);
    assert_eq!(values.max_continuations, 3);
    assert!(warned.is_empty(), "{warned:?}");
    let (defaults, _) = built("");
    assert!(!defaults.midstream_continuation, "off by default");
    assert_eq!(defaults.max_continuations, 1);
    let typo = "[resilience.stream_recovery]\nmax_continuation = 2\n";
    assert!(
        errors_of(typo).contains("max_continuation"),
        "{}",
        errors_of(typo)
    );
}

#[test]
fn out_of_range_values_are_clamped_with_a_warning_naming_the_key() {
    let (values, warned) = built("enabled = true\nhold_ms = 0\nmax_reopens = 99\n");
    assert!(values.enabled);
    assert_eq!((values.hold_ms, values.max_reopens), (1, 10));
    for key in ["hold_ms", "max_reopens"] {
        let path = format!("resilience.stream_recovery.{key}");
        assert!(warned.contains(&path), "{path} in {warned:?}");
    }
    for (given, clamped) in [(0, 1), (9, 4)] {
        let (values, warned) = built(&format!(
            "midstream_continuation = true\nmax_continuations = {given}\n"
        ));
        assert_eq!(values.max_continuations, clamped);
        assert!(
            warned.contains(&"resilience.stream_recovery.max_continuations".to_owned()),
            "{warned:?}"
        );
    }
}
