//! Black-box resilience scenarios: the real `switchyard-node` binary in front of in-process
//! mock upstreams, over real loopback sockets.
//!
//! Each test starts its own mock and node, scripts upstream faults, and asserts what the client
//! sees (status, `type`/`code`, `Retry-After`, `x-switchyard-*` headers) and what reached the
//! upstream (the mock's per-key counters and in-flight peaks). Durations in the configs are
//! small (breaker reset 1 s, backoff base 1 s) so every test stays well under 20 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::node::{
    NO_QUEUE_NO_WAIT, Node, PRELUDE, assert_envelope, breaker_failures, breaker_state,
    concurrent_chats, connection, cooldown_ms, mock, provider,
};
use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle, Route};

/// A fault that delays the response headers of a normal answer.
fn slow(ms: u64) -> FaultSpec {
    FaultSpec {
        latency_before_headers_ms: Some(ms),
        ..FaultSpec::new()
    }
    .on_route(Route::ChatCompletions)
}

/// An error status with a chosen message.
fn status_with_message(status: u16, message: &str) -> FaultSpec {
    FaultSpec {
        error_message: Some(message.to_owned()),
        ..FaultSpec::status(status)
    }
    .on_route(Route::ChatCompletions)
}

fn hits(mock: &MockHandle, key: &str) -> u64 {
    mock.stats().requests_for_key(key)
}

// === 1. provider circuit breaker ===

/// One apikey provider with one connection that never cools (so every request reaches the
/// upstream and only the breaker can stop traffic).
fn breaker_config(mock: &MockHandle, reset_ms: u64) -> String {
    format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}
[resilience.provider_breaker.apikey]
failure_threshold = 12
reset_timeout_ms = {reset_ms}
{}{}",
        provider("p", "apikey", mock, ""),
        connection("a", "p", "KEY_A", "disable_cooling = true"),
    )
}

/// Twelve 503s from the upstream open the breaker: later requests fail fast with
/// `provider_circuit_open` and never reach the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_after_twelve_upstream_503s() {
    let mock = mock().await;
    let node = Node::start(breaker_config(&mock, 30_000), &[("KEY_A", "sk-a")]).await;
    mock.script(FaultSpec::status(503).on_route(Route::ChatCompletions))
        .unwrap();

    for i in 1..=12u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(503, "service_unavailable");
        assert_eq!(r.connection(), "a", "{r:?}");
        assert_eq!(
            hits(&mock, "sk-a"),
            i,
            "request {i} must reach the upstream"
        );
        wait_failures_counted(&node, "p", i).await;
    }
    wait_open(&node, "p").await;

    for _ in 0..3 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(503, "provider_circuit_open");
        assert_eq!(r.error_type(), "server_error");
        assert_eq!(
            r.header("x-switchyard-provider-breaker"),
            Some("open"),
            "{r:?}"
        );
        let retry = r.retry_after().expect("Retry-After on an open breaker");
        assert!((1..=30).contains(&retry), "Retry-After {retry}");
    }
    assert_eq!(hits(&mock, "sk-a"), 12, "an open breaker must not dispatch");
}

/// 429s are rate limits of one credential, not provider failures: twenty of them leave the
/// breaker closed and the next request is dispatched and succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_never_opens_on_429s() {
    let mock = mock().await;
    let node = Node::start(breaker_config(&mock, 30_000), &[("KEY_A", "sk-a")]).await;
    mock.script(
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .times(20),
    )
    .unwrap();

    for i in 1..=20u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(429, "rate_limit_exceeded");
        assert_eq!(
            hits(&mock, "sk-a"),
            i,
            "429 number {i} must reach the upstream"
        );
    }
    // A fresh breaker report has applied all twenty observations.
    let b = node
        .wait_breaker("p", "a report after the 429s", |_| true)
        .await;
    assert_eq!(breaker_state(&b), "closed", "{b}");
    let r = node.chat("p/mock-model").await;
    r.assert_ok("a", 1);
    assert_eq!(hits(&mock, "sk-a"), 21);
}

