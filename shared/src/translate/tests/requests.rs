//! Request translation: refusals by parameter name, accepted neutral values, options, and the
//! small mappings the golden fixtures do not isolate.

use serde_json::{Value, json};

use super::request;
use crate::sse::Format;
use crate::translate::{
    MaxTokensField, TranslateError, TranslateOptions, UnknownParams, translate_request,
    translate_request_detailed,
};

const CHAT: Format = Format::OpenAiChat;
const RESPONSES: Format = Format::OpenAiResponses;
const ANTHROPIC: Format = Format::Anthropic;

fn refusal(client: Format, provider: Format, body: Value) -> TranslateError {
    match translate_request(client, provider, &body, &TranslateOptions::default()) {
        Ok(v) => panic!("{client:?} -> {provider:?} accepted {body}: {v}"),
        Err(e) => e,
    }
}

fn chat_with(key: &str, value: Value) -> Value {
    let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    if let Some(o) = body.as_object_mut() {
        o.insert(key.into(), value);
    }
    body
}

/// Translates with the default (drop) policy; returns the body and the dropped names.
fn dropped(client: Format, provider: Format, body: &Value) -> (Value, Vec<String>) {
    let out = translate_request_detailed(client, provider, body, &TranslateOptions::default())
        .unwrap_or_else(|e| panic!("{client:?} -> {provider:?} refused {body}: {e}"));
    (out.body, out.dropped)
}

fn strict() -> TranslateOptions {
    TranslateOptions {
        unknown_params: UnknownParams::Refuse,
        ..TranslateOptions::default()
    }
}

#[test]
fn chat_parameters_without_counterpart_are_dropped_and_named() {
    let table = [
        ("n", json!(3)),
        ("logprobs", json!(true)),
        ("top_logprobs", json!(5)),
        ("audio", json!({"voice": "alloy", "format": "wav"})),
        ("modalities", json!(["text", "audio"])),
        ("frequency_penalty", json!(0.5)),
        ("presence_penalty", json!(-1)),
        ("logit_bias", json!({"50256": -100})),
        ("web_search_options", json!({})),
        ("no_such_parameter", json!(1)),
    ];
    for (key, value) in table {
        let body = chat_with(key, value);
        let (out, names) = dropped(CHAT, ANTHROPIC, &body);
        assert_eq!(names, vec![key.to_owned()], "{key}");
        assert!(out.get(key).is_none(), "{key} leaked: {out}");
        // Strict mode refuses the same field by name.
        let err = translate_request(CHAT, ANTHROPIC, &body, &strict()).unwrap_err();
        assert_eq!(err.param(), Some(key), "{err}");
        assert_eq!(err.status(), 400);
        assert_eq!(err.code(), "unsupported_parameter");
    }
    // JSON mode has no Anthropic counterpart; to a chat provider it is carried.
    let body = chat_with("response_format", json!({"type": "json_object"}));
    let (out, names) = dropped(CHAT, ANTHROPIC, &body);
    assert_eq!(names, vec!["response_format".to_owned()]);
    assert!(out.get("output_config").is_none(), "{out}");
}

#[test]
fn legacy_functions_are_read_as_tools() {
    let mut body = chat_with(
        "functions",
        json!([{"name": "f", "description": "d", "parameters": {"type": "object"}}]),
    );
    body["function_call"] = json!({"name": "f"});
    let (out, names) = dropped(CHAT, ANTHROPIC, &body);
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(
        out["tools"],
        json!([{"name": "f", "description": "d", "input_schema": {"type": "object"}}])
    );
    assert_eq!(out["tool_choice"], json!({"type": "tool", "name": "f"}));
}

