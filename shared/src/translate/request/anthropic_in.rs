//! Anthropic Messages request → neutral.
//!
//! The top-level `system` (a string or text blocks) becomes leading `System` turns, one per
//! block; a `system`-role message inside `messages` (the SDK's `SystemMessageParam`, which
//! Claude Code sends for its environment block) becomes a `System` turn in place, so a chat
//! provider gets a `system` message where the client put it. `cache_control` and `citations`
//! markers are dropped: OpenAI caches prompts by itself and has no citations.
//!
//! Reasoning: `thinking` (`enabled` budgets, `disabled`, `adaptive`) and `output_config.effort`
//! combine into one neutral setting (see [`reasoning`]); `output_config.format` is structured
//! output. Whatever has no OpenAI counterpart (server tools and their result blocks, `top_k`,
//! MCP servers, containers, file references, unknown fields) is dropped and named under the
//! parameter policy.

use serde_json::Value;

use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::ToolCall;
use crate::translate::ir::{
    Block, Image, Message, OutputFormat, Reasoning, Request, Role, Tool, ToolChoice,
};
use crate::translate::policy::{Drops, UNKNOWN};
use crate::translate::util::{
    Obj, Result, as_arr, as_obj, as_str, field, idx, join, opt_bool, opt_num, opt_str, opt_u64,
    req_str,
};

/// Decoding state for one request: where it goes and what was dropped on the way.
struct Dec<'a> {
    target: Format,
    drops: &'a mut Drops,
}

pub(crate) fn decode(body: &Value, target: Format, drops: &mut Drops) -> Result<Request> {
    let m = as_obj(body, "body")?;
    let mut req = Request {
        model: req_str(m, "model", "")?.to_owned(),
        ..Request::default()
    };
    let mut d = Dec { target, drops };
    let mut system = Vec::new();
    let mut disable_parallel = None;
    let mut context_management = None;
    let mut thinking = None;
    let mut effort = None;
    for (key, value) in m {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "model" => {}
            "system" => system = system_turns(value)?,
            "messages" => {
                for (i, msg) in as_arr(value, key)?.iter().enumerate() {
                    if let Some(msg) = d.message(msg, &idx(key, i))? {
                        req.messages.push(msg);
                    }
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
                    if let Some(tool) = self::tool(tool, &idx(key, i), target, d.drops)? {
                        req.tools.push(tool);
                    }
                }
            }
            "tool_choice" => {
                let (choice, disable) = d.tool_choice(value)?;
                req.tool_choice = choice;
                disable_parallel = disable;
            }
            "thinking" => thinking = d.thinking(value)?,
            "output_config" => {
                let o = as_obj(value, key)?;
                effort = opt_str(o, "effort", key)?.map(str::to_owned);
                if let Some(f) = field(o, "format") {
                    req.output_format = Some(output_format(f, "output_config.format")?);
                }
                for k in o
                    .keys()
                    .filter(|k| !matches!(k.as_str(), "effort" | "format"))
                {
                    if field(o, k).is_some() {
                        d.drops.known(join(key, k));
                    }
                }
            }
            // A scheduling hint for Anthropic's own capacity.
            "service_tier" => d.drops.known(key.as_str()),
            // Server-side context editing: done here, once the messages are known.
            "context_management" => context_management = Some(value),
            _ => {
                let reason = match key.as_str() {
                    "top_k" => "top-k sampling has no counterpart",
                    "container" | "mcp_servers" => "server-side tools have no counterpart",
                    _ => UNKNOWN,
                };
                d.drops.unmapped(key, target, reason)?;
            }
        }
    }
    req.reasoning = reasoning(thinking, effort, d.drops);
    req.parallel_tool_calls = disable_parallel.map(|d: bool| !d);
    if let Some(cm) = context_management {
        for name in super::context_edits::apply(cm, &mut req)? {
            d.drops.known(&name);
        }
        req.emulated.push("context_management".to_owned());
    }
    system.append(&mut req.messages);
    req.messages = system;
    Ok(req)
}

/// Anthropic's `output_config.effort` levels as OpenAI efforts: the same words, except that
/// `max` (no OpenAI word) is OpenAI's highest, `xhigh`.
fn openai_effort(effort: &str) -> &str {
    match effort {
        "max" => "xhigh",
        other => other,
    }
}

