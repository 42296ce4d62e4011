//! The provider breaker across a cluster: failures counted cluster-wide open it on every node,
//! and during HALF_OPEN exactly one probe in the whole cluster reaches the provider.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use switchyard_tests::cluster::{TestCluster, http_get};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};

/// One provider with one connection that never cools (so every failure reaches the breaker),
/// a threshold of 12 and the shortest reset timeout.
fn body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}\n[resilience.provider_breaker.apikey]\nfailure_threshold = 12\nreset_timeout_ms = 1000\n",
        cluster_provider(&mock.base_url(), &["m"], ""),
        connection("k0", "p", "KEY_0", "disable_cooling = true"),
        queue_and_wait_off()
    )
}

async fn start(mock: &MockHandle) -> TestCluster {
    let body = body(mock);
    tokio::task::spawn_blocking(move || {
        let cluster = TestCluster::start(3, &body, &[("KEY_0", "sk-0")]).expect("cluster");
        assert!(
            cluster.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe:\n{}",
            cluster.nodes[0].log()
        );
        cluster
    })
    .await
    .unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

async fn chat(http: &reqwest::Client, node: &NodeProcess) -> u16 {
    http.post(format!("{}/v1/chat/completions", node.client_url()))
        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

pub(crate) async fn breaker_state(node: &NodeProcess) -> String {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || {
        http_get(admin, "/api/monitoring/health")
            .and_then(|(_, b)| serde_json::from_str::<Value>(&b).ok())
            .and_then(|v| {
                v["providerBreakers"][0]["state"]
                    .as_str()
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    })
    .await
    .unwrap()
}

async fn all_in(cluster: &TestCluster, states: &[&str], limit: Duration) -> bool {
    eventually(limit, || async {
        for node in &cluster.nodes {
            if !states.contains(&breaker_state(node).await.as_str()) {
                return false;
            }
        }
        true
    })
    .await
}

/// 12 failures, 4 through each node: no node reaches the threshold alone.
async fn open_with_spread_failures(
    mock: &MockHandle,
    cluster: &TestCluster,
    http: &reqwest::Client,
) {
    mock.script(FaultSpec::status(500).times(12)).unwrap();
    for _ in 0..4 {
        for node in &cluster.nodes {
            let status = chat(http, node).await;
            assert!(status >= 500, "a failing attempt answered {status}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_spread_over_three_nodes_open_the_breaker_everywhere() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock).await;
    let http = client();
    open_with_spread_failures(&mock, &cluster, &http).await;
    assert!(
        all_in(&cluster, &["OPEN", "HALF_OPEN"], Duration::from_secs(3)).await,
        "not open on every node; node-2 log:\n{}",
        cluster.nodes[2].log()
    );
    let before = mock.stats().requests_total;
    // Inside the open window no node reaches the provider.
    for node in &cluster.nodes {
        assert_eq!(chat(&http, node).await, 503);
    }
    assert!(
        mock.stats().requests_total == before
            || breaker_state(&cluster.nodes[0]).await == "HALF_OPEN",
        "a request reached the provider while the breaker was open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_probe_in_the_cluster_per_half_open_window() {
    const TRIALS: usize = 50;
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock).await;
    let http = client();
    for trial in 0..TRIALS {
        open_with_spread_failures(&mock, &cluster, &http).await;
        assert!(
            all_in(&cluster, &["OPEN", "HALF_OPEN"], Duration::from_secs(3)).await,
            "trial {trial}: not open everywhere"
        );
        // The probe answers slowly, so every request of the burst arrives while it is out.
        mock.script(FaultSpec {
            latency_before_headers_ms: Some(600),
            times: Some(1),
            ..FaultSpec::new()
        })
        .unwrap();
        // The reset timeout (1 s) running out is the scenario: wait until every node says so.
        assert!(
            all_in(&cluster, &["HALF_OPEN"], Duration::from_secs(5)).await,
            "trial {trial}: not half-open everywhere"
        );
        let before = mock.stats().requests_total;
        let mut tasks = Vec::new();
        for node in &cluster.nodes {
            for _ in 0..3 {
                let http = http.clone();
                let url = format!("{}/v1/chat/completions", node.client_url());
                tasks.push(tokio::spawn(async move {
                    http.post(url)
                        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0)
                }));
            }
        }
        let mut ok = 0;
        for t in tasks {
            if t.await.unwrap() == 200 {
                ok += 1;
            }
        }
        let probes = mock.stats().requests_total - before;
        assert_eq!(
            probes, 1,
            "trial {trial}: {probes} probes reached the provider"
        );
        assert_eq!(ok, 1, "trial {trial}: only the probe succeeds");
        assert!(
            all_in(&cluster, &["CLOSED"], Duration::from_secs(3)).await,
            "trial {trial}: the probe's success did not close every node"
        );
    }
}
