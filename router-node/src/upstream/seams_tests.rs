use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde_json::Value;

use super::*;

const REQUEST: &[u8] =
    br#"{"model":"p/m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

fn chunk(id: &str, delta: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":7,\"model\":\"m-{id}\",\
         \"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn text(id: &str, t: &str) -> String {
    chunk(id, &format!("{{\"content\":\"{t}\"}}"), None)
}

fn role(id: &str) -> String {
    chunk(id, "{\"role\":\"assistant\",\"content\":\"\"}", None)
}

fn segment(parts: Vec<String>) -> ClientBody {
    Box::pin(futures_util::stream::iter(
        parts
            .into_iter()
            .map(|p| Ok::<Bytes, actix_web::Error>(Bytes::from(p))),
    ))
}

/// What a run saw: the client's bytes, the end, and the continuation bodies requested.
struct Run {
    client: String,
    end: SeamsEnd,
    requests: Vec<Value>,
}

/// Drives a seamed body: `first`, then one scripted answer per continuation (`None` = it
/// could not start).
async fn run(first: Vec<String>, nexts: Vec<Option<Vec<String>>>, max: u32) -> Run {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let mut nexts = nexts.into_iter();
    let next: Continue = Box::new(move |body: Bytes| -> NextSegment {
        seen.lock()
            .unwrap()
            .push(serde_json::from_slice::<Value>(&body).unwrap());
        let answer = nexts.next().flatten();
        Box::pin(async move { answer.map(segment).ok_or_else(|| "no target".to_owned()) })
    });
    let ended = Arc::new(Mutex::new(None));
    let slot = ended.clone();
    let policy = SeamPolicy {
        max_continuations: max,
        heartbeat_ms: 0,
    };
    let stream = SeamedBody::new(
        segment(first),
        Bytes::from_static(REQUEST),
        policy,
        next,
        Box::new(move |end| *slot.lock().unwrap() = Some(end)),
    );
    let parts: Vec<_> = stream.collect().await;
    let client = parts
        .into_iter()
        .map(|p| String::from_utf8(p.unwrap().to_vec()).unwrap())
        .collect();
    let end = ended.lock().unwrap().take().expect("the end is reported");
    let requests = requests.lock().unwrap().clone();
    Run {
        client,
        end,
        requests,
    }
}

fn first_segment() -> Vec<String> {
    vec![role("a"), text("a", "Hel"), text("a", "lo, ")]
}

#[tokio::test]
async fn a_truncated_stream_is_continued_as_one_stream() {
    let b = vec![
        role("b"),
        text("b", "world"),
        chunk("b", "{}", Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ];
    let r = run(first_segment(), vec![Some(b)], 1).await;
    let expected = format!(
        "{}{}{}{}{}{}",
        role("a"),
        text("a", "Hel"),
        text("a", "lo, "),
        // The rewrite keeps the chunk's fields, with the client stream's identity.
        text("a", "world"),
        chunk("a", "{}", Some("stop")),
        "data: [DONE]\n\n"
    );
    let normalise = |s: &str| -> Vec<Value> {
        s.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let d = e.trim_start_matches("data: ");
                serde_json::from_str(d).unwrap_or(Value::String(d.to_owned()))
            })
            .collect()
    };
    assert_eq!(normalise(&r.client), normalise(&expected), "{}", r.client);
    assert_eq!(r.requests.len(), 1);
    assert_eq!(r.requests[0]["messages"][1]["content"], "Hello, ");
    assert_eq!(
        r.end,
        SeamsEnd {
            seams: 1,
            continued: 1,
            completed: true,
            ..SeamsEnd::default()
        }
    );
}

#[tokio::test]
async fn a_clean_stream_is_forwarded_byte_for_byte() {
    let mut a = first_segment();
    a.push(chunk("a", "{}", Some("stop")));
    a.push("data: [DONE]\n\n".to_owned());
    let r = run(a.clone(), vec![], 1).await;
    assert_eq!(r.client, a.concat());
    assert!(r.requests.is_empty());
    assert!(r.end.completed && r.end.seams == 0);
}

