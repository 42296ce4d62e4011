//! Anthropic Messages request → neutral.
//!
//! The top-level `system` (a string or text blocks) becomes leading `System` turns, one per
//! block. `cache_control` and `citations` markers are dropped: OpenAI caches prompts by itself
//! and has no citations. Server tools (typed `tools[].type`), `top_k`, MCP servers and
//! containers have no OpenAI counterpart and are refused.

use serde_json::Value;

use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::ToolCall;
use crate::translate::ir::{Block, Image, Message, Reasoning, Request, Role, Tool, ToolChoice};
use crate::translate::policy::{Drops, UNKNOWN};
use crate::translate::util::{
    Obj, Result, as_arr, as_obj, as_str, field, idx, join, opt_bool, opt_num, opt_str, opt_u64,
    req_str,
};

pub(crate) fn decode(body: &Value, target: Format, drops: &mut Drops) -> Result<Request> {
    let m = as_obj(body, "body")?;
    let mut req = Request {
        model: req_str(m, "model", "")?.to_owned(),
        ..Request::default()
    };
    let mut system = Vec::new();
    let mut disable_parallel = None;
    let mut context_management = None;
    for (key, value) in m {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "model" => {}
            "system" => system = system_turns(value)?,
            "messages" => {
                for (i, msg) in as_arr(value, key)?.iter().enumerate() {
                    req.messages.push(message(msg, &idx(key, i), target)?);
                }
            }
            "max_tokens" => req.max_tokens = opt_u64(m, key, "")?,
            "temperature" => req.temperature = opt_num(m, key, "")?,
            "top_p" => req.top_p = opt_num(m, key, "")?,
            "stop_sequences" => {
                for (i, s) in as_arr(value, key)?.iter().enumerate() {
                    req.stop.push(as_str(s, &idx(key, i))?.to_owned());
                }
            }
            "stream" => req.stream = opt_bool(m, key, "")?.unwrap_or(false),
            "metadata" => {
                let meta = as_obj(value, key)?;
                req.user = opt_str(meta, "user_id", key)?.map(str::to_owned);
            }
            "tools" => {
                for (i, tool) in as_arr(value, key)?.iter().enumerate() {
                    if let Some(tool) = self::tool(tool, &idx(key, i), target, drops)? {
                        req.tools.push(tool);
                    }
                }
            }
            "tool_choice" => {
                let (choice, disable) = tool_choice(value, target)?;
                req.tool_choice = choice;
                disable_parallel = disable;
            }
            "thinking" => req.reasoning = Some(thinking(value, target)?),
            // A scheduling hint for Anthropic's own capacity.
            "service_tier" => drops.known(key.as_str()),
            // Server-side context editing: done here, once the messages are known.
            "context_management" => context_management = Some(value),
            _ => {
                let reason = match key.as_str() {
                    "top_k" => "top-k sampling has no counterpart",
                    "container" | "mcp_servers" => "server-side tools have no counterpart",
                    _ => UNKNOWN,
                };
                drops.unmapped(key, target, reason)?;
            }
        }
    }
    req.parallel_tool_calls = disable_parallel.map(|d: bool| !d);
    if let Some(cm) = context_management {
        for name in super::context_edits::apply(cm, &mut req)? {
            drops.known(&name);
        }
        req.emulated.push("context_management".to_owned());
    }
    system.append(&mut req.messages);
    req.messages = system;
    Ok(req)
}

fn system_turns(v: &Value) -> Result<Vec<Message>> {
    let turn = |text: String| Message {
        role: Role::System,
        content: vec![Block::Text(text)],
    };
    if let Some(s) = v.as_str() {
        return Ok(vec![turn(s.to_owned())]);
    }
    let mut out = Vec::new();
    for (i, b) in as_arr(v, "system")?.iter().enumerate() {
        let path = idx("system", i);
        out.push(turn(req_str(as_obj(b, &path)?, "text", &path)?.to_owned()));
    }
    Ok(out)
}

fn message(v: &Value, path: &str, target: Format) -> Result<Message> {
    let m = as_obj(v, path)?;
    let role = match req_str(m, "role", path)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(TranslateError::invalid(
                join(path, "role"),
                &format!("`{other}` is not a message role"),
            ));
        }
    };
    Ok(Message {
        role,
        content: blocks(
            m.get("content").unwrap_or(&Value::Null),
            &join(path, "content"),
            target,
        )?,
    })
}

fn blocks(v: &Value, path: &str, target: Format) -> Result<Vec<Block>> {
    if let Some(s) = v.as_str() {
        return Ok(vec![Block::Text(s.to_owned())]);
    }
    let mut out = Vec::new();
    for (i, b) in as_arr(v, path)?.iter().enumerate() {
        out.push(block(b, &idx(path, i), target)?);
    }
    Ok(out)
}

