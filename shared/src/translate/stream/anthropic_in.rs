//! Anthropic Messages stream → neutral events: nearly one to one, since the neutral model is
//! Anthropic's. Blocks of server-tool types (never requested by a translated request) and
//! `citations_delta`s are skipped.

use serde_json::Value;

use super::{BlockKind, Delta, Ev};
use crate::sse::{Format, SseEvent, inspect};
use crate::translate::ir::TokenUsage;
use crate::translate::mapping::{finish_from_anthropic, merge_anthropic_usage};

#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    usage: TokenUsage,
    /// Indexes of blocks being skipped.
    skipped: Vec<usize>,
}

impl AnthropicDecoder {
    pub(crate) fn decode(&mut self, event: &SseEvent<'_>, out: &mut Vec<Ev>) {
        let Ok(v) = serde_json::from_slice::<Value>(event.data.trim_ascii()) else {
            if event.event == Some(b"error") {
                out.extend(inspect(Format::Anthropic, event).error.map(Ev::Error));
            }
            return;
        };
        let name = match event.event {
            Some(n) => std::str::from_utf8(n).unwrap_or_default(),
            None => v.get("type").and_then(Value::as_str).unwrap_or_default(),
        };
        let s = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let index = v
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(0);
        match name {
            "ping" => out.push(Ev::Ping),
            "error" => out.extend(inspect(Format::Anthropic, event).error.map(Ev::Error)),
            "message_start" => {
                let message = v.get("message").unwrap_or(&Value::Null);
                if let Some(u) = message.get("usage") {
                    merge_anthropic_usage(&mut self.usage, u);
                }
                out.push(Ev::Start {
                    id: s(message, "id"),
                    model: s(message, "model"),
                    usage: self.usage,
                });
            }
            "content_block_start" => {
                let block = v.get("content_block").unwrap_or(&Value::Null);
                let (kind, initial) = match block.get("type").and_then(Value::as_str) {
                    Some("text") => (BlockKind::Text, Some(Delta::Text(s(block, "text")))),
                    Some("thinking") => (
                        BlockKind::Reasoning,
                        Some(Delta::Reasoning(s(block, "thinking"))),
                    ),
                    Some("redacted_thinking") => (BlockKind::Redacted(s(block, "data")), None),
                    Some("tool_use") => {
                        let input = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                            .map(|i| Delta::Arguments(i.to_string()));
                        let kind = BlockKind::ToolCall {
                            id: s(block, "id"),
                            name: s(block, "name"),
                        };
                        (kind, input)
                    }
                    _ => {
                        self.skipped.push(index);
                        return;
                    }
                };
                out.push(Ev::BlockStart { index, kind });
                if let Some(delta) = initial.filter(|d| !delta_is_empty(d)) {
                    out.push(Ev::Delta { index, delta });
                }
                if let Some(sig) = block.get("signature").and_then(Value::as_str)
                    && !sig.is_empty()
                {
                    out.push(Ev::Delta {
                        index,
                        delta: Delta::Signature(sig.to_owned()),
                    });
                }
            }
            "content_block_delta" if !self.skipped.contains(&index) => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let delta = match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => Delta::Text(s(d, "text")),
                    Some("thinking_delta") => Delta::Reasoning(s(d, "thinking")),
                    Some("signature_delta") => Delta::Signature(s(d, "signature")),
                    Some("input_json_delta") => Delta::Arguments(s(d, "partial_json")),
                    _ => return,
                };
                // Empty deltas carry nothing a client could show.
                if !delta_is_empty(&delta) {
                    out.push(Ev::Delta { index, delta });
                }
            }
            "content_block_stop" if !self.skipped.contains(&index) => {
                out.push(Ev::BlockStop { index });
            }
            "message_delta" => {
                if let Some(u) = v.get("usage") {
                    merge_anthropic_usage(&mut self.usage, u);
                }
                let d = v.get("delta").unwrap_or(&Value::Null);
                out.push(Ev::Finish {
                    reason: finish_from_anthropic(
                        d.get("stop_reason")
                            .and_then(Value::as_str)
                            .unwrap_or("end_turn"),
                    ),
                    stop_sequence: d
                        .get("stop_sequence")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    usage: self.usage,
                });
            }
            "message_stop" => out.push(Ev::End),
            _ => {}
        }
    }
}

fn delta_is_empty(delta: &Delta) -> bool {
    match delta {
        Delta::Text(t) | Delta::Reasoning(t) | Delta::Signature(t) | Delta::Arguments(t) => {
            t.is_empty()
        }
    }
}
