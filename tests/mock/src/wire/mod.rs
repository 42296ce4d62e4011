//! The providers' wire formats: JSON bodies, SSE frames and error envelopes.
//!
//! Each route module turns a [`Reply`] (what to say) into a JSON body or a list of
//! [`Frame`]s (how the provider would stream it). Fault shaping (delays, cuts, resets) is
//! applied afterwards in `respond`, uniformly, by looking only at each frame's [`Kind`].

pub(crate) mod anthropic;
pub(crate) mod openai;
pub(crate) mod responses;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;
use serde_json::Value;

use super::fault::{FaultSpec, Route, ToolCallSpec};

/// What a frame is, for fault shaping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Framing that carries no generated content (role delta, block start/stop, pings).
    Meta,
    /// A content-bearing frame: reasoning, text or tool-call delta. Delays and cut points
    /// count these.
    Content,
    /// The closing frames (finish reason, usage, `[DONE]`, `message_delta`/`message_stop`,
    /// `response.completed`).
    Trailer,
}

/// One SSE event, already encoded.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) kind: Kind,
    pub(crate) bytes: Bytes,
}

impl Frame {
    pub(crate) fn meta(bytes: Bytes) -> Self {
        Self {
            kind: Kind::Meta,
            bytes,
        }
    }
    pub(crate) fn content(bytes: Bytes) -> Self {
        Self {
            kind: Kind::Content,
            bytes,
        }
    }
    pub(crate) fn trailer(bytes: Bytes) -> Self {
        Self {
            kind: Kind::Trailer,
            bytes,
        }
    }
}

/// The generated answer, shared by the JSON and the streamed form so both say the same.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) model: String,
    pub(crate) input_tokens: u64,
    /// Text content frames.
    pub(crate) chunks: u32,
    /// Reasoning frames before the text.
    pub(crate) reasoning_chunks: u32,
    pub(crate) tool_call: Option<ToolCallSpec>,
    /// OpenAI `stream_options.include_usage`.
    pub(crate) include_usage: bool,
    /// Scripted text pieces replacing the generated words (one content frame each).
    pub(crate) script_text: Option<Vec<String>>,
}

const WORDS: [&str; 12] = [
    "Hello",
    " from",
    " the",
    " mock",
    " upstream",
    ",",
    " a",
    " stand-in",
    " for",
    " a",
    " real",
    " model.",
];
const THOUGHTS: [&str; 8] = [
    "Let", " me", " think", " about", " the", " request", " first", ".",
];

impl Reply {
    /// Text of content chunk `i`.
    pub(crate) fn word(i: u32) -> &'static str {
        WORDS.get(i as usize % WORDS.len()).copied().unwrap_or(" ")
    }

    /// Text of reasoning chunk `i`.
    pub(crate) fn thought(i: u32) -> &'static str {
        THOUGHTS
            .get(i as usize % THOUGHTS.len())
            .copied()
            .unwrap_or(" ")
    }

    /// Text of content chunk `i` of this reply: the scripted piece, else the generated word.
    pub(crate) fn piece(&self, i: u32) -> &str {
        match &self.script_text {
            Some(pieces) => pieces.get(i as usize).map_or("", String::as_str),
            None => Reply::word(i),
        }
    }

    pub(crate) fn text(&self) -> String {
        (0..self.chunks).map(|i| self.piece(i)).collect()
    }

    pub(crate) fn reasoning(&self) -> String {
        (0..self.reasoning_chunks).map(Reply::thought).collect()
    }

    /// The tool call's arguments as a JSON string, and that string in up to three deltas.
    pub(crate) fn tool_arguments(&self) -> Option<(String, Vec<String>)> {
        let tool = self.tool_call.as_ref()?;
        let text = serde_json::to_string(&tool.arguments).unwrap_or_else(|_| "{}".to_owned());
        let pieces = split_pieces(&text, 3);
        Some((text, pieces))
    }

    /// Generated tokens: one per reasoning, text and tool-argument frame.
    pub(crate) fn output_tokens(&self) -> u64 {
        let tool = self
            .tool_arguments()
            .map(|(_, p)| p.len() as u64 + 1)
            .unwrap_or(0);
        u64::from(self.chunks) + u64::from(self.reasoning_chunks) + tool
    }
}

