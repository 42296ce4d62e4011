//! Anthropic Messages (`message`, the `message_start` … `message_stop` event stream), its
//! model list and its error envelope.
//!
//! Messages and events are typed structs (see the OpenAI module for why); serde's internal
//! tagging puts `type` first, as the API does.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{ErrorInfo, Frame, Reply, sse_event};
use crate::ids;

/// Anthropic's error `type` and message for an HTTP status.
pub(crate) fn error_for_status(status: u16) -> ErrorInfo {
    let (kind, message) = match status {
        401 => ("authentication_error", "invalid x-api-key"),
        403 => (
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        404 => (
            "not_found_error",
            "The requested resource could not be found.",
        ),
        413 => (
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        ),
        429 => (
            "rate_limit_error",
            "Number of requests has exceeded your per-minute rate limit.",
        ),
        504 => ("timeout_error", "Request timed out."),
        529 => ("overloaded_error", "Overloaded"),
        400..=499 => ("invalid_request_error", "Invalid request."),
        _ => ("api_error", "Internal server error"),
    };
    ErrorInfo {
        kind: kind.to_owned(),
        message: message.to_owned(),
        code: None,
    }
}

/// `{"type":"error","error":{"type","message"},"request_id"}`; the id matches the
/// response's `request-id` header when there is one.
pub(crate) fn error_body(err: &ErrorInfo, request_id: Option<&str>) -> Value {
    json!({
        "type": "error",
        "error": {"type": err.kind, "message": err.message},
        "request_id": request_id.map_or_else(ids::anthropic_request, str::to_owned),
    })
}

/// The in-band `event: error` an Anthropic stream ends with on failure.
pub(crate) fn error_frame(err: &ErrorInfo) -> Bytes {
    sse_event(
        "error",
        &json!({"type": "error", "error": {"type": err.kind, "message": err.message}}),
    )
}

/// Anthropic's keep-alive event.
pub(crate) fn ping_frame() -> Bytes {
    Event::Ping.frame()
}

// === wire structs ===

#[derive(Serialize)]
struct Usage {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    output_tokens: u64,
    service_tier: &'static str,
}

/// A content block, tagged by `type` as the API does.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
}

#[derive(Serialize)]
struct Message<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<Block<'a>>,
    stop_reason: Option<&'static str>,
    stop_sequence: Option<()>,
    usage: Usage,
}

/// A block delta; the tag is the variant name plus `_delta` (`text_delta`, …).
#[derive(Serialize)]
#[serde(tag = "type")]
enum BlockDelta<'a> {
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "signature_delta")]
    Signature { signature: &'a str },
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

#[derive(Serialize)]
struct OutputUsage {
    output_tokens: u64,
}

/// One streamed event; the `type` tag doubles as the SSE `event:` name.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event<'a> {
    MessageStart {
        message: Message<'a>,
    },
    ContentBlockStart {
        index: u32,
        content_block: Block<'a>,
    },
    Ping,
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta<'a>,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        delta: StopDelta,
        usage: OutputUsage,
    },
    MessageStop,
}