fn block(v: &Value, path: &str, target: Format) -> Result<Block> {
    let b = as_obj(v, path)?;
    Ok(match req_str(b, "type", path)? {
        "text" => Block::Text(req_str(b, "text", path)?.to_owned()),
        "image" => Block::Image(image_source(b, path, target)?),
        "document" => document(b, path, target)?,
        "tool_use" => Block::ToolCall(ToolCall {
            id: req_str(b, "id", path)?.to_owned(),
            name: req_str(b, "name", path)?.to_owned(),
            arguments: serde_json::to_string(field(b, "input").unwrap_or(&serde_json::json!({})))
                .unwrap_or_default(),
        }),
        "tool_result" => Block::ToolResult {
            id: req_str(b, "tool_use_id", path)?.to_owned(),
            content: match field(b, "content") {
                Some(c) => blocks(c, &join(path, "content"), target)?,
                None => Vec::new(),
            },
            is_error: opt_bool(b, "is_error", path)?.unwrap_or(false),
        },
        "thinking" => Block::Reasoning {
            text: opt_str(b, "thinking", path)?.unwrap_or_default().to_owned(),
            signature: opt_str(b, "signature", path)?
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        },
        "redacted_thinking" => Block::Redacted(req_str(b, "data", path)?.to_owned()),
        other => {
            return Err(TranslateError::unsupported(
                join(path, "type"),
                target,
                &format!("`{other}` blocks have no counterpart"),
            ));
        }
    })
}

fn source<'a>(b: &'a Obj, path: &str) -> Result<(&'a Obj, String)> {
    let spath = join(path, "source");
    let s = as_obj(b.get("source").unwrap_or(&Value::Null), &spath)?;
    Ok((s, spath))
}

fn image_source(b: &Obj, path: &str, target: Format) -> Result<Image> {
    let (s, spath) = source(b, path)?;
    match req_str(s, "type", &spath)? {
        "base64" => Ok(Image::Base64 {
            media_type: req_str(s, "media_type", &spath)?.to_owned(),
            data: req_str(s, "data", &spath)?.to_owned(),
        }),
        "url" => Ok(Image::Url(req_str(s, "url", &spath)?.to_owned())),
        other => Err(unsupported_source(&spath, other, target)),
    }
}

/// Base64 documents (PDFs) become OpenAI file parts; plain-text documents become text.
fn document(b: &Obj, path: &str, target: Format) -> Result<Block> {
    let (s, spath) = source(b, path)?;
    match req_str(s, "type", &spath)? {
        "base64" => Ok(Block::File {
            media_type: req_str(s, "media_type", &spath)?.to_owned(),
            data: req_str(s, "data", &spath)?.to_owned(),
            name: opt_str(b, "title", path)?.map(str::to_owned),
        }),
        "text" => Ok(Block::Text(req_str(s, "data", &spath)?.to_owned())),
        other => Err(unsupported_source(&spath, other, target)),
    }
}

fn unsupported_source(spath: &str, kind: &str, target: Format) -> TranslateError {
    TranslateError::unsupported(
        join(spath, "type"),
        target,
        &format!("`{kind}` sources have no counterpart"),
    )
}

/// Custom tools only; `cache_control` is dropped.
/// A custom tool; a server tool (any other `type`) is dropped or refused by the policy.
fn tool(v: &Value, path: &str, target: Format, drops: &mut Drops) -> Result<Option<Tool>> {
    let t = as_obj(v, path)?;
    if let Some(kind) = opt_str(t, "type", path)?.filter(|k| *k != "custom") {
        drops.tool(path, kind, target)?;
        return Ok(None);
    }
    Ok(Some(Tool {
        name: req_str(t, "name", path)?.to_owned(),
        description: opt_str(t, "description", path)?.map(str::to_owned),
        parameters: field(t, "input_schema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    }))
}

/// `{"type": auto|any|tool|none, "name", "disable_parallel_tool_use"}`.
fn tool_choice(v: &Value, target: Format) -> Result<(Option<ToolChoice>, Option<bool>)> {
    let o = as_obj(v, "tool_choice")?;
    let choice = match req_str(o, "type", "tool_choice")? {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Tool(req_str(o, "name", "tool_choice")?.to_owned()),
        other => {
            return Err(TranslateError::unsupported(
                "tool_choice.type",
                target,
                &format!("`{other}` has no counterpart"),
            ));
        }
    };
    let disable = opt_bool(o, "disable_parallel_tool_use", "tool_choice")?;
    Ok((Some(choice), disable))
}

fn thinking(v: &Value, target: Format) -> Result<Reasoning> {
    let o = as_obj(v, "thinking")?;
    match req_str(o, "type", "thinking")? {
        "enabled" => Ok(Reasoning::Budget(
            opt_u64(o, "budget_tokens", "thinking")?.unwrap_or(0),
        )),
        "disabled" => Ok(Reasoning::Off),
        "adaptive" => Ok(Reasoning::Adaptive),
        other => Err(TranslateError::unsupported(
            "thinking.type",
            target,
            &format!("`{other}` has no counterpart"),
        )),
    }
}
