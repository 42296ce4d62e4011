//! Signed reasoning must survive a trip through an OpenAI format and back, and streamed
//! translations must agree with JSON ones.

use serde_json::{Value, json};

use super::request;
use crate::sse::{Format, SseEvent, SseItem, SseParser};
use crate::translate::{StreamTranslator, TranslateContext, translate_response};

const SIG: &str = "EqQBCkgIBhABGAIiQL3xYzR5dP1mKcJ0Gq2VbC9lIqAb";

fn anthropic_answer() -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "Plan: call the tool.", "signature": SIG},
            {"type": "redacted_thinking", "data": "REDACTED=="},
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": ["ls"]}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    })
}

/// The assistant turn Anthropic expects back: thinking (signed), redacted, text, tool use.
fn expected_turn() -> Value {
    json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Plan: call the tool.", "signature": SIG},
        {"type": "redacted_thinking", "data": "REDACTED=="},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": ["ls"]}},
    ]})
}

fn answer_in(client: Format) -> Value {
    let ctx = TranslateContext::new(client, &json!({"model": "claude"}), 1);
    translate_response(Format::Anthropic, client, &anthropic_answer(), &ctx)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn signatures_survive_a_responses_round_trip() {
    let answer = answer_in(Format::OpenAiResponses);
    // Codex replays the output items as the next request's input.
    let mut input = vec![json!({"role": "user", "content": "go"})];
    input.extend(answer["output"].as_array().cloned().unwrap_or_default());
    input.push(json!({"type": "function_call_output", "call_id": "toolu_1", "output": "a.txt"}));
    let next = json!({"model": "claude", "input": input, "max_output_tokens": 100});
    let out = request(Format::OpenAiResponses, Format::Anthropic, &next);
    assert_eq!(out["messages"][1], expected_turn());
    assert_eq!(out["messages"][2]["content"][0]["tool_use_id"], "toolu_1");
}

#[test]
fn signatures_survive_a_chat_round_trip() {
    let answer = answer_in(Format::OpenAiChat);
    let mut assistant = answer["choices"][0]["message"].clone();
    // A chat client echoes the message it received.
    if let Some(o) = assistant.as_object_mut() {
        o.remove("refusal");
    }
    let next = json!({"model": "claude", "messages": [
        {"role": "user", "content": "go"},
        assistant,
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"},
    ]});
    let out = request(Format::OpenAiChat, Format::Anthropic, &next);
    // Chat cannot keep text and tool calls interleaved with reasoning, but the order
    // reasoning → text → tool calls is what Claude produced here.
    assert_eq!(out["messages"][1], expected_turn());
}

#[test]
fn openai_encrypted_reasoning_never_reaches_anthropic() {
    let next = json!({"model": "claude", "input": [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "x"}], "encrypted_content": "gAAAAABfernet"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
    ]});
    let out = request(Format::OpenAiResponses, Format::Anthropic, &next);
    assert_eq!(
        out["messages"][1],
        json!({"role": "assistant", "content": "ok"})
    );
}

/// The Anthropic stream that produces [`anthropic_answer`].
fn anthropic_stream() -> String {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Plan: "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "call the tool."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": SIG}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "REDACTED=="}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Calling."}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {}}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"cmd\":"}}),
        json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "[\"ls\"]}"}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn translate_stream(to: Format) -> Vec<(Option<String>, Value)> {
    let ctx = TranslateContext::new(to, &json!({"model": "claude"}), 1);
    let mut t = StreamTranslator::new(Format::Anthropic, to, ctx).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    SseParser::new().feed(anthropic_stream().as_bytes(), &mut |item| {
        out.extend(t.on_item(&item));
    });
    let mut frames = Vec::new();
    SseParser::new().feed(&out, &mut |item| {
        if let SseItem::Event(SseEvent { event, data, .. }) = item {
            let value = serde_json::from_slice(data)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(data)));
            frames.push((
                event.map(|n| String::from_utf8_lossy(n).into_owned()),
                value,
            ));
        }
    });
    frames
}

#[test]
fn streamed_and_json_responses_translations_agree() {
    let frames = translate_stream(Format::OpenAiResponses);
    let completed = frames
        .iter()
        .find(|(n, _)| n.as_deref() == Some("response.completed"))
        .map(|(_, d)| d["response"].clone())
        .unwrap_or_default();
    let json = answer_in(Format::OpenAiResponses);
    assert_eq!(completed["output"], json["output"]);
    assert_eq!(completed["usage"], json["usage"]);
    assert_eq!(completed["status"], json["status"]);
    // Every item announced is completed, in order.
    let done: Vec<Value> = frames
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("response.output_item.done"))
        .map(|(_, d)| d["item"].clone())
        .collect();
    assert_eq!(Some(&done), json["output"].as_array());
    let seq: Vec<u64> = frames
        .iter()
        .filter_map(|(_, d)| d["sequence_number"].as_u64())
        .collect();
    assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>());
}

#[test]
fn streamed_and_json_chat_translations_agree() {
    let frames = translate_stream(Format::OpenAiChat);
    let (mut content, mut reasoning, mut args) = (String::new(), String::new(), String::new());
    let mut signature = None;
    let mut finish = None;
    for (_, chunk) in &frames {
        let delta = &chunk["choices"][0]["delta"];
        content += delta["content"].as_str().unwrap_or_default();
        reasoning += delta["reasoning_content"].as_str().unwrap_or_default();
        args += delta["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap_or_default();
        if let Some(sig) = delta["reasoning_details"][0]["signature"].as_str() {
            signature = Some(sig.to_owned());
        }
        if let Some(f) = chunk["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_owned());
        }
    }
    let json = answer_in(Format::OpenAiChat);
    let message = &json["choices"][0]["message"];
    assert_eq!(content, message["content"].as_str().unwrap_or_default());
    assert_eq!(
        reasoning,
        message["reasoning_content"].as_str().unwrap_or_default()
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args).ok(),
        serde_json::from_str::<Value>(
            message["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
        )
        .ok()
    );
    assert_eq!(
        signature.as_deref(),
        message["reasoning_details"][0]["signature"].as_str()
    );
    assert_eq!(
        finish.as_deref(),
        json["choices"][0]["finish_reason"].as_str()
    );
    assert_eq!(frames.last().map(|(_, d)| d.clone()), Some(json!("[DONE]")));
}

#[test]
fn unsigned_thinking_is_stripped_before_anthropic_sees_it() {
    let mut body = json!({"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "from glm", "signature": ""},
            {"type": "text", "text": "a"},
        ]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "only", "signature": ""}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "claude", "signature": SIG}]},
        {"role": "assistant", "content": "plain"},
    ]});
    assert_eq!(crate::translate::strip_unsigned_thinking(&mut body), 2);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "claude", "signature": SIG}]},
            {"role": "assistant", "content": "plain"},
        ])
    );
}
