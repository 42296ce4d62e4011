//! Stream watchdogs and stream commit, end to end: the real `switchyard-node` binary in front
//! of an in-process mock upstream, over loopback sockets.
//!
//! What is proven here (docs/router-node.md, "The request path", and the early keep-alive rule):
//! - a readiness failure (timeout, pings only, EOF before content) fails over **before** the
//!   stream is committed, so the client sees one clean stream from the second connection;
//! - a failure **after** commit (in-band upstream error, reset, stall, too-slow throughput) is
//!   never replayed on another connection: the client gets the chunks already sent and then
//!   exactly one in-band error event;
//! - a streaming client whose routing waits on a cooldown gets `200` and keep-alive frames at
//!   once, then the content (or an in-band error);
//! - every byte the client receives parses as valid SSE with JSON payloads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use switchyard_tests::mock_upstream::{FaultSpec, Route};

use crate::support::http::*;
use crate::support::scenario::Scenario;

pub(crate) const KEY1: &str = "sk-stream-key-one-0001";
pub(crate) const KEY2: &str = "sk-stream-key-two-0002";
const KEY_ANTHROPIC: &str = "sk-ant-stream-key-0003";
pub(crate) const MODEL: &str = "p/gpt-4o-mini";
pub(crate) const CHUNKS: u32 = 6;
pub(crate) const LIMIT: Duration = Duration::from_secs(10);

/// One mock, provider `p` (openai) with connections `p-k1` (tried first) and `p-k2`, and
/// provider `a` (anthropic) with `a-k1`. `timeouts` are `p`'s `[providers.timeouts]` lines;
/// `extra` is appended (resilience tables).
pub(crate) async fn setup(timeouts: &str, extra: &str) -> Scenario {
    Scenario::with_mock(CHUNKS)
        .await
        .provider("p", "openai", &["gpt-4o-mini"], "", timeouts)
        .provider("a", "anthropic", &["claude-sonnet-4-5"], "", "")
        .connection("p-k1", "p", KEY1, "priority = 1")
        .connection("p-k2", "p", KEY2, "priority = 2")
        .connection("a-k1", "a", KEY_ANTHROPIC, "")
        .config(extra)
        .start()
        .await
}

/// A clean OpenAI chat stream from the mock: every content chunk, `[DONE]`, no error.
pub(crate) fn assert_clean_stream(r: &StreamReply) {
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out, "stream did not end: {r:#?}");
    assert!(r.body_error.is_none(), "transport error: {r:#?}");
    let ct = r.header("content-type").unwrap_or("");
    assert!(ct.starts_with("text/event-stream"), "content-type {ct:?}");
    let events = r.events();
    assert!(
        !events.iter().any(SseEvent::is_error),
        "unexpected error event: {}",
        r.raw
    );
    assert_eq!(chat_text(&events), mock_text(CHUNKS as usize), "{}", r.raw);
    let last = events.iter().rev().find(|e| e.data.is_some());
    assert_eq!(
        last.and_then(|e| e.data.as_deref()),
        Some("[DONE]"),
        "{}",
        r.raw
    );
}