/// `thinking` and `output_config.effort` as one neutral setting:
///
/// - `enabled` with a budget is the budget (an effort beside it is dropped and named: the budget
///   is the finer of the two); `disabled` is off (likewise).
/// - `adaptive` or no `thinking`, with an effort: that effort (`max` → `xhigh`). Claude's effort
///   is how hard it thinks when it decides to; OpenAI's `reasoning_effort` is the nearest.
/// - `adaptive` without an effort: the model decides, which is what omitting
///   `reasoning_effort` asks of an OpenAI model (carried as [`Reasoning::Adaptive`]).
fn reasoning(
    thinking: Option<Reasoning>,
    effort: Option<String>,
    drops: &mut Drops,
) -> Option<Reasoning> {
    match (thinking, effort) {
        (Some(r @ (Reasoning::Budget(_) | Reasoning::Off)), Some(_)) => {
            drops.known("output_config.effort");
            Some(r)
        }
        (None | Some(Reasoning::Adaptive), Some(e)) => {
            Some(Reasoning::Effort(openai_effort(&e).to_owned()))
        }
        (thinking, None) => thinking,
        (Some(r @ Reasoning::Effort(_)), Some(_)) => Some(r),
    }
}

/// `output_config.format`: `{"type": "json_schema", "schema": {...}}`.
fn output_format(v: &Value, path: &str) -> Result<OutputFormat> {
    let o = as_obj(v, path)?;
    match req_str(o, "type", path)? {
        "json_schema" => Ok(OutputFormat::JsonSchema {
            name: None,
            description: None,
            schema: field(o, "schema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            strict: None,
        }),
        other => Err(TranslateError::invalid(
            join(path, "type"),
            &format!("`{other}` is not an output format"),
        )),
    }
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

impl Dec<'_> {
    fn dropped(&mut self, path: &str, name: &str, reason: &str) -> Result<()> {
        self.drops.variant(path, name, self.target, reason)
    }

    /// One turn; a role the neutral model has no place for is dropped (`None`).
    fn message(&mut self, v: &Value, path: &str) -> Result<Option<Message>> {
        let m = as_obj(v, path)?;
        let role = match req_str(m, "role", path)? {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            other => {
                self.dropped(
                    &join(path, "role"),
                    &format!("messages[{other}]"),
                    &format!("role `{other}` has no counterpart"),
                )?;
                return Ok(None);
            }
        };
        let content = self.blocks(
            m.get("content").unwrap_or(&Value::Null),
            &join(path, "content"),
        )?;
        let content = if role == Role::System {
            // System turns carry text only (the SDK allows nothing else).
            content
                .into_iter()
                .filter(|b| matches!(b, Block::Text(_)))
                .collect()
        } else {
            content
        };
        Ok(Some(Message { role, content }))
    }

    fn blocks(&mut self, v: &Value, path: &str) -> Result<Vec<Block>> {
        if let Some(s) = v.as_str() {
            return Ok(vec![Block::Text(s.to_owned())]);
        }
        let mut out = Vec::new();
        for (i, b) in as_arr(v, path)?.iter().enumerate() {
            self.block(b, &idx(path, i), &mut out)?;
        }
        Ok(out)
    }

    /// One content block, appended to `out`; a block with no counterpart is dropped and named
    /// `content[<type>]`.
    fn block(&mut self, v: &Value, path: &str, out: &mut Vec<Block>) -> Result<()> {
        let b = as_obj(v, path)?;
        let block = match req_str(b, "type", path)? {
            "text" => Block::Text(req_str(b, "text", path)?.to_owned()),
            "image" => match self.image_source(b, path)? {
                Some(image) => Block::Image(image),
                None => return Ok(()),
            },
            "document" => match self.document(b, path)? {
                Some(doc) => doc,
                None => return Ok(()),
            },
            // A search result is text with a source and a title: kept as text.
            "search_result" => {
                let mut text = format!(
                    "{}\n{}",
                    opt_str(b, "title", path)?.unwrap_or_default(),
                    opt_str(b, "source", path)?.unwrap_or_default()
                );
                if let Some(c) = field(b, "content") {
                    for b in self.blocks(c, &join(path, "content"))? {
                        if let Block::Text(t) = b {
                            text.push('\n');
                            text.push_str(&t);
                        }
                    }
                }
                Block::Text(text)
            }
            "tool_use" => Block::ToolCall(ToolCall {
                id: req_str(b, "id", path)?.to_owned(),
                name: req_str(b, "name", path)?.to_owned(),
                arguments: serde_json::to_string(
                    field(b, "input").unwrap_or(&serde_json::json!({})),
                )
                .unwrap_or_default(),
            }),
            "tool_result" => Block::ToolResult {
                id: req_str(b, "tool_use_id", path)?.to_owned(),
                content: match field(b, "content") {
                    Some(c) => self.blocks(c, &join(path, "content"))?,
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
            // Server tool calls and their results (`server_tool_use`, `web_search_tool_result`,
            // …), container uploads and anything newer ran at Anthropic or need it.
            other => {
                return self.dropped(
                    &join(path, "type"),
                    &format!("content[{other}]"),
                    &format!("`{other}` blocks have no counterpart"),
                );
            }
        };
        out.push(block);
        Ok(())
    }

    fn image_source(&mut self, b: &Obj, path: &str) -> Result<Option<Image>> {
        let (s, spath) = source(b, path)?;
        Ok(Some(match req_str(s, "type", &spath)? {
            "base64" => Image::Base64 {
                media_type: req_str(s, "media_type", &spath)?.to_owned(),
                data: req_str(s, "data", &spath)?.to_owned(),
            },
            "url" => Image::Url(req_str(s, "url", &spath)?.to_owned()),
            other => {
                self.unsupported_source(&spath, "image", other)?;
                return Ok(None);
            }
        }))
    }

    /// Base64 documents (PDFs) become OpenAI file parts; plain-text and content documents
    /// become text; URL and uploaded-file documents are dropped (the provider would have to
    /// fetch them).
    fn document(&mut self, b: &Obj, path: &str) -> Result<Option<Block>> {
        let (s, spath) = source(b, path)?;
        Ok(Some(match req_str(s, "type", &spath)? {
            "base64" => Block::File {
                media_type: req_str(s, "media_type", &spath)?.to_owned(),
                data: req_str(s, "data", &spath)?.to_owned(),
                name: opt_str(b, "title", path)?.map(str::to_owned),
            },
            "text" => Block::Text(req_str(s, "data", &spath)?.to_owned()),
            "content" => {
                let content = s.get("content").unwrap_or(&Value::Null);
                let texts: Vec<String> = self
                    .blocks(content, &join(&spath, "content"))?
                    .into_iter()
                    .filter_map(|b| match b {
                        Block::Text(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                Block::Text(texts.join("\n"))
            }
            other => {
                self.unsupported_source(&spath, "document", other)?;
                return Ok(None);
            }
        }))
    }

    fn unsupported_source(&mut self, spath: &str, block: &str, kind: &str) -> Result<()> {
        self.dropped(
            &join(spath, "type"),
            &format!("content[{block}].source[{kind}]"),
            &format!("`{kind}` sources have no counterpart"),
        )
    }

    /// `{"type": auto|any|tool|none, "name", "disable_parallel_tool_use"}`.
    fn tool_choice(&mut self, v: &Value) -> Result<(Option<ToolChoice>, Option<bool>)> {
        let o = as_obj(v, "tool_choice")?;
        let disable = opt_bool(o, "disable_parallel_tool_use", "tool_choice")?;
        let choice = match req_str(o, "type", "tool_choice")? {
            "auto" => ToolChoice::Auto,
            "any" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "tool" => ToolChoice::Tool(req_str(o, "name", "tool_choice")?.to_owned()),
            other => {
                self.dropped(
                    "tool_choice.type",
                    &format!("tool_choice[{other}]"),
                    &format!("`{other}` has no counterpart"),
                )?;
                return Ok((None, disable));
            }
        };
        Ok((Some(choice), disable))
    }

    /// `enabled` (a budget), `disabled`, `adaptive` (`display` is a display hint, dropped and
    /// named); another type (`between_tools`, anything newer) is dropped and named `thinking`.
    fn thinking(&mut self, v: &Value) -> Result<Option<Reasoning>> {
        let o = as_obj(v, "thinking")?;
        if field(o, "display").is_some() {
            self.drops.known("thinking.display");
        }
        Ok(Some(match req_str(o, "type", "thinking")? {
            "enabled" => Reasoning::Budget(opt_u64(o, "budget_tokens", "thinking")?.unwrap_or(0)),
            "disabled" => Reasoning::Off,
            "adaptive" => Reasoning::Adaptive,
            other => {
                self.dropped(
                    "thinking.type",
                    "thinking",
                    &format!("`{other}` has no counterpart"),
                )?;
                return Ok(None);
            }
        }))
    }
}

fn source<'a>(b: &'a Obj, path: &str) -> Result<(&'a Obj, String)> {
    let spath = join(path, "source");
    let s = as_obj(b.get("source").unwrap_or(&Value::Null), &spath)?;
    Ok((s, spath))
}

/// A custom tool; a server tool (any other `type`) is left out of the offer and named.
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
