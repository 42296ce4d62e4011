//! Pieces both OpenAI request formats share: content parts, function tools, `tool_choice`,
//! and OpenRouter-style `reasoning_details`.
//!
//! Chat and Responses name their parts differently (`text` / `input_text`, `image_url` /
//! `input_image`, `file` / `input_file`) but mean the same things, so one reader accepts both.

use serde_json::Value;

use crate::sse::Format;
use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Image, Reasoning, Tool, ToolChoice};
use crate::translate::mapping::KNOWN_EFFORTS;
use crate::translate::policy::Drops;
use crate::translate::util::{
    Result, as_arr, as_obj, as_str, field, idx, join, opt_str, parse_data_url, req_str,
};

/// The `format` OpenRouter gives reasoning that came from Claude; only such signatures are
/// valid for Anthropic.
pub(crate) const ANTHROPIC_REASONING_FORMAT: &str = "anthropic-claude-v1";

/// A message's `content`: a string, or an array of typed parts.
pub(crate) fn openai_content_parts(v: &Value, path: &str, target: Format) -> Result<Vec<Block>> {
    let parts = match v {
        Value::String(s) => return Ok(vec![Block::Text(s.clone())]),
        other => as_arr(other, path)?,
    };
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let path = idx(path, i);
        let p = as_obj(part, &path)?;
        let kind = req_str(p, "type", &path)?;
        let block = match kind {
            "text" | "input_text" | "output_text" => {
                Block::Text(req_str(p, "text", &path)?.to_owned())
            }
            "refusal" => Block::Text(req_str(p, "refusal", &path)?.to_owned()),
            "image_url" => {
                let url = match field(p, "image_url") {
                    Some(Value::String(s)) => s.as_str(),
                    Some(Value::Object(o)) => req_str(o, "url", &join(&path, "image_url"))?,
                    _ => {
                        return Err(TranslateError::invalid(
                            join(&path, "image_url"),
                            "required",
                        ));
                    }
                };
                Block::Image(image(url))
            }
            "input_image" => match opt_str(p, "image_url", &path)? {
                Some(url) => Block::Image(image(url)),
                None => return Err(unsupported_file_id(&path, target)),
            },
            "file" => {
                let fpath = join(&path, "file");
                let f = as_obj(p.get("file").unwrap_or(&Value::Null), &fpath)?;
                file(f, &fpath, target)?
            }
            "input_file" => file(p, &path, target)?,
            other => {
                return Err(TranslateError::unsupported(
                    join(&path, "type"),
                    target,
                    &format!("`{other}` content has no counterpart"),
                ));
            }
        };
        out.push(block);
    }
    Ok(out)
}

fn image(url: &str) -> Image {
    match parse_data_url(url) {
        Some((media_type, data)) => Image::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        },
        None => Image::Url(url.to_owned()),
    }
}

fn file(f: &serde_json::Map<String, Value>, path: &str, target: Format) -> Result<Block> {
    let Some(data) = opt_str(f, "file_data", path)? else {
        return Err(unsupported_file_id(path, target));
    };
    let (media_type, data) = parse_data_url(data)
        .ok_or_else(|| TranslateError::invalid(join(path, "file_data"), "expected a data URL"))?;
    Ok(Block::File {
        media_type: media_type.to_owned(),
        data: data.to_owned(),
        name: opt_str(f, "filename", path)?.map(str::to_owned),
    })
}

fn unsupported_file_id(path: &str, target: Format) -> TranslateError {
    TranslateError::unsupported(
        join(path, "file_id"),
        target,
        "uploaded files live at the OpenAI provider; send the data inline",
    )
}

/// A chat tool: `{"type":"function","function":{name, description, parameters}}`.
pub(crate) fn chat_tool(v: &Value, path: &str, target: Format) -> Result<Tool> {
    let t = as_obj(v, path)?;
    check_function_type(opt_str(t, "type", path)?, path, target)?;
    let fpath = join(path, "function");
    let f = as_obj(t.get("function").unwrap_or(&Value::Null), &fpath)?;
    function_tool(f, &fpath)
}

