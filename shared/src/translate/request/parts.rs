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
/// A part with no counterpart (audio, an uploaded-file reference) is dropped and named
/// `content[<type>]`.
pub(crate) fn openai_content_parts(
    v: &Value,
    path: &str,
    target: Format,
    drops: &mut Drops,
) -> Result<Vec<Block>> {
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
                None => {
                    unsupported_file_id(&path, kind, target, drops)?;
                    continue;
                }
            },
            "file" => {
                let fpath = join(&path, "file");
                let f = as_obj(p.get("file").unwrap_or(&Value::Null), &fpath)?;
                match file(f, &fpath)? {
                    Some(b) => b,
                    None => {
                        unsupported_file_id(&fpath, kind, target, drops)?;
                        continue;
                    }
                }
            }
            "input_file" => match file(p, &path)? {
                Some(b) => b,
                None => {
                    unsupported_file_id(&path, kind, target, drops)?;
                    continue;
                }
            },
            other => {
                drops.variant(
                    &join(&path, "type"),
                    &format!("content[{other}]"),
                    target,
                    &format!("`{other}` content has no counterpart"),
                )?;
                continue;
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

/// An inline file; `None` for a reference (`file_id`, `file_url`) the provider cannot read.
fn file(f: &serde_json::Map<String, Value>, path: &str) -> Result<Option<Block>> {
    let Some(data) = opt_str(f, "file_data", path)? else {
        return Ok(None);
    };
    let name = opt_str(f, "filename", path)?;
    // OpenAI documents `file_data` as base64 data; clients send it as a `data:` URL or bare.
    let (media_type, data) = parse_data_url(data).unwrap_or((media_type_of(name), data));
    Ok(Some(Block::File {
        media_type: media_type.to_owned(),
        data: data.to_owned(),
        name: name.map(str::to_owned),
    }))
}

/// The media type of bare base64 file data, by the file name's extension (PDF, the one file
/// type every provider reads, when unknown).
fn media_type_of(name: Option<&str>) -> &'static str {
    let ext = name
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt") => "text/plain",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        _ => "application/pdf",
    }
}

/// Uploaded files live at OpenAI; only inline data can be carried.
fn unsupported_file_id(path: &str, kind: &str, target: Format, drops: &mut Drops) -> Result<()> {
    drops.variant(
        &join(path, "file_id"),
        &format!("content[{kind}].file_id"),
        target,
        "uploaded files live at the OpenAI provider; send the data inline",
    )
}

/// A chat tool: `{"type":"function","function":{name, description, parameters}}`; another
/// type (a free-form `custom` tool) is left out of the offer and named.
pub(crate) fn chat_tool(
    v: &Value,
    path: &str,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<Tool>> {
    let t = as_obj(v, path)?;
    match opt_str(t, "type", path)? {
        None | Some("function") => {}
        Some(other) => {
            drops.tool(path, other, target)?;
            return Ok(None);
        }
    }
    let fpath = join(path, "function");
    let f = as_obj(t.get("function").unwrap_or(&Value::Null), &fpath)?;
    function_tool(f, &fpath).map(Some)
}

/// A legacy chat `functions[]` entry: the function tool it stands for.
pub(crate) fn legacy_function(v: &Value, path: &str) -> Result<Tool> {
    function_tool(as_obj(v, path)?, path)
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

/// Chat `tool_choice`: a mode string, `{"type":"function","function":{"name"}}` or
/// `{"type":"allowed_tools", ...}`. `None` when it was dropped (see [`other_choice`]).
pub(crate) fn chat_tool_choice(
    v: &Value,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<ToolChoice>> {
    if let Some(mode) = v.as_str() {
        return mode_choice(mode, target, drops);
    }
    let o = as_obj(v, "tool_choice")?;
    match opt_str(o, "type", "tool_choice")? {
        Some("function") => {
            let f = as_obj(
                o.get("function").unwrap_or(&Value::Null),
                "tool_choice.function",
            )?;
            Ok(Some(ToolChoice::Tool(
                req_str(f, "name", "tool_choice.function")?.to_owned(),
            )))
        }
        kind => other_choice(o, kind, target, drops),
    }
}

/// Responses `tool_choice`: a mode string, `{"type":"function","name"}` or
/// `{"type":"allowed_tools", ...}`; one forcing a hosted tool is dropped (see
/// [`other_choice`]).
pub(crate) fn responses_tool_choice(
    v: &Value,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<ToolChoice>> {
    if let Some(mode) = v.as_str() {
        return mode_choice(mode, target, drops);
    }
    let o = as_obj(v, "tool_choice")?;
    match opt_str(o, "type", "tool_choice")? {
        Some("function") => Ok(Some(ToolChoice::Tool(
            req_str(o, "name", "tool_choice")?.to_owned(),
        ))),
        kind => other_choice(o, kind, target, drops),
    }
}

/// `allowed_tools` keeps its mode (`auto` / `required`); the restriction to a subset of the
/// offered tools has no counterpart and is named `tool_choice.allowed_tools`. A choice that
/// forces a tool the provider is not offered (a hosted or custom tool, dropped from `tools`)
/// is dropped and named `tool_choice[<type>]`: the model then chooses freely.
fn other_choice(
    o: &serde_json::Map<String, Value>,
    kind: Option<&str>,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<ToolChoice>> {
    if kind == Some("allowed_tools") {
        // Chat nests the list (`allowed_tools.mode`); Responses does not (`mode`).
        let mode = match field(o, "allowed_tools") {
            Some(a) => opt_str(
                as_obj(a, "tool_choice.allowed_tools")?,
                "mode",
                "tool_choice",
            )?,
            None => opt_str(o, "mode", "tool_choice")?,
        };
        drops.variant(
            "tool_choice.allowed_tools",
            "tool_choice.allowed_tools",
            target,
            "a subset of the offered tools has no counterpart",
        )?;
        return mode_choice(mode.unwrap_or("auto"), target, drops);
    }
    let kind = kind.unwrap_or("?");
    drops.variant(
        "tool_choice.type",
        &format!("tool_choice[{kind}]"),
        target,
        &format!("`{kind}` tool choices have no counterpart"),
    )?;
    Ok(None)
}

fn mode_choice(mode: &str, target: Format, drops: &mut Drops) -> Result<Option<ToolChoice>> {
    Ok(Some(match mode {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        other => {
            drops.variant(
                "tool_choice",
                &format!("tool_choice[{other}]"),
                target,
                &format!("`{other}` has no counterpart"),
            )?;
            return Ok(None);
        }
    }))
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
/// dropped and named when the provider is Anthropic, and passed on otherwise.
pub(crate) fn effort(
    value: &str,
    param: &str,
    target: Format,
    drops: &mut Drops,
) -> Result<Option<Reasoning>> {
    if value == "none" {
        return Ok(Some(Reasoning::Off));
    }
    if target == Format::Anthropic && !KNOWN_EFFORTS.contains(&value) {
        drops.variant(
            param,
            param,
            target,
            &format!("effort `{value}` has no thinking budget"),
        )?;
        return Ok(None);
    }
    Ok(Some(Reasoning::Effort(value.to_owned())))
}
