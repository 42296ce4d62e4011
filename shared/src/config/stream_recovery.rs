//! The file rules of `[resilience.stream_recovery]` beyond its bounds (which clamp with a
//! warning, like every resilience value; see [`crate::settings::StreamRecovery`]).
//!
//! Why an error here: mid-stream continuation is named by the table but not available yet. A
//! file that asks for it must not load as if it were on.

use super::Config;
use super::error::Collector;

pub(super) fn validate(config: &Config, errors: &mut Collector) {
    if config.resilience.stream_recovery.midstream_continuation == Some(true) {
        errors.push(
            "resilience.stream_recovery.midstream_continuation",
            "mid-stream continuation is not available yet; set it to false (the hold and its \
             reopens work without it)",
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::settings::{self, EnvLayer, Persisted};

    const PATH: &str = "resilience.stream_recovery.midstream_continuation";

    fn errors_of(toml: &str) -> String {
        match Config::from_toml_str(toml) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn midstream_continuation_is_refused_by_name() {
        let on = "[resilience.stream_recovery]\nenabled = true\nmidstream_continuation = true\n";
        assert!(errors_of(on).contains(PATH), "{}", errors_of(on));
        let off = "[resilience.stream_recovery]\nenabled = true\nmidstream_continuation = false\n";
        assert!(
            !errors_of(off).contains("stream_recovery"),
            "{}",
            errors_of(off)
        );
        let typo = "[resilience.stream_recovery]\nhold_msec = 10\n";
        assert!(errors_of(typo).contains("hold_msec"), "{}", errors_of(typo));
    }

    #[test]
    fn out_of_range_values_are_clamped_with_a_warning_naming_the_key() {
        // A whole valid file: a bare table would not load, and a default config has recovery off.
        let config = Config::from_toml_str(
            "[auth]\nrequire_api_key = false\n\
             [[providers]]\nid = \"p\"\nbase_url = \"https://p.example\"\n\
             [[connections]]\nid = \"c\"\nprovider = \"p\"\napi_key_env = \"K\"\n\
             [resilience.stream_recovery]\nenabled = true\nhold_ms = 0\nmax_reopens = 99\n",
        )
        .unwrap_or_else(|errors| panic!("{errors}"));
        let built = settings::build(&config, &EnvLayer::default(), &Persisted::default());
        let values = built.values().stream_recovery;
        assert!(values.enabled);
        assert_eq!((values.hold_ms, values.max_reopens), (1, 10));
        let warned: Vec<&str> = built.warnings.iter().map(|w| w.path.as_str()).collect();
        assert!(
            warned.contains(&"resilience.stream_recovery.hold_ms")
                && warned.contains(&"resilience.stream_recovery.max_reopens"),
            "{warned:?}"
        );
    }
}
