//! Attempts against a scripted upstream on 127.0.0.1: a raw TCP server that reads one
//! request and then writes, sleeps and waits exactly as each test says, so framing, timing
//! and connection closure are all under the test's control.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::HttpResponse;
use actix_web::http::header::{HeaderName, HeaderValue};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use switchyard_shared::admission::QueueSettings;
use switchyard_shared::classify::TransportFailure;
use switchyard_shared::config::{
    ConnectionConfig, ProviderConfig, ProviderFormat, ProviderTimeouts,
};
use switchyard_shared::sse::{StreamAbort, ThroughputSettings, WatchConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::*;
use crate::actors::{ConnHandle, ProviderHandle};
use crate::api::errors::ClientFormat;
use crate::clock::Clock;
use crate::state::RequestQueue;
use crate::transport::test_wire::{Seen, read_request};

// ---- the scripted upstream -----------------------------------------------------------------

#[derive(Debug, Clone)]
enum Step {
    Write(Vec<u8>),
    Sleep(u64),
    /// Reads until the peer closes, then reports the closure.
    AwaitClose,
    /// Waits until the test says go on.
    Wait(Arc<Notify>),
    /// Reads the next request on the same connection (and reports it as seen).
    NextRequest,
}

fn write(bytes: impl AsRef<[u8]>) -> Step {
    Step::Write(bytes.as_ref().to_vec())
}

struct Mock {
    base: String,
    seen: UnboundedReceiver<Seen>,
    closed: UnboundedReceiver<()>,
    /// Connections accepted so far.
    accepted: Arc<AtomicUsize>,
}

async fn mock(steps: Vec<Step>) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (seen_tx, seen) = unbounded_channel();
    let (closed_tx, closed) = unbounded_channel();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (steps, seen_tx, closed_tx) = (steps.clone(), seen_tx.clone(), closed_tx.clone());
            tokio::spawn(async move {
                let Some(request) = read_request(&mut sock).await else {
                    return;
                };
                let _ = seen_tx.send(request);
                for step in steps {
                    match step {
                        Step::Write(bytes) => {
                            if sock.write_all(&bytes).await.is_err() {
                                let _ = closed_tx.send(());
                                return;
                            }
                        }
                        Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        Step::AwaitClose => {
                            let mut buf = [0u8; 256];
                            while let Ok(n) = sock.read(&mut buf).await {
                                if n == 0 {
                                    break;
                                }
                            }
                            let _ = closed_tx.send(());
                            return;
                        }
                        Step::Wait(go) => go.notified().await,
                        Step::NextRequest => match read_request(&mut sock).await {
                            Some(request) => {
                                let _ = seen_tx.send(request);
                            }
                            None => return,
                        },
                    }
                }
            });
        }
    });
    Mock {
        base: format!("http://{addr}/v1/"),
        seen,
        closed,
        accepted,
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
    cache-control: no-cache\r\nx-request-id: req-1\r\nset-cookie: s=1\r\nconnection: close\r\n\r\n";

/// A chunked SSE response head, for a body that can be cut off mid-message.
const SSE_CHUNKED_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
    transfer-encoding: chunked\r\n\r\n";

fn chunked(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Step {
    let mut out = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str("connection: close\r\n\r\n");
    out.push_str(body);
    write(out)
}

// ---- handles and requests ------------------------------------------------------------------

fn timeouts() -> ProviderTimeouts {
    ProviderTimeouts {
        connect_ms: 1_000,
        headers_ms: 2_000,
        first_content_ms: 2_000,
        idle_ms: 2_000,
        attempt_deadline_ms: 0,
    }
}

fn handles(
    base: &str,
    format: ProviderFormat,
    timeouts: ProviderTimeouts,
) -> (Arc<ConnHandle>, Arc<ProviderHandle>) {
    let provider = ProviderConfig {
        id: "p".into(),
        format,
        base_url: base.to_owned(),
        timeouts,
        ..ProviderConfig::default()
    };
    let conn = ConnectionConfig {
        id: "c".into(),
        provider: "p".into(),
        ..ConnectionConfig::default()
    };
    let client = crate::transport::build_client(&timeouts).unwrap();
    let conn = ConnHandle::new(
        0,
        0,
        conn,
        client,
        Some("sk-test-key".into()),
        RequestQueue::new(QueueSettings::default()),
    );
    (
        Arc::new(conn),
        Arc::new(ProviderHandle::new(0, provider, vec![0])),
    )
}

fn watch(first_content_ms: u64, idle_ms: u64, stall_ms: u64) -> WatchConfig {
    WatchConfig {
        first_content_ms,
        idle_ms,
        stall_ms,
        throughput: ThroughputSettings::default(),
    }
}

fn request(mock_base: &str, format: ClientFormat, stream: bool) -> AttemptRequest {
    let provider_format = match format {
        ClientFormat::Anthropic => ProviderFormat::Anthropic,
        _ => ProviderFormat::Openai,
    };
    let (conn, provider) = handles(mock_base, provider_format, timeouts());
    AttemptRequest {
        conn,
        provider,
        client_format: format,
        body: Bytes::from_static(br#"{"model":"m","stream":true}"#),
        stream,
        forward_headers: Vec::new(),
        deadline_ms: None,
        watch: watch(2_000, 2_000, 2_000),
        clock: Clock::new(),
    }
}

/// Another request like `req` on the same connection handle (and so the same pool).
fn same_connection(req: &AttemptRequest) -> AttemptRequest {
    AttemptRequest {
        conn: Arc::clone(&req.conn),
        provider: Arc::clone(&req.provider),
        client_format: req.client_format,
        body: req.body.clone(),
        stream: req.stream,
        forward_headers: Vec::new(),
        deadline_ms: req.deadline_ms,
        watch: req.watch,
        clock: req.clock,
    }
}

fn failed(result: AttemptResult) -> AttemptFailure {
    match result {
        AttemptResult::Failed(f) => f,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn committed(result: AttemptResult) -> CommittedStream {
    match result {
        AttemptResult::Stream(s) => s,
        other => panic!("expected a committed stream, got {other:?}"),
    }
}

type Ends = Arc<Mutex<Vec<StreamEnd>>>;

fn recorder() -> (Box<dyn FnOnce(StreamEnd) + Send>, Ends) {
    let ends: Ends = Arc::default();
    let sink = Arc::clone(&ends);
    (Box::new(move |end| sink.lock().unwrap().push(end)), ends)
}

/// Every chunk of a body, in order (bounded in time so a hung stream fails the test).
async fn chunks(body: impl Stream<Item = Result<Bytes, actix_web::Error>>) -> Vec<Bytes> {
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = body.next().await {
            out.push(chunk.unwrap());
        }
    })
    .await
    .expect("body did not end");
    out
}

fn concat(chunks: &[Bytes]) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.iter().copied()).collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---- SSE fixtures --------------------------------------------------------------------------

const CHAT_ROLE: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
const CHAT_HELLO: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n";
const CHAT_STOP: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
const CHAT_USAGE: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n";
const CHAT_DONE: &str = "data: [DONE]\n\n";

const ANT_START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n";
const ANT_PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
const ANT_BLOCK: &str = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
const ANT_DELTA: &str = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n";
const ANT_BLOCK_STOP: &str =
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n";
const ANT_MSG_DELTA: &str = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n";
const ANT_STOP: &str = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
const ANT_OVERLOADED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";

// ---- pure helpers --------------------------------------------------------------------------

#[test]
fn endpoint_urls_trim_trailing_slashes() {
    assert_eq!(
        endpoint_url("https://api.example.com/v1/", ClientFormat::OpenAiChat),
        "https://api.example.com/v1/chat/completions"
    );
    assert_eq!(
        endpoint_url(
            "https://api.example.com/v1//",
            ClientFormat::OpenAiResponses
        ),
        "https://api.example.com/v1/responses"
    );
    assert_eq!(
        endpoint_url("https://api.anthropic.com/v1", ClientFormat::Anthropic),
        "https://api.anthropic.com/v1/messages"
    );
}

#[test]
fn json_probe_finds_error_objects_but_not_null_errors() {
    use super::body::probe_json;
    assert!(probe_json(br#"{"error":{"message":"quota","type":"insufficient_quota"}}"#).is_error);
    assert!(
        probe_json(br#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#)
            .is_error
    );
    let responses = probe_json(
        br#"{"id":"r","object":"response","error":null,"usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1}}}"#,
    );
    assert!(!responses.is_error);
    let usage = responses.usage.unwrap();
    assert_eq!(
        (usage.input, usage.output, usage.cache_read),
        (Some(3), Some(4), Some(1))
    );
    assert!(!probe_json(b"not json").is_error);
    assert!(!probe_json(br#"{"error":"a string is not an error object"}"#).is_error);
}

#[test]
fn the_tail_tracks_event_boundaries_across_chunks() {
    use super::stream::Tail;
    let tail = |chunks: &[&[u8]]| {
        let mut t = Tail::default();
        for c in chunks {
            t.observe(c);
        }
        t
    };
    assert!(tail(&[]).at_boundary());
    assert_eq!(tail(&[b"data: {\"a\""]).closing(), b"\n\n");
    assert_eq!(tail(&[b"data: x\n"]).closing(), b"\n");
    assert!(tail(&[b"data: x\n", b"\n"]).at_boundary());
    assert!(tail(&[b"data: x\r\n\r\n"]).at_boundary());
    // A CRLF split across chunks is one line break, not two.
    assert!(!tail(&[b"data: x\r", b"\n"]).at_boundary());
    assert!(tail(&[b"data: x\r", b"\n\r\n"]).at_boundary());
    assert!(tail(&[b"data: x\r\r"]).at_boundary());
    assert!(!tail(&[b"data: x\n\n", b"data: y"]).at_boundary());
}

/// The pipeline may spawn attempts and bodies onto any tokio worker.
#[test]
fn attempts_and_bodies_are_send() {
    fn assert_send<T: Send + 'static>(_: &T) {}
    fn body_is_send(s: CommittedStream) {
        assert_send(&s.into_body(Box::new(|_| {})));
    }
    let _ = body_is_send;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let fut = attempt(request(
            "http://127.0.0.1:9/v1",
            ClientFormat::OpenAiChat,
            true,
        ));
        assert_send(&fut);
    });
}

// ---- non-stream ----------------------------------------------------------------------------

#[tokio::test]
async fn json_success_passes_the_body_and_safe_headers() {
    let body = r#"{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}}"#;
    let mut m = mock(vec![response(
        "200 OK",
        &[
            ("content-type", "application/json"),
            ("x-request-id", "req-9"),
            ("set-cookie", "session=secret"),
            ("x-ratelimit-remaining-requests", "41"),
        ],
        body,
    )])
    .await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, false);
    req.forward_headers = vec![
        (
            HeaderName::from_static("openai-beta"),
            HeaderValue::from_static("assistants=v2"),
        ),
        (
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer client"),
        ),
    ];
    let AttemptResult::Json(ok) = attempt(req).await else {
        panic!("expected JSON")
    };
    assert_eq!(ok.status, 200);
    assert_eq!(ok.body, body.as_bytes());
    let usage = ok.usage.unwrap();
    assert_eq!(
        (usage.input, usage.output, usage.cache_read),
        (Some(9), Some(4), Some(2))
    );
    let names: Vec<&str> = ok.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"content-type"));
    assert!(names.contains(&"x-request-id"));
    assert!(names.contains(&"x-ratelimit-remaining-requests"));
    assert!(!names.contains(&"set-cookie"));

    let seen = m.seen.recv().await.unwrap();
    assert!(
        seen.head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{}",
        seen.head
    );
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("accept"), Some("application/json"));
    assert_eq!(seen.header("openai-beta"), Some("assistants=v2"));
    assert_eq!(seen.body, br#"{"model":"m","stream":true}"#);
}

#[tokio::test]
async fn non_2xx_fails_with_status_retry_headers_and_body() {
    let m = mock(vec![response(
        "429 Too Many Requests",
        &[
            ("content-type", "application/json"),
            ("retry-after", "7"),
            ("x-ratelimit-reset-requests", "6s"),
            ("set-cookie", "session=secret"),
        ],
        r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#,
    )])
    .await;
    let f = failed(attempt(request(&m.base, ClientFormat::OpenAiChat, false)).await);
    assert_eq!(f.status, Some(429));
    assert_eq!(f.transport, None);
    assert!(!f.in_band_error);
    assert!(f.headers.contains(&("retry-after".into(), "7".into())));
    assert!(
        f.headers
            .contains(&("x-ratelimit-reset-requests".into(), "6s".into()))
    );
    assert!(f.headers.iter().all(|(n, _)| n != "set-cookie"));
    assert!(f.body.contains("Rate limit reached"));
    assert_eq!(f.message, "HTTP 429");
}

#[tokio::test]
async fn a_200_with_an_error_body_fails_over() {
    // Each fails as the status its error type means, not a blanket 502.
    for (body, status) in [
        (
            r#"{"error":{"message":"upstream quota","type":"insufficient_quota","code":429}}"#,
            429,
        ),
        (
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            529,
        ),
        (r#"{"error":{"message":"something odd"}}"#, 502),
        // LM Studio's unknown route: an error string naming an endpoint, sent with a 200.
        (
            r#"{"error":"Unexpected endpoint or method. (POST /v1/responses)"}"#,
            404,
        ),
    ] {
        let m = mock(vec![response(
            "200 OK",
            &[("content-type", "application/json")],
            body,
        )])
        .await;
        let f = failed(attempt(request(&m.base, ClientFormat::OpenAiChat, false)).await);
        assert_eq!(f.status, Some(status), "{body}");
        assert!(f.in_band_error);
        assert_eq!(f.body, body);
    }
}

#[tokio::test]
async fn connect_refused_is_a_transport_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let f = failed(
        attempt(request(
            &format!("http://{addr}/v1"),
            ClientFormat::OpenAiChat,
            false,
        ))
        .await,
    );
    assert_eq!(f.status, None);
    assert_eq!(f.transport, Some(TransportFailure::ConnectRefused));
    assert_eq!(f.message, "connect refused");
}

#[tokio::test]
async fn headers_timeout_is_a_timeout() {
    let m = mock(vec![Step::Sleep(5_000)]).await;
    let (conn, provider) = handles(
        &m.base,
        ProviderFormat::Openai,
        ProviderTimeouts {
            headers_ms: 60,
            ..timeouts()
        },
    );
    let req = AttemptRequest {
        conn,
        provider,
        ..request(&m.base, ClientFormat::OpenAiChat, false)
    };
    let t = Instant::now();
    let f = failed(attempt(req).await);
    assert_eq!(f.transport, Some(TransportFailure::Timeout));
    assert_eq!(f.message, "no response headers within 60 ms");
    assert!(
        f.elapsed_ms >= 60 && t.elapsed() < Duration::from_secs(1),
        "{f:?}"
    );
}

#[tokio::test]
async fn the_attempt_deadline_caps_the_headers_wait() {
    let m = mock(vec![Step::Sleep(5_000)]).await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, false);
    req.deadline_ms = Some(req.clock.now() + 50);
    let f = failed(attempt(req).await);
    assert_eq!(f.transport, Some(TransportFailure::Timeout));
    assert_eq!(f.message, "attempt deadline exceeded");
}

// ---- streams before the commit point -------------------------------------------------------

#[tokio::test]
async fn openai_stream_is_forwarded_byte_for_byte() {
    let all = [CHAT_ROLE, CHAT_HELLO, CHAT_STOP, CHAT_USAGE, CHAT_DONE].concat();
    // Cut mid-line and mid-event so the tap must reassemble.
    let (a, rest) = all.as_bytes().split_at(CHAT_ROLE.len() + 20);
    let (b, c) = rest.split_at(CHAT_HELLO.len() + 7);
    let mut m = mock(vec![
        write(SSE_HEAD),
        write(a),
        Step::Sleep(15),
        write(b),
        Step::Sleep(15),
        write(c),
    ])
    .await;
    let s = committed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await);
    assert_eq!(s.status, 200);
    assert!(
        s.headers
            .iter()
            .any(|(n, v)| n == "x-request-id" && v == "req-1")
    );
    assert!(s.headers.iter().all(|(n, _)| n != "set-cookie"));
    let seen = m.seen.recv().await.unwrap();
    assert_eq!(seen.header("accept"), Some("text/event-stream"));

    // The body must plug into actix-web's streaming response.
    let (on_finish, ends) = recorder();
    let resp = HttpResponse::Ok().streaming(s.into_body(on_finish));
    let bytes = tokio::time::timeout(
        Duration::from_secs(5),
        actix_web::body::to_bytes(resp.into_body()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(text(&bytes), all);

    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    let end = &ends[0];
    assert!(end.completed, "{end:?}");
    assert!(end.saw_terminal_event);
    assert!(!end.client_disconnected && !end.ended_empty);
    assert_eq!(end.abort, None);
    assert_eq!(end.bytes, all.len() as u64);
    let usage = end.usage.unwrap();
    assert_eq!((usage.input, usage.output), (Some(5), Some(2)));
}

#[tokio::test]
async fn a_stream_ends_at_its_terminal_event_and_its_connection_is_reused() {
    let all = [CHAT_HELLO, CHAT_USAGE, CHAT_DONE].concat();
    let go = Arc::new(Notify::new());
    let mut m = mock(vec![
        write(SSE_CHUNKED_HEAD),
        write(chunked(all.as_bytes())),
        // The end of body is held back until the client's stream has ended.
        Step::Wait(Arc::clone(&go)),
        write("0\r\n\r\n"),
        Step::NextRequest,
        write(SSE_CHUNKED_HEAD),
        write(chunked(all.as_bytes())),
        write("0\r\n\r\n"),
    ])
    .await;
    let first = request(&m.base, ClientFormat::OpenAiChat, true);
    let second = same_connection(&first);
    let s = committed(attempt(first).await);
    let (on_finish, ends) = recorder();
    let body = concat(&chunks(s.into_body(on_finish)).await);
    assert_eq!(text(&body), all);
    {
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1);
        assert!(
            ends[0].completed && ends[0].saw_terminal_event,
            "{:?}",
            ends[0]
        );
        assert_eq!(ends[0].abort, None);
        assert_eq!(ends[0].usage.map(|u| u.output), Some(Some(2)));
    }
    assert_eq!(crate::transport::idle_ready(), 0, "the end has not arrived");

    // The end is read aside and the connection goes back to the pool.
    go.notify_one();
    for _ in 0..200 {
        if crate::transport::idle_ready() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        crate::transport::idle_ready(),
        1,
        "the connection was not given back"
    );
    let s = committed(attempt(second).await);
    let (on_finish, _) = recorder();
    assert_eq!(text(&concat(&chunks(s.into_body(on_finish)).await)), all);
    assert_eq!(
        m.accepted.load(Ordering::SeqCst),
        1,
        "the connection was reused"
    );
    m.seen.recv().await.unwrap();
    m.seen.recv().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_never_ends_after_its_terminal_event_loses_its_connection() {
    let all = [CHAT_HELLO, CHAT_DONE].concat();
    let mut m = mock(vec![
        write(SSE_CHUNKED_HEAD),
        write(chunked(all.as_bytes())),
        Step::AwaitClose,
    ])
    .await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, true);
    req.watch = watch(2_000, 150, 2_000);
    let s = committed(attempt(req).await).with_heartbeat_interval_ms(0);
    let (on_finish, ends) = recorder();
    // The client's stream ends complete at the terminal event, not with an idle timeout.
    let body = concat(&chunks(s.into_body(on_finish)).await);
    assert_eq!(text(&body), all);
    {
        let ends = ends.lock().unwrap();
        assert!(ends[0].completed, "{:?}", ends[0]);
        assert_eq!(ends[0].abort, None);
    }
    // The end is awaited aside for the idle timeout, then the connection is closed.
    tokio::time::timeout(Duration::from_secs(3), m.closed.recv())
        .await
        .expect("the upstream connection was not closed")
        .unwrap();
    assert_eq!(crate::transport::idle_ready(), 0);
}

#[tokio::test]
async fn an_upstream_that_keeps_sending_after_its_terminal_event_loses_its_connection() {
    let all = [CHAT_HELLO, CHAT_DONE].concat();
    let go = Arc::new(Notify::new());
    let junk = vec![b'x'; crate::transport::DRAIN_MAX_BYTES + 1];
    let mut m = mock(vec![
        write(SSE_CHUNKED_HEAD),
        write(chunked(all.as_bytes())),
        Step::Wait(Arc::clone(&go)),
        write(chunked(&junk)),
        Step::AwaitClose,
    ])
    .await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, true);
    // An idle timeout far longer than the wait below: only the byte cap can end the read.
    req.watch = watch(2_000, 30_000, 30_000);
    let s = committed(attempt(req).await).with_heartbeat_interval_ms(0);
    let (on_finish, ends) = recorder();
    let body = concat(&chunks(s.into_body(on_finish)).await);
    assert_eq!(
        text(&body),
        all,
        "nothing after the terminal event reaches the client"
    );
    assert!(ends.lock().unwrap()[0].completed);
    go.notify_one();
    tokio::time::timeout(Duration::from_secs(5), m.closed.recv())
        .await
        .expect("the upstream connection was not closed")
        .unwrap();
    assert_eq!(crate::transport::idle_ready(), 0);
}