/// After the reset timeout the breaker admits exactly one probe among concurrent requests; the
/// others fail fast. The probe's success closes the breaker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_half_open_admits_one_probe_and_success_closes() {
    let mock = mock().await;
    let node = Arc::new(Node::start(breaker_config(&mock, 1000), &[("KEY_A", "sk-a")]).await);
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(12),
    )
    .unwrap();
    open_breaker(&node, &mock).await;

    wait_reset_timeout_over(&node, "p").await;
    // The probe takes a while, so the other requests arrive while it is in flight.
    mock.script(slow(800).times(1)).unwrap();
    let replies = concurrent_chats(&node, "p/mock-model", 5).await;
    let ok: Vec<_> = replies.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 1, "exactly one probe: {replies:#?}");
    for r in replies.iter().filter(|r| r.status != 200) {
        r.assert_error(503, "provider_circuit_open");
        assert!(r.retry_after().is_some(), "{r:?}");
    }
    assert_eq!(
        hits(&mock, "sk-a"),
        13,
        "only the probe reaches the upstream"
    );

    node.wait_breaker("p", "the probe's success to close it", |b| {
        breaker_state(b) == "closed"
    })
    .await;
    for i in 1..=3u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_ok("a", 1);
        assert_eq!(hits(&mock, "sk-a"), 13 + i, "the breaker must be closed");
    }
}

/// A probe that never answers within the reset timeout loses its lease: a later request may
/// probe again (and close the breaker) while the first is still hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_probe_that_never_answers_expires() {
    let mock = mock().await;
    let node = Arc::new(Node::start(breaker_config(&mock, 1000), &[("KEY_A", "sk-a")]).await);
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(12),
    )
    .unwrap();
    open_breaker(&node, &mock).await;

    wait_reset_timeout_over(&node, "p").await;
    mock.script(slow(3500).times(1)).unwrap();
    let hanging = {
        let node = node.clone();
        tokio::spawn(async move { node.chat("p/mock-model").await })
    };
    let reached = eventually(STATE_DEADLINE, || {
        std::future::ready(hits(&mock, "sk-a") == 13)
    })
    .await;
    assert!(reached, "the first probe is in flight");

    // Its lease is live: no second probe yet.
    let r = node.chat("p/mock-model").await;
    r.assert_error(503, "provider_circuit_open");
    assert_eq!(hits(&mock, "sk-a"), 13);

    // The lease lapses one reset timeout after admission; then another request probes.
    node.wait_breaker("p", "the probe's lease to lapse", |b| {
        b["probesInFlight"] == 0
    })
    .await;
    let r = node.chat("p/mock-model").await;
    r.assert_ok("a", 1);
    assert_eq!(
        hits(&mock, "sk-a"),
        14,
        "a new probe after the lease expired"
    );
    assert!(
        !hanging.is_finished(),
        "the first probe must still be hanging"
    );

    // The late answer of the expired probe changes nothing; the breaker stays closed.
    let late = hanging.await.unwrap();
    late.assert_ok("a", 1);
    // A fresh breaker report has applied the late answer.
    let b = node
        .wait_breaker("p", "a report after the late answer", |_| true)
        .await;
    assert_eq!(breaker_state(&b), "closed", "{b}");
    let r = node.chat("p/mock-model").await;
    r.assert_ok("a", 1);
    assert_eq!(hits(&mock, "sk-a"), 15);
}

/// A failed half-open probe reopens the breaker: the same request must not go on to the
/// provider's other connections as if it had been admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_failed_probe_reopens_without_trying_siblings() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}
[resilience.provider_breaker.apikey]
failure_threshold = 12
reset_timeout_ms = 1000
backoff_escalation_count = 10
{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "priority = 1\ndisable_cooling = true"),
        connection("b", "p", "KEY_B", "priority = 2\ndisable_cooling = true"),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a"), ("KEY_B", "sk-b")]).await;
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(12),
    )
    .unwrap();
    // Each request fails on A, then on B: six requests make the twelve failures.
    for i in 1..=6u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(503, "service_unavailable");
        assert_eq!(r.attempts(), 2, "{r:?}");
        wait_failures_counted(&node, "p", 2 * i).await;
    }
    wait_open(&node, "p").await;
    node.chat("p/mock-model")
        .await
        .assert_error(503, "provider_circuit_open");
    assert_eq!((hits(&mock, "sk-a"), hits(&mock, "sk-b")), (6, 6));

    // Several open cycles (the reset timeout does not escalate in this profile), since the
    // race this guards against is lost only some of the time: each time, the probe goes to A
    // (fill-first) and fails, and B is not tried.
    for cycle in 1..=5u64 {
        wait_reset_timeout_over(&node, "p").await;
        mock.script(
            FaultSpec::status(503)
                .on_route(Route::ChatCompletions)
                .for_key("sk-a")
                .times(1),
        )
        .unwrap();
        let r = node.chat("p/mock-model").await;
        r.assert_error(503, "service_unavailable");
        assert_eq!((r.connection(), r.attempts()), ("a", 1), "{r:?}");
        assert_eq!((hits(&mock, "sk-a"), hits(&mock, "sk-b")), (6 + cycle, 6));
        wait_open(&node, "p").await;
        node.chat("p/mock-model")
            .await
            .assert_error(503, "provider_circuit_open");
        assert_eq!((hits(&mock, "sk-a"), hits(&mock, "sk-b")), (6 + cycle, 6));
    }
}

