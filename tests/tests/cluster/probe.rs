//! The cluster half-open probe lease, through real nodes on one Redis.
//!
//! - It is handed back as soon as its probe turns out not to reach upstream: node a wins the
//!   probe for a model no connection may serve (nothing is eligible), and node b can probe at
//!   once instead of after the lease's TTL (a minute here).
//! - It is fenced at dispatch: node a's probe waits for a model permit while its lease is
//!   taken over in Redis (as when the TTL lapses and another node wins the next one); when the
//!   permit frees, the stale probe is not sent upstream and its client gets the documented
//!   503 `provider_circuit_open`, and the new holder's lease is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{client, store};
use switchyard_store::ProbeGrant;
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
    chat_body(http, node, model).await.0
}

async fn chat_body(http: &reqwest::Client, node: &NodeProcess, model: &str) -> (u16, Value) {
    let Ok(r) = http
        .post(format!("{}/v1/chat/completions", node.client_url()))
        .json(&json!({"model": format!("p/{model}"), "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
    else {
        return (0, Value::Null);
    };
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// One connection with a cap of 1 on model `s`, a permit wait long enough for the takeover,
/// and the breaker of [`body`].
fn fence_body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}
[resilience.provider_breaker.apikey]
failure_threshold = 2
reset_timeout_ms = 1000
         
[resilience.concurrency]
semaphore_queue_timeout_ms = 20000
semaphore_max_queue = 10
",
        cluster_provider(&mock.base_url(), &["m", "s"], "attempt_deadline_ms = 60000"),
        connection(
            "k0",
            "p",
            "KEY_0",
            "disable_cooling = true
model_concurrency = { \"s\" = 1 }"
        ),
        queue_and_wait_off()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_whose_lease_was_taken_over_while_it_waited_is_not_dispatched() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = fence_body(&mock);
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

    // A slow request for s holds a's only permit for s for 4.5 s (under the 5 s headers
    // timeout).
    mock.script(
        FaultSpec {
            latency_before_headers_ms: Some(4_500),
            ..FaultSpec::default()
        }
        .for_model("s")
        .times(1),
    )
    .unwrap();
    let holder = {
        let (http, a) = (http.clone(), a.client_url());
        tokio::spawn(async move {
            http.post(format!("{a}/v1/chat/completions"))
                .json(&json!({"model": "p/s", "messages": [{"role": "user", "content": "hold"}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        })
    };
    assert!(
        eventually(STATE_DEADLINE, || async {
            mock.stats().by_model.get("s").copied() == Some(1)
        })
        .await,
        "the holder did not reach upstream"
    );
    // Two failures on b open the provider's breaker cluster-wide for a second.
    mock.script(FaultSpec::status(500).for_model("m").times(2))
        .unwrap();
    for _ in 0..2 {
        assert!(chat(&http, b, "m").await >= 500);
    }
    // Its second over, a's breaker lets one probe through.
    assert!(
        eventually(Duration::from_secs(5), || async {
            crate::breaker::breaker_state(a).await == "HALF_OPEN"
        })
        .await,
        "a's breaker never went half-open"
    );

    // a's next request for s is the cluster probe; it waits behind the holder for the permit.
    let probe = {
        let (http, a) = (http.clone(), cluster.nodes[0].client_url());
        tokio::spawn(async move {
            let r = http
                .post(format!("{a}/v1/chat/completions"))
                .json(&json!({"model": "p/s", "messages": [{"role": "user", "content": "probe"}]}))
                .send()
                .await;
            match r {
                Ok(r) => (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                ),
                Err(_) => (0, Value::Null),
            }
        })
    };
    assert!(
        eventually(Duration::from_secs(3), || async {
            a.log().contains("cluster probe granted")
        })
        .await,
        "a never won the probe; log:\n{}",
        a.log()
    );
    assert!(
        !probe.is_finished(),
        "the probe did not wait for its permit"
    );

    // The lease is taken over while the probe waits: gone (its TTL lapsed), then won by
    // another node.
    let probe_key = shared.keys().breaker_probe("p");
    let _: u64 = shared
        .run("del", |mut con| async move {
            redis::cmd("DEL").arg(probe_key).query_async(&mut con).await
        })
        .await
        .unwrap();
    let other = "node-other:5f0c";
    let taken = shared
        .breaker_probe_acquire("p", other, 60_000)
        .await
        .unwrap();
    let ProbeGrant::Granted { generation, .. } = taken else {
        panic!("the takeover was not granted: {taken:?}");
    };

    // When the holder is done, the permit frees and the stale probe meets the fence.
    assert_ne!(holder.await.unwrap(), 0, "the holder is answered");
    let (status, answer) = probe.await.unwrap();
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "provider_circuit_open", "{answer}");
    assert!(answer["error"]["type"].is_string(), "{answer}");
    // The log is written asynchronously: give it a moment.
    assert!(
        eventually(Duration::from_secs(3), || async {
            a.log()
                .contains("cluster probe lease lapsed before dispatch; not sent")
        })
        .await,
        "answer {answer}; log of a:\n{}",
        a.log()
    );
    assert_eq!(
        mock.stats().by_model.get("s").copied(),
        Some(1),
        "the fenced probe reached upstream"
    );
    // The stale holder did not hand back the lease it no longer holds.
    assert!(
        shared.breaker_probe_holds("p", generation).await.unwrap(),
        "the new holder's lease was released by the stale one"
    );
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
