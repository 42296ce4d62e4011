//! The relay's pure message functions: which messages are kept, and the bodies built.

use serde_json::{Value, json};

use super::messages::*;
use crate::api::errors::ClientFormat;

fn chat(role: &str, text: &str) -> Value {
    json!({"role": role, "content": text})
}

fn roles(ms: &[Value]) -> Vec<&str> {
    ms.iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect()
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// A system message and 7 turns.
fn eight() -> Vec<Value> {
    let mut ms = vec![chat("system", "be brief")];
    for i in 1..=7 {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        ms.push(chat(role, &format!("m{i}")));
    }
    ms
}

#[test]
fn the_last_messages_are_kept_and_the_system_message_stays() {
    let s = split(Shape::Chat, &eight(), 6, 4).unwrap();
    assert_eq!(s.system, vec![chat("system", "be brief")]);
    assert_eq!(s.older.len(), 3);
    assert_eq!(s.older[0]["content"], "m1");
    assert_eq!(s.kept.len(), 4);
    assert_eq!(s.kept[0]["content"], "m4");
    assert_eq!(s.kept[3]["content"], "m7");
}

#[test]
fn short_conversations_and_nothing_older_are_left_alone() {
    let ms = eight();
    // 7 turns: below 8, left alone; the system message is not counted.
    assert_eq!(split(Shape::Chat, &ms, 8, 4), None);
    assert!(split(Shape::Chat, &ms, 7, 4).is_some());
    // Everything kept: nothing to summarise.
    assert_eq!(split(Shape::Chat, &ms, 2, 8), None);
    assert_eq!(split(Shape::Chat, &ms[..1], 0, 4), None);
}

#[test]
fn a_tool_call_and_its_results_stay_together() {
    let call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    ]});
    let ms = vec![
        chat("user", "u1"),
        chat("assistant", "a1"),
        chat("user", "u2"),
        call.clone(),
        json!({"role": "tool", "tool_call_id": "c1", "content": "rain"}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "noon"}),
        chat("assistant", "a3"),
        chat("user", "u4"),
    ];
    // The last 4 would start with the second tool result: the call and both results move
    // into the tail together.
    assert_eq!(keep_start(Shape::Chat, &ms, 4), 3);
    let s = split(Shape::Chat, &ms, 6, 4).unwrap();
    assert_eq!(s.kept.len(), 5);
    assert_eq!(s.kept[0], call);
    assert_eq!(
        roles(&s.kept),
        ["assistant", "tool", "tool", "assistant", "user"]
    );
    assert_eq!(roles(&s.older), ["user", "assistant", "user"]);
    // A tail that already starts at the call is not extended.
    assert_eq!(keep_start(Shape::Chat, &ms, 5), 3);
    // Tool calls are written out for the summariser.
    let t = transcript(std::slice::from_ref(&call));
    assert!(
        t.contains("[tool call get_weather({\"city\":\"Oslo\"})]"),
        "{t}"
    );
}

#[test]
fn anthropic_tails_open_with_a_user_turn_outside_tool_results() {
    let ms = vec![
        json!({"role": "user", "content": "u1"}),
        json!({"role": "assistant", "content": "a1"}),
        json!({"role": "user", "content": "u2"}),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "x"}}
        ]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "found"}
        ]}),
        json!({"role": "assistant", "content": "a3"}),
        json!({"role": "user", "content": "u4"}),
    ];
    // Last 3 = [tool_result user, a3, u4]: back over the result and the tool_use turn to u2.
    assert_eq!(keep_start(Shape::Anthropic, &ms, 3), 2);
    // Last 2 = [a3, u4]: an assistant turn cannot open; back to the tool result, then further.
    assert_eq!(keep_start(Shape::Anthropic, &ms, 2), 2);
    let s = split(Shape::Anthropic, &ms, 6, 4).unwrap();
    assert!(s.system.is_empty());
    assert_eq!(roles(&s.older), ["user", "assistant"]);
    let t = transcript(&ms[3..5]);
    assert!(
        t.contains("checking [tool call lookup({\"q\":\"x\"})]"),
        "{t}"
    );
    assert!(t.contains("user: [tool result: found]"), "{t}");
}

#[test]
fn the_chat_body_keeps_its_fields_and_carries_the_summary() {
    let raw = json!({"model": "c", "temperature": 0.2, "messages": eight()}).to_string();
    let p = plan(ClientFormat::OpenAiChat, raw.as_bytes(), 6, 4).unwrap();
    let out = json_of(&rewritten_body(&p, " they talked \n"));
    assert_eq!(out["model"], "c");
    assert_eq!(out["temperature"], 0.2);
    let m = out["messages"].as_array().unwrap();
    assert_eq!(m.len(), 6);
    assert_eq!(m[0], chat("system", "be brief"));
    assert_eq!(
        m[1],
        chat("system", "Summary of the earlier conversation: they talked")
    );
    assert_eq!(m[2]["content"], "m4");
    // Other formats and bodies without a message list are left alone.
    assert_eq!(
        plan(ClientFormat::OpenAiResponses, raw.as_bytes(), 6, 4),
        None
    );
    assert_eq!(
        plan(ClientFormat::OpenAiChat, b"{\"messages\":\"x\"}", 0, 4),
        None
    );
    assert_eq!(plan(ClientFormat::OpenAiChat, b"nope", 0, 4), None);
}

#[test]
fn the_anthropic_body_appends_the_summary_to_system() {
    let mut ms: Vec<Value> = Vec::new();
    for i in 1..=7 {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        ms.push(chat(role, &format!("m{i}")));
    }
    for (system, expected) in [
        (
            json!("rules"),
            json!("rules\n\nSummary of the earlier conversation: S"),
        ),
        (
            json!([{"type": "text", "text": "rules"}]),
            json!([{"type": "text", "text": "rules"}, {"type": "text", "text": "Summary of the earlier conversation: S"}]),
        ),
        (Value::Null, json!("Summary of the earlier conversation: S")),
    ] {
        let mut body = json!({"model": "c", "max_tokens": 10, "messages": ms});
        if !system.is_null() {
            body["system"] = system;
        }
        let p = plan(ClientFormat::Anthropic, body.to_string().as_bytes(), 6, 4).unwrap();
        let out = json_of(&rewritten_body(&p, "S"));
        assert_eq!(out["system"], expected);
        let m = out["messages"].as_array().unwrap();
        // [m4 (assistant), m5, m6, m7] would open with an assistant turn: m3 joins.
        assert_eq!(m.len(), 5);
        assert_eq!(m[0]["content"], "m3");
        assert_eq!(out["max_tokens"], 10);
    }
}

#[test]
fn the_summariser_body_is_the_instruction_and_the_transcript() {
    let chat_body = json_of(&summariser_body(Shape::Chat, "p/m", "user: hi"));
    assert_eq!(chat_body["stream"], false);
    assert_eq!(chat_body["model"], "p/m");
    assert_eq!(chat_body["messages"][0]["content"], INSTRUCTION);
    assert_eq!(chat_body["messages"][1], chat("user", "user: hi"));
    let anthropic = json_of(&summariser_body(Shape::Anthropic, "p/m", "user: hi"));
    assert_eq!(anthropic["system"], INSTRUCTION);
    assert_eq!(anthropic["max_tokens"], 1024);
    assert_eq!(anthropic["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        transcript(&[chat("user", "a"), chat("assistant", "b")]),
        "user: a\n\nassistant: b"
    );
}
