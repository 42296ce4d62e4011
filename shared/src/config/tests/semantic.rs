//! Semantic validation: every rule, and that errors are collected together.

use super::{assert_error, base, invalid};
use crate::config::{ApiKeyConfig, ClusterMode, ComboConfig, ComboTarget, ErrorRule};
use crate::outcome::LockScope;

fn key(id: &str) -> ApiKeyConfig {
    ApiKeyConfig {
        id: id.into(),
        key_env: Some("SOME_KEY".into()),
        ..ApiKeyConfig::default()
    }
}

fn target(name: &str) -> ComboTarget {
    ComboTarget {
        target: name.into(),
        weight: None,
        connection: None,
    }
}

#[test]
fn provider_ids_are_required_unique_and_lowercase() {
    let mut config = base();
    config.providers[1].id = "openai".into();
    assert_error(
        &invalid(&config),
        "providers[1].id",
        "already used by providers[0]",
    );
    config.providers[1].id = "Other".into();
    assert_error(&invalid(&config), "providers[1].id", "[a-z0-9._-]+");
    config.providers[1].id = String::new();
    assert_error(&invalid(&config), "providers[1].id", "is required");
}

#[test]
fn provider_fields_are_checked() {
    let mut config = base();
    config.providers[0].base_url = "ftp://x".into();
    config.providers[0].models.push("gpt-4.1".into());
    config.providers[0].timeouts.connect_ms = 0;
    config.providers[0].cost_per_1k_tokens = Some(-1.0);
    let errors = invalid(&config);
    assert_error(&errors, "providers[0].base_url", "http://");
    assert_error(&errors, "providers[0].models[2]", "listed twice");
    assert_error(&errors, "providers[0].timeouts.connect_ms", "above 0");
    assert_error(&errors, "providers[0].cost_per_1k_tokens", "non-negative");

    let mut config = base();
    config.providers[0].base_url = "https://user:secret@api.example.com/v1".into();
    assert_error(&invalid(&config), "providers[0].base_url", "credentials");
    config.providers[0].base_url = "https://api.example.com/v1/a@b".into();
    assert!(
        config.validate().is_ok(),
        "an @ in the path is not a credential"
    );
    // The node sends with the same parse: a URL it could not send to fails at load, not as a
    // refused connect on every attempt.
    for bad in [
        "https:///v1",
        "http://",
        "https://exa mple.com/v1",
        "http://host:port/v1",
    ] {
        config.providers[0].base_url = bad.into();
        assert_error(
            &invalid(&config),
            "providers[0].base_url",
            "absolute http(s) URL",
        );
    }
    for good in [
        "http://127.0.0.1:8080",
        "https://api.example.com/v1/",
        "http://[::1]:9000/v1?x=1",
    ] {
        config.providers[0].base_url = good.into();
        assert!(config.validate().is_ok(), "{good}");
    }
}

#[test]
fn connections_reference_a_provider_and_need_a_key_unless_local() {
    let mut config = base();
    config.connections[1].id = "openai-1".into();
    config.connections[0].provider = "nope".into();
    config.connections[1].api_key_env = None;
    config.connections[2].api_key_env = None; // local: fine
    let errors = invalid(&config);
    assert_error(
        &errors,
        "connections[1].id",
        "already used by connections[0]",
    );
    assert_error(
        &errors,
        "connections[0].provider",
        "no provider has id `nope`",
    );
    assert_error(&errors, "connections[1].api_key_env", "required unless");
    assert!(!errors.has_path("connections[2].api_key_env"));
}

#[test]
fn connection_numbers_and_model_caps() {
    let mut config = base();
    config.connections[0].weight = 5000;
    config.connections[0]
        .model_concurrency
        .insert("gpt-4.1".into(), 0);
    config.connections[0]
        .model_concurrency
        .insert("gpt-9".into(), 2);
    config.connections[2]
        .model_concurrency
        .insert("anything".into(), 1); // pass-through
    config.connections[0].api_key_env = Some("1BAD".into());
    let errors = invalid(&config);
    assert_error(&errors, "connections[0].weight", "at most 1000");
    assert_error(
        &errors,
        "connections[0].model_concurrency.gpt-4.1",
        "at least 1",
    );
    assert_error(
        &errors,
        "connections[0].model_concurrency.gpt-9",
        "does not list",
    );
    assert_error(
        &errors,
        "connections[0].api_key_env",
        "not an environment variable",
    );
    assert_eq!(errors.errors.len(), 4, "{errors}");
}

