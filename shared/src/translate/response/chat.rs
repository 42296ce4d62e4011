//! OpenAI `chat.completion` bodies ↔ neutral.
//!
//! Only the first choice is read: translated requests never ask for more. Text blocks are
//! concatenated into `content`, reasoning blocks into `reasoning_content` (separated by a blank
//! line), and signed or redacted reasoning is also listed in `reasoning_details` so a chat
//! client can hand it back. A `refusal` is read as text.

use serde_json::{Map, Value, json};

use crate::sse::Format;
use crate::translate::context::TranslateContext;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Response, ToolCall};
use crate::translate::mapping::{
    finish_from_chat, finish_to_chat, usage_from_openai, usage_to_chat,
};
use crate::translate::reasoning_codec::chat_details;
use crate::translate::request::parts::reasoning_details;
use crate::translate::util::Result;

pub(crate) fn decode(body: &Value) -> Result<Response> {
    let bad = |reason: &str| TranslateError::upstream(Format::OpenAiChat, reason);
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| bad("no choices"))?;
    let message = choice.get("message").ok_or_else(|| bad("no message"))?;
    let mut content = match message.get("reasoning_details").filter(|d| !d.is_null()) {
        Some(d) => reasoning_details(d, "reasoning_details").map_err(|e| bad(&e.to_string()))?,
        None => Vec::new(),
    };
    if content.is_empty() {
        let text = message
            .get("reasoning_content")
            .or_else(|| message.get("reasoning"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty());
        if let Some(text) = text {
            content.push(Block::Reasoning {
                text: text.to_owned(),
                signature: None,
            });
        }
    }
    match message.get("content") {
        Some(Value::String(s)) if !s.is_empty() => content.push(Block::Text(s.clone())),
        Some(Value::Array(parts)) => {
            let text = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str));
            content.extend(text.map(|t| Block::Text(t.to_owned())));
        }
        _ => {}
    }
    if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
        content.push(Block::Text(refusal.to_owned()));
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = call.get("function").unwrap_or(&Value::Null);
        let s = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        content.push(Block::ToolCall(ToolCall {
            id: s(call, "id"),
            name: s(f, "name"),
            arguments: s(f, "arguments"),
        }));
    }
    Ok(Response {
        id: str_of(body, "id"),
        model: str_of(body, "model"),
        created: body.get("created").and_then(Value::as_u64),
        content,
        finish: finish_from_chat(
            choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .unwrap_or("stop"),
        ),
        stop_sequence: None,
        usage: body.get("usage").map(usage_from_openai).unwrap_or_default(),
    })
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn encode(resp: &Response, ctx: &TranslateContext) -> Value {
    let mut text = String::new();
    let mut reasoning: Vec<&str> = Vec::new();
    let mut reasoning_blocks = Vec::new();
    let mut calls = Vec::new();
    for block in &resp.content {
        match block {
            Block::Text(t) => text.push_str(t),
            Block::Reasoning { text, .. } => {
                reasoning.push(text);
                reasoning_blocks.push(block);
            }
            Block::Redacted(_) => reasoning_blocks.push(block),
            Block::ToolCall(c) => calls.push(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })),
            _ => {}
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        text.into()
    };
    message.insert("content".into(), content);
    message.insert("refusal".into(), Value::Null);
    if !reasoning.is_empty() {
        message.insert("reasoning_content".into(), reasoning.join("\n\n").into());
    }
    if let Some(details) = chat_details(&reasoning_blocks) {
        message.insert("reasoning_details".into(), details);
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": resp.id,
        "object": "chat.completion",
        "created": resp.created.unwrap_or(ctx.created),
        "model": model(resp, ctx),
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_to_chat(&resp.finish),
        }],
        "usage": usage_to_chat(&resp.usage),
    })
}

/// The provider's model name, or the client's when the provider gave none.
pub(crate) fn model<'a>(resp: &'a Response, ctx: &'a TranslateContext) -> &'a str {
    if resp.model.is_empty() {
        &ctx.model
    } else {
        &resp.model
    }
}
