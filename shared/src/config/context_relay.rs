//! `[combos.context_relay]`: the options of the `context-relay` combo strategy.
//!
//! Why a section of its own (like `[combos.fusion]`): the options mean nothing to the other
//! strategies, and `[combos.config]` is the config contract's table with fixed keys. The table
//! may be written on any combo; it is read only when the combo's `strategy` is
//! `context-relay`. When a session moves to another connection or target, the older part of
//! its conversation is replaced by a summary the `summariser` model writes, and the last
//! `keep_last` messages go on unchanged.

use serde::{Deserialize, Serialize};

use super::error::Collector;
use super::{Config, split_provider_model};
use crate::Millis;
use crate::strategy::Strategy;

/// Longest `summary_timeout_ms`.
pub const MAX_SUMMARY_TIMEOUT_MS: Millis = 600_000;
/// Largest `keep_last`.
pub const MAX_KEEP_LAST: u32 = 100;

/// `[combos.context_relay]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextRelayOptions {
    /// The model that writes the summary, routed like a client's `model` (`provider/model` or
    /// a combo); empty = the combo's own targets in priority order.
    pub summariser: String,
    /// Conversations with fewer messages (system messages not counted) move unchanged.
    pub min_messages: u32,
    /// The last messages sent unchanged after the summary; extended backwards so a tool call
    /// and its results stay together.
    pub keep_last: u32,
    /// How long the summariser may take; past it the request goes out unchanged.
    pub summary_timeout_ms: Millis,
}

impl Default for ContextRelayOptions {
    fn default() -> Self {
        Self {
            summariser: String::new(),
            min_messages: 6,
            keep_last: 4,
            summary_timeout_ms: 20_000,
        }
    }
}

/// The rules serde cannot express, for every combo's table.
pub(super) fn validate(config: &Config, errors: &mut Collector) {
    for (index, combo) in config.combos.iter().enumerate() {
        let path = format!("combos[{index}].context_relay");
        let r = &combo.context_relay;
        if r.keep_last == 0 || r.keep_last > MAX_KEEP_LAST {
            errors.push(
                format!("{path}.keep_last"),
                format!("must be between 1 and {MAX_KEEP_LAST}"),
            );
        }
        if r.min_messages <= r.keep_last {
            errors.push(
                format!("{path}.min_messages"),
                format!(
                    "must be greater than keep_last ({}), or nothing is left to summarise",
                    r.keep_last
                ),
            );
        }
        if r.summary_timeout_ms == 0 || r.summary_timeout_ms > MAX_SUMMARY_TIMEOUT_MS {
            errors.push(
                format!("{path}.summary_timeout_ms"),
                format!("must be between 1 and {MAX_SUMMARY_TIMEOUT_MS}"),
            );
        }
        if let Some(problem) = summariser_problem(config, &r.summariser) {
            errors.push(format!("{path}.summariser"), problem);
        }
    }
}

/// Why a summariser name cannot be routed, if it cannot: it must be empty, a `provider/model`
/// of a configured provider, or a combo that is not a multi-call combo (a summary that fans
/// out would multiply the calls of one request).
fn summariser_problem(config: &Config, name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    if let Some(other) = config.combos.iter().find(|c| c.name == name) {
        if other.strategy.is_multi_call() || other.strategy == Strategy::ContextRelay {
            return Some(format!(
                "combo `{name}` is a `{}` combo; use a provider/model or a combo with a plain \
                 fallback strategy",
                other.strategy
            ));
        }
        return None;
    }
    match split_provider_model(name) {
        Some((provider, _)) if config.provider(provider).is_some() => None,
        Some((provider, _)) => Some(format!("no provider has id `{provider}`")),
        None => Some(format!(
            "`{name}` is neither a combo nor a provider/model of a configured provider"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{BASE, assert_error, base, invalid};

    #[test]
    fn the_table_parses_and_reaches_the_resolved_combo() {
        let text = format!(
            "{BASE}\n[[combos]]\nname = \"relayed\"\nstrategy = \"context-relay\"\n\
             targets = [{{ target = \"openai/gpt-4.1\" }}, {{ target = \"other/only-other\" }}]\n\
             [combos.context_relay]\nsummariser = \"openai/gpt-4.1\"\nkeep_last = 2\n"
        );
        let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let c = config.combos.last().unwrap();
        assert_eq!(c.strategy, Strategy::ContextRelay);
        assert_eq!(c.context_relay.keep_last, 2);
        assert_eq!(c.context_relay.min_messages, 6);
        let index = crate::config::ModelIndex::build(&config);
        match index.resolve("relayed") {
            Ok(crate::config::Resolved::Combo(route)) => {
                assert_eq!(route.context_relay.summariser, "openai/gpt-4.1");
            }
            other => panic!("{other:?}"),
        }
        let unknown = format!("{text}summary_model = \"x\"\n");
        let errors = Config::from_toml_str(&unknown).expect_err("unknown keys are refused");
        assert!(errors.to_string().contains("summary_model"), "{errors}");
    }

    #[test]
    fn bad_values_are_errors_naming_the_key() {
        let mut config = base();
        let mut relay = config.combos[0].clone();
        relay.name = "relayed".into();
        relay.strategy = Strategy::ContextRelay;
        relay.context_relay = ContextRelayOptions {
            summariser: "ghost/model".into(),
            min_messages: 3,
            keep_last: 4,
            summary_timeout_ms: 0,
        };
        config.combos.push(relay);
        let mut other = config.combos[0].clone();
        other.name = "second".into();
        other.context_relay.keep_last = 0;
        other.context_relay.summariser = "relayed".into();
        config.combos.push(other);
        let errors = invalid(&config);
        assert_error(
            &errors,
            "combos[1].context_relay.summariser",
            "no provider has id `ghost`",
        );
        assert_error(
            &errors,
            "combos[1].context_relay.min_messages",
            "greater than keep_last",
        );
        assert_error(
            &errors,
            "combos[1].context_relay.summary_timeout_ms",
            "between 1 and",
        );
        assert_error(
            &errors,
            "combos[2].context_relay.keep_last",
            "between 1 and 100",
        );
        assert_error(
            &errors,
            "combos[2].context_relay.summariser",
            "`context-relay` combo",
        );
    }

    #[test]
    fn defaults_are_the_documented_values() {
        let r = ContextRelayOptions::default();
        assert_eq!(
            (r.min_messages, r.keep_last, r.summary_timeout_ms),
            (6, 4, 20_000)
        );
        assert!(r.summariser.is_empty());
    }
}
