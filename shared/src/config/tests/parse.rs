//! Syntax, type and unknown-key errors name the key path.

use super::{BASE, assert_error, parse_err};
use crate::config::Config;

#[test]
fn unknown_key_names_its_path() {
    let errors = Config::from_toml_str(
        "[auth]\nrequire_api_key = false\n[[providers]]\nid = \"a\"\nbase_url = \"http://x\"\n\
         [providers.timeouts]\nconect_ms = 5\n",
    )
    .unwrap_err();
    assert_error(
        &errors,
        "providers[0].timeouts.conect_ms",
        "unknown field `conect_ms`",
    );
    assert_eq!(errors.errors.len(), 1);
}

#[test]
fn unknown_key_in_later_array_element_and_inline_table() {
    let errors = parse_err(
        "[[combos]]\nname = \"c\"\ntargets = [{ target = \"openai/gpt-4.1\", wieght = 2 }]\n",
    );
    assert_error(
        &errors,
        "combos[1].targets[0].wieght",
        "unknown field `wieght`",
    );
}

#[test]
fn unknown_section_and_resilience_key() {
    let errors = parse_err("[bogus]\nx = 1\n");
    assert_error(&errors, "bogus", "unknown field");
    let errors = parse_err("[resilience.request_queue]\nmax_wait = 1\n");
    assert_error(
        &errors,
        "resilience.request_queue.max_wait",
        "unknown field",
    );
}

#[test]
fn wrong_type_names_its_path_and_line() {
    let errors =
        parse_err("[[connections]]\nid = \"x\"\nprovider = \"openai\"\nmax_concurrent = \"two\"\n");
    let error = &errors.errors[0];
    assert_eq!(error.path, "connections[3].max_concurrent");
    assert!(error.message.contains("invalid type"), "{error}");
    let line = BASE.lines().count() + 5;
    assert!(error.message.contains(&format!("line {line}")), "{error}");
    assert!(
        errors
            .to_string()
            .starts_with("connections[3].max_concurrent: invalid type")
    );
}

#[test]
fn negative_and_overflowing_numbers_are_rejected() {
    let errors = parse_err("[server]\nworkers = -1\n");
    assert_error(&errors, "server.workers", "invalid value");
    let errors = parse_err(
        "[[providers]]\nid = \"p\"\nbase_url = \"http://p\"\n[[providers.status_restatement]]\nid = \"r\"\nfrom_statuses = [70000]\nto_status = 429\n",
    );
    assert_error(
        &errors,
        "providers[3].status_restatement[0].from_statuses[0]",
        "invalid value",
    );
}

#[test]
fn closed_sets_reject_unknown_names() {
    let errors = parse_err("[cluster]\nmode = \"etcd\"\n");
    assert_error(&errors, "cluster.mode", "unknown variant `etcd`");
    let errors = parse_err("[[providers]]\nid = \"p\"\ncategory = \"oath\"\n");
    assert_error(&errors, "providers[3].category", "unknown variant `oath`");
}

#[test]
fn every_combo_strategy_and_connection_strategy_parses() {
    for strategy in crate::strategy::Strategy::ALL {
        let source = BASE.replace(
            "strategy = \"weighted\"",
            &format!("strategy = \"{}\"", strategy.as_str()),
        );
        let config = Config::from_toml_str(&source).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.combos[0].strategy, strategy);
    }
    for name in [
        "fill-first",
        "round-robin",
        "p2c",
        "random",
        "least-used",
        "strict-random",
    ] {
        let source = BASE.replace(
            "id = \"openai\"\n",
            &format!("id = \"openai\"\nconnection_strategy = \"{name}\"\n"),
        );
        let config = Config::from_toml_str(&source).unwrap_or_else(|e| panic!("{name}: {e}"));
        let openai = config.providers.iter().find(|p| p.id == "openai");
        let strategy = openai.map(|p| crate::strategy::Strategy::from(p.connection_strategy));
        assert_eq!(
            strategy.map(|s| s.as_str()),
            Some(name),
            "same name as routing strategy"
        );
    }
    assert_eq!(
        crate::strategy::Strategy::from(crate::config::ConnectionStrategy::default()),
        crate::strategy::Strategy::CONNECTION_DEFAULT
    );
    assert_eq!(
        crate::config::ComboConfig::default().strategy,
        crate::strategy::Strategy::COMBO_DEFAULT
    );
}

#[test]
fn syntax_error_has_no_path_but_a_location() {
    let errors = Config::from_toml_str("[server\nlisten = 1").unwrap_err();
    assert_eq!(errors.errors.len(), 1);
    assert_eq!(errors.errors[0].path, "");
    assert!(errors.errors[0].message.contains("line 1"), "{errors}");
}

#[test]
fn empty_file_needs_api_keys_because_they_are_required_by_default() {
    let errors = Config::from_toml_str("").unwrap_err();
    assert_eq!(errors.errors.len(), 1, "{errors}");
    assert_error(&errors, "auth.require_api_key", "no [[api_keys]]");
}

#[test]
fn load_reports_an_unreadable_file() {
    let errors = Config::load("definitely/not/here.toml").unwrap_err();
    assert!(
        errors
            .to_string()
            .starts_with("cannot read definitely/not/here.toml")
    );
}

#[test]
fn extras_beyond_the_contract_are_accepted() {
    let source = BASE
        .replace(
            "[auth]",
            "[server]\nclient_request_timeout_ms = 900000\n\n[auth]",
        )
        .replace(
            "id = \"openai\"\n",
            "id = \"openai\"\ncost_per_1k_tokens = 0.25\n",
        );
    let config = Config::from_toml_str(&format!(
        "{source}\n[resilience.provider_error_rules]\nopenai = [{{ status = 400, match = \"quota\", scope = \"connection\" }}]\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.server.client_request_timeout_ms, 900_000);
    assert_eq!(config.providers[0].cost_per_1k_tokens, Some(0.25));
    let rules = config.resilience.provider_error_rules.unwrap_or_default();
    assert_eq!(rules["openai"][0].pattern, "quota");
    assert_eq!(rules["openai"][0].reason, None);
}
