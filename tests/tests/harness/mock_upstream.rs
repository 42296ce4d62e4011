//! Black-box tests of the mock upstream over real loopback sockets: wire shapes per route,
//! every scripted fault, the counters, the HTTP control API and the binary.

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not the helpers below;
// failing loudly is what a test helper should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::mock_upstream::{
    FAULT_HEADER, FaultSpec, MockConfig, MockHandle, MockUpstream, Route, StatsSnapshot,
    ToolCallSpec,
};

// === helpers ===

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn start(chunks: u32) -> MockHandle {
    MockUpstream::start(MockConfig {
        chunks,
        ..MockConfig::default()
    })
    .await
    .unwrap()
}

/// One SSE event: its `event:` name (if any) and its `data:` payload; comment-only blocks
/// come back as `(Some(":comment"), text)`.
#[derive(Debug, Clone)]
struct Sse {
    event: Option<String>,
    data: String,
}

impl Sse {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

fn parse_sse(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = None;
        let mut data = Vec::new();
        let mut comment = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                event = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v.to_owned());
            } else if let Some(v) = line.strip_prefix(':') {
                comment = Some(v.trim().to_owned());
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        if data.is_empty() {
            out.push(Sse {
                event: Some(":comment".into()),
                data: comment.unwrap_or_default(),
            });
        } else {
            out.push(Sse {
                event,
                data: data.join("\n"),
            });
        }
    }
    out
}