#[tokio::test]
async fn anthropic_readiness_waits_for_the_first_content_delta() {
    let all = [
        ANT_START,
        ANT_PING,
        ANT_BLOCK,
        ANT_DELTA,
        ANT_BLOCK_STOP,
        ANT_MSG_DELTA,
        ANT_STOP,
    ]
    .concat();
    let mut m = mock(vec![
        write(SSE_HEAD),
        write(ANT_START),
        write(ANT_PING),
        write(ANT_BLOCK),
        Step::Sleep(120),
        write([ANT_DELTA, ANT_BLOCK_STOP, ANT_MSG_DELTA, ANT_STOP].concat()),
    ])
    .await;
    let t = Instant::now();
    let s = committed(attempt(request(&m.base, ClientFormat::Anthropic, true)).await);
    // Neither message_start nor ping nor content_block_start opened the gate.
    assert!(t.elapsed() >= Duration::from_millis(120));
    assert!(s.ready_after_ms >= 120, "{s:?}");

    let seen = m.seen.recv().await.unwrap();
    assert!(seen.head.starts_with("POST /v1/messages HTTP/1.1"));
    assert_eq!(seen.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen.header("authorization"), None);

    let (on_finish, ends) = recorder();
    assert_eq!(text(&concat(&chunks(s.into_body(on_finish)).await)), all);
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert!(ends[0].completed && ends[0].saw_terminal_event);
    let usage = ends[0].usage.unwrap();
    assert_eq!((usage.input, usage.output), (Some(12), Some(3)));
}

