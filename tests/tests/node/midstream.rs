//! Mid-stream continuation (`[resilience.stream_recovery] midstream_continuation`), end to
//! end: the real `switchyard-node` binary in front of an in-process mock upstream.
//!
//! What is proven here:
//! - a plain-text stream truncated after the commit point is continued on the next
//!   connection with the text so far as the assistant's prefix; the client sees one stream
//!   (one `id`, one `[DONE]`), the access line records the seam and its connections, and
//!   permits are released once per segment;
//! - a tool call in flight is never continued: the client gets today's truncation;
//! - with continuation off (the default) the truncation reaches the client as today;
//! - a continuation that cannot start ends the stream with one definite error event;
//! - `max_continuations` bounds the seams of one stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::json;
use switchyard_tests::mock_upstream::{FaultSpec, ToolCallSpec};

use crate::support::http::*;
use crate::support::scenario::Scenario;

const KEY1: &str = "sk-midstream-key-one-0001";
const KEY2: &str = "sk-midstream-key-two-0002";
const KEY3: &str = "sk-midstream-key-three-003";
const MODEL: &str = "p/gpt-4o-mini";
const CHUNKS: u32 = 6;
const LIMIT: Duration = Duration::from_secs(10);

/// One mock, provider `p` (openai) with connections `p-k1`, `p-k2`, `p-k3` tried in that
/// order (each with a concurrency cap, so its permits show on `/metrics`); `recovery` is the
/// body of `[resilience.stream_recovery]` (empty = no table). The wait for cooldowns is off,
/// so a continuation that finds no connection fails at once.
async fn setup(recovery: &str) -> Scenario {
    let table = if recovery.is_empty() {
        String::new()
    } else {
        format!("\n[resilience.stream_recovery]\n{recovery}\n")
    };
    let mut b = Scenario::with_mock(CHUNKS).await.provider(
        "p",
        "openai",
        &["gpt-4o-mini"],
        "",
        "first_content_ms = 5000\nidle_ms = 5000",
    );
    for (i, key) in [KEY1, KEY2, KEY3].into_iter().enumerate() {
        let priority = i + 1;
        b = b.connection(
            &format!("p-k{priority}"),
            "p",
            key,
            &format!("priority = {priority}\nmax_concurrent = 2"),
        );
    }
    b.no_cooldown_wait().config(&table).start().await
}

/// A chat stream that asks for usage in its last chunk.
async fn stream(s: &Scenario) -> StreamReply {
    let mut body = chat(MODEL, true);
    body["stream_options"] = json!({"include_usage": true});
    s.stream_to("/v1/chat/completions", &body, LIMIT).await
}

fn truncated_after(n: u32, key: &str) -> FaultSpec {
    FaultSpec {
        eof_after_chunks: Some(n),
        ..FaultSpec::new().for_key(key).times(1)
    }
}

