//! Config hot reload on the real binary: SIGHUP applies a new file without dropping in-flight
//! streams, rejects an invalid one and keeps serving, and carries resilience state over.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream, Route};

const MGMT_KEY: &str = "mgmt-reload-7b2e";
const ENV: &[(&str, &str)] = &[
    ("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY),
    ("KEY_A", "sk-a"),
    ("KEY_B", "sk-b"),
];

const PRELUDE: &str = r#"
[auth]
require_api_key = false
management_key_env = "SWITCHYARD_MANAGEMENT_KEY"

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false
"#;

fn provider(id: &str, conn: &str, key_env: &str, mock: &MockHandle) -> String {
    format!(
        r#"
[[providers]]
id = "{id}"
category = "apikey"
format = "openai"
base_url = "{base}/v1"
models = ["m"]

[[connections]]
id = "{conn}"
provider = "{id}"
api_key_env = "{key_env}"
"#,
        base = mock.base_url()
    )
}

/// Rewrites the node's config file (keeping its listeners) and sends SIGHUP.
fn reload(node: &NodeProcess, body: &str) {
    let full = format!(
        "[server]\nlisten = \"{}\"\nadmin_listen = \"{}\"\n{body}",
        node.client, node.admin
    );
    std::fs::write(node.dir.path().join("switchyard.toml"), full).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn count(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

/// Waits until the log has `n` lines containing `needle`.
fn wait_lines(node: &NodeProcess, needle: &str, n: usize) -> String {
    let log = node.wait_for_log(Duration::from_secs(15), |l| count(l, needle) >= n);
    assert!(
        count(&log, needle) >= n,
        "no {n}x '{needle}' in log:\n{log}"
    );
    log
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn chat(node: &NodeProcess, model: &str, stream: bool) -> reqwest::Response {
    client()
        .post(format!("{}/v1/chat/completions", node.client_url()))
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"model":"{model}","stream":{stream},"messages":[{{"role":"user","content":"hi"}}]}}"#
        ))
        .send()
        .await
        .unwrap()
}

