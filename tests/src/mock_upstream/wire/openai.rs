//! OpenAI Chat Completions (`chat.completion`, `chat.completion.chunk`), the model list and
//! OpenAI's error envelope.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{ErrorInfo, Frame, Reply, sse_data};
use crate::mock_upstream::ids;

/// OpenAI's error `type`, `code` and message for an HTTP status.
pub(crate) fn error_for_status(status: u16) -> ErrorInfo {
    let (kind, code, message): (&str, Option<&str>, &str) = match status {
        401 => (
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided. You can find your API key in your account settings.",
        ),
        403 => (
            "invalid_request_error",
            Some("permission_denied"),
            "You are not allowed to access this resource.",
        ),
        404 => (
            "invalid_request_error",
            Some("model_not_found"),
            "The model does not exist or you do not have access to it.",
        ),
        408 => ("server_error", Some("timeout"), "Request timed out."),
        413 => (
            "invalid_request_error",
            Some("request_too_large"),
            "Request too large.",
        ),
        429 => (
            "requests",
            Some("rate_limit_exceeded"),
            "Rate limit reached for requests. Please try again later.",
        ),
        503 => (
            "server_error",
            Some("service_unavailable"),
            "The engine is currently overloaded, please try again later.",
        ),
        400..=499 => (
            "invalid_request_error",
            Some("invalid_request"),
            "Invalid request.",
        ),
        _ => (
            "server_error",
            Some("server_error"),
            "The server had an error while processing your request. Sorry about that!",
        ),
    };
    ErrorInfo {
        kind: kind.to_owned(),
        message: message.to_owned(),
        code: code.map(str::to_owned),
    }
}

/// `{"error":{"message","type","param","code"}}`
pub(crate) fn error_body(err: &ErrorInfo) -> Value {
    json!({
        "error": {
            "message": err.message,
            "type": err.kind,
            "param": null,
            "code": err.code,
        }
    })
}

/// The in-band error a Chat Completions stream ends with: a `data:` line whose object has an
/// `error` member (the OpenAI SDKs raise on it).
pub(crate) fn chat_error_frame(err: &ErrorInfo) -> Bytes {
    sse_data(&error_body(err))
}

fn usage(reply: &Reply) -> Value {
    let completion = reply.output_tokens();
    json!({
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": completion,
        "total_tokens": reply.input_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reply.reasoning_chunks,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_call.is_some() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// A non-streamed `chat.completion`.
pub(crate) fn chat_json(reply: &Reply) -> Value {
    let text = reply.text();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && reply.tool_call.is_some() { Value::Null } else { Value::String(text) },
        "refusal": null,
        "annotations": [],
    });
    if reply.reasoning_chunks > 0 {
        message["reasoning_content"] = Value::String(reply.reasoning());
    }
    if let (Some(tool), Some((arguments, _))) = (&reply.tool_call, reply.tool_arguments()) {
        message["tool_calls"] = json!([{
            "id": ids::openai_call(),
            "type": "function",
            "function": {"name": tool.name, "arguments": arguments},
        }]);
    }
    json!({
        "id": ids::chat_completion(),
        "object": "chat.completion",
        "created": ids::unix_now(),
        "model": reply.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(reply),
        }],
        "usage": usage(reply),
        "service_tier": "default",
        "system_fingerprint": ids::SYSTEM_FINGERPRINT,
    })
}

/// The frames of a streamed Chat Completion: role delta, reasoning deltas, content deltas,
/// tool-call deltas, the finish chunk, the usage chunk (when asked for) and `[DONE]`.
pub(crate) fn chat_frames(reply: &Reply) -> Vec<Frame> {
    let id = ids::chat_completion();
    let created = ids::unix_now();
    let chunk = |delta: Value, finish: Value| {
        let mut v = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "service_tier": "default",
            "system_fingerprint": ids::SYSTEM_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if reply.include_usage {
            v["usage"] = Value::Null;
        }
        sse_data(&v)
    };

    let mut frames =
        Vec::with_capacity(reply.chunks as usize + reply.reasoning_chunks as usize + 8);
    frames.push(Frame::meta(chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )));
    for i in 0..reply.reasoning_chunks {
        frames.push(Frame::content(chunk(
            json!({"content": null, "reasoning_content": Reply::thought(i)}),
            Value::Null,
        )));
    }
    for i in 0..reply.chunks {
        frames.push(Frame::content(chunk(
            json!({"content": Reply::word(i)}),
            Value::Null,
        )));
    }
    if let (Some(tool), Some((_, pieces))) = (&reply.tool_call, reply.tool_arguments()) {
        frames.push(Frame::content(chunk(
            json!({"tool_calls": [{
                "index": 0,
                "id": ids::openai_call(),
                "type": "function",
                "function": {"name": tool.name, "arguments": ""},
            }]}),
            Value::Null,
        )));
        for piece in pieces {
            frames.push(Frame::content(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                Value::Null,
            )));
        }
    }
    frames.push(Frame::trailer(chunk(
        json!({}),
        Value::String(finish_reason(reply).to_owned()),
    )));
    if reply.include_usage {
        frames.push(Frame::trailer(sse_data(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "service_tier": "default",
            "system_fingerprint": ids::SYSTEM_FINGERPRINT,
            "choices": [],
            "usage": usage(reply),
        }))));
    }
    frames.push(Frame::trailer(Bytes::from_static(b"data: [DONE]\n\n")));
    frames
}

/// `GET /v1/models` in OpenAI's list shape.
pub(crate) fn models_json(models: &[String]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|m| json!({"id": m, "object": "model", "created": 1_715_367_049u64, "owned_by": "system"}))
        .collect();
    json!({"object": "list", "data": data})
}