/// Transport failures (connection refused) are breaker failures too: a local provider (which
/// opens at 2) whose upstream is down is skipped after two refused attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_on_transport_failures() {
    let closed = switchyard_tests::harness::free_port().unwrap();
    let config = format!(
        r#"{PRELUDE}{NO_QUEUE_NO_WAIT}
[[providers]]
id = "l"
category = "local"
format = "openai"
base_url = "http://127.0.0.1:{closed}/v1"
[providers.timeouts]
connect_ms = 500
headers_ms = 2000

[[connections]]
id = "l1"
provider = "l"
disable_cooling = true
"#
    );
    let node = Node::start(config, &[]).await;
    for i in 1..=2u64 {
        let r = node.chat("l/mock-model").await;
        assert_eq!(r.status, 502, "{r:?}");
        assert_envelope(&r.json["error"], &r.text);
        assert_eq!(r.connection(), "l1", "{r:?}");
        wait_failures_counted(&node, "l", i).await;
    }
    let r = node.chat("l/mock-model").await;
    r.assert_error(503, "provider_circuit_open");
    assert_eq!(r.header("x-switchyard-provider-breaker"), Some("open"));
}

/// Sends the twelve failing requests that open the breaker and checks it opened.
async fn open_breaker(node: &Node, mock: &MockHandle) {
    for i in 1..=12u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(503, "service_unavailable");
        wait_failures_counted(node, "p", i).await;
    }
    wait_open(node, "p").await;
    let r = node.chat("p/mock-model").await;
    r.assert_error(503, "provider_circuit_open");
    assert_eq!(hits(mock, "sk-a"), 12);
}

/// Waits until the breaker has counted `n` failures (or opened on them), so each request
/// meets the state its predecessors left.
async fn wait_failures_counted(node: &Node, provider: &str, n: u64) {
    node.wait_breaker(provider, &format!("{n} failures counted"), |b| {
        breaker_failures(b) >= n || breaker_state(b) == "open"
    })
    .await;
}

/// Waits until the breaker is open with time left on its reset timeout.
async fn wait_open(node: &Node, provider: &str) {
    node.wait_breaker(provider, "the breaker to open", |b| {
        breaker_state(b) == "open" && b["retryAfterMs"].as_u64().unwrap_or(0) > 0
    })
    .await;
}

/// Waits until an open breaker's reset timeout has run out, so the next request may probe.
/// The test is about what happens then; waiting for the breaker to say so is the scenario.
async fn wait_reset_timeout_over(node: &Node, provider: &str) {
    node.wait_breaker(provider, "the reset timeout to run out", |b| {
        b["retryAfterMs"].as_u64() == Some(0)
    })
    .await;
}

// === 2. connection cooldown ===

/// A `Retry-After: 4` on key A sends the next requests to sibling B; A is used again once the
/// four seconds have passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_retry_after_moves_to_sibling_then_back() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a"), ("KEY_B", "sk-b")]).await;

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

/// Waits until the connection's actor has set a cooldown.
async fn wait_cooling(node: &Node, connection: &str) {
    node.wait_connection(connection, "a cooldown", |row| cooldown_ms(row) > 0)
        .await;
}

