//! Black-box test of `/metrics`: the real `switchyard-node` binary in front of an in-process
//! mock upstream, over loopback.
//!
//! It sends a mix of traffic (successes, a 503 that fails over, a 429 that cools a
//! connection, streams with usage, a stream that ends before content, a saturated gate),
//! scrapes the admin listener and checks that every family exists, that the counters moved
//! with the expected labels, and that the exposition is valid for Prometheus itself:
//! `promtool check metrics` (Debian package `prometheus`, installed by `.ci/run`) must accept
//! it. Without promtool the test fails: a hand-written parser would only agree with the
//! encoder it was written against.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use crate::support::node::{NO_QUEUE_NO_WAIT, Node, PRELUDE, Reply, connection};
use crate::support::{STATE_DEADLINE, eventually};
use serde_json::json;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle, Route};

/// Four providers on one mock, told apart by their connections' keys (faults match a key):
/// `p` for successes and a 503 failover, `q` for a 429 cooldown (its fallback connection
/// goes through the request queue), `s` for streams, `g` with a one-slot gate. `p` and `s`
/// list their model, so their tokens are labelled with it; `q` and `g` pass any model.
fn config(mock: &MockHandle) -> String {
    let provider = |id: &str, models: &str| {
        format!(
            r#"
[[providers]]
id = "{id}"
category = "apikey"
format = "openai"
base_url = "{base}/v1"
models = [{models}]
[providers.timeouts]
connect_ms = 1000
headers_ms = 8000
first_content_ms = 8000
idle_ms = 8000
"#,
            base = mock.base_url()
        )
    };
    [
        PRELUDE,
        NO_QUEUE_NO_WAIT,
        "
[resilience.concurrency]
semaphore_queue_timeout_ms = 100
semaphore_max_queue = 4
",
        &provider("p", r#""mock-model""#),
        &provider("q", ""),
        &provider("s", r#""mock-model""#),
        &provider("g", ""),
        &connection("a", "p", "KEY_A", ""),
        &connection("b", "p", "KEY_B", ""),
        &connection("c", "q", "KEY_C", ""),
        &connection("d", "q", "KEY_D", "rate_limit_protection = true"),
        &connection("e", "s", "KEY_E", ""),
        &connection("f", "s", "KEY_F", ""),
        &connection("h", "g", "KEY_H", "max_concurrent = 1"),
    ]
    .concat()
}

/// A streamed chat completion that asks for the final usage chunk.
async fn stream(node: &Node, model: &str) -> Reply {
    let body = json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}],
    });
    node.post("/v1/chat/completions", "application/json", body.to_string())
        .await
}

/// One sample of the exposition.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Reads the samples of an exposition (only as far as this test needs: the label values the
/// node writes contain no quotes or commas).
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap();
                    (k.to_owned(), v.trim_matches('"').to_owned())
                })
                .collect();
            Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().unwrap(),
            }
        })
        .collect()
}