fn recoveries(metrics: &str, outcome: &str) -> u64 {
    let prefix = format!(
        "switchyard_stream_recoveries_total{{kind=\"continuation\",outcome=\"{outcome}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn data_events(r: &StreamReply) -> Vec<SseEvent> {
    r.events()
        .into_iter()
        .filter(|e| e.data.is_some())
        .collect()
}

/// The chunk ids of a stream (every JSON chunk that has one).
fn ids(r: &StreamReply) -> Vec<String> {
    data_events(r)
        .iter()
        .filter_map(SseEvent::json)
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect()
}

/// What the client sees of a stream cut after `n` chunks with no continuation: those chunks,
/// no `[DONE]`, no error event (an EOF after the commit ends the body as it is).
fn assert_truncated(r: &StreamReply, text: &str) {
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out, "{r:#?}");
    let events = r.events();
    assert_eq!(chat_text(&events), text, "{}", r.raw);
    assert!(
        !events.iter().any(|e| e.data.as_deref() == Some("[DONE]")),
        "a truncated stream has no [DONE]: {}",
        r.raw
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_plain_text_stream_is_continued_on_the_next_connection() {
    let s = setup("midstream_continuation = true").await;
    s.mock.script(truncated_after(5, KEY1)).unwrap();
    let r = stream(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out && r.body_error.is_none(), "{r:#?}");
    let events = r.events();
    assert!(!events.iter().any(SseEvent::is_error), "{}", r.raw);
    // A's five chunks, then B's whole answer, as one stream.
    let expected = format!("{}{}", mock_text(5), mock_text(CHUNKS as usize));
    assert_eq!(chat_text(&events), expected, "{}", r.raw);
    let data = data_events(&r);
    assert_eq!(
        data.iter()
            .filter(|e| e.data.as_deref() == Some("[DONE]"))
            .count(),
        1,
        "{}",
        r.raw
    );
    assert_eq!(data.last().and_then(|e| e.data.as_deref()), Some("[DONE]"));
    let ids = ids(&r);
    assert!(ids.len() > CHUNKS as usize, "{}", r.raw);
    assert!(ids.iter().all(|id| *id == ids[0]), "one id: {ids:?}");
    let roles = data
        .iter()
        .filter_map(SseEvent::json)
        .filter(|v| v["choices"][0]["delta"].get("role").is_some())
        .count();
    assert_eq!(
        roles, 1,
        "the continuation's role chunk is dropped: {}",
        r.raw
    );
    // The continuation carried A's text as the assistant's prefix.
    assert_eq!((s.hits(KEY1), s.hits(KEY2), s.hits(KEY3)), (1, 1, 0));
    let b = s.json_bodies(KEY2);
    let messages = b[0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["content"], "Say hello");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"], mock_text(5));
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(b[0]["stream"], true);
    // One access line with the seam; usage from the segment that reported it.
    let line = s.access_line().await;
    assert_eq!(line["seams"], 1, "{line}");
    assert_eq!(line["segments"], "p-k1,p-k2", "{line}");
    assert_eq!(line["continuation"], "continued", "{line}");
    assert_eq!(line["connection"], "p-k1", "{line}");
    assert_eq!(line["completed"], true, "{line}");
    assert_eq!(line["output_tokens"], u64::from(CHUNKS), "{line}");
    let metrics = s.metrics().await;
    assert_eq!(recoveries(&metrics, "continued"), 1, "{metrics}");
    for conn in ["p-k1", "p-k2"] {
        let gauge = format!("switchyard_semaphore_in_flight{{connection=\"{conn}\"}} 0");
        assert!(metrics.contains(&gauge), "{gauge} in\n{metrics}");
    }
    // Both segments' permits came back exactly once: the next request is served.
    let again = stream(&s).await;
    assert_eq!(chat_text(&again.events()), mock_text(CHUNKS as usize));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_in_flight_is_never_continued() {
    let s = setup("midstream_continuation = true").await;
    // Six text chunks, the tool call's opening delta and one piece of its arguments, then EOF.
    s.mock
        .script(FaultSpec {
            eof_after_chunks: Some(CHUNKS + 2),
            tool_call: Some(ToolCallSpec {
                name: "lookup".into(),
                arguments: json!({"query": "weather in Oslo", "days": 3}),
            }),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = stream(&s).await;
    assert_truncated(&r, &mock_text(CHUNKS as usize));
    assert!(r.raw.contains("tool_calls"), "{}", r.raw);
    assert_eq!(s.hits(KEY2), 0, "nothing was continued");
    let line = s.access_line().await;
    assert_eq!(line["seams"], 0, "{line}");
    assert_eq!(line["continuation"], "refused", "{line}");
    assert_eq!(recoveries(&s.metrics().await, "refused"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_continuation_off_the_truncation_reaches_the_client() {
    let s = setup("").await;
    s.mock.script(truncated_after(5, KEY1)).unwrap();
    let r = stream(&s).await;
    assert_truncated(&r, &mock_text(5));
    wait_idle(&s.node).await;
    assert_eq!(s.hits(KEY2), 0, "nothing was continued");
    let line = s.access_line().await;
    assert!(line.get("seams").is_none(), "{line}");
    assert_eq!(recoveries(&s.metrics().await, "continued"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_that_fails_ends_the_stream_with_a_definite_error() {
    let s = setup("midstream_continuation = true").await;
    s.mock.script(truncated_after(5, KEY1)).unwrap();
    s.mock.script(FaultSpec::status(500).for_key(KEY2)).unwrap();
    s.mock.script(FaultSpec::status(500).for_key(KEY3)).unwrap();
    let r = stream(&s).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out, "{r:#?}");
    let events = r.events();
    let errors: Vec<&SseEvent> = events.iter().filter(|e| e.is_error()).collect();
    assert_eq!(errors.len(), 1, "{}", r.raw);
    assert_eq!(
        errors[0].error_type_code(),
        (
            "server_error".to_owned(),
            "STREAM_CONTINUATION_FAILED".to_owned()
        )
    );
    assert!(events.last().is_some_and(SseEvent::is_error), "{}", r.raw);
    assert_eq!(chat_text(&events), mock_text(5), "{}", r.raw);
    assert!(!r.raw.contains("[DONE]"), "{}", r.raw);
    assert!(s.hits(KEY2) >= 1 && s.hits(KEY3) >= 1);
    let line = s.access_line().await;
    assert_eq!(line["seams"], 1, "{line}");
    assert_eq!(line["segments"], "p-k1", "{line}");
    assert_eq!(line["continuation"], "failed", "{line}");
    assert_eq!(line["completed"], false, "{line}");
    assert_eq!(recoveries(&s.metrics().await, "failed"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_continuations_bounds_the_seams() {
    let s = setup("midstream_continuation = true\nmax_continuations = 1").await;
    s.mock.script(truncated_after(3, KEY1)).unwrap();
    s.mock.script(truncated_after(2, KEY2)).unwrap();
    let r = stream(&s).await;
    // A's three chunks, B's two, then B's own truncation: no third segment.
    assert_truncated(&r, &format!("{}{}", mock_text(3), mock_text(2)));
    assert!(!r.events().iter().any(SseEvent::is_error), "{}", r.raw);
    assert_eq!((s.hits(KEY1), s.hits(KEY2), s.hits(KEY3)), (1, 1, 0));
    let line = s.access_line().await;
    assert_eq!(line["seams"], 1, "{line}");
    assert_eq!(line["segments"], "p-k1,p-k2", "{line}");
    assert_eq!(line["continuation"], "exhausted", "{line}");
    let metrics = s.metrics().await;
    assert_eq!(recoveries(&metrics, "continued"), 1, "{metrics}");
    assert_eq!(recoveries(&metrics, "exhausted"), 1, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_continuations_when_the_limit_allows_them() {
    let s = setup("midstream_continuation = true\nmax_continuations = 2").await;
    s.mock.script(truncated_after(3, KEY1)).unwrap();
    s.mock.script(truncated_after(2, KEY2)).unwrap();
    let r = stream(&s).await;
    let expected = format!(
        "{}{}{}",
        mock_text(3),
        mock_text(2),
        mock_text(CHUNKS as usize)
    );
    assert_eq!(chat_text(&r.events()), expected, "{}", r.raw);
    assert!(r.raw.contains("[DONE]"), "{}", r.raw);
    // The second continuation carries both segments' text.
    let c = s.json_bodies(KEY3);
    assert_eq!(
        c[0]["messages"][1]["content"],
        format!("{}{}", mock_text(3), mock_text(2))
    );
    let line = s.access_line().await;
    assert_eq!(line["seams"], 2, "{line}");
    assert_eq!(line["segments"], "p-k1,p-k2,p-k3", "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_after_the_commit_is_held_back_and_continued() {
    let s = setup("midstream_continuation = true").await;
    s.mock
        .script(FaultSpec {
            midstream_error_after: Some(4),
            error_type: Some("api_error".into()),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = stream(&s).await;
    let events = r.events();
    assert!(
        !events.iter().any(SseEvent::is_error),
        "held back: {}",
        r.raw
    );
    let expected = format!("{}{}", mock_text(4), mock_text(CHUNKS as usize));
    assert_eq!(chat_text(&events), expected, "{}", r.raw);
    let line = s.access_line().await;
    assert_eq!(line["segments"], "p-k1,p-k2", "{line}");
    // The failed connection keeps its normal effects: the in-band api_error cools it.
    wait_cooling(&s.node, "p-k1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_after_the_commit_is_continued() {
    let s = setup("midstream_continuation = true").await;
    s.mock
        .script(FaultSpec {
            reset_after_chunks: Some(3),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = stream(&s).await;
    let events = r.events();
    assert!(!events.iter().any(SseEvent::is_error), "{}", r.raw);
    let expected = format!("{}{}", mock_text(3), mock_text(CHUNKS as usize));
    assert_eq!(chat_text(&events), expected, "{}", r.raw);
    assert!(r.raw.ends_with("data: [DONE]\n\n"), "{}", r.raw);
    assert_eq!(s.access_line().await["continuation"], "continued");
}
