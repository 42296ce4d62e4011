//! What a parsed event means for a wire format.
//!
//! [`inspect`] maps one [`SseEvent`] to an [`EventInfo`]: its [`EventKind`], the UTF-8 bytes of
//! assistant text it carries, and any usage, finish reason or upstream error. The watchdogs,
//! metrics and the attempt outcome are built on it.
//!
//! Rules (docs/router-node.md, "The request path", and docs/error-effects.md):
//! - Anthropic `message_start`, `content_block_start`/`stop` and `ping` are not content.
//! - Reasoning frames — Anthropic `thinking_delta` (even empty) and `signature_delta`,
//!   Responses reasoning items and `response.reasoning*` events, chat `reasoning_content`,
//!   `reasoning` or `reasoning_details` deltas — are [`EventKind::Reasoning`]: progress, but
//!   not model output. For chat, an empty reasoning string is not a frame (servers send
//!   `"reasoning_content":""` on role-only chunks).
//! - Empty text deltas are [`EventKind::Other`]: they neither prove readiness nor resume
//!   throughput judgement.
//! - An error event is [`EventKind::Error`] even inside a `200` stream.
//! - JSON is parsed only when the answer depends on it, into small borrowed structs; text is
//!   measured, never copied. Plain chat text chunks (and the finish and usage chunks that
//!   close a stream), Anthropic content deltas and Responses delta events skip serde through
//!   strict scanners (`prescan`, `prescan_events`) that defer to the full parse whenever
//!   they are not certain.

use serde::{Deserialize, Serialize};

use super::Format;
use super::formats;
use super::parser::{SseEvent, SseItem};

pub mod body;
pub(super) mod prescan;
pub(super) mod prescan_events;
mod repeat;
mod usage_scan;

/// The longest upstream error message kept, in bytes.
const MAX_ERROR_MESSAGE_BYTES: usize = 2048;

/// What an event is, for the watchdogs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// An upstream ping event (Anthropic `ping`, or any event named `ping`).
    Ping,
    /// An SSE comment such as `: keep-alive`.
    Heartbeat,
    /// Assistant text (non-empty).
    Content,
    /// A reasoning frame.
    Reasoning,
    /// Tool-call input (arguments, function-call items).
    ToolCall,
    /// Usage (and possibly a finish reason) without content.
    Usage,
    /// The end of the turn: `[DONE]`, `message_stop`, `response.completed`/`incomplete`.
    Done,
    /// An in-band error event.
    Error,
    /// Anything else: lifecycle events, empty deltas, unparseable data.
    #[default]
    Other,
}

impl EventKind {
    /// Content, reasoning and tool-call frames restart the stall budget.
    pub fn is_progress(self) -> bool {
        matches!(self, Self::Content | Self::Reasoning | Self::ToolCall)
    }

    /// Model output proper: a turn without any is empty.
    pub fn is_output(self) -> bool {
        matches!(self, Self::Content | Self::ToolCall)
    }

    /// The readiness gate opens on the first progress frame or on an error event.
    pub fn opens_readiness(self) -> bool {
        self.is_progress() || self == Self::Error
    }
}

/// The meaning of one event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventInfo {
    pub kind: EventKind,
    /// UTF-8 bytes of assistant text deltas (decoded JSON strings) in this event.
    pub useful_text_bytes: usize,
    pub usage: Option<Usage>,
    pub finish_reason: Option<FinishReason>,
    pub error: Option<UpstreamStreamError>,
}

impl EventInfo {
    /// An info of `kind` carrying nothing else.
    pub fn of(kind: EventKind) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }
}

/// Token usage as the upstream reported it. Fields are not normalised across formats: OpenAI
/// `input` includes `cache_read`, Anthropic `input` excludes both cache fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input: Option<u64>,
    pub output: Option<u64>,
    pub cache_read: Option<u64>,
    pub cache_creation: Option<u64>,
}

impl Usage {
    /// Folds a later report in: fields it carries replace earlier ones (Anthropic reports
    /// input in `message_start` and the cumulative output in `message_delta`).
    pub fn merge(&mut self, later: &Usage) {
        self.input = later.input.or(self.input);
        self.output = later.output.or(self.output);
        self.cache_read = later.cache_read.or(self.cache_read);
        self.cache_creation = later.cache_creation.or(self.cache_creation);
    }
}

/// Why the upstream ended the turn, normalised; unknown reasons keep their text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// `stop`, `end_turn`, `stop_sequence`, `completed`.
    Stop,
    /// `length`, `max_tokens`, `max_output_tokens`.
    Length,
    /// `tool_calls`, `function_call`, `tool_use`.
    ToolCalls,
    /// `content_filter`, `refusal`.
    ContentFilter,
    Other(String),
}

