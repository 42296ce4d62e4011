//! The cluster half-open probe lease is handed back as soon as its probe turns out not to reach
//! upstream: here node a wins the probe for a model no connection may serve (nothing is
//! eligible), and node b can probe at once instead of after the lease's TTL (a minute here).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::json;

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{client, store};
use switchyard_tests::cluster::TestCluster;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};

/// One provider with models `m` and `x` on one connection that never cools, a breaker that
/// opens at 2 failures for 1 s, and an attempt deadline of a minute: the probe lease's TTL.
fn body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}\n[resilience.provider_breaker.apikey]\nfailure_threshold = 2\nreset_timeout_ms = 1000\n",
        cluster_provider(&mock.base_url(), &["m", "x"], "attempt_deadline_ms = 60000"),
        connection("k0", "p", "KEY_0", "disable_cooling = true"),
        queue_and_wait_off()
    )
}

async fn chat(http: &reqwest::Client, node: &NodeProcess, model: &str) -> u16 {
    http.post(format!("{}/v1/chat/completions", node.client_url()))
        .json(&json!({"model": format!("p/{model}"), "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_that_never_reaches_upstream_hands_its_cluster_lease_back() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let cluster = tokio::task::spawn_blocking(move || {
        let c = TestCluster::start(2, &body, &[("KEY_0", "sk-0")]).expect("cluster");
        assert!(
            c.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe"
        );
        c
    })
    .await
    .unwrap();
    let http = client();
    let [a, b] = [&cluster.nodes[0], &cluster.nodes[1]];
    let shared = store(&cluster.redis.url());

    // x is not found on k0: locked there (for minutes), on both nodes.
    mock.script(FaultSpec::status(404).for_model("x").times(1))
        .unwrap();
    assert_eq!(chat(&http, a, "x").await, 404);
    assert!(
        eventually(STATE_DEADLINE, || async {
            !shared.read_lockouts("k0").await.unwrap().is_empty()
        })
        .await,
        "the model lockout did not reach Redis"
    );
    // Two failures open the provider's breaker cluster-wide for a second.
    mock.script(FaultSpec::status(500).times(2)).unwrap();
    for _ in 0..2 {
        assert!(chat(&http, a, "m").await >= 500);
    }

    // Once the open second is over, a's request for x is admitted as the cluster probe, but
    // no connection may serve x: it never reaches upstream.
    let probed = eventually(Duration::from_secs(10), || async {
        chat(&http, a, "x").await;
        a.log().contains("cluster probe granted")
    })
    .await;
    assert!(probed, "a never won the probe; log:\n{}", a.log());
    let x_requests = mock.stats().by_model.get("x").copied().unwrap_or(0);
    assert_eq!(x_requests, 1, "only the first 404 reached upstream for x");

    // The lease goes back at once rather than after its minute.
    let probe_key = shared.keys().breaker_probe("p");
    let released = eventually(Duration::from_secs(5), || async {
        let key = probe_key.clone();
        let exists: u64 = shared
            .run("exists", |mut con| async move {
                redis::cmd("EXISTS").arg(key).query_async(&mut con).await
            })
            .await
            .unwrap();
        exists == 0
    })
    .await;
    assert!(
        released,
        "the probe lease that never reached upstream is still held; log of a:\n{}",
        a.log()
    );
    // So b probes now, and its success closes the breaker.
    let before = mock.stats().requests_total;
    assert!(
        eventually(Duration::from_secs(5), || async {
            chat(&http, b, "m").await == 200
        })
        .await,
        "b could not probe; log of b:\n{}",
        b.log()
    );
    assert!(mock.stats().requests_total > before);
}