/// Waits until the connection's cooldown has run out (the scenario waits for it).
async fn wait_cooled_down(node: &Node, connection: &str) {
    node.wait_connection(connection, "the cooldown to run out", |row| {
        cooldown_ms(row) == 0
    })
    .await;
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

// === 3. terminal states ===

/// Credits exhausted (a 402, or a 429 whose body says `insufficient_quota`) is terminal at
/// once: the key is never tried again. With a sibling, traffic moves there; alone, the answer
/// becomes `401 all_connections_terminal`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_credits_exhausted_is_never_retried() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
        provider("q", "apikey", &mock, ""),
        connection("c", "q", "KEY_C", ""),
    );
    let node = Node::start(
        config,
        &[("KEY_A", "sk-a"), ("KEY_B", "sk-b"), ("KEY_C", "sk-c")],
    )
    .await;
    // Every request with these keys fails the same way: a retry would show in the counters.
    mock.script(
        FaultSpec::status(402)
            .on_route(Route::ChatCompletions)
            .for_key("sk-a"),
    )
    .unwrap();
    mock.script(
        FaultSpec {
            error_code: Some("insufficient_quota".into()),
            error_type: Some("insufficient_quota".into()),
            ..status_with_message(
                429,
                "You exceeded your current quota, please check your plan and billing details.",
            )
        }
        .for_key("sk-c"),
    )
    .unwrap();

    node.chat("p/mock-model").await.assert_ok("b", 2);
    wait_terminal(&node, "a").await;
    for _ in 0..4 {
        node.chat("p/mock-model").await.assert_ok("b", 1);
    }
    assert_eq!(
        hits(&mock, "sk-a"),
        1,
        "a credits-exhausted key is never retried"
    );
    assert_eq!(hits(&mock, "sk-b"), 5);

    // The failure that makes the only connection terminal is answered as a terminal one.
    let r = node.chat("q/mock-model").await;
    r.assert_error(401, "all_connections_terminal");
    assert_eq!(r.connection(), "c", "{r:?}");
    wait_terminal(&node, "c").await;
    for _ in 0..3 {
        let r = node.chat("q/mock-model").await;
        r.assert_error(401, "all_connections_terminal");
        assert_eq!(r.error_type(), "authentication_error");
        assert_eq!(r.json["error"]["status"], "credits_exhausted", "{r:?}");
    }
    assert_eq!(
        hits(&mock, "sk-c"),
        1,
        "a credits-exhausted key is never retried"
    );
}

/// Waits until the connection's actor has made it terminal.
async fn wait_terminal(node: &Node, connection: &str) {
    node.wait_connection(connection, "a terminal state", |row| {
        row["status"] == "terminal"
    })
    .await;
}

/// An auth failure turns `expired` only after three *consecutive* 401s: until then the key is
/// still dispatched, and a success in between starts the count again. (`disable_cooling`
/// removes the spacing cooldown, not terminal states.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_expired_only_after_three_consecutive_401s() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "disable_cooling = true"),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a")]).await;
    let unauthorized = || FaultSpec::status(401).on_route(Route::ChatCompletions);
    // Two 401s, a success (which ends the streak), then 401s for good.
    mock.script_all([
        unauthorized().times(2),
        FaultSpec::new().on_route(Route::ChatCompletions).times(1),
        unauthorized(),
    ])
    .unwrap();

    // The streak itself is not shown by the admin API: each wait below looks for the 401 in
    // the connection's row and then for a fresh breaker report (the breaker counts every
    // attempt too), which its actor gives only after the observations sent before it.
    for i in 1..=2u64 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(401, "invalid_api_key");
        assert_eq!(
            hits(&mock, "sk-a"),
            i,
            "401 number {i} must reach the upstream"
        );
        wait_auth_failure_applied(&node, "a", "p").await;
    }
    node.chat("p/mock-model").await.assert_ok("a", 1);
    node.wait_connection("a", "the success to clear the failures", |row| {
        row["lastStatus"].is_null()
    })
    .await;
    for i in 4..=6u64 {
        let r = node.chat("p/mock-model").await;
        // The third consecutive 401 turns the only connection `expired`: that is its answer.
        let code = if i == 6 {
            "all_connections_terminal"
        } else {
            "invalid_api_key"
        };
        r.assert_error(401, code);
        assert_eq!(
            hits(&mock, "sk-a"),
            i,
            "401 number {i} must reach the upstream"
        );
        wait_auth_failure_applied(&node, "a", "p").await;
    }
    wait_terminal(&node, "a").await;
    for _ in 0..2 {
        let r = node.chat("p/mock-model").await;
        r.assert_error(401, "all_connections_terminal");
        assert_eq!(r.json["error"]["status"], "expired", "{r:?}");
    }
    assert_eq!(hits(&mock, "sk-a"), 6, "an expired key is not dispatched");
}

