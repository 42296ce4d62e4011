//! The `context-relay` combo strategy end to end, on the real node binary in front of one mock
//! upstream: a session served by connection `ca` moves to `cb` when `ca` fails, and then the
//! older part of its conversation goes to `cb` as a summary written by the summariser (`ps`).
//!
//! Every provider (`pa`, `pb`, the summariser `ps`) is the same mock, told apart by its
//! connection's key; what each received is read back from the mock's recorded request bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchyard_tests::cluster::metric;
use switchyard_tests::mock_upstream::FaultSpec;

use crate::support::http::*;
use crate::support::scenario::{Scenario, answers_on};

const MODEL: &str = "gpt-4o-mini";
const KEY_A: &str = "sk-relay-a-0000000001";
const KEY_B: &str = "sk-relay-b-0000000002";
const KEY_S: &str = "sk-relay-s-0000000003";
const SUMMARY: &str = "THE-SUMMARY-OF-M1-TO-M3";

/// The combo `relay`: `context-relay` over pa then pb, summarised by ps, with the default
/// `min_messages` (6) and `keep_last` (4); `relay-quick` is the same with a 300 ms
/// `summary_timeout_ms`.
async fn setup() -> Scenario {
    let mut b = Scenario::with_mock(4).await.no_cooldown_wait();
    for p in ["pa", "pb", "ps"] {
        b = b.provider(p, "openai", &[MODEL], "", "");
    }
    for (c, p, key) in [
        ("ca", "pa", KEY_A),
        ("cb", "pb", KEY_B),
        ("cs", "ps", KEY_S),
    ] {
        b = b.connection(c, p, key, "disable_cooling = true");
    }
    let targets = ["pa", "pb"].map(|p| format!("target = \"{p}/{MODEL}\""));
    for (name, timeout_ms) in [("relay", 5000), ("relay-quick", 300)] {
        b = b.combo(
            name,
            "context-relay",
            &targets,
            &format!(
                "[combos.config]\nmax_retries = 0\n\
                 [combos.context_relay]\nsummariser = \"ps/{MODEL}\"\n\
                 summary_timeout_ms = {timeout_ms}\n"
            ),
        );
    }
    b.start().await
}

/// Every request on `key` answers with `text`.
fn answers(key: &str, text: &str) -> FaultSpec {
    answers_on(key, MODEL, text)
}

/// A system message, then `turns` alternating user / assistant messages `m1`, `m2`, …
fn conversation(turns: usize) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": "You are terse."})];
    for i in 1..=turns {
        let role = if i % 2 == 1 { "user" } else { "assistant" };
        out.push(json!({"role": role, "content": format!("m{i}")}));
    }
    out
}

async fn ask(s: &Scenario, session: &str, messages: &[Value]) -> Reply {
    ask_combo(s, "relay", session, messages).await
}

async fn ask_combo(s: &Scenario, combo: &str, session: &str, messages: &[Value]) -> Reply {
    let body = json!({"model": combo, "stream": false, "messages": messages});
    send(
        s.http
            .post(format!("{}/v1/chat/completions", s.base))
            .header("x-session-id", session)
            .json(&body),
    )
    .await
}

/// The session's first request, served by `ca`: its home.
async fn settle_on_a(s: &Scenario, session: &str) {
    settle_on_a_of(s, "relay", session).await;
}

async fn settle_on_a_of(s: &Scenario, combo: &str, session: &str) {
    s.mock.clear_faults();
    s.mock.script(answers(KEY_A, "A-ANSWER")).unwrap();
    let r = ask_combo(s, combo, session, &conversation(1)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "ca");
    assert_eq!(r.header("x-switchyard-context-relay"), None);
    // From now on `ca` fails, `cb` answers.
    s.mock.clear_faults();
    s.mock
        .script_all([
            FaultSpec::status(500).for_key(KEY_A),
            answers(KEY_B, "B-ANSWER"),
        ])
        .unwrap();
}

/// The request bodies the mock received on `key`, oldest first, as JSON.
fn bodies(s: &Scenario, key: &str) -> Vec<Value> {
    s.bodies(key)
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect()
}

/// The messages of the last request `cb` received.
fn last_on_b(s: &Scenario) -> Vec<Value> {
    let bodies = bodies(s, KEY_B);
    let last = bodies.last().expect("cb was called");
    last["messages"].as_array().unwrap().clone()
}

