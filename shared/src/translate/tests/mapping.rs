//! Mapping tables: stop reasons, usage (totals preserved across the cache split), efforts
//! and budgets, error types.

use serde_json::json;

use crate::sse::FinishReason;
use crate::sse::Format;
use crate::translate::TokenUsage;
use crate::translate::mapping::*;
use crate::translate::{map_error_type, translate_error_body};

#[test]
fn stop_reasons_map_both_ways() {
    let table = [
        ("end_turn", FinishReason::Stop, "stop"),
        ("stop_sequence", FinishReason::Stop, "stop"),
        ("max_tokens", FinishReason::Length, "length"),
        (
            "model_context_window_exceeded",
            FinishReason::Length,
            "length",
        ),
        ("tool_use", FinishReason::ToolCalls, "tool_calls"),
        ("refusal", FinishReason::ContentFilter, "content_filter"),
        (
            "pause_turn",
            FinishReason::Other("pause_turn".into()),
            "stop",
        ),
    ];
    for (anthropic, neutral, chat) in table {
        assert_eq!(finish_from_anthropic(anthropic), neutral, "{anthropic}");
        assert_eq!(finish_to_chat(&neutral), chat, "{anthropic}");
    }
    let back = [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("content_filter", "refusal"),
        ("something_new", "end_turn"),
    ];
    for (chat, anthropic) in back {
        assert_eq!(
            finish_to_anthropic(&finish_from_chat(chat), false),
            anthropic,
            "{chat}"
        );
    }
    assert_eq!(
        finish_to_anthropic(&FinishReason::Stop, true),
        "stop_sequence"
    );
    assert_eq!(
        finish_to_anthropic(&FinishReason::Other("pause_turn".into()), false),
        "pause_turn"
    );
}

#[test]
fn stop_reasons_map_to_responses_status() {
    assert_eq!(
        finish_to_responses(&FinishReason::Stop),
        ("completed", None)
    );
    assert_eq!(
        finish_to_responses(&FinishReason::ToolCalls),
        ("completed", None)
    );
    assert_eq!(
        finish_to_responses(&FinishReason::Length),
        ("incomplete", Some("max_output_tokens"))
    );
    assert_eq!(
        finish_to_responses(&FinishReason::ContentFilter),
        ("incomplete", Some("content_filter"))
    );
}

#[test]
fn anthropic_usage_totals_survive_the_openai_formats() {
    // Anthropic's input excludes both cache counts; OpenAI's prompt includes them.
    let anthropic = json!({
        "input_tokens": 120, "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 2000, "output_tokens": 85,
    });
    let usage = usage_from_anthropic(&anthropic);
    assert_eq!(usage.total_input(), 2150);
    let chat = usage_to_chat(&usage);
    assert_eq!(chat["prompt_tokens"], 2150);
    assert_eq!(chat["prompt_tokens_details"]["cached_tokens"], 2000);
    assert_eq!(chat["completion_tokens"], 85);
    assert_eq!(chat["total_tokens"], 2235);
    let responses = usage_to_responses(&usage);
    assert_eq!(responses["input_tokens"], 2150);
    assert_eq!(responses["input_tokens_details"]["cached_tokens"], 2000);
    assert_eq!(responses["total_tokens"], 2235);
    // Back again: cache writes have no OpenAI field and fold into uncached input, so the
    // total is unchanged.
    let back = usage_from_openai(&chat);
    assert_eq!(back.total(), usage.total());
    assert_eq!(
        (back.input, back.cache_read, back.cache_creation),
        (150, 2000, 0)
    );
}

#[test]
fn openai_usage_splits_cached_tokens_out_for_anthropic() {
    let chat = json!({
        "prompt_tokens": 2150, "completion_tokens": 10, "total_tokens": 2160,
        "prompt_tokens_details": {"cached_tokens": 2000},
        "completion_tokens_details": {"reasoning_tokens": 4},
    });
    let usage = usage_from_openai(&chat);
    assert_eq!(
        usage,
        TokenUsage {
            input: 150,
            cache_read: 2000,
            cache_creation: 0,
            output: 10,
            reasoning: Some(4)
        }
    );
    let anthropic = usage_to_anthropic(&usage);
    assert_eq!(anthropic["input_tokens"], 150);
    assert_eq!(anthropic["cache_read_input_tokens"], 2000);
    assert_eq!(anthropic["output_tokens"], 10);
    // DeepSeek reports cache hits under its own name; Responses under input_tokens.
    let deepseek = usage_from_openai(&json!({"prompt_tokens": 30, "prompt_cache_hit_tokens": 10}));
    assert_eq!((deepseek.input, deepseek.cache_read), (20, 10));
    let responses = usage_from_openai(&json!({
        "input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 2,
    }));
    assert_eq!(
        (responses.input, responses.cache_read, responses.output),
        (5, 4, 2)
    );
    // A cached count above the prompt (a provider bug) never underflows.
    let odd = usage_from_openai(
        &json!({"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 9}}),
    );
    assert_eq!(odd.total_input(), 3);
}

#[test]
fn anthropic_stream_usage_merges_start_and_delta() {
    let mut usage = usage_from_anthropic(
        &json!({"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}),
    );
    merge_anthropic_usage(&mut usage, &json!({"output_tokens": 42}));
    assert_eq!((usage.input, usage.cache_read, usage.output), (10, 5, 42));
}

#[test]
fn efforts_and_budgets_are_inverse_on_low_medium_high() {
    for effort in ["low", "medium", "high"] {
        let budget = budget_for_effort(effort).unwrap_or_default();
        assert_eq!(effort_for_budget(budget), effort);
    }
    assert_eq!(budget_for_effort("minimal"), Some(1024));
    assert_eq!(budget_for_effort("none"), None);
    assert_eq!(effort_for_budget(31_999), "high");
    assert_eq!(effort_for_budget(100_000), "high");
}

#[test]
fn error_types_map_into_each_vocabulary() {
    assert_eq!(
        map_error_type(Format::OpenAiChat, "overloaded_error"),
        "server_error"
    );
    assert_eq!(
        map_error_type(Format::OpenAiChat, "api_error"),
        "server_error"
    );
    assert_eq!(
        map_error_type(Format::OpenAiChat, "rate_limit_error"),
        "rate_limit_error"
    );
    assert_eq!(
        map_error_type(Format::Anthropic, "server_error"),
        "api_error"
    );
    assert_eq!(
        map_error_type(Format::Anthropic, "insufficient_quota"),
        "rate_limit_error"
    );
    assert_eq!(
        map_error_type(Format::Anthropic, "overloaded_error"),
        "overloaded_error"
    );
    // A body without a type gets one from the status.
    let body = translate_error_body(Format::Anthropic, 529, b"{\"message\":\"busy\"}");
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    );
    let long = "é".repeat(5000);
    let body = translate_error_body(Format::OpenAiChat, 500, long.as_bytes());
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.len() <= 2048)
    );
}
