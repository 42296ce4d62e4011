//! How Anthropic's signed reasoning rides through the OpenAI formats and comes back intact.
//!
//! Claude's `thinking` blocks carry a `signature`, and `redacted_thinking` blocks carry opaque
//! `data`; Anthropic rejects a multi-turn tool loop whose earlier thinking comes back without
//! them. OpenAI formats have no such fields, so:
//!
//! - **Responses** reasoning items carry them in `encrypted_content`, which clients replay
//!   verbatim, tagged `anthropic:sig:` or `anthropic:redacted:`. The tag tells a Claude
//!   signature from an OpenAI encrypted blob, which must never be sent to Anthropic (it would be
//!   rejected) and is dropped when a reasoning item is translated.
//! - **Chat** carries them OpenRouter-style in `reasoning_details`
//!   (`reasoning.text` with `signature`, `reasoning.encrypted` with `data`, both with
//!   `format: anthropic-claude-v1`), next to the plain `reasoning_content` text.

use serde_json::{Value, json};

use super::ir::Block;
use super::request::parts::ANTHROPIC_REASONING_FORMAT;
use super::util::{Obj, Result, as_arr, as_obj, as_str, field, idx, join};

const SIG: &str = "anthropic:sig:";
const REDACTED: &str = "anthropic:redacted:";

/// `encrypted_content` for a reasoning block, when it has something to carry.
pub(crate) fn encrypted_content(block: &Block) -> Option<String> {
    match block {
        Block::Reasoning {
            signature: Some(sig),
            ..
        } => Some(format!("{SIG}{sig}")),
        Block::Redacted(data) => Some(format!("{REDACTED}{data}")),
        _ => None,
    }
}

/// A Responses reasoning item → a reasoning block (or none, when it carries nothing usable).
pub(crate) fn from_item(o: &Obj, path: &str) -> Result<Vec<Block>> {
    let mut text = Vec::new();
    for key in ["summary", "content"] {
        if let Some(parts) = field(o, key) {
            let kpath = join(path, key);
            for (i, p) in as_arr(parts, &kpath)?.iter().enumerate() {
                let ppath = idx(&kpath, i);
                if let Some(t) = field(as_obj(p, &ppath)?, "text") {
                    text.push(as_str(t, &join(&ppath, "text"))?);
                }
            }
        }
        if !text.is_empty() {
            break;
        }
    }
    let encrypted = field(o, "encrypted_content")
        .map(|e| as_str(e, &join(path, "encrypted_content")))
        .transpose()?;
    if let Some(data) = encrypted.and_then(|e| e.strip_prefix(REDACTED)) {
        return Ok(vec![Block::Redacted(data.to_owned())]);
    }
    let signature = encrypted
        .and_then(|e| e.strip_prefix(SIG))
        .map(str::to_owned);
    let text = text.join("\n\n");
    if text.is_empty() && signature.is_none() {
        return Ok(Vec::new());
    }
    Ok(vec![Block::Reasoning { text, signature }])
}

/// Chat `reasoning_details` for `blocks`, or `None` when no block carries a signature or
/// redacted data (plain `reasoning_content` then says everything).
pub(crate) fn chat_details(blocks: &[&Block]) -> Option<Value> {
    let carries = blocks.iter().any(|b| {
        matches!(
            b,
            Block::Redacted(_)
                | Block::Reasoning {
                    signature: Some(_),
                    ..
                }
        )
    });
    if !carries {
        return None;
    }
    let details: Vec<Value> = blocks
        .iter()
        .enumerate()
        .filter_map(|(index, b)| match b {
            Block::Reasoning { text, signature } => Some(json!({
                "type": "reasoning.text",
                "text": text,
                "signature": signature,
                "format": ANTHROPIC_REASONING_FORMAT,
                "index": index,
            })),
            Block::Redacted(data) => Some(json!({
                "type": "reasoning.encrypted",
                "data": data,
                "format": ANTHROPIC_REASONING_FORMAT,
                "index": index,
            })),
            _ => None,
        })
        .collect();
    Some(Value::Array(details))
}

/// Removes the `thinking` blocks with an empty signature from an Anthropic request's assistant
/// turns, and any assistant turn left empty; returns how many blocks went.
///
/// Claude always signs its thinking, so an unsigned block came from a translated OpenAI
/// provider's reasoning (an Anthropic client must be shown it as a `thinking` block, and the
/// format has no way to mark it foreign). Anthropic rejects such a block, so a request that
/// goes to an Anthropic provider unchanged after a fallback should pass through this first.
pub fn strip_unsigned_thinking(request: &mut Value) -> usize {
    let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) else {
        return 0;
    };
    let mut removed = 0;
    let unsigned = |b: &Value| {
        b.get("type").and_then(Value::as_str) == Some("thinking")
            && b.get("signature")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
    };
    messages.retain_mut(|m| {
        if m.get("role").and_then(Value::as_str) != Some("assistant") {
            return true;
        }
        let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) else {
            return true;
        };
        let before = blocks.len();
        blocks.retain(|b| !unsigned(b));
        removed += before - blocks.len();
        !blocks.is_empty() || before == 0
    });
    removed
}
