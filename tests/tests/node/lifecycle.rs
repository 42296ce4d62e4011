//! Graceful drain on the real binary: SIGTERM fails readiness at once, in-flight streams finish,
//! new connections are refused once the listeners close, and the process exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures_util::StreamExt;

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::harness::{NodeProcess, http_get_status};
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};

fn config(base_url: &str) -> String {
    format!(
        r#"
[server]
shutdown_grace_ms = 12000

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

[resilience.request_queue]
auto_enable_apikey_providers = false
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_streams_and_refuses_new_connections() {
    let mock = MockUpstream::start(MockConfig {
        chunks: 20,
        chunk_delay: Duration::from_millis(150),
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let mut node = NodeProcess::start(&config(&mock.base_url()), &[("KEY_A", "sk-a")]).unwrap();
    let url = format!("{}/v1/chat/completions", node.client_url());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();

    let mut streams = Vec::new();
    for _ in 0..20 {
        let client = client.clone();
        let url = url.clone();
        streams.push(tokio::spawn(async move {
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .body(
                    r#"{"model":"p/m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
                )
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let mut body = Vec::new();
            let mut s = resp.bytes_stream();
            while let Some(chunk) = s.next().await {
                body.extend_from_slice(&chunk.unwrap());
            }
            String::from_utf8(body).unwrap()
        }));
    }
    // Let every stream commit, then ask the node to stop.
    eventually(STATE_DEADLINE, || {
        std::future::ready(mock.stats().in_flight >= 20)
    })
    .await;
    assert_eq!(
        mock.stats().in_flight,
        20,
        "all streams in flight before SIGTERM"
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &node.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());

    // Readiness fails as soon as the node has the signal.
    let unready = eventually(STATE_DEADLINE, || {
        std::future::ready(http_get_status(node.admin, "/readyz") == Some(503))
    })
    .await;
    assert!(unready, "readiness must fail while draining");

    // After the drain delay (grace / 6 = 2 s) the client listener refuses new connections.
    let refused = eventually(STATE_DEADLINE, || {
        std::future::ready(
            std::net::TcpStream::connect_timeout(&node.client, Duration::from_millis(200)).is_err(),
        )
    })
    .await;
    assert!(refused, "new connections must be refused while draining");

    // Every in-flight stream completes in full.
    for s in streams {
        let body = s.await.unwrap();
        assert!(body.contains("data: [DONE]"), "stream cut short: {body}");
        assert!(
            !body.contains("\"error\""),
            "stream ended with an error: {body}"
        );
    }
    assert_eq!(
        node.wait_exit(Duration::from_secs(10)),
        Some(0),
        "log:\n{}",
        node.log()
    );
}