async fn post(
    mock: &MockHandle,
    route: Route,
    body: Value,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = client()
        .post(format!("{}{}", mock.base_url(), route.path()))
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn sse(mock: &MockHandle, route: Route, body: Value, headers: &[(&str, &str)]) -> Vec<Sse> {
    let resp = post(mock, route, body, headers).await;
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    parse_sse(&resp.text().await.unwrap())
}

/// Reads a streaming body until it ends or fails; returns the bytes and whether it failed.
async fn read_until_error(resp: reqwest::Response) -> (String, bool) {
    let mut stream = resp.bytes_stream();
    let mut got = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(b) => got.extend_from_slice(&b),
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

// === OpenAI Chat Completions ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_json_shape() {
    let mock = start(5).await;
    let resp = post(
        &mock,
        Route::ChatCompletions,
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}),
        &[("authorization", "Bearer sk-a")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("x-request-id"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(v["created"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(v["model"], "gpt-4o-mini");
    assert!(v["system_fingerprint"].as_str().unwrap().starts_with("fp_"));
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hello from the mock upstream");
    assert_eq!(choice["finish_reason"], "stop");
    let u = &v["usage"];
    assert_eq!(u["completion_tokens"], 5);
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + 5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_sse_shape_with_and_without_usage() {
    let mock = start(4).await;
    let frames = sse(
        &mock,
        Route::ChatCompletions,
        json!({"model": "m1", "stream": true, "stream_options": {"include_usage": true}}),
        &[],
    )
    .await;
    // role + 4 content + finish + usage + [DONE]
    assert_eq!(frames.len(), 8, "{frames:?}");
    assert_eq!(frames.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = frames[..7].iter().map(Sse::json).collect();
    let id = chunks[0]["id"].clone();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], id);
        assert_eq!(c["model"], "m1");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks[1..5]
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the mock");
    assert!(chunks[1]["usage"].is_null());
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[6]["choices"], json!([]));
    assert_eq!(chunks[6]["usage"]["completion_tokens"], 4);

    let frames = sse(
        &mock,
        Route::ChatCompletions,
        json!({"model": "m1", "stream": true}),
        &[],
    )
    .await;
    assert_eq!(frames.len(), 7);
    assert!(frames[..6].iter().all(|f| f.json().get("usage").is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_reasoning_and_tool_call_on_script() {
    let mock = start(2).await;
    mock.script(FaultSpec {
        reasoning_chunks: Some(3),
        tool_call: Some(ToolCallSpec {
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}),
        }),
        times: Some(1),
        ..FaultSpec::default()
    })
    .unwrap();
    let frames = sse(
        &mock,
        Route::ChatCompletions,
        json!({"model": "m", "stream": true}),
        &[],
    )
    .await;
    let deltas: Vec<Value> = frames
        .iter()
        .filter(|f| f.data != "[DONE]")
        .map(|f| f.json()["choices"][0].clone())
        .collect();
    let reasoning: Vec<&str> = deltas
        .iter()
        .filter_map(|d| d["delta"]["reasoning_content"].as_str())
        .collect();
    assert_eq!(reasoning.concat(), "Let me think");
    // Reasoning comes before content.
    let first_content = deltas
        .iter()
        .position(|d| {
            d["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .unwrap();
    let last_reasoning = deltas
        .iter()
        .rposition(|d| d["delta"]["reasoning_content"].is_string())
        .unwrap();
    assert!(last_reasoning < first_content);
    let args: String = deltas
        .iter()
        .filter_map(|d| d["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(deltas.last().unwrap()["finish_reason"], "tool_calls");
}

// === Anthropic Messages ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_json_shape() {
    let mock = start(3).await;
    let resp = post(
        &mock,
        Route::Messages,
        json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": []}),
        &[("x-api-key", "sk-ant"), ("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().contains_key("request-id"));
    let v: Value = resp.json().await.unwrap();
    assert!(v["id"].as_str().unwrap().starts_with("msg_01"));
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["model"], "claude-sonnet-4-5");
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "Hello from the"}])
    );
    assert_eq!(v["stop_reason"], "end_turn");
    assert!(v["stop_sequence"].is_null());
    assert_eq!(v["usage"]["output_tokens"], 3);
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_sse_event_order_with_thinking() {
    let mock = start(2).await;
    let frames = sse(
        &mock,
        Route::Messages,
        json!({"model": "claude", "stream": true}),
        &[],
    )
    .await;
    let names: Vec<&str> = frames.iter().map(|f| f.event.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for f in &frames {
        assert_eq!(f.json()["type"], f.event.as_deref().unwrap());
    }
    assert_eq!(frames[0].json()["message"]["model"], "claude");
    assert_eq!(frames[6].json()["delta"]["stop_reason"], "end_turn");
    assert_eq!(frames[6].json()["usage"]["output_tokens"], 2);

    let frames = sse(
        &mock,
        Route::Messages,
        json!({"model": "claude", "stream": true}),
        &[(FAULT_HEADER, r#"{"reasoning_chunks":2}"#)],
    )
    .await;
    let deltas: Vec<(u64, String)> = frames
        .iter()
        .filter(|f| f.event.as_deref() == Some("content_block_delta"))
        .map(|f| {
            let v = f.json();
            (
                v["index"].as_u64().unwrap(),
                v["delta"]["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        deltas,
        [
            (0, "thinking_delta".to_owned()),
            (0, "thinking_delta".to_owned()),
            (0, "signature_delta".to_owned()),
            (1, "text_delta".to_owned()),
            (1, "text_delta".to_owned()),
        ]
    );
    let starts: Vec<Value> = frames
        .iter()
        .filter(|f| f.event.as_deref() == Some("content_block_start"))
        .map(|f| f.json()["content_block"]["type"].clone())
        .collect();
    assert_eq!(starts, [json!("thinking"), json!("text")]);
}

// === OpenAI Responses ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_json_and_sse_shape() {
    let mock = start(3).await;
    let v: Value = post(
        &mock,
        Route::Responses,
        json!({"model": "gpt-4.1", "input": "hi"}),
        &[],
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["object"], "response");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["model"], "gpt-4.1");
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(v["output"][0]["content"][0]["text"], "Hello from the");
    assert_eq!(v["usage"]["output_tokens"], 3);
    assert_eq!(
        v["usage"]["total_tokens"].as_u64().unwrap(),
        v["usage"]["input_tokens"].as_u64().unwrap() + 3
    );

    let frames = sse(
        &mock,
        Route::Responses,
        json!({"model": "gpt-4.1", "stream": true}),
        &[],
    )
    .await;
    let names: Vec<&str> = frames.iter().map(|f| f.event.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, f) in frames.iter().enumerate() {
        let v = f.json();
        assert_eq!(v["type"], f.event.as_deref().unwrap());
        assert_eq!(v["sequence_number"], i);
    }
    let text: String = frames[4..7]
        .iter()
        .map(|f| f.json()["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(frames[7].json()["text"], text.as_str());
    let done = frames[10].json();
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(done["response"]["usage"]["output_tokens"], 3);
}

// === models, auth and error envelopes ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_list_in_both_formats() {
    let mock = start(1).await;
    let url = format!("{}/v1/models", mock.base_url());
    let v: Value = client()
        .get(&url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["id"], "gpt-4o-mini");
    let v: Value = client()
        .get(&url)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"][0]["type"], "model");
    assert_eq!(v["has_more"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_rejections_use_each_providers_envelope() {
    let mock = MockUpstream::start(MockConfig {
        require_key: true,
        valid_keys: vec!["good".into()],
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let resp = post(&mock, Route::ChatCompletions, json!({}), &[]).await;
    assert_eq!(resp.status(), 401);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert_eq!(v["error"]["code"], "invalid_api_key");
    assert!(v["error"]["message"].is_string());

    let resp = post(&mock, Route::Messages, json!({}), &[("x-api-key", "bad")]).await;
    assert_eq!(resp.status(), 401);
    let request_id = resp.headers()["request-id"].to_str().unwrap().to_owned();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "authentication_error");
    assert_eq!(v["request_id"], request_id.as_str());

    let resp = post(
        &mock,
        Route::Responses,
        json!({}),
        &[("authorization", "Bearer good")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    let s = mock.stats();
    assert_eq!(s.rejected, 2);
    assert_eq!(s.successes, 1);
    assert_eq!(s.requests_for_key("bad"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_and_unknown_paths_are_rejected() {
    let mock = start(1).await;
    let resp = client()
        .post(format!("{}/v1/chat/completions", mock.base_url()))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid JSON")
    );
    let resp = client()
        .get(format!("{}/v1/chat/completions", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    let resp = client()
        .get(format!("{}/v2/nothing", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(mock.stats().rejected, 3);
}

// === faults ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_fault_applies_exactly_times_then_normal() {
    let mock = start(1).await;
    mock.script(
        FaultSpec::status(429)
            .for_key("k1")
            .header("Retry-After", "2")
            .header("x-ratelimit-reset-requests", "2s")
            .times(2),
    )
    .unwrap();
    // Another key is not affected and does not consume the fault.
    let other = post(&mock, Route::Messages, json!({}), &[("x-api-key", "k2")]).await;
    assert_eq!(other.status(), 200);
    for _ in 0..2 {
        let resp = post(
            &mock,
            Route::ChatCompletions,
            json!({}),
            &[("authorization", "Bearer k1")],
        )
        .await;
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()["retry-after"], "2");
        assert_eq!(resp.headers()["x-ratelimit-reset-requests"], "2s");
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    }
    let resp = post(
        &mock,
        Route::ChatCompletions,
        json!({}),
        &[("authorization", "Bearer k1")],
    )
    .await;
    assert_eq!(resp.status(), 200);
    let s = mock.stats();
    assert_eq!((s.faults, s.successes, s.pending_faults), (2, 2, 0));

    // Anthropic envelope for the same status on the messages route; custom body verbatim.
    mock.script_all([
        FaultSpec::status(529).on_route(Route::Messages).times(1),
        FaultSpec {
            status: Some(502),
            body: Some(json!("<html>bad gateway</html>")),
            times: Some(1),
            ..FaultSpec::default()
        },
    ])
    .unwrap();
    let resp = post(&mock, Route::Messages, json!({}), &[]).await;
    assert_eq!(resp.status(), 529);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "overloaded_error");
    let resp = post(&mock, Route::Responses, json!({}), &[]).await;
    assert_eq!(resp.status(), 502);
    assert_eq!(resp.text().await.unwrap(), "<html>bad gateway</html>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_match_by_model_and_route_fifo() {
    let mock = start(1).await;
    mock.script_all([
        FaultSpec::status(500).for_model("m-a").times(1),
        FaultSpec::status(503).on_route(Route::Responses).times(1),
        FaultSpec::status(504).times(1),
    ])
    .unwrap();
    let status = |route, model: &'static str| {
        let mock = &mock;
        async move {
            post(mock, route, json!({"model": model}), &[])
                .await
                .status()
                .as_u16()
        }
    };
    assert_eq!(status(Route::Responses, "m-b").await, 503);
    assert_eq!(status(Route::Messages, "m-b").await, 504);
    assert_eq!(status(Route::Messages, "m-b").await, 200);
    assert_eq!(status(Route::ChatCompletions, "m-a").await, 500);
    assert_eq!(mock.stats().by_model["m-b"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_before_body_is_a_connection_error() {
    let mock = start(1).await;
    mock.script(FaultSpec {
        reset_before_body: true,
        times: Some(1),
        ..FaultSpec::default()
    })
    .unwrap();
    let err = client()
        .post(format!("{}/v1/chat/completions", mock.base_url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_status() && !err.is_timeout(), "{err:?}");
    // The next request is served normally.
    assert_eq!(
        post(&mock, Route::ChatCompletions, json!({}), &[])
            .await
            .status(),
        200
    );
    assert_eq!(mock.stats().faults, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_after_chunks_cuts_the_stream() {
    let mock = start(5).await;
    let resp = post(
        &mock,
        Route::ChatCompletions,
        json!({"stream": true}),
        &[(FAULT_HEADER, r#"{"reset_after_chunks":2}"#)],
    )
    .await;
    assert_eq!(resp.status(), 200);
    let (got, failed) = read_until_error(resp).await;
    assert!(failed, "expected a reset, got a clean end: {got}");
    assert!(!got.contains("[DONE]"));

    // A non-streamed body is cut half way.
    let resp = client()
        .post(format!("{}/v1/messages", mock.base_url()))
        .header(FAULT_HEADER, r#"{"reset_after_chunks":0}"#)
        .json(&json!({}))
        .send()
        .await;
    // The reset may also arrive before the headers are read, failing `send` itself.
    if let Ok(r) = resp {
        assert!(r.bytes().await.is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_hangs_then_ends_and_disconnect_releases_it() {
    let mock = start(5).await;
    let started = Instant::now();
    let resp = post(
        &mock,
        Route::ChatCompletions,
        json!({"stream": true}),
        &[(FAULT_HEADER, r#"{"stall_after_chunks":1,"stall_ms":300}"#)],
    )
    .await;
    let text = resp.text().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(280));
    let frames = parse_sse(&text);
    assert_eq!(frames.len(), 2, "role delta and one content chunk: {text}");
    assert!(!text.contains("[DONE]"));

    // A stall capped only by the maximum ends when the client goes away.
    mock.script(FaultSpec {
        stall_after_chunks: Some(0),
        times: Some(1),
        ..FaultSpec::default()
    })
    .unwrap();
    let resp = post(&mock, Route::Messages, json!({"stream": true}), &[]).await;
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("message_start"));
    assert_eq!(mock.stats().in_flight, 1);
    drop(stream);
    let ended = eventually(STATE_DEADLINE, || {
        std::future::ready(mock.stats().in_flight == 0)
    })
    .await;
    assert!(ended, "stall outlived its client");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn midstream_errors_in_each_format() {
    let mock = start(5).await;
    let fault = [(FAULT_HEADER, r#"{"midstream_error_after":2}"#)];

    let frames = sse(
        &mock,
        Route::ChatCompletions,
        json!({"stream": true}),
        &fault,
    )
    .await;
    assert_eq!(frames.len(), 4, "{frames:?}");
    let last = frames.last().unwrap().json();
    assert_eq!(last["error"]["type"], "server_error");
    assert!(frames.iter().all(|f| f.data != "[DONE]"));

    let frames = sse(&mock, Route::Messages, json!({"stream": true}), &fault).await;
    let last = frames.last().unwrap();
    assert_eq!(last.event.as_deref(), Some("error"));
    assert_eq!(last.json()["error"]["type"], "overloaded_error");
    assert!(
        frames
            .iter()
            .all(|f| f.event.as_deref() != Some("message_stop"))
    );

    let frames = sse(&mock, Route::Responses, json!({"stream": true}), &fault).await;
    let last = frames.last().unwrap();
    assert_eq!(last.event.as_deref(), Some("error"));
    assert_eq!(last.json()["sequence_number"], frames.len() - 1);
    assert!(
        frames
            .iter()
            .all(|f| f.event.as_deref() != Some("response.completed"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_before_content_and_reasoning_only() {
    let mock = start(5).await;
    let eof = [(FAULT_HEADER, r#"{"eof_before_content":true}"#)];
    let frames = sse(&mock, Route::ChatCompletions, json!({"stream": true}), &eof).await;
    assert!(!frames.is_empty());
    assert!(
        frames
            .iter()
            .all(|f| f.event.as_deref() == Some(":comment"))
    );
    let frames = sse(&mock, Route::Messages, json!({"stream": true}), &eof).await;
    assert!(frames.iter().all(|f| f.event.as_deref() == Some("ping")));
    // Non-streamed: the headers promise a body that never comes.
    let resp = post(&mock, Route::ChatCompletions, json!({}), &eof).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err());

    let only = [(FAULT_HEADER, r#"{"reasoning_only":true}"#)];
    let frames = sse(&mock, Route::Messages, json!({"stream": true}), &only).await;
    assert!(frames.iter().all(|f| {
        f.json()["delta"]["type"]
            .as_str()
            .is_none_or(|t| t == "thinking_delta" || t == "signature_delta")
    }));
    assert_eq!(
        frames.last().unwrap().event.as_deref(),
        Some("message_stop")
    );
    let frames = sse(
        &mock,
        Route::ChatCompletions,
        json!({"stream": true}),
        &only,
    )
    .await;
    let content: Vec<Value> = frames
        .iter()
        .filter(|f| f.data != "[DONE]")
        .map(|f| f.json()["choices"][0]["delta"]["content"].clone())
        .filter(|c| c.as_str().is_some_and(|s| !s.is_empty()))
        .collect();
    assert!(content.is_empty(), "{content:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_body_200_and_latency_before_headers() {
    let mock = start(1).await;
    let resp = post(
        &mock,
        Route::Messages,
        json!({"stream": true}),
        &[(
            FAULT_HEADER,
            r#"{"error_body_200":true,"error_type":"overloaded_error"}"#,
        )],
    )
    .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "overloaded_error");

    let started = Instant::now();
    let resp = post(
        &mock,
        Route::ChatCompletions,
        json!({"stream": true}),
        &[(
            FAULT_HEADER,
            r#"{"latency_before_headers_ms":150,"first_chunk_delay_ms":100,"chunks":2}"#,
        )],
    )
    .await;
    let headers_at = started.elapsed();
    assert!(headers_at >= Duration::from_millis(140), "{headers_at:?}");
    let mut stream = resp.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk.unwrap());
    }
    assert!(started.elapsed() >= headers_at + Duration::from_millis(90));
    assert!(String::from_utf8_lossy(&body).ends_with("data: [DONE]\n\n"));
}

// === counters ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_max_in_flight_per_key() {
    let mock = start(1).await;
    mock.script(FaultSpec {
        latency_before_headers_ms: Some(500),
        ..FaultSpec::default()
    })
    .unwrap();
    let fire = |key: &'static str, n: usize| {
        let url = format!("{}/v1/chat/completions", mock.base_url());
        (0..n).map(move |_| {
            let url = url.clone();
            tokio::spawn(async move {
                client()
                    .post(url)
                    .bearer_auth(key)
                    .header("x-trace", "t1")
                    .json(&json!({"model": "m-x"}))
                    .send()
                    .await
                    .unwrap()
                    .status()
            })
        })
    };
    let tasks: Vec<_> = fire("k-five", 5).chain(fire("k-two", 2)).collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    let s = mock.stats();
    assert_eq!(s.max_in_flight_for_key("k-five"), 5);
    assert_eq!(s.max_in_flight_for_key("k-two"), 2);
    assert_eq!(s.max_in_flight, 7);
    assert_eq!(s.in_flight, 0);
    assert_eq!(s.requests_total, 7);
    assert_eq!(s.faults, 7);
    assert_eq!(s.by_route_key["chat_completions"]["k-five"], 5);
    assert_eq!(s.by_model["m-x"], 7);
    assert!(s.any_request_had_header("X-Trace"));
    assert!(!s.any_request_had_header("x-session-id"));
    let auth: Vec<&str> = s.recent_headers["k-two"]
        .iter()
        .flatten()
        .filter(|(n, _)| n == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(auth, ["Bearer k-two", "Bearer k-two"]);
    assert_eq!(s.recent_bodies.len(), 7);
    assert_eq!(s.recent_bodies[0].body, r#"{"model":"m-x"}"#);

    mock.reset();
    let s = mock.stats();
    assert_eq!(
        (s.requests_total, s.pending_faults, s.max_in_flight),
        (0, 0, 0)
    );
}

// === control API ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_api_round_trip() {
    let mock = start(2).await;
    let c = client();
    let base = mock.base_url();
    let resp = c
        .post(format!("{base}/__mock/script"))
        .json(&json!([
            {"match": {"route": "/v1/messages", "api_key": "ka"}, "times": 1, "status": 429,
             "headers": {"anthropic-ratelimit-requests-reset": "2026-01-01T00:00:00Z"}},
            {"match": {"route": "chat"}, "times": 2, "midstream_error_after": 1}
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"queued": 2, "pending": 2})
    );
    let listed: Value = c
        .get(format!("{base}/__mock/script"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["pending"][1]["remaining"], 2);

    let resp = post(&mock, Route::Messages, json!({}), &[("x-api-key", "ka")]).await;
    assert_eq!(resp.status(), 429);
    assert!(
        resp.headers()
            .contains_key("anthropic-ratelimit-requests-reset")
    );

    let stats: StatsSnapshot = c
        .get(format!("{base}/__mock/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats.faults, 1);
    assert_eq!(stats.pending_faults, 1);
    assert_eq!(stats.by_route_key["messages"]["ka"], 1);
    // Control requests are not counted.
    assert_eq!(stats.requests_total, 1);

    let bad = c
        .post(format!("{base}/__mock/script"))
        .json(&json!({"stauts": 500}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    let resp = c.post(format!("{base}/__mock/reset")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let stats: StatsSnapshot = c
        .get(format!("{base}/__mock/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((stats.requests_total, stats.pending_faults), (0, 0));
}

// === the binary ===

/// Kills the child process on drop so a failing test leaves nothing running.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_prints_address_and_loads_fault_file() {
    let dir = std::env::temp_dir().join(format!("mock-upstream-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fault_file = dir.join("faults.json");
    std::fs::write(
        &fault_file,
        r#"[{"match":{"route":"chat_completions"},"times":1,"status":503,"headers":{"Retry-After":"1"}}]"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard-test-mock-upstream"))
        .args(["--listen", "127.0.0.1:0", "--chunks", "3", "--fault-file"])
        .arg(&fault_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard(child);
    let addr = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_owned()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(addr.starts_with("127.0.0.1:"), "{addr:?}");

    let url = format!("http://{addr}/v1/chat/completions");
    let resp = client().post(&url).json(&json!({})).send().await.unwrap();
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let v: Value = client()
        .post(&url)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let stats: StatsSnapshot = client()
        .get(format!("http://{addr}/__mock/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((stats.faults, stats.successes), (1, 1));
    drop(guard);
}
