//! The last resorts on the real node (`[fallback]`): a combo that ends in 503 gets one attempt
//! on `global_fallback_model`; a direct request that fails with a listed status is retried
//! once on the emergency target with its output-token limit clamped. Off, neither happens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;

const KEY_A: &str = "sk-last-resort-a-0001";
const KEY_B: &str = "sk-last-resort-b-0002";

/// `pa` (always failing with `status`) and `pb`, combo `c` over `pa/m` alone, and `fallback`
/// appended.
async fn two_providers(status: u16, fallback: &str) -> Setup {
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m"], "", "")
        + &connection("ca", "pa", "UP_A", "disable_cooling = true")
        + &provider("pb", "openai", "{URL}", &["m"], "", "")
        + &connection("cb", "pb", "UP_B", "")
        + "\n[[combos]]\nname = \"c\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"pa/m\" }]\n[combos.config]\nmax_retries = 0\n"
        + fallback;
    let s = setup(config, &[("UP_A", KEY_A), ("UP_B", KEY_B)]).await;
    s.mock
        .script(FaultSpec::status(status).for_key(KEY_A))
        .unwrap();
    s
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combo_ending_in_503_gets_one_attempt_on_the_global_fallback_model() {
    let s = two_providers(503, "\n[fallback]\nglobal_fallback_model = \"pb/m\"\n").await;
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!((hits(&s, KEY_A), hits(&s, KEY_B)), (1, 1));
    // A direct request is not a combo: no global fallback.
    let r = s.post("/v1/chat/completions", &chat("pa/m", false)).await;
    assert_eq!(r.status, 503, "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_global_fallback_model_the_combo_fails() {
    let s = two_providers(503, "").await;
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 503, "{r:#?}");
    assert_eq!(hits(&s, KEY_B), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_direct_request_is_retried_once_on_the_emergency_target_clamped() {
    let fallback = "\n[fallback.emergency]\nenabled = true\ntarget = \"pb/m\"\n\
                    statuses = [500]\nmax_tokens = 64\n";
    let s = two_providers(500, fallback).await;
    let mut body = chat("pa/m", false);
    body["max_tokens"] = Value::from(100_000);
    let r = s.post("/v1/chat/completions", &body).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    let sent = s
        .mock
        .stats()
        .recent_bodies
        .iter()
        .rev()
        .find(|b| b.api_key == KEY_B)
        .map(|b| b.body.clone())
        .expect("the emergency attempt's body");
    let sent: Value = serde_json::from_str(&sent).unwrap();
    assert_eq!(sent["max_tokens"], 64, "{sent}");

    // A status not listed is answered as it is.
    s.mock.clear_faults();
    s.mock
        .script(FaultSpec::status(502).for_key(KEY_A))
        .unwrap();
    let before = hits(&s, KEY_B);
    let r = s.post("/v1/chat/completions", &body).await;
    assert_eq!(r.status, 502, "{r:#?}");
    assert_eq!(hits(&s, KEY_B), before);
}
