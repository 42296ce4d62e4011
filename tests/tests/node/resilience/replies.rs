//! What every reply carries: routing headers on successes, typed error envelopes (OpenAI's,
//! Anthropic's on `/v1/messages`) on failures, for upstream errors and local decisions alike.
//!
//! Each test starts its own mock and node, scripts upstream faults, and asserts what the client
//! sees and what reached the upstream (the mock's per-key counters and in-flight peaks).
//! Durations in the configs are small so every test stays well under 20 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::node::{
    NO_QUEUE_NO_WAIT, Node, PRELUDE, assert_envelope, connection, hits, mock, wait_cooled_down,
    wait_cooling,
};
use switchyard_tests::mock_upstream::{FaultSpec, Route};

fn stream_body() -> String {
    serde_json::json!({
        "model": "p/mock-model",
        "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

/// Successes carry `x-switchyard-connection` and `x-switchyard-attempts`; every error carries
/// `{"error":{"message","type","code"}}` (Anthropic's envelope on `/v1/messages`), and
/// upstream errors also name the connection and the attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reply_has_routing_headers_and_typed_errors() {
    let mock = mock().await;
    let node = Node::two_keys(&mock, "").await;

    let r = node.chat("p/mock-model").await;
    r.assert_ok("a", 1);
    assert!(r.header("x-request-id").is_some(), "{r:?}");

    // A committed stream carries the same headers.
    let r = node
        .post("/v1/chat/completions", "application/json", stream_body())
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "{r:?}"
    );
    assert_eq!((r.connection(), r.attempts()), ("a", 1), "{r:?}");
    assert!(r.text.contains("data: [DONE]"), "{r:?}");

    // A stream that fails before its first byte is a plain JSON error.
    mock.script(
        FaultSpec::status(500)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    let r = node
        .post("/v1/chat/completions", "application/json", stream_body())
        .await;
    // Both 500s cooled their connection: the spec's 429 for a provider whose every
    // connection is cooling.
    assert_eq!(r.status, 429, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!((r.connection(), r.attempts()), ("b", 2), "{r:?}");
    // Both connections now cool for the backoff base (3 s); wait it out.
    for connection in ["a", "b"] {
        wait_cooling(&node, connection).await;
    }
    for connection in ["a", "b"] {
        wait_cooled_down(&node, connection).await;
    }

    // An upstream error after failover names the last connection and counts both attempts.
    mock.script(
        FaultSpec::status(500)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    let r = node.chat("p/mock-model").await;
    // Both cooled their connection: the spec's 429 for a provider whose every connection
    // is cooling, naming the last connection and counting both attempts.
    assert_eq!(r.status, 429, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(r.connection(), "b", "{r:?}");
    assert_eq!(r.attempts(), 2, "{r:?}");

    // Requests refused before routing.
    let r = node.chat("nope/unknown-model").await;
    r.assert_error(404, "model_not_found");
    let r = node
        .post(
            "/v1/chat/completions",
            "application/json",
            "{not json".into(),
        )
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    let r = node
        .post("/v1/chat/completions", "text/plain", "{}".into())
        .await;
    r.assert_error(415, "unsupported_media_type");
    let r = node
        .post("/v1/nowhere", "application/json", "{}".into())
        .await;
    r.assert_error(404, "not_found");

    // Anthropic's envelope, with `code` inside `error`: an Anthropic request to an
    // OpenAI-format provider is translated, and a malformed message is a 400 naming it.
    let body = serde_json::json!({
        "model": "p/mock-model",
        "max_tokens": 16,
        "messages": [{"content": "hi"}],
    });
    let r = node
        .post("/v1/messages", "application/json", body.to_string())
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.json["error"]["code"], "invalid_parameter", "{r:?}");
    assert_eq!(r.json["error"]["param"], "messages[0].role", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
}

/// On `/v1/messages` (an Anthropic-format provider) successes carry the routing headers and
/// errors use Anthropic's envelope with `code` inside `error`, for upstream errors and
/// Switchyard's own decisions alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_route_replies_have_headers_and_anthropic_envelope() {
    let mock = mock().await;
    let config = format!(
        r#"{PRELUDE}{NO_QUEUE_NO_WAIT}
[[providers]]
id = "an"
category = "apikey"
format = "anthropic"
base_url = "{base}/v1"
[providers.timeouts]
headers_ms = 8000
{conn}"#,
        base = mock.base_url(),
        conn = connection("an1", "an", "KEY_AN", ""),
    );
    let node = Node::start(config, &[("KEY_AN", "sk-an")]).await;
    let body = serde_json::json!({
        "model": "an/claude-sonnet-4-5",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string();

    let r = node
        .post("/v1/messages", "application/json", body.clone())
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!((r.connection(), r.attempts()), ("an1", 1), "{r:?}");
    assert_eq!(r.json["type"], "message", "{r:?}");

    mock.script(FaultSpec::status(429).on_route(Route::Messages).times(1))
        .unwrap();
    let r = node
        .post("/v1/messages", "application/json", body.clone())
        .await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.error_type(), "rate_limit_error", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(r.connection(), "an1", "{r:?}");

    wait_cooling(&node, "an1").await;
    let r = node.post("/v1/messages", "application/json", body).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.code(), "connection_cooldown", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(hits(&mock, "sk-an"), 2);
}
