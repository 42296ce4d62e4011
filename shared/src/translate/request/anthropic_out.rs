//! Neutral → Anthropic Messages request.
//!
//! `System` turns, wherever they stood, are hoisted into the top-level `system` (Anthropic has
//! no other place for them). Empty text blocks are dropped (Anthropic rejects them), and so is
//! reasoning without an Anthropic signature (Anthropic rejects unsigned thinking); a turn left
//! empty is dropped. Within a turn, tool results come first, as Anthropic requires. Tool-call
//! ids keep their text, with characters Anthropic refuses replaced by `_` on calls and results
//! alike. `temperature` above Anthropic's maximum of 1 is clamped to 1.

use serde_json::{Map, Number, Value, json};

use crate::sse::Format;
use crate::translate::context::TranslateOptions;
use crate::translate::error::TranslateError;
use crate::translate::ir::{
    Block, Image, Message, OutputFormat, Reasoning, Request, Role, ToolChoice,
};
use crate::translate::mapping::budget_for_effort;
use crate::translate::util::{Result, anthropic_tool_id, tool_input};

/// Anthropic's smallest thinking budget.
const MIN_THINKING_BUDGET: u64 = 1024;

pub(crate) fn encode(req: &Request, opts: &TranslateOptions) -> Result<Value> {
    let mut out = Map::new();
    out.insert("model".into(), req.model.clone().into());
    let max_tokens = req.max_tokens.unwrap_or(opts.default_max_tokens);
    out.insert("max_tokens".into(), max_tokens.into());
    let system: Vec<&str> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::Text(t) if !t.is_empty() => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match system.as_slice() {
        [] => {}
        [one] => {
            out.insert("system".into(), json!(one));
        }
        many => {
            let blocks = many.iter().map(|t| json!({"type": "text", "text": t}));
            out.insert("system".into(), Value::Array(blocks.collect()));
        }
    }
    let mut messages = Vec::with_capacity(req.messages.len());
    for msg in req.messages.iter().filter(|m| m.role != Role::System) {
        messages.extend(message(msg));
    }
    out.insert("messages".into(), Value::Array(messages));
    if !req.stop.is_empty() {
        out.insert("stop_sequences".into(), json!(req.stop));
    }
    if let Some(t) = &req.temperature {
        let clamped = if t.as_f64().is_some_and(|f| f > 1.0) {
            Number::from(1)
        } else {
            t.clone()
        };
        out.insert("temperature".into(), Value::Number(clamped));
    }
    if let Some(p) = &req.top_p {
        out.insert("top_p".into(), Value::Number(p.clone()));
    }
    if req.stream {
        out.insert("stream".into(), true.into());
    }
    if let Some(user) = &req.user {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            let mut o = Map::new();
            o.insert("name".into(), t.name.clone().into());
            if let Some(d) = &t.description {
                o.insert("description".into(), d.clone().into());
            }
            o.insert("input_schema".into(), t.parameters.clone());
            Value::Object(o)
        });
        out.insert("tools".into(), Value::Array(tools.collect()));
        if let Some(choice) = tool_choice(req) {
            out.insert("tool_choice".into(), choice);
        }
    }
    if let Some(thinking) = thinking(req.reasoning.as_ref(), max_tokens)?
        && !unsigned_tool_loop(&req.messages)
    {
        out.insert("thinking".into(), thinking);
    }
    // JSON mode without a schema has no Anthropic counterpart; the decoders drop it.
    if let Some(OutputFormat::JsonSchema { schema, .. }) = &req.output_format {
        out.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    Ok(Value::Object(out))
}

/// Chat's `parallel_tool_calls: false` lives in Anthropic's `tool_choice`.
fn tool_choice(req: &Request) -> Option<Value> {
    let mut choice = match &req.tool_choice {
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Tool(name)) => json!({"type": "tool", "name": name}),
        None if req.parallel_tool_calls == Some(false) => json!({"type": "auto"}),
        None => return None,
    };
    if req.parallel_tool_calls == Some(false)
        && req.tool_choice != Some(ToolChoice::None)
        && let Some(o) = choice.as_object_mut()
    {
        o.insert("disable_parallel_tool_use".into(), true.into());
    }
    Some(choice)
}

