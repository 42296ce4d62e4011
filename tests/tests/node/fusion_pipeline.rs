//! The multi-call combo strategies end to end: `fusion` (a parallel panel, then a judge) and
//! `pipeline` (steps that refine the previous step's answer), on the real node binary in front
//! of one mock upstream.
//!
//! Every provider (`pa`, `pb`, `pc`, the judges `pj` and `pk`) is the same mock, told apart by
//! its connection's key; each key is scripted to answer with its own text, so what a judge or a
//! later step received is read back from the mock's recorded request bodies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_tests::mock_upstream::FaultSpec;

use crate::support::http::*;
use crate::support::scenario::{Scenario, answers_on};

const MODEL: &str = "gpt-4o-mini";
const KEY_A: &str = "sk-fusion-a-0000000001";
const KEY_B: &str = "sk-fusion-b-0000000002";
const KEY_C: &str = "sk-fusion-c-0000000003";
const KEY_J: &str = "sk-fusion-j-0000000004";
const KEY_K: &str = "sk-fusion-k-0000000005";

/// The combos: `fuse` (fusion over pa, pb, pc, judged by pj, straggler grace 1 s),
/// `fuse-stream` (the same panel judged by pk, which is never scripted and so streams the
/// mock's own answer), `pipe` (pa then pb) and `pipe-skip` (pa, pc, pb skipping failed
/// steps).
async fn setup() -> Scenario {
    let mut b = Scenario::with_mock(4).await.no_cooldown_wait();
    for p in ["pa", "pb", "pc", "pj", "pk"] {
        b = b.provider(p, "openai", &[MODEL], "", "");
    }
    for (c, p, key) in [
        ("ca", "pa", KEY_A),
        ("cb", "pb", KEY_B),
        ("cc", "pc", KEY_C),
        ("cj", "pj", KEY_J),
        ("ck", "pk", KEY_K),
    ] {
        b = b.connection(c, p, key, "disable_cooling = true");
    }
    let on = |providers: &[&str]| -> Vec<String> {
        providers
            .iter()
            .map(|p| format!("target = \"{p}/{MODEL}\""))
            .collect()
    };
    let no_retries = "[combos.config]\nmax_retries = 0\n";
    for (name, judge) in [("fuse", "pj"), ("fuse-stream", "pk")] {
        b = b.combo(
            name,
            "fusion",
            &on(&["pa", "pb", "pc"]),
            &format!(
                "{no_retries}[combos.fusion]\nstraggler_grace_ms = 1000\ntimeout_ms = 20000\n\
                 judge = \"{judge}/{MODEL}\"\n"
            ),
        );
    }
    b.combo("pipe", "pipeline", &on(&["pa", "pb"]), no_retries)
        .combo(
            "pipe-skip",
            "pipeline",
            &on(&["pa", "pc", "pb"]),
            &format!(
                "{no_retries}[combos.pipeline]\non_step_failure = \"skip\"\n\
                 step_prompt = \"Improve it.\"\n"
            ),
        )
        .start()
        .await
}

/// Every request on `key` answers with `text`, after `delay_ms`.
fn answers(key: &str, text: &str, delay_ms: u64) -> FaultSpec {
    let mut f = answers_on(key, MODEL, text);
    if delay_ms > 0 {
        f.latency_before_headers_ms = Some(delay_ms);
    }
    f
}

/// The three panel members answer at once, and the judge `pj` as `judge` says.
fn panel_then(judge: FaultSpec) -> [FaultSpec; 4] {
    [
        answers(KEY_A, "ANSWER-ALPHA", 0),
        answers(KEY_B, "ANSWER-BRAVO", 0),
        answers(KEY_C, "ANSWER-CHARLIE", 0),
        judge,
    ]
}

/// Every request on `key` fails with a 500.
fn fails(key: &str) -> FaultSpec {
    FaultSpec::status(500).for_key(key)
}

