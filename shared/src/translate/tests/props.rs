//! Property tests: OpenAI chat → Anthropic → OpenAI chat keeps every message's role and text,
//! every tool call with its id, name and arguments, and every tool result with its id; and no
//! stream input, however malformed, makes a translator panic.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::request;
use crate::sse::{Format, SseEvent};
use crate::translate::{StreamTranslator, TranslateContext};

fn text() -> impl Strategy<Value = String> {
    // Any printable text, never empty (Anthropic refuses empty text blocks).
    "\\PC{1,24}"
}

fn tool_id() -> impl Strategy<Value = String> {
    // Ids in the character set both formats accept travel verbatim.
    "(call_|toolu_)[A-Za-z0-9_-]{1,20}"
}

fn arguments() -> impl Strategy<Value = String> {
    prop::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            any::<i32>().prop_map(Value::from),
            text().prop_map(Value::from)
        ],
        0..3,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>()).to_string())
}

/// One exchange: a user message, then an assistant turn with text and/or tool calls, and a
/// tool message answering each call.
fn exchange() -> impl Strategy<Value = Vec<Value>> {
    let calls = prop::collection::vec((tool_id(), "[a-z_]{1,10}", arguments()), 0..3);
    (text(), prop::option::of(text()), calls, prop::collection::vec(text(), 3))
        .prop_filter("an assistant turn says something", |(_, t, c, _)| {
            t.is_some() || !c.is_empty()
        })
        .prop_filter("tool-call ids are unique", |(_, _, c, _)| {
            let mut ids: Vec<&String> = c.iter().map(|(id, _, _)| id).collect();
            ids.sort();
            ids.dedup();
            ids.len() == c.len()
        })
        .prop_map(|(user, reply, calls, results)| {
            let mut out = vec![json!({"role": "user", "content": user})];
            let mut assistant = json!({"role": "assistant", "content": reply});
            if !calls.is_empty() {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                    })
                    .collect();
                if let Some(o) = assistant.as_object_mut() {
                    o.insert("tool_calls".into(), Value::Array(tool_calls));
                }
            }
            out.push(assistant);
            for ((id, _, _), result) in calls.iter().zip(results) {
                out.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
            }
            out
        })
}

fn conversation() -> impl Strategy<Value = Vec<Value>> {
    (
        prop::collection::vec(text(), 0..3),
        prop::collection::vec(exchange(), 1..4),
        prop::option::of(text()),
    )
        .prop_map(|(system, exchanges, last)| {
            let mut out: Vec<Value> = system
                .into_iter()
                .map(|s| json!({"role": "system", "content": s}))
                .collect();
            out.extend(exchanges.into_iter().flatten());
            out.extend(last.map(|t| json!({"role": "user", "content": t})));
            out
        })
}

/// What the round trip must keep: role, text, tool calls (arguments compared as JSON), and
/// the tool-call id a result answers.
fn essence(messages: &Value) -> Vec<Value> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let calls: Vec<Value> = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let args = c["function"]["arguments"].as_str().unwrap_or_default();
                    json!([c["id"], c["function"]["name"], serde_json::from_str::<Value>(args).ok()])
                })
                .collect();
            json!({"role": m["role"], "content": m["content"], "calls": calls, "answers": m["tool_call_id"]})
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn chat_anthropic_chat_round_trip(messages in conversation()) {
        let chat = json!({"model": "m", "messages": messages, "max_tokens": 100});
        let anthropic = request(Format::OpenAiChat, Format::Anthropic, &chat);
        let back = request(Format::Anthropic, Format::OpenAiChat, &anthropic);
        prop_assert_eq!(essence(&back["messages"]), essence(&chat["messages"]));
    }

    #[test]
    fn stream_translators_never_panic(
        events in prop::collection::vec(
            (
                prop::option::of(prop_oneof![
                    Just("message_start"), Just("content_block_start"), Just("content_block_delta"),
                    Just("content_block_stop"), Just("message_delta"), Just("message_stop"),
                    Just("error"), Just("ping"),
                ]),
                prop_oneof![
                    "\\PC{0,40}",
                    Just("[DONE]".to_owned()),
                    Just(r#"{"type":"content_block_delta","index":7,"delta":{"type":"input_json_delta","partial_json":"{"}}"#.to_owned()),
                    Just(r#"{"choices":[{"delta":{"tool_calls":[{"index":3,"function":{"arguments":"x"}}]},"finish_reason":"tool_calls"}]}"#.to_owned()),
                    Just(r#"{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"d"}],"content":"a"}}],"usage":{}}"#.to_owned()),
                    Just(r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{"a":1}}}"#.to_owned()),
                ],
            ),
            0..24,
        ),
    ) {
        for (from, to) in [
            (Format::OpenAiChat, Format::Anthropic),
            (Format::OpenAiChat, Format::OpenAiResponses),
            (Format::Anthropic, Format::OpenAiChat),
            (Format::Anthropic, Format::OpenAiResponses),
        ] {
            let ctx = TranslateContext::new(to, &json!({"model": "m"}), 1);
            let Ok(mut t) = StreamTranslator::new(from, to, ctx) else {
                return Err(TestCaseError::fail("no translator"));
            };
            for (name, data) in &events {
                let event = SseEvent {
                    event: name.map(str::as_bytes),
                    data: data.as_bytes(),
                    id: None,
                    retry: None,
                };
                t.on_event(&event);
            }
            t.finish();
        }
    }
}
