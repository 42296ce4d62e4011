//! Nodes on a `redis+sentinel://` URL follow a failover with their events too. The subscriber
//! used to be built from the store's client before it had asked the sentinel (so it subscribed
//! on the sentinel itself, where no node publishes), and never rebuilt after a failover. Now it
//! resolves the master first, and a node not subscribed at a reconcile tick builds it again for
//! the master the sentinel names; with no master resolvable it waits rather than subscribe on the
//! sentinel.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env};
use switchyard_tests::cluster::{cluster_degraded_async, metric, metrics_text, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_topology::{RedisSentinel, cli};

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
    cluster_degraded_async(node.admin).await
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

/// Channel subscribers (`sub=` above 0) in a `CLIENT LIST` of the server on `port`.
fn channel_subscribers(port: u16) -> usize {
    cli(port, &["CLIENT", "LIST"])
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .any(|f| f.strip_prefix("sub=").is_some_and(|n| n != "0"))
        })
        .count()
}

/// With no master resolvable (master and replica down, the sentinel up) a node's events
/// subscriber must not land on the sentinel, which accepts `SUBSCRIBE` and would make the node
/// look subscribed while it hears nothing; it keeps asking, and subscribes on the master once
/// one answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_master_resolvable_the_subscriber_waits_instead_of_landing_on_the_sentinel() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 1);
    let env = key_env(1);
    let (topo, node) = tokio::task::spawn_blocking(move || {
        let mut topo = RedisSentinel::start().expect("sentinel topology");
        // The replica first, so the sentinel has nothing to promote.
        topo.replica.kill();
        topo.master.kill();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let node = start_node("node-0", &topo.url(), &body, &env).unwrap();
        (topo, node)
    })
    .await
    .unwrap();

    // The subscriber found no master and says it waits; then an absence is checked over
    // time: none of its retries (with backoff) in the next 3 s may land on the sentinel.
    assert!(
        crate::support::eventually(Duration::from_secs(10), || async {
            node.log().contains("no Redis master resolvable")
        })
        .await,
        "the subscriber never reported waiting; log:\n{}",
        node.log()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sentinel = topo.sentinel_port;
    let on_sentinel = tokio::task::spawn_blocking(move || channel_subscribers(sentinel))
        .await
        .unwrap();
    assert_eq!(
        on_sentinel,
        0,
        "the events subscriber landed on the sentinel; log:\n{}",
        node.log()
    );
    assert!(degraded(&node).await, "a node without Redis is degraded");

    // The master comes back: the node subscribes on it.
    let mut topo = topo;
    let topo = tokio::task::spawn_blocking(move || {
        topo.master.restart().expect("master restarts");
        topo
    })
    .await
    .unwrap();
    assert!(
        eventually(Duration::from_secs(30), || async { !degraded(&node).await }).await,
        "not subscribed after the master came back; log:\n{}",
        node.log()
    );
    let master = topo.master.port;
    let on_master = tokio::task::spawn_blocking(move || channel_subscribers(master))
        .await
        .unwrap();
    assert!(on_master >= 1, "no subscriber on the master");
    drop(topo);
}