/// Waits until the connection shows a 401 as its last failure and the provider's breaker
/// has reported after it.
async fn wait_auth_failure_applied(node: &Node, connection: &str, provider: &str) {
    node.wait_connection(connection, "the 401", |row| row["lastStatus"] == 401)
        .await;
    node.wait_breaker(provider, "a report after the 401", |_| true)
        .await;
}

// === 4. model lockout scope ===

/// A 404 for model X locks X on that connection only: model Y still goes through it, and X
/// is answered by the sibling (or, with no sibling, gets `model_cooldown`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_lockout_404_locks_only_that_model_on_that_connection() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
        provider("s", "apikey", &mock, ""),
        connection("c", "s", "KEY_C", ""),
    );
    let node = Node::start(
        config,
        &[("KEY_A", "sk-a"), ("KEY_B", "sk-b"), ("KEY_C", "sk-c")],
    )
    .await;
    for key in ["sk-a", "sk-c"] {
        mock.script(
            FaultSpec::status(404)
                .on_route(Route::ChatCompletions)
                .for_key(key)
                .for_model("model-x"),
        )
        .unwrap();
    }

    // Two connections: X fails over to B, Y stays on A.
    node.chat("p/model-x").await.assert_ok("b", 2);
    wait_model_locked(&node, "a").await;
    node.chat("p/model-y").await.assert_ok("a", 1);
    node.chat("p/model-x").await.assert_ok("b", 1);
    node.chat("p/model-y").await.assert_ok("a", 1);
    assert_eq!(hits(&mock, "sk-a"), 3, "A: one 404 for X, then Y twice");
    assert_eq!(hits(&mock, "sk-b"), 2);

    // One connection: X is locked, Y is not.
    let r = node.chat("s/model-x").await;
    r.assert_error(404, "model_not_found");
    wait_model_locked(&node, "c").await;
    node.chat("s/model-y").await.assert_ok("c", 1);
    let r = node.chat("s/model-x").await;
    r.assert_error(429, "model_cooldown");
    assert_eq!(r.error_type(), "rate_limit_error");
    assert!(r.retry_after().is_some_and(|s| s >= 1), "{r:?}");
    assert_eq!(r.json["error"]["connections"][0]["scope"], "model", "{r:?}");
    node.chat("s/model-y").await.assert_ok("c", 1);
    assert_eq!(hits(&mock, "sk-c"), 3, "C: one 404 for X, then Y twice");
}

/// Waits until the connection's actor has locked a model on it.
async fn wait_model_locked(node: &Node, connection: &str) {
    node.wait_connection(connection, "a model lockout", |row| {
        row["lockouts"].as_array().is_some_and(|l| !l.is_empty())
    })
    .await;
}

// === 5. concurrency caps ===

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

// === 6. request queue ===

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

// === 7. status restatement ===

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

    // An exclude marker vetoes the restatement: the 403 is classified as the 403 it is (an
    // API key refused, which rests the only connection), not as a restated quota 429 with
    // the rule's 60 s.
    let r = node.chat("v/mock-model").await;
    r.assert_error(429, "connection_cooldown");
    assert_eq!(
        r.json["error"]["connections"][0]["reason"], "auth_error",
        "an exclude marker vetoes the restatement: {r:?}"
    );
    assert_ne!(r.retry_after(), Some(60), "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
}

// === 8. headers and error envelopes ===

