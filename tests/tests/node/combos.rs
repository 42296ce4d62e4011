//! Combos end to end: the real node binary routing over three mock providers.
//!
//! Each strategy's choice is read from `x-switchyard-connection` (provider `pa` has connection
//! `ca`, `pb` has `cb`, `pc` has `cc`, all on one mock upstream told apart by their keys).
//! Then the combo terminal answers (docs/error-effects.md and docs/policy.md, `strategy`): failover on a
//! 503, `ALL_TARGETS_SKIPPED` with `skippedTargets`, `all_targets_cooling_down` for weighted
//! pools, `no_executable_targets`, `max_attempts_exceeded`, and `rate_limit_error` when
//! waiting is not allowed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use serde_json::Value;
use switchyard_tests::mock_upstream::FaultSpec;

use crate::support::http::*;
use crate::support::scenario::Scenario;
use crate::support::{STATE_DEADLINE, eventually};

const KEY_A: &str = "sk-combo-a-000000000001";
const KEY_B: &str = "sk-combo-b-000000000002";
const KEY_C: &str = "sk-combo-c-000000000003";
const MODEL: &str = "gpt-4o-mini";

/// `(combo name, strategy, per-target weights)`.
const COMBOS: [(&str, &str, [u32; 3]); 13] = [
    ("c-priority", "priority", [1, 1, 1]),
    ("c-fill", "fill-first", [1, 1, 1]),
    ("c-rr", "round-robin", [1, 1, 1]),
    ("c-weighted", "weighted", [1, 1, 8]),
    ("c-weighted-even", "weighted", [1, 1, 1]),
    ("c-random", "random", [1, 1, 1]),
    ("c-strict", "strict-random", [1, 1, 1]),
    ("c-least", "least-used", [1, 1, 1]),
    ("c-p2c", "p2c", [1, 1, 1]),
    ("c-cost", "cost-optimized", [1, 1, 1]),
    ("c-cache", "cache-optimized", [1, 1, 1]),
    ("c-lkgp", "lkgp", [1, 1, 1]),
    ("c-max2", "priority", [1, 1, 1]),
];

/// Three providers with one connection each (`conn_extra` goes into every connection, e.g.
/// `disable_cooling = true`; `provider_extra` into every provider table), every combo of
/// [`COMBOS`], and `resilience` appended.
async fn setup(conn_extra: &str, provider_extra: &str, resilience: &str) -> Scenario {
    let mut b = Scenario::with_mock(3).await;
    for (p, cost) in [("pa", "3.0"), ("pb", "0.5"), ("pc", "1.0")] {
        b = b
            .provider(
                p,
                "openai",
                &[MODEL],
                &format!("cost_per_1k_tokens = {cost}"),
                "",
            )
            .config(provider_extra);
    }
    for (c, p, key) in [
        ("ca", "pa", KEY_A),
        ("cb", "pb", KEY_B),
        ("cc", "pc", KEY_C),
    ] {
        b = b.connection(c, p, key, conn_extra);
    }
    for (name, strategy, w) in COMBOS {
        let max_attempts = if name == "c-max2" { 2 } else { 30 };
        let targets: Vec<String> = ["pa", "pb", "pc"]
            .iter()
            .zip(w)
            .map(|(p, w)| format!("target = \"{p}/{MODEL}\", weight = {w}"))
            .collect();
        b = b.combo(
            name,
            strategy,
            &targets,
            &format!("[combos.config]\nmax_retries = 0\nmax_attempts = {max_attempts}\n"),
        );
    }
    b.config(resilience).start().await
}

/// The connection that served a successful request on `combo`.
async fn served(s: &Scenario, combo: &str) -> String {
    let r = s.call(combo).await;
    assert_eq!(r.status, 200, "{combo}: {r:#?}");
    r.connection()
}

/// The connections that served `n` successful requests, in order.
async fn sequence(s: &Scenario, combo: &str, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(served(s, combo).await);
    }
    out
}

fn total(s: &Scenario) -> u64 {
    s.mock.stats().requests_total
}

/// The requests that reached `pa`, `pb` and `pc`.
fn hits(s: &Scenario) -> (u64, u64, u64) {
    (s.hits(KEY_A), s.hits(KEY_B), s.hits(KEY_C))
}

/// Calls `combo` until a call is answered without reaching an upstream. Failures reach the
/// connection actors asynchronously, so the first call after a failure may still find the
/// connection usable; the faults in these tests are scripted without a use limit, so such a
/// call just fails again.
async fn call_undispatched(s: &Scenario, combo: &str) -> Reply {
    eventually(STATE_DEADLINE, || async {
        let before = total(s);
        let r = s.call(combo).await;
        (total(s) == before).then_some(r)
    })
    .await
    .unwrap_or_else(|| panic!("{combo}: every call still reached an upstream"))
}