async fn admin(node: &NodeProcess, path: &str) -> Value {
    let resp = client()
        .get(format!("{}{path}", node.admin_url()))
        .bearer_auth(MGMT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    resp.json().await.unwrap()
}

async fn metrics(node: &NodeProcess) -> String {
    client()
        .get(format!("{}/metrics", node.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn connection_ids(node: &NodeProcess) -> Vec<String> {
    let body = admin(node, "/api/resilience/connections").await;
    let mut ids: Vec<String> = body["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_swaps_connections_without_dropping_a_stream() {
    let slow = MockUpstream::start(MockConfig {
        chunks: 20,
        chunk_delay: Duration::from_millis(150),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let fast = MockUpstream::start(MockConfig::default()).await.unwrap();
    let first = format!("{PRELUDE}{}", provider("pa", "a1", "KEY_A", &slow));
    let node = NodeProcess::start(&first, ENV).unwrap();
    assert_eq!(connection_ids(&node).await, ["a1"]);

    let resp = chat(&node, "pa/m", true).await;
    assert_eq!(resp.status(), 200);
    let stream = tokio::spawn(async move {
        let mut body = Vec::new();
        let mut s = resp.bytes_stream();
        while let Some(chunk) = s.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(body).unwrap()
    });
    eventually(STATE_DEADLINE, || {
        std::future::ready(slow.stats().in_flight >= 1)
    })
    .await;
    assert_eq!(slow.stats().in_flight, 1, "the stream is in flight");

    // Replace provider pa / connection a1 by pb / b1 while the stream runs.
    reload(
        &node,
        &format!("{PRELUDE}{}", provider("pb", "b1", "KEY_B", &fast)),
    );
    let log = wait_lines(&node, "config reloaded", 1);
    assert!(
        log.lines().any(|l| l.contains("config reloaded")
            && l.contains("\"connections_added\":1")
            && l.contains("\"connections_removed\":1")),
        "reload counts missing:\n{log}"
    );
    assert_eq!(slow.stats().in_flight, 1, "the stream survived the swap");

    // The new connection serves, the removed one is no longer used.
    let r = chat(&node, "pb/m", false).await;
    assert_eq!(r.status(), 200);
    assert_eq!(fast.stats().requests_for_key("sk-b"), 1);
    let r = chat(&node, "pa/m", false).await;
    assert!(r.status().is_client_error(), "{}", r.status());
    assert_eq!(slow.stats().requests_total, 1);
    assert_eq!(connection_ids(&node).await, ["b1"]);
    let health = admin(&node, "/api/monitoring/health").await;
    assert_eq!(health["config"]["generation"], 2, "{health}");

    // The stream that started on the old config completes intact; then the old actors stop.
    let body = tokio::time::timeout(Duration::from_secs(20), stream)
        .await
        .unwrap()
        .unwrap();
    assert!(body.contains("data: [DONE]"), "stream cut short: {body}");
    assert!(
        !body.contains("\"error\""),
        "stream ended in an error: {body}"
    );
    wait_lines(&node, "previous config retired", 1);
    assert!(
        metrics(&node)
            .await
            .contains("switchyard_config_reloads_total{result=\"ok\"} 1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_file_is_rejected_and_the_old_config_kept() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let good = format!("{PRELUDE}{}", provider("pa", "a1", "KEY_A", &mock));
    let node = NodeProcess::start(&good, ENV).unwrap();

    // A syntax error.
    reload(&node, &format!("{good}\n[[providers]\nid = "));
    wait_lines(&node, "keeping the running config", 1);
    // A semantic error: a connection of an unknown provider.
    reload(
        &node,
        &format!(
            "{good}\n[[connections]]\nid = \"zz\"\nprovider = \"nope\"\napi_key_env = \"KEY_A\"\n"
        ),
    );
    let log = wait_lines(&node, "keeping the running config", 2);
    assert!(
        log.lines()
            .any(|l| l.contains("config reload rejected") && l.contains("nope")),
        "the semantic error is not logged:\n{log}"
    );
    assert!(!log.contains("config reloaded"), "{log}");

    let r = chat(&node, "pa/m", false).await;
    assert_eq!(r.status(), 200);
    assert_eq!(connection_ids(&node).await, ["a1"]);
    let text = metrics(&node).await;
    assert!(
        text.contains("switchyard_config_reloads_total{result=\"rejected\"} 2"),
        "{text}"
    );
    assert!(text.contains("switchyard_config_reloads_total{result=\"ok\"} 0"));
    let health = admin(&node, "/api/monitoring/health").await;
    assert_eq!(health["config"]["generation"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_survives_an_unrelated_reload_but_not_a_new_key() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let other = MockUpstream::start(MockConfig::default()).await.unwrap();
    let first = format!("{PRELUDE}{}", provider("pa", "a1", "KEY_A", &mock));
    let node = NodeProcess::start(&first, ENV).unwrap();
    mock.script(
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .header("retry-after", "30")
            .times(1),
    )
    .unwrap();
    let r = chat(&node, "pa/m", false).await;
    assert_eq!(r.status(), 429);

    let remaining = |v: &Value| -> u64 {
        v["connections"]
            .as_array()
            .expect("connections")
            .iter()
            .find(|c| c["id"] == "a1")
            .map(|c| c["cooldownRemainingMs"].as_u64().unwrap_or(0))
            .unwrap_or(0)
    };
    // The actor applies the cooldown asynchronously: wait for it to show.
    let before = eventually(STATE_DEADLINE, || async {
        Some(remaining(&admin(&node, "/api/resilience/cooldowns").await)).filter(|ms| *ms > 0)
    })
    .await
    .unwrap_or(0);
    assert!(before > 10_000, "a1 is not cooling: {before}");

    reload(
        &node,
        &format!(
            "{PRELUDE}{}{}",
            provider("pa", "a1", "KEY_A", &mock),
            provider("pb", "b1", "KEY_B", &other)
        ),
    );
    wait_lines(&node, "config reloaded", 1);
    let after = remaining(&admin(&node, "/api/resilience/cooldowns").await);
    assert!(
        after > 10_000 && after <= before,
        "cooldown lost: {before} -> {after}"
    );
    let hits = mock.stats().requests_total;
    let r = chat(&node, "pa/m", false).await;
    assert!(!r.status().is_success(), "{}", r.status());
    assert_eq!(mock.stats().requests_total, hits, "a cooling a1 was used");

    // A new credential is how an operator fixes a connection: its state starts fresh.
    reload(
        &node,
        &format!("{PRELUDE}{}", provider("pa", "a1", "KEY_B", &mock)),
    );
    wait_lines(&node, "config reloaded", 2);
    assert_eq!(
        remaining(&admin(&node, "/api/resilience/cooldowns").await),
        0
    );
    let r = chat(&node, "pa/m", false).await;
    assert_eq!(r.status(), 200);
    assert_eq!(mock.stats().requests_for_key("sk-b"), 1);
}