#[tokio::test]
async fn anthropic_version_from_the_client_wins() {
    let mut m = mock(vec![response(
        "200 OK",
        &[("content-type", "application/json")],
        "{}",
    )])
    .await;
    let mut req = request(&m.base, ClientFormat::Anthropic, false);
    req.forward_headers = vec![
        (
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2024-01-01"),
        ),
        (
            HeaderName::from_static("anthropic-beta"),
            HeaderValue::from_static("tools-1"),
        ),
    ];
    assert!(matches!(attempt(req).await, AttemptResult::Json(_)));
    let seen = m.seen.recv().await.unwrap();
    assert_eq!(seen.header("anthropic-version"), Some("2024-01-01"));
    assert_eq!(seen.header("anthropic-beta"), Some("tools-1"));
}

#[tokio::test]
async fn only_pings_time_out_readiness_before_commit() {
    let mut steps = vec![write(SSE_HEAD), write(ANT_START)];
    for _ in 0..50 {
        steps.push(write(ANT_PING));
        steps.push(Step::Sleep(10));
    }
    let m = mock(steps).await;
    let mut req = request(&m.base, ClientFormat::Anthropic, true);
    req.watch = watch(80, 2_000, 2_000);
    let t = Instant::now();
    let f = failed(attempt(req).await);
    assert_eq!(f.transport, Some(TransportFailure::ReadinessTimeout));
    assert_eq!(
        f.stream_abort,
        Some(StreamAbort::ReadinessTimeout { after_ms: 80 })
    );
    assert_eq!(f.status, None);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn eof_before_content_is_an_early_eof() {
    let m = mock(vec![write(SSE_HEAD), write(ANT_START), write(ANT_PING)]).await;
    let f = failed(attempt(request(&m.base, ClientFormat::Anthropic, true)).await);
    assert_eq!(f.transport, Some(TransportFailure::EarlyEof));
    assert_eq!(f.stream_abort, Some(StreamAbort::EarlyEof));
}

#[tokio::test]
async fn an_error_event_before_content_fails_over() {
    let m = mock(vec![
        write(SSE_HEAD),
        write(ANT_START),
        write(ANT_OVERLOADED),
    ])
    .await;
    let f = failed(attempt(request(&m.base, ClientFormat::Anthropic, true)).await);
    // An overload is a provider-level transient status (Anthropic's 529), not a 502.
    assert_eq!(f.status, Some(529));
    assert!(f.in_band_error);
    assert!(f.body.contains("overloaded_error"), "{f:?}");
    assert!(f.message.contains("overloaded_error"));
}

#[tokio::test]
async fn a_stream_request_answered_with_json_is_not_committed() {
    let m = mock(vec![response(
        "200 OK",
        &[("content-type", "application/json")],
        r#"{"error":{"message":"bad","type":"server_error"}}"#,
    )])
    .await;
    let f = failed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await);
    assert!(f.in_band_error);
    let m = mock(vec![response("503 Service Unavailable", &[], "busy")]).await;
    let f = failed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await);
    assert_eq!((f.status, f.body.as_str()), (Some(503), "busy"));
}

