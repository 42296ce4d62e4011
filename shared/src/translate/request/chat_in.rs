//! OpenAI Chat Completions request → neutral.
//!
//! `system` and `developer` turns become `System` turns in place; consecutive `tool` turns fold
//! into one `User` turn of tool results (Anthropic's shape); an assistant turn's reasoning,
//! text and tool calls become blocks in that order. Legacy `functions` / `function_call` are
//! read as the tools and tool choice they stand for. Parameters, roles, parts and tools with no
//! counterpart are dropped and named (see `docs/translation.md`), unless at their neutral value
//! (`n: 1`, `logprobs: false`, …).

use serde_json::Value;

use super::parts::{
    chat_tool, chat_tool_choice, effort, legacy_function, openai_content_parts, reasoning_details,
};
use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Message, OutputFormat, Request, Role, ToolCall, ToolChoice};
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
            "messages" => req.messages = messages(value, target, drops)?,
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
                    req.tools
                        .extend(chat_tool(tool, &idx(key, i), target, drops)?);
                }
            }
            "functions" => {
                for (i, f) in as_arr(value, key)?.iter().enumerate() {
                    req.tools.push(legacy_function(f, &idx(key, i))?);
                }
            }
            "tool_choice" => req.tool_choice = chat_tool_choice(value, target, drops)?,
            // Read below, when `tool_choice` is absent.
            "function_call" => {}
            "parallel_tool_calls" => req.parallel_tool_calls = opt_bool(m, key, "")?,
            "user" => req.user = Some(as_str(value, key)?.to_owned()),
            "safety_identifier" => {
                if req.user.is_none() {
                    req.user = Some(as_str(value, key)?.to_owned());
                }
            }
            "reasoning_effort" => req.reasoning = effort(as_str(value, key)?, key, target, drops)?,
            "response_format" => req.output_format = response_format(value, target, drops)?,
            "n" if value.as_u64() == Some(1) => {}
            "logprobs" if value.as_bool() == Some(false) => {}
            "top_logprobs" if value.as_u64() == Some(0) => {}
            "frequency_penalty" | "presence_penalty" if value.as_f64() == Some(0.0) => {}
            "logit_bias" if value.as_object().is_some_and(|o| o.is_empty()) => {}
            "modalities" if value == &serde_json::json!(["text"]) => {}
            k if DROPPED.contains(&k) => drops.known(k),
            _ => drops.unmapped(key, target, refusal(key))?,
        }
    }
    if req.tool_choice.is_none()
        && let Some(fc) = field(m, "function_call")
    {
        req.tool_choice = legacy_function_call(fc, target, drops)?;
    }
    Ok(req)
}

