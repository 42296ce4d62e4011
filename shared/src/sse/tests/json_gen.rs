//! Generators shared by the pre-scan property tests (chat chunks, Anthropic and Responses
//! events, JSON answers): JSON scalars that are valid, nearly valid or tricky, usage objects
//! and their counters, and an object written with a chosen whitespace.

use proptest::prelude::*;

/// A JSON scalar or small value, some of them invalid on purpose (`nul`, `01`, `1.`, `-`).
pub(in crate::sse) fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("nul".to_owned()),
        prop::sample::select(vec![
            "0", "-1", "12.5", "1e400", "01", "1.", "-", "2E+3", "[]", "{}"
        ])
        .prop_map(str::to_owned),
        "[ -~é\\n\u{1}\"\\\\]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
        "[a-zé \t\u{1}]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("[1,{\"a\":[null]}]".to_owned()),
    ]
}

/// `{"k": v, …}` with `ws` around every token.
pub(in crate::sse) fn object(fields: Vec<(&'static str, String)>, ws: &str) -> String {
    let body: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("\"{k}\"{ws}:{ws}{v}"))
        .collect();
    format!("{{{ws}{}{ws}}}", body.join(&format!(",{ws}")))
}

/// Values near a usage object's: counters serde takes or refuses (overflow, sign, fraction),
/// details objects, strings with escapes, nesting.
pub(in crate::sse) fn counter() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        prop::sample::select(vec![
            "0",
            "7",
            "-1",
            "12.5",
            "1e400",
            "01",
            "1.",
            "2E+3",
            "[]",
            "{}",
            "\"error\"",
            "18446744073709551615",
            "99999999999999999999",
        ])
        .prop_map(str::to_owned),
        "[ -~é\\n\u{1}\"\\\\]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
        "[a-z\\\\u0-9\"]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("{\"cached_tokens\":3}".to_owned()),
        Just("{\"cached_tokens\":null,\"x\":[1,{\"a\":\"\\u00e9\"}]}".to_owned()),
    ]
}

/// The keys a usage object declares, and one inside its details.
pub(in crate::sse) fn usage_key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "prompt_tokens",
        "completion_tokens",
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "prompt_tokens_details",
        "input_tokens_details",
        "cached_tokens",
    ])
}
