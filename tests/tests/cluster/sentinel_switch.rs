//! Nodes follow a Sentinel failover as the sentinels announce it (`+switch-master`), not on the
//! next reconcile tick: a cooldown one node is given just after the switch reaches every node
//! within a second of it. Nodes used to resubscribe 5.0–5.4 s after the switch, and a 429 given
//! meanwhile stayed on the node that met it.
//!
//! The figures this prints (time from SIGKILL to the switch, from the switch until every node
//! is subscribed on the new master, and until every node has the cooldown) are the ones quoted
//! in `docs/cluster.md`; run it with `--no-capture` to see them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env};
use futures_util::StreamExt;
use switchyard_tests::cluster::{cluster_degraded_async, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_topology::RedisSentinel;

/// How soon after the switch every node must have a cooldown given just after it.
const FOLLOW_WITHIN: Duration = Duration::from_secs(1);

async fn cooling(node: &NodeProcess) -> u64 {
    health(node).await["connections"]["byProvider"]["p"]["cooldown"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooldown_given_just_after_a_sentinel_switch_reaches_every_node_within_a_second() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 2);
    let env = key_env(2);
    let (topo, nodes) = tokio::task::spawn_blocking(move || {
        let topo = RedisSentinel::start().expect("sentinel topology");
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let nodes: Vec<NodeProcess> = (0..3)
            .map(|i| start_node(&format!("node-{i}"), &topo.url(), &body, &env).unwrap())
            .collect();
        (topo, nodes)
    })
    .await
    .unwrap();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(15), || async {
                !cluster_degraded_async(n.admin).await
            })
            .await,
            "not subscribed through the sentinel; log:\n{}",
            n.log()
        );
    }

    // The test hears the switch as the nodes do: on the sentinel's own pub/sub.
    let sentinel =
        redis::Client::open(format!("redis://127.0.0.1:{}", topo.sentinel_port)).unwrap();
    let mut pubsub = sentinel.get_async_pubsub().await.unwrap();
    pubsub.subscribe("+switch-master").await.unwrap();
    let mut switches = pubsub.into_on_message();

    let mut topo = topo;
    let killed_at = Instant::now();
    topo.master.kill();
    let switch = tokio::time::timeout(Duration::from_secs(30), switches.next())
        .await
        .expect("no +switch-master within 30 s")
        .expect("the sentinel's pub/sub closed");
    let switched_at = Instant::now();
    let payload: String = switch.get_payload().unwrap();
    assert!(
        payload.ends_with(&format!(" {}", topo.replica.port)),
        "{payload}"
    );

    // Just after the switch, node-0 meets a 429 (the request itself is served by k1).
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    let http = client();
    let (status, reply) = chat(&http, &nodes[0]).await;
    assert_eq!(status, 200, "{reply}");

    let mut followed: Vec<Option<Duration>> = vec![None; nodes.len()];
    let mut cooled: Vec<Option<Duration>> = vec![None; nodes.len()];
    // A bounded polling loop (not `eventually`: it records when each node got there).
    let deadline = switched_at + STATE_DEADLINE;
    while cooled.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, n) in nodes.iter().enumerate() {
            if followed[i].is_none() && !cluster_degraded_async(n.admin).await {
                followed[i] = Some(switched_at.elapsed());
            }
            if cooled[i].is_none() && cooling(n).await == 1 {
                cooled[i] = Some(switched_at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let all_cooled = cooled.iter().all(Option::is_some);
    let worst = |v: &[Option<Duration>]| v.iter().flatten().max().copied();
    eprintln!(
        "sentinel failover: switch {:?} after SIGKILL; every node subscribed again {:?} and \
         had the cooldown {:?} after the switch (per node: {:?} / {:?})",
        switched_at - killed_at,
        worst(&followed),
        worst(&cooled),
        followed,
        cooled,
    );
    assert!(all_cooled, "not every node got the cooldown: {cooled:?}");
    let slowest = worst(&cooled).unwrap();
    assert!(
        slowest <= FOLLOW_WITHIN,
        "the cooldown reached the last node {slowest:?} after the switch; log of node-1:\n{}",
        nodes[1].log()
    );
    drop(topo);
}
