//! Which messages a relay keeps and the bodies it builds: pure functions over JSON, in the
//! client's wire format (the per-target pipeline translates them like any client body).
//!
//! Why the tail is extended backwards: a tool result without the assistant message that made
//! the call is refused by every provider, so the kept tail never starts with a tool result;
//! in the Anthropic Messages format it also never starts with an assistant message (the
//! conversation must open with a user turn). System messages are never summarised.

use serde_json::{Map, Value, json};

use crate::api::errors::ClientFormat;

/// The instruction the summariser gets, before the transcript.
pub const INSTRUCTION: &str = "You summarise a conversation between a user and an AI \
    assistant so that another assistant can continue it. Keep every fact, decision, open \
    question, name, number, file and code reference the rest of the conversation may need; \
    leave out greetings and repetition. Write the summary as plain prose in the third person, \
    with no preamble.";

/// What the summary message starts with.
pub const SUMMARY_PREFIX: &str = "Summary of the earlier conversation: ";

/// Most tokens the summary may take (the Anthropic format requires a limit).
const SUMMARY_MAX_TOKENS: u64 = 1024;

/// The two conversation shapes a relay understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Chat Completions: `messages[]`, system messages inline, `tool` results.
    Chat,
    /// Anthropic Messages: top-level `system`, `tool_use` / `tool_result` content blocks.
    Anthropic,
}

impl Shape {
    /// The shape of a client format; `None` for the Responses API, which a relay leaves alone.
    pub fn of(format: ClientFormat) -> Option<Self> {
        match format {
            ClientFormat::OpenAiChat => Some(Self::Chat),
            ClientFormat::Anthropic => Some(Self::Anthropic),
            ClientFormat::OpenAiResponses => None,
        }
    }
}

/// A conversation cut for a relay.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// System messages before the kept tail (Chat only), in order.
    pub system: Vec<Value>,
    /// The messages the summary replaces.
    pub older: Vec<Value>,
    /// The last messages, sent unchanged.
    pub kept: Vec<Value>,
}

/// A client body a relay can rewrite: the body and its conversation's cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub shape: Shape,
    pub body: Map<String, Value>,
    pub split: Split,
}

/// The plan for a client body, or `None` when it is left unchanged: another format, not a
/// JSON object with a `messages` list, fewer than `min_messages` non-system messages, or
/// nothing older than the kept tail.
pub fn plan(
    format: ClientFormat,
    raw: &[u8],
    min_messages: usize,
    keep_last: usize,
) -> Option<Plan> {
    let shape = Shape::of(format)?;
    let body: Map<String, Value> = serde_json::from_slice(raw).ok()?;
    let messages = body.get("messages")?.as_array()?;
    let split = split(shape, messages, min_messages, keep_last)?;
    Some(Plan { shape, body, split })
}

/// Cuts `messages`: the last `keep_last`, extended backwards while the tail would start with
/// a tool result (or, in the Anthropic shape, with an assistant turn); the system messages
/// before it; the rest to summarise.
pub fn split(
    shape: Shape,
    messages: &[Value],
    min_messages: usize,
    keep_last: usize,
) -> Option<Split> {
    let turns = messages.iter().filter(|m| !is_system(shape, m)).count();
    if turns < min_messages {
        return None;
    }
    let start = keep_start(shape, messages, keep_last);
    let (head, kept) = messages.split_at(start);
    let (system, older): (Vec<Value>, Vec<Value>) =
        head.iter().cloned().partition(|m| is_system(shape, m));
    if older.is_empty() {
        return None;
    }
    Some(Split {
        system,
        older,
        kept: kept.to_vec(),
    })
}

/// Where the kept tail starts.
pub fn keep_start(shape: Shape, messages: &[Value], keep_last: usize) -> usize {
    let mut start = messages.len().saturating_sub(keep_last);
    while start > 0
        && messages
            .get(start)
            .is_some_and(|m| must_follow_its_predecessor(shape, m))
    {
        start -= 1;
    }
    start
}

