//! Anthropic `message` bodies ↔ neutral.
//!
//! Block types other than text, thinking, redacted thinking and tool use only appear when
//! server tools were requested, which translated requests never do; they are skipped.

use serde_json::{Value, json};

use super::chat::model;
use crate::sse::Format;
use crate::translate::context::TranslateContext;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Response, ToolCall};
use crate::translate::mapping::{
    finish_from_anthropic, finish_to_anthropic, usage_from_anthropic, usage_to_anthropic,
};
use crate::translate::util::{Result, anthropic_tool_id, tool_input};

pub(crate) fn decode(body: &Value) -> Result<Response> {
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| TranslateError::upstream(Format::Anthropic, "no content"))?;
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut content = Vec::with_capacity(blocks.len());
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => content.push(Block::Text(s(b, "text"))),
            Some("thinking") => content.push(Block::Reasoning {
                text: s(b, "thinking"),
                signature: Some(s(b, "signature")).filter(|sig| !sig.is_empty()),
            }),
            Some("redacted_thinking") => content.push(Block::Redacted(s(b, "data"))),
            Some("tool_use") => content.push(Block::ToolCall(ToolCall {
                id: s(b, "id"),
                name: s(b, "name"),
                arguments: serde_json::to_string(b.get("input").unwrap_or(&json!({})))
                    .unwrap_or_default(),
            })),
            _ => {}
        }
    }
    let stop_sequence = body
        .get("stop_sequence")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Response {
        id: s(body, "id"),
        model: s(body, "model"),
        created: None,
        content,
        finish: finish_from_anthropic(
            body.get("stop_reason")
                .and_then(Value::as_str)
                .unwrap_or("end_turn"),
        ),
        stop_sequence,
        usage: body
            .get("usage")
            .map(usage_from_anthropic)
            .unwrap_or_default(),
    })
}

/// One response block as Anthropic JSON; empty text is left out.
pub(crate) fn block_json(block: &Block) -> Option<Value> {
    Some(match block {
        Block::Text(t) if t.is_empty() => return None,
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::Reasoning { text, signature } => json!({
            "type": "thinking",
            "thinking": text,
            "signature": signature.as_deref().unwrap_or_default(),
        }),
        Block::Redacted(data) => json!({"type": "redacted_thinking", "data": data}),
        Block::ToolCall(c) => json!({
            "type": "tool_use",
            "id": anthropic_tool_id(&c.id),
            "name": c.name,
            "input": tool_input(&c.arguments),
        }),
        _ => return None,
    })
}

pub(crate) fn encode(resp: &Response, ctx: &TranslateContext) -> Value {
    let content: Vec<Value> = resp.content.iter().filter_map(block_json).collect();
    json!({
        "id": resp.id,
        "type": "message",
        "role": "assistant",
        "model": model(resp, ctx),
        "content": content,
        "stop_reason": finish_to_anthropic(&resp.finish, resp.stop_sequence.is_some()),
        "stop_sequence": resp.stop_sequence,
        "usage": usage_to_anthropic(&resp.usage),
    })
}
