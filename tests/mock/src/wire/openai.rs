//! OpenAI Chat Completions (`chat.completion`, `chat.completion.chunk`), the model list and
//! OpenAI's error envelope.
//!
//! The hot shapes are typed structs rather than `json!` trees: serialising borrowed fields
//! directly costs a fraction of building a map per object (this is the benchmark's baseline
//! path), and fields come out in the order OpenAI sends them.

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

use super::{ErrorInfo, Frame, Reply, sse_data};
use crate::ids;

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

// === wire structs ===

#[derive(Serialize)]
struct PromptDetails {
    cached_tokens: u64,
    audio_tokens: u64,
}

#[derive(Serialize)]
struct CompletionDetails {
    reasoning_tokens: u64,
    audio_tokens: u64,
    accepted_prediction_tokens: u64,
    rejected_prediction_tokens: u64,
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: PromptDetails,
    completion_tokens_details: CompletionDetails,
}

#[derive(Serialize)]
struct Function<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

#[derive(Serialize)]
struct ToolCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    refusal: Option<()>,
    annotations: [(); 0],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCall<'a>; 1]>,
}

#[derive(Serialize)]
struct Choice<'a> {
    index: u32,
    message: Message<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [Choice<'a>; 1],
    usage: Usage,
    service_tier: &'static str,
    system_fingerprint: &'static str,
}

/// The `delta` of a chunk; each variant is one of the shapes OpenAI sends.
#[derive(Serialize)]
#[serde(untagged)]
enum Delta<'a> {
    Role {
        role: &'static str,
        content: &'static str,
        refusal: Option<()>,
    },
    Reasoning {
        content: Option<()>,
        reasoning_content: &'a str,
    },
    Content {
        content: &'a str,
    },
    Tool {
        tool_calls: [ToolCall<'a>; 1],
    },
    Empty {},
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    service_tier: &'static str,
    system_fingerprint: &'static str,
    choices: &'a [ChunkChoice<'a>],
    /// Absent without `include_usage`; `null` on every chunk but the last with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<&'a Usage>>,
}

fn usage(reply: &Reply) -> Usage {
    let completion = reply.output_tokens();
    Usage {
        prompt_tokens: reply.input_tokens,
        completion_tokens: completion,
        total_tokens: reply.input_tokens + completion,
        prompt_tokens_details: PromptDetails {
            cached_tokens: 0,
            audio_tokens: 0,
        },
        completion_tokens_details: CompletionDetails {
            reasoning_tokens: u64::from(reply.reasoning_chunks),
            audio_tokens: 0,
            accepted_prediction_tokens: 0,
            rejected_prediction_tokens: 0,
        },
    }
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_call.is_some() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// A non-streamed `chat.completion`, serialised.
pub(crate) fn chat_json(reply: &Reply) -> Bytes {
    let text = reply.text();
    let reasoning = reply.reasoning();
    let tool = reply.tool_arguments();
    let call_id = ids::openai_call();
    let tool_calls = match (&reply.tool_call, &tool) {
        (Some(spec), Some((arguments, _))) => Some([ToolCall {
            index: None,
            id: Some(&call_id),
            kind: Some("function"),
            function: Function {
                name: Some(&spec.name),
                arguments,
            },
        }]),
        _ => None,
    };
    let id = ids::chat_completion();
    let completion = Completion {
        id: &id,
        object: "chat.completion",
        created: ids::unix_now(),
        model: &reply.model,
        choices: [Choice {
            index: 0,
            message: Message {
                role: "assistant",
                content: (!text.is_empty() || tool_calls.is_none()).then_some(text.as_str()),
                reasoning_content: (reply.reasoning_chunks > 0).then_some(reasoning.as_str()),
                refusal: None,
                annotations: [],
                tool_calls,
            },
            logprobs: None,
            finish_reason: finish_reason(reply),
        }],
        usage: usage(reply),
        service_tier: "default",
        system_fingerprint: ids::SYSTEM_FINGERPRINT,
    };
    super::serialize(&completion)
}

/// The frames of a streamed Chat Completion: role delta, reasoning deltas, content deltas,
/// tool-call deltas, the finish chunk, the usage chunk (when asked for) and `[DONE]`.
pub(crate) fn chat_frames(reply: &Reply) -> Vec<Frame> {
    let id = ids::chat_completion();
    let created = ids::unix_now();
    let null_usage = reply.include_usage.then_some(None);
    let chunk = |delta: Delta<'_>, finish: Option<&'static str>| {
        super::sse_data(&Chunk {
            id: &id,
            object: "chat.completion.chunk",
            created,
            model: &reply.model,
            service_tier: "default",
            system_fingerprint: ids::SYSTEM_FINGERPRINT,
            choices: &[ChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }],
            usage: null_usage,
        })
    };

    let mut frames =
        Vec::with_capacity(reply.chunks as usize + reply.reasoning_chunks as usize + 8);
    frames.push(Frame::meta(chunk(
        Delta::Role {
            role: "assistant",
            content: "",
            refusal: None,
        },
        None,
    )));
    for i in 0..reply.reasoning_chunks {
        frames.push(Frame::content(chunk(
            Delta::Reasoning {
                content: None,
                reasoning_content: Reply::thought(i),
            },
            None,
        )));
    }
    for i in 0..reply.chunks {
        frames.push(Frame::content(chunk(
            Delta::Content {
                content: reply.piece(i),
            },
            None,
        )));
    }
    if let (Some(tool), Some((_, pieces))) = (&reply.tool_call, reply.tool_arguments()) {
        let call_id = ids::openai_call();
        frames.push(Frame::content(chunk(
            Delta::Tool {
                tool_calls: [ToolCall {
                    index: Some(0),
                    id: Some(&call_id),
                    kind: Some("function"),
                    function: Function {
                        name: Some(&tool.name),
                        arguments: "",
                    },
                }],
            },
            None,
        )));
        for piece in &pieces {
            frames.push(Frame::content(chunk(
                Delta::Tool {
                    tool_calls: [ToolCall {
                        index: Some(0),
                        id: None,
                        kind: None,
                        function: Function {
                            name: None,
                            arguments: piece,
                        },
                    }],
                },
                None,
            )));
        }
    }
    frames.push(Frame::trailer(chunk(
        Delta::Empty {},
        Some(finish_reason(reply)),
    )));
    if reply.include_usage {
        let usage = usage(reply);
        frames.push(Frame::trailer(super::sse_data(&Chunk {
            id: &id,
            object: "chat.completion.chunk",
            created,
            model: &reply.model,
            service_tier: "default",
            system_fingerprint: ids::SYSTEM_FINGERPRINT,
            choices: &[],
            usage: Some(Some(&usage)),
        })));
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
