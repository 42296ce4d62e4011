//! Anthropic `context_management`, emulated for a provider that has no context editing.
//!
//! Claude Code asks Anthropic to edit a long conversation server-side: clear old tool results
//! (`clear_tool_uses_20250919`) and old thinking (`clear_thinking_20251015`). A chat provider
//! has neither, and without the edit the request is the whole conversation, which may then fail
//! on length where Anthropic would have answered. So Switchyard does the edit itself before
//! translating, with the documented defaults:
//!
//! - `clear_tool_uses_20250919`: once the input is over `trigger` tokens (default 100,000),
//!   the results of all tool uses but the last `keep` (default 3) are replaced by a short
//!   placeholder, oldest first, skipping tools named in `exclude_tools`; with
//!   `clear_tool_inputs` the calls' arguments are emptied too. When `clear_at_least` is set and
//!   clearing would not free that many tokens, nothing is cleared (the edit is all or nothing,
//!   as Anthropic's).
//! - `clear_thinking_20251015`: earlier thinking is never sent to a chat provider anyway
//!   (reasoning is not part of a chat turn), which is what the edit asks for.
//!
//! Tokens are estimated at four characters each (no tokenizer in the request path); the
//! estimate decides only *whether* to clear, and a conversation that long is far from the
//! boundary in practice. An edit type this module does not know only ever removes content, so
//! it is dropped and named, as the parameter policy drops hints.

use serde_json::Value;

use crate::translate::error::TranslateError;
use crate::translate::ir::{Block, Request};
use crate::translate::util::{Result, as_arr, as_obj, idx, join, opt_bool, req_str};

/// What a cleared tool result says instead of its content.
pub(crate) const CLEARED: &str = "[tool result cleared by context management]";

const TRIGGER_DEFAULT: u64 = 100_000;
const KEEP_DEFAULT: u64 = 3;
const CHARS_PER_TOKEN: u64 = 4;

/// One `clear_tool_uses_20250919` edit.
#[derive(Debug, Clone, PartialEq, Default)]
struct ClearToolUses {
    trigger_tokens: u64,
    keep: u64,
    clear_at_least_tokens: u64,
    exclude_tools: Vec<String>,
    clear_inputs: bool,
}

/// Applies the edits of `context_management` to `req`. Returns the names of edits it could
/// not apply (unknown types), for the dropped list.
pub(crate) fn apply(value: &Value, req: &mut Request) -> Result<Vec<String>> {
    let key = "context_management";
    let m = as_obj(value, key)?;
    let mut unknown = Vec::new();
    let Some(edits) = m.get("edits").filter(|e| !e.is_null()) else {
        return Ok(unknown);
    };
    for (i, edit) in as_arr(edits, &join(key, "edits"))?.iter().enumerate() {
        let path = idx(&join(key, "edits"), i);
        let e = as_obj(edit, &path)?;
        match req_str(e, "type", &path)? {
            "clear_tool_uses_20250919" => clear_tool_uses(req, &parse_clear(e, &path)?),
            // Chat turns carry no earlier thinking: the edit is already in effect.
            "clear_thinking_20251015" => {}
            other => unknown.push(format!("{key}.edits[{other}]")),
        }
    }
    Ok(unknown)
}

/// `{"type": unit, "value": n}` with the expected unit, or the default when absent.
fn amount(
    e: &serde_json::Map<String, Value>,
    field: &str,
    unit: &str,
    path: &str,
    default: u64,
) -> Result<u64> {
    let Some(v) = e.get(field).filter(|v| !v.is_null()) else {
        return Ok(default);
    };
    let p = join(path, field);
    let o = as_obj(v, &p)?;
    let got = req_str(o, "type", &p)?;
    if got != unit {
        return Err(TranslateError::invalid(
            join(&p, "type"),
            &format!("`{got}` is not supported here; expected `{unit}`"),
        ));
    }
    o.get("value")
        .and_then(Value::as_u64)
        .ok_or_else(|| TranslateError::invalid(join(&p, "value"), "must be a whole number"))
}