#[tokio::test]
async fn a_tool_call_in_flight_ends_the_stream_as_without_continuation() {
    let mut a = first_segment();
    a.push(chunk(
        "a",
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\"}}]}",
        None,
    ));
    let error =
        "data: {\"error\":{\"type\":\"stream_error\",\"code\":\"upstream_stream_error\"}}\n\n";
    a.push(error.to_owned());
    let r = run(a.clone(), vec![Some(vec![text("b", "x")])], 1).await;
    assert_eq!(r.client, a.concat(), "today's ending, the error event kept");
    assert!(r.requests.is_empty());
    assert_eq!(r.end.refusal, Some(Refusal::ToolCall));
    assert!(!r.end.completed);
}

#[tokio::test]
async fn an_error_event_is_held_back_and_replaced_by_the_continuation() {
    let mut a = first_segment();
    a.push(
        "data: {\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}\n\ndata: [DONE]\n\n"
            .to_owned(),
    );
    let b = vec![role("b"), text("b", "!"), "data: [DONE]\n\n".to_owned()];
    let r = run(a, vec![Some(b)], 1).await;
    assert!(!r.client.contains("error"), "{}", r.client);
    assert!(r.client.contains("\"content\":\"!\""), "{}", r.client);
    assert_eq!(r.client.matches("[DONE]").count(), 1, "{}", r.client);
    assert_eq!(r.client.matches("\"role\"").count(), 1, "{}", r.client);
}

#[tokio::test]
async fn a_continuation_that_cannot_start_ends_with_a_definite_error() {
    let r = run(first_segment(), vec![None], 1).await;
    assert!(r.client.starts_with(&first_segment().concat()));
    assert!(
        r.client.contains("STREAM_CONTINUATION_FAILED"),
        "{}",
        r.client
    );
    assert_eq!(r.client.matches("\"error\"").count(), 1);
    assert!(r.end.failed && r.end.seams == 1 && r.end.continued == 0);
}

#[tokio::test]
async fn max_continuations_is_respected() {
    // Every segment is truncated: two continuations, then today's ending (a bare EOF).
    let b = vec![role("b"), text("b", "wor")];
    let c = vec![role("c"), text("c", "ld")];
    let d = vec![role("d"), text("d", "!")];
    let r = run(first_segment(), vec![Some(b), Some(c), Some(d)], 2).await;
    assert_eq!(r.requests.len(), 2);
    assert_eq!(r.requests[1]["messages"][1]["content"], "Hello, wor");
    assert!(
        r.client.contains("\"ld\"") && !r.client.contains("\"!\""),
        "{}",
        r.client
    );
    assert!(!r.client.contains("error") && !r.client.contains("[DONE]"));
    assert_eq!(r.end.refusal, Some(Refusal::Exhausted));
    assert_eq!((r.end.seams, r.end.continued), (2, 2));
    assert!(!r.end.completed);
}

#[tokio::test]
async fn dropping_the_body_reports_a_disconnect_once() {
    let ended = Arc::new(Mutex::new(Vec::new()));
    let slot = ended.clone();
    let next: Continue = Box::new(|_: Bytes| -> NextSegment { Box::pin(std::future::pending()) });
    let mut stream = SeamedBody::new(
        segment(first_segment()),
        Bytes::from_static(REQUEST),
        SeamPolicy {
            max_continuations: 1,
            heartbeat_ms: 0,
        },
        next,
        Box::new(move |end| slot.lock().unwrap().push(end)),
    );
    assert!(stream.next().await.is_some());
    drop(stream);
    let ends = ended.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert!(ends[0].client_disconnected);
}

#[tokio::test]
async fn a_last_event_without_its_blank_line_still_ends_the_stream() {
    let mut a = first_segment();
    a.push(chunk("a", "{}", Some("stop")));
    a.push("data: [DONE]".to_owned());
    let r = run(a.clone(), vec![Some(vec![text("b", "x")])], 1).await;
    assert_eq!(r.client, a.concat());
    assert!(r.requests.is_empty() && r.end.completed);
}

#[tokio::test]
async fn an_event_cut_by_the_eof_is_dropped_when_the_stream_continues() {
    let mut a = first_segment();
    a.push("data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"cont".to_owned());
    let b = vec![role("b"), text("b", "!"), "data: [DONE]\n\n".to_owned()];
    let r = run(a, vec![Some(b)], 1).await;
    for event in r.client.split("\n\n").filter(|e| !e.is_empty()) {
        let data = event.trim_start_matches("data: ");
        assert!(
            data == "[DONE]" || serde_json::from_str::<Value>(data).is_ok(),
            "{}",
            r.client
        );
    }
    assert_eq!(r.requests[0]["messages"][1]["content"], "Hello, ");
    assert!(r.end.completed);
}
