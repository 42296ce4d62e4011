//! OpenTelemetry traces of a real node, received by an OTLP/HTTP receiver started by the test
//! (it decodes `ExportTraceServiceRequest` with the OpenTelemetry proto crate): one server
//! span per client request, parented on the client's `traceparent`; a client span per
//! upstream attempt, whose context the mock upstream receives as `traceparent`; the GenAI
//! attributes and Switchyard's own. A collector that is down or stalled costs spans, never
//! requests; and without the `OTEL_*` environment nothing is exported or propagated.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::{Value, json};
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle, Route};

use crate::support::node::{NO_QUEUE_NO_WAIT, Node, PRELUDE, connection, mock, provider};
use crate::support::{STATE_DEADLINE, eventually};

const KEY_A: &str = "sk-otel-a-1111";
const KEY_B: &str = "sk-otel-b-2222";
const SPAN_KIND_SERVER: i32 = 2;
const SPAN_KIND_CLIENT: i32 = 3;
const STATUS_ERROR: i32 = 2;

/// One received span, flattened.
#[derive(Debug, Clone)]
struct Got {
    service: String,
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    kind: i32,
    status: i32,
    attrs: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
}

impl Got {
    fn attr(&self, key: &str) -> &str {
        self.attrs.get(key).map_or("", String::as_str)
    }
}

/// An OTLP/HTTP receiver on 127.0.0.1: `POST /v1/traces` with a protobuf body.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Got>>>,
    posts: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let posts = Arc::new(Mutex::new(0));
        let (s, p) = (spans.clone(), posts.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (s, p) = (s.clone(), p.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| receive(req, s.clone(), p.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver {
            addr,
            spans,
            posts,
            task,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    fn trace(&self, trace_id: &str) -> Vec<Got> {
        self.spans()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }

    /// The spans of `trace_id` once there are `n` of them.
    async fn wait_trace(&self, trace_id: &str, n: usize, node: &Node) -> Vec<Got> {
        let spans = eventually(STATE_DEADLINE, || {
            let t = self.trace(trace_id);
            std::future::ready((t.len() >= n).then_some(t))
        })
        .await;
        spans.unwrap_or_else(|| {
            panic!(
                "trace {trace_id}: wanted {n} spans, got {:#?}\nnode log:\n{}",
                self.spans(),
                node.log()
            )
        })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    req: Request<Incoming>,
    spans: Arc<Mutex<Vec<Got>>>,
    posts: Arc<Mutex<usize>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    if path == "/v1/traces"
        && let Ok(export) = ExportTraceServiceRequest::decode(body)
    {
        *posts.lock().unwrap() += 1;
        let mut got = spans.lock().unwrap();
        for rs in export.resource_spans {
            let service = rs
                .resource
                .map(|r| attrs(&r.attributes))
                .and_then(|a| a.get("service.name").cloned())
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(Got {
                        service: service.clone(),
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        name: s.name,
                        kind: s.kind,
                        status: s.status.map_or(0, |st| st.code),
                        attrs: attrs(&s.attributes),
                        events: s
                            .events
                            .into_iter()
                            .map(|e| (e.name, attrs(&e.attributes)))
                            .collect(),
                    });
                }
            }
        }
    }
    let reply = ExportTraceServiceResponse::default().encode_to_vec();
    Ok(Response::builder()
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::from(reply)))
        .unwrap())
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn config(mock: &MockHandle) -> String {
    format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}",
        provider("p", "apikey", mock, ""),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
    )
}

fn traced_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("KEY_A", KEY_A.to_owned()),
        ("KEY_B", KEY_B.to_owned()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_owned()),
        ("OTEL_SERVICE_NAME", "switchyard-under-test".to_owned()),
        // Export every 100 ms instead of every 5 s: the test waits for the spans.
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ]
}

