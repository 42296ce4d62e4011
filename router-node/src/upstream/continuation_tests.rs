use serde_json::{Value, json};

use super::*;

fn chunk(delta: Value, finish: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 2, "model": "m-b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }))
    .unwrap()
}

#[test]
fn events_are_read_for_text_tools_finish_and_errors() {
    let text = inspect(&chunk(json!({"content": "Hel"}), Value::Null));
    assert_eq!(text.text.as_deref(), Some("Hel"));
    assert!(!text.role_only && !text.finished && !text.tool_call);
    let role = inspect(&chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    assert!(role.role_only && role.text.is_none());
    let tool = inspect(&chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}),
        Value::Null,
    ));
    assert!(tool.tool_call && !tool.role_only);
    assert!(inspect(&chunk(json!({}), json!("stop"))).finished);
    assert!(inspect(b"[DONE]").done);
    assert!(inspect(br#"{"error":{"type":"server_error","message":"x"}}"#).error);
    assert!(inspect(b"{\"choices\":[{\"index\":1,\"delta\":{}}]}").other_choice);
    assert!(inspect(b"{not json").opaque);
    assert_eq!(inspect(b""), ChatEvent::default());
}

#[test]
fn only_a_plain_text_transcript_within_its_limits_may_continue() {
    let mut t = Transcript::default();
    assert_eq!(may_continue(&t, 0, 1), Err(Refusal::NoText));
    t.observe(&inspect(&chunk(json!({"content": "Hello"}), Value::Null)));
    assert_eq!(t.text(), "Hello");
    assert_eq!(may_continue(&t, 0, 1), Ok(()));
    assert_eq!(may_continue(&t, 1, 1), Err(Refusal::Exhausted));
    assert_eq!(Refusal::Exhausted.outcome(), "exhausted");

    let mut tool = t.clone();
    tool.observe(&inspect(&chunk(
        json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}),
        Value::Null,
    )));
    assert_eq!(may_continue(&tool, 0, 4), Err(Refusal::ToolCall));
    assert_eq!(Refusal::ToolCall.outcome(), "refused");

    let mut two = t.clone();
    two.observe(&inspect(
        b"{\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}",
    ));
    assert_eq!(may_continue(&two, 0, 4), Err(Refusal::NotPlainText));

    let mut big = t.clone();
    let long = "x".repeat(MAX_TRANSCRIPT_BYTES);
    big.observe(&ChatEvent {
        text: Some(long),
        ..ChatEvent::default()
    });
    assert_eq!(may_continue(&big, 0, 4), Err(Refusal::TextCap));
    assert!(big.text().is_empty(), "the copy is freed past the cap");
}

#[test]
fn the_continuation_body_carries_the_prefix_and_the_instruction() {
    let raw = br#"{"model":"p/m","messages":[{"role":"user","content":"Count"}],"n":1,"stream":true,"temperature":0.5}"#;
    let body = continuation_body(raw, "one, two").unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    let messages = v["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["content"], "Count");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "one, two"})
    );
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"], CONTINUE_INSTRUCTION);
    assert_eq!(v["stream"], true);
    assert_eq!(v["model"], "p/m");
    assert_eq!(v["temperature"], 0.5);
    assert!(v.get("n").is_none());
    assert!(continuation_body(b"[1]", "x").is_err());
    assert!(continuation_body(br#"{"input":"x"}"#, "x").is_err());
}

#[test]
fn a_continuation_chunk_takes_the_client_streams_identity() {
    let ids =
        StreamIds::of(br#"{"id":"chatcmpl-a","created":1,"model":"m-a","choices":[]}"#).unwrap();
    let out = rewrite_chunk(&chunk(json!({"content": "lo"}), Value::Null), &ids).unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    assert!(
        text.starts_with("data: ") && text.ends_with("\n\n"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text[6..]).unwrap();
    assert_eq!(
        (&v["id"], &v["created"], &v["model"]),
        (&json!("chatcmpl-a"), &json!(1), &json!("m-a"))
    );
    assert_eq!(v["choices"][0]["delta"]["content"], "lo");
    assert!(rewrite_chunk(b"[DONE]", &ids).is_none());
    assert!(StreamIds::of(b"{\"choices\":[]}").is_none());
}

#[test]
fn the_failed_event_is_a_definite_error() {
    let frame = failed_event("no connection left");
    let text = std::str::from_utf8(&frame).unwrap();
    let v: Value = serde_json::from_str(text.trim().trim_start_matches("data: ")).unwrap();
    assert_eq!(v["error"]["code"], "STREAM_CONTINUATION_FAILED");
    assert_eq!(v["error"]["type"], "server_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no connection left")
    );
}
