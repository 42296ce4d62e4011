//! Connection cooldowns: `Retry-After` and backoff, decay after success, concurrent failures,
//! the direct wait for a cooldown, and the status restatement that turns a 403 into a cooling
//! 429.
//!
//! Each test starts its own mock and node, scripts upstream faults, and asserts what the client
//! sees and what reached the upstream (the mock's per-key counters and in-flight peaks).
//! Durations in the configs are small so every test stays well under 20 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::node::{
    NO_QUEUE_NO_WAIT, Node, PRELUDE, assert_envelope, concurrent_chats, connection, cooldown_ms,
    hits, mock, provider, status_with_message, wait_cooled_down, wait_cooling,
};
use switchyard_tests::mock_upstream::{FaultSpec, Route};

// === connection cooldown ===

/// A `Retry-After: 4` on key A sends the next requests to sibling B; A is used again once the
/// four seconds have passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_retry_after_moves_to_sibling_then_back() {
    let mock = mock().await;
    let node = Node::two_keys(&mock, "").await;

    // Fill-first: A serves while healthy.
    node.chat("p/mock-model").await.assert_ok("a", 1);
    mock.script(
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .for_key("sk-a")
            .header("Retry-After", "4")
            .times(1),
    )
    .unwrap();
    // The 429 fails over to B within the same request.
    node.chat("p/mock-model").await.assert_ok("b", 2);
    assert_eq!((hits(&mock, "sk-a"), hits(&mock, "sk-b")), (2, 1));

    // Four seconds leave the next three requests ample room inside the cooldown, with no
    // clock check that a slow machine could fail.
    let a = node
        .wait_connection("a", "A to cool", |row| cooldown_ms(row) > 0)
        .await;
    assert!(cooldown_ms(&a) > 2000, "the upstream's Retry-After: {a}");
    for _ in 0..3 {
        node.chat("p/mock-model").await.assert_ok("b", 1);
    }
    assert_eq!(hits(&mock, "sk-a"), 2, "A is cooling");
    assert_eq!(hits(&mock, "sk-b"), 4);

    // The cooldown running out is the scenario: wait until the node says it has.
    node.wait_connection("a", "A's Retry-After to run out", |row| {
        cooldown_ms(row) == 0
    })
    .await;
    node.chat("p/mock-model").await.assert_ok("a", 1);
    assert_eq!(hits(&mock, "sk-a"), 3, "A is back after its Retry-After");
}

/// With upstream hints off the cooldown is `base · 2^level`: 1 s, 2 s, 4 s over repeated 429s.
/// A success lowers the level by one, so the next 429 costs 4 s again instead of 8 s. The
/// remaining cooldown is read from the `connection_cooldown` answer when the only key cools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_backoff_escalates_and_decays_after_success() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}
[resilience.connection_cooldown.apikey]
base_cooldown_ms = 1000
max_backoff_steps = 5
use_upstream_retry_hints = false
{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a")]).await;
    // The upstream's hint is ignored: this profile does not use hints.
    let rate_limit = || {
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .header("Retry-After", "30")
            .times(1)
    };

    let mut upstream = 0;
    for expected_secs in [1u64, 2, 4] {
        mock.script(rate_limit()).unwrap();
        // The 429 cools the only connection: the failing request already gets the spec's
        // answer for a cooling connection.
        node.chat("p/mock-model")
            .await
            .assert_error(429, "connection_cooldown");
        upstream += 1;
        wait_cooling(&node, "a").await;
        let r = node.chat("p/mock-model").await;
        assert_cooling(&r, "a", expected_secs);
        assert_eq!(
            hits(&mock, "sk-a"),
            upstream,
            "a cooling key is not dispatched"
        );
        wait_cooled_down(&node, "a").await;
    }

    // Level 3 → 2 on success; the next 429 costs base · 2^2 = 4 s (8 s without the decay).
    node.chat("p/mock-model").await.assert_ok("a", 1);
    node.wait_connection("a", "the success to lower the level", |row| {
        row["backoffLevel"] == 2
    })
    .await;
    mock.script(rate_limit()).unwrap();
    node.chat("p/mock-model")
        .await
        .assert_error(429, "connection_cooldown");
    wait_cooling(&node, "a").await;
    let r = node.chat("p/mock-model").await;
    assert_cooling(&r, "a", 4);
    assert_eq!(hits(&mock, "sk-a"), upstream + 2);
}

