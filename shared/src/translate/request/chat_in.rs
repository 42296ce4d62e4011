//! OpenAI Chat Completions request → neutral.
//!
//! `system` and `developer` turns become `System` turns in place; consecutive `tool` turns fold
//! into one `User` turn of tool results (Anthropic's shape); an assistant turn's reasoning,
//! text and tool calls become blocks in that order. Parameters with no counterpart are refused
//! unless they are at their neutral value (`n: 1`, `logprobs: false`, …); advisory ones are
//! dropped (see `docs/translation.md`).

use serde_json::Value;

use super::parts::{chat_tool, chat_tool_choice, effort, openai_content_parts, reasoning_details};
use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Message, Request, Role, ToolCall};
use crate::translate::policy::{Drops, UNKNOWN};
use crate::translate::util::{
    Obj, Result, as_arr, as_obj, as_str, field, idx, join, opt_bool, opt_num, opt_str, opt_u64,
    req_str,
};

/// Parameters accepted and ignored: hints that do not change what a valid answer is.
const DROPPED: &[&str] = &[
    "store",
    "metadata",
    "service_tier",
    "seed",
    "prediction",
    "prompt_cache_key",
    "prompt_cache_retention",
    "verbosity",
];

pub(crate) fn decode(body: &Value, target: Format, drops: &mut Drops) -> Result<Request> {
    let m = as_obj(body, "body")?;
    let mut req = Request {
        model: req_str(m, "model", "")?.to_owned(),
        ..Request::default()
    };
    for (key, value) in m {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "model" => {}
            "messages" => req.messages = messages(value, target)?,
            "max_tokens" => req.max_tokens = req.max_tokens.or(opt_u64(m, key, "")?),
            "max_completion_tokens" => req.max_tokens = opt_u64(m, key, "")?,
            "temperature" => req.temperature = opt_num(m, key, "")?,
            "top_p" => req.top_p = opt_num(m, key, "")?,
            "stop" => req.stop = stop(value)?,
            "stream" => req.stream = opt_bool(m, key, "")?.unwrap_or(false),
            // Read into the response context; the provider side decides its own.
            "stream_options" => {}
            "tools" => {
                for (i, tool) in as_arr(value, key)?.iter().enumerate() {
                    req.tools.push(chat_tool(tool, &idx(key, i), target)?);
                }
            }
            "tool_choice" => req.tool_choice = Some(chat_tool_choice(value, target)?),
            "parallel_tool_calls" => req.parallel_tool_calls = opt_bool(m, key, "")?,
            "user" => req.user = Some(as_str(value, key)?.to_owned()),
            "safety_identifier" => {
                if req.user.is_none() {
                    req.user = Some(as_str(value, key)?.to_owned());
                }
            }
            "reasoning_effort" => req.reasoning = Some(effort(as_str(value, key)?, key, target)?),
            "n" if value.as_u64() == Some(1) => {}
            "logprobs" if value.as_bool() == Some(false) => {}
            "top_logprobs" if value.as_u64() == Some(0) => {}
            "frequency_penalty" | "presence_penalty" if value.as_f64() == Some(0.0) => {}
            "logit_bias" if value.as_object().is_some_and(|o| o.is_empty()) => {}
            "modalities" if value == &serde_json::json!(["text"]) => {}
            "response_format" if value.get("type").and_then(Value::as_str) == Some("text") => {}
            k if DROPPED.contains(&k) => drops.known(k),
            _ => drops.unmapped(key, target, refusal(key))?,
        }
    }
    Ok(req)
}

/// Why a parameter (at a value other than its neutral one) cannot be served.
fn refusal(key: &str) -> &'static str {
    match key {
        "n" => "only one choice (`n: 1`) can be served",
        "logprobs" | "top_logprobs" => "log probabilities have no counterpart",
        "frequency_penalty" | "presence_penalty" => "only a penalty of 0 can be served",
        "logit_bias" => "token biases have no counterpart",
        "modalities" | "audio" => "only text output can be served",
        "response_format" => "structured output has no counterpart; only `text` can be served",
        "functions" | "function_call" => "legacy function calling: send `tools` instead",
        "web_search_options" => "hosted web search has no counterpart",
        _ => UNKNOWN,
    }
}