/// Splits `text` into at most `n` non-empty pieces on character boundaries.
pub(crate) fn split_pieces(text: &str, n: usize) -> Vec<String> {
    if text.is_empty() || n == 0 {
        return vec![text.to_owned()];
    }
    let target = text.len().div_ceil(n);
    let mut pieces = Vec::with_capacity(n);
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= target {
            pieces.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// An error to render in a provider's envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErrorInfo {
    pub(crate) kind: String,
    pub(crate) message: String,
    pub(crate) code: Option<String>,
}

impl ErrorInfo {
    /// The error a provider would send for `status` on `route`, with the fault's overrides.
    pub(crate) fn for_status(route: Route, status: u16, fault: Option<&FaultSpec>) -> Self {
        let base = if route.is_anthropic() {
            anthropic::error_for_status(status)
        } else {
            openai::error_for_status(status)
        };
        match fault {
            None => base,
            Some(f) => Self {
                kind: f.error_type.clone().unwrap_or(base.kind),
                message: f.error_message.clone().unwrap_or(base.message),
                code: f.error_code.clone().or(base.code),
            },
        }
    }

    /// The error of an in-band (mid-stream) failure.
    pub(crate) fn midstream(route: Route, fault: &FaultSpec) -> Self {
        let status = if route.is_anthropic() { 529 } else { 500 };
        Self::for_status(route, status, Some(fault))
    }
}

/// Renders the route's error envelope.
pub(crate) fn error_body(route: Route, err: &ErrorInfo, request_id: Option<&str>) -> Value {
    if route.is_anthropic() {
        anthropic::error_body(err, request_id)
    } else {
        openai::error_body(err)
    }
}

/// Serialises any wire struct. Serialising into memory cannot fail for these types (string
/// keys, no fallible `Serialize` impls), so the empty fallback is never sent in practice.
pub(crate) fn serialize<T: Serialize + ?Sized>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

/// `data: <json>\n\n`
pub(crate) fn sse_data<T: Serialize + ?Sized>(value: &T) -> Bytes {
    let mut out = BytesMut::with_capacity(384).writer();
    out.get_mut().put_slice(b"data: ");
    let _ = serde_json::to_writer(&mut out, value);
    out.get_mut().put_slice(b"\n\n");
    out.into_inner().freeze()
}

/// `event: <name>\ndata: <json>\n\n`
pub(crate) fn sse_event<T: Serialize + ?Sized>(name: &str, value: &T) -> Bytes {
    let mut out = BytesMut::with_capacity(256).writer();
    out.get_mut().put_slice(b"event: ");
    out.get_mut().put_slice(name.as_bytes());
    out.get_mut().put_slice(b"\ndata: ");
    let _ = serde_json::to_writer(&mut out, value);
    out.get_mut().put_slice(b"\n\n");
    out.into_inner().freeze()
}

/// An SSE comment line, which every SSE client ignores; used as a keep-alive.
pub(crate) const SSE_KEEPALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pieces_keeps_text_and_char_boundaries() {
        let text = r#"{"city":"Zürich","days":3}"#;
        let pieces = split_pieces(text, 3);
        assert!(pieces.len() <= 3 && !pieces.is_empty());
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_pieces("", 3), vec![String::new()]);
    }

    fn reply() -> Reply {
        Reply {
            model: "m".into(),
            input_tokens: 3,
            chunks: 2,
            reasoning_chunks: 1,
            tool_call: Some(ToolCallSpec {
                name: "f".into(),
                arguments: serde_json::json!({"a": 1}),
            }),
            include_usage: true,
            script_text: None,
        }
    }

    #[test]
    fn fields_come_in_provider_order() {
        // Clients do not depend on key order, but logs and diffs against captured traffic
        // read better when the mock matches the providers.
        for f in anthropic::message_frames(&reply()) {
            let text = String::from_utf8_lossy(&f.bytes).into_owned();
            let (event, data) = text.split_once('\n').unwrap();
            let name = event.strip_prefix("event: ").unwrap();
            assert!(
                data.starts_with(&format!(r#"data: {{"type":"{name}""#)),
                "{text}"
            );
        }
        let body = anthropic::message_json(&reply());
        assert!(body.starts_with(br#"{"id":"msg_01"#));
        for f in openai::chat_frames(&reply()) {
            assert!(
                f.bytes.starts_with(br#"data: {"id":"chatcmpl-"#)
                    || &f.bytes[..] == b"data: [DONE]\n\n"
            );
        }
        assert!(openai::chat_json(&reply()).starts_with(br#"{"id":"chatcmpl-"#));
    }

    #[test]
    fn output_tokens_count_every_generated_frame() {
        // 2 text + 1 reasoning + tool: 1 header + pieces of `{"a":1}` (3).
        assert_eq!(reply().output_tokens(), 2 + 1 + 1 + 3);
    }

    #[test]
    fn sse_helpers_frame_events() {
        let v = serde_json::json!({"a":1});
        assert_eq!(&sse_data(&v)[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&sse_event("x", &v)[..], b"event: x\ndata: {\"a\":1}\n\n");
    }
}
