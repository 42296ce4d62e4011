//! Tests of the request-body scan: the routing fields, the splice, the error codes, and the
//! fast scan against the full parse ([`super::reference`]) on chosen and generated bodies.

use proptest::prelude::*;
use serde_json::Value;

use super::reference::disagreement;
use super::*;

fn code(s: &str) -> &'static str {
    scan(s.as_bytes()).unwrap_err().code
}

fn code_or_ok(s: &str) -> &'static str {
    scan(s.as_bytes()).map_or_else(|e| e.code, |_| "ok")
}

/// `{"model":"m","x":` + `depth - 1` nested arrays + `}`: `depth` levels with the top object.
fn nested(depth: usize) -> String {
    format!(
        "{{\"model\":\"m\",\"x\":{}{}}}",
        "[".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

#[test]
fn metadata_session_id_wins_whatever_the_key_order() {
    for raw in [
        r#"{"model":"m","metadata":{"session_id":"meta"},"session_id":"top","prompt_cache_key":"c"}"#,
        r#"{"model":"m","prompt_cache_key":"c","session_id":"top","metadata":{"session_id":"meta"}}"#,
    ] {
        let f = scan(raw.as_bytes()).unwrap();
        assert_eq!(f.session_key.as_deref(), Some("meta"), "{raw}");
    }
    let f = scan(br#"{"prompt_cache_key":"c","session_id":"top","model":"m"}"#).unwrap();
    assert_eq!(f.session_key.as_deref(), Some("top"));
}

#[test]
fn extracts_routing_fields_and_splices_model() {
    let raw = r#"{"messages":[{"role":"user","content":"hi"}], "model" : "openai/gpt-4o", "stream":true,"metadata":{"session_id":"s1"}}"#;
    let f = scan(raw.as_bytes()).unwrap();
    assert_eq!(f.model, "openai/gpt-4o");
    assert!(f.stream);
    assert_eq!(f.session_key.as_deref(), Some("s1"));
    let out = splice(raw.as_bytes(), &f, "gpt-4o");
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["model"], "gpt-4o");
    assert_eq!(v["messages"][0]["content"], "hi");
}

#[test]
fn errors_have_codes() {
    assert_eq!(code("{"), "invalid_json");
    assert_eq!(code("[1]"), "invalid_json");
    assert_eq!(code(r#"{"x":1}"#), "missing_model");
    assert_eq!(code(r#"{"model":1}"#), "invalid_model");
    assert_eq!(code(r#"{"model":""}"#), "invalid_model");
    assert_eq!(code(r#"{"model":"m","stream":"yes"}"#), "invalid_parameter");
    assert_eq!(code("{\"model\":\"m\"}\u{0}"), "invalid_json");
    assert_eq!(
        scan(b"{\"model\":\"\xff\"}").unwrap_err().code,
        "invalid_json"
    );
    assert_eq!(
        scan(b"{\"model\":\"m\",\"x\":[\"\xc3\"]}")
            .unwrap_err()
            .code,
        "invalid_json"
    );
}

/// Deepest nesting serde_json's parse accepts: its recursion limit is 128 and it refuses the
/// container that brings its budget to zero, so the 128th nested `[`/`{` is an error.
const MAX_DEPTH: usize = 127;

/// serde_json's own boundary, pinned: the scan reads through serde_json's parse, so the two
/// move together, and the node's docs (127 levels) must follow if a new serde_json moves it.
#[test]
fn depth_limit_is_serde_jsons() {
    assert!(serde_json::from_str::<Value>(&nested(MAX_DEPTH)).is_ok());
    assert!(serde_json::from_str::<Value>(&nested(MAX_DEPTH + 1)).is_err());
    assert_eq!(scan(nested(MAX_DEPTH).as_bytes()).unwrap().model, "m");
    assert_eq!(code(&nested(MAX_DEPTH + 1)), "invalid_json");
    // Objects count as arrays do.
    let objects = |levels: usize, array: bool| {
        let (open, close) = if array { ("[", "]") } else { ("", "") };
        format!(
            "{{\"model\":\"m\",\"x\":{open}{}1{}{close}}}",
            "{\"a\":".repeat(levels),
            "}".repeat(levels)
        )
    };
    let at_limit = objects(MAX_DEPTH - 1, false);
    assert!(serde_json::from_str::<Value>(&at_limit).is_ok());
    assert!(scan(at_limit.as_bytes()).is_ok());
    let deeper = objects(MAX_DEPTH - 1, true);
    assert!(serde_json::from_str::<Value>(&deeper).is_err());
    assert_eq!(code(&deeper), "invalid_json");
    // A routing field's value is kept raw and checked apart from the body: it must still get
    // the depth budget it has inside the body, one level less than alone.
    for field in ["metadata", "model", "stream", "background", "session_id"] {
        let at = |levels: usize| {
            format!(
                r#"{{"model":"m","{field}":{}{}}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        assert!(serde_json::from_str::<Value>(&at(MAX_DEPTH - 1)).is_ok());
        assert_ne!(code_or_ok(&at(MAX_DEPTH - 1)), "invalid_json", "{field}");
        assert!(serde_json::from_str::<Value>(&at(MAX_DEPTH)).is_err());
        assert_eq!(code(&at(MAX_DEPTH)), "invalid_json", "{field}");
    }
}

#[test]
fn deep_nesting_is_refused_at_the_limit() {
    // Far past the limit: refused where the limit is reached (no stack risk), balanced or not.
    let deep = nested(100_000);
    let e = scan(deep.as_bytes()).unwrap_err();
    assert_eq!(e.code, "invalid_json");
    assert!(e.message.contains("recursion limit"), "{}", e.message);
    let unbalanced = format!("{{\"model\":\"m\",\"x\":{}}}", "[".repeat(100_000));
    assert_eq!(code(&unbalanced), "invalid_json");
}

#[test]
fn lone_surrogates_are_refused_anywhere() {
    for s in [
        r"\ud800",
        r"\udbff\udbff",
        r"\udc00",
        r"a\ud800b",
        r"\ud800\u0041",
        r"\ud800\n",
        r"\ud800\\",
        r"\ud83d\ude00\udc00",
    ] {
        for raw in [
            format!(r#"{{"model":"m","x":"{s}"}}"#),
            format!(r#"{{"model":"m","x":[{{"{s}":1}}]}}"#),
            format!(r#"{{"model":"m","messages":[{{"content":"ok","y":["{s}"]}}]}}"#),
        ] {
            assert!(serde_json::from_str::<Value>(&raw).is_err(), "{raw}");
            assert_eq!(code(&raw), "invalid_json", "{raw}");
        }
    }
    // Pairs, escaped backslashes before a `u`, and plain escapes are text.
    for s in [
        r"\ud83d\ude00",
        r"\u00e9",
        r"\\ud800",
        r"\\\ud83d\ude00x",
        r"\uDBFF\uDFFF",
    ] {
        let raw = format!(r#"{{"model":"m","x":"{s}"}}"#);
        assert!(serde_json::from_str::<Value>(&raw).is_ok(), "{raw}");
        assert!(scan(raw.as_bytes()).is_ok(), "{raw}");
    }
}

#[test]
fn numbers_out_of_f64_range_are_refused() {
    let huge = format!("1{}", "0".repeat(309));
    for n in [
        "1e400",
        "-1e400",
        "1.7976931348623159e308",
        "1e99999999999999999999",
        &huge,
    ] {
        let raw = format!(r#"{{"model":"m","x":[1,{n}]}}"#);
        assert!(serde_json::from_str::<Value>(&raw).is_err(), "{raw}");
        assert_eq!(code(&raw), "invalid_json", "{raw}");
    }
    let long = format!("1{}", "0".repeat(307));
    for n in [
        "1e-400",
        "0e99999999999999999999",
        "-1.7976931348623157e308",
        "2E+3",
        &long,
    ] {
        let raw = format!(r#"{{"model":"m","x":[1,{n}]}}"#);
        assert!(serde_json::from_str::<Value>(&raw).is_ok(), "{raw}");
        assert!(scan(raw.as_bytes()).is_ok(), "{raw}");
    }
}

/// What only the full parse refuses (a lone surrogate, an exponent or a run of 309 digits past
/// `f64::MAX`) and its nearest accepted neighbours, at every offset within a few vector widths
/// and before short and long tails: the answer must be serde_json's wherever the value stands.
#[test]
fn what_only_the_full_parse_refuses_is_refused_at_every_offset() {
    let huge = format!("2{}", "0".repeat(308)); // 2e308: past f64::MAX
    let big = format!("1{}", "0".repeat(308)); // 1e308: within it
    let cases = [
        (r#""\ud800""#.to_string(), false),
        (r#""\uDBFF\uDBFF""#.to_string(), false),
        (r#""\udc00""#.to_string(), false),
        (r#""\uD83D\uDE00""#.to_string(), true),
        (r#""\\ud800""#.to_string(), true),
        ("1e400".to_string(), false),
        ("1E-400".to_string(), true),
        (huge.clone(), false),
        (big.clone(), true),
        (format!("-{huge}.5"), false),
    ];
    for (value, accepted) in &cases {
        for pad in 0..140 {
            for tail in [0usize, 1, 2, 3, 70] {
                let raw = format!(
                    r#"{{"model":"m","p":"{}","x":{value},"t":"{}"}}"#,
                    "a".repeat(pad),
                    "b".repeat(tail)
                );
                assert_eq!(
                    serde_json::from_str::<Value>(&raw).is_ok(),
                    *accepted,
                    "serde_json on {raw}"
                );
                assert_eq!(
                    scan(raw.as_bytes()).is_ok(),
                    *accepted,
                    "pad {pad}, tail {tail}: {raw}"
                );
            }
        }
    }
}

#[test]
fn duplicate_keys_splice_into_valid_json() {
    // The last `model` wins; a `background: true` before a later `background: false` must
    // not leave a stale span that would cut the document apart.
    let raw = r#"{"background":true,"model":"a","background":false,"model":"b"}"#;
    let f = scan(raw.as_bytes()).unwrap();
    assert_eq!(f.model, "b");
    assert!(!f.background);
    let out = splice(raw.as_bytes(), &f, "up");
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["model"], "up");
}

#[test]
fn the_last_duplicate_decides_as_in_the_full_parse() {
    // Only the value the full parse keeps (the last) is read; earlier ones are not judged.
    let f = scan(br#"{"model":1,"stream":"yes","model":"m","stream":true}"#).unwrap();
    assert_eq!((f.model.as_str(), f.stream), ("m", true));
    assert_eq!(code(r#"{"model":"m","model":1}"#), "invalid_model");
    let f = scan(br#"{"model":"m","metadata":{"session_id":"a","session_id":"b"}}"#).unwrap();
    assert_eq!(f.session_key.as_deref(), Some("b"));
    // `metadata` must be an object to carry a session id.
    let f = scan(br#"{"model":"m","metadata":["s"],"prompt_cache_key":"c"}"#).unwrap();
    assert_eq!(f.session_key.as_deref(), Some("c"));
}

#[test]
fn the_reference_agrees_on_the_chosen_cases() {
    for raw in [
        &br#"{"model":"m"}"#[..],
        br#"{"model":"m","stream":null,"background":true,"metadata":{"session_id":7}}"#,
        br#"{"stream":"yes"}"#,
        br#"{"model":"","stream":"yes"}"#,
        b"{\"model\":\"m\",\"x\":\"\\ud800\"}",
        nested(MAX_DEPTH).as_bytes(),
        nested(MAX_DEPTH + 1).as_bytes(),
    ] {
        assert_eq!(disagreement(raw), None, "{}", String::from_utf8_lossy(raw));
    }
}

/// The reference is not the fast scan: it must catch the bugs the differential tests are for.
#[test]
fn the_differential_check_sees_the_old_gaps() {
    // What the raw-value scan alone accepts and the full parse refuses.
    for raw in [
        nested(10_000),
        r#"{"model":"m","x":"\ud800"}"#.to_owned(),
        r#"{"model":"m","x":1e400}"#.to_owned(),
    ] {
        let top = serde_json::from_str::<std::collections::BTreeMap<&str, &RawValue>>(&raw);
        assert!(top.is_ok(), "serde_json's raw-value skipping accepts it");
        assert!(super::reference::scan(raw.as_bytes()).is_err());
    }
}

// === generated bodies ===

/// Pieces of a string's contents: plain, multi-byte, escapes, surrogate pairs and halves,
/// escapes that only look like `\u`, a control character and broken escapes.
fn string_piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "é",
        "😀",
        r"\n",
        r#"\""#,
        r"\\",
        r"\/",
        r"\u00e9",
        r"\u0000",
        r"\ud83d\ude00",
        r"\uDBFF\uDFFF",
        r"\ud800",
        r"\udbff\udbff",
        r"\udc00",
        r"\ud800\u0041",
        r"\ud800\n",
        r"\ud800\\",
        r"\\ud800",
        r"\u",
        r"\uZZZZ",
        r"\x",
        "\u{1}",
    ])
}

fn string_lit() -> impl Strategy<Value = String> {
    prop::collection::vec(string_piece(), 0..4).prop_map(|p| format!("\"{}\"", p.concat()))
}

/// Numbers at and past `f64`'s edges, and malformed ones.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "-0",
            "7",
            "-1",
            "12.5",
            "2E+3",
            "1e-400",
            "1e400",
            "-1e400",
            "1e308",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1.7976931348623159e308",
            "-1.7976931348623159e308",
            "18446744073709551616",
            "0e99999999999999999999",
            "1e99999999999999999999",
            "01",
            "1.",
            "-",
            "1e",
        ])
        .prop_map(str::to_owned),
        (300usize..312, any::<bool>()).prop_map(|(n, minus)| format!(
            "{}1{}",
            if minus { "-" } else { "" },
            "0".repeat(n)
        )),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "model",
            "stream",
            "background",
            "session_id",
            "prompt_cache_key",
            "metadata",
            "messages",
            "x",
        ])
        .prop_map(|k| format!("\"{k}\"")),
        1 => string_lit(),
    ]
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "null", "true", "false", "nul", "\"m\"", "\"p/m\"", "\"\""
        ])
        .prop_map(str::to_owned),
        number(),
        string_lit(),
    ]
}

/// A JSON value (sometimes not quite valid), a few levels deep.
fn value() -> impl Strategy<Value = String> {
    scalar().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                let kv: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", kv.join(","))
            }),
        ]
    })
}

/// `inner` wrapped in arrays and `{"k":…}` objects, `kinds.len()` levels.
fn wrap(inner: &str, kinds: &[bool]) -> String {
    let mut out = String::new();
    for &array in kinds {
        out.push_str(if array { "[" } else { "{\"k\":" });
    }
    out.push_str(inner);
    for &array in kinds.iter().rev() {
        out.push(if array { ']' } else { '}' });
    }
    out
}

/// A request body: top-level fields with routing keys among them, one field possibly nested
/// around serde_json's depth limit.
fn body() -> impl Strategy<Value = String> {
    let field = (key(), value());
    let deep = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec(any::<bool>(), MAX_DEPTH - 4..MAX_DEPTH + 3),
    ];
    (
        prop::collection::vec(field, 0..6),
        deep,
        value(),
        prop::sample::select(vec!["", " ", "\n\t"]),
    )
        .prop_map(|(fields, kinds, inner, ws)| {
            let mut kv: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| format!("{k}{ws}:{ws}{v}"))
                .collect();
            if !kinds.is_empty() {
                kv.push(format!("\"x\":{}", wrap(&inner, &kinds)));
            }
            format!("{{{ws}{}{ws}}}", kv.join(&format!(",{ws}")))
        })
}

/// A body with some bytes replaced, inserted or cut: invalid UTF-8 and broken syntax too.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        body(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..3),
    )
        .prop_map(|(body, edits)| {
            let mut bytes = body.into_bytes();
            for (at, byte, op) in edits {
                if bytes.is_empty() {
                    break;
                }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => bytes.truncate(i),
                }
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Generated request bodies, valid and nearly valid.
    #[test]
    fn fast_scan_agrees_with_the_full_parse(body in body()) {
        prop_assert_eq!(disagreement(body.as_bytes()), None, "{}", body);
    }

    /// The same bodies with bytes replaced, inserted or cut.
    #[test]
    fn fast_scan_agrees_on_mutated_bodies(bytes in mutated()) {
        prop_assert_eq!(
            disagreement(&bytes),
            None,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }

    /// Arbitrary bytes.
    #[test]
    fn fast_scan_agrees_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(disagreement(&bytes), None);
    }
}
