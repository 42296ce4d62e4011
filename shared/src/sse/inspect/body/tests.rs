//! The body probe must agree with a serde probe of the same declarations on every body it
//! answers, and must answer ordinary chat, Responses and Messages answers.

use std::borrow::Cow;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{BodyFacts, probe};
use crate::sse::tests::json_gen::{counter, object, usage_key};
use crate::sse::{Usage, WireUsage};

/// The node's serde probe: the same three declared fields.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    usage: Option<WireUsage>,
}

/// Checks one body both ways; returns whether the fast path answered.
fn agrees(body: &[u8]) -> Result<bool, TestCaseError> {
    let Some(fast) = probe(body) else {
        return Ok(false);
    };
    let full = serde_json::from_slice::<Probe<'_>>(body);
    prop_assert!(
        full.is_ok(),
        "serde refused {:?}",
        String::from_utf8_lossy(body)
    );
    let Ok(full) = full else { return Ok(true) };
    prop_assert!(full.error.is_none(), "{:?}", String::from_utf8_lossy(body));
    let expected = BodyFacts {
        typed_error: full.kind.as_deref() == Some("error"),
        usage: full.usage.map(Usage::from),
    };
    prop_assert_eq!(fast, expected, "{:?}", String::from_utf8_lossy(body));
    Ok(true)
}

const CHAT: &str = r#"{"id":"chatcmpl-B9MHDbslfkBeAs8l","object":"chat.completion","created":1741570283,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!\nHow can I \"help\" you today? \u00e9","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_06737a9306"}"#;
const MESSAGES: &str = r#"{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi!"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":6}}"#;
const RESPONSES: &str = r#"{"id":"resp_67c9","object":"response","created_at":1741290958,"status":"completed","error":null,"incomplete_details":null,"output":[{"type":"message","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":4},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}"#;
const ERRORS: &[&str] = &[
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#,
    r#"{"error":"Unexpected endpoint or method. (POST /v1/chat/completions)"}"#,
];

#[test]
fn ordinary_answers_take_the_fast_path() {
    for body in [CHAT, MESSAGES, RESPONSES] {
        assert!(agrees(body.as_bytes()).unwrap_or(false), "{body}");
    }
    let usage = probe(CHAT.as_bytes()).and_then(|f| f.usage);
    assert_eq!(
        usage,
        Some(Usage {
            input: Some(19),
            output: Some(10),
            cache_read: Some(0),
            cache_creation: None
        })
    );
    let facts = probe(br#"{"type":"error","error":null}"#);
    assert_eq!(facts.map(|f| f.typed_error), Some(true));
}

#[test]
fn error_fields_and_odd_counters_take_the_full_parse() {
    for body in ERRORS {
        assert_eq!(probe(body.as_bytes()), None, "{body}");
    }
    for usage in [
        "1.0",
        "-1",
        "1e3",
        "01",
        "\"3\"",
        "18446744073709551616",
        "[1]",
        "true",
    ] {
        let body = format!(r#"{{"usage":{{"prompt_tokens":{usage}}}}}"#);
        assert_eq!(probe(body.as_bytes()), None, "{body}");
    }
    // A duplicate declared field is a serde error; an escaped key may spell a declared one.
    assert_eq!(probe(br#"{"usage":null,"usage":null}"#), None);
    assert_eq!(probe(br#"{"\u0065rror":{"type":"x"}}"#), None);
    assert_eq!(probe(br#"{"choices":[{"text":"\x"}]}"#), None);
}

fn key() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        prop::sample::select(vec!["type", "error", "usage", "id", "choices"]),
        usage_key(),
    ]
}

prop_compose! {
    fn body()(
        usage in proptest::option::of(prop::collection::vec((key(), counter()), 0..5)),
        top in prop::collection::vec((key(), counter()), 0..4),
        ws in prop::sample::select(vec!["", " ", "\n", "\u{c}"]),
    ) -> String {
        let mut top = top;
        if let Some(fields) = usage {
            top.push(("usage", object(fields, ws)));
        }
        object(top, ws)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generated_bodies_agree(
        data in body(),
        cut in proptest::option::of(0usize..300),
        flip in proptest::option::of((0usize..300, any::<u8>())),
    ) {
        let mut bytes = data.into_bytes();
        if let Some((at, b)) = flip {
            let at = at % (bytes.len() + 1);
            bytes.insert(at, b);
        }
        if let Some(cut) = cut {
            bytes.truncate(cut);
        }
        agrees(&bytes)?;
    }

    #[test]
    fn mutated_captured_bodies_agree(
        which in 0usize..3,
        at in 0usize..1000,
        b in prop::sample::select(vec![b'"', b'\\', b'{', b'}', b',', b':', b'0', b'.', b'-', b'e', b' ', 0x01, 0xc3]),
        delete in any::<bool>(),
    ) {
        let mut bytes = [CHAT, MESSAGES, RESPONSES][which].as_bytes().to_vec();
        let at = at % bytes.len();
        if delete {
            bytes.remove(at);
        } else {
            bytes.insert(at, b);
        }
        agrees(&bytes)?;
    }
}
