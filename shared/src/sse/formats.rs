//! The three wire formats' event shapes, as small borrowed serde structs.
//!
//! Each function maps one event's name and (trimmed) data to an [`EventInfo`] following the
//! rules in [`super::inspect`]. Unparseable data is `Other`, or a raw error when the event is
//! named `error`.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::inspect::{EventInfo, EventKind, FinishReason, UpstreamStreamError, Usage};
use super::json::{Shape, Typed, WireError, WireUsage, error_info};

// ---- OpenAI chat completions ---------------------------------------------------------------

#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow)]
    choices: Option<Vec<ChatChoice<'a>>>,
    usage: Option<WireUsage>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ChatChoice<'a> {
    delta: Option<ChatDelta>,
    #[serde(default)]
    text: Shape,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChatDelta {
    #[serde(default)]
    content: Shape,
    #[serde(default)]
    refusal: Shape,
    #[serde(default)]
    reasoning_content: Shape,
    #[serde(default)]
    reasoning: Shape,
    #[serde(default)]
    reasoning_details: Shape,
    #[serde(default)]
    tool_calls: Shape,
    #[serde(default)]
    function_call: Shape,
}

pub(super) fn chat(name: Option<&[u8]>, data: &[u8]) -> EventInfo {
    if data == b"[DONE]" {
        return EventInfo::of(EventKind::Done);
    }
    let Ok(chunk) = serde_json::from_slice::<ChatChunk<'_>>(data) else {
        return match name {
            Some(b"error") => error_info(data),
            _ => EventInfo::of(EventKind::Other),
        };
    };
    if chunk.error.is_some() || name == Some(b"error") {
        return error_info(data);
    }
    let (mut text, mut tool, mut reasoning) = (0, false, false);
    let mut info = EventInfo::default();
    for choice in chunk.choices.into_iter().flatten() {
        text += choice.text.text;
        if let Some(d) = choice.delta {
            text += d.content.text + d.refusal.text;
            tool |= d.tool_calls.present || d.function_call.present;
            reasoning |= d.reasoning_content.present || d.reasoning.present;
            reasoning |= d.reasoning_details.present;
        }
        if let Some(reason) = choice.finish_reason {
            info.finish_reason = Some(FinishReason::from_upstream(&reason));
        }
    }
    info.usage = chunk.usage.map(Usage::from);
    info.useful_text_bytes = text;
    info.kind = if text > 0 {
        EventKind::Content
    } else if tool {
        EventKind::ToolCall
    } else if reasoning {
        EventKind::Reasoning
    } else if info.usage.is_some() {
        EventKind::Usage
    } else {
        EventKind::Other
    };
    info
}

// ---- Anthropic messages --------------------------------------------------------------------

#[derive(Deserialize)]
struct AnthEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    delta: Option<AnthDelta<'a>>,
    usage: Option<WireUsage>,
    message: Option<AnthMessage>,
    #[serde(borrow)]
    content_block: Option<Typed<'a>>,
}

#[derive(Deserialize)]
struct AnthDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    text: Shape,
    #[serde(borrow)]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct AnthMessage {
    usage: Option<WireUsage>,
}

pub(super) fn anthropic(name: Option<&[u8]>, data: &[u8]) -> EventInfo {
    match name {
        Some(b"error") => return error_info(data),
        Some(b"message_stop") => return EventInfo::of(EventKind::Done),
        Some(b"content_block_stop") => return EventInfo::of(EventKind::Other),
        _ => {}
    }
    let Ok(ev) = serde_json::from_slice::<AnthEvent<'_>>(data) else {
        return EventInfo::of(EventKind::Other);
    };
    let kind = name
        .or(ev.kind.as_deref().map(str::as_bytes))
        .unwrap_or_default();
    match kind {
        b"ping" => EventInfo::of(EventKind::Ping),
        b"message_stop" => EventInfo::of(EventKind::Done),
        b"error" => error_info(data),
        b"message_start" => EventInfo {
            usage: ev.message.and_then(|m| m.usage).map(Usage::from),
            ..EventInfo::default()
        },
        b"message_delta" => EventInfo {
            kind: EventKind::Usage,
            usage: ev.usage.map(Usage::from),
            finish_reason: ev
                .delta
                .and_then(|d| d.stop_reason)
                .map(|r| FinishReason::from_upstream(&r)),
            ..EventInfo::default()
        },
        b"content_block_start" => match ev.content_block.and_then(|b| b.kind).as_deref() {
            // Redacted thinking arrives whole in the start event, with no deltas.
            Some("redacted_thinking") => EventInfo::of(EventKind::Reasoning),
            _ => EventInfo::of(EventKind::Other),
        },
        b"content_block_delta" => {
            let Some(delta) = ev.delta else {
                return EventInfo::of(EventKind::Other);
            };
            match delta.kind.as_deref() {
                Some("text_delta") if delta.text.text > 0 => EventInfo {
                    useful_text_bytes: delta.text.text,
                    ..EventInfo::of(EventKind::Content)
                },
                Some("thinking_delta" | "signature_delta") => EventInfo::of(EventKind::Reasoning),
                Some("input_json_delta") => EventInfo::of(EventKind::ToolCall),
                _ => EventInfo::of(EventKind::Other),
            }
        }
        _ => EventInfo::of(EventKind::Other),
    }
}

