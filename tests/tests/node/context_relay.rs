//! The `context-relay` combo strategy end to end, on the real node binary in front of one mock
//! upstream: a session served by connection `ca` moves to `cb` when `ca` fails, and then the
//! older part of its conversation goes to `cb` as a summary written by the summariser (`ps`).
//!
//! Every provider (`pa`, `pb`, the summariser `ps`) is the same mock, told apart by its
//! connection's key; what each received is read back from the mock's recorded request bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchyard_tests::cluster::metric;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use crate::support::http::*;

const MODEL: &str = "gpt-4o-mini";
const KEY_A: &str = "sk-relay-a-0000000001";
const KEY_B: &str = "sk-relay-b-0000000002";
const KEY_S: &str = "sk-relay-s-0000000003";
const SUMMARY: &str = "THE-SUMMARY-OF-M1-TO-M3";

struct Setup {
    mock: MockHandle,
    node: NodeProcess,
    http: reqwest::Client,
    base: String,
}

/// The combo `relay`: `context-relay` over pa then pb, summarised by ps, with the default
/// `min_messages` (6) and `keep_last` (4); `relay-quick` is the same with a 300 ms
/// `summary_timeout_ms`.
async fn setup() -> Setup {
    let mock = mock(4).await;
    let url = mock.base_url();
    let mut config = format!(
        "{}\n[resilience.wait_for_cooldown]\nenabled = false\n",
        open_auth_no_queue()
    );
    for p in ["pa", "pb", "ps"] {
        config.push_str(&provider(p, "openai", &url, &[MODEL], "", ""));
    }
    for (c, p, env_name) in [
        ("ca", "pa", "RELAY_KEY_A"),
        ("cb", "pb", "RELAY_KEY_B"),
        ("cs", "ps", "RELAY_KEY_S"),
    ] {
        config.push_str(&connection(c, p, env_name, "disable_cooling = true"));
    }
    for (name, timeout_ms) in [("relay", 5000), ("relay-quick", 300)] {
        config.push_str(&format!(
            "\n[[combos]]\nname = \"{name}\"\nstrategy = \"context-relay\"\n\
             targets = [{{ target = \"pa/{MODEL}\" }}, {{ target = \"pb/{MODEL}\" }}]\n\
             [combos.config]\nmax_retries = 0\n\
             [combos.context_relay]\nsummariser = \"ps/{MODEL}\"\n\
             summary_timeout_ms = {timeout_ms}\n"
        ));
    }
    let node = start_node(
        config,
        env(&[
            ("RELAY_KEY_A", KEY_A),
            ("RELAY_KEY_B", KEY_B),
            ("RELAY_KEY_S", KEY_S),
        ]),
    )
    .await;
    let base = node.client_url();
    Setup {
        mock,
        node,
        http: http(),
        base,
    }
}

