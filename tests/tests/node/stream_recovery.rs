//! Stream recovery (`[resilience.stream_recovery]`), end to end: the real `switchyard-node`
//! binary in front of an in-process mock upstream, over loopback sockets.
//!
//! What is proven here:
//! - a stream truncated a few chunks after its first content frame, inside the hold, is
//!   reopened on the next connection: the client sees one clean stream, the bad bytes never;
//! - with recovery off, the same truncation reaches the client as it does today;
//! - past `max_reopens` the request ends with a definite 502 `STREAM_RECOVERY_EXHAUSTED`;
//! - a truncation after the hold window is not reopened (the stream was committed);
//! - the access line and `switchyard_stream_recoveries_total` record the reopens.
//!
//! Mid-stream continuation, after the commit point, is proven in `midstream`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

use switchyard_tests::mock_upstream::FaultSpec;

use crate::streams::{self, KEY1, KEY2, LIMIT, MODEL, assert_clean_stream};
use crate::support::http::*;
use crate::support::scenario::Scenario;

/// The stream tests' node (`p-k1` tried first, then `p-k2`, 6 chunks per stream); `recovery`
/// is the body of `[resilience.stream_recovery]` (empty = no table: off).
async fn setup(recovery: &str) -> Scenario {
    let table = if recovery.is_empty() {
        String::new()
    } else {
        format!("\n[resilience.stream_recovery]\n{recovery}\n")
    };
    streams::setup("first_content_ms = 5000\nidle_ms = 5000", &table).await
}

/// Truncated after two content chunks: no `[DONE]`, no error event.
fn truncated_after_two() -> FaultSpec {
    FaultSpec {
        eof_after_chunks: Some(2),
        ..FaultSpec::new()
    }
}

/// What the client sees of a stream cut after `n` chunks: those chunks and no `[DONE]`.
fn assert_truncated(r: &StreamReply, n: usize) {
    assert_eq!(r.status, 200, "{r:#?}");
    assert!(!r.timed_out, "{r:#?}");
    let events = r.events();
    assert_eq!(chat_text(&events), mock_text(n), "{}", r.raw);
    assert!(
        !events.iter().any(|e| e.data.as_deref() == Some("[DONE]")),
        "a truncated stream has no [DONE]: {}",
        r.raw
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_inside_the_hold_is_reopened_on_the_next_connection() {
    let s = setup("enabled = true\nhold_ms = 3000").await;
    s.mock
        .script(truncated_after_two().for_key(KEY1).times(1))
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_clean_stream(&r);
    assert_eq!(r.connection(), "p-k2", "{r:#?}");
    assert_eq!(r.header("x-switchyard-attempts"), Some("2"));
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
    let line = s.access_line().await;
    assert_eq!(line["recovered"], 1, "{line}");
    assert_eq!(line["completed"], true, "{line}");
    let metrics = s.metrics().await;
    assert!(
        metrics
            .contains("switchyard_stream_recoveries_total{kind=\"reopen\",outcome=\"reopened\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_inside_the_hold_is_reopened_too() {
    let s = setup("enabled = true\nhold_ms = 3000").await;
    s.mock
        .script(FaultSpec {
            midstream_error_after: Some(2),
            error_type: Some("api_error".into()),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_clean_stream(&r);
    assert_eq!(r.connection(), "p-k2", "{r:#?}");
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_recovery_off_the_truncation_reaches_the_client() {
    let s = setup("").await;
    s.mock
        .script(truncated_after_two().for_key(KEY1).times(1))
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_truncated(&r, 2);
    assert_eq!(r.connection(), "p-k1", "{r:#?}");
    assert_eq!(r.header("x-switchyard-attempts"), Some("1"));
    wait_idle(&s.node).await;
    assert_eq!(s.hits(KEY2), 0, "nothing was reopened");
    assert_eq!(s.access_line().await["recovered"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_reopens_the_request_ends_with_a_definite_error() {
    let s = setup("enabled = true\nhold_ms = 3000\nmax_reopens = 1").await;
    // Every attempt is truncated.
    s.mock.script(truncated_after_two()).unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_eq!(r.status, 502, "{r:#?}");
    assert!(
        !r.raw.contains("data:"),
        "no stream bytes reach the client: {}",
        r.raw
    );
    let body: Value = serde_json::from_str(&r.raw).unwrap_or_else(|e| panic!("{e}: {}", r.raw));
    assert_eq!(body["error"]["code"], "STREAM_RECOVERY_EXHAUSTED", "{body}");
    assert_eq!(body["error"]["type"], "server_error", "{body}");
    assert_eq!((s.hits(KEY1), s.hits(KEY2)), (1, 1));
    let metrics = s.metrics().await;
    for outcome in ["reopened", "exhausted"] {
        let line = format!(
            "switchyard_stream_recoveries_total{{kind=\"reopen\",outcome=\"{outcome}\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_after_the_hold_window_is_not_reopened() {
    let s = setup("enabled = true\nhold_ms = 300").await;
    // Content at 0, 250, 500 and 750 ms, then EOF: the hold released at 300 ms.
    s.mock
        .script(FaultSpec {
            eof_after_chunks: Some(4),
            chunk_delay_ms: Some(250),
            ..FaultSpec::new().for_key(KEY1).times(1)
        })
        .unwrap();
    let r = s.call_stream(MODEL, LIMIT).await;
    assert_truncated(&r, 4);
    assert_eq!(r.connection(), "p-k1", "{r:#?}");
    wait_idle(&s.node).await;
    assert_eq!(s.hits(KEY2), 0, "a committed stream was reopened");
}