fn parse_clear(e: &serde_json::Map<String, Value>, path: &str) -> Result<ClearToolUses> {
    let mut exclude_tools = Vec::new();
    if let Some(list) = e.get("exclude_tools").filter(|v| !v.is_null()) {
        let p = join(path, "exclude_tools");
        for (i, name) in as_arr(list, &p)?.iter().enumerate() {
            let name = name
                .as_str()
                .ok_or_else(|| TranslateError::invalid(idx(&p, i), "must be a tool name"))?;
            exclude_tools.push(name.to_owned());
        }
    }
    Ok(ClearToolUses {
        trigger_tokens: amount(e, "trigger", "input_tokens", path, TRIGGER_DEFAULT)?,
        keep: amount(e, "keep", "tool_uses", path, KEEP_DEFAULT)?,
        clear_at_least_tokens: amount(e, "clear_at_least", "input_tokens", path, 0)?,
        exclude_tools,
        clear_inputs: opt_bool(e, "clear_tool_inputs", path)?.unwrap_or(false),
    })
}

/// Characters of text a block sends (images and files count by their data).
fn block_chars(b: &Block) -> u64 {
    let n = match b {
        Block::Text(t) => t.len(),
        Block::Image(crate::translate::ir::Image::Url(u)) => u.len(),
        Block::Image(crate::translate::ir::Image::Base64 { data, .. }) => data.len(),
        Block::File { data, .. } => data.len(),
        Block::ToolCall(c) => c.name.len() + c.arguments.len(),
        Block::ToolResult { content, .. } => {
            return content.iter().map(block_chars).sum();
        }
        Block::Reasoning { text, .. } => text.len(),
        Block::Redacted(d) => d.len(),
    };
    n as u64
}

fn estimated_tokens(req: &Request) -> u64 {
    let chars: u64 = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(block_chars)
        .sum();
    chars / CHARS_PER_TOKEN
}