async fn start(config: String, env: &[(&'static str, String)]) -> Node {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Node::start(config, &env).await
}

/// A client `traceparent` for trace `n`, and its trace and span ids.
fn client_parent(n: u8) -> (String, String, String) {
    let trace = format!("{n:02x}{}", "ab".repeat(15));
    let span = format!("{n:02x}{}", "cd".repeat(7));
    (format!("00-{trace}-{span}-01"), trace, span)
}

async fn post(node: &Node, traceparent: &str, body: Value) -> (u16, String) {
    let resp = node
        .http
        .post(format!("{}/v1/chat/completions", node.proc.client_url()))
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("request failed: {e}\nnode log:\n{}", node.log()));
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

fn chat(stream: bool) -> Value {
    let mut body = json!({
        "model": "p/mock-model",
        "messages": [{"role": "user", "content": "hi"}],
    });
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// The `traceparent` values the mock received with `key`.
fn upstream_traceparents(mock: &MockHandle, key: &str) -> Vec<String> {
    mock.stats()
        .recent_headers
        .get(key)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|(n, _)| n.eq_ignore_ascii_case("traceparent"))
        .map(|(_, v)| v.clone())
        .collect()
}

fn one<'a>(spans: &'a [Got], what: &str, pick: impl Fn(&Got) -> bool) -> &'a Got {
    let found: Vec<&Got> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_attempts_arrive_as_spans_with_the_client_trace() {
    let receiver = Receiver::start().await;
    let mock = mock().await;
    let node = start(config(&mock), &traced_env(&receiver.endpoint())).await;
    let mock_port = mock.base_url().rsplit(':').next().unwrap().to_owned();

    // 1. JSON, answered by `a`.
    let (tp1, trace1, client_span1) = client_parent(1);
    let (status, text) = post(&node, &tp1, chat(false)).await;
    assert_eq!(status, 200, "{text}");
    let spans = receiver.wait_trace(&trace1, 2, &node).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let req = one(&spans, "request span", |s| s.kind == SPAN_KIND_SERVER);
    assert_eq!(req.name, "POST /v1/chat/completions");
    assert_eq!(req.parent, client_span1, "the client's span is the parent");
    assert_eq!(req.service, "switchyard-under-test");
    assert_eq!(req.attr("gen_ai.request.model"), "p/mock-model");
    assert_eq!(req.attr("gen_ai.response.model"), "mock-model");
    assert_eq!(req.attr("gen_ai.system"), "openai");
    assert_eq!(req.attr("http.response.status_code"), "200");
    assert_eq!(req.attr("switchyard.connection"), "a");
    assert_eq!(req.attr("switchyard.attempts"), "1");
    assert!(
        req.attr("gen_ai.usage.input_tokens")
            .parse::<u64>()
            .unwrap()
            > 0,
        "{req:#?}"
    );
    assert!(
        req.attr("gen_ai.usage.output_tokens")
            .parse::<u64>()
            .unwrap()
            > 0,
        "{req:#?}"
    );
    assert!(!req.attrs.contains_key("error.type"), "{req:#?}");
    let att = one(&spans, "attempt span", |s| s.kind == SPAN_KIND_CLIENT);
    assert_eq!(
        att.parent, req.span_id,
        "the attempt is the request's child"
    );
    assert_eq!(att.name, "chat mock-model");
    assert_eq!(att.attr("gen_ai.request.model"), "mock-model");
    assert_eq!(att.attr("gen_ai.response.model"), "mock-model");
    assert_eq!(att.attr("gen_ai.system"), "openai");
    assert_eq!(att.attr("server.address"), "127.0.0.1");
    assert_eq!(att.attr("server.port"), mock_port);
    assert_eq!(att.attr("switchyard.connection"), "a");
    assert_eq!(att.attr("switchyard.provider"), "p");
    assert!(
        att.attr("gen_ai.usage.output_tokens")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    // The upstream saw the attempt span's context, in the client's trace.
    assert_eq!(
        upstream_traceparents(&mock, KEY_A),
        vec![format!("00-{trace1}-{}-01", att.span_id)]
    );

    // 2. A stream: the request span ends with the stream and carries its usage.
    let (tp2, trace2, _) = client_parent(2);
    let (status, text) = post(&node, &tp2, chat(true)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("[DONE]"), "{text}");
    let spans = receiver.wait_trace(&trace2, 2, &node).await;
    let req = one(&spans, "stream request span", |s| {
        s.kind == SPAN_KIND_SERVER
    });
    assert_eq!(req.attr("switchyard.stream"), "true");
    assert_eq!(req.attr("switchyard.stream.end"), "completed");
    assert!(
        req.attr("gen_ai.usage.output_tokens")
            .parse::<u64>()
            .unwrap()
            > 0,
        "{req:#?}"
    );
    let att = one(&spans, "stream attempt span", |s| {
        s.kind == SPAN_KIND_CLIENT
    });
    assert_eq!(att.parent, req.span_id);
    assert_eq!(att.attr("switchyard.stream"), "committed");

    // 3. `a` answers 503 once: the request fails over to `b`, two attempts under one request.
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(1),
    )
    .unwrap();
    let (tp3, trace3, client_span3) = client_parent(3);
    let (status, text) = post(&node, &tp3, chat(false)).await;
    assert_eq!(status, 200, "{text}");
    let spans = receiver.wait_trace(&trace3, 3, &node).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let req = one(&spans, "failover request span", |s| {
        s.kind == SPAN_KIND_SERVER
    });
    assert_eq!(req.parent, client_span3);
    assert_eq!(req.attr("switchyard.connection"), "b");
    assert_eq!(req.attr("switchyard.attempts"), "2");
    let failed = one(&spans, "failed attempt", |s| {
        s.kind == SPAN_KIND_CLIENT && s.attr("switchyard.connection") == "a"
    });
    assert_eq!(failed.parent, req.span_id);
    assert_eq!(failed.kind, SPAN_KIND_CLIENT);
    assert_eq!(failed.status, STATUS_ERROR, "{failed:#?}");
    assert!(!failed.attr("error.type").is_empty(), "{failed:#?}");
    assert_eq!(failed.attr("http.response.status_code"), "503");
    assert_eq!(failed.attr("switchyard.failure.reason"), "model_capacity");
    assert!(
        !failed.attr("switchyard.cooldown.decision").is_empty(),
        "{failed:#?}"
    );
    assert!(
        !failed.attr("switchyard.breaker.outcome").is_empty(),
        "{failed:#?}"
    );
    assert_eq!(failed.attr("switchyard.next"), "retry");
    let ok = one(&spans, "second attempt", |s| {
        s.kind == SPAN_KIND_CLIENT && s.attr("switchyard.connection") == "b"
    });
    assert_eq!(ok.parent, req.span_id);
    assert!(!ok.attrs.contains_key("error.type"), "{ok:#?}");
    // Each upstream request carried its own attempt's context.
    assert!(
        upstream_traceparents(&mock, KEY_A).contains(&format!("00-{trace3}-{}-01", failed.span_id)),
        "{:?}",
        mock.stats().recent_headers
    );
    assert_eq!(
        upstream_traceparents(&mock, KEY_B),
        vec![format!("00-{trace3}-{}-01", ok.span_id)]
    );

    // 4. A request without a valid `traceparent` starts its own trace; an error marks it.
    let (status, _) = post(
        &node,
        "not-a-traceparent",
        json!({"model": "nosuch/model", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert!(status >= 400);
    let root = eventually(STATE_DEADLINE, || {
        let found = receiver
            .spans()
            .into_iter()
            .find(|s| s.kind == SPAN_KIND_SERVER && s.status == STATUS_ERROR);
        std::future::ready(found)
    })
    .await
    .unwrap_or_else(|| panic!("no span for the failed request: {:#?}", receiver.spans()));
    assert!(root.parent.is_empty(), "{root:#?}");
    assert!(![trace1, trace2, trace3].contains(&root.trace_id));
    assert!(!root.attr("error.type").is_empty(), "{root:#?}");
    assert_eq!(root.attr("http.response.status_code"), status.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_targets_are_events_on_the_request_span() {
    let receiver = Receiver::start().await;
    let mock = mock().await;
    let config = format!(
        "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}{}\n[[combos]]\nname = \"both\"\ntargets = [{{ target = \"q/mock-model\" }}, {{ target = \"p/mock-model\" }}]\n",
        provider("p", "apikey", &mock, ""),
        connection("a", "p", "KEY_A", ""),
        provider("q", "apikey", &mock, ""),
        connection("c", "q", "KEY_B", ""),
    );
    let node = start(config, &traced_env(&receiver.endpoint())).await;
    // q's only connection answers 503: the combo leaves q and goes on to p.
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .for_key(KEY_B),
    )
    .unwrap();
    let (tp, trace, _) = client_parent(9);
    let body = json!({"model": "both", "messages": [{"role": "user", "content": "hi"}]});
    let (status, text) = post(&node, &tp, body.clone()).await;
    assert_eq!(status, 200, "{text}");
    let spans = receiver.wait_trace(&trace, 3, &node).await;
    let req = one(&spans, "combo request", |s| s.kind == SPAN_KIND_SERVER);
    assert_eq!(req.attr("switchyard.connection"), "a");
    let skip = req
        .events
        .iter()
        .find(|(name, _)| name == "target skipped")
        .unwrap_or_else(|| panic!("no skip event: {req:#?}"));
    assert_eq!(skip.1["switchyard.route_target"], "q/mock-model");
    assert_eq!(skip.1["switchyard.provider"], "q");
    assert!(!skip.1["switchyard.skip.reason"].is_empty(), "{skip:?}");
    let failed = one(&spans, "q's attempt", |s| {
        s.kind == SPAN_KIND_CLIENT && s.attr("switchyard.connection") == "c"
    });
    assert_eq!(failed.status, STATUS_ERROR, "{failed:#?}");
    assert!(!failed.attr("switchyard.next").is_empty(), "{failed:#?}");
    // The trace events stay out of the JSON log: lines are written in order, so once the
    // request's access line is there, a skip event logged before it would be too.
    let log = node
        .proc
        .wait_for_log(STATE_DEADLINE, |l| l.contains(r#""model":"both""#));
    assert!(log.contains(r#""model":"both""#), "{log}");
    assert!(
        !log.contains("target skipped") && !log.contains("switchyard::otel"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_committed_early_keeps_its_trace() {
    // The first content is late, so the node commits 200 with keep-alives and routes on in a
    // task of its own: the spans must follow the request there.
    let receiver = Receiver::start().await;
    let mock = mock().await;
    let config = format!(
        "{}\n[resilience.stream]\nearly_keepalive_after_ms = 100\n",
        config(&mock)
    );
    let node = start(config, &traced_env(&receiver.endpoint())).await;
    mock.script(FaultSpec {
        first_chunk_delay_ms: Some(600),
        ..FaultSpec::new().on_route(Route::ChatCompletions).times(1)
    })
    .unwrap();
    let (tp, trace, client_span) = client_parent(7);
    let resp = node
        .http
        .post(format!("{}/v1/chat/completions", node.proc.client_url()))
        .header("content-type", "application/json")
        .header("traceparent", &tp)
        .body(chat(true).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let early = resp
        .headers()
        .get("x-switchyard-early-keepalive")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = resp.text().await.unwrap();
    assert_eq!(early.as_deref(), Some("1"), "{text}");
    assert!(text.contains("[DONE]"), "{text}");
    let spans = receiver.wait_trace(&trace, 2, &node).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let req = one(&spans, "request span", |s| s.kind == SPAN_KIND_SERVER);
    assert_eq!(req.parent, client_span);
    assert_eq!(req.attr("switchyard.connection"), "a");
    assert_eq!(req.attr("switchyard.stream.end"), "completed");
    assert!(
        req.attr("gen_ai.usage.output_tokens")
            .parse::<u64>()
            .unwrap()
            > 0,
        "{req:#?}"
    );
    let att = one(&spans, "attempt span", |s| s.kind == SPAN_KIND_CLIENT);
    assert_eq!(att.parent, req.span_id);
    assert_eq!(
        upstream_traceparents(&mock, KEY_A),
        vec![format!("00-{trace}-{}-01", att.span_id)]
    );
}

/// Starts a traced node whose collector never answers or is not there, and checks that each
/// of a run of requests is answered well inside the exporter's 10 s timeout.
async fn requests_stay_prompt(endpoint: String, extra: &[(&'static str, &str)]) {
    let mock = mock().await;
    let mut env = traced_env(&endpoint);
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let node = start(config(&mock), &env).await;
    let log = node
        .proc
        .wait_for_log(STATE_DEADLINE, |l| l.contains("OpenTelemetry traces on"));
    assert!(log.contains("OpenTelemetry traces on"), "{log}");
    for i in 0..40u8 {
        let started = Instant::now();
        let (tp, _, _) = client_parent(i);
        let (status, text) = post(&node, &tp, chat(i % 2 == 1)).await;
        assert_eq!(status, 200, "request {i}: {text}");
        // Loopback answers take milliseconds; an export on the request path would wait for
        // the collector (a 10 s timeout).
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "request {i} took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_costs_no_request_time() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    requests_stay_prompt(endpoint, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_collector_drops_spans_not_requests() {
    // Accepts connections and never answers: every export waits for its timeout, and the
    // small queue overflows.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            open.push(s);
        }
    });
    requests_stay_prompt(endpoint, &[("OTEL_BSP_MAX_QUEUE_SIZE", "4")]).await;
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_off_by_default_and_when_disabled() {
    let receiver = Receiver::start().await;
    let mock = mock().await;
    let keys = [("KEY_A", KEY_A.to_owned()), ("KEY_B", KEY_B.to_owned())];
    // No OTEL_* endpoint at all (the default), and an endpoint with the SDK disabled.
    let default = start(config(&mock), &keys).await;
    let mut disabled_env = traced_env(&receiver.endpoint());
    disabled_env.push(("OTEL_SDK_DISABLED", "true".to_owned()));
    disabled_env.push(("OTEL_SERVICE_NAME", "disabled-node".to_owned()));
    let disabled = start(config(&mock), &disabled_env).await;
    for (n, node) in [(1u8, &default), (2, &disabled)] {
        let (tp, _, _) = client_parent(n);
        for stream in [false, true] {
            let (status, text) = post(node, &tp, chat(stream)).await;
            assert_eq!(status, 200, "{text}");
        }
        assert!(!node.log().contains("OpenTelemetry"), "{}", node.log());
    }
    // Nothing is propagated upstream either: the client's `traceparent` is not forwarded.
    assert!(
        !mock.stats().any_request_had_header("traceparent"),
        "{:?}",
        mock.stats().recent_headers
    );
    // A traced node, as a barrier: once its spans have arrived, anything the others had
    // exported (every 100 ms) would have too.
    let traced = start(config(&mock), &traced_env(&receiver.endpoint())).await;
    let (tp, trace, _) = client_parent(3);
    assert_eq!(post(&traced, &tp, chat(false)).await.0, 200);
    receiver.wait_trace(&trace, 2, &traced).await;
    let spans = receiver.spans();
    assert!(
        spans
            .iter()
            .all(|s| s.service == "switchyard-under-test" && s.trace_id == trace),
        "{spans:#?}"
    );
    assert!(*receiver.posts.lock().unwrap() >= 1);
}

/// Head sampling at 0 % for new traces (`parentbased_traceidratio`, ratio 0): a request
/// without a client trace builds no span and sends no `traceparent` upstream, while a client's
/// sampled trace is still followed, and a client's unsampled one is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_head_sampler_decides_before_any_span_exists() {
    let receiver = Receiver::start().await;
    let mock = mock().await;
    let mut env = traced_env(&receiver.endpoint());
    env.push(("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".to_owned()));
    env.push(("OTEL_TRACES_SAMPLER_ARG", "0".to_owned()));
    let node = start(config(&mock), &env).await;

    for _ in 0..5 {
        let (status, text) = post(&node, "not-a-traceparent", chat(false)).await;
        assert_eq!(status, 200, "{text}");
    }
    let (unsampled, unsampled_trace, _) = client_parent(7);
    let unsampled = unsampled.replace("-01", "-00");
    let (status, text) = post(&node, &unsampled, chat(false)).await;
    assert_eq!(status, 200, "{text}");
    let (sampled, trace, _) = client_parent(8);
    let (status, text) = post(&node, &sampled, chat(false)).await;
    assert_eq!(status, 200, "{text}");

    // The sampled trace arrives (request and attempt), and it is the only one.
    let spans = receiver.wait_trace(&trace, 2, &node).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let all = receiver.spans();
    assert!(
        all.iter().all(|s| s.trace_id == trace),
        "only the client's sampled trace may be exported: {all:#?}"
    );
    assert!(receiver.trace(&unsampled_trace).is_empty());
    let upstream = upstream_traceparents(&mock, KEY_A);
    assert_eq!(upstream.len(), 1, "{upstream:?}");
    assert!(upstream[0].contains(&trace), "{upstream:?}");
}