#[test]
fn api_keys_need_a_unique_id_and_exactly_one_key_source() {
    let mut config = base();
    let mut both = key("both");
    both.key_sha256 = Some("ab".repeat(32));
    let mut neither = key("neither");
    neither.key_env = None;
    let mut bad_hash = key("bad-hash");
    bad_hash.key_env = None;
    bad_hash.key_sha256 = Some("xyz".into());
    let mut good_hash = key("good-hash");
    good_hash.key_env = None;
    good_hash.key_sha256 = Some("AB".repeat(32));
    config.api_keys = vec![
        key(""),
        key("dup"),
        key("dup"),
        both,
        neither,
        bad_hash,
        good_hash,
    ];
    let errors = invalid(&config);
    assert_error(&errors, "api_keys[0].id", "is required");
    assert_error(&errors, "api_keys[2].id", "already used by api_keys[1]");
    assert_error(&errors, "api_keys[3]", "only one");
    assert_error(&errors, "api_keys[4]", "needs one of");
    assert_error(&errors, "api_keys[5].key_sha256", "64 hexadecimal");
    assert!(
        !errors
            .errors
            .iter()
            .any(|e| e.path.starts_with("api_keys[6]")),
        "{errors}"
    );
}

#[test]
fn api_key_scopes_and_connections() {
    let mut config = base();
    let mut lease = key("lease");
    lease.scopes = vec!["lease:exclusive".into()];
    let mut stranger = key("stranger");
    stranger.scopes = vec!["admin".into()];
    stranger.allowed_connections = vec!["ghost".into()];
    stranger.allowed_models = vec![" ".into()];
    config.api_keys = vec![lease, stranger];
    let errors = invalid(&config);
    assert_error(
        &errors,
        "api_keys[0].allowed_connections",
        "lease:exclusive",
    );
    assert_error(&errors, "api_keys[1].scopes[0]", "unknown scope `admin`");
    assert_error(
        &errors,
        "api_keys[1].allowed_connections[0]",
        "no connection has id `ghost`",
    );
    assert_error(
        &errors,
        "api_keys[1].allowed_models[0]",
        "must not be empty",
    );
}

#[test]
fn required_api_key_needs_keys() {
    let mut config = base();
    config.auth.require_api_key = true;
    assert_error(&invalid(&config), "auth.require_api_key", "no [[api_keys]]");
    config.api_keys.push(key("k"));
    assert!(config.validate().is_ok());
}

#[test]
fn combos_are_unique_and_outside_the_provider_model_space() {
    let mut config = base();
    let mut clash = config.combos[0].clone();
    clash.name = "openai/best".into();
    let duplicate = config.combos[0].clone();
    let mut shadow = config.combos[0].clone();
    shadow.name = "shared-model".into(); // shadowing a bare model id is allowed
    let mut slash = config.combos[0].clone();
    slash.name = "team/best".into(); // not a provider prefix: allowed
    config.combos.extend([clash, duplicate, shadow, slash]);
    let errors = invalid(&config);
    assert_error(
        &errors,
        "combos[1].name",
        "clashes with the provider/model name space",
    );
    assert_error(&errors, "combos[2].name", "already used by combos[0]");
    assert_eq!(errors.errors.len(), 2, "{errors}");
}

#[test]
fn combo_targets_reference_providers_models_and_connections() {
    let mut config = base();
    let mut pinned_elsewhere = target("openai/gpt-4.1");
    pinned_elsewhere.connection = Some("other-1".into());
    let mut pinned_ghost = target("openai/gpt-4.1");
    pinned_ghost.connection = Some("ghost".into());
    let mut heavy = target("local/anything");
    heavy.weight = Some(101);
    config.combos.push(ComboConfig {
        name: "broken".into(),
        targets: vec![
            target("no-slash"),
            target("ghost/model"),
            target("openai/gpt-9"),
            pinned_elsewhere,
            pinned_ghost,
            heavy,
        ],
        ..ComboConfig::default()
    });
    config.combos.push(ComboConfig {
        name: "empty".into(),
        ..ComboConfig::default()
    });
    config.combos[0].config.max_attempts = 0;
    config.combos[0].config.retry_delay_ms = 60_001;
    let errors = invalid(&config);
    let t = "combos[1].targets";
    assert_error(&errors, &format!("{t}[0].target"), "provider/model");
    assert_error(
        &errors,
        &format!("{t}[1].target"),
        "no provider has id `ghost`",
    );
    assert_error(
        &errors,
        &format!("{t}[2].target"),
        "does not list model `gpt-9`",
    );
    assert_error(
        &errors,
        &format!("{t}[3].connection"),
        "belongs to provider `other`",
    );
    assert_error(
        &errors,
        &format!("{t}[4].connection"),
        "no connection has id `ghost`",
    );
    assert_error(&errors, &format!("{t}[5].weight"), "between 0 and 100");
    assert_error(&errors, "combos[2].targets", "must not be empty");
    assert_error(
        &errors,
        "combos[0].config.max_attempts",
        "between 1 and 1000",
    );
    assert_error(&errors, "combos[0].config.retry_delay_ms", "at most 60000");
    assert_eq!(errors.errors.len(), 9, "{errors}");
}

