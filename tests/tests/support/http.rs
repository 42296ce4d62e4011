//! Helpers shared by the black-box node scenario tests (streams, errors, combos, SDKs): config
//! snippets, starting a node next to in-process mock upstreams, HTTP calls that keep every
//! response for later checks, and a strict SSE parser.
//!
//! Each test binary uses a different subset, so unused helpers are expected here.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::{STATE_DEADLINE, eventually};
use serde_json::{Value, json};
use switchyard_tests::harness::{NodeProcess, http_get_status};
use switchyard_tests::mock_upstream::{MockConfig, MockHandle, MockUpstream};

// === config snippets ===

/// `[auth]` without client keys, and the request queue off (it would pace requests at
/// 350 ms apart, which no test here is about).
pub fn open_auth_no_queue() -> String {
    format!("{}{}", open_auth(), queue_off())
}

/// `[auth]` without client keys; the management API is on (with [`MGMT_KEY`]), so a test can
/// read the node's state.
pub fn open_auth() -> String {
    "\n[auth]\nrequire_api_key = false\nmanagement_key_env = \"SWITCHYARD_MANAGEMENT_KEY\"\n"
        .to_owned()
}

/// The management key [`start_node`] puts in `SWITCHYARD_MANAGEMENT_KEY` for every node.
pub const MGMT_KEY: &str = "mgmt-node-scenarios-http-7b2a";

pub fn queue_off() -> String {
    "\n[resilience.request_queue]\nauto_enable_apikey_providers = false\n".to_owned()
}

/// A `[[providers]]` entry. `extra` holds plain `key = value` lines of the provider table;
/// `timeouts` holds `key = value` lines of its `[providers.timeouts]` (empty = defaults).
pub fn provider(
    id: &str,
    format: &str,
    base_url: &str,
    models: &[&str],
    extra: &str,
    timeouts: &str,
) -> String {
    let models: Vec<String> = models.iter().map(|m| format!("\"{m}\"")).collect();
    let mut out = format!(
        "\n[[providers]]\nid = \"{id}\"\ncategory = \"apikey\"\nformat = \"{format}\"\n\
         base_url = \"{base_url}/v1\"\nmodels = [{}]\n{extra}\n",
        models.join(", ")
    );
    if !timeouts.is_empty() {
        out.push_str(&format!("[providers.timeouts]\n{timeouts}\n"));
    }
    out
}

/// The start most cluster tests share: two workers, [`open_auth`], and one `apikey` provider
/// `p` on `base_url` serving `models`, with short timeouts (`timeouts_extra` adds lines to its
/// `[providers.timeouts]`). The test appends its connections and resilience sections.
pub fn cluster_provider(base_url: &str, models: &[&str], timeouts_extra: &str) -> String {
    let timeouts = format!(
        "connect_ms = 1000\nheaders_ms = 5000\nfirst_content_ms = 5000\nidle_ms = 5000\n{timeouts_extra}"
    );
    format!(
        "\n[server]\nworkers = 2\n{}{}",
        open_auth(),
        provider("p", "openai", base_url, models, "", &timeouts)
    )
}

/// The request queue and the wait for cooldowns off: every decision shows at once.
pub fn queue_and_wait_off() -> String {
    format!(
        "{}\n[resilience.wait_for_cooldown]\nenabled = false\n",
        queue_off()
    )
}

/// A `[[connections]]` entry whose upstream key is read from `key_env`.
pub fn connection(id: &str, provider: &str, key_env: &str, extra: &str) -> String {
    format!(
        "\n[[connections]]\nid = \"{id}\"\nprovider = \"{provider}\"\napi_key_env = \"{key_env}\"\n{extra}\n"
    )
}

// === processes ===

/// Starts a mock upstream answering streams with `chunks` content frames.
pub async fn mock(chunks: u32) -> MockHandle {
    MockUpstream::start(MockConfig {
        chunks,
        ..MockConfig::default()
    })
    .await
    .expect("mock upstream starts")
}

/// Starts the real node binary (off the async threads: the harness polls `/readyz` blocking).
pub async fn start_node(config: String, mut env: Vec<(String, String)>) -> NodeProcess {
    env.push(("SWITCHYARD_MANAGEMENT_KEY".to_owned(), MGMT_KEY.to_owned()));
    // A second try covers the harness's free-port race (a port picked, released and taken by
    // another process before the node binds it); a config the node rejects fails both.
    let joined = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        NodeProcess::start(&config, &env)
            .or_else(|first| {
                NodeProcess::start(&config, &env)
                    .map_err(|second| format!("{first}\n--- second try ---\n{second}"))
            })
            .map_err(|e| format!("{e}\n--- config ---\n{config}"))
    })
    .await
    .expect("start task");
    match joined {
        Ok(node) => node,
        Err(e) => panic!("switchyard-node did not start: {e}"),
    }
}

