//! A typed Google `RetryInfo` 429 pauses the connection's request queue on every node: the
//! node that got the 429 announces the pause (`QueuePaused`), and its peers hold their own
//! queue of the same connection until it ends instead of each collecting a 429 of its own.
//! Without Redis the pause stays on the node that saw it, and nothing fails. Two real nodes,
//! one real `redis-server`, one mock upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_tests::cluster::{
    TestCluster, cluster_degraded_async, http_get, metric, metrics_text, start_node,
};
use switchyard_tests::fault_proxy::{FaultProxy, Mode};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually, wait_synced};
use crate::sync::{chat, client};

const KEY: &str = "sk-queue-pause-gemini-0001";

/// One provider `p` with one connection `cg` whose queue is on (so a pause holds requests)
/// and whose cooling is off (so the pause alone holds them).
fn body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}",
        cluster_provider(&mock.base_url(), &["m"], ""),
        connection(
            "cg",
            "p",
            "KEY_G",
            "rate_limit_protection = true\ndisable_cooling = true"
        ),
        queue_and_wait_off(),
    )
}

/// Google's `RESOURCE_EXHAUSTED` body with a typed `RetryInfo` of `delay`.
fn resource_exhausted(delay: &str) -> Value {
    json!({"error": {
        "code": 429,
        "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        ]
    }})
}

/// One 429 with `delay` for the next request.
fn script_429(mock: &MockHandle, delay: &str) {
    mock.script(FaultSpec {
        body: Some(resource_exhausted(delay)),
        ..FaultSpec::status(429).times(1)
    })
    .unwrap();
}

/// `cg`'s remaining pause on `node` (ms), `None` when its queue is not paused.
async fn paused_ms(node: &NodeProcess) -> Option<u64> {
    let admin = node.admin;
    let v: Value = tokio::task::spawn_blocking(move || {
        http_get(admin, "/api/resilience/queue-pauses")
            .and_then(|(_, b)| serde_json::from_str(&b).ok())
            .unwrap_or(Value::Null)
    })
    .await
    .unwrap();
    v["items"]
        .as_array()?
        .iter()
        .find(|i| i["connectionId"] == "cg")
        .and_then(|i| i["remainingMs"].as_u64())
}

/// `switchyard_cluster_events_total{kind="queue_paused",result=<result>}` on `admin` (0 when
/// absent).
async fn queue_paused_events(admin: SocketAddr, result: &'static str) -> f64 {
    tokio::task::spawn_blocking(move || {
        let prefix =
            format!("switchyard_cluster_events_total{{kind=\"queue_paused\",result=\"{result}\"}}");
        metric(&metrics_text(admin), &prefix).unwrap_or(0.0)
    })
    .await
    .unwrap()
}

async fn degraded(node: &NodeProcess) -> bool {
    cluster_degraded_async(node.admin).await
}

fn hits(mock: &MockHandle) -> u64 {
    mock.stats().by_key.get(KEY).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_info_queue_pause_on_one_node_pauses_the_peers_queue() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let cluster = tokio::task::spawn_blocking(move || {
        let cluster = TestCluster::start(2, &body, &[("KEY_G", KEY)]).expect("start");
        assert!(
            cluster.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe; log of node-0:\n{}",
            cluster.nodes[0].log()
        );
        cluster
    })
    .await
    .unwrap();
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = client();

    script_429(&mock, "5s");
    assert_eq!(chat(&http, a).await.0, 429);
    assert!(
        paused_ms(a).await.is_some(),
        "a did not pause its own queue"
    );

    // b never saw a 429, yet pauses its queue of the same connection within a bounded wait.
    let on_b = eventually(Duration::from_secs(3), || paused_ms(b))
        .await
        .unwrap_or_else(|| panic!("no pause reached b; log:\n{}", b.log()));
    assert!(on_b <= 5_000, "longer than the upstream asked: {on_b} ms");
    assert_eq!(queue_paused_events(a.admin, "published").await, 1.0);
    assert!(queue_paused_events(b.admin, "applied").await >= 1.0);

    // b holds its own request until the pause ends, then serves it: the upstream sees no
    // second request from the cluster during the pause.
    let before = hits(&mock);
    let remaining = paused_ms(b).await.unwrap_or(0);
    let t = Instant::now();
    assert_eq!(chat(&http, b).await.0, 200);
    assert!(
        t.elapsed() + Duration::from_millis(500) >= Duration::from_millis(remaining),
        "b sent before its pause ended: {:?} of {remaining} ms",
        t.elapsed()
    );
    assert_eq!(hits(&mock), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_a_retry_info_queue_pause_stays_on_its_node_and_nothing_fails() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let (_redis, proxy, nodes) = tokio::task::spawn_blocking(move || {
        let env = [("KEY_G", KEY)];
        let redis = RedisServer::start().unwrap();
        let target: SocketAddr = format!("127.0.0.1:{}", redis.port).parse().unwrap();
        let proxy = FaultProxy::start(target).unwrap();
        let via_proxy = format!("redis://{}/0", proxy.addr());
        let nodes = vec![
            start_node("node-0", &via_proxy, &body, &env).unwrap(),
            start_node("node-1", &redis.url(), &body, &env).unwrap(),
        ];
        (redis, proxy, nodes)
    })
    .await
    .unwrap();
    let (a, b) = (&nodes[0], &nodes[1]);
    wait_synced(&[a, b]).await;
    let http = client();

    // a loses Redis, then meets the 429: it answers as usual and pauses its own queue.
    proxy.set_mode(Mode::Blackhole);
    assert!(
        eventually(Duration::from_secs(10), || degraded(a)).await,
        "the cut-off node does not say it is degraded"
    );
    script_429(&mock, "25s");
    assert_eq!(chat(&http, a).await.0, 429);
    assert!(
        paused_ms(a).await.is_some(),
        "a did not pause its own queue"
    );
    assert!(
        eventually(STATE_DEADLINE, || async {
            queue_paused_events(a.admin, "dropped").await >= 1.0
        })
        .await,
        "the failed announcement was not counted; log:\n{}",
        a.log()
    );
    // b is not paused and serves at once.
    assert_eq!(paused_ms(b).await, None);
    let t = Instant::now();
    assert_eq!(chat(&http, b).await.0, 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // a gets Redis back: the pause is not replayed (event only), b stays unpaused while a's
    // own pause still runs.
    proxy.set_mode(Mode::Pass);
    assert!(
        eventually(Duration::from_secs(15), || async { !degraded(a).await }).await,
        "a did not heal; log:\n{}",
        a.log()
    );
    assert!(
        paused_ms(a).await.is_some(),
        "a's pause ended before the check"
    );
    assert_eq!(
        paused_ms(b).await,
        None,
        "the pause reached b after the outage"
    );
    assert_eq!(queue_paused_events(b.admin, "received").await, 0.0);
}
