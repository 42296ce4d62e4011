//! Mid-stream continuation, the pure parts: what a client-format OpenAI chat event says, the
//! transcript of a stream so far, whether a failed stream may be continued, the continuation
//! request body, and the rewrite that makes a continuation's chunks look like the client's
//! stream. The stream that does the I/O is [`super::seams`].
//!
//! Why: a plain-text stream that fails after the commit point has already given the client
//! part of its answer. With `midstream_continuation` on, another target is asked to go on from
//! the text so far, and its chunks are stitched into the same client response. That is only
//! sound when the answer so far is plain text: a tool call cut mid-arguments cannot be
//! resumed by another model, so a stream that showed any tool call is never continued.
//!
//! The continuation request is the client's body with two messages appended: the partial
//! answer as an `assistant` message, then a short `user` instruction to continue exactly
//! where it stopped. A trailing assistant message alone is read as a prefill by some
//! providers and ignored by others; the instruction makes every OpenAI-format upstream (and
//! every translated one) understand what is asked.

use bytes::Bytes;
use serde_json::{Value, json};
use switchyard_shared::sse::{Format, format_error_event};

/// The most assistant text kept per stream (256 KiB); past it the stream is not continued.
pub const MAX_TRANSCRIPT_BYTES: usize = 256 << 10;

/// The instruction appended after the partial answer.
pub const CONTINUE_INSTRUCTION: &str = "Your previous message was cut off. Continue it exactly \
     where it stopped, starting with the next character. Do not repeat any of it and do not \
     add a preamble.";

/// What one client-format OpenAI chat event carries, as far as continuation cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatEvent {
    /// `data: [DONE]`.
    pub done: bool,
    /// An `error` object: an in-band error event.
    pub error: bool,
    /// Content text of choice 0.
    pub text: Option<String>,
    /// A `tool_calls` (or legacy `function_call`) delta.
    pub tool_call: bool,
    /// A non-null `finish_reason`.
    pub finished: bool,
    /// A choice other than 0 (`n` > 1): not a single plain-text answer.
    pub other_choice: bool,
    /// A chunk with a role and nothing else: a stream's opening chunk.
    pub role_only: bool,
    /// The data was not a JSON object (nor `[DONE]`).
    pub opaque: bool,
}

/// Reads the `data` of one event (the `data:` lines joined). An event with no data (a
/// comment, a keep-alive) reads as the default: nothing.
pub fn inspect(data: &[u8]) -> ChatEvent {
    if data.is_empty() {
        return ChatEvent::default();
    }
    if data.trim_ascii() == b"[DONE]" {
        return ChatEvent {
            done: true,
            ..ChatEvent::default()
        };
    }
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(data) else {
        return ChatEvent {
            opaque: true,
            ..ChatEvent::default()
        };
    };
    let mut ev = ChatEvent {
        error: obj.get("error").is_some_and(|e| !e.is_null()),
        ..ChatEvent::default()
    };
    let choices = obj.get("choices").and_then(Value::as_array);
    for choice in choices.into_iter().flatten() {
        if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
            ev.other_choice = true;
            continue;
        }
        ev.finished |= choice.get("finish_reason").is_some_and(|f| !f.is_null());
        let Some(delta) = choice.get("delta").and_then(Value::as_object) else {
            continue;
        };
        let present = |k: &str| delta.get(k).is_some_and(|v| !v.is_null());
        ev.tool_call |= present("tool_calls") || present("function_call");
        let text = delta.get("content").and_then(Value::as_str).unwrap_or("");
        if !text.is_empty() {
            ev.text = Some(text.to_owned());
        }
        ev.role_only = present("role")
            && text.is_empty()
            && !ev.tool_call
            && !ev.finished
            && !present("reasoning_content")
            && !present("refusal");
    }
    ev.role_only &= obj.get("usage").is_none_or(Value::is_null);
    ev
}

/// The client stream's identity, rewritten into a continuation's chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamIds {
    pub id: Value,
    pub model: Value,
    pub created: Value,
}

impl StreamIds {
    /// The identity of a chunk, when it is a chunk with an `id`.
    pub fn of(data: &[u8]) -> Option<Self> {
        let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(data) else {
            return None;
        };
        let id = obj.get("id").filter(|v| v.is_string())?.clone();
        Some(Self {
            id,
            model: obj.get("model").cloned().unwrap_or(Value::Null),
            created: obj.get("created").cloned().unwrap_or(Value::Null),
        })
    }
}

