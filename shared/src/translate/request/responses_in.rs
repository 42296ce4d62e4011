//! OpenAI Responses request → neutral.
//!
//! `instructions` becomes a leading `System` turn. The `input` item list is folded into turns:
//! reasoning items, assistant messages and `function_call` items that follow each other form one
//! assistant turn; `function_call_output` items that follow each other form one turn of tool
//! results; `custom_tool_call` items pair with their outputs the same way (the free-form input
//! as `{"input": text}`). Anything that needs state kept at OpenAI (`previous_response_id`,
//! `conversation`, item references, stored prompts, uploaded files), hosted tools and their
//! call items have no counterpart: they are dropped and named under the parameter policy.

use serde_json::Value;

use super::parts::{effort, openai_content_parts, responses_tool, responses_tool_choice};
use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Message, OutputFormat, Request, Role, ToolCall};
use crate::translate::policy::{Drops, UNKNOWN};
use crate::translate::reasoning_codec;
use crate::translate::util::{
    Obj, Result, as_arr, as_obj, as_str, field, idx, join, opt_bool, opt_num, opt_str, opt_u64,
    req_str,
};

/// Accepted and ignored: storage, caching and scheduling hints, output-length style, and the
/// `include` list (encrypted reasoning is always returned when the provider gives any).
const DROPPED: &[&str] = &[
    "store",
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "include",
    "truncation",
    "background",
    "stream_options",
    "client_metadata",
];

pub(crate) fn decode(body: &Value, target: Format, drops: &mut Drops) -> Result<Request> {
    let m = as_obj(body, "body")?;
    let mut req = Request {
        model: req_str(m, "model", "")?.to_owned(),
        ..Request::default()
    };
    let mut instructions = None;
    for (key, value) in m {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "model" => {}
            "input" => req.messages = input(value, target, drops)?,
            "instructions" => instructions = Some(as_str(value, key)?.to_owned()),
            "max_output_tokens" => req.max_tokens = opt_u64(m, key, "")?,
            "temperature" => req.temperature = opt_num(m, key, "")?,
            "top_p" => req.top_p = opt_num(m, key, "")?,
            "stream" => req.stream = opt_bool(m, key, "")?.unwrap_or(false),
            "tools" => {
                for (i, tool) in as_arr(value, key)?.iter().enumerate() {
                    if let Some(tool) = responses_tool(tool, &idx(key, i), target, drops)? {
                        req.tools.push(tool);
                    }
                }
            }
            "tool_choice" => req.tool_choice = responses_tool_choice(value, target, drops)?,
            "parallel_tool_calls" => req.parallel_tool_calls = opt_bool(m, key, "")?,
            "user" => req.user = Some(as_str(value, key)?.to_owned()),
            "reasoning" => {
                let r = as_obj(value, key)?;
                if let Some(e) = opt_str(r, "effort", key)? {
                    req.reasoning = effort(e, "reasoning.effort", target, drops)?;
                }
            }
            "text" => req.output_format = text_config(as_obj(value, key)?, target, drops)?,
            "top_logprobs" if value.as_u64() == Some(0) => {}
            // Read as the end user when `user` is absent, below.
            "safety_identifier" => {}
            k if DROPPED.contains(&k) => drops.known(k),
            _ => {
                let reason = match key.as_str() {
                    "previous_response_id" | "conversation" | "prompt" => {
                        "needs state stored at OpenAI"
                    }
                    "max_tool_calls" => "a cap on tool calls has no counterpart",
                    "top_logprobs" => "log probabilities have no counterpart",
                    _ => UNKNOWN,
                };
                drops.unmapped(key, target, reason)?;
            }
        }
    }
    if req.user.is_none() {
        req.user = opt_str(m, "safety_identifier", "")?.map(str::to_owned);
    }
    if let Some(text) = instructions {
        req.messages.insert(
            0,
            Message {
                role: Role::System,
                content: vec![Block::Text(text)],
            },
        );
    }
    Ok(req)
}