/// Efforts become budgets (see [`budget_for_effort`]), capped below `max_tokens` as Anthropic
/// requires; a budget under Anthropic's minimum of 1024 means no thinking.
fn thinking(reasoning: Option<&Reasoning>, max_tokens: u64) -> Result<Option<Value>> {
    let budget = match reasoning {
        None | Some(Reasoning::Off) => return Ok(None),
        Some(Reasoning::Adaptive) => return Ok(Some(json!({"type": "adaptive"}))),
        Some(Reasoning::Budget(b)) => *b,
        Some(Reasoning::Effort(e)) => budget_for_effort(e).ok_or_else(|| {
            TranslateError::unsupported(
                "reasoning_effort",
                Format::Anthropic,
                &format!("effort `{e}` has no thinking budget"),
            )
        })?,
    };
    let budget = budget.min(max_tokens.saturating_sub(1));
    if budget < MIN_THINKING_BUDGET {
        return Ok(None);
    }
    Ok(Some(json!({"type": "enabled", "budget_tokens": budget})))
}

/// Whether the last assistant turn called tools without signed reasoning first — it came from
/// another provider. Anthropic refuses thinking for such a tool loop ("a final assistant
/// message must start with a thinking block"), so thinking is left off for this request;
/// the next turn can enable it again.
fn unsigned_tool_loop(messages: &[Message]) -> bool {
    let Some(last) = messages.iter().rev().find(|m| m.role == Role::Assistant) else {
        return false;
    };
    let calls = last.content.iter().any(|b| matches!(b, Block::ToolCall(_)));
    let signed = last.content.iter().any(|b| {
        matches!(
            b,
            Block::Redacted(_)
                | Block::Reasoning {
                    signature: Some(_),
                    ..
                }
        )
    });
    calls && !signed
}

fn message(msg: &Message) -> Option<Value> {
    let role = match msg.role {
        Role::Assistant => "assistant",
        Role::User | Role::System => "user",
    };
    let mut results = Vec::new();
    let mut rest = Vec::new();
    for block in &msg.content {
        match block {
            Block::ToolResult {
                id,
                content,
                is_error,
            } => {
                let mut r = Map::new();
                r.insert("type".into(), "tool_result".into());
                r.insert("tool_use_id".into(), anthropic_tool_id(id).into());
                let inner: Vec<Value> = content.iter().filter_map(block_json).collect();
                match inner.as_slice() {
                    [] => {}
                    [one] if one.get("type").and_then(Value::as_str) == Some("text") => {
                        r.insert(
                            "content".into(),
                            one.get("text").cloned().unwrap_or_default(),
                        );
                    }
                    _ => {
                        r.insert("content".into(), Value::Array(inner));
                    }
                }
                if *is_error {
                    r.insert("is_error".into(), true.into());
                }
                results.push(Value::Object(r));
            }
            other => rest.extend(block_json(other)),
        }
    }
    results.append(&mut rest);
    let content = match results.as_slice() {
        [] => return None,
        [one] if one.get("type").and_then(Value::as_str) == Some("text") => {
            one.get("text").cloned().unwrap_or_default()
        }
        _ => Value::Array(results),
    };
    Some(json!({"role": role, "content": content}))
}

/// One block as Anthropic JSON, or `None` when Anthropic would reject it.
fn block_json(block: &Block) -> Option<Value> {
    Some(match block {
        Block::Text(t) if t.is_empty() => return None,
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::Image(Image::Url(url)) => {
            json!({"type": "image", "source": {"type": "url", "url": url}})
        }
        Block::Image(Image::Base64 { media_type, data }) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        Block::File {
            media_type,
            data,
            name,
        } => {
            let mut doc = json!({
                "type": "document",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            });
            if let (Some(name), Some(o)) = (name, doc.as_object_mut()) {
                o.insert("title".into(), name.clone().into());
            }
            doc
        }
        Block::ToolCall(c) => json!({
            "type": "tool_use",
            "id": anthropic_tool_id(&c.id),
            "name": c.name,
            "input": tool_input(&c.arguments),
        }),
        Block::Reasoning {
            text,
            signature: Some(sig),
        } => json!({"type": "thinking", "thinking": text, "signature": sig}),
        Block::Reasoning {
            signature: None, ..
        } => return None,
        Block::Redacted(data) => json!({"type": "redacted_thinking", "data": data}),
        Block::ToolResult { .. } => return None,
    })
}