/// The connection's row of `GET /api/resilience/cooldowns`: the snapshot its actor
/// published, which is what requests read. Needs the management API on (see [`open_auth`]).
pub async fn cooldown_row(node: &NodeProcess, id: &str) -> Value {
    let list = send(
        http()
            .get(format!("{}/api/resilience/cooldowns", node.admin_url()))
            .bearer_auth(MGMT_KEY),
    )
    .await;
    assert_eq!(list.status, 200, "GET /api/resilience/cooldowns: {list:#?}");
    let list = list.json();
    list["connections"]
        .as_array()
        .and_then(|rows| rows.iter().find(|c| c["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("no cooldown row for {id}: {list}"))
}

/// Observations reach the connection actors asynchronously (the request path never waits for
/// them): waits until the connection's cooldown row satisfies `holds`, and returns that row.
pub async fn wait_connection(
    node: &NodeProcess,
    id: &str,
    what: &str,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    let found = eventually(STATE_DEADLINE, || async {
        let row = cooldown_row(node, id).await;
        holds(&row).then_some(row)
    })
    .await;
    match found {
        Some(row) => row,
        None => panic!(
            "connection {id}: timed out waiting for {what}; last row: {}\nnode log:\n{}",
            cooldown_row(node, id).await,
            node.log()
        ),
    }
}

/// Waits until no client request is in flight on the node (`switchyard_in_flight_requests`
/// on `/metrics` is 0): every request has been finalised (permits released, observations
/// sent, access line written).
pub async fn wait_idle(node: &NodeProcess) {
    let metrics = format!("{}/metrics", node.admin_url());
    let idle = eventually(STATE_DEADLINE, || async {
        let r = send(http().get(&metrics)).await;
        r.body
            .lines()
            .find_map(|l| l.strip_prefix("switchyard_in_flight_requests "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            == Some(0.0)
    })
    .await;
    assert!(idle, "requests still in flight; log:\n{}", node.log());
}

/// Waits until the connection's actor has set a cooldown on it.
pub async fn wait_cooling(node: &NodeProcess, id: &str) -> Value {
    wait_connection(node, id, "a cooldown", |row| {
        row["cooldownRemainingMs"].as_u64().unwrap_or(0) > 0
    })
    .await
}

/// `(name, value)` pairs for [`start_node`].
pub fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Asserts the admin `/healthz` answers 200 (the node survived whatever came before).
pub async fn assert_healthy(node: &NodeProcess, after: &str) {
    let admin = node.admin;
    let status = tokio::task::spawn_blocking(move || http_get_status(admin, "/healthz"))
        .await
        .expect("healthz task");
    assert_eq!(
        status,
        Some(200),
        "node unhealthy after {after}; log:\n{}",
        node.log()
    );
}

// === HTTP ===

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .pool_max_idle_per_host(0)
        .build()
        .expect("reqwest client")
}

/// A complete (non-streamed) response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.body))
    }

    /// The connection that answered (`x-switchyard-connection`).
    pub fn connection(&self) -> String {
        self.header("x-switchyard-connection")
            .unwrap_or_else(|| panic!("no x-switchyard-connection: {self:?}"))
            .to_owned()
    }

    /// `x-switchyard-attempts` as a number.
    pub fn attempts(&self) -> u32 {
        self.header("x-switchyard-attempts")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no x-switchyard-attempts: {self:?}"))
    }

    /// Everything a client could read, for secret scans.
    pub fn everything(&self) -> String {
        let mut s = format!("{}\n", self.status);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&self.body);
        s
    }

    /// Asserts status, `error.type` and `error.code` of an OpenAI-envelope error.
    pub fn assert_error(&self, status: u16, error_type: &str, code: &str) -> Value {
        assert_eq!(self.status, status, "status of {self:#?}");
        let v = self.json();
        assert_eq!(v["error"]["type"], error_type, "error.type of {v}");
        assert_eq!(v["error"]["code"], code, "error.code of {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "error.message of {v}"
        );
        let ct = self.header("content-type").unwrap_or("");
        assert!(ct.starts_with("application/json"), "content-type {ct:?}");
        v
    }
}

fn headers_of(resp: &reqwest::Response) -> Vec<(String, String)> {
    resp.headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Sends a request and reads the whole body.
pub async fn send(req: reqwest::RequestBuilder) -> Reply {
    let resp = req.send().await.expect("request reaches the node");
    let status = resp.status().as_u16();
    let headers = headers_of(&resp);
    let body = resp.text().await.expect("body");
    Reply {
        status,
        headers,
        body,
    }
}

/// POSTs JSON to the node's client listener.
pub async fn post(c: &reqwest::Client, base: &str, path: &str, body: &Value) -> Reply {
    send(c.post(format!("{base}{path}")).json(body)).await
}

pub fn chat(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "Say hello"}],
    })
}

