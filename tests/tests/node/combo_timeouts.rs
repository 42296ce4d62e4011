//! Combo time limits on the real node: a slow target is abandoned after the combo's per-target
//! `timeout_ms` and the next target answers; `combo_timeout_ms` bounds the whole dispatch with
//! 504 `COMBO_TIMEOUT`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

fn config(base_url: &str, timeout_ms: u64, combo_timeout_ms: u64) -> String {
    format!(
        r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "slow"
category = "apikey"
format = "openai"
base_url = "{base_url}/v1"
models = ["m"]

[[providers]]
id = "fast"
category = "apikey"
format = "openai"
base_url = "{base_url}/v1"
models = ["m"]

[[connections]]
id = "slow-1"
provider = "slow"
api_key_env = "KEY_SLOW"

[[connections]]
id = "fast-1"
provider = "fast"
api_key_env = "KEY_FAST"

[[combos]]
name = "c"
strategy = "priority"
targets = [{{ target = "slow/m" }}, {{ target = "fast/m" }}]
[combos.config]
timeout_ms = {timeout_ms}
combo_timeout_ms = {combo_timeout_ms}

[resilience.request_queue]
auto_enable_apikey_providers = false
"#
    )
}

fn slow(key: &str, ms: u64) -> FaultSpec {
    serde_json::from_value(json!({"match": {"api_key": key}, "latency_before_headers_ms": ms}))
        .unwrap()
}

async fn ask(url: &str) -> (u16, Value, Option<String>) {
    let resp = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(r#"{"model":"c","messages":[{"role":"user","content":"hi"}]}"#)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let conn = resp
        .headers()
        .get("x-switchyard-connection")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, resp.json().await.unwrap_or(Value::Null), conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_target_is_abandoned_after_the_per_target_timeout() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(slow("sk-slow", 3000)).unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url(), 500, 0),
        &[("KEY_SLOW", "sk-slow"), ("KEY_FAST", "sk-fast")],
    )
    .unwrap();
    let t = Instant::now();
    let (status, body, conn) = ask(&node.client_url()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(conn.as_deref(), Some("fast-1"));
    // The bound is the feature: the slow target answers after 3 s, so anything under that
    // shows the 500 ms timeout at work; 2.5 s leaves room for a loaded machine.
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "took {:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combo_timeout_bounds_the_whole_dispatch() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(slow("sk-slow", 3000)).unwrap();
    mock.script(slow("sk-fast", 3000)).unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url(), 60_000, 800),
        &[("KEY_SLOW", "sk-slow"), ("KEY_FAST", "sk-fast")],
    )
    .unwrap();
    let t = Instant::now();
    let (status, body, _) = ask(&node.client_url()).await;
    assert_eq!(
        status,
        504,
        "{body} after {:?}; log: {}",
        t.elapsed(),
        node.log()
    );
    assert_eq!(body["error"]["code"], "COMBO_TIMEOUT");
    assert_eq!(body["error"]["type"], "server_error");
    // The bound is the feature: both targets answer after 3 s; the 800 ms combo timeout must
    // end the dispatch well before (generous for a loaded machine).
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "took {:?}",
        t.elapsed()
    );
}