/// The sum of the samples of `name` whose labels include every pair of `want`.
fn total(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// `promtool check metrics` on the exposition: parse errors and lint problems both fail.
fn promtool_check(text: &str) {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => panic!(
            "promtool is needed to validate the exposition ({e}); install the Debian package \
             `prometheus` (apt-get install prometheus), as .ci/run does"
        ),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics rejected the exposition ({}):\n{}{}\n--- exposition ---\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}

/// `GET /metrics` on the admin listener: a 200 in the text exposition format.
async fn scrape(node: &Node) -> String {
    let resp = node
        .http
        .get(format!("{}/metrics", node.proc.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    resp.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_traffic_and_parse_with_promtool() {
    let mock = crate::support::node::mock().await;
    let env = [
        ("KEY_A", "sk-a"),
        ("KEY_B", "sk-b"),
        ("KEY_C", "sk-c"),
        ("KEY_D", "sk-d"),
        ("KEY_E", "sk-e"),
        ("KEY_F", "sk-f"),
        ("KEY_H", "sk-h"),
    ];
    let node = Node::start(config(&mock), &env).await;
    let routed = |r: &Reply, status: u16, connection: &str| {
        assert_eq!((r.status, r.connection()), (status, connection), "{r:?}");
    };

    // Successes on p (connection a).
    for _ in 0..3 {
        routed(&node.chat("p/mock-model").await, 200, "a");
    }
    // A 503 on a fails over to b.
    mock.script(FaultSpec::status(503).for_key("sk-a").times(1))
        .unwrap();
    routed(&node.chat("p/mock-model").await, 200, "b");
    // A 429 with a long Retry-After cools c; d (behind the request queue) answers. The model
    // is not configured on q, so its tokens count as `other`.
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-c")
            .header("Retry-After", "60")
            .times(1),
    )
    .unwrap();
    routed(&node.chat("q/some-client-model").await, 200, "d");
    // Two streams with usage on s; then one that ends before any content on e (a watchdog
    // abort before the commit point) and fails over to f.
    for _ in 0..2 {
        let r = stream(&node, "s/mock-model").await;
        routed(&r, 200, "e");
        assert!(r.text.contains("[DONE]"), "{r:?}");
    }
    mock.script(FaultSpec {
        eof_before_content: true,
        ..FaultSpec::new()
            .for_key("sk-e")
            .on_route(Route::ChatCompletions)
            .times(1)
    })
    .unwrap();
    routed(&stream(&node, "s/mock-model").await, 200, "f");
    // g has one slot: while a slow request holds it, a second one times out at the gate.
    mock.script(FaultSpec {
        latency_before_headers_ms: Some(1500),
        ..FaultSpec::new().for_key("sk-h").times(1)
    })
    .unwrap();
    let node = std::sync::Arc::new(node);
    let slow = {
        let node = node.clone();
        tokio::spawn(async move { node.chat("g/m").await })
    };
    let holding = eventually(STATE_DEADLINE, || {
        std::future::ready(mock.stats().requests_for_key("sk-h") == 1)
    })
    .await;
    assert!(holding, "the slow request holds g's slot");
    let r = node.chat("g/m").await;
    r.assert_error(429, "SEMAPHORE_TIMEOUT");
    routed(&slow.await.unwrap(), 200, "h");
    // An unknown model: a 4xx that never reaches an upstream.
    assert_eq!(node.chat("nobody/none").await.status, 404);
    // The actors apply the last observations asynchronously: scrape until c's cooldown and
    // the end of every request show (or the deadline passes, and the checks below say what
    // is missing).
    let applied = |text: &str| {
        let s = samples(text);
        total(
            &s,
            "switchyard_connection_state",
            &[("connection", "c"), ("state", "cooldown")],
        ) >= 1.0
            && total(&s, "switchyard_in_flight_requests", &[]) == 0.0
            && total(&s, "switchyard_semaphore_in_flight", &[]) == 0.0
    };
    let text = match eventually(STATE_DEADLINE, || async {
        let text = scrape(&node).await;
        applied(&text).then_some(text)
    })
    .await
    {
        Some(text) => text,
        None => scrape(&node).await,
    };
    promtool_check(&text);
    for secret in ["sk-a", "sk-b", "sk-c", "sk-h", "some-client-model", "hi"] {
        assert!(
            !text.contains(&format!("\"{secret}\"")),
            "{secret} in /metrics"
        );
    }

    let s = samples(&text);
    let t = |name: &str, want: &[(&str, &str)]| total(&s, name, want);
    let chat_route = ("route", "/v1/chat/completions");
    let check = |what: &str, value: f64, ok: bool| {
        assert!(ok, "{what} = {value}\n{text}");
    };
    let at_least = |name: &str, want: &[(&str, &str)], min: f64| {
        let v = t(name, want);
        check(&format!("{name}{want:?}"), v, v >= min);
    };

    // Requests by route and status class.
    at_least(
        "switchyard_requests_total",
        &[chat_route, ("status_class", "2xx")],
        9.0,
    );
    at_least(
        "switchyard_requests_total",
        &[chat_route, ("status_class", "4xx")],
        2.0,
    );
    at_least(
        "switchyard_request_duration_seconds_count",
        &[chat_route],
        11.0,
    );
    at_least(
        "switchyard_gateway_overhead_seconds_count",
        &[chat_route],
        11.0,
    );
    // Upstream latency and time to first content.
    at_least(
        "switchyard_upstream_request_duration_seconds_count",
        &[("provider", "p")],
        5.0,
    );
    at_least(
        "switchyard_upstream_request_duration_seconds_count",
        &[("provider", "s")],
        3.0,
    );
    at_least(
        "switchyard_upstream_time_to_first_content_seconds_count",
        &[("provider", "s")],
        3.0,
    );
    // Failover, cooldown, skips and fallbacks.
    at_least("switchyard_fallbacks_total", &[], 3.0);
    at_least(
        "switchyard_fallbacks_total",
        &[("reason", "concurrency_cap")],
        1.0,
    );
    at_least(
        "switchyard_cooldowns_total",
        &[("provider", "q"), ("reason", "rate_limit_exceeded")],
        1.0,
    );
    // The 503 and the 429 are failed attempts of their providers.
    at_least(
        "switchyard_upstream_attempt_failures_total",
        &[("provider", "p"), ("kind", "http_5xx")],
        1.0,
    );
    at_least(
        "switchyard_upstream_attempt_failures_total",
        &[("provider", "q"), ("kind", "rate_limited")],
        1.0,
    );
    at_least(
        "switchyard_connection_state",
        &[("connection", "c"), ("state", "cooldown")],
        1.0,
    );
    at_least(
        "switchyard_connection_state",
        &[("connection", "d"), ("state", "active")],
        1.0,
    );
    at_least(
        "switchyard_skips_total",
        &[("reason", "concurrency_cap")],
        1.0,
    );
    at_least(
        "switchyard_semaphore_rejections_total",
        &[("type", "SEMAPHORE_TIMEOUT")],
        1.0,
    );
    at_least("switchyard_queue_wait_seconds_count", &[], 1.0);
    at_least(
        "switchyard_stream_watchdog_aborts_total",
        &[("kind", "early_eof")],
        1.0,
    );
    // Token usage from JSON and stream usage objects; unconfigured models are `other`.
    for (provider, model) in [("p", "mock-model"), ("s", "mock-model"), ("q", "other")] {
        for token_type in ["input", "output"] {
            at_least(
                "switchyard_gen_ai_client_token_usage_total",
                &[
                    ("provider", provider),
                    ("model", model),
                    ("token_type", token_type),
                ],
                1.0,
            );
        }
    }
    // Scrape-time families exist with their configured labels.
    for (name, labels) in [
        ("switchyard_breaker_state", &[("provider", "p")][..]),
        (
            "switchyard_breaker_transitions_total",
            &[("provider", "p"), ("from", "closed"), ("to", "open")][..],
        ),
        ("switchyard_model_lockouts", &[("provider", "s")][..]),
        ("switchyard_queue_depth", &[("connection", "d")][..]),
        ("switchyard_semaphore_in_flight", &[("connection", "h")][..]),
        ("switchyard_actor_restarts_total", &[][..]),
        (
            "switchyard_dropped_observations_total",
            &[("actor", "connection")][..],
        ),
        ("switchyard_in_flight_requests", &[][..]),
    ] {
        assert!(
            s.iter().any(|x| x.name == name
                && labels
                    .iter()
                    .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))),
            "{name}{labels:?} missing\n{text}"
        );
    }
    // Nothing is in flight once every response is read.
    assert_eq!(t("switchyard_in_flight_requests", &[]), 0.0, "{text}");
    assert_eq!(t("switchyard_semaphore_in_flight", &[]), 0.0, "{text}");
}
