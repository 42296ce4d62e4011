//! The optional windowed provider cooldown (docs/policy.md, `provider_cooldown`) on the real node: off by default, and when
//! enabled a provider with too many failures in its window is skipped without an attempt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::Value;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

fn config(base_url: &str, enabled: bool) -> String {
    format!(
        r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "p"
category = "apikey"
format = "openai"
base_url = "{base_url}/v1"
models = ["m"]

[[connections]]
id = "a"
provider = "p"
api_key_env = "KEY_A"

[[connections]]
id = "b"
provider = "p"
api_key_env = "KEY_B"

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.provider_cooldown]
enabled = {enabled}
apikey = {{ failure_threshold = 2, failure_window_ms = 60000, cooldown_ms = 5000 }}
"#
    )
}

async fn chat(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let resp = client
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(r#"{"model":"p/m","messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_provider_cooldown_skips_the_provider_without_an_attempt() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(FaultSpec::status(503)).unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url(), true),
        &[("KEY_A", "sk-a"), ("KEY_B", "sk-b")],
    )
    .unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Both connections fail once: two provider failures inside the window. Both now cool, so
    // the failing request itself gets the connection-level 429 (the spec's answer when every
    // connection is cooling).
    let (status, body) = chat(&client, &node.client_url()).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "connection_cooldown", "{body}");
    assert_eq!(mock.stats().requests_total, 2);
    // Now the provider itself is cooling: no attempt reaches the mock.
    let (status, body) = chat(&client, &node.client_url()).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "provider_cooldown", "{body}");
    assert_eq!(body["error"]["type"], "server_error");
    assert_eq!(mock.stats().requests_total, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_cooldown_is_off_by_default() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(FaultSpec::status(503).times(2)).unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url(), false),
        &[("KEY_A", "sk-a"), ("KEY_B", "sk-b")],
    )
    .unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (status, body) = chat(&client, &node.client_url()).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "connection_cooldown", "{body}");
    // Both connections now cool for a few seconds, but the provider is not skipped as a whole:
    // the answer is the connection-level 429, not provider_cooldown.
    let (status, body) = chat(&client, &node.client_url()).await;
    assert_ne!(body["error"]["code"], "provider_cooldown", "{body}");
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "connection_cooldown", "{body}");
}