impl FinishReason {
    pub fn from_upstream(raw: &str) -> Self {
        match raw {
            "stop" | "end_turn" | "stop_sequence" | "completed" => Self::Stop,
            "length" | "max_tokens" | "max_output_tokens" => Self::Length,
            "tool_calls" | "function_call" | "tool_use" => Self::ToolCalls,
            "content_filter" | "refusal" => Self::ContentFilter,
            other => Self::Other(bounded(other, 64)),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Other(raw) => raw,
        }
    }
}

/// An error event inside a stream (e.g. Anthropic `overloaded_error` after a `200`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamStreamError {
    /// The upstream error type (`overloaded_error`, `server_error`, …), or `stream_error`
    /// when the event carried none.
    pub error_type: String,
    /// The message, at most 2 KiB.
    pub message: String,
    pub code: Option<String>,
}

impl UpstreamStreamError {
    pub(super) fn new(error_type: &str, message: &str, code: Option<String>) -> Self {
        Self {
            error_type: bounded(error_type, 128),
            message: bounded(message, MAX_ERROR_MESSAGE_BYTES),
            code: code.map(|c| bounded(&c, 128)),
        }
    }

    /// An error event whose body could not be understood: the raw data is the message.
    pub(super) fn raw(data: &[u8]) -> Self {
        Self::new("stream_error", &String::from_utf8_lossy(data), None)
    }
}

/// Classifies one event of a `format` stream.
pub fn inspect(format: Format, event: &SseEvent<'_>) -> EventInfo {
    classify(format, event, |name, data| match format {
        Format::OpenAiChat => prescan::chat(data),
        Format::OpenAiResponses => prescan_events::responses(name, data),
        Format::Anthropic => prescan_events::anthropic(name, data),
    })
}

/// The rules of [`inspect`], with `prescan` as the fast path for the events that have one:
/// ping names first; chat `error` events always to the full parse; otherwise `prescan` (over
/// the trimmed data), then the full parse when it is not sure.
fn classify(
    format: Format,
    event: &SseEvent<'_>,
    prescan: impl FnOnce(Option<&[u8]>, &[u8]) -> Option<EventInfo>,
) -> EventInfo {
    let name = event.event;
    if matches!(
        name,
        Some(b"ping" | b"keepalive" | b"keep-alive" | b"heartbeat")
    ) {
        return EventInfo::of(EventKind::Ping);
    }
    let data = event.data.trim_ascii();
    match format {
        // Ends every chat stream; neither the pre-scan nor the event before can tell more.
        Format::OpenAiChat if data == b"[DONE]" => EventInfo::of(EventKind::Done),
        // Plain text chunks are most of a stream: a strict scanner classifies them without serde.
        Format::OpenAiChat if name != Some(b"error") => {
            prescan(name, data).unwrap_or_else(|| formats::chat(name, data))
        }
        Format::OpenAiChat => formats::chat(name, data),
        Format::OpenAiResponses => {
            prescan(name, data).unwrap_or_else(|| formats::responses(name, data))
        }
        Format::Anthropic => prescan(name, data).unwrap_or_else(|| formats::anthropic(name, data)),
    }
}

/// Classifies any parser item: comments are heartbeats, framing errors are `Other`.
pub fn inspect_item(format: Format, item: &SseItem<'_>) -> EventInfo {
    match item {
        SseItem::Event(event) => inspect(format, event),
        SseItem::Comment(_) => EventInfo::of(EventKind::Heartbeat),
        SseItem::Error(_) => EventInfo::of(EventKind::Other),
    }
}

/// Classifies the events of one stream, in order: [`inspect_item`]'s answers, with chat
/// chunks and Anthropic and Responses deltas (text, reasoning, tool input) that repeat the
/// event before but for their one variable string answered from it (`repeat::Repeat`).
#[derive(Debug, Clone)]
pub struct StreamInspector {
    format: Format,
    repeat: repeat::Repeat,
}

impl StreamInspector {
    pub fn new(format: Format) -> Self {
        Self {
            format,
            repeat: repeat::Repeat::default(),
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// What `item`, the stream's next item, means.
    pub fn inspect_item(&mut self, item: &SseItem<'_>) -> EventInfo {
        let SseItem::Event(event) = item else {
            return inspect_item(self.format, item);
        };
        let repeat = &mut self.repeat;
        classify(self.format, event, |name, data| match self.format {
            Format::OpenAiChat => repeat.answer(name, data, |_, data| prescan::chat_spanned(data)),
            Format::OpenAiResponses => repeat.answer(name, data, prescan_events::responses_spanned),
            Format::Anthropic => repeat.answer(name, data, prescan_events::anthropic_spanned),
        })
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
fn bounded(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