#[test]
fn status_codes_are_100_to_599() {
    let mut config = base();
    config.providers[0]
        .status_restatement
        .push(crate::config::StatusRestatementRule {
            id: "r".into(),
            from_statuses: vec![403, 700],
            to_status: 99,
            ..Default::default()
        });
    config.providers[0].error_rules.push(ErrorRule {
        status: 600,
        pattern: "x".into(),
        scope: LockScope::Model,
        reason: None,
        cooldown_ms: None,
    });
    let errors = invalid(&config);
    assert_error(
        &errors,
        "providers[0].status_restatement[0].from_statuses[1]",
        "700",
    );
    assert_error(
        &errors,
        "providers[0].status_restatement[0].to_status",
        "99",
    );
    assert_error(&errors, "providers[0].error_rules[0]", "status 600");
}

#[test]
fn listeners_parse_and_differ() {
    let mut config = base();
    config.server.listen = "localhost:80".into();
    assert_error(&invalid(&config), "server.listen", "not a socket address");
    config.server.listen = "0.0.0.0:9090".into();
    config.server.admin_listen = "127.0.0.1:9090".into();
    assert_error(&invalid(&config), "server.admin_listen", "must differ");
    config.server.listen = "127.0.0.1:0".into();
    config.server.admin_listen = "127.0.0.1:0".into();
    assert!(config.validate().is_ok(), "ephemeral ports never clash");
}

#[test]
fn redis_mode_needs_a_redis_url() {
    let mut config = base();
    config.cluster.redis_url = "http://cache:6379".into();
    assert!(config.validate().is_ok(), "ignored in embedded mode");
    config.cluster.mode = ClusterMode::Redis;
    assert_error(&invalid(&config), "cluster.redis_url", "redis://");
    config.cluster.redis_url = "redis://".into();
    assert_error(&invalid(&config), "cluster.redis_url", "no host");
    config.cluster.redis_url = "rediss://user:pw@cache:6380/1".into();
    assert!(config.validate().is_ok());
    // Sentinel URLs, which the store takes, pass the file's check too.
    config.cluster.redis_url = "redis+sentinel://s1:26379,s2:26379/mymaster/0".into();
    assert!(config.validate().is_ok());
    config.cluster.redis_url = "redis+sentinel://".into();
    assert_error(&invalid(&config), "cluster.redis_url", "no host");
    // So do Redis Cluster URLs (seed nodes).
    config.cluster.redis_url = "rediss+cluster://u:pw@n1:6379,n2:6379/".into();
    assert!(config.validate().is_ok());
    config.cluster.redis_url = "redis+cluster:///".into();
    assert_error(&invalid(&config), "cluster.redis_url", "no host");
    config.cluster.redis_url = "rediss://user:pw@cache:6380/1".into();
    config.cluster.node_ttl_ms = 1000;
    assert_error(&invalid(&config), "cluster.node_ttl_ms", "longer than");
}

#[test]
fn runtime_rules_in_the_file_name_known_providers() {
    let mut config = base();
    config.resilience.provider_error_rules = Some([("ghost".to_owned(), Vec::new())].into());
    assert_error(
        &invalid(&config),
        "resilience.provider_error_rules.ghost",
        "no provider",
    );
}

#[test]
fn several_errors_are_reported_together_one_per_line() {
    let mut config = base();
    config.server.listen = "nope".into();
    config.connections[0].provider = "ghost".into();
    config.combos[0].targets[0].target = "ghost/x".into();
    let errors = invalid(&config);
    assert_eq!(errors.errors.len(), 3, "{errors}");
    let text = errors.to_string();
    assert_eq!(text.lines().count(), 3);
    assert!(text.lines().all(|line| line.contains(": ")), "{text}");
}
