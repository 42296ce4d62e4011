//! Neutral events → OpenAI `chat.completion.chunk` stream.
//!
//! The start is the role chunk; text, reasoning and tool-call argument deltas become
//! `content`, `reasoning_content` and `tool_calls[].function.arguments` deltas (tool calls are
//! numbered from 0 in order of appearance). Signatures and redacted reasoning, which chat has
//! no field for, travel in OpenRouter-style `reasoning_details` deltas. The finish becomes the
//! `finish_reason` chunk, followed by the usage chunk when the client asked for
//! `include_usage`; the end becomes `data: [DONE]`.

use serde_json::{Value, json};

use super::{BlockKind, Delta, Ev};
use crate::sse::Format;
use crate::translate::context::TranslateContext;
use crate::translate::errors::error_frame;
use crate::translate::mapping::{finish_to_chat, usage_to_chat};
use crate::translate::request::parts::ANTHROPIC_REASONING_FORMAT;
use crate::translate::util::frame;

pub(crate) struct ChatEncoder {
    ctx: TranslateContext,
    id: String,
    model: String,
    /// Neutral block index → its chat tool-call index (tool calls) or its
    /// `reasoning_details` index (reasoning).
    blocks: Vec<(usize, Option<u64>)>,
    tool_calls: u64,
    /// Reasoning and redacted blocks so far (their `reasoning_details` index).
    reasoning_blocks: u64,
    reasoning_texts: u32,
    finished: bool,
}

impl ChatEncoder {
    pub(crate) fn new(ctx: TranslateContext) -> Self {
        Self {
            model: ctx.model.clone(),
            ctx,
            id: String::new(),
            blocks: Vec::new(),
            tool_calls: 0,
            reasoning_blocks: 0,
            reasoning_texts: 0,
            finished: false,
        }
    }

    pub(crate) fn encode(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, model, .. } => {
                self.id = id;
                if !model.is_empty() {
                    self.model = model;
                }
                self.chunk(out, json!({"role": "assistant", "content": ""}), None);
            }
            Ev::BlockStart { index, kind } => self.block_start(index, kind, out),
            Ev::Delta { index, delta } => {
                let d = match delta {
                    Delta::Text(t) => json!({"content": t}),
                    Delta::Reasoning(t) => json!({"reasoning_content": t}),
                    Delta::Signature(sig) => json!({"reasoning_details": [{
                        "type": "reasoning.text",
                        "signature": sig,
                        "format": ANTHROPIC_REASONING_FORMAT,
                        "index": self.slot(index).unwrap_or_default(),
                    }]}),
                    Delta::Arguments(args) => match self.slot(index) {
                        Some(i) => {
                            json!({"tool_calls": [{"index": i, "function": {"arguments": args}}]})
                        }
                        None => return,
                    },
                };
                self.chunk(out, d, None);
            }
            Ev::BlockStop { .. } | Ev::Ping => {}
            Ev::Finish { reason, usage, .. } => {
                if self.finished {
                    return;
                }
                self.finished = true;
                self.chunk(out, json!({}), Some(finish_to_chat(&reason)));
                if self.ctx.include_usage {
                    let mut chunk = self.base();
                    if let Some(o) = chunk.as_object_mut() {
                        o.insert("choices".into(), json!([]));
                        o.insert("usage".into(), usage_to_chat(&usage));
                    }
                    frame(out, None, &chunk);
                }
            }
            Ev::End => {
                if !self.finished {
                    self.finished = true;
                    self.chunk(out, json!({}), Some("stop"));
                }
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
            Ev::Error(err) => out.extend(error_frame(Format::OpenAiChat, &err)),
        }
    }

    fn block_start(&mut self, index: usize, kind: BlockKind, out: &mut Vec<u8>) {
        match kind {
            BlockKind::Text => self.blocks.push((index, None)),
            BlockKind::Reasoning => {
                self.blocks.push((index, Some(self.reasoning_blocks)));
                self.reasoning_blocks += 1;
                self.reasoning_texts += 1;
                // Separate reasoning texts as the JSON body does.
                if self.reasoning_texts > 1 {
                    self.chunk(out, json!({"reasoning_content": "\n\n"}), None);
                }
            }
            BlockKind::Redacted(data) => {
                let slot = self.reasoning_blocks;
                self.blocks.push((index, Some(slot)));
                self.reasoning_blocks += 1;
                let details = json!({"reasoning_details": [{
                    "type": "reasoning.encrypted",
                    "data": data,
                    "format": ANTHROPIC_REASONING_FORMAT,
                    "index": slot,
                }]});
                self.chunk(out, details, None);
            }
            BlockKind::ToolCall { id, name } => {
                let i = self.tool_calls;
                self.tool_calls += 1;
                self.blocks.push((index, Some(i)));
                let call = json!({"tool_calls": [{
                    "index": i,
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }]});
                self.chunk(out, call, None);
            }
        }
    }

    fn slot(&self, index: usize) -> Option<u64> {
        self.blocks
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .and_then(|(_, t)| *t)
    }

    fn base(&self) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.ctx.created,
            "model": self.model,
        })
    }

    fn chunk(&self, out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
        let mut chunk = self.base();
        if let Some(o) = chunk.as_object_mut() {
            o.insert(
                "choices".into(),
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]),
            );
        }
        frame(out, None, &chunk);
    }
}