/// A continuation's chunk with the client stream's `id`, `model` and `created` (fields the
/// chunk has), as a whole SSE event. `None` when `data` is not a JSON object.
pub fn rewrite_chunk(data: &[u8], ids: &StreamIds) -> Option<Bytes> {
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(data) else {
        return None;
    };
    for (key, value) in [
        ("id", &ids.id),
        ("model", &ids.model),
        ("created", &ids.created),
    ] {
        if let Some(slot) = obj.get_mut(key)
            && !value.is_null()
        {
            slot.clone_from(value);
        }
    }
    let mut out = b"data: ".to_vec();
    serde_json::to_writer(&mut out, &Value::Object(obj)).ok()?;
    out.extend_from_slice(b"\n\n");
    Some(Bytes::from(out))
}

/// Why a failed stream is not continued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A tool call was seen: it cannot be resumed by another upstream.
    ToolCall,
    /// The text so far passed [`MAX_TRANSCRIPT_BYTES`].
    TextCap,
    /// More than one choice, or a chunk that was not JSON: not one plain-text answer.
    NotPlainText,
    /// No text was forwarded (nothing to continue from).
    NoText,
    /// `max_continuations` were made already.
    Exhausted,
}

impl Refusal {
    /// The metric outcome.
    pub fn outcome(self) -> &'static str {
        match self {
            Self::Exhausted => "exhausted",
            _ => "refused",
        }
    }
}

/// The assistant text a stream forwarded so far, and what rules continuation out.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    text: String,
    overflow: bool,
    tool_call: bool,
    not_plain: bool,
}

impl Transcript {
    /// Takes in one forwarded event.
    pub fn observe(&mut self, ev: &ChatEvent) {
        self.tool_call |= ev.tool_call;
        self.not_plain |= ev.other_choice || ev.opaque;
        if let Some(text) = &ev.text
            && !self.overflow
        {
            if self.text.len() + text.len() > MAX_TRANSCRIPT_BYTES {
                // Past the cap the copy is useless: free it, continuation is off.
                self.overflow = true;
                self.text = String::new();
            } else {
                self.text.push_str(text);
            }
        }
    }

    /// The text forwarded so far.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Whether a stream that failed (no `[DONE]`, no finish reason) may be continued, after
/// `made` continuations of at most `max`.
pub fn may_continue(t: &Transcript, made: u32, max: u32) -> Result<(), Refusal> {
    if t.tool_call {
        return Err(Refusal::ToolCall);
    }
    if t.overflow {
        return Err(Refusal::TextCap);
    }
    if t.not_plain {
        return Err(Refusal::NotPlainText);
    }
    if t.text.is_empty() {
        return Err(Refusal::NoText);
    }
    if made >= max {
        return Err(Refusal::Exhausted);
    }
    Ok(())
}

/// The continuation request: the client's Chat Completions body with the partial answer as an
/// `assistant` message and [`CONTINUE_INSTRUCTION`] as a `user` message appended, and
/// `stream: true`. `Err` when the body is not an object with a `messages` list.
pub fn continuation_body(raw: &[u8], text_so_far: &str) -> Result<Bytes, &'static str> {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(raw) else {
        return Err("the body is not a JSON object");
    };
    let Some(Value::Array(messages)) = body.get_mut("messages") else {
        return Err("the body has no list of messages");
    };
    messages.push(json!({"role": "assistant", "content": text_so_far}));
    messages.push(json!({"role": "user", "content": CONTINUE_INSTRUCTION}));
    body.insert("stream".to_owned(), Value::Bool(true));
    // One answer only: continuation is for a single plain-text choice.
    body.remove("n");
    serde_json::to_vec(&Value::Object(body))
        .map(Bytes::from)
        .map_err(|_| "the body cannot be written")
}

/// The client-visible error event when a continuation could not start (OpenAI chat shape).
pub fn failed_event(reason: &str) -> Bytes {
    let message = format!(
        "The upstream stream failed before completion and could not be continued: {reason}"
    );
    Bytes::from(format_error_event(
        Format::OpenAiChat,
        "server_error",
        "STREAM_CONTINUATION_FAILED",
        &message,
    ))
}

#[cfg(test)]
#[path = "continuation_tests.rs"]
mod tests;
