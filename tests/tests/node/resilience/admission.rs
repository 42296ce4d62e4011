//! Admission before dispatch: the per-connection concurrency cap with its semaphore queue,
//! and the rate-limit request queue; both refuse with a typed 429 and never dispatch.
//!
//! Each test starts its own mock and node, scripts upstream faults, and asserts what the client
//! sees and what reached the upstream (the mock's per-key counters and in-flight peaks).
//! Durations in the configs are small so every test stays well under 20 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::node::{
    NO_QUEUE_NO_WAIT, Node, PRELUDE, breaker_state, concurrent_chats, connection, hits, mock,
    provider, slow,
};
use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::mock_upstream::MockHandle;

// === concurrency caps ===

/// `max_concurrent = 1` serialises: five concurrent slow requests all succeed, one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_max_concurrent_one_serialises() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "max_concurrent = 1"),
    );
    let node = Arc::new(Node::start(config, &[("KEY_A", "sk-a")]).await);
    mock.script(slow(300)).unwrap();

    let started = Instant::now();
    let replies = concurrent_chats(&node, "p/mock-model", 5).await;
    for r in &replies {
        r.assert_ok("a", 1);
    }
    let stats = mock.stats();
    assert_eq!(stats.requests_for_key("sk-a"), 5);
    assert_eq!(
        stats.max_in_flight_for_key("sk-a"),
        1,
        "max_concurrent = 1 must serialise"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "five 300 ms requests in series take at least 1.5 s"
    );
}

/// Beyond the cap, at most `semaphore_max_queue` requests wait; the next ones get
/// `429 SEMAPHORE_QUEUE_FULL` at once and never reach the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_semaphore_queue_full_is_429() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}
[resilience.concurrency]
semaphore_max_queue = 1
semaphore_queue_timeout_ms = 10000
{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "max_concurrent = 1"),
    );
    let node = Arc::new(Node::start(config, &[("KEY_A", "sk-a")]).await);
    // Four seconds each: the line stays full for the whole burst below, with no clock check
    // that a slow machine could fail.
    mock.script(slow(4000).times(2)).unwrap();

    let (running, waiting) = staggered_pair(&node, &mock).await;
    // Pacing, not a wait for state: the node does not show a semaphore's waiters, so a pause
    // lets the second request take its place in the line before the next two arrive.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let started = Instant::now();
    let rejected = concurrent_chats(&node, "p/mock-model", 2).await;
    for r in &rejected {
        r.assert_error(429, "SEMAPHORE_QUEUE_FULL");
        assert_eq!(r.error_type(), "rate_limit_error");
    }
    // Rejecting at once is the feature; a wait would last until a slot frees (4 s). The
    // bound is generous for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_millis(2000),
        "a full line rejects at once"
    );
    // More overload rejections than the breaker threshold (12): Switchyard's own backpressure
    // is not a provider failure.
    for _ in 0..12 {
        node.chat("p/mock-model")
            .await
            .assert_error(429, "SEMAPHORE_QUEUE_FULL");
    }
    running.await.unwrap().assert_ok("a", 1);
    waiting.await.unwrap().assert_ok("a", 1);
    let stats = mock.stats();
    assert_eq!(
        stats.requests_for_key("sk-a"),
        2,
        "rejected requests never reach upstream"
    );
    assert_eq!(stats.max_in_flight_for_key("sk-a"), 1);
    // A fresh breaker report has applied every rejection: none of them may have opened it.
    let b = node
        .wait_breaker("p", "a report after the rejections", |_| true)
        .await;
    assert_eq!(breaker_state(&b), "closed", "{b}");
    node.chat("p/mock-model").await.assert_ok("a", 1);
}

/// Starts one request and, once it has reached the upstream, a second (which waits behind
/// the first).
async fn staggered_pair(
    node: &Arc<Node>,
    mock: &MockHandle,
) -> (
    tokio::task::JoinHandle<crate::support::node::Reply>,
    tokio::task::JoinHandle<crate::support::node::Reply>,
) {
    let spawn = || {
        let node = node.clone();
        tokio::spawn(async move { node.chat("p/mock-model").await })
    };
    let first = spawn();
    let running = eventually(STATE_DEADLINE, || {
        std::future::ready(hits(mock, "sk-a") == 1)
    })
    .await;
    assert!(running, "the first request reaches the upstream");
    let second = spawn();
    (first, second)
}

// === request queue ===

/// With the queue opted in and a depth of 1, a request beyond the one executing and the one
/// waiting is refused with `429 RATE_LIMIT_QUEUE_FULL` and never reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_depth_full_is_429_and_never_dispatched() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}",
        provider("p", "apikey", &mock, ""),
        connection(
            "a",
            "p",
            "KEY_A",
            "rate_limit_protection = true
[connections.rate_limit]
max_queue_depth = 1
concurrent_requests = 1",
        ),
    );
    let node = Arc::new(Node::start(config, &[("KEY_A", "sk-a")]).await);
    mock.script(slow(1500)).unwrap();

    let (running, waiting) = staggered_pair(&node, &mock).await;
    let queued = eventually(STATE_DEADLINE, || async {
        let list = node.admin("/api/resilience/connections").await;
        list["connections"]
            .as_array()
            .and_then(|rows| rows.iter().find(|c| c["id"] == "a"))
            .is_some_and(|a| a["queue"]["waiting"] == 1)
    })
    .await;
    assert!(queued, "the second request waits in the queue");
    let rejected = concurrent_chats(&node, "p/mock-model", 2).await;
    for r in &rejected {
        r.assert_error(429, "RATE_LIMIT_QUEUE_FULL");
        assert_eq!(r.error_type(), "rate_limit_error");
    }
    running.await.unwrap().assert_ok("a", 1);
    waiting.await.unwrap().assert_ok("a", 1);
    let stats = mock.stats();
    assert_eq!(
        stats.requests_for_key("sk-a"),
        2,
        "rejected requests never reach upstream"
    );
    assert_eq!(
        stats.max_in_flight_for_key("sk-a"),
        1,
        "concurrent_requests = 1"
    );
}