fn clear_tool_uses(req: &mut Request, edit: &ClearToolUses) {
    if estimated_tokens(req) <= edit.trigger_tokens {
        return;
    }
    // Tool uses in conversation order, with the tool each called.
    let uses: Vec<(String, String)> = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolCall(c) => Some((c.id.clone(), c.name.clone())),
            _ => None,
        })
        .collect();
    let keep = usize::try_from(edit.keep).unwrap_or(usize::MAX);
    let clearable = uses.len().saturating_sub(keep);
    let ids: Vec<&str> = uses[..clearable]
        .iter()
        .filter(|(_, name)| !edit.exclude_tools.contains(name))
        .map(|(id, _)| id.as_str())
        .collect();
    if ids.is_empty() {
        return;
    }
    let freed: u64 = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(|b| match b {
            Block::ToolResult { id, content, .. } if ids.contains(&id.as_str()) => {
                content.iter().map(block_chars).sum::<u64>() / CHARS_PER_TOKEN
            }
            _ => 0,
        })
        .sum();
    if freed < edit.clear_at_least_tokens {
        return;
    }
    for block in req.messages.iter_mut().flat_map(|m| &mut m.content) {
        match block {
            Block::ToolResult { id, content, .. } if ids.contains(&id.as_str()) => {
                *content = vec![Block::Text(CLEARED.to_owned())];
            }
            Block::ToolCall(c) if edit.clear_inputs && ids.contains(&c.id.as_str()) => {
                c.arguments = "{}".to_owned();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::translate::ir::{Message, Role, ToolCall};

    /// `n` tool round trips, each result `size` characters long.
    fn conversation(n: usize, size: usize) -> Request {
        let mut messages = vec![Message {
            role: Role::User,
            content: vec![Block::Text("fix the bug".into())],
        }];
        for i in 0..n {
            let name = if i == 0 { "web_search" } else { "read_file" };
            messages.push(Message {
                role: Role::Assistant,
                content: vec![Block::ToolCall(ToolCall {
                    id: format!("t{i}"),
                    name: name.into(),
                    arguments: r#"{"path":"src/lib.rs"}"#.into(),
                })],
            });
            messages.push(Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    id: format!("t{i}"),
                    content: vec![Block::Text("x".repeat(size))],
                    is_error: false,
                }],
            });
        }
        Request {
            messages,
            ..Request::default()
        }
    }

    fn result_text(req: &Request, id: &str) -> String {
        req.messages
            .iter()
            .flat_map(|m| &m.content)
            .find_map(|b| match b {
                Block::ToolResult { id: i, content, .. } if i == id => match &content[..] {
                    [Block::Text(t)] => Some(t.clone()),
                    _ => None,
                },
                _ => None,
            })
            .unwrap()
    }

    fn edit(v: Value) -> Value {
        json!({"edits": [v]})
    }

    #[test]
    fn old_tool_results_are_cleared_past_the_trigger() {
        let mut req = conversation(6, 4000);
        let unknown = apply(
            &edit(json!({"type": "clear_tool_uses_20250919",
                         "trigger": {"type": "input_tokens", "value": 2000},
                         "keep": {"type": "tool_uses", "value": 2}})),
            &mut req,
        )
        .unwrap();
        assert!(unknown.is_empty());
        for id in ["t0", "t1", "t2", "t3"] {
            assert_eq!(result_text(&req, id), CLEARED, "{id}");
        }
        for id in ["t4", "t5"] {
            assert_eq!(result_text(&req, id).len(), 4000, "{id}");
        }
    }

    #[test]
    fn under_the_trigger_nothing_changes() {
        let mut req = conversation(6, 100);
        let before = req.clone();
        // Defaults: trigger 100,000 tokens.
        apply(&edit(json!({"type": "clear_tool_uses_20250919"})), &mut req).unwrap();
        assert_eq!(req, before);
    }

    #[test]
    fn excluded_tools_and_clear_at_least_are_honoured() {
        let mut req = conversation(4, 4000);
        apply(
            &edit(json!({"type": "clear_tool_uses_20250919",
                         "trigger": {"type": "input_tokens", "value": 10},
                         "keep": {"type": "tool_uses", "value": 1},
                         "exclude_tools": ["web_search"],
                         "clear_tool_inputs": true})),
            &mut req,
        )
        .unwrap();
        assert_eq!(result_text(&req, "t0").len(), 4000, "excluded");
        assert_eq!(result_text(&req, "t1"), CLEARED);
        let args: Vec<&str> = req
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                Block::ToolCall(c) => Some(c.arguments.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(args[1], "{}");
        assert_ne!(args[0], "{}");
        assert_ne!(args[3], "{}");

        // Clearing would free about 2,000 tokens, less than asked: all or nothing.
        let mut req = conversation(3, 4000);
        let before = req.clone();
        apply(
            &edit(json!({"type": "clear_tool_uses_20250919",
                         "trigger": {"type": "input_tokens", "value": 10},
                         "keep": {"type": "tool_uses", "value": 1},
                         "clear_at_least": {"type": "input_tokens", "value": 5000}})),
            &mut req,
        )
        .unwrap();
        assert_eq!(req, before);
    }

    #[test]
    fn unknown_edits_are_named_and_bad_ones_refused() {
        let mut req = conversation(1, 10);
        let unknown = apply(
            &json!({"edits": [{"type": "clear_thinking_20251015", "keep": "all"},
                              {"type": "compact_20260101"}]}),
            &mut req,
        )
        .unwrap();
        assert_eq!(unknown, vec!["context_management.edits[compact_20260101]"]);
        let err = apply(
            &edit(json!({"type": "clear_tool_uses_20250919",
                         "trigger": {"type": "tool_uses", "value": 3}})),
            &mut req,
        )
        .unwrap_err();
        assert_eq!(
            err.param(),
            Some("context_management.edits[0].trigger.type")
        );
        assert!(apply(&json!({"edits": "x"}), &mut req).is_err());
    }
}