// ---- committed streams ---------------------------------------------------------------------

#[tokio::test]
async fn a_stall_after_commit_ends_with_one_in_band_error() {
    // Pings keep the idle watchdog fed, but no content arrives: the stall watchdog fires.
    let mut steps = vec![write(SSE_HEAD), write(ANT_START), write(ANT_DELTA)];
    for _ in 0..100 {
        steps.push(write(ANT_PING));
        steps.push(Step::Sleep(10));
    }
    let m = mock(steps).await;
    let mut req = request(&m.base, ClientFormat::Anthropic, true);
    req.watch = watch(2_000, 2_000, 80);
    let s = committed(attempt(req).await).with_heartbeat_interval_ms(0);
    let (on_finish, ends) = recorder();
    let t = Instant::now();
    let body = text(&concat(&chunks(s.into_body(on_finish)).await));
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(body.starts_with(&[ANT_START, ANT_DELTA].concat()));
    assert_eq!(body.matches("event: error").count(), 1, "{body}");
    assert!(body.ends_with("\n\n"));
    assert!(body.contains("stream_stall_timeout"));
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].abort, Some(StreamAbort::Stall { after_ms: 80 }));
    assert_eq!(ends[0].transport, Some(TransportFailure::Stall));
    assert!(!ends[0].completed && !ends[0].client_disconnected);
}

