//! OpenAI `chat.completion.chunk` stream → neutral events.
//!
//! Chat streams have no block boundaries: a run of `content` deltas is a text block, a run of
//! `reasoning_content` (or `reasoning`) deltas a reasoning block, and each new `tool_calls`
//! index a tool-call block; switching kind closes the open block. The finish is held back until
//! the usage chunk that `include_usage` puts after it (or `[DONE]`), so the neutral finish
//! carries the usage, as Anthropic's `message_delta` and Responses' `response.completed` need.

use serde_json::Value;

use super::{BlockKind, Delta, Ev};
use crate::sse::{FinishReason, Format, SseEvent, inspect};
use crate::translate::ir::TokenUsage;
use crate::translate::mapping::{finish_from_chat, usage_from_openai};
use crate::translate::request::parts::ANTHROPIC_REASONING_FORMAT;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Reasoning,
    /// The n-th tool call.
    Tool(usize),
}

#[derive(Debug, Default)]
pub(crate) struct ChatDecoder {
    started: bool,
    open: Option<(usize, Open)>,
    next: usize,
    /// Tool calls seen: chat `index` (when sent), id, neutral block index.
    tools: Vec<(Option<u64>, String, usize)>,
    /// The `reasoning_details` index of the open reasoning block.
    detail: Option<u64>,
    finish: Option<FinishReason>,
    usage: Option<TokenUsage>,
    finish_sent: bool,
    ended: bool,
}

impl ChatDecoder {
    pub(crate) fn decode(&mut self, event: &SseEvent<'_>, out: &mut Vec<Ev>) {
        if self.ended {
            return;
        }
        let data = event.data.trim_ascii();
        if data == b"[DONE]" {
            self.end(out);
            return;
        }
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            if event.event == Some(b"error") {
                self.error(event, out);
            }
            return;
        };
        if event.event == Some(b"error") || chunk.get("error").is_some_and(|e| !e.is_null()) {
            self.error(event, out);
            return;
        }
        if !self.started {
            self.started = true;
            let s = |k: &str| {
                chunk
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            out.push(Ev::Start {
                id: s("id"),
                model: s("model"),
                usage: TokenUsage::default(),
            });
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(choice) = choice {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.close(out);
                self.finish = Some(finish_from_chat(reason));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage_from_openai(usage));
        }
        if self.finish.is_some() && self.usage.is_some() {
            self.send_finish(out);
        }
    }

    /// End of the upstream stream without `[DONE]`: complete only if a finish was seen.
    pub(crate) fn finish(&mut self, out: &mut Vec<Ev>) {
        if !self.ended && self.finish.is_some() {
            self.end(out);
        }
    }

    fn error(&mut self, event: &SseEvent<'_>, out: &mut Vec<Ev>) {
        if let Some(err) = inspect(Format::OpenAiChat, event).error {
            out.push(Ev::Error(err));
        }
    }

    fn end(&mut self, out: &mut Vec<Ev>) {
        self.close(out);
        self.send_finish(out);
        out.push(Ev::End);
        self.ended = true;
    }

    fn send_finish(&mut self, out: &mut Vec<Ev>) {
        if self.finish_sent {
            return;
        }
        self.finish_sent = true;
        out.push(Ev::Finish {
            reason: self.finish.clone().unwrap_or(FinishReason::Stop),
            stop_sequence: None,
            usage: self.usage.unwrap_or_default(),
        });
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<Ev>) {
        let text = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let details = delta
            .get("reasoning_details")
            .and_then(Value::as_array)
            .filter(|d| !d.is_empty());
        match details {
            Some(details) => self.details(details, out),
            None => {
                if let Some(r) = text("reasoning_content").or_else(|| text("reasoning")) {
                    let index = self.ensure(Open::Reasoning, out);
                    out.push(delta_ev(index, Delta::Reasoning(r.to_owned())));
                }
            }
        }
        for key in ["content", "refusal"] {
            if let Some(t) = text(key) {
                let index = self.ensure(Open::Text, out);
                out.push(delta_ev(index, Delta::Text(t.to_owned())));
            }
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let s = |v: &Value, k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let f = call.get("function").unwrap_or(&Value::Null);
            let (key, id) = (call.get("index").and_then(Value::as_u64), s(call, "id"));
            // Calls are keyed by `index`; servers that omit it (Gemini) send each call whole,
            // told apart by id.
            let known = match key {
                Some(k) => self.tools.iter().find(|t| t.0 == Some(k)),
                None if !id.is_empty() => self.tools.iter().find(|t| t.1 == id),
                None => self.tools.last(),
            };
            let index = match known {
                Some(t) => t.2,
                None => {
                    let kind = BlockKind::ToolCall {
                        id: id.clone(),
                        name: s(f, "name"),
                    };
                    let n = self.open_new(Open::Tool(self.tools.len()), kind, out);
                    self.tools.push((key, id, n));
                    n
                }
            };
            if let Some(args) = f
                .get("arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                out.push(delta_ev(index, Delta::Arguments(args.to_owned())));
            }
        }
    }

    /// OpenRouter-style `reasoning_details`: text, Claude signatures, Claude redacted data.
    fn details(&mut self, details: &[Value], out: &mut Vec<Ev>) {
        for d in details {
            let s = |k: &str| d.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            let ours = matches!(s("format"), None | Some(ANTHROPIC_REASONING_FORMAT));
            match s("type") {
                Some("reasoning.text" | "reasoning.summary") => {
                    // A new detail index is a new reasoning block (it has its own signature).
                    let detail = d.get("index").and_then(Value::as_u64);
                    if detail.is_some()
                        && detail != self.detail
                        && matches!(self.open, Some((_, Open::Reasoning)))
                    {
                        self.close(out);
                    }
                    self.detail = detail;
                    if let Some(t) = s("text").or_else(|| s("summary")) {
                        let index = self.ensure(Open::Reasoning, out);
                        out.push(delta_ev(index, Delta::Reasoning(t.to_owned())));
                    }
                    if let Some(sig) = s("signature").filter(|_| ours) {
                        let index = self.ensure(Open::Reasoning, out);
                        out.push(delta_ev(index, Delta::Signature(sig.to_owned())));
                    }
                }
                Some("reasoning.encrypted") if ours => {
                    if let Some(data) = s("data") {
                        let index = self.open_new(
                            Open::Reasoning,
                            BlockKind::Redacted(data.to_owned()),
                            out,
                        );
                        out.push(Ev::BlockStop { index });
                        self.open = None;
                    }
                }
                _ => {}
            }
        }
    }

    /// The index of an open block of `kind`, opening one if needed.
    fn ensure(&mut self, kind: Open, out: &mut Vec<Ev>) -> usize {
        match self.open {
            Some((index, open)) if open == kind => index,
            _ => {
                let block = match kind {
                    Open::Text => BlockKind::Text,
                    _ => BlockKind::Reasoning,
                };
                self.open_new(kind, block, out)
            }
        }
    }

    fn open_new(&mut self, open: Open, kind: BlockKind, out: &mut Vec<Ev>) -> usize {
        self.close(out);
        let index = self.next;
        self.next += 1;
        out.push(Ev::BlockStart { index, kind });
        self.open = Some((index, open));
        index
    }

    fn close(&mut self, out: &mut Vec<Ev>) {
        if let Some((index, _)) = self.open.take() {
            out.push(Ev::BlockStop { index });
        }
    }
}

fn delta_ev(index: usize, delta: Delta) -> Ev {
    Ev::Delta { index, delta }
}
