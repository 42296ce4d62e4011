//! The strategies that read what the node observed: `latency-optimized` (latency of past
//! attempts) and `headroom` (the quota windows upstream rate-limit headers state).
//!
//! Two providers on one mock upstream told apart by their keys: `pa` (connection `ca`, first
//! in config order, so every tie goes to it) and `pb` (connection `cb`). Each scenario makes
//! `pa` the worse choice through what its answers show; with nothing recorded, both are
//! unknown and the tie keeps every request on `ca`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use crate::support::eventually;
use crate::support::http::*;

const KEY_A: &str = "sk-strategy-inputs-a-0001";
const KEY_B: &str = "sk-strategy-inputs-b-0002";
const MODEL: &str = "gpt-4o-mini";
/// Requests counted after the warm-up.
const MEASURED: usize = 20;
/// At least this many of [`MEASURED`] must go to the better connection.
const MIN_BETTER: usize = 16;
/// How long the warm-up may take until the better connection has served once.
const WARM_UP: Duration = Duration::from_secs(20);

struct Setup {
    mock: MockHandle,
    node: NodeProcess,
    http: reqwest::Client,
    base: String,
}

/// Two providers and one combo `c` over them with `strategy`.
async fn setup(strategy: &str) -> Setup {
    let mock = mock(2).await;
    let url = mock.base_url();
    let mut config = open_auth_no_queue();
    for p in ["pa", "pb"] {
        config.push_str(&provider(p, "openai", &url, &[MODEL], "", ""));
    }
    config.push_str(&connection("ca", "pa", "SI_KEY_A", ""));
    config.push_str(&connection("cb", "pb", "SI_KEY_B", ""));
    config.push_str(&format!(
        "\n[[combos]]\nname = \"c\"\nstrategy = \"{strategy}\"\ntargets = [\
         {{ target = \"pa/{MODEL}\" }}, {{ target = \"pb/{MODEL}\" }}]\n"
    ));
    let node = start_node(config, env(&[("SI_KEY_A", KEY_A), ("SI_KEY_B", KEY_B)])).await;
    let base = node.client_url();
    Setup {
        mock,
        node,
        http: http(),
        base,
    }
}

impl Setup {
    async fn served(&self) -> String {
        let r = post(
            &self.http,
            &self.base,
            "/v1/chat/completions",
            &chat("c", false),
        )
        .await;
        assert_eq!(r.status, 200, "{r:#?}");
        r.connection()
    }

    /// Sends requests until `cb` serves one (the strategy has seen `ca`'s answers), then
    /// counts how many of the next [`MEASURED`] `cb` serves.
    async fn served_by_cb_after_warm_up(&self) -> usize {
        let warmed = eventually(WARM_UP, || async { self.served().await == "cb" }).await;
        assert!(
            warmed,
            "cb never served within the warm-up; log:\n{}",
            self.node.log()
        );
        let mut on_cb = 0;
        for _ in 0..MEASURED {
            if self.served().await == "cb" {
                on_cb += 1;
            }
        }
        on_cb
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_optimized_moves_to_the_faster_connection() {
    let s = setup("latency-optimized").await;
    // `ca` answers after 400 ms on every request, `cb` at once.
    s.mock
        .script(FaultSpec {
            latency_before_headers_ms: Some(400),
            ..FaultSpec::new().for_key(KEY_A)
        })
        .unwrap();
    let on_cb = s.served_by_cb_after_warm_up().await;
    assert!(
        on_cb >= MIN_BETTER,
        "only {on_cb} of {MEASURED} on the fast connection cb"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headroom_moves_away_from_a_spent_request_window() {
    let s = setup("headroom").await;
    // `ca` succeeds but says its request window is spent for the next minute.
    s.mock
        .script(
            FaultSpec::new()
                .for_key(KEY_A)
                .header("x-ratelimit-limit-requests", "100")
                .header("x-ratelimit-remaining-requests", "0")
                .header("x-ratelimit-reset-requests", "60s"),
        )
        .unwrap();
    let on_cb = s.served_by_cb_after_warm_up().await;
    assert!(
        on_cb >= MIN_BETTER,
        "only {on_cb} of {MEASURED} on cb, whose window is not spent"
    );
}
