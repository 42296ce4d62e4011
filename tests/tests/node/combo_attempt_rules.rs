//! The combo attempt rules of docs/policy.md (`strategy`) on the real node: a generic 400 moves a
//! combo on while a body-specific one stops it, a per-target timeout is answered as 524, a
//! connection that failed in the request stays out of it (`request_exhaustion`), and every
//! `skippedTargets[]` group carries its own `nextRetryAt`; three consecutive combo failures of a
//! session clear its pin.
//!
//! Providers `pa` (two connections), `pb` and `pc` on one mock, told apart by their keys.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;

const KEY_A1: &str = "sk-attempt-rules-a1-0001";
const KEY_A2: &str = "sk-attempt-rules-a2-0002";
const KEY_B: &str = "sk-attempt-rules-b-0003";
const KEY_C: &str = "sk-attempt-rules-c-0004";

/// Combo `c` over `targets`, with `options` in its `[combos.config]` and `pc_extra` in
/// provider `pc`'s table (its error rules).
async fn combo(targets: &[&str], options: &str, pc_extra: &str) -> Setup {
    let targets: Vec<String> = targets
        .iter()
        .map(|t| format!("{{ target = \"{t}\" }}"))
        .collect();
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m", "m2"], "", "")
        + &connection("ca1", "pa", "UP_A1", "")
        + &connection("ca2", "pa", "UP_A2", "")
        + &provider("pb", "openai", "{URL}", &["m"], "", "")
        + &connection("cb", "pb", "UP_B", "")
        + &provider("pc", "openai", "{URL}", &["m"], "", "")
        + pc_extra
        + &connection("cc", "pc", "UP_C", "")
        + &format!(
            "\n[[combos]]\nname = \"c\"\nstrategy = \"priority\"\ntargets = [{}]\n\
             [combos.config]\nmax_retries = 0\n{options}\n",
            targets.join(", ")
        );
    setup(
        config,
        &[
            ("UP_A1", KEY_A1),
            ("UP_A2", KEY_A2),
            ("UP_B", KEY_B),
            ("UP_C", KEY_C),
        ],
    )
    .await
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

/// A 400 with `message` on both of `pa`'s connections.
fn bad_request_on_pa(s: &Setup, message: &str) {
    for key in [KEY_A1, KEY_A2] {
        s.mock
            .script(FaultSpec {
                error_message: Some(message.to_owned()),
                ..FaultSpec::status(400).for_key(key)
            })
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_400_moves_the_combo_to_its_next_target() {
    let s = combo(&["pa/m", "pb/m"], "", "").await;
    bad_request_on_pa(
        &s,
        "The feature you asked for is not enabled for this account",
    );
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(
        hits(&s, KEY_A1) + hits(&s, KEY_A2),
        1,
        "the target's other connection gets the same input: not tried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_specific_400_stops_the_combo() {
    let s = combo(&["pa/m", "pb/m"], "", "").await;
    bad_request_on_pa(&s, "Malformed input: messages[0].content is not a string");
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    // The provider's own code is relayed.
    r.assert_error(400, "invalid_request_error", "invalid_request");
    assert_eq!(hits(&s, KEY_B), 0, "the combo stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_target_timeout_is_answered_as_524() {
    let s = combo(&["pb/m"], "timeout_ms = 400", "").await;
    let slow: FaultSpec = serde_json::from_value(
        json!({"match": {"api_key": KEY_B}, "latency_before_headers_ms": 5000}),
    )
    .unwrap();
    s.mock.script(slow).unwrap();
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    r.assert_error(524, "server_error", "target_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_failed_stays_out_of_the_rest_of_the_request() {
    // `pa/m` and `pa/m2` share `pa`'s connections; both fail with 401 on the first target.
    let s = combo(&["pa/m", "pa/m2"], "", "").await;
    for key in [KEY_A1, KEY_A2] {
        s.mock.script(FaultSpec::status(401).for_key(key)).unwrap();
    }
    let r = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert_eq!(r.status, 401, "{r:#?}");
    assert_eq!(
        hits(&s, KEY_A1) + hits(&s, KEY_A2),
        2,
        "each connection once"
    );
    let metrics = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    let text = metrics.everything();
    assert!(
        text.lines().any(|l| l
            .starts_with("switchyard_skips_total{reason=\"request_exhaustion\"}")
            && !l.ends_with(" 0")),
        "the second target was skipped as request_exhaustion:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_skipped_targets_group_has_its_next_retry_at() {
    // A 30 s quota cooldown (an operator rule) on `pc` and a terminal 401 on `pb`: a second
    // request skips both, under two reasons, one with a timer.
    let rule = "\n[[providers.error_rules]]\nstatus = 429\nmatch = \"quota gone\"\n\
                scope = \"connection\"\nreason = \"quota_exhausted\"\ncooldown_ms = 30000\n";
    let s = combo(&["pb/m", "pc/m"], "", rule).await;
    s.mock
        .script(FaultSpec {
            error_message: Some("Your account has been deactivated".into()),
            ..FaultSpec::status(401).for_key(KEY_B)
        })
        .unwrap();
    s.mock
        .script(FaultSpec {
            error_message: Some("quota gone for today".into()),
            ..FaultSpec::status(429).for_key(KEY_C)
        })
        .unwrap();
    let first = s.post("/v1/chat/completions", &chat("c", false)).await;
    assert!(first.status >= 400, "{first:#?}");
    let dispatched = s.mock.stats().by_key.values().sum::<u64>();
    let r = crate::support::eventually(crate::support::STATE_DEADLINE, || async {
        let r = s.post("/v1/chat/completions", &chat("c", false)).await;
        (r.json()["error"]["code"] == "ALL_TARGETS_SKIPPED").then_some(r)
    })
    .await;
    let Some(r) = r else {
        let last = s.post("/v1/chat/completions", &chat("c", false)).await;
        panic!("every target skipped: {last:#?}");
    };
    let v = r.json();
    let groups = v["error"]["skippedTargets"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "{v}");
    let timed: Vec<_> = groups
        .iter()
        .filter(|g| g["reason"] != "terminal")
        .collect();
    assert_eq!(timed.len(), 1, "{v}");
    assert!(timed[0]["nextRetryAt"].is_string(), "{v}");
    let terminal: Vec<_> = groups
        .iter()
        .filter(|g| g["reason"] == "terminal")
        .collect();
    assert_eq!(terminal.len(), 1, "{v}");
    assert!(terminal[0].get("nextRetryAt").is_none(), "{v}");
    assert_eq!(
        s.mock.stats().by_key.values().sum::<u64>(),
        dispatched,
        "nothing was dispatched"
    );
}

async fn pins_cleared(s: &Setup) -> u64 {
    let r = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    r.everything()
        .lines()
        .find(|l| l.starts_with("switchyard_combo_session_pins_cleared_total "))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
        .expect("the counter is exported")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_consecutive_combo_failures_clear_the_session_pin() {
    // Connections that never cool, so every request fails at the upstream at once.
    let config = prelude()
        + &provider("pb", "openai", "{URL}", &["m"], "", "")
        + &connection("cb", "pb", "UP_B", "disable_cooling = true")
        + &provider("pc", "openai", "{URL}", &["m"], "", "")
        + &connection("cc", "pc", "UP_C", "disable_cooling = true")
        + "\n[[combos]]\nname = \"c\"\nstrategy = \"cache-optimized\"\n\
           targets = [{ target = \"pb/m\" }, { target = \"pc/m\" }]\n\
           [combos.config]\nmax_retries = 0\n";
    let s = setup(config, &[("UP_B", KEY_B), ("UP_C", KEY_C)]).await;
    s.mock.script(FaultSpec::status(503)).unwrap();
    let ask = |session: Option<&'static str>| {
        let mut req = s
            .http
            .post(format!("{}/v1/chat/completions", s.node.client_url()))
            .json(&chat("c", false));
        if let Some(id) = session {
            req = req.header("x-session-id", id);
        }
        send(req)
    };
    // Without a session nothing is pinned, so nothing is cleared.
    for _ in 0..3 {
        assert_eq!(ask(None).await.status, 503);
    }
    assert_eq!(pins_cleared(&s).await, 0);
    for _ in 0..2 {
        assert_eq!(ask(Some("session-a")).await.status, 503);
    }
    assert_eq!(pins_cleared(&s).await, 0, "two failures keep the pin");
    assert_eq!(ask(Some("session-a")).await.status, 503);
    assert_eq!(pins_cleared(&s).await, 1, "the third clears it");
}