// ---- OpenAI Responses ----------------------------------------------------------------------

#[derive(Deserialize)]
struct RespEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    delta: Shape,
    #[serde(borrow)]
    item: Option<Typed<'a>>,
    #[serde(borrow)]
    response: Option<RespBody<'a>>,
}

#[derive(Deserialize)]
struct RespBody<'a> {
    usage: Option<WireUsage>,
    #[serde(borrow)]
    incomplete_details: Option<RespIncomplete<'a>>,
}

#[derive(Deserialize)]
struct RespIncomplete<'a> {
    #[serde(borrow)]
    reason: Option<Cow<'a, str>>,
}

pub(super) fn responses(name: Option<&[u8]>, data: &[u8]) -> EventInfo {
    if name == Some(b"error") {
        return error_info(data);
    }
    let Ok(ev) = serde_json::from_slice::<RespEvent<'_>>(data) else {
        return EventInfo::of(EventKind::Other);
    };
    let kind = name
        .or(ev.kind.as_deref().map(str::as_bytes))
        .unwrap_or_default();
    match kind {
        b"error" => error_info(data),
        b"response.failed" => match serde_json::from_slice::<FailedEvent<'_>>(data) {
            Ok(FailedEvent {
                response: Some(FailedBody { error: Some(e) }),
            }) => EventInfo {
                error: Some(e.into_error()),
                ..EventInfo::of(EventKind::Error)
            },
            _ => EventInfo {
                error: Some(UpstreamStreamError::new(
                    "server_error",
                    "response failed",
                    None,
                )),
                ..EventInfo::of(EventKind::Error)
            },
        },
        b"response.output_text.delta" | b"response.refusal.delta" if ev.delta.text > 0 => {
            EventInfo {
                useful_text_bytes: ev.delta.text,
                ..EventInfo::of(EventKind::Content)
            }
        }
        b"response.completed" | b"response.incomplete" => {
            let body = ev.response;
            let reason = match body.as_ref().and_then(|b| b.incomplete_details.as_ref()) {
                Some(RespIncomplete { reason: Some(r) }) => FinishReason::from_upstream(r),
                _ if kind == b"response.incomplete" => FinishReason::Other("incomplete".into()),
                _ => FinishReason::Stop,
            };
            EventInfo {
                usage: body.and_then(|b| b.usage).map(Usage::from),
                finish_reason: Some(reason),
                ..EventInfo::of(EventKind::Done)
            }
        }
        b"response.output_item.added" | b"response.output_item.done" => {
            match ev.item.and_then(|i| i.kind).as_deref() {
                Some("reasoning") => EventInfo::of(EventKind::Reasoning),
                Some(t) if t.ends_with("_call") => EventInfo::of(EventKind::ToolCall),
                _ => EventInfo::of(EventKind::Other),
            }
        }
        k if k.starts_with(b"response.reasoning") => EventInfo::of(EventKind::Reasoning),
        k if memchr::memmem::find(k, b"_call").is_some() => EventInfo::of(EventKind::ToolCall),
        _ => EventInfo::of(EventKind::Other),
    }
}

#[derive(Deserialize)]
struct FailedEvent<'a> {
    #[serde(borrow)]
    response: Option<FailedBody<'a>>,
}

#[derive(Deserialize)]
struct FailedBody<'a> {
    #[serde(borrow)]
    error: Option<WireError<'a>>,
}