/// A Responses tool: `{"type":"function", name, description, parameters}`.
/// A Responses `function` tool; hosted tools (`web_search`, …) and tool namespaces are
/// dropped or refused by the policy.
pub(crate) fn responses_tool(
    v: &Value,
    path: &str,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<Tool>> {
    let t = as_obj(v, path)?;
    match req_str(t, "type", path)? {
        "function" => function_tool(t, path).map(Some),
        other => {
            drops.tool(path, other, target)?;
            Ok(None)
        }
    }
}

fn check_function_type(kind: Option<&str>, path: &str, target: Format) -> Result<()> {
    match kind {
        None | Some("function") => Ok(()),
        Some(other) => Err(TranslateError::unsupported(
            join(path, "type"),
            target,
            &format!("`{other}` tools have no counterpart"),
        )),
    }
}

/// `strict` is dropped: Anthropic validates tool input against the schema on its own terms.
fn function_tool(f: &serde_json::Map<String, Value>, path: &str) -> Result<Tool> {
    Ok(Tool {
        name: req_str(f, "name", path)?.to_owned(),
        description: opt_str(f, "description", path)?.map(str::to_owned),
        parameters: field(f, "parameters")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    })
}

/// Chat `tool_choice`: a mode string or `{"type":"function","function":{"name"}}`.
pub(crate) fn chat_tool_choice(v: &Value, target: Format) -> Result<ToolChoice> {
    if let Some(mode) = v.as_str() {
        return mode_choice(mode, target);
    }
    let o = as_obj(v, "tool_choice")?;
    match opt_str(o, "type", "tool_choice")? {
        Some("function") => {
            let f = as_obj(
                o.get("function").unwrap_or(&Value::Null),
                "tool_choice.function",
            )?;
            Ok(ToolChoice::Tool(
                req_str(f, "name", "tool_choice.function")?.to_owned(),
            ))
        }
        _ => Err(TranslateError::unsupported(
            "tool_choice.type",
            target,
            "only function tool choices have a counterpart",
        )),
    }
}

/// Responses `tool_choice`: a mode string or `{"type":"function","name"}`.
pub(crate) fn responses_tool_choice(v: &Value, target: Format) -> Result<ToolChoice> {
    if let Some(mode) = v.as_str() {
        return mode_choice(mode, target);
    }
    let o = as_obj(v, "tool_choice")?;
    match opt_str(o, "type", "tool_choice")? {
        Some("function") => Ok(ToolChoice::Tool(
            req_str(o, "name", "tool_choice")?.to_owned(),
        )),
        _ => Err(TranslateError::unsupported(
            "tool_choice.type",
            target,
            "only function tool choices have a counterpart",
        )),
    }
}

fn mode_choice(mode: &str, target: Format) -> Result<ToolChoice> {
    match mode {
        "auto" => Ok(ToolChoice::Auto),
        "none" => Ok(ToolChoice::None),
        "required" => Ok(ToolChoice::Required),
        other => Err(TranslateError::unsupported(
            "tool_choice",
            target,
            &format!("`{other}` has no counterpart"),
        )),
    }
}

/// OpenRouter's `reasoning_details`: `reasoning.text` (with an optional signature),
/// `reasoning.summary` and `reasoning.encrypted` entries. Signatures and encrypted data are
/// kept only when they came from Claude: nobody else can read them.
pub(crate) fn reasoning_details(v: &Value, path: &str) -> Result<Vec<Block>> {
    let mut out = Vec::new();
    for (i, d) in as_arr(v, path)?.iter().enumerate() {
        let dpath = idx(path, i);
        let d = as_obj(d, &dpath)?;
        let ours = matches!(
            opt_str(d, "format", &dpath)?,
            None | Some(ANTHROPIC_REASONING_FORMAT)
        );
        match opt_str(d, "type", &dpath)? {
            Some("reasoning.text") => out.push(Block::Reasoning {
                text: opt_str(d, "text", &dpath)?.unwrap_or_default().to_owned(),
                signature: opt_str(d, "signature", &dpath)?
                    .filter(|_| ours)
                    .map(str::to_owned),
            }),
            Some("reasoning.summary") => out.push(Block::Reasoning {
                text: opt_str(d, "summary", &dpath)?
                    .unwrap_or_default()
                    .to_owned(),
                signature: None,
            }),
            Some("reasoning.encrypted") if ours => {
                if let Some(data) = field(d, "data") {
                    out.push(Block::Redacted(
                        as_str(data, &join(&dpath, "data"))?.to_owned(),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// An OpenAI reasoning effort: `none` is no reasoning; an effort Anthropic has no budget for is
/// refused when the provider is Anthropic and passed on otherwise.
pub(crate) fn effort(value: &str, param: &str, target: Format) -> Result<Reasoning> {
    if value == "none" {
        return Ok(Reasoning::Off);
    }
    if target == Format::Anthropic && !KNOWN_EFFORTS.contains(&value) {
        return Err(TranslateError::unsupported(
            param,
            target,
            &format!("effort `{value}` has no thinking budget"),
        ));
    }
    Ok(Reasoning::Effort(value.to_owned()))
}
