//! Neutral events → Anthropic Messages stream.
//!
//! Blocks are renumbered from 0 in order of appearance. `message_start` reports the usage
//! known at the start (from a chat provider: none yet, so zeros); `message_delta` reports the
//! full usage, input and cache counts included, which the Anthropic SDKs merge in. Open blocks
//! are closed before `message_delta`, and a stream that ends without a finish still gets one
//! (`end_turn`), so the client always sees a well-formed sequence.

use serde_json::{Value, json};

use super::{BlockKind, Delta, Ev};
use crate::sse::{FinishReason, Format, keep_alive_frame};
use crate::translate::context::TranslateContext;
use crate::translate::errors::error_frame;
use crate::translate::ir::TokenUsage;
use crate::translate::mapping::{finish_to_anthropic, usage_to_anthropic};
use crate::translate::util::{anthropic_tool_id, frame};

pub(crate) struct AnthropicEncoder {
    ctx: TranslateContext,
    /// Neutral index → Anthropic index, and whether the block is still open.
    blocks: Vec<(usize, usize, bool)>,
    finished: bool,
}

impl AnthropicEncoder {
    pub(crate) fn new(ctx: TranslateContext) -> Self {
        Self {
            ctx,
            blocks: Vec::new(),
            finished: false,
        }
    }

    pub(crate) fn encode(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, model, usage } => {
                let model = if model.is_empty() {
                    self.ctx.model.clone()
                } else {
                    model
                };
                let message = json!({
                    "id": id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": usage_to_anthropic(&usage),
                });
                emit(
                    out,
                    "message_start",
                    json!({"type": "message_start", "message": message}),
                );
            }
            Ev::BlockStart { index, kind } => {
                let own = self.blocks.len();
                self.blocks.push((index, own, true));
                let block = match kind {
                    BlockKind::Text => json!({"type": "text", "text": ""}),
                    BlockKind::Reasoning => {
                        json!({"type": "thinking", "thinking": "", "signature": ""})
                    }
                    BlockKind::Redacted(data) => json!({"type": "redacted_thinking", "data": data}),
                    BlockKind::ToolCall { id, name } => json!({
                        "type": "tool_use",
                        "id": anthropic_tool_id(&id),
                        "name": name,
                        "input": {},
                    }),
                };
                emit(
                    out,
                    "content_block_start",
                    json!({"type": "content_block_start", "index": own, "content_block": block}),
                );
            }
            Ev::Delta { index, delta } => {
                let Some(own) = self.own(index) else { return };
                let delta = match delta {
                    Delta::Text(t) => json!({"type": "text_delta", "text": t}),
                    Delta::Reasoning(t) => json!({"type": "thinking_delta", "thinking": t}),
                    Delta::Signature(s) => json!({"type": "signature_delta", "signature": s}),
                    Delta::Arguments(a) => json!({"type": "input_json_delta", "partial_json": a}),
                };
                emit(
                    out,
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": own, "delta": delta}),
                );
            }
            Ev::BlockStop { index } => {
                if let Some(own) = self.own(index) {
                    self.stop(own, out);
                }
            }
            Ev::Finish {
                reason,
                stop_sequence,
                usage,
            } => self.finish(&reason, stop_sequence, &usage, out),
            Ev::End => {
                if !self.finished {
                    self.finish(&FinishReason::Stop, None, &TokenUsage::default(), out);
                }
                emit(out, "message_stop", json!({"type": "message_stop"}));
            }
            Ev::Error(err) => out.extend(error_frame(Format::Anthropic, &err)),
            Ev::Ping => out.extend_from_slice(keep_alive_frame(Format::Anthropic)),
        }
    }

    fn finish(
        &mut self,
        reason: &FinishReason,
        stop_sequence: Option<String>,
        usage: &TokenUsage,
        out: &mut Vec<u8>,
    ) {
        if self.finished {
            return;
        }
        self.finished = true;
        let open: Vec<usize> = self.blocks.iter().filter(|b| b.2).map(|b| b.1).collect();
        for own in open {
            self.stop(own, out);
        }
        let delta = json!({
            "stop_reason": finish_to_anthropic(reason, stop_sequence.is_some()),
            "stop_sequence": stop_sequence,
        });
        emit(
            out,
            "message_delta",
            json!({"type": "message_delta", "delta": delta, "usage": usage_to_anthropic(usage)}),
        );
    }

    /// The Anthropic index of an open block.
    fn own(&self, index: usize) -> Option<usize> {
        self.blocks
            .iter()
            .rev()
            .find(|b| b.0 == index && b.2)
            .map(|b| b.1)
    }

    fn stop(&mut self, own: usize, out: &mut Vec<u8>) {
        if let Some(b) = self.blocks.get_mut(own) {
            b.2 = false;
        }
        emit(
            out,
            "content_block_stop",
            json!({"type": "content_block_stop", "index": own}),
        );
    }
}

fn emit(out: &mut Vec<u8>, name: &str, data: Value) {
    frame(out, Some(name), &data);
}
