//! Frames Switchyard writes into a client stream itself.
//!
//! After the commit point the HTTP status is already `200`, so failures reach the client as an
//! in-band error event in the client's format, and idle periods are bridged with keep-alive
//! frames the client's SDK ignores. Every string goes through serde_json, so messages are
//! always correctly escaped, and every frame ends with a blank line.

use serde::Serialize;

use super::Format;

/// A frame that keeps the connection warm without being content: an SSE comment for OpenAI
/// formats, the native `ping` event for Anthropic.
pub fn keep_alive_frame(format: Format) -> &'static [u8] {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => b": keep-alive\n\n",
        Format::Anthropic => b"event: ping\ndata: {\"type\":\"ping\"}\n\n",
    }
}

#[derive(Serialize)]
struct Inner<'a> {
    #[serde(rename = "type")]
    error_type: &'a str,
    code: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct ChatFrame<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct AnthropicFrame<'a> {
    #[serde(rename = "type")]
    tag: &'static str,
    error: Inner<'a>,
}

/// The Responses SDK reads `code`/`message` at the top level; the nested `error` carries the
/// `type` every Switchyard error body has.
#[derive(Serialize)]
struct ResponsesFrame<'a> {
    #[serde(rename = "type")]
    tag: &'static str,
    code: &'a str,
    message: &'a str,
    param: Option<()>,
    error: Inner<'a>,
}

/// An error event in the client's format:
/// - OpenAI chat: `data: {"error":{"type","code","message"}}`;
/// - Anthropic: `event: error` + `data: {"type":"error","error":{"type","code","message"}}`;
/// - Responses: `event: error` + `data: {"type":"error","code","message","param":null,
///   "error":{…}}`.
pub fn format_error_event(format: Format, error_type: &str, code: &str, message: &str) -> Vec<u8> {
    let inner = Inner {
        error_type,
        code,
        message,
    };
    let mut out = Vec::with_capacity(64 + message.len() * 2);
    let written = match format {
        Format::OpenAiChat => {
            out.extend_from_slice(b"data: ");
            serde_json::to_writer(&mut out, &ChatFrame { error: inner })
        }
        Format::Anthropic => {
            out.extend_from_slice(b"event: error\ndata: ");
            serde_json::to_writer(
                &mut out,
                &AnthropicFrame {
                    tag: "error",
                    error: inner,
                },
            )
        }
        Format::OpenAiResponses => {
            out.extend_from_slice(b"event: error\ndata: ");
            let frame = ResponsesFrame {
                tag: "error",
                code,
                message,
                param: None,
                error: inner,
            };
            serde_json::to_writer(&mut out, &frame)
        }
    };
    if written.is_err() {
        // Serialising borrowed strings into a Vec cannot fail; stay well-formed regardless.
        out.clear();
        out.extend_from_slice(b"data: {\"error\":{\"type\":\"stream_error\",\"code\":\"stream_error\",\"message\":\"stream failed\"}}");
    }
    out.extend_from_slice(b"\n\n");
    out
}
