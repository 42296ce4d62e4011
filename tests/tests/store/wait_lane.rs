//! A replica wait never holds up the request path. In Sentinel (and Cluster) mode a
//! connection-record write is followed by `WAIT 1`, which blocks the connection it is sent on
//! until a replica acknowledges or half the command timeout passes. With the replica gone the
//! wait runs its full bound; a bucket take made meanwhile through the same store must still
//! be answered before the write's call returns, so the two cannot share a connection.
//!
//! The test asserts the order against the server's own view (the `WAIT` is still blocked when
//! the bucket take has its answer), not a duration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_shared::outcome::FailureReason;
use switchyard_store::{
    BucketResult, CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig,
};
use switchyard_tests::redis_topology::{RedisSentinel, cli};

fn cooldown(conn: &str) -> CooldownWrite<'_> {
    CooldownWrite {
        conn,
        duration_ms: 120_000,
        backoff_level: 1,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    }
}

/// Whether a client of the server on `port` is blocked in `WAIT` (`CLIENT LIST`: the `b`
/// flag and `cmd=wait`).
fn wait_blocked(port: u16) -> bool {
    cli(port, &["CLIENT", "LIST"]).is_ok_and(|list| {
        list.lines().any(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
            };
            field("cmd=") == "wait" && field("flags=").contains('b')
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiting_for_a_missing_replica_does_not_delay_a_bucket_take() {
    let mut topo = RedisSentinel::start().unwrap();
    let config = RedisStoreConfig {
        url: topo.url(),
        key_prefix: "w:".to_owned(),
        // `WAIT` is bounded by half of it: 3 s, long enough to see who answers first.
        timeout_ms: 6_000,
        health: HealthPolicy::default(),
    };
    let store = Arc::new(RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap());
    // Every lane connected while the replica still acknowledges.
    assert!(matches!(
        store.bucket_take("key", "k1", 1_000).await.unwrap(),
        BucketResult::Allowed { .. }
    ));
    assert!(
        store
            .cooldown_extend(&cooldown("warm"))
            .await
            .unwrap()
            .applied
    );
    let master = topo.master.port;
    assert!(!wait_blocked(master), "no write waits yet");

    // No replica can acknowledge any more: the next write's WAIT runs its full bound.
    topo.replica.kill();
    let writer = Arc::clone(&store);
    let write = tokio::spawn(async move { writer.cooldown_extend(&cooldown("c1")).await });
    let deadline = Instant::now() + Duration::from_secs(5);
    while !wait_blocked(master) {
        assert!(
            Instant::now() < deadline,
            "the write never reached its WAIT"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let taken = store.bucket_take("key", "k1", 1_000).await.unwrap();
    assert!(matches!(taken, BucketResult::Allowed { .. }), "{taken:?}");
    assert!(
        wait_blocked(master) && !write.is_finished(),
        "the bucket take was answered only after the write's WAIT ended"
    );

    let applied = write.await.unwrap().unwrap();
    assert!(applied.applied, "the write itself succeeded: {applied:?}");
    assert!(!wait_blocked(master));
}
