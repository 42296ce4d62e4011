//! Variants the providers' own request types allow that earlier captures never showed: each is
//! carried, or dropped and named, and never refused. The shapes follow the official SDKs' type
//! definitions (anthropic 2.17.0 `anthropic/types/`, openai 3.63.0 `openai/types/`), which are
//! generated from the providers' API specifications; `tests/sdk/schema_requests.py` generates
//! every variant of them for the node-level acceptance test.

use serde_json::{Value, json};

use crate::sse::Format;
use crate::translate::{TranslateOptions, TranslatedRequest, translate_request_detailed};

const CHAT: Format = Format::OpenAiChat;
const RESPONSES: Format = Format::OpenAiResponses;
const ANTHROPIC: Format = Format::Anthropic;

fn translate(client: Format, provider: Format, body: &Value) -> TranslatedRequest {
    translate_request_detailed(client, provider, body, &TranslateOptions::default())
        .unwrap_or_else(|e| panic!("{client:?} -> {provider:?} refused {body}: {e}"))
}

/// The request shape Claude Code 2.1.328 sends (and 2.1.332 / 2.1.337 for a model name they do
/// not know): the environment block as a `system`-role message inside `messages`
/// (`SystemMessageParam` in `anthropic/types/message_param.py`), adaptive thinking with
/// `display: omitted`, `output_config.effort` and a `clear_thinking_20251015` edit.
fn claude_code_2_1_328() -> Value {
    json!({
        "model": "coding",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
            {"role": "system", "content": "<env>Working directory: /repo</env>"},
            {"role": "user", "content": "Go on."}
        ],
        "thinking": {"type": "adaptive", "display": "omitted"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": "u1"}
    })
}

#[test]
fn claude_code_system_turn_inside_messages_stays_in_place_for_chat() {
    let out = translate(ANTHROPIC, CHAT, &claude_code_2_1_328());
    let roles: Vec<&str> = out.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "system", "user"]);
    assert_eq!(
        out.body["messages"][2]["content"],
        json!("<env>Working directory: /repo</env>")
    );
    assert_eq!(out.body["reasoning_effort"], json!("high"));
    assert!(out.body.get("output_config").is_none());
    assert!(out.body.get("thinking").is_none());
    assert_eq!(out.dropped, vec!["thinking.display".to_owned()]);
    assert_eq!(out.emulated, vec!["context_management".to_owned()]);
}

#[test]
fn claude_code_system_turn_is_hoisted_for_anthropic_from_responses() {
    // The way back: a system turn mid-conversation from an OpenAI client reaches Anthropic's
    // top-level `system`, in order.
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "a"},
        {"role": "developer", "content": "b"},
    ]});
    let out = translate(RESPONSES, ANTHROPIC, &body);
    assert_eq!(out.body["system"], json!("b"));
    assert_eq!(
        out.body["messages"],
        json!([{"role": "user", "content": "a"}])
    );
}

fn anthropic_with(key: &str, value: Value) -> Value {
    let mut body = json!({"model": "m", "max_tokens": 9000,
        "messages": [{"role": "user", "content": "x"}]});
    body[key] = value;
    body
}

#[test]
fn adaptive_thinking_and_effort_map_to_the_nearest_reasoning_effort() {
    let cases = [
        // (thinking, output_config, reasoning_effort, dropped)
        (json!({"type": "adaptive"}), Value::Null, None, vec![]),
        (
            json!({"type": "adaptive"}),
            json!({"effort": "max"}),
            Some("xhigh"),
            vec![],
        ),
        (Value::Null, json!({"effort": "low"}), Some("low"), vec![]),
        (
            json!({"type": "enabled", "budget_tokens": 8000}),
            json!({"effort": "low"}),
            Some("medium"),
            vec!["output_config.effort"],
        ),
        (
            json!({"type": "disabled"}),
            json!({"effort": "high"}),
            None,
            vec!["output_config.effort"],
        ),
        (
            json!({"type": "between_tools"}),
            Value::Null,
            None,
            vec!["thinking"],
        ),
    ];
    for (thinking, config, effort, names) in cases {
        let mut body = anthropic_with("thinking", thinking.clone());
        body["output_config"] = config.clone();
        let out = translate(ANTHROPIC, CHAT, &body);
        assert_eq!(
            out.body.get("reasoning_effort").and_then(Value::as_str),
            effort,
            "{thinking} {config}"
        );
        assert_eq!(out.dropped, names, "{thinking} {config}");
    }
}

