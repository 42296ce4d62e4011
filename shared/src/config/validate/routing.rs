//! Validation of the routing sections: providers, connections, combos, and the references
//! between them.

use std::collections::HashSet;

use super::{bad_env_name, is_env_name, is_label, unique};
use crate::config::error::Collector;
use crate::config::{ComboTarget, Config, ProviderConfig, split_provider_model};
use crate::endpoint::{self, Endpoint};

const STATUS: std::ops::RangeInclusive<u16> = 100..=599;

pub(super) fn providers(config: &Config, errors: &mut Collector) {
    for (index, provider) in config.providers.iter().enumerate() {
        provider_rules(provider, &format!("providers[{index}]"), errors);
    }
    unique(
        config.providers.iter().map(|p| p.id.as_str()),
        "providers",
        "id",
        errors,
    );
}

fn provider_rules(provider: &ProviderConfig, path: &str, errors: &mut Collector) {
    crate::config::upstream_transport::validate(provider, path, errors);
    if provider.id.is_empty() {
        errors.push(format!("{path}.id"), "is required");
    } else if !is_provider_id(&provider.id) {
        errors.push(
            format!("{path}.id"),
            format!("`{}` must match [a-z0-9._-]+", provider.id),
        );
    }
    if provider.base_url.is_empty() {
        errors.push(format!("{path}.base_url"), "is required");
    } else if !(provider.base_url.starts_with("http://")
        || provider.base_url.starts_with("https://"))
    {
        errors.push(
            format!("{path}.base_url"),
            "must start with http:// or https://",
        );
    } else if url_has_credentials(&provider.base_url) {
        // The upstream client sends no credentials taken from a URL; they belong in the
        // connection's api_key_env, so a URL carrying them is refused at load, not at dispatch.
        errors.push(
            format!("{path}.base_url"),
            "must not carry user:password@ credentials; put the key in a connection's api_key_env",
        );
    } else if Endpoint::parse(&endpoint::join(&provider.base_url, "/messages")).is_none() {
        // The node sends with this same parse; a URL it refuses would fail every attempt as
        // a refused connect and cool the provider's healthy-looking connections.
        errors.push(
            format!("{path}.base_url"),
            format!(
                "`{}` is not an absolute http(s) URL with a host",
                provider.base_url
            ),
        );
    }
    let mut models = HashSet::new();
    for (index, model) in provider.models.iter().enumerate() {
        if model.trim().is_empty() {
            errors.push(format!("{path}.models[{index}]"), "must not be empty");
        } else if !models.insert(model.as_str()) {
            errors.push(
                format!("{path}.models[{index}]"),
                format!("`{model}` is listed twice"),
            );
        }
    }
    if provider.sticky_round_robin_limit == 0 {
        errors.push(
            format!("{path}.sticky_round_robin_limit"),
            "must be at least 1",
        );
    }
    let timeouts = &provider.timeouts;
    for (name, value) in [
        ("connect_ms", timeouts.connect_ms),
        ("headers_ms", timeouts.headers_ms),
        ("first_content_ms", timeouts.first_content_ms),
        ("idle_ms", timeouts.idle_ms),
    ] {
        if value == 0 {
            errors.push(format!("{path}.timeouts.{name}"), "must be above 0");
        }
    }
    if let Some(cost) = provider.cost_per_1k_tokens
        && (!cost.is_finite() || cost < 0.0)
    {
        errors.push(
            format!("{path}.cost_per_1k_tokens"),
            "must be a non-negative number",
        );
    }
    let mut rule_ids = HashSet::new();
    for (index, rule) in provider.status_restatement.iter().enumerate() {
        let rule_path = format!("{path}.status_restatement[{index}]");
        if rule.id.is_empty() {
            errors.push(format!("{rule_path}.id"), "is required");
        } else if !rule_ids.insert(rule.id.as_str()) {
            errors.push(
                format!("{rule_path}.id"),
                format!("`{}` is already used in this provider", rule.id),
            );
        }
        if rule.from_statuses.is_empty() {
            errors.push(format!("{rule_path}.from_statuses"), "must not be empty");
        }
        for (code_index, code) in rule.from_statuses.iter().enumerate() {
            if !STATUS.contains(code) {
                errors.push(
                    format!("{rule_path}.from_statuses[{code_index}]"),
                    format!("status {code} is out of range 100..=599"),
                );
            }
        }
        if rule.to_status == 0 {
            errors.push(format!("{rule_path}.to_status"), "is required");
        } else if !STATUS.contains(&rule.to_status) {
            errors.push(
                format!("{rule_path}.to_status"),
                format!("status {} is out of range 100..=599", rule.to_status),
            );
        }
        for (name, markers) in [
            ("text_markers", &rule.text_markers),
            ("exclude_markers", &rule.exclude_markers),
        ] {
            for (marker_index, marker) in markers.iter().enumerate() {
                if marker.trim().is_empty() {
                    errors.push(
                        format!("{rule_path}.{name}[{marker_index}]"),
                        "must not be empty",
                    );
                }
            }
        }
    }
    for (index, rule) in provider.error_rules.iter().enumerate() {
        if let Some(problem) = rule.problem() {
            errors.push(format!("{path}.error_rules[{index}]"), problem);
        }
    }
}