#[test]
fn structured_output_is_carried_between_all_formats() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let chat = chat_with(
        "response_format",
        json!({"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": true}}),
    );
    let out = request(CHAT, ANTHROPIC, &chat);
    assert_eq!(
        out["output_config"],
        json!({"format": {"type": "json_schema", "schema": schema}})
    );
    let anthropic = json!({
        "model": "m", "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    });
    let out = request(ANTHROPIC, CHAT, &anthropic);
    assert_eq!(
        out["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}})
    );
    let responses = json!({
        "model": "m", "input": "x",
        "text": {"format": {"type": "json_object"}},
    });
    let out = request(RESPONSES, CHAT, &responses);
    assert_eq!(out["response_format"], json!({"type": "json_object"}));
}

#[test]
fn neutral_values_and_hints_are_accepted() {
    let table = [
        ("n", json!(1)),
        ("logprobs", json!(false)),
        ("top_logprobs", json!(0)),
        ("modalities", json!(["text"])),
        ("response_format", json!({"type": "text"})),
        ("frequency_penalty", json!(0)),
        ("logit_bias", json!({})),
        ("audio", json!(null)),
        ("seed", json!(7)),
        ("store", json!(true)),
        ("metadata", json!({"k": "v"})),
        ("service_tier", json!("auto")),
        ("prompt_cache_key", json!("k")),
    ];
    for (key, value) in table {
        let out = request(CHAT, ANTHROPIC, &chat_with(key, value));
        assert!(out.get(key).is_none(), "{key} leaked: {out}");
    }
}

#[test]
fn anthropic_and_responses_fields_without_counterpart_are_dropped_and_named() {
    let anthropic = |key: &str, value: Value| {
        let mut body = json!({"model": "m", "max_tokens": 5, "messages": []});
        if let Some(o) = body.as_object_mut() {
            o.insert(key.into(), value);
        }
        body
    };
    for key in ["top_k", "mcp_servers", "container", "bogus"] {
        let body = anthropic(key, json!(1));
        let (out, names) = dropped(ANTHROPIC, CHAT, &body);
        assert_eq!(names, vec![key.to_owned()]);
        assert!(out.get(key).is_none(), "{out}");
        let err = translate_request(ANTHROPIC, CHAT, &body, &strict()).unwrap_err();
        assert_eq!(err.param(), Some(key));
    }
    // Server-side context editing is emulated (named), not dropped: see docs/translation.md.
    let out = crate::translate::translate_request_detailed(
        ANTHROPIC,
        CHAT,
        &anthropic("context_management", json!({"edits": []})),
        &TranslateOptions::default(),
    )
    .unwrap();
    assert!(out.dropped.is_empty(), "{:?}", out.dropped);
    assert_eq!(out.emulated, vec!["context_management".to_owned()]);
    let (_, names) = dropped(
        ANTHROPIC,
        CHAT,
        &anthropic("thinking", json!({"type": "between_tools"})),
    );
    assert_eq!(names, vec!["thinking".to_owned()]);
    let err = translate_request(
        ANTHROPIC,
        CHAT,
        &anthropic("thinking", json!({"type": "sometimes"})),
        &strict(),
    )
    .unwrap_err();
    assert_eq!(err.param(), Some("thinking.type"));
    let responses = |key: &str, value: Value| {
        let mut body = json!({"model": "m", "input": "x"});
        if let Some(o) = body.as_object_mut() {
            o.insert(key.into(), value);
        }
        body
    };
    for key in [
        "previous_response_id",
        "conversation",
        "prompt",
        "max_tool_calls",
    ] {
        let (out, names) = dropped(RESPONSES, ANTHROPIC, &responses(key, json!("x")));
        assert_eq!(names, vec![key.to_owned()]);
        assert!(out.get(key).is_none(), "{out}");
    }
    // A tool choice forcing a hosted tool the provider is not offered: the model chooses.
    let body = responses("tool_choice", json!({"type": "file_search"}));
    let (out, names) = dropped(RESPONSES, CHAT, &body);
    assert_eq!(names, vec!["tool_choice[file_search]".to_owned()]);
    assert!(out.get("tool_choice").is_none(), "{out}");
    let err = translate_request(RESPONSES, CHAT, &body, &strict()).unwrap_err();
    assert_eq!(err.param(), Some("tool_choice.type"));
}

#[test]
fn malformed_requests_are_invalid_not_unsupported() {
    let err = refusal(CHAT, ANTHROPIC, json!({"model": "m", "messages": "hello"}));
    assert!(matches!(err, TranslateError::Invalid { .. }), "{err}");
    assert_eq!(err.param(), Some("messages"));
    let err = refusal(
        CHAT,
        ANTHROPIC,
        json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]}),
    );
    assert_eq!(err.param(), Some("messages[0].tool_call_id"));
    let err = refusal(
        ANTHROPIC,
        CHAT,
        json!({"model": "m", "messages": [{"content": "x"}]}),
    );
    assert_eq!(err.param(), Some("messages[0].role"));
}