#[tokio::test]
async fn silence_after_commit_is_an_idle_timeout() {
    let m = mock(vec![write(SSE_HEAD), write(CHAT_HELLO), Step::Sleep(5_000)]).await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, true);
    req.watch = watch(2_000, 150, 2_000);
    let s = committed(attempt(req).await).with_heartbeat_interval_ms(0);
    let (on_finish, ends) = recorder();
    let body = text(&concat(&chunks(s.into_body(on_finish)).await));
    assert_eq!(body.matches("stream_idle_timeout").count(), 1, "{body}");
    assert!(body.starts_with(CHAT_HELLO));
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert_eq!(
        ends[0].abort,
        Some(StreamAbort::IdleTimeout { after_ms: 150 })
    );
}

#[tokio::test]
async fn dropping_the_body_cancels_upstream_and_reports_a_disconnect() {
    let mut m = mock(vec![write(SSE_HEAD), write(CHAT_HELLO), Step::AwaitClose]).await;
    let s = committed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await);
    let (on_finish, ends) = recorder();
    let mut body = Box::pin(s.into_body(on_finish));
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(first, CHAT_HELLO.as_bytes());
    assert!(ends.lock().unwrap().is_empty());
    drop(body);
    {
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1);
        assert!(ends[0].client_disconnected && !ends[0].completed);
        assert_eq!(ends[0].transport, Some(TransportFailure::ClientAbort));
        assert_eq!(ends[0].bytes, CHAT_HELLO.len() as u64);
    }
    // The upstream sees its connection closed.
    tokio::time::timeout(Duration::from_secs(2), m.closed.recv())
        .await
        .expect("upstream connection was not closed")
        .unwrap();
}

