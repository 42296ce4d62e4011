//! Neutral → OpenAI Chat Completions request.
//!
//! A turn of tool results unfolds into one `tool` message per result, in order, followed by a
//! `user` message with the turn's other content. Chat tool messages cannot hold images, so an
//! image returned by a tool moves into that following user message. Earlier turns' reasoning is
//! sent only when [`TranslateOptions::chat_reasoning_history`] asks for it; a result's
//! `is_error` flag has no counterpart and is dropped.

use serde_json::{Map, Value, json};

use crate::translate::context::{MaxTokensField, TranslateOptions};
use crate::translate::ir::{
    Block, Image, Message, OutputFormat, Reasoning, Request, Role, ToolChoice,
};
use crate::translate::mapping::effort_for_budget;
use crate::translate::util::data_url;

pub(crate) fn encode(req: &Request, opts: &TranslateOptions) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len());
    for msg in &req.messages {
        match msg.role {
            Role::System => messages.push(json!({
                "role": "system",
                "content": text_content(&msg.content),
            })),
            Role::User => user_turn(msg, &mut messages),
            Role::Assistant => messages.push(assistant(msg, opts)),
        }
    }
    let mut out = Map::new();
    out.insert("model".into(), req.model.clone().into());
    out.insert("messages".into(), Value::Array(messages));
    if let Some(max) = req.max_tokens {
        let key = match opts.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        out.insert(key.into(), max.into());
    }
    if let Some(t) = &req.temperature {
        out.insert("temperature".into(), Value::Number(t.clone()));
    }
    if let Some(p) = &req.top_p {
        out.insert("top_p".into(), Value::Number(p.clone()));
    }
    if !req.stop.is_empty() {
        out.insert("stop".into(), json!(req.stop));
    }
    if req.stream {
        out.insert("stream".into(), true.into());
        // The way back needs usage whatever the client asked: Anthropic and Responses streams
        // always report it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut f = Map::new();
                f.insert("name".into(), t.name.clone().into());
                if let Some(d) = &t.description {
                    f.insert("description".into(), d.clone().into());
                }
                f.insert("parameters".into(), t.parameters.clone());
                json!({"type": "function", "function": f})
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
        // OpenAI refuses both without tools.
        if let Some(parallel) = req.parallel_tool_calls {
            out.insert("parallel_tool_calls".into(), parallel.into());
        }
        if let Some(choice) = &req.tool_choice {
            let v = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            };
            out.insert("tool_choice".into(), v);
        }
    }
    if let Some(user) = &req.user {
        out.insert("user".into(), user.clone().into());
    }
    match &req.reasoning {
        Some(Reasoning::Effort(e)) => {
            out.insert("reasoning_effort".into(), e.clone().into());
        }
        Some(Reasoning::Budget(b)) => {
            out.insert("reasoning_effort".into(), effort_for_budget(*b).into());
        }
        // Off is the default; adaptive leaves the choice to the model, as omitting does.
        Some(Reasoning::Off | Reasoning::Adaptive) | None => {}
    }
    if let Some(format) = &req.output_format {
        out.insert("response_format".into(), response_format(format));
    }
    Value::Object(out)
}

/// Chat's `response_format`; a schema without a name gets `output` (chat requires one).
fn response_format(format: &OutputFormat) -> Value {
    match format {
        OutputFormat::JsonObject => json!({"type": "json_object"}),
        OutputFormat::JsonSchema {
            name,
            description,
            schema,
            strict,
        } => {
            let mut s = Map::new();
            s.insert(
                "name".into(),
                name.clone().unwrap_or_else(|| "output".to_owned()).into(),
            );
            if let Some(d) = description {
                s.insert("description".into(), d.clone().into());
            }
            s.insert("schema".into(), schema.clone());
            if let Some(strict) = strict {
                s.insert("strict".into(), (*strict).into());
            }
            json!({"type": "json_schema", "json_schema": s})
        }
    }
}

/// Text blocks as chat `content`: a string for one, text parts for several.
fn text_content(blocks: &[Block]) -> Value {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match texts.as_slice() {
        [] => json!(""),
        [one] => json!(one),
        many => Value::Array(
            many.iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect(),
        ),
    }
}

fn part(block: &Block) -> Option<Value> {
    Some(match block {
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::Image(Image::Url(url)) => json!({"type": "image_url", "image_url": {"url": url}}),
        Block::Image(Image::Base64 { media_type, data }) => {
            json!({"type": "image_url", "image_url": {"url": data_url(media_type, data)}})
        }
        Block::File {
            media_type,
            data,
            name,
        } => {
            let mut f = Map::new();
            f.insert("file_data".into(), data_url(media_type, data).into());
            if let Some(name) = name {
                f.insert("filename".into(), name.clone().into());
            }
            json!({"type": "file", "file": f})
        }
        _ => return None,
    })
}

fn user_turn(msg: &Message, out: &mut Vec<Value>) {
    let mut rest: Vec<&Block> = Vec::new();
    for block in &msg.content {
        match block {
            Block::ToolResult { id, content, .. } => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": id,
                    "content": text_content(content),
                }));
                rest.extend(content.iter().filter(|b| matches!(b, Block::Image(_))));
            }
            other => rest.push(other),
        }
    }
    if rest.is_empty() && !msg.content.is_empty() {
        // Only tool results: the tool messages say everything.
        return;
    }
    let content = match rest.as_slice() {
        [] => json!(""),
        [Block::Text(t)] => json!(t),
        _ => Value::Array(rest.iter().filter_map(|b| part(b)).collect()),
    };
    out.push(json!({"role": "user", "content": content}));
}

fn assistant(msg: &Message, opts: &TranslateOptions) -> Value {
    let mut out = Map::new();
    out.insert("role".into(), "assistant".into());
    let has_text = msg.content.iter().any(|b| matches!(b, Block::Text(_)));
    let calls: Vec<Value> = msg
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some(json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            })),
            _ => None,
        })
        .collect();
    let content = if has_text || calls.is_empty() {
        text_content(&msg.content)
    } else {
        Value::Null
    };
    out.insert("content".into(), content);
    if opts.chat_reasoning_history {
        let reasoning: Vec<&str> = msg
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Reasoning { text, .. } if !text.is_empty() => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if !reasoning.is_empty() {
            out.insert("reasoning_content".into(), reasoning.join("\n\n").into());
        }
    }
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(out)
}
