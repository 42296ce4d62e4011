//! Supervision: a breaker actor or a cluster task that dies is restarted, and the node
//! recovers. Before, nothing restarted a provider's breaker actor (the provider stayed OPEN for
//! good) and the writer was a bare spawn (every later change only queued). Test hooks
//! (`SWITCHYARD_TEST_HOOKS=1`) make them panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::Value;

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{chat, client, health, store};
use switchyard_tests::cluster::{TestCluster, metric, metrics_text};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};

/// One provider with one connection that never cools (every failure reaches the breaker), a
/// breaker that opens at 2 failures for a second.
fn body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}\n[resilience.provider_breaker.apikey]\nfailure_threshold = 2\nreset_timeout_ms = 1000\n",
        cluster_provider(&mock.base_url(), &["m"], ""),
        connection("k0", "p", "KEY_0", "disable_cooling = true"),
        queue_and_wait_off()
    )
}

async fn start(mock: &MockHandle) -> TestCluster {
    let body = body(mock);
    tokio::task::spawn_blocking(move || {
        let env = [("KEY_0", "sk-0"), ("SWITCHYARD_TEST_HOOKS", "1")];
        let c = TestCluster::start(1, &body, &env).expect("cluster");
        assert!(
            c.wait_synced(Duration::from_secs(15)),
            "node did not subscribe; log:\n{}",
            c.nodes[0].log()
        );
        c
    })
    .await
    .unwrap()
}

/// The `supervision` entry of `task` in the node's health.
async fn task(node: &NodeProcess, task: &str) -> Value {
    health(node).await["supervision"]
        .as_array()
        .and_then(|tasks| tasks.iter().find(|t| t["task"] == task).cloned())
        .unwrap_or(Value::Null)
}

async fn hook(http: &reqwest::Client, node: &NodeProcess, path: &str) {
    let status = http
        .post(format!("{}{path}", node.admin_url()))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(status, 202, "test hook {path}");
}

async fn task_restarts_metric(node: &NodeProcess, task: &str) -> f64 {
    let admin = node.admin;
    let series = format!("switchyard_task_restarts_total{{task=\"{task}\"}}");
    tokio::task::spawn_blocking(move || metric(&metrics_text(admin), &series).unwrap_or(-1.0))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_breaker_actor_is_restarted_and_its_provider_closes_again() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock).await;
    let node = &cluster.nodes[0];
    let http = client();
    assert_eq!(task(node, "breaker:p").await["running"], true);

    // Two failures open the breaker.
    mock.script(FaultSpec::status(500).times(2)).unwrap();
    for _ in 0..2 {
        assert!(chat(&http, node).await.0 >= 500);
    }
    assert!(
        eventually(STATE_DEADLINE, || async {
            health(node).await["circuitBreakers"]["open"] == 1
        })
        .await,
        "the breaker did not open"
    );

    // The breaker actor dies while OPEN.
    hook(&http, node, "/test-hooks/providers/p/panic").await;
    assert!(
        eventually(STATE_DEADLINE, || async {
            let t = task(node, "breaker:p").await;
            t["restarts"] == 1 && t["running"] == true
        })
        .await,
        "the breaker actor was not restarted: {}\nlog:\n{}",
        task(node, "breaker:p").await,
        node.log()
    );
    let t = task(node, "breaker:p").await;
    assert!(t["lastRestartReason"].as_str().is_some(), "{t}");
    assert!(t["lastRestartAt"].as_u64().is_some(), "{t}");
    assert_eq!(task_restarts_metric(node, "breaker:p").await, 1.0);

    // After its reset timeout the provider is probed, and the probe's success closes it.
    assert!(
        eventually(Duration::from_secs(10), || async {
            chat(&http, node).await.0 == 200 && health(node).await["circuitBreakers"]["closed"] == 1
        })
        .await,
        "the provider never recovered from OPEN; log:\n{}",
        node.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_cluster_writer_is_restarted_and_writes_reach_redis_again() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock).await;
    let node = &cluster.nodes[0];
    let http = client();
    let shared = store(&cluster.redis.url());
    assert_eq!(task(node, "cluster.writer").await["running"], true);

    hook(&http, node, "/test-hooks/cluster/writer/panic").await;
    assert!(
        eventually(STATE_DEADLINE, || async {
            let t = task(node, "cluster.writer").await;
            t["restarts"] == 1 && t["running"] == true
        })
        .await,
        "the writer was not restarted: {}\nlog:\n{}",
        task(node, "cluster.writer").await,
        node.log()
    );
    let t = task(node, "cluster.writer").await;
    assert!(
        t["lastRestartReason"]
            .as_str()
            .is_some_and(|r| r.contains("injected panic")),
        "{t}"
    );
    assert_eq!(task_restarts_metric(node, "cluster.writer").await, 1.0);

    // A failure after the restart reaches Redis: the restarted writer drains the same queue.
    mock.script(FaultSpec::status(500).times(2)).unwrap();
    for _ in 0..2 {
        assert!(chat(&http, node).await.0 >= 500);
    }
    let keys = [
        shared.keys().breaker("p"),
        shared.keys().breaker_failures("p"),
    ];
    assert!(
        eventually(STATE_DEADLINE, || async {
            let keys = keys.clone();
            let found: u64 = shared
                .run("exists", |mut con| async move {
                    redis::cmd("EXISTS")
                        .arg(&keys[..])
                        .query_async(&mut con)
                        .await
                })
                .await
                .unwrap();
            found >= 1
        })
        .await,
        "the breaker failures never reached Redis; log:\n{}",
        node.log()
    );
    assert!(
        eventually(STATE_DEADLINE, || async {
            health(node).await["cluster_degraded"] == false
        })
        .await,
        "the node stays degraded"
    );
}
