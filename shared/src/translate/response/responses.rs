//! Neutral → OpenAI Responses `response` bodies, and the item shapes the Responses stream
//! encoder shares.
//!
//! Consecutive text blocks form one `message` item; each reasoning block is a `reasoning` item
//! whose summary is the reasoning text and whose `encrypted_content` carries an Anthropic
//! signature (see [`crate::translate::reasoning_codec`]); each tool call is a `function_call`
//! item whose `call_id` is the provider's tool-call id. Item ids are made up from the response
//! id and the output index, so they are stable and unique within the response. The request's
//! parameters are echoed as the API does.

use serde_json::{Map, Value, json};

use super::chat::model;
use crate::sse::FinishReason;
use crate::translate::context::TranslateContext;
use crate::translate::ir::{Block, Response, TokenUsage};
use crate::translate::mapping::{finish_to_responses, usage_to_responses};
use crate::translate::reasoning_codec::encrypted_content;

/// An item id: `{prefix}_{response id}_{output index}`.
pub(crate) fn item_id(prefix: &str, response_id: &str, index: usize) -> String {
    format!("{prefix}_{response_id}_{index}")
}

pub(crate) fn message_item(id: &str, text: Option<&str>, status: &str) -> Value {
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t, "annotations": []}]),
        None => json!([]),
    };
    json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": content})
}

pub(crate) fn reasoning_item(id: &str, text: &str, encrypted: Option<&str>) -> Value {
    let summary = if text.is_empty() {
        json!([])
    } else {
        json!([{"type": "summary_text", "text": text}])
    };
    let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
    if let (Some(enc), Some(o)) = (encrypted, item.as_object_mut()) {
        o.insert("encrypted_content".into(), enc.into());
    }
    item
}

pub(crate) fn function_call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({
        "id": id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    })
}

/// The whole `response` object. `finish` is `None` while the response is in progress.
pub(crate) fn response_object(
    ctx: &TranslateContext,
    id: &str,
    model: &str,
    created: u64,
    finish: Option<&FinishReason>,
    output: Vec<Value>,
    usage: Option<&TokenUsage>,
) -> Value {
    let (status, incomplete) = match finish {
        None => ("in_progress", None),
        Some(reason) => finish_to_responses(reason),
    };
    let mut o = Map::new();
    o.insert("id".into(), id.into());
    o.insert("object".into(), "response".into());
    o.insert("created_at".into(), created.into());
    o.insert("status".into(), status.into());
    o.insert("error".into(), Value::Null);
    o.insert(
        "incomplete_details".into(),
        incomplete.map_or(Value::Null, |r| json!({"reason": r})),
    );
    o.insert("model".into(), model.into());
    o.insert("output".into(), Value::Array(output));
    o.insert(
        "usage".into(),
        usage.map_or(Value::Null, usage_to_responses),
    );
    for (k, v) in &ctx.echo {
        o.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(o)
}

pub(crate) fn encode(resp: &Response, ctx: &TranslateContext) -> Value {
    let mut output: Vec<Value> = Vec::new();
    let mut text: Option<String> = None;
    let flush = |text: &mut Option<String>, output: &mut Vec<Value>| {
        if let Some(t) = text.take() {
            let id = item_id("msg", &resp.id, output.len());
            output.push(message_item(&id, Some(&t), "completed"));
        }
    };
    for block in &resp.content {
        match block {
            Block::Text(t) => text.get_or_insert_with(String::new).push_str(t),
            Block::Reasoning { .. } | Block::Redacted(_) => {
                flush(&mut text, &mut output);
                let id = item_id("rs", &resp.id, output.len());
                let body = match block {
                    Block::Reasoning { text, .. } => text.as_str(),
                    _ => "",
                };
                output.push(reasoning_item(
                    &id,
                    body,
                    encrypted_content(block).as_deref(),
                ));
            }
            Block::ToolCall(c) => {
                flush(&mut text, &mut output);
                let id = item_id("fc", &resp.id, output.len());
                output.push(function_call_item(
                    &id,
                    &c.id,
                    &c.name,
                    &c.arguments,
                    "completed",
                ));
            }
            _ => {}
        }
    }
    flush(&mut text, &mut output);
    response_object(
        ctx,
        &resp.id,
        model(resp, ctx),
        resp.created.unwrap_or(ctx.created),
        Some(&resp.finish),
        output,
        Some(&resp.usage),
    )
}
