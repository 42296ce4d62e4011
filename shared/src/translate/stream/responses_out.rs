//! Neutral events → OpenAI Responses stream.
//!
//! The start becomes `response.created` + `response.in_progress`. Each block becomes an output
//! item with the event families the Responses SDKs expect: text blocks a `message` item
//! (`content_part.added`, `output_text.delta`…`done`, `content_part.done`), reasoning a
//! `reasoning` item (`reasoning_summary_part.added` on the first text,
//! `reasoning_summary_text.delta`…`done`, `reasoning_summary_part.done`), tool calls a
//! `function_call` item (`function_call_arguments.delta`…`done`), each framed by
//! `output_item.added` / `output_item.done`. The end becomes `response.completed` (or
//! `response.incomplete` for length and content-filter stops) carrying every item and the
//! usage. Every event has its `sequence_number`.

use serde_json::{Value, json};

use super::{BlockKind, Delta, Ev};
use crate::sse::{FinishReason, Format, keep_alive_frame};
use crate::translate::context::TranslateContext;
use crate::translate::errors::error_frame;
use crate::translate::ir::{Block, TokenUsage};
use crate::translate::reasoning_codec::encrypted_content;
use crate::translate::response::responses::{
    function_call_item, item_id, message_item, reasoning_item, response_object,
};
use crate::translate::util::frame;

enum Kind {
    Message,
    Reasoning {
        signature: String,
        redacted: Option<String>,
        part_open: bool,
    },
    Call {
        call_id: String,
        name: String,
    },
}

struct Item {
    /// The neutral block index while the item is open.
    block: Option<usize>,
    id: String,
    kind: Kind,
    text: String,
    done: Value,
}

pub(crate) struct ResponsesEncoder {
    ctx: TranslateContext,
    id: String,
    model: String,
    seq: u64,
    items: Vec<Item>,
    finish: Option<(FinishReason, TokenUsage)>,
}

impl ResponsesEncoder {
    pub(crate) fn new(ctx: TranslateContext) -> Self {
        Self {
            model: ctx.model.clone(),
            ctx,
            id: String::new(),
            seq: 0,
            items: Vec::new(),
            finish: None,
        }
    }