/// `text.format`: `text` (the default), `json_schema` (structured output, carried) or
/// `json_object` (carried to chat, dropped and named for Anthropic); `verbosity` is a style
/// hint and is dropped.
fn text_config(t: &Obj, target: Format, drops: &mut Drops) -> Result<Option<OutputFormat>> {
    let Some(f) = field(t, "format") else {
        return Ok(None);
    };
    let p = "text.format";
    let f = as_obj(f, p)?;
    match req_str(f, "type", p)? {
        "text" => Ok(None),
        "json_schema" => Ok(Some(OutputFormat::JsonSchema {
            name: opt_str(f, "name", p)?.map(str::to_owned),
            description: opt_str(f, "description", p)?.map(str::to_owned),
            schema: field(f, "schema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            strict: opt_bool(f, "strict", p)?,
        })),
        "json_object" if target != Format::Anthropic => Ok(Some(OutputFormat::JsonObject)),
        other => {
            drops.variant(
                "text.format.type",
                "text.format",
                target,
                &format!("`{other}` output has no counterpart"),
            )?;
            Ok(None)
        }
    }
}

fn input(v: &Value, target: Format, drops: &mut Drops) -> Result<Vec<Message>> {
    if let Some(s) = v.as_str() {
        return Ok(vec![Message {
            role: Role::User,
            content: vec![Block::Text(s.to_owned())],
        }]);
    }
    let mut turns: Vec<Message> = Vec::new();
    // Whether the last turn is a run of tool results that later results may join.
    let mut results_open = false;
    // Calls not yet answered, oldest first: an output without a `call_id` (the API allows
    // one) answers the oldest.
    let mut pending: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    for (i, item) in as_arr(v, "input")?.iter().enumerate() {
        let path = idx("input", i);
        let o = as_obj(item, &path)?;
        // `type` may be left out of a message (it has a `role`) and of an item reference.
        let kind = match opt_str(o, "type", &path)? {
            Some(kind) => kind,
            None if o.contains_key("role") => "message",
            None => "item_reference",
        };
        let (role, blocks, results) = match kind {
            "message" => message(o, &path, target, drops)?,
            "function_call" => (
                Role::Assistant,
                vec![Block::ToolCall(ToolCall {
                    id: req_str(o, "call_id", &path)?.to_owned(),
                    name: req_str(o, "name", &path)?.to_owned(),
                    arguments: opt_str(o, "arguments", &path)?
                        .unwrap_or_default()
                        .to_owned(),
                })],
                false,
            ),
            "custom_tool_call" => (
                Role::Assistant,
                vec![Block::ToolCall(ToolCall {
                    id: req_str(o, "call_id", &path)?.to_owned(),
                    name: req_str(o, "name", &path)?.to_owned(),
                    arguments: serde_json::json!({
                        "input": opt_str(o, "input", &path)?.unwrap_or_default()
                    })
                    .to_string(),
                })],
                false,
            ),
            "function_call_output" | "custom_tool_call_output" => {
                let opath = join(&path, "output");
                let content = match field(o, "output") {
                    Some(out) => openai_content_parts(out, &opath, target, drops)?,
                    None => Vec::new(),
                };
                let id = match opt_str(o, "call_id", &path)? {
                    Some(id) => {
                        pending.retain(|p| p != id);
                        id.to_owned()
                    }
                    None => match pending.pop_front() {
                        Some(id) => id,
                        None => {
                            // Nothing to answer: a result without its call cannot be sent.
                            drops.variant(
                                &join(&path, "call_id"),
                                "input[function_call_output]",
                                target,
                                "an output without a call has no counterpart",
                            )?;
                            continue;
                        }
                    },
                };
                let result = Block::ToolResult {
                    id,
                    content,
                    is_error: false,
                };
                (Role::User, vec![result], true)
            }
            "reasoning" => (
                Role::Assistant,
                reasoning_codec::from_item(o, &path)?,
                false,
            ),
            // Hosted tools' calls and outputs, MCP items, item references, compaction
            // items: they need the state or the tools kept at OpenAI.
            other => {
                drops.variant(
                    &join(&path, "type"),
                    &format!("input[{other}]"),
                    target,
                    &format!("`{other}` items have no counterpart"),
                )?;
                continue;
            }
        };
        for b in &blocks {
            if let Block::ToolCall(c) = b {
                pending.push_back(c.id.clone());
            }
        }
        match turns.last_mut() {
            Some(last)
                if last.role == role && (role == Role::Assistant || (results && results_open)) =>
            {
                last.content.extend(blocks);
            }
            _ => turns.push(Message {
                role,
                content: blocks,
            }),
        }
        results_open = results;
    }
    Ok(turns)
}

/// A message item: `role` user/assistant/system/developer, `content` a string or parts.
fn message(
    o: &Obj,
    path: &str,
    target: Format,
    drops: &mut Drops,
) -> Result<(Role, Vec<Block>, bool)> {
    let role = match req_str(o, "role", path)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "developer" => Role::System,
        other => {
            return Err(TranslateError::invalid(
                join(path, "role"),
                &format!("`{other}` is not a message role"),
            ));
        }
    };
    let content = match field(o, "content") {
        Some(c) => openai_content_parts(c, &join(path, "content"), target, drops)?,
        None => Vec::new(),
    };
    Ok((role, content, false))
}