/// A 429 `connection_cooldown` answer naming `connection`, with about `secs` left.
#[track_caller]
fn assert_cooling(r: &crate::support::node::Reply, connection: &str, secs: u64) {
    r.assert_error(429, "connection_cooldown");
    assert_eq!(r.error_type(), "rate_limit_error");
    let reset = r.json["error"]["reset_seconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("reset_seconds missing: {r:?}"));
    assert_eq!(reset, secs, "remaining cooldown: {r:?}");
    assert_eq!(r.retry_after(), Some(secs), "{r:?}");
    let listed = r.json["error"]["connections"][0]["connection"].as_str();
    assert_eq!(listed, Some(connection), "{r:?}");
}

/// Concurrent failures on a key that is already cooling neither extend the cooldown nor raise
/// the backoff level twice: three simultaneous 429s cost one base cooldown, and the next 429
/// after it lapses costs two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_concurrent_failures_raise_backoff_once() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}
[resilience.connection_cooldown.apikey]
base_cooldown_ms = 1000
use_upstream_retry_hints = false
{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Arc::new(Node::start(config, &[("KEY_A", "sk-a")]).await);
    let slow_429 = FaultSpec {
        latency_before_headers_ms: Some(300),
        ..FaultSpec::status(429)
    }
    .on_route(Route::ChatCompletions);

    mock.script(slow_429.times(3)).unwrap();
    let replies = concurrent_chats(&node, "p/mock-model", 3).await;
    for r in &replies {
        r.assert_error(429, "connection_cooldown");
    }
    let peak = mock.stats().max_in_flight_for_key("sk-a");
    assert_eq!(peak, 3, "all three in flight at once");
    wait_cooling(&node, "a").await;
    assert_cooling(&node.chat("p/mock-model").await, "a", 1);

    wait_cooled_down(&node, "a").await;
    mock.script(
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .times(1),
    )
    .unwrap();
    node.chat("p/mock-model")
        .await
        .assert_error(429, "connection_cooldown");
    wait_cooling(&node, "a").await;
    assert_cooling(&node.chat("p/mock-model").await, "a", 2);
    assert_eq!(hits(&mock, "sk-a"), 4);
}

/// With `wait_for_cooldown` on, a direct request whose only key cools waits for it (within
/// `max_retry_wait_ms`) and then succeeds; a longer cooldown is answered at once with 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_direct_request_waits_within_budget() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}
[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = true
max_retry_wait_ms = 2000
budget_ms = 2000
{}{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", ""),
        provider("q", "apikey", &mock, ""),
        connection("c", "q", "KEY_C", ""),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a"), ("KEY_C", "sk-c")]).await;
    let rate_limit = |key: &str, secs: &str| {
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .for_key(key)
            .header("Retry-After", secs)
            .times(1)
    };
    mock.script(rate_limit("sk-a", "1")).unwrap();
    mock.script(rate_limit("sk-c", "5")).unwrap();

    let r = node.chat("p/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(r.retry_after(), Some(1), "the upstream's hint: {r:?}");
    wait_cooling(&node, "a").await;
    let started = Instant::now();
    node.chat("p/mock-model").await.assert_ok("a", 1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(600),
        "it waited for the cooldown: {waited:?}"
    );
    assert_eq!(hits(&mock, "sk-a"), 2);

    node.chat("q/mock-model")
        .await
        .assert_error(429, "connection_cooldown");
    wait_cooling(&node, "c").await;
    let started = Instant::now();
    let r = node.chat("q/mock-model").await;
    // Not waiting is the feature here: a wait would last the 2 s budget. The bound is
    // generous (1.5 s for a loopback answer) so a slow machine does not fail it.
    assert!(started.elapsed() < Duration::from_millis(1500), "no wait");
    r.assert_error(429, "connection_cooldown");
    assert!(
        r.retry_after().is_some_and(|s| (4..=5).contains(&s)),
        "{r:?}"
    );
    assert_eq!(hits(&mock, "sk-c"), 1);
}

// === status restatement ===

/// A 403 whose text says 额度不足 is restated to 429 before classification: the client sees
/// 429 with `Retry-After` from the rule's default (60 s) or the upstream's own, the key cools;
/// an exclude marker vetoes the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_restatement_403_quota_becomes_429_and_cools() {
    let mock = mock().await;
    let rule = r#"
[[providers.status_restatement]]
id = "quota-403"
from_statuses = [400, 403]
to_status = 429
text_markers = ["额度不足"]
exclude_markers = ["无权访问"]
default_retry_after_ms = 60000
"#;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}{}{}{}",
        provider("g", "apikey", &mock, rule),
        connection("g1", "g", "KEY_G", ""),
        provider("h", "apikey", &mock, rule),
        connection("h1", "h", "KEY_H", ""),
        provider("v", "apikey", &mock, rule),
        connection("v1", "v", "KEY_V", ""),
    );
    let node = Node::start(
        config,
        &[("KEY_G", "sk-g"), ("KEY_H", "sk-h"), ("KEY_V", "sk-v")],
    )
    .await;
    mock.script(
        status_with_message(403, "用户额度不足")
            .for_key("sk-g")
            .times(1),
    )
    .unwrap();
    mock.script(
        status_with_message(403, "用户额度不足")
            .for_key("sk-h")
            .header("Retry-After", "7")
            .times(1),
    )
    .unwrap();
    mock.script(
        status_with_message(403, "用户额度不足，无权访问该模型")
            .for_key("sk-v")
            .times(1),
    )
    .unwrap();

    let r = node.chat("g/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(r.error_type(), "rate_limit_error");
    assert_eq!(r.retry_after(), Some(60), "the rule's default: {r:?}");
    assert_eq!(r.connection(), "g1");
    wait_cooling(&node, "g1").await;
    let r = node.chat("g/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(hits(&mock, "sk-g"), 1, "the restated key cools");

    let r = node.chat("h/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(
        r.retry_after(),
        Some(7),
        "the upstream's Retry-After wins: {r:?}"
    );
    wait_cooling(&node, "h1").await;
    let r = node.chat("h/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(hits(&mock, "sk-h"), 1);

    // An exclude marker vetoes every reading of the body (the restatement and the built-in
    // texts): the 403 is relayed as it is, with no cooldown and not the rule's 60 s.
    let r = node.chat("v/mock-model").await;
    assert_eq!(
        r.status, 403,
        "an exclude marker vetoes the restatement: {r:?}"
    );
    assert_ne!(r.retry_after(), Some(60), "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
}