pub fn messages(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 64,
        "stream": stream,
        "messages": [{"role": "user", "content": "Say hello"}],
    })
}

/// The text the mock streams for `n` content chunks.
pub fn mock_text(n: usize) -> String {
    const WORDS: [&str; 12] = [
        "Hello",
        " from",
        " the",
        " mock",
        " upstream",
        ",",
        " a",
        " stand-in",
        " for",
        " a",
        " real",
        " model.",
    ];
    (0..n).map(|i| WORDS[i % WORDS.len()]).collect()
}

// === streams ===

/// A streamed response with arrival times.
#[derive(Debug, Clone)]
pub struct StreamReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub raw: String,
    /// Milliseconds from sending the request to each body chunk.
    pub chunk_times_ms: Vec<(u64, String)>,
    /// Milliseconds from sending the request to the response head.
    pub head_ms: u64,
    /// The body did not end within the limit.
    pub timed_out: bool,
    /// The body ended with a transport error (after `raw`).
    pub body_error: Option<String>,
}

impl StreamReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn connection(&self) -> String {
        self.header("x-switchyard-connection")
            .unwrap_or_else(|| panic!("no x-switchyard-connection: {:?}", self.headers))
            .to_owned()
    }

    /// Parses the body as SSE, failing the test on anything that is not valid SSE or a data
    /// payload that is neither JSON nor `[DONE]`.
    pub fn events(&self) -> Vec<SseEvent> {
        let events =
            parse_sse(&self.raw).unwrap_or_else(|e| panic!("invalid SSE ({e}):\n{}", self.raw));
        for ev in &events {
            if let Some(data) = &ev.data
                && data != "[DONE]"
            {
                serde_json::from_str::<Value>(data)
                    .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {data:?}"));
            }
        }
        events
    }

    pub fn everything(&self) -> String {
        let mut s = format!("{}\n", self.status);
        for (k, v) in &self.headers {
            s.push_str(&format!("{k}: {v}\n"));
        }
        s.push_str(&self.raw);
        s
    }
}

/// POSTs a streaming request and reads the body until it ends or `limit` passes.
pub async fn post_stream(
    c: &reqwest::Client,
    base: &str,
    path: &str,
    body: &Value,
    limit: Duration,
) -> StreamReply {
    send_stream(c.post(format!("{base}{path}")).json(body), limit).await
}

/// Sends a (streaming) request and reads the body until it ends or `limit` passes.
pub async fn send_stream(req: reqwest::RequestBuilder, limit: Duration) -> StreamReply {
    let started = Instant::now();
    let resp = req.send().await.expect("request reaches the node");
    let head_ms = started.elapsed().as_millis() as u64;
    let status = resp.status().as_u16();
    let headers = headers_of(&resp);
    let mut body = resp.bytes_stream();
    let mut raw = Vec::new();
    let mut chunk_times_ms = Vec::new();
    let mut timed_out = false;
    let mut body_error = None;
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => {
                timed_out = true;
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                body_error = Some(e.to_string());
                break;
            }
            Ok(Some(Ok(bytes))) => {
                chunk_times_ms.push((
                    started.elapsed().as_millis() as u64,
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
                raw.extend_from_slice(&bytes);
            }
        }
    }
    StreamReply {
        status,
        headers,
        raw: String::from_utf8(raw).expect("SSE body is UTF-8"),
        chunk_times_ms,
        head_ms,
        timed_out,
        body_error,
    }
}

/// One dispatched SSE event (or a block made only of comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: Option<String>,
    pub comments: Vec<String>,
}