/// A message that cannot open the kept tail.
fn must_follow_its_predecessor(shape: Shape, m: &Value) -> bool {
    match shape {
        Shape::Chat => matches!(role(m), "tool" | "function"),
        Shape::Anthropic => role(m) == "assistant" || has_block(m, "tool_result"),
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn is_system(shape: Shape, m: &Value) -> bool {
    shape == Shape::Chat && matches!(role(m), "system" | "developer")
}

fn has_block(m: &Value, kind: &str) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| blocks.iter().any(|b| block_type(b) == kind))
}

fn block_type(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The older messages as text for the summariser: one paragraph per message, `role: text`,
/// tool calls and results written out.
pub fn transcript(older: &[Value]) -> String {
    older
        .iter()
        .map(|m| format!("{}: {}", role(m), message_text(m)))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The text of one message in either shape.
fn message_text(m: &Value) -> String {
    let mut parts = Vec::new();
    match m.get("content") {
        Some(Value::String(s)) => parts.push(s.clone()),
        Some(Value::Array(blocks)) => parts.extend(blocks.iter().map(block_text)),
        _ => {}
    }
    // Chat Completions tool calls.
    for call in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = call.get("function").unwrap_or(&Value::Null);
        parts.push(format!(
            "[tool call {}({})]",
            f.get("name").and_then(Value::as_str).unwrap_or("?"),
            f.get("arguments").and_then(Value::as_str).unwrap_or("")
        ));
    }
    parts.retain(|p| !p.is_empty());
    parts.join(" ")
}

/// The text of one content block (text parts, Anthropic tool blocks, anything else by type).
fn block_text(b: &Value) -> String {
    match block_type(b) {
        "text" | "input_text" | "output_text" => b
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        "tool_use" => format!(
            "[tool call {}({})]",
            b.get("name").and_then(Value::as_str).unwrap_or("?"),
            b.get("input").map(Value::to_string).unwrap_or_default()
        ),
        "tool_result" => {
            let inner = match b.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(inner)) => {
                    inner.iter().map(block_text).collect::<Vec<_>>().join(" ")
                }
                _ => String::new(),
            };
            format!("[tool result: {inner}]")
        }
        "thinking" | "redacted_thinking" => String::new(),
        other => format!("[{other}]"),
    }
}

/// The summariser's request body in the client's shape: the instruction, then the transcript
/// as one user message; never streamed.
pub fn summariser_body(shape: Shape, model: &str, transcript: &str) -> Vec<u8> {
    let body = match shape {
        Shape::Chat => json!({
            "model": model,
            "stream": false,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": transcript},
            ],
        }),
        Shape::Anthropic => json!({
            "model": model,
            "stream": false,
            "max_tokens": SUMMARY_MAX_TOKENS,
            "system": INSTRUCTION,
            "messages": [{"role": "user", "content": transcript}],
        }),
    };
    body.to_string().into_bytes()
}

/// The client's body with its conversation replaced: the system messages, the summary, the
/// kept tail (Chat); or the summary appended to `system` and the kept tail (Anthropic). Every
/// other field is the client's.
pub fn rewritten_body(plan: &Plan, summary: &str) -> Vec<u8> {
    let mut body = plan.body.clone();
    let note = format!("{SUMMARY_PREFIX}{}", summary.trim());
    let split = &plan.split;
    let messages = match plan.shape {
        Shape::Chat => {
            let mut out = split.system.clone();
            out.push(json!({"role": "system", "content": note}));
            out.extend(split.kept.iter().cloned());
            out
        }
        Shape::Anthropic => {
            let system = match body.remove("system") {
                Some(Value::String(s)) if !s.is_empty() => Value::String(format!("{s}\n\n{note}")),
                Some(Value::Array(mut blocks)) => {
                    blocks.push(json!({"type": "text", "text": note}));
                    Value::Array(blocks)
                }
                _ => Value::String(note),
            };
            body.insert("system".to_owned(), system);
            split.kept.clone()
        }
    };
    body.insert("messages".to_owned(), Value::Array(messages));
    Value::Object(body).to_string().into_bytes()
}
