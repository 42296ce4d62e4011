//! Finish reasons and token usage, mapped between the three formats.
//!
//! Finish reasons go through the tap's [`FinishReason`] so the node sees one vocabulary. Usage
//! goes through [`TokenUsage`], whose `input` excludes cached tokens: OpenAI's `prompt_tokens`
//! (and Responses' `input_tokens`) include cache reads, Anthropic's `input_tokens` excludes both
//! cache reads and cache writes. Normalising on the way in and denormalising on the way out
//! keeps the total right in every direction; the one loss is that OpenAI formats have no field
//! for cache *writes*, which are folded into their prompt count.

use serde_json::{Value, json};

use super::ir::TokenUsage;
use crate::sse::FinishReason;

/// Anthropic `stop_reason` → neutral. `pause_turn` is kept by name; a full context window is
/// a length stop.
pub fn finish_from_anthropic(raw: &str) -> FinishReason {
    match raw {
        "model_context_window_exceeded" => FinishReason::Length,
        other => FinishReason::from_upstream(other),
    }
}

/// OpenAI chat `finish_reason` → neutral.
pub fn finish_from_chat(raw: &str) -> FinishReason {
    FinishReason::from_upstream(raw)
}

/// Neutral → Anthropic `stop_reason`. A plain stop becomes `stop_sequence` only when the
/// provider told us which sequence matched.
pub fn finish_to_anthropic(reason: &FinishReason, matched_stop_sequence: bool) -> &str {
    match reason {
        FinishReason::Stop if matched_stop_sequence => "stop_sequence",
        FinishReason::Stop => "end_turn",
        FinishReason::Length => "max_tokens",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::ContentFilter => "refusal",
        FinishReason::Other(raw) if raw == "pause_turn" => "pause_turn",
        FinishReason::Other(_) => "end_turn",
    }
}

/// Neutral → OpenAI chat `finish_reason`. Reasons chat has no word for become `stop`.
pub fn finish_to_chat(reason: &FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop | FinishReason::Other(_) => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
    }
}

/// Neutral → Responses `status` and `incomplete_details.reason`.
pub fn finish_to_responses(reason: &FinishReason) -> (&'static str, Option<&'static str>) {
    match reason {
        FinishReason::Length => ("incomplete", Some("max_output_tokens")),
        FinishReason::ContentFilter => ("incomplete", Some("content_filter")),
        FinishReason::Stop | FinishReason::ToolCalls | FinishReason::Other(_) => {
            ("completed", None)
        }
    }
}

fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Reads an OpenAI chat `usage` (or Responses `usage`) object. DeepSeek's
/// `prompt_cache_hit_tokens` is read as a cache read too.
pub fn usage_from_openai(v: &Value) -> TokenUsage {
    let prompt = u(v, "prompt_tokens").or_else(|| u(v, "input_tokens"));
    let cached = v
        .get("prompt_tokens_details")
        .or_else(|| v.get("input_tokens_details"))
        .and_then(|d| u(d, "cached_tokens"))
        .or_else(|| u(v, "prompt_cache_hit_tokens"))
        .unwrap_or(0);
    let prompt = prompt.unwrap_or(0);
    TokenUsage {
        input: prompt.saturating_sub(cached),
        cache_read: cached.min(prompt),
        cache_creation: 0,
        output: u(v, "completion_tokens")
            .or_else(|| u(v, "output_tokens"))
            .unwrap_or(0),
        reasoning: v
            .get("completion_tokens_details")
            .or_else(|| v.get("output_tokens_details"))
            .and_then(|d| u(d, "reasoning_tokens")),
    }
}

/// Folds an Anthropic `usage` object in: fields it carries replace earlier ones (the stream
/// reports input in `message_start` and cumulative output in `message_delta`).
pub fn merge_anthropic_usage(into: &mut TokenUsage, v: &Value) {
    if let Some(n) = u(v, "input_tokens") {
        into.input = n;
    }
    if let Some(n) = u(v, "cache_read_input_tokens") {
        into.cache_read = n;
    }
    if let Some(n) = u(v, "cache_creation_input_tokens") {
        into.cache_creation = n;
    }
    if let Some(n) = u(v, "output_tokens") {
        into.output = n;
    }
}

pub fn usage_from_anthropic(v: &Value) -> TokenUsage {
    let mut usage = TokenUsage::default();
    merge_anthropic_usage(&mut usage, v);
    usage
}

/// An OpenAI chat `usage` object: `prompt_tokens` includes cache reads and writes.
pub fn usage_to_chat(usage: &TokenUsage) -> Value {
    let mut v = json!({
        "prompt_tokens": usage.total_input(),
        "completion_tokens": usage.output,
        "total_tokens": usage.total(),
        "prompt_tokens_details": {"cached_tokens": usage.cache_read},
    });
    if let (Some(reasoning), Some(obj)) = (usage.reasoning, v.as_object_mut()) {
        obj.insert(
            "completion_tokens_details".into(),
            json!({"reasoning_tokens": reasoning}),
        );
    }
    v
}

/// An Anthropic `usage` object: `input_tokens` excludes both cache counts.
pub fn usage_to_anthropic(usage: &TokenUsage) -> Value {
    json!({
        "input_tokens": usage.input,
        "cache_creation_input_tokens": usage.cache_creation,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": usage.output,
    })
}

/// A Responses `usage` object: `input_tokens` includes cache reads and writes.
pub fn usage_to_responses(usage: &TokenUsage) -> Value {
    json!({
        "input_tokens": usage.total_input(),
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning.unwrap_or(0)},
        "total_tokens": usage.total(),
    })
}

/// Anthropic thinking budgets for OpenAI reasoning efforts. `none` means no thinking; unknown
/// efforts have no budget.
pub fn budget_for_effort(effort: &str) -> Option<u64> {
    match effort {
        "minimal" => Some(1024),
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" => Some(24_576),
        "xhigh" => Some(32_768),
        _ => None,
    }
}

/// The OpenAI reasoning effort for an Anthropic thinking budget; the inverse of
/// [`budget_for_effort`] on `low`, `medium` and `high`; budgets never map to `minimal` or
/// `xhigh`, which only some OpenAI models accept.
pub fn effort_for_budget(budget: u64) -> &'static str {
    match budget {
        0..4096 => "low",
        4096..16_384 => "medium",
        _ => "high",
    }
}

/// Reasoning efforts with an Anthropic budget, plus `none`.
pub(crate) const KNOWN_EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];