impl SseEvent {
    pub fn json(&self) -> Option<Value> {
        self.data
            .as_deref()
            .filter(|d| *d != "[DONE]")
            .and_then(|d| serde_json::from_str(d).ok())
    }

    /// An in-band error event in any of the client formats.
    pub fn is_error(&self) -> bool {
        self.event.as_deref() == Some("error")
            || self.json().is_some_and(|v| {
                v.get("error").is_some_and(|e| !e.is_null()) || v["type"] == "error"
            })
    }

    /// `(type, code)` of an in-band error event.
    pub fn error_type_code(&self) -> (String, String) {
        let v = self.json().unwrap_or(Value::Null);
        let e = &v["error"];
        (
            e["type"].as_str().unwrap_or_default().to_owned(),
            e["code"]
                .as_str()
                .or(v["code"].as_str())
                .unwrap_or_default()
                .to_owned(),
        )
    }

    pub fn is_comment_only(&self) -> bool {
        self.data.is_none() && self.event.is_none() && !self.comments.is_empty()
    }

    /// A keep-alive in any client format: a comment, an Anthropic `ping`, or an empty chunk.
    pub fn is_keepalive(&self) -> bool {
        self.is_comment_only()
            || self.event.as_deref() == Some("ping")
            || self.json().is_some_and(|v| {
                v["object"] == "chat.completion.chunk"
                    && v["choices"].as_array().is_some_and(|c| c.is_empty())
            })
    }
}

/// Parses an SSE body strictly (WHATWG event-stream rules, restricted to what an LLM API
/// sends): `\n` or `\r\n` line ends, only the fields `event`, `data`, `id` and `retry`,
/// comments, and a blank line after every event, including the last one.
pub fn parse_sse(text: &str) -> Result<Vec<SseEvent>, String> {
    let mut out = Vec::new();
    let mut cur = SseEvent {
        event: None,
        data: None,
        comments: Vec::new(),
    };
    let mut pending = false;
    let normalised = text.replace("\r\n", "\n");
    if !normalised.is_empty() && !normalised.ends_with("\n\n") {
        return Err("the stream does not end with a blank line".into());
    }
    for line in normalised.split('\n') {
        if line.is_empty() {
            if pending {
                out.push(std::mem::replace(
                    &mut cur,
                    SseEvent {
                        event: None,
                        data: None,
                        comments: Vec::new(),
                    },
                ));
                pending = false;
            }
            continue;
        }
        pending = true;
        if let Some(comment) = line.strip_prefix(':') {
            cur.comments.push(comment.trim().to_owned());
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => {
                if cur.event.is_some() {
                    return Err(format!("two event names in one event: {line:?}"));
                }
                cur.event = Some(value.to_owned());
            }
            "data" => match &mut cur.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => cur.data = Some(value.to_owned()),
            },
            "id" | "retry" => {}
            other => return Err(format!("unknown SSE field {other:?} in line {line:?}")),
        }
    }
    Ok(out)
}

/// Concatenated assistant text of OpenAI chat chunks.
pub fn chat_text(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter_map(SseEvent::json)
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// Number of OpenAI chat chunks that carry non-empty text.
pub fn chat_text_chunks(events: &[SseEvent]) -> usize {
    events
        .iter()
        .filter_map(SseEvent::json)
        .filter(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count()
}

/// Concatenated text of Anthropic `content_block_delta` text deltas.
pub fn anthropic_text(events: &[SseEvent]) -> String {
    events
        .iter()
        .filter_map(SseEvent::json)
        .filter(|v| v["type"] == "content_block_delta" && v["delta"]["type"] == "text_delta")
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until the node has settled what earlier requests did, before a test asserts that
/// they changed nothing: no request in flight (every observation sent), then a fresh (not
/// `stale`) report from every provider's breaker actor, which answers only after the
/// observations already in its mailbox. A state change cannot be waited for when the claim
/// is that none happened; this is the barrier instead.
pub async fn quiesce(node: &NodeProcess, management_key: &str) {
    wait_idle(node).await;
    let health = format!("{}/api/monitoring/health", node.admin_url());
    let fresh = eventually(STATE_DEADLINE, || async {
        let r = send(http().get(&health).bearer_auth(management_key)).await;
        let doc = r.json();
        doc["providerBreakers"]
            .as_array()
            .is_some_and(|all| all.iter().all(|b| b["stale"] == false))
    })
    .await;
    assert!(fresh, "breaker reports stayed stale; log:\n{}", node.log());
}