fn counts(seq: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for c in seq {
        *m.entry(c.clone()).or_insert(0) += 1;
    }
    m
}

fn count(seq: &[String], conn: &str) -> usize {
    seq.iter().filter(|c| *c == conn).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fill_first_use_the_first_target() {
    let s = setup("", "", "").await;
    assert_eq!(sequence(&s, "c-priority", 4).await, ["ca"; 4]);
    assert_eq!(sequence(&s, "c-fill", 4).await, ["ca"; 4]);
    assert_eq!(hits(&s), (8, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_rotates_after_the_sticky_limit() {
    let s = setup("", "", "").await;
    // Three in a row on each target (the default sticky limit), in configured order.
    let seq = sequence(&s, "c-rr", 9).await;
    assert_eq!(
        seq,
        ["ca", "ca", "ca", "cb", "cb", "cb", "cc", "cc", "cc"],
        "{seq:?}"
    );
    assert_eq!(served(&s, "c-rr").await, "ca", "the rotation wraps around");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_follows_the_weights() {
    let s = setup("", "", "").await;
    // Weights 1 : 1 : 8 over 30 requests: cc expects 24 (sd ~2.2).
    let seq = sequence(&s, "c-weighted", 30).await;
    let c = counts(&seq);
    let heavy = count(&seq, "cc");
    assert!(heavy >= 16, "weight 8 of 10 got {heavy} of 30: {c:?}");
    assert!(
        heavy > count(&seq, "ca") + count(&seq, "cb"),
        "weight 8 beats the two weight-1 targets together: {c:?}"
    );
    // Equal weights spread: over 30 requests every target is chosen first at least once.
    let even = sequence(&s, "c-weighted-even", 30).await;
    assert_eq!(counts(&even).len(), 3, "{:?}", counts(&even));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_and_strict_random_cover_every_target() {
    let s = setup("", "", "").await;
    let seq = sequence(&s, "c-random", 30).await;
    assert_eq!(counts(&seq).len(), 3, "{:?}", counts(&seq));
    // Strict random deals each target exactly once per cycle of three.
    let strict = sequence(&s, "c-strict", 9).await;
    for cycle in strict.chunks(3) {
        let mut sorted = cycle.to_vec();
        sorted.sort();
        assert_eq!(sorted, ["ca", "cb", "cc"], "one cycle: {strict:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn least_used_avoids_a_busy_target() {
    let s = setup("", "", "").await;
    assert_eq!(
        served(&s, "c-least").await,
        "ca",
        "idle pool: configured order"
    );
    // Hold a slow stream open on pa (10 chunks, 150 ms apart).
    s.mock
        .script(FaultSpec {
            chunks: Some(10),
            chunk_delay_ms: Some(150),
            ..FaultSpec::new().for_key(KEY_A).times(1)
        })
        .unwrap();
    let busy = s
        .http
        .post(format!("{}/v1/chat/completions", s.base))
        .json(&chat("c-least", true))
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), 200);
    assert_eq!(
        busy.headers()
            .get("x-switchyard-connection")
            .and_then(|v| v.to_str().ok()),
        Some("ca")
    );
    // While it streams, pa has one request in flight: the next request goes elsewhere.
    assert_eq!(served(&s, "c-least").await, "cb");
    let body = busy.text().await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    // Once the stream is finished, pa is idle again.
    let back = eventually_served(&s, "c-least", "ca").await;
    assert!(back, "pa is chosen again once its stream ended");
}

/// Whether `combo` is served by `conn` before the deadline (in-flight counts are released
/// when the stream's finalisation runs, right after the client has read the end).
async fn eventually_served(s: &Scenario, combo: &str, conn: &str) -> bool {
    eventually(STATE_DEADLINE, || async { served(s, combo).await == conn }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2c_never_picks_the_worst_of_three() {
    let s = setup("", "", "").await;
    // Two distinct targets are drawn and the healthier wins; with equal load the priority
    // bias decides, so the last target can never win a draw.
    let seq = sequence(&s, "c-p2c", 30).await;
    let c = counts(&seq);
    assert_eq!(count(&seq, "cc"), 0, "{c:?}");
    assert!(count(&seq, "ca") >= 1 && count(&seq, "cb") >= 1, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_optimized_picks_the_cheapest_target() {
    let s = setup("", "", "").await;
    // pa 3.0, pb 0.5, pc 1.0 per 1k tokens.
    assert_eq!(sequence(&s, "c-cost", 4).await, ["cb"; 4]);
    // When the cheapest fails, the next cheapest is tried before the most expensive.
    s.mock
        .script(FaultSpec::status(503).for_key(KEY_B).times(1))
        .unwrap();
    let r = s.call("c-cost").await;
    assert_eq!((r.status, r.connection().as_str()), (200, "cc"), "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_optimized_is_stable_per_prompt_cache_key() {
    let s = setup("", "", "").await;
    let with_key = |k: &str| {
        let mut body = chat("c-cache", false);
        body["prompt_cache_key"] = Value::from(k);
        body
    };
    let mut first = None;
    for _ in 0..5 {
        let r = s.post("/v1/chat/completions", &with_key("tenant-7")).await;
        assert_eq!(r.status, 200);
        let c = r.connection();
        assert_eq!(first.get_or_insert(c.clone()), &c, "same key, same target");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_optimized_spreads_different_keys() {
    let s = setup("", "", "").await;
    let mut seen = BTreeMap::new();
    for i in 0..12 {
        let mut body = chat("c-cache", false);
        body["prompt_cache_key"] = Value::from(format!("tenant-{i}"));
        let r = s.post("/v1/chat/completions", &body).await;
        assert_eq!(r.status, 200);
        *seen.entry(r.connection()).or_insert(0) += 1;
    }
    // Rendezvous hashing of 12 keys over 3 targets: all on one target is a 1-in-59k event,
    // and deterministic (stable hashes), so this never flakes.
    assert!(seen.len() >= 2, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lkgp_prefers_the_last_good_target() {
    // Cooling off, so pa stays eligible after its failure: the choice is the strategy's.
    let s = setup("disable_cooling = true", "", "").await;
    assert_eq!(
        served(&s, "c-lkgp").await,
        "ca",
        "no history: configured order"
    );
    s.mock
        .script(FaultSpec::status(503).for_key(KEY_A).times(1))
        .unwrap();
    let r = s.call("c-lkgp").await;
    assert_eq!((r.status, r.connection().as_str()), (200, "cb"), "{r:#?}");
    assert_eq!(r.attempts(), 2);
    // pb was the last good target: it goes first now, without touching pa.
    let r = s.call("c-lkgp").await;
    assert_eq!((r.connection().as_str(), r.attempts()), ("cb", 1), "{r:#?}");
    // A priority combo over the same (eligible) targets still starts at pa.
    assert_eq!(served(&s, "c-priority").await, "ca");
    assert_eq!(hits(&s), (3, 2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_to_the_next_target_on_503() {
    let s = setup("", "", "").await;
    s.mock
        .script(FaultSpec::status(503).for_key(KEY_A).times(1))
        .unwrap();
    let r = s.call("c-priority").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.attempts(), 2);
    assert_eq!(hits(&s), (1, 1, 0));
}

/// The breaker opens after two failures (apikey profile shrunk for the test).
const SMALL_BREAKER: &str = "\n[resilience.provider_breaker.apikey]\nfailure_threshold = 2\n\
                             degradation_threshold = 1\nreset_timeout_ms = 30000\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_breakers_give_all_targets_skipped_and_cooling_down() {
    let s = setup("disable_cooling = true", "", SMALL_BREAKER).await;
    s.mock.script(FaultSpec::status(503)).unwrap();
    let skipped = eventually(STATE_DEADLINE, || async {
        let r = s.call("c-priority").await;
        assert_eq!(r.status, 503, "every target fails: {r:#?}");
        (r.json()["error"]["code"] == "ALL_TARGETS_SKIPPED").then_some(r)
    })
    .await;
    let r = skipped.expect("the breakers open after two failures each");
    let before = total(&s);
    let v = r.assert_error(503, "service_unavailable", "ALL_TARGETS_SKIPPED");
    let groups = v["error"]["skippedTargets"]
        .as_array()
        .expect("skippedTargets");
    assert_eq!(groups.len(), 1, "{v}");
    assert_eq!(groups[0]["reason"], "circuit_open", "{v}");
    let mut targets: Vec<&str> = groups[0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    targets.sort_unstable();
    assert_eq!(
        targets,
        ["pa/gpt-4o-mini", "pb/gpt-4o-mini", "pc/gpt-4o-mini"]
    );
    assert!(v["error"]["nextRetryAt"].is_string(), "{v}");
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry), "Retry-After {retry}");
    assert_eq!(v["diagnostics"]["attempted"], 0, "{v}");

    // A weighted pool emptied only by the breakers is "cooling down", not "skipped".
    let r = s.call("c-weighted").await;
    let v = r.assert_error(503, "service_unavailable", "all_targets_cooling_down");
    assert!(r.header("retry-after").is_some(), "{r:#?}");
    let excluded = v["diagnostics"]["excluded"].as_array().expect("excluded");
    assert_eq!(excluded.len(), 3, "{v}");
    assert!(
        excluded.iter().all(|e| e["reason"] == "circuit_open"),
        "{v}"
    );
    assert_eq!(total(&s), before, "nothing reached an upstream");
    assert_healthy(&s.node, "open breakers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_pool_with_every_target_cooling_is_cooling_down() {
    // An operator rule makes the 429 a 30 s quota cooldown: not a transient lock, so the
    // combo neither waits nor answers 429.
    let rule = "\n[[providers.error_rules]]\nstatus = 429\nmatch = \"quota gone\"\n\
                scope = \"connection\"\nreason = \"quota_exhausted\"\ncooldown_ms = 30000\n";
    let s = setup("", rule, "").await;
    s.mock
        .script(FaultSpec {
            error_message: Some("quota gone for today".into()),
            ..FaultSpec::status(429)
        })
        .unwrap();
    let first = s.call("c-weighted").await;
    assert_eq!(first.status, 429, "{first:#?}");
    assert_eq!(hits(&s), (1, 1, 1), "every target was tried once");

    let r = call_undispatched(&s, "c-weighted").await;
    let v = r.assert_error(503, "service_unavailable", "all_targets_cooling_down");
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((20..=31).contains(&retry), "Retry-After {retry}");
    let excluded = v["diagnostics"]["excluded"].as_array().expect("excluded");
    assert_eq!(excluded.len(), 3, "{v}");
    // The same state on a priority combo: every target skipped, grouped by reason.
    let dispatched = total(&s);
    let r = s.call("c-priority").await;
    let v = r.assert_error(503, "service_unavailable", "ALL_TARGETS_SKIPPED");
    let groups = v["error"]["skippedTargets"]
        .as_array()
        .expect("skippedTargets");
    let listed: usize = groups
        .iter()
        .map(|g| g["targets"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(listed, 3, "{v}");
    assert_eq!(total(&s), dispatched, "cooling targets were not dispatched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_executable_targets_is_404() {
    // The client's key may use no connection of any target: nothing can run, and no
    // resilience timer is involved.
    let s = Scenario::with_mock(3)
        .await
        .config(
            "\n[[api_keys]]\nid = \"narrow\"\nkey_env = \"NARROW_KEY\"\n\
             allowed_connections = [\"cz\"]\n",
        )
        .env("NARROW_KEY", "sy-narrow-client-key-0001")
        .provider("pa", "openai", &[MODEL], "", "")
        .provider("pb", "anthropic", &[MODEL], "", "")
        .provider("pz", "openai", &[MODEL], "", "")
        .connection("ca", "pa", KEY_A, "")
        .connection("cb", "pb", KEY_B, "")
        .connection("cz", "pz", KEY_C, "")
        .combo(
            "c",
            "",
            &["pa", "pb"].map(|p| format!("target = \"{p}/{MODEL}\"")),
            "",
        )
        .start()
        .await;
    let r = send(
        s.http
            .post(format!("{}/v1/messages", s.base))
            .header("x-api-key", "sy-narrow-client-key-0001")
            .json(&messages("c", false)),
    )
    .await;
    assert_eq!(r.status, 404, "{r:#?}");
    let v = r.json();
    assert_eq!(v["type"], "error", "Anthropic envelope: {v}");
    assert_eq!(v["error"]["code"], "no_executable_targets", "{v}");
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    assert_eq!(total(&s), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_attempts_stops_the_combo() {
    let s = setup("", "", "").await;
    s.mock.script(FaultSpec::status(503)).unwrap();
    let r = s.call("c-max2").await;
    let v = r.assert_error(503, "server_error", "max_attempts_exceeded");
    assert_eq!(v["diagnostics"]["attempted"], 2, "{v}");
    assert_eq!(hits(&s), (1, 1, 0), "the third target is never tried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_pool_answers_429_when_waiting_is_off() {
    let s = setup(
        "",
        "",
        "\n[resilience.combo_cooldown_wait]\nenabled = false\n",
    )
    .await;
    s.mock
        .script(FaultSpec::status(429).header("Retry-After", "30"))
        .unwrap();
    let first = s.call("c-priority").await;
    assert_eq!(first.status, 429, "{first:#?}");
    assert_eq!(hits(&s), (1, 1, 1));
    // Now every target is in a transient 30 s cooldown: no dispatch, 429 with the reset.
    let r = call_undispatched(&s, "c-priority").await;
    let v = r.assert_error(429, "rate_limit_error", "rate_limit_exceeded");
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((25..=31).contains(&retry), "Retry-After {retry}");
    assert!(v["error"]["retry_after"].is_number(), "{v}");
    assert!(v["error"]["reset_at"].is_string(), "{v}");
}