fn content(v: &Value) -> &str {
    v["choices"][0]["message"]["content"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fusion_judge_gets_every_panel_answer_and_answers_the_client() {
    let s = setup().await;
    s.mock
        .script_all(panel_then(answers(KEY_J, "THE-JUDGE-SYNTHESIS", 0)))
        .unwrap();
    let r = s.call("fuse").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "THE-JUDGE-SYNTHESIS");
    assert_eq!(r.header("x-switchyard-fusion-panel"), Some("3"));
    assert_eq!(r.connection(), "cj");
    let judged = s.bodies(KEY_J);
    assert_eq!(judged.len(), 1, "{judged:?}");
    for text in [
        "ANSWER-ALPHA",
        "ANSWER-BRAVO",
        "ANSWER-CHARLIE",
        "Say hello",
    ] {
        assert!(
            judged[0].contains(text),
            "judge request lacks {text}: {}",
            judged[0]
        );
    }
    let judge: Value = serde_json::from_str(&judged[0]).unwrap();
    assert_eq!(judge["stream"], false);
    let panel = s.bodies(KEY_A);
    assert_eq!(panel.len(), 1);
    assert!(!panel[0].contains("ANSWER-"), "{}", panel[0]);

    // A client stream: the panel is not streamed, the judge's answer is.
    let before = s.hits(KEY_A);
    let r = s.call_stream("fuse-stream", Duration::from_secs(20)).await;
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.header("x-switchyard-fusion-panel"), Some("3"));
    assert_eq!(chat_text(&r.events()), mock_text(4));
    assert_eq!(s.hits(KEY_A), before + 1);
    let judged = s.bodies(KEY_K);
    assert_eq!(judged.len(), 1);
    assert!(judged[0].contains("ANSWER-CHARLIE"), "{}", judged[0]);
    assert!(judged[0].contains("\"stream\":true"), "{}", judged[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fusion_leaves_a_straggler_out_after_the_grace() {
    let s = setup().await;
    s.mock
        .script_all([
            answers(KEY_A, "ANSWER-ALPHA", 0),
            answers(KEY_B, "ANSWER-BRAVO", 0),
            answers(KEY_C, "ANSWER-SLOW", 6000),
            answers(KEY_J, "THE-JUDGE-SYNTHESIS", 0),
        ])
        .unwrap();
    let started = Instant::now();
    let r = s.call("fuse").await;
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "THE-JUDGE-SYNTHESIS");
    assert_eq!(r.header("x-switchyard-fusion-panel"), Some("2"));
    assert!(took < Duration::from_millis(4500), "took {took:?}");
    assert!(
        took >= Duration::from_millis(900),
        "the grace was not waited: {took:?}"
    );
    let judged = s.bodies(KEY_J);
    assert_eq!(judged.len(), 1);
    assert!(judged[0].contains("ANSWER-ALPHA") && judged[0].contains("ANSWER-BRAVO"));
    assert!(!judged[0].contains("ANSWER-SLOW"), "{}", judged[0]);
    assert_eq!(s.hits(KEY_C), 1, "the straggler was called");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fusion_below_min_panel_falls_back_then_fails_definitely() {
    let s = setup().await;
    s.mock
        .script_all([
            answers(KEY_A, "ANSWER-ALPHA", 0),
            fails(KEY_B),
            fails(KEY_C),
            answers(KEY_J, "THE-JUDGE-SYNTHESIS", 0),
        ])
        .unwrap();
    let r = s.call("fuse").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "ANSWER-ALPHA");
    assert_eq!(
        r.header("x-switchyard-fusion-fallback"),
        Some("single-answer")
    );
    assert_eq!(r.connection(), "ca");
    assert_eq!(s.hits(KEY_J), 0, "no judge for a single answer");

    // Now nobody answers: a definite error with type and code, naming the members.
    s.mock.clear_faults();
    s.mock
        .script_all([fails(KEY_A), fails(KEY_B), fails(KEY_C)])
        .unwrap();
    let r = s.call("fuse").await;
    let v = r.assert_error(502, "server_error", "fusion_panel_failed");
    assert_eq!(r.header("x-switchyard-fusion-panel"), Some("0"));
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("pa/{MODEL}")), "{message}");
    assert_eq!(s.hits(KEY_J), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_step_two_refines_step_one() {
    let s = setup().await;
    s.mock
        .script_all([
            answers(KEY_A, "STEP-ONE-DRAFT", 0),
            answers(KEY_B, "STEP-TWO-FINAL", 0),
        ])
        .unwrap();
    let r = s.call("pipe").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "STEP-TWO-FINAL");
    assert_eq!(r.header("x-switchyard-pipeline-steps"), Some("2"));
    assert_eq!(r.connection(), "cb");
    let first = s.bodies(KEY_A);
    assert_eq!(first.len(), 1);
    assert!(
        !first[0].contains("Refine the answer above."),
        "{}",
        first[0]
    );
    let second = s.bodies(KEY_B);
    assert_eq!(second.len(), 1);
    let v: Value = serde_json::from_str(&second[0]).unwrap();
    let messages = v["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{v}");
    assert_eq!(messages[0]["content"], "Say hello");
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": "STEP-ONE-DRAFT"})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": "Refine the answer above."})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pipeline_step_fails_the_combo_or_is_skipped() {
    let s = setup().await;
    s.mock
        .script_all([
            answers(KEY_A, "STEP-ONE-DRAFT", 0),
            fails(KEY_B),
            fails(KEY_C),
        ])
        .unwrap();
    let r = s.call("pipe").await;
    let v = r.assert_error(502, "server_error", "pipeline_step_failed");
    assert_eq!(v["error"]["step"], 2, "{v}");
    assert_eq!(v["error"]["step_target"], format!("pb/{MODEL}"), "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("Step 2 of 2"), "{message}");

    // `skip`: the failed middle step (pc) and the failed last step (pb) are left out; the
    // client gets step 1's answer.
    let r = s.call("pipe-skip").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "STEP-ONE-DRAFT");
    assert_eq!(r.header("x-switchyard-pipeline-steps"), Some("1"));
    assert_eq!(r.header("x-switchyard-pipeline-skipped"), Some("2,3"));
    // The last step still got step 1's answer with the configured prompt.
    let last = s.bodies(KEY_B);
    let refined = last.last().unwrap();
    assert!(
        refined.contains("STEP-ONE-DRAFT") && refined.contains("Improve it."),
        "{refined}"
    );
}

