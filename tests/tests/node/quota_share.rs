//! `quota-share` combos end to end: deficit round robin over a shared pool, and the fail-open
//! serialisation of a capped connection.
//!
//! One provider `pool` with three connections (`qa`, `qb`, `qc`) on one mock upstream, told
//! apart by their keys; each combo target is pinned to one connection. `qs` shares over all
//! three with weights 1, 2 and 3; `qs-one` is a pool of one (`qa`), where the strategy cannot
//! hold anything back and the connection's gate alone serialises.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use futures_util::future::join_all;
use switchyard_tests::mock_upstream::FaultSpec;

use crate::support::http::*;
use crate::support::scenario::Scenario;

const KEY_A: &str = "sk-qshare-a-000000000001";
const KEY_B: &str = "sk-qshare-b-000000000002";
const KEY_C: &str = "sk-qshare-c-000000000003";
const MODEL: &str = "gpt-4o-mini";

/// The pool, both combos; `qa_extra` goes into connection `qa`'s table, `resilience` is
/// appended to the config.
async fn setup(qa_extra: &str, resilience: &str) -> Scenario {
    let on =
        |c: &str, weight: &str| format!("target = \"pool/{MODEL}\", connection = \"{c}\"{weight}");
    Scenario::with_mock(3)
        .await
        .provider("pool", "openai", &[MODEL], "", "")
        .connection("qa", "pool", KEY_A, qa_extra)
        .connection("qb", "pool", KEY_B, "")
        .connection("qc", "pool", KEY_C, "")
        .combo(
            "qs",
            "quota-share",
            &[
                on("qa", ", weight = 1"),
                on("qb", ", weight = 2"),
                on("qc", ", weight = 3"),
            ],
            "",
        )
        .combo(
            "qs-one",
            "quota-share",
            &[on("qa", "")],
            "[combos.config]\nmax_retries = 0\n",
        )
        .config(resilience)
        .start()
        .await
}

/// `n` requests on `combo` sent at once.
async fn burst(s: &Scenario, combo: &str, n: usize) -> Vec<Reply> {
    join_all((0..n).map(|_| s.call(combo))).await
}

/// `qa` answers only after `ms`.
fn slow_qa(s: &Scenario, ms: u64) {
    s.mock
        .script(FaultSpec {
            latency_before_headers_ms: Some(ms),
            ..FaultSpec::new().for_key(KEY_A)
        })
        .unwrap();
}

/// `switchyard_quota_share_waits_total` by `outcome`.
async fn waits(s: &Scenario) -> BTreeMap<String, u64> {
    s.metrics()
        .await
        .lines()
        .filter_map(|l| l.strip_prefix("switchyard_quota_share_waits_total{outcome=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(outcome, v)| (outcome.to_owned(), v.trim().parse().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_share_spreads_requests_by_weight_over_the_pool() {
    let s = setup("", "").await;
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..30 {
        let r = s.call("qs").await;
        assert_eq!(r.status, 200, "{r:#?}");
        *served.entry(r.connection()).or_default() += 1;
    }
    // Five rounds of 1 + 2 + 3: deficit round robin serves each member its weight per round.
    let expected: BTreeMap<String, usize> = [("qa", 5), ("qb", 10), ("qc", 15)]
        .map(|(c, n)| (c.to_owned(), n))
        .into();
    assert_eq!(served, expected);
    let stats = s.mock.stats();
    assert_eq!(
        [KEY_A, KEY_B, KEY_C].map(|k| stats.requests_for_key(k)),
        [5, 10, 15]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_share_serialises_a_capped_connection_while_its_queue_has_room() {
    let s = setup("max_concurrent = 1", "").await;
    slow_qa(&s, 300);
    let replies = burst(&s, "qs-one", 4).await;
    for r in &replies {
        assert_eq!(r.status, 200, "{r:#?}");
        assert_eq!(r.connection(), "qa");
    }
    assert_eq!(
        s.mock.stats().max_in_flight_for_key(KEY_A),
        1,
        "the account never saw more than its cap"
    );
    let waits = waits(&s).await;
    assert_eq!(waits.get("acquired"), Some(&4), "{waits:?}");
    assert_eq!(waits.values().sum::<u64>(), 4, "{waits:?}");
}

/// Fail-open: a full line or a timeout does not refuse the request at the serialisation, but
/// the connection's own cap still holds: the request waits for the gate once more, and is
/// refused with a typed 429 only when the connection is still saturated then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_share_fails_open_at_the_line_but_never_past_the_connection_cap() {
    let s = setup(
        "max_concurrent = 1",
        "\n[resilience.concurrency]\nsemaphore_max_queue = 1\nsemaphore_queue_timeout_ms = 200\n",
    )
    .await;
    slow_qa(&s, 300);
    // One holds the slot, one waits past the timeout, one finds the line full: the two get
    // past the line, then wait for the cap like any request.
    let replies = burst(&s, "qs-one", 3).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    assert!(
        ok >= 2,
        "the one that timed out at the line still got its turn: {replies:#?}"
    );
    for r in replies.iter().filter(|r| r.status != 200) {
        let code = r.json()["error"]["code"].as_str().unwrap_or("").to_owned();
        assert!(
            code == "SEMAPHORE_TIMEOUT" || code == "SEMAPHORE_QUEUE_FULL",
            "{r:#?}"
        );
        r.assert_error(429, "rate_limit_error", &code);
    }
    assert_eq!(
        s.mock.stats().max_in_flight_for_key(KEY_A),
        1,
        "fail-open must not send the account past its max_concurrent"
    );
    let waits = waits(&s).await;
    assert_eq!(waits.get("acquired"), Some(&1), "{waits:?}");
    let proceeded = waits["timeout_proceeded"] + waits["queue_full_proceeded"];
    assert_eq!(proceeded, 2, "{waits:?}");
    assert_eq!(waits["timeout_rejected"] + waits["queue_full_rejected"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_share_with_fail_open_off_answers_a_typed_429() {
    let s = setup(
        "max_concurrent = 1",
        "\n[resilience.concurrency]\nsemaphore_max_queue = 1\nsemaphore_queue_timeout_ms = 200\n\
         quota_share_fail_open = false\n",
    )
    .await;
    slow_qa(&s, 1_000);
    let replies = burst(&s, "qs-one", 3).await;
    let ok = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(ok, 1, "{replies:#?}");
    for r in replies.iter().filter(|r| r.status != 200) {
        let code = r.json()["error"]["code"].as_str().unwrap_or("").to_owned();
        assert!(
            code == "SEMAPHORE_TIMEOUT" || code == "SEMAPHORE_QUEUE_FULL",
            "{r:#?}"
        );
        r.assert_error(429, "rate_limit_error", &code);
    }
    assert_eq!(s.mock.stats().max_in_flight_for_key(KEY_A), 1);
    let waits = waits(&s).await;
    assert_eq!(
        waits["timeout_rejected"] + waits["queue_full_rejected"],
        2,
        "{waits:?}"
    );
    assert_eq!(
        waits["timeout_proceeded"] + waits["queue_full_proceeded"],
        0
    );
}