pub(super) fn connections(config: &Config, errors: &mut Collector) {
    for (index, connection) in config.connections.iter().enumerate() {
        let path = format!("connections[{index}]");
        if connection.id.is_empty() {
            errors.push(format!("{path}.id"), "is required");
        } else if !is_label(&connection.id) {
            errors.push(
                format!("{path}.id"),
                format!("`{}` may only contain A-Z a-z 0-9 . _ -", connection.id),
            );
        }
        let provider = if connection.provider.is_empty() {
            errors.push(format!("{path}.provider"), "is required");
            None
        } else {
            let found = config.provider(&connection.provider);
            if found.is_none() {
                errors.push(
                    format!("{path}.provider"),
                    format!("no provider has id `{}`", connection.provider),
                );
            }
            found
        };
        match &connection.api_key_env {
            Some(env) if !is_env_name(env) => {
                errors.push(format!("{path}.api_key_env"), bad_env_name(env));
            }
            None if provider.is_some_and(|p| !p.is_local()) => errors.push(
                format!("{path}.api_key_env"),
                "is required unless the provider's category is `local`",
            ),
            _ => {}
        }
        if connection.weight > 1000 {
            errors.push(format!("{path}.weight"), "must be at most 1000");
        }
        for (model, cap) in &connection.model_concurrency {
            let model_path = format!("{path}.model_concurrency.{model}");
            if *cap == 0 {
                errors.push(
                    model_path.clone(),
                    "must be at least 1 (remove the entry for no cap)",
                );
            }
            if let Some(provider) = provider
                && !provider.serves(model)
            {
                errors.push(
                    model_path,
                    format!("provider `{}` does not list model `{model}`", provider.id),
                );
            }
        }
    }
    unique(
        config.connections.iter().map(|c| c.id.as_str()),
        "connections",
        "id",
        errors,
    );
}

pub(super) fn combos(config: &Config, errors: &mut Collector) {
    for (index, combo) in config.combos.iter().enumerate() {
        let path = format!("combos[{index}]");
        if combo.name.is_empty() {
            errors.push(format!("{path}.name"), "is required");
        } else if combo.name.chars().count() > 100 || !combo.name.chars().all(is_combo_char) {
            errors.push(
                format!("{path}.name"),
                "must be at most 100 characters of A-Z a-z 0-9 _ / . - [ ] and space",
            );
        } else if let Some((provider, _)) = split_provider_model(&combo.name)
            && config.provider(provider).is_some()
        {
            errors.push(
                format!("{path}.name"),
                format!(
                    "`{}` clashes with the provider/model name space of provider `{provider}`",
                    combo.name
                ),
            );
        }
        if combo.targets.is_empty() {
            errors.push(format!("{path}.targets"), "must not be empty");
        }
        for (target_index, target) in combo.targets.iter().enumerate() {
            combo_target(
                config,
                target,
                &format!("{path}.targets[{target_index}]"),
                errors,
            );
        }
        let options = &combo.config;
        let options_path = format!("{path}.config");
        if options.max_retries > 10 {
            errors.push(format!("{options_path}.max_retries"), "must be at most 10");
        }
        if options.retry_delay_ms > 60_000 {
            errors.push(
                format!("{options_path}.retry_delay_ms"),
                "must be at most 60000",
            );
        }
        if options.timeout_ms == 0 {
            errors.push(format!("{options_path}.timeout_ms"), "must be above 0");
        }
        if !(1..=1000).contains(&options.max_attempts) {
            errors.push(
                format!("{options_path}.max_attempts"),
                "must be between 1 and 1000",
            );
        }
    }
    unique(
        config.combos.iter().map(|c| c.name.as_str()),
        "combos",
        "name",
        errors,
    );
}

fn combo_target(config: &Config, target: &ComboTarget, path: &str, errors: &mut Collector) {
    if let Some(weight) = target.weight
        && weight > 100
    {
        errors.push(format!("{path}.weight"), "must be between 0 and 100");
    }
    let Some((provider_id, model)) = target.split() else {
        errors.push(
            format!("{path}.target"),
            format!("`{}` is not of the form provider/model", target.target),
        );
        return;
    };
    let Some(provider) = config.provider(provider_id) else {
        errors.push(
            format!("{path}.target"),
            format!("no provider has id `{provider_id}`"),
        );
        return;
    };
    if !provider.serves(model) {
        errors.push(
            format!("{path}.target"),
            format!("provider `{provider_id}` does not list model `{model}`"),
        );
    }
    if let Some(pin) = &target.connection {
        match config.connection(pin) {
            None => errors.push(
                format!("{path}.connection"),
                format!("no connection has id `{pin}`"),
            ),
            Some(connection) if connection.provider != provider_id => errors.push(
                format!("{path}.connection"),
                format!(
                    "connection `{pin}` belongs to provider `{}`, not `{provider_id}`",
                    connection.provider
                ),
            ),
            Some(_) => {}
        }
    }
}

/// The file's runtime error rules must name configured providers (a typo would silently never
/// match). Their other problems are clamped with a warning like every resilience value.
pub(super) fn resilience(config: &Config, errors: &mut Collector) {
    if let Some(rules) = &config.resilience.provider_error_rules {
        for provider in rules.keys() {
            if config.provider(provider).is_none() {
                errors.push(
                    format!("resilience.provider_error_rules.{provider}"),
                    format!("no provider has id `{provider}`"),
                );
            }
        }
    }
}

fn is_provider_id(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// The reference's combo-name alphabet.
fn is_combo_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-' | '[' | ']' | ' ')
}

/// Whether an `http(s)://` URL names credentials (`user[:password]@`) before its host.
fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@')
}