/// A non-streamed Chat Completions answer with `text`, in the shape of OpenAI's chat
/// completion object (https://platform.openai.com/docs/api-reference/chat/object).
fn answer(text: &str) -> Vec<u8> {
    json!({
        "id": "chatcmpl-relay-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
    .into_bytes()
}

/// Every request on `key` answers with `text`.
fn answers(key: &str, text: &str) -> FaultSpec {
    FaultSpec::raw(200, "application/json", answer(text)).for_key(key)
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

impl Setup {
    async fn ask(&self, session: &str, messages: &[Value]) -> Reply {
        self.ask_combo("relay", session, messages).await
    }

    async fn ask_combo(&self, combo: &str, session: &str, messages: &[Value]) -> Reply {
        let body = json!({"model": combo, "stream": false, "messages": messages});
        send(
            self.http
                .post(format!("{}/v1/chat/completions", self.base))
                .header("x-session-id", session)
                .json(&body),
        )
        .await
    }

    /// The session's first request, served by `ca`: its home.
    async fn settle_on_a(&self, session: &str) {
        self.settle_on_a_of("relay", session).await;
    }

    async fn settle_on_a_of(&self, combo: &str, session: &str) {
        self.mock.clear_faults();
        self.mock.script(answers(KEY_A, "A-ANSWER")).unwrap();
        let r = self.ask_combo(combo, session, &conversation(1)).await;
        assert_eq!(r.status, 200, "{r:#?}");
        assert_eq!(r.connection(), "ca");
        assert_eq!(r.header("x-switchyard-context-relay"), None);
        // From now on `ca` fails, `cb` answers.
        self.mock.clear_faults();
        self.mock
            .script_all([
                FaultSpec::status(500).for_key(KEY_A),
                answers(KEY_B, "B-ANSWER"),
            ])
            .unwrap();
    }

    /// The request bodies the mock received on `key`, oldest first, as JSON.
    fn bodies(&self, key: &str) -> Vec<Value> {
        self.mock
            .stats()
            .recent_bodies
            .into_iter()
            .filter(|b| b.api_key == key)
            .map(|b| serde_json::from_str(&b.body).unwrap())
            .collect()
    }

    /// The messages of the last request `cb` received.
    fn last_on_b(&self) -> Vec<Value> {
        let bodies = self.bodies(KEY_B);
        let last = bodies.last().expect("cb was called");
        last["messages"].as_array().unwrap().clone()
    }

    async fn relays(&self, outcome: &str) -> f64 {
        let r = send(self.http.get(format!("{}/metrics", self.node.admin_url()))).await;
        let prefix = format!("switchyard_context_relays_total{{outcome=\"{outcome}\"}}");
        metric(&r.everything(), &prefix).unwrap_or(0.0)
    }
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_session_reaches_the_next_connection_with_a_summary_and_the_last_four() {
    let s = setup().await;
    s.settle_on_a("sess-move").await;
    s.mock.script(answers(KEY_S, SUMMARY)).unwrap();
    // 8 messages: the system message and m1..m7.
    let r = s.ask("sess-move", &conversation(7)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("summarised"));
    // The summariser's usage is booked with the answer, on the summariser's own connection:
    // 10 input tokens on `ca`'s first answer, 10 on `cb`'s and 10 on `cs`.
    let usage = send(
        s.http
            .get(format!("{}/api/usage?by=connection", s.node.admin_url()))
            .bearer_auth(MGMT_KEY),
    )
    .await;
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

    let summarised = s.bodies(KEY_S);
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

    let m = s.last_on_b();
    assert_eq!(m.len(), 6, "{m:#?}");
    assert_eq!(m[0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(m[1]["role"], "system");
    assert_eq!(
        content(&m[1]),
        format!("Summary of the earlier conversation: {SUMMARY}")
    );
    let kept: Vec<&str> = m[2..].iter().map(content).collect();
    assert_eq!(kept, ["m4", "m5", "m6", "m7"]);
    assert_eq!(s.relays("summarised").await, 1.0);
    assert_eq!(s.relays("failed").await, 0.0);

    // `cb` is the session's home now: the next request stays there, unchanged.
    let r = s.ask("sess-move", &conversation(9)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), None);
    assert_eq!(s.last_on_b().len(), 10);
    assert_eq!(s.bodies(KEY_S).len(), 1, "no second summary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_summariser_sends_the_whole_conversation() {
    let s = setup().await;
    s.settle_on_a("sess-fail").await;
    s.mock
        .script(FaultSpec::status(500).for_key(KEY_S))
        .unwrap();
    let r = s.ask("sess-fail", &conversation(7)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("failed"));
    assert_eq!(s.bodies(KEY_S).len(), 1, "the summariser was asked");
    let m = s.last_on_b();
    assert_eq!(m.len(), 8, "{m:#?}");
    assert_eq!(m, conversation(7));
    assert_eq!(s.relays("failed").await, 1.0);
    assert_eq!(s.relays("summarised").await, 0.0);

    // A summariser slower than `summary_timeout_ms` (300 ms): the same, without waiting for it.
    s.settle_on_a_of("relay-quick", "sess-slow").await;
    let mut slow = answers(KEY_S, SUMMARY);
    slow.latency_before_headers_ms = Some(4000);
    s.mock.script(slow).unwrap();
    let started = std::time::Instant::now();
    let r = s
        .ask_combo("relay-quick", "sess-slow", &conversation(7))
        .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("failed"));
    assert!(
        started.elapsed() < std::time::Duration::from_millis(3000),
        "the summariser was waited for: {:?}",
        started.elapsed()
    );
    assert_eq!(s.last_on_b(), conversation(7));
    assert_eq!(s.relays("failed").await, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_conversation_moves_unchanged() {
    let s = setup().await;
    s.settle_on_a("sess-short").await;
    s.mock.script(answers(KEY_S, SUMMARY)).unwrap();
    // 5 turns: below min_messages (6); the system message does not count.
    let r = s.ask("sess-short", &conversation(5)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "cb");
    assert_eq!(r.header("x-switchyard-context-relay"), None);
    assert_eq!(
        s.bodies(KEY_S).len(),
        0,
        "no summary for a short conversation"
    );
    assert_eq!(s.last_on_b(), conversation(5));
    assert_eq!(s.relays("summarised").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_and_its_results_are_never_split() {
    let s = setup().await;
    s.settle_on_a("sess-tools").await;
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
    let r = s.ask("sess-tools", &messages).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.header("x-switchyard-context-relay"), Some("summarised"));
    let m = s.last_on_b();
    // The last 4 would open with the second tool result: the call and both results stay.
    assert_eq!(m.len(), 7, "{m:#?}");
    assert_eq!(m[0], messages[0]);
    assert!(content(&m[1]).starts_with("Summary of the earlier conversation: "));
    assert_eq!(m[2], call);
    assert_eq!(&m[3..], &messages[5..]);
    let asked = s.bodies(KEY_S)[0].to_string();
    assert!(asked.contains("m3 weather"), "{asked}");
    assert!(
        !asked.contains("get_weather"),
        "the call is kept, not summarised: {asked}"
    );
}
