//! Generators shared by the pre-scan property tests (chat chunks, Anthropic and Responses
//! events, JSON answers): JSON scalars that are valid, nearly valid or tricky, and an object
//! written with a chosen whitespace.

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
