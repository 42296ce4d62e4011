//! OpenAI Responses request → neutral.
//!
//! `instructions` becomes a leading `System` turn. The `input` item list is folded into turns:
//! reasoning items, assistant messages and `function_call` items that follow each other form one
//! assistant turn; `function_call_output` items that follow each other form one turn of tool
//! results. Anything that needs state kept at OpenAI (`previous_response_id`, `conversation`,
//! item references, stored prompts, uploaded files) is refused, as are hosted tools.

use serde_json::Value;

use super::parts::{effort, openai_content_parts, responses_tool, responses_tool_choice};
use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Message, Request, Role, ToolCall};
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
            "input" => req.messages = input(value, target)?,
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
            "tool_choice" => req.tool_choice = Some(responses_tool_choice(value, target)?),
            "parallel_tool_calls" => req.parallel_tool_calls = opt_bool(m, key, "")?,
            "user" => req.user = Some(as_str(value, key)?.to_owned()),
            "reasoning" => {
                let r = as_obj(value, key)?;
                if let Some(e) = opt_str(r, "effort", key)? {
                    req.reasoning = Some(effort(e, "reasoning.effort", target)?);
                }
            }
            "text" => text_config(as_obj(value, key)?, target)?,
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

/// `text.format` must be plain text; `verbosity` is a style hint and is dropped.
fn text_config(t: &Obj, target: Format) -> Result<()> {
    match field(t, "format").map(|f| f.get("type").and_then(Value::as_str)) {
        None | Some(Some("text")) => Ok(()),
        Some(_) => Err(TranslateError::unsupported(
            "text.format",
            target,
            "structured output has no counterpart",
        )),
    }
}

fn input(v: &Value, target: Format) -> Result<Vec<Message>> {
    if let Some(s) = v.as_str() {
        return Ok(vec![Message {
            role: Role::User,
            content: vec![Block::Text(s.to_owned())],
        }]);
    }
    let mut turns: Vec<Message> = Vec::new();
    // Whether the last turn is a run of tool results that later results may join.
    let mut results_open = false;
    for (i, item) in as_arr(v, "input")?.iter().enumerate() {
        let path = idx("input", i);
        let o = as_obj(item, &path)?;
        let (role, blocks, results) = match opt_str(o, "type", &path)?.unwrap_or("message") {
            "message" => message(o, &path, target)?,
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
            "function_call_output" => {
                let opath = join(&path, "output");
                let content = match field(o, "output") {
                    Some(out) => openai_content_parts(out, &opath, target)?,
                    None => Vec::new(),
                };
                let id = req_str(o, "call_id", &path)?.to_owned();
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
            other => {
                return Err(TranslateError::unsupported(
                    join(&path, "type"),
                    target,
                    &format!("`{other}` items have no counterpart"),
                ));
            }
        };
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
fn message(o: &Obj, path: &str, target: Format) -> Result<(Role, Vec<Block>, bool)> {
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
        Some(c) => openai_content_parts(c, &join(path, "content"), target)?,
        None => Vec::new(),
    };
    Ok((role, content, false))
}