fn stop(value: &Value) -> Result<Vec<String>> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, s)| as_str(s, &idx("stop", i)).map(str::to_owned))
            .collect(),
        _ => Err(TranslateError::invalid(
            "stop",
            "expected a string or an array",
        )),
    }
}

fn messages(value: &Value, target: Format) -> Result<Vec<Message>> {
    let mut out: Vec<Message> = Vec::new();
    let mut in_tool_run = false;
    for (i, raw) in as_arr(value, "messages")?.iter().enumerate() {
        let path = idx("messages", i);
        let m = as_obj(raw, &path)?;
        let role = req_str(m, "role", &path)?;
        let tool_turn = role == "tool";
        let message = match role {
            "system" | "developer" => Message {
                role: Role::System,
                content: content(m, &path, target)?,
            },
            "user" => Message {
                role: Role::User,
                content: content(m, &path, target)?,
            },
            "assistant" => assistant(m, &path, target)?,
            "tool" => {
                let result = Block::ToolResult {
                    id: req_str(m, "tool_call_id", &path)?.to_owned(),
                    content: content(m, &path, target)?,
                    is_error: false,
                };
                match out.last_mut() {
                    Some(prev) if in_tool_run => {
                        prev.content.push(result);
                        continue;
                    }
                    _ => Message {
                        role: Role::User,
                        content: vec![result],
                    },
                }
            }
            other => {
                return Err(TranslateError::unsupported(
                    join(&path, "role"),
                    target,
                    &format!("role `{other}` has no counterpart"),
                ));
            }
        };
        in_tool_run = tool_turn;
        out.push(message);
    }
    Ok(out)
}

fn content(m: &Obj, path: &str, target: Format) -> Result<Vec<Block>> {
    match field(m, "content") {
        None => Ok(Vec::new()),
        Some(v) => openai_content_parts(v, &join(path, "content"), target),
    }
}

fn assistant(m: &Obj, path: &str, target: Format) -> Result<Message> {
    for key in ["audio", "function_call"] {
        if field(m, key).is_some() {
            return Err(TranslateError::unsupported(
                join(path, key),
                target,
                "no counterpart",
            ));
        }
    }
    let mut blocks = match field(m, "reasoning_details") {
        Some(details) => reasoning_details(details, &join(path, "reasoning_details"))?,
        None => Vec::new(),
    };
    if blocks.is_empty() {
        let text = match opt_str(m, "reasoning_content", path)? {
            Some(t) => Some(t),
            None => opt_str(m, "reasoning", path)?,
        };
        if let Some(text) = text.filter(|t| !t.is_empty()) {
            blocks.push(Block::Reasoning {
                text: text.to_owned(),
                signature: None,
            });
        }
    }
    blocks.extend(content(m, path, target)?);
    if let Some(refusal) = opt_str(m, "refusal", path)? {
        blocks.push(Block::Text(refusal.to_owned()));
    }
    if let Some(calls) = field(m, "tool_calls") {
        let calls_path = join(path, "tool_calls");
        for (j, call) in as_arr(calls, &calls_path)?.iter().enumerate() {
            let call_path = idx(&calls_path, j);
            let c = as_obj(call, &call_path)?;
            if let Some(kind) = opt_str(c, "type", &call_path)?.filter(|k| *k != "function") {
                return Err(TranslateError::unsupported(
                    join(&call_path, "type"),
                    target,
                    &format!("`{kind}` tool calls have no counterpart"),
                ));
            }
            let fn_path = join(&call_path, "function");
            let f = as_obj(c.get("function").unwrap_or(&Value::Null), &fn_path)?;
            blocks.push(Block::ToolCall(ToolCall {
                id: req_str(c, "id", &call_path)?.to_owned(),
                name: req_str(f, "name", &fn_path)?.to_owned(),
                arguments: opt_str(f, "arguments", &fn_path)?
                    .unwrap_or_default()
                    .to_owned(),
            }));
        }
    }
    Ok(Message {
        role: Role::Assistant,
        content: blocks,
    })
}
