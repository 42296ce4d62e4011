//! A peer whose wall clock runs ahead cannot clear this node's fresh cooldown. A
//! `CooldownEased` event carried the peer's attempt start on the peer's wall clock, and the
//! receiver read it as its own time: a peer a minute ahead made any success of its look newer
//! than a failure the receiver had just seen. Here a forged peer, `node-ahead`, publishes the
//! success of an attempt it dispatched 5 s ago (real time) with its clock 60 s ahead; the node's
//! 429 from a second ago must stand.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env, store};
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_tests::cluster::TestCluster;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

fn wall_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_clock_running_ahead_cannot_clear_a_fresh_cooldown() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock, 2);
    let env = key_env(2);
    let cluster = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let c = TestCluster::start(1, &body, &env).expect("cluster");
        assert!(c.wait_synced(Duration::from_secs(15)), "not subscribed");
        c
    })
    .await
    .unwrap();
    let node = &cluster.nodes[0];
    let http = client();
    let shared = store(&cluster.redis.url());

    // The peer's attempt starts now (real time); the node's 429 on k0 comes after it.
    let peer_dispatch_real = wall_ms();
    tokio::time::sleep(Duration::from_millis(300)).await;
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    assert_eq!(chat(&http, node).await.0, 200, "served by k1");
    let cooling = || async {
        health(node).await["connections"]["byProvider"]["p"]["cooldown"]
            .as_u64()
            .unwrap_or(0)
    };
    assert!(
        eventually(STATE_DEADLINE, || async { cooling().await == 1 }).await,
        "k0 did not cool"
    );

    // The peer reports its (older) attempt's success, stamped with its clock 60 s ahead.
    let ahead = 60_000;
    let envelope = Envelope {
        origin_node: "node-ahead".to_owned(),
        origin_ts_ms: wall_ms() + ahead,
        seq: 0,
        event: WireEvent::CooldownEased {
            connection: "k0".to_owned(),
            backoff_level: 0,
            started_epoch_ms: peer_dispatch_real + ahead,
        },
    };
    shared
        .publish(&wire::encode(&envelope).unwrap())
        .await
        .unwrap();
    // Then a lockout of a made-up model on the same connection: its actor handles events in
    // order, so once the lockout shows, the eased cooldown has been handled too.
    let marker = Envelope {
        origin_node: "node-ahead".to_owned(),
        origin_ts_ms: wall_ms() + ahead,
        seq: 1,
        event: WireEvent::LockoutSet {
            provider: "p".to_owned(),
            connection: "k0".to_owned(),
            model: "marker".to_owned(),
            remaining_ms: 60_000,
            failure_count: 1,
            reason: FailureReason::ModelCapacity,
        },
    };
    shared
        .publish(&wire::encode(&marker).unwrap())
        .await
        .unwrap();
    assert!(
        eventually(STATE_DEADLINE, || async {
            health(node).await["lockoutsTotal"].as_u64().unwrap_or(0) >= 1
        })
        .await,
        "the forged events never arrived; log:\n{}",
        node.log()
    );
    assert_eq!(
        cooling().await,
        1,
        "the peer's stale success cleared the fresh cooldown; log:\n{}",
        node.log()
    );
}
