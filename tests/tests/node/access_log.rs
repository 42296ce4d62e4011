//! One JSON access line per request on the real node: ids, routing, durations, usage, the
//! stream's time to first content, and every target's skip reason on errors — never a secret.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::Value;

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

const CLIENT_KEY: &str = "sy-access-log-client-key-77";
const UPSTREAM_KEY: &str = "sk-access-log-upstream-key-88";

fn config(base_url: &str) -> String {
    format!(
        r#"
[auth]
require_api_key = true
management_key_env = ""

[[api_keys]]
id = "team"
key_env = "CLIENT_KEY"
allowed_connections = ["a"]

[[providers]]
id = "p"
format = "openai"
base_url = "{base_url}/v1"
models = ["m"]

[[providers]]
id = "q"
format = "openai"
base_url = "{base_url}/v1"
models = ["m"]

[[connections]]
id = "a"
provider = "p"
api_key_env = "UP_KEY"

[[connections]]
id = "b"
provider = "q"
api_key_env = "UP_KEY"

[[combos]]
name = "only-q"
targets = [{{ target = "q/m" }}]

[resilience.request_queue]
auto_enable_apikey_providers = false
"#
    )
}

fn access_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "request")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_lines_carry_routing_durations_and_skips() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url()),
        &[("CLIENT_KEY", CLIENT_KEY), ("UP_KEY", UPSTREAM_KEY)],
    )
    .unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", node.client_url());
    let send = |body: &'static str| {
        http.post(&url)
            .bearer_auth(CLIENT_KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(
        send(r#"{"model":"p/m","messages":[{"role":"user","content":"hi"}]}"#)
            .await
            .unwrap()
            .status(),
        200
    );
    let r = send(r#"{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await.unwrap();
    // The key may not use q's connection: every target is skipped.
    let r = send(r#"{"model":"only-q","messages":[{"role":"user","content":"hi"}]}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let log = node.wait_for_log(Duration::from_secs(3), |log| access_lines(log).len() >= 3);
    let lines = access_lines(&log);
    assert_eq!(lines.len(), 3, "{log}");
    let json = &lines[0];
    // The shape of every other JSON log line: timestamp (UTC, microseconds), level, target.
    let ts = json["timestamp"].as_str().unwrap();
    assert_eq!(ts.len(), "2026-11-30T03:44:55.889666Z".len(), "{json}");
    assert!(
        ts.ends_with('Z') && ts.as_bytes()[10] == b'T' && ts.as_bytes()[19] == b'.',
        "{json}"
    );
    assert_eq!(json["level"], "INFO");
    assert_eq!(json["target"], "access");
    assert_eq!(json["api_key"], "team");
    assert_eq!(json["model"], "p/m");
    assert_eq!(json["route_target"], "p/m");
    assert_eq!(json["connection"], "a");
    assert_eq!(json["attempts"], 1);
    assert_eq!(json["status"], 200);
    assert!(json["request_id"].as_str().unwrap().starts_with("req_"));
    assert!(
        json["upstream_ms"].is_u64() && json["overhead_us"].is_u64(),
        "{json}"
    );
    assert!(json["output_tokens"].as_u64().unwrap() > 0, "{json}");
    let stream = &lines[1];
    assert_eq!(stream["stream"], true);
    assert_eq!(stream["completed"], true);
    assert!(stream["ttft_ms"].is_u64(), "{stream}");
    let error = &lines[2];
    assert_eq!(error["status"], 404);
    assert_eq!(error["code"], "no_executable_targets");
    assert!(
        error["skips"].as_str().unwrap().contains("q/m:not_allowed"),
        "{error}"
    );
    for secret in [CLIENT_KEY, UPSTREAM_KEY] {
        assert!(!log.contains(secret), "a secret reached the log");
    }
}

/// The log filter governs the access log like any other target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_filter_can_turn_the_access_log_off() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let node = NodeProcess::start(
        &config(&mock.base_url()),
        &[
            ("CLIENT_KEY", CLIENT_KEY),
            ("UP_KEY", UPSTREAM_KEY),
            ("RUST_LOG", "info,access=off"),
        ],
    )
    .unwrap();
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/v1/chat/completions", node.client_url()))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body(r#"{"model":"p/m","messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await.unwrap();
    // Lines go out in order through one batch writer: once a line logged after the request
    // (the reload a SIGHUP starts) is there, an access line for it would be there too.
    let status = std::process::Command::new("kill")
        .args(["-HUP", &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let marked = eventually(STATE_DEADLINE, || {
        std::future::ready(node.log().contains("SIGHUP: reloading the config"))
    })
    .await;
    let log = node.log();
    assert!(marked, "no reload line after SIGHUP: {log}");
    assert!(
        log.contains("switchyard-node ready"),
        "info lines still arrive: {log}"
    );
    assert!(access_lines(&log).is_empty(), "{log}");
}
