//! Anthropic Messages (`message`, the `message_start` … `message_stop` event stream), its
//! model list and its error envelope.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{ErrorInfo, Frame, Reply, sse_event};
use crate::mock_upstream::ids;

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
    sse_event("ping", &json!({"type": "ping"}))
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

/// A non-streamed `message`.
pub(crate) fn message_json(reply: &Reply) -> Value {
    let mut content = Vec::new();
    if reply.reasoning_chunks > 0 {
        content.push(json!({
            "type": "thinking",
            "thinking": reply.reasoning(),
            "signature": ids::anthropic_signature(),
        }));
    }
    if has_text_block(reply) {
        content.push(json!({"type": "text", "text": reply.text()}));
    }
    if let Some(tool) = &reply.tool_call {
        content.push(json!({
            "type": "tool_use",
            "id": ids::anthropic_tool_use(),
            "name": tool.name,
            "input": tool.arguments,
        }));
    }
    json!({
        "id": ids::anthropic_message(),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": {
            "input_tokens": reply.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": reply.output_tokens(),
            "service_tier": "standard",
        },
    })
}

/// The event stream of a Messages call, in the order the API sends it: `message_start`, then
/// per content block `content_block_start` / deltas / `content_block_stop` (with one `ping`
/// after the first block start), then `message_delta` and `message_stop`.
pub(crate) fn message_frames(reply: &Reply) -> Vec<Frame> {
    let mut frames =
        Vec::with_capacity(reply.chunks as usize + reply.reasoning_chunks as usize + 12);
    frames.push(Frame::meta(sse_event(
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": ids::anthropic_message(),
                "type": "message",
                "role": "assistant",
                "model": reply.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": reply.input_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                    "service_tier": "standard",
                },
            },
        }),
    )));

    let mut index = 0u32;
    let mut start_block = |frames: &mut Vec<Frame>, block: Value| {
        frames.push(Frame::meta(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        )));
        if index == 0 {
            frames.push(Frame::meta(ping_frame()));
        }
        let this = index;
        index += 1;
        this
    };
    let delta = |i: u32, delta: Value| {
        sse_event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": i, "delta": delta}),
        )
    };
    let stop = |i: u32| {
        sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        )
    };

    if reply.reasoning_chunks > 0 {
        let i = start_block(
            &mut frames,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        );
        for n in 0..reply.reasoning_chunks {
            frames.push(Frame::content(delta(
                i,
                json!({"type": "thinking_delta", "thinking": Reply::thought(n)}),
            )));
        }
        frames.push(Frame::meta(delta(
            i,
            json!({"type": "signature_delta", "signature": ids::anthropic_signature()}),
        )));
        frames.push(Frame::meta(stop(i)));
    }
    if has_text_block(reply) {
        let i = start_block(&mut frames, json!({"type": "text", "text": ""}));
        for n in 0..reply.chunks {
            frames.push(Frame::content(delta(
                i,
                json!({"type": "text_delta", "text": Reply::word(n)}),
            )));
        }
        frames.push(Frame::meta(stop(i)));
    }
    if let (Some(tool), Some((_, pieces))) = (&reply.tool_call, reply.tool_arguments()) {
        let i = start_block(
            &mut frames,
            json!({"type": "tool_use", "id": ids::anthropic_tool_use(), "name": tool.name, "input": {}}),
        );
        for piece in pieces {
            frames.push(Frame::content(delta(
                i,
                json!({"type": "input_json_delta", "partial_json": piece}),
            )));
        }
        frames.push(Frame::meta(stop(i)));
    }

    frames.push(Frame::trailer(sse_event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
            "usage": {"output_tokens": reply.output_tokens()},
        }),
    )));
    frames.push(Frame::trailer(sse_event(
        "message_stop",
        &json!({"type": "message_stop"}),
    )));
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
