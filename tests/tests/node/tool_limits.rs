//! Dynamic tool-limit detection on the real node: a 400 that says the request declares too
//! many tools moves a combo on and records the provider's limit for the model; a later request
//! above the limit skips that target (`tool_limit`) without sending it, one within it does not.
//!
//! A learned limit ages out after the provider's `tool_limit_ttl_ms`, and a success with more
//! tools than the limit drops it: one client's odd 400 does not lock every client out.
//!
//! The error text is OpenAI's ("Invalid 'tools': array too long. Expected an array with
//! maximum length 128, but got an array with length 129 instead."), with the limit shrunk to 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::error_semantics::{Setup, prelude, setup};
use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const KEY_A: &str = "sk-tool-limits-a-0001";
const KEY_B: &str = "sk-tool-limits-b-0002";

fn with_tools(n: usize) -> Value {
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "parameters": {"type": "object", "properties": {}}
            }})
        })
        .collect();
    let mut body = chat("c", false);
    body["tools"] = Value::Array(tools);
    body
}

fn hits(s: &Setup, key: &str) -> u64 {
    s.mock.stats().by_key.get(key).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_too_many_tools_400_teaches_the_limit_and_later_requests_skip_the_target() {
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m"], "", "")
        + &connection("ca", "pa", "UP_A", "")
        + &provider("pb", "openai", "{URL}", &["m"], "", "")
        + &connection("cb", "pb", "UP_B", "")
        + "\n[[combos]]\nname = \"c\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"pa/m\" }, { target = \"pb/m\" }]\n\
           [combos.config]\nmax_retries = 0\n";
    let s = setup(config, &[("UP_A", KEY_A), ("UP_B", KEY_B)]).await;
    s.mock
        .script(FaultSpec {
            error_message: Some(
                "Invalid 'tools': array too long. Expected an array with maximum length 2, \
                 but got an array with length 3 instead."
                    .into(),
            ),
            ..FaultSpec::status(400).for_key(KEY_A).times(1)
        })
        .unwrap();

    // The 400 moves the combo on.
    let r = s.post("/v1/chat/completions", &with_tools(3)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(hits(&s, KEY_A), 1);

    // The limit is on the admin view.
    let v = s.admin("/api/resilience/tool-limits").await;
    let item = &v["items"][0];
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        (&item["provider"], &item["model"], &item["limit"]),
        (&json!("pa"), &json!("m"), &json!(2)),
        "{v}"
    );
    // The default TTL (6 h) counts down from the 400.
    let left = item["expires_in_ms"].as_u64().unwrap();
    assert!(
        left > 6 * 3_600_000 - 60_000 && left <= 6 * 3_600_000,
        "{v}"
    );
    assert!(
        item["expires_at_unix_ms"].as_u64().unwrap() > 1_700_000_000_000,
        "{v}"
    );

    // Above the limit: `pa` is skipped, never sent.
    let r = s.post("/v1/chat/completions", &with_tools(3)).await;
    assert_eq!(r.connection(), "cb", "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 1, "the target above its limit was skipped");
    // Within it: `pa` serves again.
    let r = s.post("/v1/chat/completions", &with_tools(2)).await;
    assert_eq!(r.connection(), "ca", "{r:#?}");

    let m = send(s.http.get(format!("{}/metrics", s.node.admin_url()))).await;
    assert!(
        m.everything()
            .lines()
            .any(|l| l.starts_with("switchyard_skips_total{reason=\"tool_limit\"} 1")),
        "{}",
        m.everything()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_request_above_a_learned_limit_is_answered_without_the_provider() {
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m"], "", "")
        + &connection("ca", "pa", "UP_A", "");
    let s = setup(config, &[("UP_A", KEY_A)]).await;
    s.mock
        .script(FaultSpec {
            error_message: Some("too many tools in request".into()),
            ..FaultSpec::status(400).for_key(KEY_A).times(1)
        })
        .unwrap();
    let mut body = with_tools(5);
    body["model"] = "pa/m".into();
    // The upstream's own 400 first, with the limit learned (one less than the 5 sent).
    let r = s.post("/v1/chat/completions", &body).await;
    assert_eq!(r.status, 400, "{r:#?}");
    let v = s.admin("/api/resilience/tool-limits").await;
    assert_eq!(v["items"][0]["limit"], 4, "{v}");
    // Then Switchyard's own answer, the provider untouched.
    let r = s.post("/v1/chat/completions", &body).await;
    let v = r.assert_error(400, "invalid_request_error", "tool_limit_exceeded");
    assert_eq!(v["error"]["limit"], 4, "{v}");
    assert_eq!(hits(&s, KEY_A), 1);
}

const TOO_MANY: &str = "Invalid 'tools': array too long. Expected an array with maximum length 2, \
                        but got an array with length 3 instead.";

/// A direct-model setup on one provider `pa` (one connection, key A) with `extra` provider keys.
async fn direct(extra: &str) -> Setup {
    let config = prelude()
        + &provider("pa", "openai", "{URL}", &["m"], extra, "")
        + &connection("ca", "pa", "UP_A", "");
    setup(config, &[("UP_A", KEY_A)]).await
}

fn direct_body(tools: usize) -> Value {
    let mut body = with_tools(tools);
    body["model"] = "pa/m".into();
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_tool_limit_ages_out_after_its_ttl() {
    let s = direct("tool_limit_ttl_ms = 1500").await;
    s.mock
        .script(FaultSpec {
            error_message: Some(TOO_MANY.into()),
            ..FaultSpec::status(400).for_key(KEY_A).times(1)
        })
        .unwrap();
    let r = s.post("/v1/chat/completions", &direct_body(3)).await;
    assert_eq!(r.status, 400, "{r:#?}");
    let v = s.admin("/api/resilience/tool-limits").await;
    assert_eq!(v["items"][0]["limit"], 2, "{v}");
    let left = v["items"][0]["expires_in_ms"].as_u64().unwrap();
    assert!(left > 0 && left <= 1_500, "{v}");

    // While it holds: answered by Switchyard, the provider untouched.
    let r = s.post("/v1/chat/completions", &direct_body(3)).await;
    r.assert_error(400, "invalid_request_error", "tool_limit_exceeded");
    assert_eq!(hits(&s, KEY_A), 1);

    // Past the TTL the limit is gone and the same request reaches the provider again.
    let gone = eventually(STATE_DEADLINE, || async {
        let v = s.admin("/api/resilience/tool-limits").await;
        (v["items"] == json!([])).then_some(v)
    })
    .await;
    assert!(gone.is_some(), "the learned limit outlived its 1.5 s TTL");
    let r = s.post("/v1/chat/completions", &direct_body(3)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_above_the_learned_limit_drops_it() {
    let s = direct("").await;
    // The first request (5 tools) is slow and succeeds; the second (3 tools) overtakes it
    // and teaches a limit of 2 (FIFO among matching faults).
    s.mock
        .script(FaultSpec {
            latency_before_headers_ms: Some(1_500),
            ..FaultSpec::default().for_key(KEY_A).times(1)
        })
        .unwrap();
    s.mock
        .script(FaultSpec {
            error_message: Some(TOO_MANY.into()),
            ..FaultSpec::status(400).for_key(KEY_A).times(1)
        })
        .unwrap();
    let slow = {
        let (http, url, body) = (s.http.clone(), s.node.client_url(), direct_body(5));
        tokio::spawn(async move { post(&http, &url, "/v1/chat/completions", &body).await })
    };
    // The slow request is at the provider before the second one is sent.
    let in_flight = eventually(STATE_DEADLINE, || async {
        (s.mock.stats().in_flight_by_key.get(KEY_A).copied() == Some(1)).then_some(())
    })
    .await;
    assert!(
        in_flight.is_some(),
        "the slow request never reached the mock"
    );
    let r = s.post("/v1/chat/completions", &direct_body(3)).await;
    assert_eq!(r.status, 400, "{r:#?}");
    let v = s.admin("/api/resilience/tool-limits").await;
    assert_eq!(v["items"][0]["limit"], 2, "{v}");

    // The slow request with 5 tools succeeds: the limit of 2 was wrong and is dropped.
    let r = slow.await.unwrap();
    assert_eq!(r.status, 200, "{r:#?}");
    let v = s.admin("/api/resilience/tool-limits").await;
    assert_eq!(v["items"], json!([]), "{v}");
    let r = s.post("/v1/chat/completions", &direct_body(4)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(hits(&s, KEY_A), 3);
}
