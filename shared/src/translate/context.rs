//! What a translation needs to know besides the body: knobs for the provider side
//! ([`TranslateOptions`]) and facts about the client's request for the way back
//! ([`TranslateContext`]).
//!
//! Nothing here reads a clock: the creation time OpenAI formats put in every response is
//! passed in by the caller, like every other time in this crate.

use serde_json::{Map, Value, json};

use super::policy::UnknownParams;
use crate::sse::Format;

/// The Anthropic `max_tokens` used when an OpenAI request sets no limit (Anthropic requires
/// one). 4096 is the highest value every Claude model accepts, so the default never turns a
/// valid request into a `400`; operators of newer models can raise it.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u64 = 4096;

/// Which field carries the output limit in requests to an OpenAI chat provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_completion_tokens`: what OpenAI documents and its reasoning models require.
    #[default]
    MaxCompletionTokens,
    /// `max_tokens`: the deprecated name some OpenAI-compatible servers still need.
    MaxTokens,
}

/// Per-provider knobs for request translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranslateOptions {
    /// Anthropic `max_tokens` when the client set none.
    pub default_max_tokens: u64,
    /// The output-limit field for OpenAI chat providers.
    pub max_tokens_field: MaxTokensField,
    /// Send earlier turns' reasoning to OpenAI chat providers as `reasoning_content`.
    /// Off by default: OpenAI itself rejects the field, DeepSeek-style servers accept it.
    pub chat_reasoning_history: bool,
    /// What happens to a client field the translator does not know.
    pub unknown_params: UnknownParams,
}

impl Default for TranslateOptions {
    fn default() -> Self {
        Self {
            default_max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS,
            max_tokens_field: MaxTokensField::default(),
            chat_reasoning_history: false,
            unknown_params: UnknownParams::Drop,
        }
    }
}

/// Facts about one client request that shape its translated response.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslateContext {
    /// The client's format.
    pub client: Format,
    /// Unix seconds, from the caller's clock, for `created` / `created_at` when the provider
    /// gives none.
    pub created: u64,
    /// The model the client asked for, used when the provider names none.
    pub model: String,
    /// A chat client asked for the trailing usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Request fields a Responses `response` object repeats back.
    pub(crate) echo: Map<String, Value>,
}

impl TranslateContext {
    /// The context for `request`, the client's body in `client` format.
    pub fn new(client: Format, request: &Value, created: u64) -> Self {
        let model = request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let include_usage = request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let echo = match client {
            Format::OpenAiResponses => responses_echo(request),
            Format::OpenAiChat | Format::Anthropic => Map::new(),
        };
        Self {
            client,
            created,
            model,
            include_usage,
            echo,
        }
    }
}

/// The request parameters a Responses `response` object carries, with the API's defaults.
fn responses_echo(request: &Value) -> Map<String, Value> {
    let get = |key: &str, default: Value| -> Value {
        match request.get(key) {
            Some(v) if !v.is_null() => v.clone(),
            _ => default,
        }
    };
    let mut echo = Map::new();
    echo.insert("instructions".into(), get("instructions", Value::Null));
    echo.insert(
        "max_output_tokens".into(),
        get("max_output_tokens", Value::Null),
    );
    echo.insert("metadata".into(), get("metadata", json!({})));
    echo.insert(
        "parallel_tool_calls".into(),
        get("parallel_tool_calls", json!(true)),
    );
    echo.insert("previous_response_id".into(), Value::Null);
    echo.insert(
        "reasoning".into(),
        get("reasoning", json!({"effort": null, "summary": null})),
    );
    echo.insert("store".into(), get("store", json!(false)));
    echo.insert("temperature".into(), get("temperature", json!(1.0)));
    echo.insert(
        "text".into(),
        get("text", json!({"format": {"type": "text"}})),
    );
    echo.insert("tool_choice".into(), get("tool_choice", json!("auto")));
    echo.insert("tools".into(), get("tools", json!([])));
    echo.insert("top_p".into(), get("top_p", json!(1.0)));
    echo.insert("truncation".into(), get("truncation", json!("disabled")));
    echo.insert("user".into(), get("user", Value::Null));
    echo
}