async fn relays(s: &Scenario, outcome: &str) -> f64 {
    let prefix = format!("switchyard_context_relays_total{{outcome=\"{outcome}\"}}");
    metric(&s.metrics().await, &prefix).unwrap_or(0.0)
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_session_reaches_the_next_connection_with_a_summary_and_the_last_four() {
    let s = setup().await;
    settle_on_a(&s, "sess-move").await;
    s.mock.script(answers(KEY_S, SUMMARY)).unwrap();
    // 8 messages: the system message and m1..m7.
    let r = ask(&s, "sess-move", &conversation(7)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("summarised"));
    // The summariser's usage is booked with the answer, on the summariser's own connection:
    // 10 input tokens on `ca`'s first answer, 10 on `cb`'s and 10 on `cs`.
    let usage = s.admin("/api/usage?by=connection").await;
    assert_eq!(usage.status, 200, "{usage:#?}");
    let v = usage.json();
    assert_eq!(v["totals"]["inputTokens"], 30, "{}", usage.body);
    for c in ["ca", "cb", "cs"] {
        let row = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["group"] == c)
            .unwrap_or_else(|| panic!("no usage row for {c}: {}", usage.body));
        assert_eq!(row["inputTokens"], 10, "{c}: {}", usage.body);
    }

    let summarised = bodies(&s, KEY_S);
    assert_eq!(summarised.len(), 1, "{summarised:?}");
    let asked = summarised[0].to_string();
    for older in ["user: m1", "assistant: m2", "user: m3"] {
        assert!(asked.contains(older), "summariser lacks {older}: {asked}");
    }
    assert!(
        !asked.contains("m4"),
        "kept messages are not summarised: {asked}"
    );
    assert_eq!(summarised[0]["stream"], false);

    let m = last_on_b(&s);
    assert_eq!(m.len(), 6, "{m:#?}");
    assert_eq!(m[0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(m[1]["role"], "system");
    assert_eq!(
        content(&m[1]),
        format!("Summary of the earlier conversation: {SUMMARY}")
    );
    let kept: Vec<&str> = m[2..].iter().map(content).collect();
    assert_eq!(kept, ["m4", "m5", "m6", "m7"]);
    assert_eq!(relays(&s, "summarised").await, 1.0);
    assert_eq!(relays(&s, "failed").await, 0.0);

    // `cb` is the session's home now: the next request stays there, unchanged.
    let r = ask(&s, "sess-move", &conversation(9)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), None);
    assert_eq!(last_on_b(&s).len(), 10);
    assert_eq!(bodies(&s, KEY_S).len(), 1, "no second summary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_summariser_sends_the_whole_conversation() {
    let s = setup().await;
    settle_on_a(&s, "sess-fail").await;
    s.mock
        .script(FaultSpec::status(500).for_key(KEY_S))
        .unwrap();
    let r = ask(&s, "sess-fail", &conversation(7)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("failed"));
    assert_eq!(bodies(&s, KEY_S).len(), 1, "the summariser was asked");
    let m = last_on_b(&s);
    assert_eq!(m.len(), 8, "{m:#?}");
    assert_eq!(m, conversation(7));
    assert_eq!(relays(&s, "failed").await, 1.0);
    assert_eq!(relays(&s, "summarised").await, 0.0);

    // A summariser slower than `summary_timeout_ms` (300 ms): the same, without waiting for it.
    settle_on_a_of(&s, "relay-quick", "sess-slow").await;
    let mut slow = answers(KEY_S, SUMMARY);
    slow.latency_before_headers_ms = Some(4000);
    s.mock.script(slow).unwrap();
    let started = std::time::Instant::now();
    let r = ask_combo(&s, "relay-quick", "sess-slow", &conversation(7)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("failed"));
    assert!(
        started.elapsed() < std::time::Duration::from_millis(3000),
        "the summariser was waited for: {:?}",
        started.elapsed()
    );
    assert_eq!(last_on_b(&s), conversation(7));
    assert_eq!(relays(&s, "failed").await, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_conversation_moves_unchanged() {
    let s = setup().await;
    settle_on_a(&s, "sess-short").await;
    s.mock.script(answers(KEY_S, SUMMARY)).unwrap();
    // 5 turns: below min_messages (6); the system message does not count.
    let r = ask(&s, "sess-short", &conversation(5)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), None);
    assert_eq!(
        bodies(&s, KEY_S).len(),
        0,
        "no summary for a short conversation"
    );
    assert_eq!(last_on_b(&s), conversation(5));
    assert_eq!(relays(&s, "summarised").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_and_its_results_are_never_split() {
    let s = setup().await;
    settle_on_a(&s, "sess-tools").await;
    s.mock.script(answers(KEY_S, SUMMARY)).unwrap();
    let call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"id": "call_2", "type": "function",
         "function": {"name": "get_time", "arguments": "{}"}}
    ]});
    let messages = vec![
        json!({"role": "system", "content": "You are terse."}),
        json!({"role": "user", "content": "m1"}),
        json!({"role": "assistant", "content": "m2"}),
        json!({"role": "user", "content": "m3 weather and time in Oslo?"}),
        call.clone(),
        json!({"role": "tool", "tool_call_id": "call_1", "content": "rain"}),
        json!({"role": "tool", "tool_call_id": "call_2", "content": "noon"}),
        json!({"role": "assistant", "content": "Rain at noon."}),
        json!({"role": "user", "content": "thanks"}),
    ];
    let r = ask(&s, "sess-tools", &messages).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("summarised"));
    let m = last_on_b(&s);
    // The last 4 would open with the second tool result: the call and both results stay.
    assert_eq!(m.len(), 7, "{m:#?}");
    assert_eq!(m[0], messages[0]);
    assert!(content(&m[1]).starts_with("Summary of the earlier conversation: "));
    assert_eq!(m[2], call);
    assert_eq!(&m[3..], &messages[5..]);
    let asked = bodies(&s, KEY_S)[0].to_string();
    assert!(asked.contains("m3 weather"), "{asked}");
    assert!(
        !asked.contains("get_weather"),
        "the call is kept, not summarised: {asked}"
    );
}
