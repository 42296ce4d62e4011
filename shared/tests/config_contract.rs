//! The config contract: a file in the shape of the project's reference example must load
//! unchanged, with every value it shows.
//!
//! The repository carries a byte-for-byte copy under `deploy/examples/`, which is always tested.
//! The original lives in the project documents folder beside the repository clone
//! (`<repo>/../shared/design/`, or `$SWITCHYARD_DOCS_DIR/design/`); when it is present the test
//! also checks that the copy has not drifted from it.

// This whole crate is test code; clippy's in-test allowances only cover `#[test]` functions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::path::PathBuf;

use switchyard_shared::config::{
    ClusterMode, Config, ConnectionStrategy, ProviderFormat, Resolved,
};
use switchyard_shared::outcome::{FailureReason, LockScope, ProviderCategory};
use switchyard_shared::settings::{self, EnvLayer, Persisted, Source};
use switchyard_shared::strategy::Strategy;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the shared crate sits inside the repository")
        .to_path_buf()
}

fn copy_text() -> String {
    let path = repo_root().join("deploy/examples/switchyard.example.toml");
    std::fs::read_to_string(&path).expect("the example config is committed")
}

fn load_copy() -> Config {
    Config::from_toml_str(&copy_text()).unwrap_or_else(|errors| panic!("{errors}"))
}

#[test]
fn original_contract_file_loads_unchanged_when_present() {
    let docs = std::env::var_os("SWITCHYARD_DOCS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared"));
    let original = docs.join("design/switchyard.example.toml");
    let Ok(text) = std::fs::read_to_string(&original) else {
        println!(
            "note: {} not found; only the copy under deploy/examples is checked",
            original.display()
        );
        return;
    };
    Config::from_toml_str(&text).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(
        text,
        copy_text(),
        "deploy/examples copy has drifted from the contract"
    );
}