/// `GET /api/usage?by=connection` as `connection → (requests, input, output)`.
async fn usage_by_connection(s: &Scenario) -> std::collections::HashMap<String, (u64, u64, u64)> {
    let r = s.admin("/api/usage?by=connection").await;
    assert_eq!(r.status, 200, "{r:#?}");
    let v = r.json();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let n = |k: &str| row[k].as_u64().unwrap_or(0);
            (
                row["group"].as_str().unwrap().to_owned(),
                (n("requests"), n("inputTokens"), n("outputTokens")),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_judge_answers_with_the_first_panel_answer() {
    let s = setup().await;
    s.mock.script_all(panel_then(fails(KEY_J))).unwrap();
    let r = s.call("fuse").await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(content(&r.json()), "ANSWER-ALPHA");
    assert_eq!(r.connection(), "ca");
    assert_eq!(r.header("x-switchyard-fusion-panel"), Some("3"));
    assert_eq!(
        r.header("x-switchyard-fusion-fallback"),
        Some("judge-failed")
    );
    assert!(
        r.header("x-switchyard-fusion-judge-error").is_some(),
        "{r:#?}"
    );
    assert!(s.hits(KEY_J) >= 1, "the judge was not called");
    // Each member is booked once on its own connection; the failed judge served nothing.
    let usage = usage_by_connection(&s).await;
    for c in ["ca", "cb", "cc"] {
        assert_eq!(usage.get(c), Some(&(1, 10, 5)), "{c}: {usage:?}");
    }
    assert_eq!(usage.get("cj").map_or(0, |u| u.1), 0, "{usage:?}");

    // With no panel answer to fall back on, the judge's failure is still never reached: the
    // panel fails first, with a definite error.
    s.mock.clear_faults();
    s.mock
        .script_all([fails(KEY_A), fails(KEY_B), fails(KEY_C), fails(KEY_J)])
        .unwrap();
    let r = s.call("fuse").await;
    r.assert_error(502, "server_error", "fusion_panel_failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_a_multi_call_combo_is_booked_on_its_own_connection() {
    let s = setup().await;
    s.mock
        .script_all(panel_then(answers(KEY_J, "THE-JUDGE-SYNTHESIS", 0)))
        .unwrap();
    let r = s.call("fuse").await;
    assert_eq!(r.status, 200, "{r:#?}");
    let usage = usage_by_connection(&s).await;
    for c in ["ca", "cb", "cc", "cj"] {
        assert_eq!(usage.get(c), Some(&(1, 10, 5)), "{c}: {usage:?}");
    }

    // A streamed judge: the panel's usage is booked when the stream ends, on the members'
    // connections; the judge's stream books its own on ck.
    let r = s.call_stream("fuse-stream", Duration::from_secs(20)).await;
    assert_eq!(r.status, 200, "{}", r.everything());
    // Booked when the stream's finalisation runs, which may follow the last byte.
    let usage = crate::support::eventually(Duration::from_secs(5), || async {
        let usage = usage_by_connection(&s).await;
        let done = usage.get("ck").is_some_and(|u| u.0 == 1);
        done.then_some(usage)
    })
    .await
    .expect("the streamed judge's usage was never booked");
    for c in ["ca", "cb", "cc"] {
        assert_eq!(usage.get(c), Some(&(2, 20, 10)), "{c}: {usage:?}");
    }
    assert_eq!(usage.get("ck").map(|u| u.0), Some(1), "{usage:?}");

    // A pipeline: step 1 on ca, step 2 answers on cb; each books its own.
    s.mock.clear_faults();
    s.mock
        .script_all([
            answers(KEY_A, "STEP-ONE-DRAFT", 0),
            answers(KEY_B, "STEP-TWO-FINAL", 0),
        ])
        .unwrap();
    let r = s.call("pipe").await;
    assert_eq!(r.status, 200, "{r:#?}");
    let usage = usage_by_connection(&s).await;
    assert_eq!(usage.get("ca"), Some(&(3, 30, 15)), "{usage:?}");
    assert_eq!(usage.get("cb"), Some(&(3, 30, 15)), "{usage:?}");
}