#[tokio::test]
async fn keep_alives_fill_upstream_silence_only_between_events() {
    let (first, second) = CHAT_STOP.split_at(30);
    let m = mock(vec![
        write(SSE_HEAD),
        write(CHAT_HELLO),
        Step::Sleep(150),
        // Silence in the middle of an event must not be bridged.
        write(first),
        Step::Sleep(150),
        write(second),
        write(CHAT_DONE),
    ])
    .await;
    let s = committed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await)
        .with_heartbeat_interval_ms(30);
    let (on_finish, ends) = recorder();
    let parts = chunks(s.into_body(on_finish)).await;
    let keep_alive = b": keep-alive\n\n";
    let bridged = parts.iter().filter(|c| c.as_ref() == keep_alive).count();
    assert!(bridged >= 2, "{parts:?}");
    // Every keep-alive comes before the split event; the upstream bytes are intact.
    let upstream: Vec<u8> = concat(
        &parts
            .iter()
            .filter(|c| c.as_ref() != keep_alive)
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(text(&upstream), [CHAT_HELLO, CHAT_STOP, CHAT_DONE].concat());
    let first_part = parts
        .iter()
        .position(|c| c.ends_with(first.as_bytes()))
        .unwrap();
    assert!(
        parts[first_part..].iter().all(|c| c.as_ref() != keep_alive),
        "{parts:?}"
    );
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert!(ends[0].completed);
}

