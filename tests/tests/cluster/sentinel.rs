//! Nodes on a `redis+sentinel://` URL follow a failover with their events too. The subscriber
//! used to be built from the store's client before it had asked the sentinel (so it subscribed
//! on the sentinel itself, where no node publishes), and never rebuilt after a failover. Now it
//! resolves the master first, and a node not subscribed at a reconcile tick builds it again for
//! the master the sentinel names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env};
use switchyard_tests::cluster::{cluster_degraded, metric, metrics_text, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_topology::RedisSentinel;

/// Peers' cooldown events `node` received over pub/sub (a resync does not count).
async fn cooldown_events(node: &NodeProcess) -> f64 {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || {
        metric(
            &metrics_text(admin),
            "switchyard_cluster_events_total{kind=\"cooldown_set\",result=\"received\"}",
        )
        .unwrap_or(0.0)
    })
    .await
    .unwrap()
}

async fn degraded(node: &NodeProcess) -> bool {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || cluster_degraded(admin))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_on_sentinel_resubscribe_after_a_failover_and_share_state_again() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 2);
    let env = key_env(2);
    let (topo, nodes) = tokio::task::spawn_blocking(move || {
        let topo = RedisSentinel::start().expect("sentinel topology");
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let nodes: Vec<NodeProcess> = (0..2)
            .map(|i| start_node(&format!("node-{i}"), &topo.url(), &body, &env).unwrap())
            .collect();
        (topo, nodes)
    })
    .await
    .unwrap();
    let [a, b] = [&nodes[0], &nodes[1]];
    for n in [a, b] {
        assert!(
            eventually(Duration::from_secs(15), || async { !degraded(n).await }).await,
            "not subscribed through the sentinel; log:\n{}",
            n.log()
        );
    }

    let mut topo = topo;
    let topo = tokio::task::spawn_blocking(move || {
        topo.fail_over().expect("failover");
        topo
    })
    .await
    .unwrap();

    // Both nodes subscribe on the promoted master (a reconcile interval, 5 s, plus the
    // store's own way back to the sentinel).
    for n in [a, b] {
        assert!(
            eventually(Duration::from_secs(30), || async { !degraded(n).await }).await,
            "still degraded after the failover; log:\n{}",
            n.log()
        );
    }
    // And share state through the new master.
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    let http = client();
    assert_eq!(chat(&http, a).await.0, 200);
    assert!(
        eventually(STATE_DEADLINE, || async {
            health(b).await["connections"]["byProvider"]["p"]["cooldown"] == 1
        })
        .await,
        "the cooldown did not reach b after the failover; log of a:\n{}",
        a.log()
    );
    // Through an event on the new master, not only a resync.
    assert!(
        eventually(STATE_DEADLINE, || async { cooldown_events(b).await >= 1.0 }).await,
        "b received no cooldown event after the failover; log of b:\n{}",
        b.log()
    );
    drop(topo);
}
