//! States that take a connection or one of its models out for longer than a cooldown:
//! terminal states (credits exhausted, expired keys) and the per-model lockout of a 404.
//!
//! Each test starts its own mock and node, scripts upstream faults, and asserts what the client
//! sees and what reached the upstream (the mock's per-key counters and in-flight peaks).
//! Durations in the configs are small so every test stays well under 20 s.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::node::{
    NO_QUEUE_NO_WAIT, Node, PRELUDE, connection, hits, mock, provider, status_with_message,
};
use switchyard_tests::mock_upstream::{FaultSpec, Route};

// === terminal states ===

/// Credits exhausted (a 402, or a 429 whose body says `insufficient_quota`) is terminal at
/// once: the key is never tried again. With a sibling, traffic moves there; alone, the answer
/// becomes `401 all_connections_terminal`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_credits_exhausted_is_never_retried() {
    let mock = mock().await;
    let third = format!(
        "{}{}",
        provider("q", "apikey", &mock, ""),
        connection("c", "q", "KEY_C", ""),
    );
    let node = Node::two_keys(&mock, &third).await;
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

// === model lockout scope ===

/// A 404 for model X locks X on that connection only: model Y still goes through it, and X
/// is answered by the sibling (or, with no sibling, gets `model_cooldown`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_lockout_404_locks_only_that_model_on_that_connection() {
    let mock = mock().await;
    let third = format!(
        "{}{}",
        provider("s", "apikey", &mock, ""),
        connection("c", "s", "KEY_C", ""),
    );
    let node = Node::two_keys(&mock, &third).await;
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
