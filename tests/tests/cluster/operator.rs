//! Operator actions in redis mode fail closed while Redis is unreachable, and a replay after
//! the outage never overwrites newer state: an operator clear on a node cut off from Redis is
//! refused with 503 `cluster_store_unavailable` (it used to answer 200, queue the clear and
//! replay it later over a fresh 429 another node had written meanwhile).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually, wait_synced};
use crate::sync::{body, chat, client, health, key_env, store};
use serde_json::{Value, json};
use switchyard_tests::cluster::{
    MGMT_KEY, cluster_degraded_async, metric, metrics_text, start_node,
};
use switchyard_tests::fault_proxy::{FaultProxy, Mode};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

async fn degraded(node: &NodeProcess) -> bool {
    cluster_degraded_async(node.admin).await
}

async fn replay_depth(admin: SocketAddr) -> f64 {
    tokio::task::spawn_blocking(move || {
        metric(
            &metrics_text(admin),
            "switchyard_cluster_replay_queue_depth",
        )
        .unwrap_or(-1.0)
    })
    .await
    .unwrap()
}

async fn cooling(node: &NodeProcess) -> u64 {
    health(node).await["connections"]["byProvider"]["p"]["cooldown"]
        .as_u64()
        .unwrap_or(0)
}

/// `(status, body)` of an admin POST with the management key.
async fn admin_post(
    http: &reqwest::Client,
    node: &NodeProcess,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let resp = http
        .post(format!("{}{path}", node.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_clear_without_redis_fails_closed_and_a_fresh_429_survives() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 2);
    let env = key_env(2);
    let (redis, proxy, nodes) = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let redis = RedisServer::start().unwrap();
        let target: SocketAddr = format!("127.0.0.1:{}", redis.port).parse().unwrap();
        let proxy = FaultProxy::start(target).unwrap();
        let via_proxy = format!("redis://{}/0", proxy.addr());
        let nodes = vec![
            start_node("node-0", &redis.url(), &body, &env).unwrap(),
            start_node("node-1", &via_proxy, &body, &env).unwrap(),
        ];
        (redis, proxy, nodes)
    })
    .await
    .unwrap();
    let [a, c] = [&nodes[0], &nodes[1]];
    wait_synced(&[a, c]).await;
    let http = client();

    // c loses Redis.
    proxy.set_mode(Mode::Blackhole);
    assert!(
        eventually(Duration::from_secs(10), || degraded(c)).await,
        "the cut-off node does not say it is degraded"
    );
    // Every operator action that changes shared state is refused there, naming Redis.
    let refused = [
        (
            "/api/resilience/cooldowns",
            json!({"connectionIds": ["k0"]}),
        ),
        ("/api/resilience/cooldowns", json!({"all": true})),
        ("/api/resilience/connections/k0/reinstate", json!({})),
        ("/api/resilience/reset", json!({"provider": "p"})),
    ];
    for (path, body) in refused {
        let (status, reply) = admin_post(&http, c, path, body).await;
        assert_eq!(status, 503, "{path}: {reply}");
        assert_eq!(
            reply["error"]["code"], "cluster_store_unavailable",
            "{reply}"
        );
        assert_eq!(reply["error"]["type"], "server_error", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Redis"),
            "{reply}"
        );
    }
    let resp = http
        .delete(format!("{}/api/resilience/model-cooldowns", c.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&json!({"all": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 503, "lockout clear without Redis");
    // The node that still has Redis keeps accepting them.
    let (status, reply) =
        admin_post(&http, a, "/api/resilience/cooldowns", json!({"all": true})).await;
    assert_eq!(status, 200, "{reply}");

    // Meanwhile a meets a fresh 429 on k0 and writes it to Redis.
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    assert_eq!(chat(&http, a).await.0, 200);
    let shared = store(&redis.url());
    assert!(
        eventually(STATE_DEADLINE, || async {
            shared.read_connections(&["k0"]).await.unwrap()[0].remaining_ms > 20_000
        })
        .await,
        "the 429 did not reach Redis"
    );

    // c gets Redis back: it learns the 429, and nothing it queued clears it.
    proxy.set_mode(Mode::Pass);
    assert!(
        eventually(Duration::from_secs(15), || async {
            !degraded(c).await && replay_depth(c.admin).await == 0.0 && cooling(c).await == 1
        })
        .await,
        "the healed node did not resync; log:\n{}",
        c.log()
    );
    // The replay queue is empty: anything c queued during the outage has been written.
    let record = &shared.read_connections(&["k0"]).await.unwrap()[0];
    assert!(
        record.remaining_ms > 20_000,
        "the fresh 429 was overwritten: {record:?}"
    );
    for node in [a, c] {
        assert_eq!(cooling(node).await, 1, "{} lost the 429", node.client_url());
    }
    drop(redis);
}
