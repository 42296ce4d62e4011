//! The neutral model every translation goes through.
//!
//! Each wire format is decoded into these types and encoded out of them, so six directions
//! need one decoder and one encoder per format instead of a function per pair, and every
//! mapping decision lives in exactly one place. The model is Anthropic-shaped (a turn is a list
//! of typed blocks) because that is the most expressive of the three: OpenAI chat's separate
//! `tool` messages and `reasoning_content` field fold into blocks without loss, and unfold
//! again on the way out.

use serde_json::Number;

use crate::sse::FinishReason;

/// A client request, in neutral form.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Request {
    pub model: String,
    /// In conversation order; `System` turns carry only text.
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub stop: Vec<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<Number>,
    pub top_p: Option<Number>,
    /// The end-user identifier (`user` / `metadata.user_id`).
    pub user: Option<String>,
    pub stream: bool,
    pub reasoning: Option<Reasoning>,
    /// Structured output: the shape the answer's text must have.
    pub output_format: Option<OutputFormat>,
    /// Fields accepted and not forwarded, for the client's `x-switchyard-dropped-params`.
    pub dropped: Vec<String>,
    /// Fields not forwarded because Switchyard did what they ask itself, for the client's
    /// `x-switchyard-emulated-params`.
    pub emulated: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

/// One piece of a turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Text(String),
    Image(Image),
    /// A document sent inline (base64), e.g. a PDF.
    File {
        media_type: String,
        data: String,
        name: Option<String>,
    },
    ToolCall(ToolCall),
    ToolResult {
        id: String,
        /// Text and images.
        content: Vec<Block>,
        is_error: bool,
    },
    /// Visible reasoning; the signature is Anthropic's, when the text came from Anthropic.
    Reasoning {
        text: String,
        signature: Option<String>,
    },
    /// Anthropic `redacted_thinking`: opaque, only Anthropic can read it.
    Redacted(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Image {
    Url(String),
    Base64 { media_type: String, data: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text (OpenAI's representation; Anthropic's object is serialised).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema object.
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    Auto,
    None,
    /// Some tool must be called (`required` / `any`).
    Required,
    /// This tool must be called.
    Tool(String),
}

/// How much the model should reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reasoning {
    Off,
    /// OpenAI `reasoning_effort` / `reasoning.effort` (`minimal`, `low`, `medium`, `high`, …).
    Effort(String),
    /// Anthropic `thinking.budget_tokens`.
    Budget(u64),
    /// Anthropic `thinking.type = adaptive`: the model decides.
    Adaptive,
}

/// Structured output (chat `response_format`, Responses `text.format`, Anthropic
/// `output_config.format`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OutputFormat {
    /// Text that is JSON matching `schema`.
    JsonSchema {
        name: Option<String>,
        description: Option<String>,
        schema: serde_json::Value,
        strict: Option<bool>,
    },
    /// Any JSON object (OpenAI's JSON mode; Anthropic has no counterpart).
    JsonObject,
}

/// A complete (non-streamed) answer, in neutral form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    pub id: String,
    pub model: String,
    /// Unix seconds, when the provider said.
    pub created: Option<u64>,
    /// Text, reasoning, redacted reasoning and tool calls, in order.
    pub content: Vec<Block>,
    pub finish: FinishReason,
    /// Which stop sequence matched, when the provider said.
    pub stop_sequence: Option<String>,
    pub usage: TokenUsage,
}

/// Token usage, normalised: `input` excludes both cache counts, so the three input fields add
/// up to everything the prompt cost and nothing is counted twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// Input tokens neither read from nor written to a cache.
    pub input: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache (Anthropic only).
    pub cache_creation: u64,
    /// Output tokens, reasoning included.
    pub output: u64,
    /// The part of `output` spent reasoning, when the provider said.
    pub reasoning: Option<u64>,
}

impl TokenUsage {
    /// Every input token, cached or not: OpenAI's `prompt_tokens` / `input_tokens`.
    pub fn total_input(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_creation)
    }

    pub fn total(&self) -> u64 {
        self.total_input().saturating_add(self.output)
    }
}
