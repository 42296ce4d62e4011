//! A Gemini `RESOURCE_EXHAUSTED` 429 with a typed `RetryInfo` detail (the seed's body-stated
//! retries): a delay within the connection's queue wait budget paces its limiter, a longer
//! one (a spent daily quota, `"86399s"`) locks only that model on that connection, for up to
//! 24 h, and leaves the connection serving its other models.
//!
//! The body is Google's documented error shape
//! (<https://ai.google.dev/gemini-api/docs/troubleshooting>, `google.rpc.RetryInfo`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY: &str = "sk-retry-info-gemini-0001";

fn resource_exhausted(delay: &str) -> Value {
    json!({"error": {
        "code": 429,
        "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        ]
    }})
}

async fn gemini(conn_extra: &str) -> Setup {
    let config = prelude()
        + &provider("pg", "openai", "{URL}", &["m", "m2"], "", "")
        + &connection("cg", "pg", "UP_G", conn_extra);
    setup(config, &[("UP_G", KEY)]).await
}

fn hits(s: &Setup) -> u64 {
    s.mock.stats().by_key.get(KEY).copied().unwrap_or(0)
}

async fn metric(s: &Setup, line_start: &str) -> Option<u64> {
    let r = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    r.everything()
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_info_longer_than_the_wait_budget_locks_only_the_model() {
    let s = gemini("").await;
    s.mock
        .script(FaultSpec {
            body: Some(resource_exhausted("86399s")),
            ..FaultSpec::status(429).for_model("m").times(1)
        })
        .unwrap();
    let first = s.post("/v1/chat/completions", &chat("pg/m", false)).await;
    assert_eq!(first.status, 429, "{first:#?}");

    // The lockout reaches the admin view: the model on this connection, close to 24 h.
    let lock = eventually(STATE_DEADLINE, || async {
        let v = s.admin("/api/resilience/model-cooldowns").await;
        v["items"].as_array().and_then(|items| {
            items
                .iter()
                .find(|i| i["remainingMs"].as_u64().unwrap_or(0) > 23 * 3_600_000)
                .cloned()
        })
    })
    .await
    .expect("a model lockout of about a day");
    assert!(
        lock["remainingMs"].as_u64().unwrap() <= 24 * 3_600_000,
        "{lock}"
    );

    // The connection itself is not cooled: its other model still serves.
    let other = s.post("/v1/chat/completions", &chat("pg/m2", false)).await;
    assert_eq!(other.status, 200, "{other:#?}");
    // The locked model is not dispatched.
    let before = hits(&s);
    let again = s.post("/v1/chat/completions", &chat("pg/m", false)).await;
    assert_eq!(again.status, 429, "{again:#?}");
    assert_eq!(
        hits(&s),
        before,
        "the locked model never reached the upstream"
    );
    assert_eq!(
        metric(&s, "switchyard_body_retry_total{effect=\"model_lockout\"}").await,
        Some(1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_info_within_the_wait_budget_paces_the_connection() {
    // The queue on, and no cooldown, so the pause alone holds the next request back.
    let s = gemini("rate_limit_protection = true\ndisable_cooling = true").await;
    s.mock
        .script(FaultSpec {
            body: Some(resource_exhausted("2s")),
            ..FaultSpec::status(429).times(1)
        })
        .unwrap();
    let first = s.post("/v1/chat/completions", &chat("pg/m", false)).await;
    assert_eq!(first.status, 429, "{first:#?}");
    // The pause is on the admin view while it lasts.
    let v = s.admin("/api/resilience/queue-pauses").await;
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{v}");
    assert_eq!(items[0]["connectionId"], "cg", "{v}");
    assert!(items[0]["remainingMs"].as_u64().unwrap() <= 2_000, "{v}");
    let t = Instant::now();
    let next = s.post("/v1/chat/completions", &chat("pg/m", false)).await;
    assert_eq!(next.status, 200, "{next:#?}");
    // A lower bound only: the request sat out (most of) the 2 s the upstream asked for.
    assert!(
        t.elapsed() >= Duration::from_millis(1_500),
        "the queue did not pause: {:?}",
        t.elapsed()
    );
    assert_eq!(
        metric(&s, "switchyard_body_retry_total{effect=\"pace\"}").await,
        Some(1)
    );
}
