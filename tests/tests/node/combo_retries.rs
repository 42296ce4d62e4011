//! A combo's `max_retries` and `retry_delay_ms`: a target whose connections all failed on a
//! transient error gets another round after the delay before the combo moves on, and the
//! delay never runs past the request's own deadline (`combo_timeout_ms`).
//!
//! Two providers on one mock told apart by their keys; the first target's only connection
//! has `disable_cooling` so that its 503 leaves it usable for the retry.

use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;

const KEY_A: &str = "sk-combo-retries-a-0001";
const KEY_B: &str = "sk-combo-retries-b-0002";

/// Combo `c` over `pa/m` then `pb/m`, with `options` in its `[combos.config]`.
async fn combo(options: &str) -> Setup {
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m"], "", "")
        + &connection("ca", "pa", "UP_A", "disable_cooling = true")
        + &provider("pb", "openai", "{URL}", &["m"], "", "")
        + &connection("cb", "pb", "UP_B", "")
        + "\n[[combos]]\nname = \"c\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"pa/m\" }, { target = \"pb/m\" }]\n\
           [combos.config]\n"
        + options
        + "\n";
    let s = setup(config, &[("UP_A", KEY_A), ("UP_B", KEY_B)]).await;
    // The first target fails once with a 503, then serves.
    s.mock
        .script(FaultSpec::status(503).for_key(KEY_A).times(1))
        .unwrap();
    s
}

async fn call(s: &Setup) -> Reply {
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    r
}

/// How many requests the mock saw with `key`.
fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combo_target_is_retried_after_its_delay() {
    let s = combo("max_retries = 1\nretry_delay_ms = 300").await;
    let r = call(&s).await;
    assert_eq!(
        r.connection(),
        "ca",
        "the first target served its retry: {r:#?}"
    );
    assert_eq!(r.attempts(), 2, "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 2);
    assert_eq!(hits(&s, KEY_B), 0, "the combo did not move on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_retries_zero_moves_on_at_once() {
    let s = combo("max_retries = 0\nretry_delay_ms = 300").await;
    let r = call(&s).await;
    assert_eq!(r.connection(), "cb", "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 1);
}

/// A delay that would run past `combo_timeout_ms` is not slept: the combo moves on at once
/// and answers, instead of timing out asleep (504 `COMBO_TIMEOUT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_delay_never_sleeps_past_the_combo_deadline() {
    let s = combo("max_retries = 1\nretry_delay_ms = 5000\ncombo_timeout_ms = 2000").await;
    let r = call(&s).await;
    assert_eq!(r.connection(), "cb", "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 1, "no retry on the first target");
}