impl Event<'_> {
    fn name(&self) -> &'static str {
        match self {
            Event::MessageStart { .. } => "message_start",
            Event::ContentBlockStart { .. } => "content_block_start",
            Event::Ping => "ping",
            Event::ContentBlockDelta { .. } => "content_block_delta",
            Event::ContentBlockStop { .. } => "content_block_stop",
            Event::MessageDelta { .. } => "message_delta",
            Event::MessageStop => "message_stop",
        }
    }

    fn frame(&self) -> Bytes {
        sse_event(self.name(), self)
    }
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.tool_call.is_some() {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn has_text_block(reply: &Reply) -> bool {
    reply.chunks > 0 || (reply.reasoning_chunks == 0 && reply.tool_call.is_none())
}

fn usage(reply: &Reply, output_tokens: u64) -> Usage {
    Usage {
        input_tokens: reply.input_tokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens,
        service_tier: "standard",
    }
}

/// A non-streamed `message`, serialised.
pub(crate) fn message_json(reply: &Reply) -> Bytes {
    let thinking = reply.reasoning();
    let signature = ids::anthropic_signature();
    let text = reply.text();
    let tool_id = ids::anthropic_tool_use();
    let mut content = Vec::with_capacity(3);
    if reply.reasoning_chunks > 0 {
        content.push(Block::Thinking {
            thinking: &thinking,
            signature: &signature,
        });
    }
    if has_text_block(reply) {
        content.push(Block::Text { text: &text });
    }
    if let Some(tool) = &reply.tool_call {
        content.push(Block::ToolUse {
            id: &tool_id,
            name: &tool.name,
            input: &tool.arguments,
        });
    }
    let id = ids::anthropic_message();
    super::serialize(&Message {
        id: &id,
        kind: "message",
        role: "assistant",
        model: &reply.model,
        content,
        stop_reason: Some(stop_reason(reply)),
        stop_sequence: None,
        usage: usage(reply, reply.output_tokens()),
    })
}

/// The event stream of a Messages call, in the order the API sends it: `message_start`, then
/// per content block `content_block_start` / deltas / `content_block_stop` (with one `ping`
/// after the first block start), then `message_delta` and `message_stop`.
pub(crate) fn message_frames(reply: &Reply) -> Vec<Frame> {
    let mut frames =
        Vec::with_capacity(reply.chunks as usize + reply.reasoning_chunks as usize + 12);
    let id = ids::anthropic_message();
    frames.push(Frame::meta(
        Event::MessageStart {
            message: Message {
                id: &id,
                kind: "message",
                role: "assistant",
                model: &reply.model,
                content: Vec::new(),
                stop_reason: None,
                stop_sequence: None,
                usage: usage(reply, 1),
            },
        }
        .frame(),
    ));

    let mut next_index = 0u32;
    let mut start_block = |frames: &mut Vec<Frame>, block: Block<'_>| {
        let index = next_index;
        next_index += 1;
        frames.push(Frame::meta(
            Event::ContentBlockStart {
                index,
                content_block: block,
            }
            .frame(),
        ));
        if index == 0 {
            frames.push(Frame::meta(Event::Ping.frame()));
        }
        index
    };
    let delta =
        |index: u32, delta: BlockDelta<'_>| Event::ContentBlockDelta { index, delta }.frame();
    let stop = |index: u32| Frame::meta(Event::ContentBlockStop { index }.frame());

    if reply.reasoning_chunks > 0 {
        let i = start_block(
            &mut frames,
            Block::Thinking {
                thinking: "",
                signature: "",
            },
        );
        for n in 0..reply.reasoning_chunks {
            frames.push(Frame::content(delta(
                i,
                BlockDelta::Thinking {
                    thinking: Reply::thought(n),
                },
            )));
        }
        let signature = ids::anthropic_signature();
        frames.push(Frame::meta(delta(
            i,
            BlockDelta::Signature {
                signature: &signature,
            },
        )));
        frames.push(stop(i));
    }
    if has_text_block(reply) {
        let i = start_block(&mut frames, Block::Text { text: "" });
        for n in 0..reply.chunks {
            frames.push(Frame::content(delta(
                i,
                BlockDelta::Text {
                    text: reply.piece(n),
                },
            )));
        }
        frames.push(stop(i));
    }
    if let (Some(tool), Some((_, pieces))) = (&reply.tool_call, reply.tool_arguments()) {
        let tool_id = ids::anthropic_tool_use();
        let empty = Value::Object(serde_json::Map::new());
        let i = start_block(
            &mut frames,
            Block::ToolUse {
                id: &tool_id,
                name: &tool.name,
                input: &empty,
            },
        );
        for piece in &pieces {
            frames.push(Frame::content(delta(
                i,
                BlockDelta::InputJson {
                    partial_json: piece,
                },
            )));
        }
        frames.push(stop(i));
    }

    frames.push(Frame::trailer(
        Event::MessageDelta {
            delta: StopDelta {
                stop_reason: stop_reason(reply),
                stop_sequence: None,
            },
            usage: OutputUsage {
                output_tokens: reply.output_tokens(),
            },
        }
        .frame(),
    ));
    frames.push(Frame::trailer(Event::MessageStop.frame()));
    frames
}

/// `GET /v1/models` in Anthropic's list shape (asked for with an `anthropic-version` header).
pub(crate) fn models_json(models: &[String]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|m| {
            json!({
                "type": "model",
                "id": m,
                "display_name": m,
                "created_at": "2025-09-29T00:00:00Z",
            })
        })
        .collect();
    json!({
        "data": data,
        "has_more": false,
        "first_id": models.first(),
        "last_id": models.last(),
    })
}