#[tokio::test]
async fn a_committed_stream_that_keeps_delivering_outlives_the_attempt_deadline() {
    let m = mock(vec![
        write(SSE_HEAD),
        write(CHAT_HELLO),
        Step::Sleep(300),
        write(CHAT_HELLO),
        Step::Sleep(300),
        write(CHAT_STOP),
        write(CHAT_DONE),
    ])
    .await;
    let mut req = request(&m.base, ClientFormat::OpenAiChat, true);
    req.deadline_ms = Some(req.clock.now() + 200);
    let s = committed(attempt(req).await).with_heartbeat_interval_ms(0);
    let (on_finish, ends) = recorder();
    let body = text(&concat(&chunks(s.into_body(on_finish)).await));
    assert!(!body.contains("attempt_deadline_exceeded"), "{body}");
    assert!(body.ends_with(CHAT_DONE), "{body}");
    let ends = ends.lock().unwrap();
    assert!(ends[0].completed, "{:?}", ends[0]);
    assert_eq!(ends[0].transport, None);
}

#[tokio::test]
async fn a_read_error_after_commit_closes_the_partial_event_then_reports() {
    let (first, _) = CHAT_STOP.split_at(30);
    let m = mock(vec![
        write(SSE_CHUNKED_HEAD),
        write(chunked(CHAT_HELLO.as_bytes())),
        // Cut off mid-event and mid-message: the chunked body never terminates.
        write(chunked(first.as_bytes())),
        write(b"40\r\npartial"),
    ])
    .await;
    let s = committed(attempt(request(&m.base, ClientFormat::OpenAiChat, true)).await);
    let (on_finish, ends) = recorder();
    let parts = chunks(s.into_body(on_finish)).await;
    let last = text(parts.last().unwrap());
    assert!(last.starts_with("\n\ndata: {\"error\""), "{parts:?}");
    assert!(last.contains("upstream_stream_error"));
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].transport, Some(TransportFailure::ConnectionReset));
    assert!(!ends[0].completed);
}