    pub(crate) fn encode(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, model, .. } => {
                self.id = id;
                if !model.is_empty() {
                    self.model = model;
                }
                let response = self.response(None, Vec::new(), None);
                self.emit(out, "response.created", json!({"response": response}));
                let response = self.response(None, Vec::new(), None);
                self.emit(out, "response.in_progress", json!({"response": response}));
            }
            Ev::BlockStart { index, kind } => self.start(index, kind, out),
            Ev::Delta { index, delta } => self.delta(index, delta, out),
            Ev::BlockStop { index } => {
                if let Some(pos) = self.open(index) {
                    self.close(pos, out);
                }
            }
            Ev::Finish { reason, usage, .. } => {
                self.close_all(out);
                self.finish = Some((reason, usage));
            }
            Ev::End => {
                self.close_all(out);
                let (reason, usage) = self
                    .finish
                    .take()
                    .unwrap_or((FinishReason::Stop, TokenUsage::default()));
                let output = self.items.iter().map(|i| i.done.clone()).collect();
                let response = self.response(Some(&reason), output, Some(&usage));
                let name = match response.get("status").and_then(Value::as_str) {
                    Some("incomplete") => "response.incomplete",
                    _ => "response.completed",
                };
                self.emit(out, name, json!({"response": response}));
            }
            Ev::Error(err) => out.extend(error_frame(Format::OpenAiResponses, &err)),
            Ev::Ping => out.extend_from_slice(keep_alive_frame(Format::OpenAiResponses)),
        }
    }

    fn start(&mut self, index: usize, kind: BlockKind, out: &mut Vec<u8>) {
        let n = self.items.len();
        let (prefix, kind) = match kind {
            BlockKind::Text => ("msg", Kind::Message),
            BlockKind::Reasoning => (
                "rs",
                Kind::Reasoning {
                    signature: String::new(),
                    redacted: None,
                    part_open: false,
                },
            ),
            BlockKind::Redacted(data) => (
                "rs",
                Kind::Reasoning {
                    signature: String::new(),
                    redacted: Some(data),
                    part_open: false,
                },
            ),
            BlockKind::ToolCall { id, name } => ("fc", Kind::Call { call_id: id, name }),
        };
        let id = item_id(prefix, &self.id, n);
        let added = match &kind {
            Kind::Message => message_item(&id, None, "in_progress"),
            Kind::Reasoning { .. } => reasoning_item(&id, "", None),
            Kind::Call { call_id, name } => {
                function_call_item(&id, call_id, name, "", "in_progress")
            }
        };
        self.items.push(Item {
            block: Some(index),
            id: id.clone(),
            kind,
            text: String::new(),
            done: Value::Null,
        });
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": n, "item": added}),
        );
        if matches!(self.items.get(n).map(|i| &i.kind), Some(Kind::Message)) {
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            self.emit(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": n, "content_index": 0, "part": part}),
            );
        }
    }

    fn delta(&mut self, index: usize, delta: Delta, out: &mut Vec<u8>) {
        let Some(pos) = self.open(index) else { return };
        let Some(item) = self.items.get_mut(pos) else {
            return;
        };
        let id = item.id.clone();
        let (name, body) = match (&mut item.kind, delta) {
            (Kind::Message, Delta::Text(t)) => {
                item.text.push_str(&t);
                (
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": pos, "content_index": 0, "delta": t, "logprobs": []}),
                )
            }
            (Kind::Reasoning { part_open, .. }, Delta::Reasoning(t)) => {
                item.text.push_str(&t);
                if !*part_open {
                    *part_open = true;
                    let part = json!({"type": "summary_text", "text": ""});
                    self.emit(
                        out,
                        "response.reasoning_summary_part.added",
                        json!({"item_id": id, "output_index": pos, "summary_index": 0, "part": part}),
                    );
                }
                (
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": pos, "summary_index": 0, "delta": t}),
                )
            }
            (Kind::Reasoning { signature, .. }, Delta::Signature(s)) => {
                signature.push_str(&s);
                return;
            }
            (Kind::Call { .. }, Delta::Arguments(a)) => {
                item.text.push_str(&a);
                (
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": pos, "delta": a}),
                )
            }
            _ => return,
        };
        self.emit(out, name, body);
    }

    fn close(&mut self, pos: usize, out: &mut Vec<u8>) {
        let Some(item) = self.items.get_mut(pos) else {
            return;
        };
        item.block = None;
        let (id, text) = (item.id.clone(), item.text.clone());
        let mut events = Vec::new();
        let done = match &item.kind {
            Kind::Message => {
                let part = json!({"type": "output_text", "text": text, "annotations": []});
                events.push(("response.output_text.done", json!({"item_id": id, "output_index": pos, "content_index": 0, "text": text, "logprobs": []})));
                events.push((
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": pos, "content_index": 0, "part": part}),
                ));
                message_item(&id, Some(&text), "completed")
            }
            Kind::Reasoning {
                signature,
                redacted,
                part_open,
            } => {
                if *part_open {
                    let part = json!({"type": "summary_text", "text": text});
                    events.push(("response.reasoning_summary_text.done", json!({"item_id": id, "output_index": pos, "summary_index": 0, "text": text})));
                    events.push(("response.reasoning_summary_part.done", json!({"item_id": id, "output_index": pos, "summary_index": 0, "part": part})));
                }
                let block = match redacted {
                    Some(data) => Block::Redacted(data.clone()),
                    None => Block::Reasoning {
                        text: String::new(),
                        signature: Some(signature.clone()).filter(|s| !s.is_empty()),
                    },
                };
                reasoning_item(&id, &text, encrypted_content(&block).as_deref())
            }
            Kind::Call { call_id, name } => {
                events.push((
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": pos, "arguments": text}),
                ));
                function_call_item(&id, call_id, name, &text, "completed")
            }
        };
        item.done = done.clone();
        for (name, body) in events {
            self.emit(out, name, body);
        }
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": pos, "item": done}),
        );
    }

    fn close_all(&mut self, out: &mut Vec<u8>) {
        let open: Vec<usize> = (0..self.items.len())
            .filter(|&p| self.items.get(p).is_some_and(|i| i.block.is_some()))
            .collect();
        for pos in open {
            self.close(pos, out);
        }
    }

    /// The item position of the open block `index`.
    fn open(&self, index: usize) -> Option<usize> {
        self.items.iter().rposition(|i| i.block == Some(index))
    }

    fn response(
        &self,
        finish: Option<&FinishReason>,
        output: Vec<Value>,
        usage: Option<&TokenUsage>,
    ) -> Value {
        response_object(
            &self.ctx,
            &self.id,
            &self.model,
            self.ctx.created,
            finish,
            output,
            usage,
        )
    }

    /// One event: `type` and `sequence_number` first, then `body`'s fields.
    fn emit(&mut self, out: &mut Vec<u8>, name: &str, body: Value) {
        let mut data = json!({"type": name, "sequence_number": self.seq});
        self.seq += 1;
        if let (Some(d), Value::Object(b)) = (data.as_object_mut(), body) {
            d.extend(b);
        }
        frame(out, Some(name), &data);
    }
}
