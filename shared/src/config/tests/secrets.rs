//! Secret resolution is pure, reports every missing variable by id and name, never by value.

use std::collections::HashMap;

use super::{assert_error, base};
use crate::config::secrets::sha256;
use crate::config::{ApiKeyConfig, Config, Secret};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn with_keys(config: &mut Config) {
    config.api_keys = vec![
        ApiKeyConfig {
            id: "from-env".into(),
            key_env: Some("CLIENT_KEY".into()),
            ..ApiKeyConfig::default()
        },
        ApiKeyConfig {
            id: "from-hash".into(),
            key_sha256: Some(hex::encode(sha256("hashed-key"))),
            ..ApiKeyConfig::default()
        },
    ];
}

#[test]
fn resolves_upstream_keys_and_client_digests() {
    let mut config = base();
    with_keys(&mut config);
    let lookup = env(&[
        ("OPENAI_KEY", "sk-openai"),
        ("OTHER_KEY", "sk-other"),
        ("CLIENT_KEY", "client-secret"),
        ("SWITCHYARD_MANAGEMENT_KEY", "mgmt"),
    ]);
    let secrets = config.resolve_secrets(&lookup).unwrap();
    assert_eq!(secrets.upstream_keys.len(), 2);
    assert_eq!(secrets.upstream_keys["openai-1"].expose(), "sk-openai");
    assert!(!secrets.upstream_keys.contains_key("local-1"));
    assert_eq!(secrets.client_keys[0].id, "from-env");
    assert_eq!(secrets.client_keys[0].sha256, sha256("client-secret"));
    assert_eq!(secrets.client_keys[1].sha256, sha256("hashed-key"));
    assert_eq!(secrets.management_key_sha256, Some(sha256("mgmt")));
}

#[test]
fn missing_variables_are_all_reported_by_id_and_name_never_value() {
    let mut config = base();
    with_keys(&mut config);
    let lookup = env(&[("OPENAI_KEY", "sk-openai"), ("OTHER_KEY", "   ")]);
    let errors = config.resolve_secrets(&lookup).unwrap_err();
    assert_eq!(errors.errors.len(), 3, "{errors}");
    assert_error(&errors, "connections[1].api_key_env", "OTHER_KEY");
    assert_error(
        &errors,
        "connections[1].api_key_env",
        "connection `other-1`",
    );
    assert_error(&errors, "api_keys[0].key_env", "CLIENT_KEY");
    assert_error(&errors, "api_keys[0].key_env", "client key `from-env`");
    assert_error(
        &errors,
        "auth.management_key_env",
        "SWITCHYARD_MANAGEMENT_KEY",
    );
    assert!(!errors.to_string().contains("sk-openai"));
}

#[test]
fn management_api_can_be_turned_off() {
    let mut config = base();
    config.auth.management_key_env = String::new();
    let secrets = config
        .resolve_secrets(&env(&[("OPENAI_KEY", "a"), ("OTHER_KEY", "b")]))
        .unwrap();
    assert_eq!(secrets.management_key_sha256, None);
}

#[test]
fn two_client_keys_with_the_same_value_are_rejected() {
    let mut config = base();
    with_keys(&mut config);
    let lookup = env(&[
        ("OPENAI_KEY", "a"),
        ("OTHER_KEY", "b"),
        ("CLIENT_KEY", "hashed-key"),
        ("SWITCHYARD_MANAGEMENT_KEY", "m"),
    ]);
    let errors = config.resolve_secrets(&lookup).unwrap_err();
    assert_error(&errors, "api_keys[1]", "same key as `from-env`");
}

#[test]
fn secrets_do_not_leak_through_debug() {
    let secret = Secret::new("sk-very-secret");
    assert!(!format!("{secret:?}").contains("very-secret"));
}
