//! Stream edge cases: the held finish, missing `[DONE]`, truncation, keep-alives, errors
//! before content, and how chat deltas are cut into blocks.

use serde_json::{Value, json};

use crate::sse::{Format, SseEvent, SseItem, SseParser};
use crate::translate::{StreamTranslator, TranslateContext, TranslateError};

const CHAT: Format = Format::OpenAiChat;
const RESPONSES: Format = Format::OpenAiResponses;
const ANTHROPIC: Format = Format::Anthropic;

fn translator(from: Format, to: Format, request: Value) -> StreamTranslator {
    StreamTranslator::new(from, to, TranslateContext::new(to, &request, 1))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn event<'a>(name: Option<&'a str>, data: &'a str) -> SseEvent<'a> {
    SseEvent {
        event: name.map(str::as_bytes),
        data: data.as_bytes(),
        id: None,
        retry: None,
    }
}

/// The frames in `bytes`: `(event name, data)`, data parsed when it is JSON.
fn frames(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    SseParser::new().feed(bytes, &mut |item| {
        if let SseItem::Event(e) = item {
            let data = e.data_str().unwrap_or_default();
            let value = serde_json::from_str(data).unwrap_or_else(|_| json!(data));
            out.push((
                e.event.map(|n| String::from_utf8_lossy(n).into_owned()),
                value,
            ));
        }
    });
    out
}

fn names(frames: &[(Option<String>, Value)]) -> Vec<&str> {
    frames
        .iter()
        .map(|(n, _)| n.as_deref().unwrap_or(""))
        .collect()
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

#[test]
fn chat_finish_without_usage_still_closes_the_anthropic_message() {
    let mut t = translator(CHAT, ANTHROPIC, json!({}));
    let mut out = t.on_event(&event(None, &chat_chunk(json!({"content": "hi"}), None)));
    out.extend(t.on_event(&event(None, &chat_chunk(json!({}), Some("stop")))));
    // Still waiting for a possible usage chunk: nothing closes yet.
    assert_eq!(
        names(&frames(&out)),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop"
        ]
    );
    let end = frames(&t.on_event(&event(None, "[DONE]")));
    assert_eq!(names(&end), ["message_delta", "message_stop"]);
    assert_eq!(end[0].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(end[0].1["usage"]["output_tokens"], 0);
    // Anything after the end is ignored.
    assert!(
        t.on_event(&event(None, &chat_chunk(json!({"content": "late"}), None)))
            .is_empty()
    );
    assert!(t.finish().is_empty());
}

#[test]
fn a_finished_chat_stream_without_done_is_closed_at_eof() {
    let mut t = translator(CHAT, RESPONSES, json!({}));
    t.on_event(&event(
        None,
        &chat_chunk(json!({"content": "hi"}), Some("stop")),
    ));
    let end = frames(&t.finish());
    assert_eq!(names(&end), ["response.completed"]);
    assert_eq!(
        end[0].1["response"]["output"][0]["content"][0]["text"],
        "hi"
    );
}

#[test]
fn a_truncated_stream_gets_no_invented_ending() {
    for to in [ANTHROPIC, RESPONSES] {
        let mut t = translator(CHAT, to, json!({}));
        t.on_event(&event(None, &chat_chunk(json!({"content": "par"}), None)));
        assert!(t.finish().is_empty(), "{to:?}");
    }
    let mut t = translator(ANTHROPIC, CHAT, json!({}));
    let start = json!({"type": "message_start", "message": {"id": "m", "model": "x", "usage": {"input_tokens": 1}}});
    t.on_event(&event(Some("message_start"), &start.to_string()));
    assert!(t.finish().is_empty());
}

#[test]
fn comments_become_the_client_formats_keep_alive() {
    for (to, expected) in [
        (CHAT, &b": keep-alive\n\n"[..]),
        (RESPONSES, b": keep-alive\n\n"),
        (ANTHROPIC, b"event: ping\ndata: {\"type\":\"ping\"}\n\n"),
    ] {
        let from = if to == ANTHROPIC { CHAT } else { ANTHROPIC };
        let mut t = translator(from, to, json!({}));
        assert_eq!(
            t.on_item(&SseItem::Comment(b"OPENROUTER PROCESSING")),
            expected
        );
    }
}

#[test]
fn same_format_streams_are_reframed_verbatim() {
    let mut t = translator(ANTHROPIC, ANTHROPIC, json!({}));
    let out = t.on_event(&event(Some("content_block_delta"), "{\"a\":1}\n{\"b\":2}"));
    assert_eq!(
        out,
        b"event: content_block_delta\ndata: {\"a\":1}\ndata: {\"b\":2}\n\n"
    );
}

#[test]
fn responses_streams_cannot_be_translated_from() {
    let ctx = TranslateContext::new(CHAT, &json!({}), 1);
    assert!(matches!(
        StreamTranslator::new(RESPONSES, CHAT, ctx),
        Err(TranslateError::Direction { .. })
    ));
}

#[test]
fn an_error_before_any_content_reaches_the_client() {
    let mut t = translator(ANTHROPIC, CHAT, json!({}));
    let err =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let out = frames(&t.on_event(&event(Some("error"), &err.to_string())));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1["error"]["type"], "server_error");
    assert_eq!(out[0].1["error"]["code"], "overloaded_error");
    let mut t = translator(CHAT, ANTHROPIC, json!({}));
    let out = frames(&t.on_event(&event(Some("error"), "upstream exploded")));
    assert_eq!(names(&out), ["error"]);
    assert_eq!(out[0].1["error"]["message"], "upstream exploded");
}

#[test]
fn each_reasoning_detail_index_is_its_own_thinking_block() {
    let mut t = translator(CHAT, ANTHROPIC, json!({}));
    let detail = |index: u64, text: &str, sig: Option<&str>| {
        let mut d = json!({"type": "reasoning.text", "text": text, "format": "anthropic-claude-v1", "index": index});
        if let (Some(sig), Some(o)) = (sig, d.as_object_mut()) {
            o.insert("signature".into(), sig.into());
        }
        chat_chunk(json!({"reasoning_details": [d]}), None)
    };
    let mut out = Vec::new();
    for chunk in [
        detail(0, "first", None),
        detail(0, "", Some("sig-0")),
        detail(1, "second", None),
        detail(1, "", Some("sig-1")),
        chat_chunk(json!({"content": "done"}), Some("stop")),
    ] {
        out.extend(t.on_event(&event(None, &chunk)));
    }
    out.extend(t.on_event(&event(None, "[DONE]")));
    let deltas: Vec<(u64, Value)> = frames(&out)
        .into_iter()
        .filter(|(n, _)| n.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| (d["index"].as_u64().unwrap_or(99), d["delta"].clone()))
        .collect();
    assert_eq!(
        deltas,
        vec![
            (0, json!({"type": "thinking_delta", "thinking": "first"})),
            (0, json!({"type": "signature_delta", "signature": "sig-0"})),
            (1, json!({"type": "thinking_delta", "thinking": "second"})),
            (1, json!({"type": "signature_delta", "signature": "sig-1"})),
            (2, json!({"type": "text_delta", "text": "done"})),
        ]
    );
}

#[test]
fn usage_chunk_only_when_the_chat_client_asked() {
    let anthropic_stream = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "model": "x", "usage": {"input_tokens": 3}}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    for include in [false, true] {
        let request = json!({"stream_options": {"include_usage": include}});
        let mut t = translator(ANTHROPIC, CHAT, request);
        let mut out = Vec::new();
        for (name, data) in &anthropic_stream {
            out.extend(t.on_event(&event(Some(name), &data.to_string())));
        }
        let usage: Vec<Value> = frames(&out)
            .into_iter()
            .filter_map(|(_, d)| d.get("usage").cloned())
            .collect();
        let expected = if include {
            vec![
                json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}),
            ]
        } else {
            vec![]
        };
        assert_eq!(usage, expected, "include_usage: {include}");
    }
}

#[test]
fn tool_calls_without_index_are_told_apart_by_id() {
    let mut t = translator(CHAT, ANTHROPIC, json!({}));
    let call = |id: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": args}});
    let mut out = Vec::new();
    for chunk in [
        chat_chunk(json!({"tool_calls": [call("a", "{\"x\":1}")]}), None),
        chat_chunk(
            json!({"tool_calls": [call("b", "{\"x\":2}")]}),
            Some("tool_calls"),
        ),
    ] {
        out.extend(t.on_event(&event(None, &chunk)));
    }
    out.extend(t.on_event(&event(None, "[DONE]")));
    let starts: Vec<Value> = frames(&out)
        .into_iter()
        .filter(|(n, _)| n.as_deref() == Some("content_block_start"))
        .map(|(_, d)| json!([d["index"], d["content_block"]["id"]]))
        .collect();
    assert_eq!(starts, vec![json!([0, "a"]), json!([1, "b"])]);
}
