//! DEGRADED decay on the real node: a connection test from the admin API
//! (`POST /api/providers/{id}/test`) that succeeds returns a DEGRADED breaker to CLOSED, and a
//! DEGRADED breaker quiet for its window (the longest OPEN hold, `reset_timeout_ms ×
//! max_backoff_multiplier`) reads CLOSED again, so later failures start from zero.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{MGMT_KEY, Setup, prelude, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY: &str = "sk-degraded-decay-0001";

/// Provider `pd` whose breaker degrades at 2 failures and opens at 5, with `reset_ms` as its
/// reset timeout and a multiplier of 1 (the quiet window is one reset timeout).
async fn degraded_setup(reset_ms: u64) -> Setup {
    let config = prelude()
        + &format!(
            "\n[resilience.provider_breaker.apikey]\nfailure_threshold = 5\n\
             degradation_threshold = 2\nreset_timeout_ms = {reset_ms}\nmax_backoff_multiplier = 1\n"
        )
        + &provider("pd", "openai", "{URL}", &["m"], "", "")
        + &connection("cd", "pd", "UP_D", "disable_cooling = true");
    let s = setup(config, &[("UP_D", KEY)]).await;
    s.mock
        .script(FaultSpec::status(503).for_key(KEY).times(2))
        .unwrap();
    for _ in 0..2 {
        let r = s.post("/v1/chat/completions", &chat("pd/m", false)).await;
        assert_eq!(r.status, 503, "{r:#?}");
    }
    s
}

async fn breaker_state(s: &Setup) -> String {
    let v = s.admin("/api/monitoring/health").await;
    v["providerBreakers"]
        .as_array()
        .and_then(|rows| rows.iter().find(|p| p["provider"] == "pd"))
        .and_then(|row| row["state"].as_str())
        .unwrap_or_else(|| panic!("no breaker state for pd in {v}"))
        .to_owned()
}

async fn test_provider(s: &Setup, id: &str) -> Reply {
    send(
        s.http
            .post(format!("{}/api/providers/{id}/test", s.node.admin_url()))
            .bearer_auth(MGMT_KEY),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successful_connection_test_closes_a_degraded_breaker() {
    let s = degraded_setup(300_000).await;
    let state = eventually(STATE_DEADLINE, || async {
        let state = breaker_state(&s).await;
        (state.eq_ignore_ascii_case("degraded")).then_some(state)
    })
    .await;
    assert!(state.is_some(), "two 503s degrade the breaker");

    let r = test_provider(&s, "pd").await;
    assert_eq!(r.status, 200, "{r:#?}");
    let v = r.json();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["connection"], "cd", "{v}");
    assert!(
        v["breaker"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case("closed"),
        "{v}"
    );
    assert!(breaker_state(&s).await.eq_ignore_ascii_case("closed"));

    // A failed test changes nothing, and an unknown provider is 404.
    s.mock
        .script(FaultSpec::status(500).for_key(KEY).times(1))
        .unwrap();
    let r = test_provider(&s, "pd").await;
    assert_eq!(r.json()["ok"], false, "{r:#?}");
    assert_eq!(r.json()["status"], 500, "{r:#?}");
    assert_eq!(test_provider(&s, "nope").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_degraded_breaker_decays_to_closed() {
    // The smallest reset timeout (1 s) is the quiet window with a multiplier of 1.
    let s = degraded_setup(1_000).await;
    let closed = eventually(STATE_DEADLINE, || async {
        breaker_state(&s)
            .await
            .eq_ignore_ascii_case("closed")
            .then_some(())
    })
    .await;
    assert!(
        closed.is_some(),
        "the DEGRADED breaker decayed after its quiet window"
    );
    let v = s.admin("/api/monitoring/health").await;
    assert!(v.to_string().contains("quiet-decay"), "{v}");
}
