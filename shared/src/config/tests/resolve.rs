//! Model resolution: provider/model, combos, bare ids (unique and ambiguous), unknown names.

use super::base;
use crate::config::server::glob_items;
use crate::config::{ModelIndex, ResolveError, Resolved, glob_match, resolve_model};
use crate::strategy::Strategy;

fn direct(resolved: Result<Resolved, ResolveError>) -> (String, String) {
    match resolved {
        Ok(Resolved::Direct(target)) => (target.provider.to_string(), target.model.to_string()),
        other => panic!("expected a direct target, got {other:?}"),
    }
}

#[test]
fn provider_slash_model_sends_the_bare_model_upstream() {
    let index = ModelIndex::build(&base());
    assert_eq!(
        direct(index.resolve("openai/gpt-4.1")),
        ("openai".into(), "gpt-4.1".into())
    );
    // A pass-through provider takes any model, including ones with slashes.
    assert_eq!(
        direct(index.resolve("local/library/llama3:8b")),
        ("local".into(), "library/llama3:8b".into())
    );
    assert_eq!(
        index.resolve("openai/gpt-9"),
        Err(ResolveError::NotListed {
            provider: "openai".into(),
            model: "gpt-9".into()
        })
    );
}

#[test]
fn combo_name_gives_its_targets() {
    let Ok(Resolved::Combo(combo)) = resolve_model(&base(), "mix") else {
        panic!("mix is a combo");
    };
    assert_eq!(combo.strategy, Strategy::Weighted);
    let summary: Vec<_> = combo
        .targets
        .iter()
        .map(|t| {
            (
                t.provider.as_ref(),
                t.model.as_ref(),
                t.weight,
                t.connection.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("openai", "gpt-4.1", 5, None),
            ("other", "only-other", 1, Some("other-1")),
            ("local", "llama3", 1, None),
        ]
    );
}

#[test]
fn bare_model_listed_by_one_provider_resolves_to_it() {
    let index = ModelIndex::build(&base());
    assert_eq!(
        direct(index.resolve("only-other")),
        ("other".into(), "only-other".into())
    );
    // A bare id containing a slash whose prefix is not a provider.
    assert_eq!(
        direct(index.resolve("vendor/model-x")),
        ("other".into(), "vendor/model-x".into())
    );
}

#[test]
fn bare_model_listed_by_several_providers_is_ambiguous_with_candidates() {
    let error = ModelIndex::build(&base())
        .resolve("shared-model")
        .unwrap_err();
    assert_eq!(
        error,
        ResolveError::Ambiguous {
            model: "shared-model".into(),
            candidates: vec!["openai/shared-model".into(), "other/shared-model".into()],
        }
    );
    assert!(
        error
            .to_string()
            .contains("openai/shared-model, other/shared-model")
    );
}

#[test]
fn a_combo_may_disambiguate_a_shared_bare_name() {
    let mut config = base();
    let mut combo = config.combos[0].clone();
    combo.name = "shared-model".into();
    config.combos.push(combo);
    assert!(matches!(
        resolve_model(&config, "shared-model"),
        Ok(Resolved::Combo(_))
    ));
}

#[test]
fn unknown_names_are_unknown() {
    let index = ModelIndex::build(&base());
    for name in ["gpt-5", "ghost/model", "", "/x", "openai/"] {
        assert_eq!(
            index.resolve(name),
            Err(ResolveError::Unknown { model: name.into() }),
            "{name}"
        );
    }
}

#[test]
fn client_models_lists_every_resolvable_name() {
    let index = ModelIndex::build(&base());
    assert_eq!(
        index.client_models(),
        [
            "gpt-4.1",
            "mix",
            "only-other",
            "openai/gpt-4.1",
            "openai/shared-model",
            "other/only-other",
            "other/shared-model",
            "other/vendor/model-x",
            "vendor/model-x",
        ]
    );
}

#[test]
fn allowed_model_globs() {
    assert!(glob_match("*", "anything/at-all"));
    assert!(glob_match("openai/*", "openai/gpt-4.1"));
    assert!(!glob_match("openai/*", "other/gpt-4.1"));
    assert!(glob_match("gpt-?.1", "gpt-4.1"));
    assert!(glob_match("*-mini", "gpt-4o-mini"));
    assert!(glob_match("a*b*c", "aXbYbZc"));
    assert!(!glob_match("a*b*c", "aXbYbZ"));
    assert!(glob_match("coding", "coding"));
    assert!(!glob_match("coding", "coding2"));
    assert!(!glob_match("", "x"));
    // `?` is one character, also when it takes several bytes.
    assert!(glob_match("gpt-?", "gpt-é"));
    assert!(!glob_match("gpt-??", "gpt-é"));
    assert!(glob_match("*é*", "modèle-é-1"));
}

proptest::proptest! {
    #[test]
    fn the_byte_path_agrees_with_the_character_path(
        pattern in "[ab*?/-]{0,8}",
        text in "[ab/-]{0,10}",
    ) {
        // ASCII strings take the byte path; the same strings as characters take the other.
        let chars = |s: &str| s.chars().collect::<Vec<char>>();
        proptest::prop_assert_eq!(
            glob_match(&pattern, &text),
            glob_items(&chars(&pattern), &chars(&text))
        );
    }
}