/// End to end through actix-web: the client vanishes while the upstream is silent; only the
/// keep-alive writes let actix notice, drop the body and so close the upstream connection.
#[actix_rt::test]
async fn a_vanished_client_is_noticed_through_keep_alives() {
    use actix_web::{App, HttpServer, web};

    let mut m = mock(vec![write(SSE_HEAD), write(CHAT_HELLO), Step::AwaitClose]).await;
    let ends: Ends = Arc::default();
    let (base, sink) = (m.base.clone(), Arc::clone(&ends));
    let server = HttpServer::new(move || {
        let (base, sink) = (base.clone(), Arc::clone(&sink));
        App::new().route(
            "/v1/chat/completions",
            web::post().to(move || {
                let (base, sink) = (base.clone(), Arc::clone(&sink));
                async move {
                    let req = request(&base, ClientFormat::OpenAiChat, true);
                    let AttemptResult::Stream(s) = attempt(req).await else {
                        return HttpResponse::BadGateway().finish();
                    };
                    let on_finish = Box::new(move |end| sink.lock().unwrap().push(end));
                    HttpResponse::Ok()
                        .content_type("text/event-stream")
                        .streaming(s.with_heartbeat_interval_ms(30).into_body(on_finish))
                }
            }),
        )
    })
    .workers(1)
    .disable_signals()
    .bind(("127.0.0.1", 0))
    .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);

    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !text(&got).contains("Hello") {
        let n = client.read(&mut buf).await.unwrap();
        assert!(n > 0, "router closed early: {}", text(&got));
        got.extend_from_slice(&buf[..n]);
    }
    drop(client);

    tokio::time::timeout(Duration::from_secs(3), m.closed.recv())
        .await
        .expect("upstream connection was not closed")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(1);
    while ends.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    {
        let ends = ends.lock().unwrap();
        assert_eq!(ends.len(), 1);
        assert!(ends[0].client_disconnected);
    }
    handle.stop(false).await;
}
