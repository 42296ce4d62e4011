//! The coordinator's event feed follows a Sentinel failover: after the master is killed and the
//! replica promoted, an event a node publishes (a 429's cooldown) on the new master shows in
//! the health document's recent events. A feed that keeps reconnecting to the address it was
//! built for never sees it.
//!
//! A real `switchyard-coordinator` on a real master, replica and sentinel. Build the binary
//! first (`cargo build -p switchyard-coordinator`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::support::coordinator::{Coordinator, config, store};
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_store::RedisStore;
use switchyard_tests::redis_topology::RedisSentinel;

/// The event a node publishes after a 429 put `p0-c0` into cooldown.
fn cooldown_event(origin: &str) -> Vec<u8> {
    wire::encode(&Envelope {
        origin_node: origin.to_owned(),
        origin_ts_ms: 1,
        seq: 1,
        event: WireEvent::CooldownSet {
            connection: "p0-c0".to_owned(),
            until_remaining_ms: 60_000,
            backoff_level: 1,
            reason: FailureReason::RateLimitExceeded,
            terminal: None,
        },
    })
    .unwrap()
}

/// Publishes `origin`'s event until the coordinator's recent events list it (pub/sub drops
/// what is published while the feed is not subscribed). `true` when it showed within `within`.
async fn shows_in_feed(
    co: &Coordinator,
    node: &RedisStore,
    origin: &str,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let _ = node.publish(&cooldown_event(origin)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, body) = co.call("GET", "/api/cluster/health", None).await;
        let seen = body["recentEvents"].as_array().is_some_and(|events| {
            events
                .iter()
                .any(|e| e["origin"] == origin && e["kind"] == "cooldown_set")
        });
        if seen {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_follows_a_sentinel_failover() {
    let mut topo = RedisSentinel::start().unwrap();
    let co = Coordinator::start(&config(&topo.url(), 1, 1, ""), &[]);
    let node = store(&topo.url());
    assert!(
        shows_in_feed(&co, &node, "node-before", Duration::from_secs(20)).await,
        "the feed never showed an event before the failover:\n{}",
        co.log()
    );

    let old = topo.master.port;
    topo.fail_over().unwrap();
    assert_ne!(topo.master_port(), Some(old));

    assert!(
        shows_in_feed(&co, &node, "node-after", Duration::from_secs(40)).await,
        "the feed never showed an event published on the promoted master:\n{}",
        co.log()
    );
}
