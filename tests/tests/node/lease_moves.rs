//! Exclusive session leases when their connection goes bad, on a real node: the lease moves to
//! another free eligible connection with the same generation (docs/leases.md, "the lease moves"), stays put when no
//! connection is free, and a request whose lease is taken while it waits in a queue is refused
//! at dispatch time without reaching the provider.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::json;

use crate::leases::{AGENT_KEY, Client, ENV, OWNER_A, OWNER_B, UP_1, UP_2, config, generation};
use crate::support::eventually;
use switchyard_tests::cluster::{metric, metrics_text};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};

async fn node_metric(node: &NodeProcess, name: &str) -> f64 {
    let admin = node.admin;
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || metric(&metrics_text(admin), &name).unwrap_or(0.0))
        .await
        .unwrap()
}

fn rate_limited(key: &str) -> FaultSpec {
    FaultSpec::status(429)
        .for_key(key)
        .header("Retry-After", "30")
        .times(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_lease_moves_to_a_free_connection_with_its_generation() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let node = NodeProcess::start(&config(&mock, 60_000), ENV).unwrap();
    let c = Client::new(&node);

    let g = generation(&c.acquire(OWNER_A).await);
    let r = c.chat(AGENT_KEY, Some((OWNER_A, g))).await;
    assert_eq!(r.connection.as_deref(), Some("glm-1"), "{r:?}");

    // glm-1 answers 429: the same request goes on on glm-2, under the same generation.
    mock.script(rate_limited(UP_1)).unwrap();
    let r = c.chat(AGENT_KEY, Some((OWNER_A, g))).await;
    assert_eq!(r.status, 200, "{r:?}\n{}", node.log());
    assert_eq!(r.connection.as_deref(), Some("glm-2"), "{r:?}");
    let stats = mock.stats();
    assert_eq!(stats.requests_for_key(UP_1), 2);
    assert_eq!(stats.requests_for_key(UP_2), 1);

    // The lease lives on glm-2 now: the next request claims it there with the same generation,
    // renew works with it, and an older claim of it is still stale.
    let r = c.chat(AGENT_KEY, Some((OWNER_A, g))).await;
    assert_eq!(
        (r.status, r.connection.as_deref()),
        (200, Some("glm-2")),
        "{r:?}"
    );
    let renewed = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "renew", "generation": g}),
        )
        .await;
    assert_eq!(renewed.json["outcome"], "RENEWED", "{renewed:?}");
    assert_eq!(renewed.json["generation"], g);
    let stale = c.chat(AGENT_KEY, Some((OWNER_A, g + 1))).await;
    assert_eq!((stale.status, stale.code()), (409, "LEASE_FENCE_STALE"));
    // Re-acquiring reuses the moved lease; glm-1 (cooling) is free for nobody meanwhile.
    let again = c.acquire(OWNER_A).await;
    assert_eq!(generation(&again), g);
    assert_eq!(again.json["outcome"], "REUSED", "{again:?}");

    assert_eq!(
        node_metric(&node, "switchyard_lease_moves_total{reason=\"failed\"}").await,
        1.0,
        "{}",
        node.log()
    );
}

/// Error path: the only other connection is held by another lease. Nothing moves: the
/// request gets the upstream's answer, and both leases stay where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_does_not_move_onto_a_connection_another_lease_holds() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let node = NodeProcess::start(&config(&mock, 60_000), ENV).unwrap();
    let c = Client::new(&node);

    let ga = generation(&c.acquire(OWNER_A).await);
    let gb = generation(&c.acquire(OWNER_B).await);
    let r = c.chat(AGENT_KEY, Some((OWNER_B, gb))).await;
    assert_eq!(r.connection.as_deref(), Some("glm-2"), "{r:?}");

    mock.script(rate_limited(UP_1)).unwrap();
    let r = c.chat(AGENT_KEY, Some((OWNER_A, ga))).await;
    assert_eq!(r.status, 429, "{r:?}\n{}", node.log());
    assert_eq!(
        mock.stats().requests_for_key(UP_2),
        1,
        "nothing reached glm-2"
    );

    // B still holds glm-2 with its generation; A still holds its lease (on glm-1).
    let r = c.chat(AGENT_KEY, Some((OWNER_B, gb))).await;
    assert_eq!(
        (r.status, r.connection.as_deref()),
        (200, Some("glm-2")),
        "{r:?}"
    );
    let renewed = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "renew", "generation": ga}),
        )
        .await;
    assert_eq!(renewed.json["outcome"], "RENEWED", "{renewed:?}");
    assert_eq!(
        node_metric(&node, "switchyard_lease_moves_total{reason=\"failed\"}").await,
        0.0
    );
    assert!(
        node_metric(
            &node,
            "switchyard_lease_operations_total{op=\"move\",result=\"no_target\"}"
        )
        .await
            >= 1.0
    );
}

/// The fence at dispatch time, black-box: a leased request waits for glm-1's only permit
/// behind a slow one; meanwhile its lease is released and glm-1 granted to another owner. When
/// the permit comes, the waiting request is refused (409 `LEASE_FENCE_STALE`) and glm-1's
/// upstream never sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_lease_is_taken_while_it_queues_is_not_dispatched() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body =
        config(&mock, 60_000).replace("priority = 1\n", "priority = 1\nmax_concurrent = 1\n");
    let node = NodeProcess::start(&body, ENV).unwrap();
    let c = std::sync::Arc::new(Client::new(&node));

    let g = generation(&c.acquire(OWNER_A).await);
    let slow: FaultSpec = serde_json::from_value(json!({
        "match": {"api_key": UP_1},
        "latency_before_headers_ms": 2_000,
        "times": 1
    }))
    .unwrap();
    mock.script(slow).unwrap();
    let first = tokio::spawn({
        let c = c.clone();
        async move { c.chat(AGENT_KEY, Some((OWNER_A, g))).await }
    });
    assert!(
        eventually(Duration::from_secs(10), || async {
            mock.stats().requests_for_key(UP_1) == 1
        })
        .await,
        "the first request never reached glm-1"
    );
    // The second request passes the fence before permits, then queues for glm-1's permit.
    let fenced = "switchyard_lease_operations_total{op=\"fence\",result=\"ok\"}";
    let before = node_metric(&node, fenced).await;
    let second = tokio::spawn({
        let c = c.clone();
        async move { c.chat(AGENT_KEY, Some((OWNER_A, g))).await }
    });
    assert!(
        eventually(Duration::from_secs(10), || async {
            node_metric(&node, fenced).await > before
        })
        .await,
        "the second request was never fenced"
    );
    // Its lease is released and glm-1 goes to B while it waits.
    let released = c
        .lease(
            AGENT_KEY,
            Some(OWNER_A),
            json!({"action": "release", "generation": g}),
        )
        .await;
    assert_eq!(released.json["state"], "RELEASED", "{released:?}");
    let gb = generation(&c.acquire(OWNER_B).await);
    assert!(gb > g);

    let first = first.await.unwrap();
    assert_eq!(first.status, 200, "{first:?}");
    let second = second.await.unwrap();
    assert_eq!(
        (second.status, second.code()),
        (409, "LEASE_FENCE_STALE"),
        "{second:?}\n{}",
        node.log()
    );
    assert_eq!(
        mock.stats().requests_for_key(UP_1),
        1,
        "the stale request reached glm-1"
    );
    assert!(
        node_metric(
            &node,
            "switchyard_lease_operations_total{op=\"fence\",result=\"stale\"}"
        )
        .await
            >= 1.0
    );
}