#[test]
fn load_reads_the_file_from_disk() {
    let config = Config::load(repo_root().join("deploy/examples/switchyard.example.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(config, load_copy());
}

#[test]
fn server_auth_cluster() {
    let config = load_copy();
    assert_eq!(config.server.listen_addr().unwrap().port(), 8080);
    assert_eq!(config.server.admin_listen_addr().unwrap().port(), 9090);
    assert_eq!(config.server.node_id, "");
    assert_eq!(config.server.max_body_bytes, 33_554_432);
    assert_eq!(config.server.shutdown_grace_ms, 30_000);
    assert_eq!(config.server.workers, 0);
    assert!(config.auth.require_api_key);
    assert_eq!(config.auth.management_key_env, "SWITCHYARD_MANAGEMENT_KEY");
    assert_eq!(config.cluster.mode, ClusterMode::Embedded);
    assert_eq!(config.cluster.redis_url, "redis://127.0.0.1:6379/0");
    assert_eq!(config.cluster.key_prefix, "switchyard:");
    assert_eq!(config.cluster.heartbeat_interval_ms, 2000);
    assert_eq!(config.cluster.node_ttl_ms, 10_000);
    assert_eq!(config.cluster.redis_timeout_ms, 250);
}

#[test]
fn api_keys() {
    let config = load_copy();
    assert_eq!(config.api_keys.len(), 2);
    let team = &config.api_keys[0];
    assert_eq!(team.id, "team-a");
    assert_eq!(team.key_env.as_deref(), Some("TEAM_A_API_KEY"));
    assert_eq!(team.allowed_models, ["*"]);
    assert!(team.allowed_connections.is_empty() && team.scopes.is_empty());
    assert_eq!(team.requests_per_minute, 0);
    let agents = &config.api_keys[1];
    assert_eq!(agents.scopes, ["lease:exclusive"]);
    assert_eq!(agents.allowed_connections, ["glm-1", "glm-2"]);
    assert_eq!(
        agents.allowed_models,
        ["*"],
        "default applies to the second key"
    );
}

#[test]
fn providers_and_their_rules() {
    let config = load_copy();
    let ids: Vec<_> = config.providers.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["openai", "anthropic", "glm", "ollama"]);

    let openai = config.provider("openai").unwrap();
    assert_eq!(openai.category, ProviderCategory::Apikey);
    assert_eq!(openai.format, ProviderFormat::Openai);
    assert_eq!(openai.models, ["gpt-4o-mini", "gpt-4.1"]);
    assert_eq!(openai.connection_strategy, ConnectionStrategy::FillFirst);
    assert_eq!(openai.sticky_round_robin_limit, 3);
    assert_eq!(openai.timeouts.connect_ms, 30_000);
    assert_eq!(openai.timeouts.headers_ms, 600_000);
    assert_eq!(openai.timeouts.first_content_ms, 80_000);
    assert_eq!(openai.timeouts.idle_ms, 600_000);
    assert_eq!(openai.timeouts.attempt_deadline_ms, 0);
    assert!(openai.status_restatement.is_empty() && openai.error_rules.is_empty());

    assert_eq!(
        config.provider("anthropic").unwrap().format,
        ProviderFormat::Anthropic
    );

    let glm = config.provider("glm").unwrap();
    assert_eq!(glm.status_restatement.len(), 1);
    let restatement = &glm.status_restatement[0];
    assert_eq!(restatement.id, "example-quota-403");
    assert_eq!(restatement.from_statuses, [400, 403]);
    assert_eq!(restatement.to_status, 429);
    assert_eq!(restatement.text_markers, ["额度不足"]);
    assert_eq!(restatement.exclude_markers, ["无权访问"]);
    assert_eq!(restatement.default_retry_after_ms, 60_000);
    assert_eq!(glm.error_rules.len(), 1);
    let rule = &glm.error_rules[0];
    assert_eq!(rule.status, 429);
    assert_eq!(rule.pattern, "monthly usage limit reached");
    assert_eq!(rule.scope, LockScope::Connection);
    assert_eq!(rule.reason, Some(FailureReason::QuotaExhausted));
    assert_eq!(rule.cooldown_ms, Some(3_600_000));

    let ollama = config.provider("ollama").unwrap();
    assert_eq!(ollama.category, ProviderCategory::Local);
    assert!(ollama.models.is_empty() && ollama.status_restatement.is_empty());
    assert_eq!(
        ollama.timeouts, openai.timeouts,
        "defaults match the first provider's values"
    );
}

#[test]
fn connections() {
    let config = load_copy();
    assert_eq!(config.connections.len(), 5);
    let openai = config.connection("openai-key-1").unwrap();
    assert_eq!(openai.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(
        (openai.priority, openai.weight, openai.max_concurrent),
        (1, 1, 0)
    );
    assert_eq!(openai.model_concurrency.get("gpt-4.1"), Some(&2));
    assert!(!openai.disable_cooling && !openai.rate_limit_protection);
    assert_eq!(openai.rate_limit, Default::default());

    let glm = config.connection("glm-1").unwrap();
    assert_eq!(glm.max_concurrent, 1);
    assert_eq!(glm.model_concurrency.len(), 2);
    assert_eq!(glm.model_concurrency.get("glm-5"), Some(&1));
    assert_eq!(glm.model_concurrency.get("glm-4.6"), Some(&3));
    assert_eq!(config.connections_of("glm").count(), 2);

    let local = config.connection("ollama-local").unwrap();
    assert_eq!(local.api_key_env, None);
    assert_eq!(local.priority, 1);
}

#[test]
fn combos_and_resolution() {
    let config = load_copy();
    let coding = config.combo("coding").unwrap();
    assert_eq!(coding.strategy, Strategy::Priority);
    assert_eq!(coding.targets.len(), 3);
    assert_eq!(coding.targets[0].weight, None);
    assert_eq!(coding.targets[1].weight, Some(3));
    assert_eq!(coding.targets[2].connection.as_deref(), Some("glm-1"));
    assert_eq!(coding.config.max_retries, 1);
    assert_eq!(coding.config.retry_delay_ms, 2000);
    assert_eq!(coding.config.timeout_ms, 120_000);
    assert_eq!(coding.config.combo_timeout_ms, 0);
    assert_eq!(coding.config.max_attempts, 30);

    let Ok(Resolved::Combo(route)) = switchyard_shared::config::resolve_model(&config, "coding")
    else {
        panic!("coding is a combo");
    };
    let targets: Vec<_> = route
        .targets
        .iter()
        .map(|t| (t.provider.as_ref(), t.model.as_ref(), t.weight))
        .collect();
    assert_eq!(
        targets,
        [
            ("anthropic", "claude-sonnet-4-5", 1),
            ("openai", "gpt-4.1", 3),
            ("glm", "glm-5", 1)
        ]
    );
}

#[test]
fn resilience_defaults_and_file_values() {
    let config = load_copy();
    let built = settings::build(&config, &EnvLayer::default(), &Persisted::default());
    assert!(built.warnings.is_empty(), "{:?}", built.warnings);
    let values = built.values();
    assert_eq!(
        values,
        settings::ResilienceSettings::default(),
        "the file restates the defaults"
    );
    // Every key is written in the file, so every value is sourced from it.
    let json = serde_json::to_value(&built.effective).unwrap();
    assert_eq!(json["request_queue"]["max_wait_ms"]["source"], "file");
    assert_eq!(
        json["provider_breaker"]["oauth"]["failure_threshold"]["value"],
        8
    );
    assert_eq!(
        built
            .effective
            .stream
            .throughput_watchdog
            .min_useful_bytes
            .source,
        Source::File
    );
    assert_eq!(built.effective.provider_error_rules.source, Source::Default);

    let apikey = values.breaker_profile(ProviderCategory::Apikey);
    assert_eq!(
        (apikey.failure_threshold, apikey.degradation_threshold),
        (12, 7)
    );
    let local = values.breaker_profile(ProviderCategory::Local);
    assert_eq!(
        (local.failure_threshold, local.degradation_threshold),
        (2, 1)
    );
    assert_eq!(
        values.model_lockout.error_codes,
        [403, 404, 429, 502, 503, 504]
    );
    assert_eq!(values.provider_cooldown.apikey.cooldown_ms, 600_000);
    assert_eq!(values.connection_cooldown.oauth.base_cooldown_ms, 5000);
    assert_eq!(values.connection_cooldown.max_cooldown_ms, 1_800_000);
    assert_eq!(values.session_leases.ttl_ms, 120_000);
    assert_eq!(values.stream.early_keepalive_after_ms, 2000);
}

#[test]
fn secrets_of_the_contract_resolve_from_the_environment() {
    let config = load_copy();
    let secrets = config
        .resolve_secrets(&|name| Some(format!("value-of-{name}")))
        .unwrap();
    assert_eq!(
        secrets.upstream_keys.len(),
        4,
        "the local connection has no key"
    );
    assert_eq!(
        secrets.upstream_keys["glm-2"].expose(),
        "value-of-GLM_KEY_2"
    );
    assert_eq!(secrets.client_keys.len(), 2);
    assert!(secrets.management_key_sha256.is_some());
}

/// Every key path in a TOML or JSON value: tables by name, arrays of tables as `name[]`.
fn key_paths(
    value: &serde_json::Value,
    prefix: &str,
    out: &mut std::collections::BTreeSet<String>,
) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(path.clone());
                key_paths(v, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn text_paths(text: &str) -> std::collections::BTreeSet<String> {
    let value: toml::Value = toml::from_str(text).unwrap();
    let mut out = std::collections::BTreeSet::new();
    key_paths(&serde_json::to_value(value).unwrap(), "", &mut out);
    out
}

fn extensions_text() -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples/extensions.toml"))
        .expect("deploy/examples/extensions.toml is committed")
}

/// The contract file cannot grow (it is the customer's, byte for byte), so every key
/// Switchyard accepts beyond it is shown with its default in `deploy/examples/extensions.toml`,
/// which must load. A key added to the config structs and shown in neither file fails here.
#[test]
fn every_key_beyond_the_contract_is_shown_in_extensions_toml() {
    let extensions = Config::from_toml_str(&extensions_text()).unwrap_or_else(|e| panic!("{e}"));
    let mut shown = text_paths(&copy_text());
    shown.extend(text_paths(&extensions_text()));
    let mut accepted = std::collections::BTreeSet::new();
    for config in [load_copy(), extensions] {
        key_paths(&serde_json::to_value(&config).unwrap(), "", &mut accepted);
    }
    // The file's resilience table is a patch (only what it sets serializes); the effective
    // settings show every leaf.
    let values =
        settings::build(&load_copy(), &EnvLayer::default(), &Persisted::default()).values();
    key_paths(
        &serde_json::to_value(values).unwrap(),
        "resilience",
        &mut accepted,
    );
    let missing: Vec<&String> = accepted.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "keys accepted but shown in neither the contract nor deploy/examples/extensions.toml:\n{missing:#?}"
    );
}