#[test]
fn responses_is_never_a_provider_format() {
    let body = json!({"model": "m", "messages": []});
    let err = refusal(CHAT, RESPONSES, body);
    assert!(matches!(err, TranslateError::Direction { .. }));
    assert_eq!(err.status(), 500);
}

#[test]
fn same_format_is_passed_through_unchanged() {
    let body = json!({"model": "m", "messages": [], "n": 5, "whatever": true});
    assert_eq!(request(CHAT, CHAT, &body), body);
}

#[test]
fn options_choose_the_limit_field_default_and_reasoning_history() {
    let anthropic = json!({
        "model": "m", "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "a"}]},
        ],
    });
    let opts = TranslateOptions {
        max_tokens_field: MaxTokensField::MaxTokens,
        chat_reasoning_history: true,
        ..TranslateOptions::default()
    };
    let out = translate_request(ANTHROPIC, CHAT, &anthropic, &opts).unwrap_or_default();
    assert_eq!(out["max_tokens"], 100);
    assert!(out.get("max_completion_tokens").is_none());
    assert_eq!(out["messages"][1]["reasoning_content"], "hmm");
    let default = request(ANTHROPIC, CHAT, &anthropic);
    assert!(default["messages"][1].get("reasoning_content").is_none());

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
    let opts = TranslateOptions {
        default_max_tokens: 64_000,
        ..TranslateOptions::default()
    };
    let out = translate_request(CHAT, ANTHROPIC, &chat, &opts).unwrap_or_default();
    assert_eq!(out["max_tokens"], 64_000);
}

#[test]
fn parallel_tool_calls_false_lives_in_anthropic_tool_choice() {
    let body = json!({
        "model": "m", "messages": [{"role": "user", "content": "q"}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "parallel_tool_calls": false,
    });
    let out = request(CHAT, ANTHROPIC, &body);
    assert_eq!(
        out["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    let back = request(ANTHROPIC, CHAT, &out);
    assert_eq!(back["parallel_tool_calls"], false);
    assert_eq!(back["tool_choice"], "auto");
}

#[test]
fn thinking_budget_stays_below_max_tokens() {
    let body = json!({
        "model": "m", "messages": [{"role": "user", "content": "q"}],
        "reasoning_effort": "high", "max_completion_tokens": 5000,
    });
    let out = request(CHAT, ANTHROPIC, &body);
    assert_eq!(
        out["thinking"],
        json!({"type": "enabled", "budget_tokens": 4999})
    );
    let none = request(
        CHAT,
        ANTHROPIC,
        &chat_with("reasoning_effort", json!("none")),
    );
    assert!(none.get("thinking").is_none());
    // Capped below the default `max_tokens` too.
    let medium = request(
        CHAT,
        ANTHROPIC,
        &chat_with("reasoning_effort", json!("medium")),
    );
    assert_eq!(medium["thinking"]["budget_tokens"], 4095);
    // An OpenAI-compatible provider may know efforts Anthropic has no budget for.
    let body = json!({"model": "m", "input": "x", "reasoning": {"effort": "ultra"}});
    assert_eq!(request(RESPONSES, CHAT, &body)["reasoning_effort"], "ultra");
}

#[test]
fn tool_ids_anthropic_refuses_are_rewritten_consistently() {
    let body = json!({
        "model": "m",
        "messages": [
            {"role": "assistant", "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"},
        ],
    });
    let out = request(CHAT, ANTHROPIC, &body);
    assert_eq!(out["messages"][0]["content"][0]["id"], "functions_f_0");
    assert_eq!(
        out["messages"][1]["content"][0]["tool_use_id"],
        "functions_f_0"
    );
}

#[test]
fn thinking_is_left_off_for_a_tool_loop_another_provider_started() {
    let loop_turns = |reasoning: Value| {
        json!({
            "model": "m", "reasoning_effort": "low", "max_completion_tokens": 8000,
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "reasoning_details": reasoning,
                 "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "r"},
            ],
        })
    };
    let unsigned = request(CHAT, ANTHROPIC, &loop_turns(json!(null)));
    assert!(unsigned.get("thinking").is_none(), "{unsigned}");
    let signed = json!([{"type": "reasoning.text", "text": "t", "signature": "s"}]);
    let out = request(CHAT, ANTHROPIC, &loop_turns(signed));
    assert_eq!(out["thinking"]["type"], "enabled");
}