/// `n` content chunks, then exactly one in-band error event, then no more content.
fn assert_chunks_then_one_error(r: &StreamReply, n: usize) -> (String, String) {
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out, "stream did not end: {r:#?}");
    let events = r.events();
    let errors: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.is_error())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "exactly one error event expected:\n{}",
        r.raw
    );
    let at = errors[0];
    assert_eq!(
        chat_text(&events[..at]),
        mock_text(n),
        "the chunks sent before the failure reach the client first:\n{}",
        r.raw
    );
    assert_eq!(
        chat_text_chunks(&events[at..]),
        0,
        "no content after the error event:\n{}",
        r.raw
    );
    let (t, c) = events[at].error_type_code();
    assert!(
        !t.is_empty() && !c.is_empty(),
        "error event has type and code: {:?}",
        events[at]
    );
    (t, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_timeout_fails_over_before_commit() {
    let s = setup("first_content_ms = 400\nidle_ms = 3000", "").await;
    // p-k1 sends its preamble (role delta), then nothing.
    s.mock
        .script(FaultSpec {
            stall_after_chunks: Some(0),
            stall_ms: Some(4000),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let started = Instant::now();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_clean_stream(&r);
    assert_eq!(r.connection(), "p-k2", "{r:#?}");
    assert_eq!(r.header("x-switchyard-attempts"), Some("2"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "failover waited for the stall instead of the 400 ms readiness timeout: {:?}",
        started.elapsed()
    );
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
    assert_healthy(&s.node, "readiness failover").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_do_not_count_as_readiness() {
    let s = setup("first_content_ms = 400\nidle_ms = 3000", "").await;
    // Keep-alive comments every 300 ms for 600 ms, then EOF: the pings must not open the
    // readiness gate, so the 400 ms timeout (not the EOF) ends the attempt.
    s.mock
        .script(FaultSpec {
            eof_before_content: true,
            chunk_delay_ms: Some(300),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_clean_stream(&r);
    // Had the pings opened the gate, the stream would have been committed to p-k1 and then
    // ended without content instead of failing over.
    assert_eq!(r.connection(), "p-k2");
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_before_content_fails_over() {
    let s = setup("first_content_ms = 5000\nidle_ms = 5000", "").await;
    s.mock
        .script(FaultSpec {
            eof_before_content: true,
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_clean_stream(&r);
    assert_eq!(r.connection(), "p-k2");
    assert_eq!(r.header("x-switchyard-attempts"), Some("2"));
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn midstream_error_after_commit_is_not_replayed() {
    let s = setup("first_content_ms = 2000\nidle_ms = 3000", "").await;
    s.mock
        .script(FaultSpec {
            midstream_error_after: Some(3),
            error_message: Some("upstream exploded mid-stream".into()),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_eq!(r.connection(), "p-k1");
    assert_chunks_then_one_error(&r, 3);
    // A (wrong) replay would belong to the request: once the node has finalised it, one
    // would have reached p-k2.
    wait_idle(&s.node).await;
    assert_eq!(s.hits(KEY2), 0, "a committed stream was replayed on p-k2");
    assert_eq!(s.hits(KEY1), 1);
    assert_healthy(&s.node, "midstream error").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_after_commit_gives_one_in_band_error() {
    let s = setup("first_content_ms = 2000\nidle_ms = 3000", "").await;
    s.mock
        .script(FaultSpec {
            reset_after_chunks: Some(3),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_eq!(r.connection(), "p-k1");
    assert!(
        r.body_error.is_none(),
        "the node must end the client stream cleanly after an upstream reset: {r:#?}"
    );
    assert_chunks_then_one_error(&r, 3);
    wait_idle(&s.node).await;
    assert_eq!(s.hits(KEY2), 0, "a committed stream was replayed on p-k2");
    assert_healthy(&s.node, "upstream reset").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_after_commit_gives_in_band_error() {
    let s = setup("first_content_ms = 2000\nidle_ms = 600", "").await;
    s.mock
        .script(FaultSpec {
            stall_after_chunks: Some(2),
            stall_ms: Some(8000),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let started = Instant::now();
    let r = s.call_stream(MODEL, LIMIT).await;
    let elapsed = started.elapsed();
    assert_eq!(r.connection(), "p-k1");
    let (_, code) = assert_chunks_then_one_error(&r, 2);
    assert!(
        code == "stream_idle_timeout" || code == "stream_stall_timeout",
        "stall code: {code}"
    );
    assert!(
        elapsed < Duration::from_secs(4),
        "the 600 ms idle watchdog should have ended the stream, took {elapsed:?}"
    );
    assert_eq!(s.hits(KEY2), 0, "a committed stream was replayed on p-k2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_watchdog_aborts_a_slow_stream() {
    let s = setup(
        "first_content_ms = 2000\nidle_ms = 3000",
        "\n[resilience.stream.throughput_watchdog]\nenabled = true\nwarmup_ms = 0\nwindow_ms = 1000\n\
         min_useful_bytes_per_second = 1000\nmin_useful_bytes = 1\n",
    )
    .await;
    // 20 words, one every 250 ms (~20 B/s): 5 s if nothing stops it.
    s.mock
        .script(FaultSpec {
            chunks: Some(20),
            chunk_delay_ms: Some(250),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let started = Instant::now();
    let r = s.call_stream(MODEL, LIMIT).await;
    let elapsed = started.elapsed();
    assert_eq!(r.status, 200);
    assert_eq!(r.connection(), "p-k1");
    let events = r.events();
    let errors: Vec<&SseEvent> = events.iter().filter(|e| e.is_error()).collect();
    assert_eq!(errors.len(), 1, "{}", r.raw);
    assert_eq!(errors[0].error_type_code().1, "STREAM_THROUGHPUT_TOO_LOW");
    let sent = chat_text_chunks(&events);
    assert!(
        (1..20).contains(&sent),
        "some but not all chunks before the abort, got {sent}"
    );
    assert!(
        elapsed < Duration::from_millis(4000),
        "aborted after warmup + one window, not at the end of the stream: {elapsed:?}"
    );
    assert_eq!(s.hits(KEY2), 0, "no blind replay after commit");
}

/// Both connections cool for `secs` seconds: one non-streamed request that both answer 429.
async fn cool_both(s: &Scenario, secs: u32) {
    for key in [KEY1, KEY2] {
        s.mock
            .script(
                FaultSpec::status(429)
                    .for_key(key)
                    .header("Retry-After", secs.to_string())
                    .times(1),
            )
            .unwrap();
    }
    let r = s.call(MODEL).await;
    assert_eq!(r.status, 429, "priming request: {r:#?}");
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
    for id in ["p-k1", "p-k2"] {
        wait_cooling(&s.node, id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_keepalive_then_content_after_the_cooldown() {
    let s = setup(
        "first_content_ms = 2000\nidle_ms = 3000",
        "\n[resilience.stream]\nearly_keepalive_after_ms = 300\n",
    )
    .await;
    cool_both(&s, 3).await;
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.header("x-switchyard-early-keepalive"), Some("1"));
    assert!(
        r.head_ms < 1500,
        "200 is committed after ~300 ms, got {} ms",
        r.head_ms
    );
    let (first_ms, first) = r.chunk_times_ms.first().cloned().expect("a body");
    assert!(
        first_ms < 1500,
        "a keep-alive frame must arrive at once, not after the wait (first body byte at {first_ms} ms: {first:?})"
    );
    let events = r.events();
    assert!(events[0].is_keepalive(), "first frame: {:?}", events[0]);
    assert!(!events.iter().any(SseEvent::is_error), "{}", r.raw);
    assert_eq!(chat_text(&events), mock_text(CHUNKS as usize), "{}", r.raw);
    assert_eq!(
        events.iter().rev().find_map(|e| e.data.clone()).as_deref(),
        Some("[DONE]")
    );
    // The content came from a connection after its cooldown, not by ignoring it.
    assert_eq!(s.hits(KEY1) + s.hits(KEY2), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_keepalive_then_in_band_error() {
    let s = setup(
        "first_content_ms = 2000\nidle_ms = 3000",
        "\n[resilience.stream]\nearly_keepalive_after_ms = 300\n\
         [resilience.wait_for_cooldown]\nenabled = true\nmax_retries = 1\n",
    )
    .await;
    cool_both(&s, 2).await;
    // After the wait both connections fail again, now for long.
    for key in [KEY1, KEY2] {
        s.mock
            .script(
                FaultSpec::status(429)
                    .for_key(key)
                    .header("Retry-After", "30")
                    .times(1),
            )
            .unwrap();
    }
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.header("x-switchyard-early-keepalive"), Some("1"));
    assert!(!r.timed_out && r.body_error.is_none(), "{r:#?}");
    let events = r.events();
    assert!(events[0].is_keepalive(), "first frame: {:?}", events[0]);
    let errors: Vec<&SseEvent> = events.iter().filter(|e| e.is_error()).collect();
    assert_eq!(errors.len(), 1, "{}", r.raw);
    assert_eq!(
        errors[0].error_type_code().0,
        "rate_limit_error",
        "{}",
        r.raw
    );
    assert_eq!(chat_text_chunks(&events), 0);
    // After the wait, one or both connections were tried again (the second one's cooldown may
    // lapse a few ms after the first one's).
    assert!((3..=4).contains(&(s.hits(KEY1) + s.hits(KEY2))));
    assert_healthy(&s.node, "in-band error").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_stream_is_valid_sse_with_matching_event_names() {
    let s = setup("", "").await;
    let r = s
        .stream_to(
            "/v1/messages",
            &messages("a/claude-sonnet-4-5", true),
            LIMIT,
        )
        .await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(r.connection(), "a-k1");
    let events = r.events();
    for e in events.iter().filter(|e| e.data.is_some()) {
        let v = e.json().expect("JSON data");
        assert_eq!(
            e.event.as_deref(),
            v["type"].as_str(),
            "event name matches data.type: {e:?}"
        );
    }
    let names: Vec<&str> = events.iter().filter_map(|e| e.event.as_deref()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"), "{names:?}");
    assert_eq!(anthropic_text(&events), mock_text(CHUNKS as usize));
    assert_eq!(
        s.mock.stats().requests_for_route(Route::Messages),
        1,
        "one upstream call"
    );
}

/// The strict SSE parser of the support module, which every stream check here relies on.
#[test]
fn sse_parser_is_strict() {
    let ok = parse_sse("data: {}\n\n: keep-alive\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n")
        .unwrap();
    assert_eq!(ok.len(), 3);
    assert!(ok[1].is_keepalive());
    assert!(ok[2].is_keepalive());
    assert!(parse_sse("data: {}\n").is_err());
    assert!(parse_sse("bogus: 1\n\n").is_err());
    let multi = parse_sse("data: a\r\ndata: b\r\n\r\n").unwrap();
    assert_eq!(multi[0].data.as_deref(), Some("a\nb"));
}