fn stream_body() -> String {
    serde_json::json!({
        "model": "p/mock-model",
        "stream": true,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string()
}

/// Successes carry `x-switchyard-connection` and `x-switchyard-attempts`; every error carries
/// `{"error":{"message","type","code"}}` (Anthropic's envelope on `/v1/messages`), and
/// upstream errors also name the connection and the attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reply_has_routing_headers_and_typed_errors() {
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
    );
    let node = Node::start(config, &[("KEY_A", "sk-a"), ("KEY_B", "sk-b")]).await;

    let r = node.chat("p/mock-model").await;
    r.assert_ok("a", 1);
    assert!(r.header("x-request-id").is_some(), "{r:?}");

    // A committed stream carries the same headers.
    let r = node
        .post("/v1/chat/completions", "application/json", stream_body())
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "{r:?}"
    );
    assert_eq!((r.connection(), r.attempts()), ("a", 1), "{r:?}");
    assert!(r.text.contains("data: [DONE]"), "{r:?}");

    // A stream that fails before its first byte is a plain JSON error.
    mock.script(
        FaultSpec::status(500)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    let r = node
        .post("/v1/chat/completions", "application/json", stream_body())
        .await;
    // Both 500s cooled their connection: the spec's 429 for a provider whose every
    // connection is cooling.
    assert_eq!(r.status, 429, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!((r.connection(), r.attempts()), ("b", 2), "{r:?}");
    // Both connections now cool for the backoff base (3 s); wait it out.
    for connection in ["a", "b"] {
        wait_cooling(&node, connection).await;
    }
    for connection in ["a", "b"] {
        wait_cooled_down(&node, connection).await;
    }

    // An upstream error after failover names the last connection and counts both attempts.
    mock.script(
        FaultSpec::status(500)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    let r = node.chat("p/mock-model").await;
    // Both cooled their connection: the spec's 429 for a provider whose every connection
    // is cooling, naming the last connection and counting both attempts.
    assert_eq!(r.status, 429, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(r.connection(), "b", "{r:?}");
    assert_eq!(r.attempts(), 2, "{r:?}");

    // Requests refused before routing.
    let r = node.chat("nope/unknown-model").await;
    r.assert_error(404, "model_not_found");
    let r = node
        .post(
            "/v1/chat/completions",
            "application/json",
            "{not json".into(),
        )
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    let r = node
        .post("/v1/chat/completions", "text/plain", "{}".into())
        .await;
    r.assert_error(415, "unsupported_media_type");
    let r = node
        .post("/v1/nowhere", "application/json", "{}".into())
        .await;
    r.assert_error(404, "not_found");

    // Anthropic's envelope, with `code` inside `error`: an Anthropic request to an
    // OpenAI-format provider is translated, and a parameter chat cannot carry is a 400.
    let body = serde_json::json!({
        "model": "p/mock-model",
        "max_tokens": 16,
        "top_k": 5,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let r = node
        .post("/v1/messages", "application/json", body.to_string())
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.json["error"]["code"], "unsupported_parameter", "{r:?}");
    assert_eq!(r.json["error"]["param"], "top_k", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
}

/// On `/v1/messages` (an Anthropic-format provider) successes carry the routing headers and
/// errors use Anthropic's envelope with `code` inside `error`, for upstream errors and
/// Switchyard's own decisions alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_route_replies_have_headers_and_anthropic_envelope() {
    let mock = mock().await;
    let config = format!(
        r#"{PRELUDE}{NO_QUEUE_NO_WAIT}
[[providers]]
id = "an"
category = "apikey"
format = "anthropic"
base_url = "{base}/v1"
[providers.timeouts]
headers_ms = 8000
{conn}"#,
        base = mock.base_url(),
        conn = connection("an1", "an", "KEY_AN", ""),
    );
    let node = Node::start(config, &[("KEY_AN", "sk-an")]).await;
    let body = serde_json::json!({
        "model": "an/claude-sonnet-4-5",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}],
    })
    .to_string();

    let r = node
        .post("/v1/messages", "application/json", body.clone())
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!((r.connection(), r.attempts()), ("an1", 1), "{r:?}");
    assert_eq!(r.json["type"], "message", "{r:?}");

    mock.script(FaultSpec::status(429).on_route(Route::Messages).times(1))
        .unwrap();
    let r = node
        .post("/v1/messages", "application/json", body.clone())
        .await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.error_type(), "rate_limit_error", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(r.connection(), "an1", "{r:?}");

    wait_cooling(&node, "an1").await;
    let r = node.post("/v1/messages", "application/json", body).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json["type"], "error", "{r:?}");
    assert_eq!(r.code(), "connection_cooldown", "{r:?}");
    assert_envelope(&r.json["error"], &r.text);
    assert_eq!(hits(&mock, "sk-an"), 2);
}