#[test]
fn anthropic_blocks_without_counterpart_are_dropped_and_named() {
    let body = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "search"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "found"}
        ]},
        {"role": "user", "content": [
            {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
            {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "inline"}]}},
            {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
            {"type": "container_upload", "file_id": "file_2"},
            {"type": "text", "text": "and?"}
        ]}
    ]});
    let out = translate(ANTHROPIC, CHAT, &body);
    assert_eq!(
        out.dropped,
        [
            "content[server_tool_use]",
            "content[web_search_tool_result]",
            "content[document].source[url]",
            "content[image].source[file]",
            "content[container_upload]",
        ]
    );
    assert_eq!(
        out.body["messages"][1],
        json!({"role": "assistant", "content": "found"})
    );
    assert_eq!(
        out.body["messages"][2]["content"],
        json!([{"type": "text", "text": "inline"}, {"type": "text", "text": "and?"}])
    );
}

#[test]
fn chat_custom_tools_and_allowed_tools_are_carried_or_named() {
    let body = json!({"model": "m",
    "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
        {"type": "custom", "custom": {"name": "grammar"}}
    ],
    "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "f"}}]}},
    "messages": [
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, {"type": "text", "text": "x"}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "grammar", "input": "raw text"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "function", "name": "f", "content": "legacy"}
    ]});
    let out = translate(CHAT, ANTHROPIC, &body);
    assert_eq!(
        out.dropped,
        // Top-level keys are read in name order.
        [
            "content[input_audio]",
            "messages[function]",
            "tool_choice.allowed_tools",
            "tools[custom]",
        ]
    );
    assert_eq!(out.body["tool_choice"], json!({"type": "any"}));
    let call = &out.body["messages"][1]["content"];
    assert_eq!(
        call,
        &json!([{"type": "tool_use", "id": "c1", "name": "grammar", "input": {"input": "raw text"}}])
    );
    assert_eq!(
        out.body["messages"][2]["content"][0]["tool_use_id"],
        json!("c1")
    );
}

#[test]
fn responses_items_without_counterpart_are_dropped_and_custom_calls_pair() {
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "go"}, {"type": "input_file", "file_id": "file_1"}]},
        {"type": "custom_tool_call", "call_id": "c1", "name": "patch", "input": "*** Begin"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        {"type": "shell_call", "call_id": "s1", "action": {"commands": ["ls"]}},
        {"type": "item_reference", "id": "msg_1"}
    ]});
    let out = translate(RESPONSES, ANTHROPIC, &body);
    assert_eq!(
        out.dropped,
        [
            "content[input_file].file_id",
            "input[shell_call]",
            "input[item_reference]"
        ]
    );
    let msgs = out.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(
        msgs[1]["content"][0]["input"],
        json!({"input": "*** Begin"})
    );
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], json!("c1"));
}

#[test]
fn a_responses_output_without_call_id_answers_the_oldest_open_call() {
    // `call_id` is optional on `FunctionCallOutput` (openai 3.63.0,
    // `openai/types/responses/response_input_item_param.py`).
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "two"},
        {"type": "function_call_output", "output": "one"},
        {"type": "function_call_output", "output": "orphan"}
    ]});
    let out = translate(RESPONSES, CHAT, &body);
    let tools: Vec<(&str, &str)> = out.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools, [("c2", "two"), ("c1", "one")]);
    assert_eq!(out.dropped, ["input[function_call_output]"]);
}

#[test]
fn an_untyped_item_without_a_role_is_an_item_reference() {
    // `ItemReference.type` is optional (openai 3.63.0, `response_input_item_param.py`).
    let body = json!({"model": "m", "input": [{"id": "msg_1"}, {"role": "user", "content": "x"}]});
    let out = translate(RESPONSES, ANTHROPIC, &body);
    assert_eq!(out.dropped, ["input[item_reference]"]);
    assert_eq!(
        out.body["messages"],
        json!([{"role": "user", "content": "x"}])
    );
}