/// Legacy `function_call`: `"auto"`, `"none"` or `{"name"}`.
fn legacy_function_call(
    v: &Value,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<ToolChoice>> {
    match v {
        Value::String(mode) if mode == "auto" => Ok(Some(ToolChoice::Auto)),
        Value::String(mode) if mode == "none" => Ok(Some(ToolChoice::None)),
        Value::Object(o) => Ok(Some(ToolChoice::Tool(
            req_str(o, "name", "function_call")?.to_owned(),
        ))),
        _ => {
            drops.unmapped("function_call", target, "not a function choice")?;
            Ok(None)
        }
    }
}

/// `response_format`: `text` (the default), `json_schema` (structured output, carried) or
/// `json_object` (JSON mode: carried to chat, dropped and named for Anthropic, which has only
/// schemas).
fn response_format(v: &Value, target: Format, drops: &mut Drops) -> Result<Option<OutputFormat>> {
    let o = as_obj(v, "response_format")?;
    match req_str(o, "type", "response_format")? {
        "text" => Ok(None),
        "json_schema" => {
            let p = "response_format.json_schema";
            let s = as_obj(o.get("json_schema").unwrap_or(&Value::Null), p)?;
            Ok(Some(OutputFormat::JsonSchema {
                name: opt_str(s, "name", p)?.map(str::to_owned),
                description: opt_str(s, "description", p)?.map(str::to_owned),
                schema: field(s, "schema")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                strict: opt_bool(s, "strict", p)?,
            }))
        }
        "json_object" if target != Format::Anthropic => Ok(Some(OutputFormat::JsonObject)),
        other => {
            drops.variant(
                "response_format.type",
                "response_format",
                target,
                &format!("`{other}` output has no counterpart"),
            )?;
            Ok(None)
        }
    }
}

/// Why a parameter (at a value other than its neutral one) cannot be served.
fn refusal(key: &str) -> &'static str {
    match key {
        "n" => "only one choice (`n: 1`) can be served",
        "logprobs" | "top_logprobs" => "log probabilities have no counterpart",
        "frequency_penalty" | "presence_penalty" => "only a penalty of 0 can be served",
        "logit_bias" => "token biases have no counterpart",
        "modalities" | "audio" => "only text output can be served",
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

fn messages(value: &Value, target: Format, drops: &mut Drops) -> Result<Vec<Message>> {
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
                content: content(m, &path, target, drops)?,
            },
            "user" => Message {
                role: Role::User,
                content: content(m, &path, target, drops)?,
            },
            "assistant" => assistant(m, &path, target, drops)?,
            "tool" => {
                let result = Block::ToolResult {
                    id: req_str(m, "tool_call_id", &path)?.to_owned(),
                    content: content(m, &path, target, drops)?,
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
            // Legacy `function` results carry no call id to pair them with.
            other => {
                drops.variant(
                    &join(&path, "role"),
                    &format!("messages[{other}]"),
                    target,
                    &format!("role `{other}` has no counterpart"),
                )?;
                continue;
            }
        };
        in_tool_run = tool_turn;
        out.push(message);
    }
    Ok(out)
}

fn content(m: &Obj, path: &str, target: Format, drops: &mut Drops) -> Result<Vec<Block>> {
    match field(m, "content") {
        None => Ok(Vec::new()),
        Some(v) => openai_content_parts(v, &join(path, "content"), target, drops),
    }
}

fn assistant(m: &Obj, path: &str, target: Format, drops: &mut Drops) -> Result<Message> {
    // A reference to audio kept at OpenAI, and a legacy function call without a call id.
    for key in ["audio", "function_call"] {
        if field(m, key).is_some() {
            drops.variant(
                &join(path, key),
                &format!("messages[assistant].{key}"),
                target,
                "no counterpart",
            )?;
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
    blocks.extend(content(m, path, target, drops)?);
    if let Some(refusal) = opt_str(m, "refusal", path)? {
        blocks.push(Block::Text(refusal.to_owned()));
    }
    if let Some(calls) = field(m, "tool_calls") {
        let calls_path = join(path, "tool_calls");
        for (j, call) in as_arr(calls, &calls_path)?.iter().enumerate() {
            let call_path = idx(&calls_path, j);
            let c = as_obj(call, &call_path)?;
            // A call of a free-form custom tool: its text input travels as `{"input": text}`,
            // so the call and its result still pair up.
            if opt_str(c, "type", &call_path)? == Some("custom") {
                let cpath = join(&call_path, "custom");
                let t = as_obj(c.get("custom").unwrap_or(&Value::Null), &cpath)?;
                let input = opt_str(t, "input", &cpath)?.unwrap_or_default();
                blocks.push(Block::ToolCall(ToolCall {
                    id: req_str(c, "id", &call_path)?.to_owned(),
                    name: req_str(t, "name", &cpath)?.to_owned(),
                    arguments: serde_json::json!({ "input": input }).to_string(),
                }));
                continue;
            }
            if let Some(kind) = opt_str(c, "type", &call_path)?.filter(|k| *k != "function") {
                drops.variant(
                    &join(&call_path, "type"),
                    &format!("tool_calls[{kind}]"),
                    target,
                    &format!("`{kind}` tool calls have no counterpart"),
                )?;
                continue;
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
