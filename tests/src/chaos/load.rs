//! The client side of a chaos run: a paced mix of JSON and streamed requests over every node
//! that is up, and the classification of each response into a success, a definite error, or
//! a violation (a hang, an empty 200, a truncated stream passed off as success).

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::faults::pick;
use super::scenario::CLIENT_KEY;

/// What became of one client request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A complete answer: JSON with content, or a stream that ended with its terminator.
    Success,
    /// A complete answer that carries only reasoning (the upstream's turn ended without
    /// text): passed through as the upstream gave it, since a stream commits on its first
    /// reasoning frame and is never replayed after that.
    ReasoningOnly,
    /// An HTTP error with a JSON body carrying `error.type` and `error.code`.
    Error { status: u16, code: String },
    /// A committed stream that ended with a well-formed in-band error event.
    StreamError { code: String },
    /// A 200 with no body.
    EmptyOk,
    /// A 200 whose body is not a complete answer (JSON without content).
    MalformedOk(String),
    /// A stream that ended without its terminator and without an error event.
    TruncatedStream,
    /// An error status without `error.type` and `error.code`.
    MalformedError { status: u16 },
    /// No complete response within the client's deadline.
    Timeout,
    /// The connection failed (refused, reset) before a complete response.
    Transport(String),
}

impl Outcome {
    /// Whether the outcome is acceptable in itself (transport failures are judged by the
    /// checker against node kills).
    pub fn is_definite(&self) -> bool {
        matches!(
            self,
            Outcome::Success
                | Outcome::ReasoningOnly
                | Outcome::Error { .. }
                | Outcome::StreamError { .. }
        )
    }

    /// A short label for reports (`ok`, the error code, or the violation).
    pub fn label(&self) -> String {
        match self {
            Outcome::Success => "ok".to_owned(),
            Outcome::ReasoningOnly => "ok (reasoning only)".to_owned(),
            Outcome::Error { status, code } => format!("{status} {code}"),
            Outcome::StreamError { code } => format!("stream {code}"),
            Outcome::EmptyOk => "EMPTY 200".to_owned(),
            Outcome::MalformedOk(_) => "MALFORMED 200".to_owned(),
            Outcome::TruncatedStream => "TRUNCATED STREAM".to_owned(),
            Outcome::MalformedError { status } => format!("MALFORMED {status}"),
            Outcome::Timeout => "TIMEOUT".to_owned(),
            Outcome::Transport(_) => "transport error".to_owned(),
        }
    }
}

/// One client request as the checker sees it.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub node: usize,
    pub model: &'static str,
    pub stream: bool,
    /// Offsets from the run's start.
    pub start: Duration,
    pub end: Duration,
    pub outcome: Outcome,
    /// `x-switchyard-connection` of the response, when there was one.
    pub connection: Option<String>,
    /// `usage` tokens (prompt + completion) the client saw in a successful answer.
    pub tokens: u64,
}

/// Classifies a non-streamed response.
pub fn classify_json(status: u16, body: &[u8]) -> Outcome {
    if status >= 400 {
        return classify_error(status, body);
    }
    if body.is_empty() {
        return Outcome::EmptyOk;
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Outcome::MalformedOk("not JSON".to_owned());
    };
    if v.get("error").is_some() {
        return Outcome::MalformedOk("an error envelope in a 200".to_owned());
    }
    let message = &v["choices"][0]["message"];
    let non_empty = |field: &str| message[field].as_str().is_some_and(|t| !t.is_empty());
    if non_empty("content") {
        Outcome::Success
    } else if non_empty("reasoning_content") {
        Outcome::ReasoningOnly
    } else {
        Outcome::MalformedOk("no message content".to_owned())
    }
}

/// Classifies a streamed (SSE, OpenAI chat format) response.
pub fn classify_stream(status: u16, body: &[u8]) -> Outcome {
    if status >= 400 {
        return classify_error(status, body);
    }
    if body.is_empty() {
        return Outcome::EmptyOk;
    }
    let text = String::from_utf8_lossy(body);
    let mut content = false;
    let mut reasoning = false;
    let mut done = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim) else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        if let Some(err) = v.get("error") {
            let code = err["code"].as_str().unwrap_or_default();
            let kind = err["type"].as_str().unwrap_or_default();
            return if code.is_empty() || kind.is_empty() {
                Outcome::MalformedOk(format!("in-band error without type/code: {data}"))
            } else {
                Outcome::StreamError {
                    code: code.to_owned(),
                }
            };
        }
        if v["choices"][0]["delta"]["content"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
        {
            content = true;
        }
        if v["choices"][0]["delta"]["reasoning_content"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
        {
            reasoning = true;
        }
    }
    match (content, done) {
        (true, true) => Outcome::Success,
        (false, true) if reasoning => Outcome::ReasoningOnly,
        (false, true) => Outcome::MalformedOk("a finished stream without content".to_owned()),
        _ => Outcome::TruncatedStream,
    }
}

fn classify_error(status: u16, body: &[u8]) -> Outcome {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let code = v["error"]["code"].as_str().unwrap_or_default();
    let kind = v["error"]["type"].as_str().unwrap_or_default();
    if code.is_empty() || kind.is_empty() {
        Outcome::MalformedError { status }
    } else {
        Outcome::Error {
            status,
            code: code.to_owned(),
        }
    }
}

/// Tokens in the last `usage` object of a body (JSON or SSE).
pub fn usage_tokens(body: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(body);
    let from = |v: &Value| -> Option<u64> {
        let u = v.get("usage").filter(|u| u.is_object())?;
        Some(
            u["prompt_tokens"].as_u64().unwrap_or(0) + u["completion_tokens"].as_u64().unwrap_or(0),
        )
    };
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        return from(&v).unwrap_or(0);
    }
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find_map(|v| from(&v))
        .unwrap_or(0)
}

/// The load generator's shared state.
pub struct Load {
    /// Client base URL per node, `None` while a node is down.
    pub nodes: RwLock<Vec<Option<String>>>,
    pub records: Mutex<Vec<Record>>,
    pub http: reqwest::Client,
    pub started: Instant,
    /// Deadline of one request.
    pub deadline: Duration,
}

impl Load {
    pub fn new(
        nodes: Vec<Option<String>>,
        started: Instant,
        deadline: Duration,
    ) -> reqwest::Result<Self> {
        Ok(Self {
            nodes: RwLock::new(nodes),
            records: Mutex::new(Vec::new()),
            http: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(64)
                .build()?,
            started,
            deadline,
        })
    }

    /// Sends requests at `rate` per second until `duration` has passed since the start, with at
    /// most `max_in_flight` outstanding; returns when every request has ended.
    pub async fn run(self: Arc<Self>, rate: u32, duration: Duration, max_in_flight: usize) {
        let gate = Arc::new(tokio::sync::Semaphore::new(max_in_flight));
        let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tasks = tokio::task::JoinSet::new();
        let limit = u64::from(rate) * duration.as_secs().max(1) + 1;
        for seq in 0..limit {
            tick.tick().await;
            if self.started.elapsed() >= duration {
                break;
            }
            let Ok(permit) = Arc::clone(&gate).acquire_owned().await else {
                break;
            };
            let this = Arc::clone(&self);
            tasks.spawn(async move {
                this.one(seq).await;
                drop(permit);
            });
            // Reap finished tasks as we go so the set stays small.
            while tasks.try_join_next().is_some() {}
        }
        while tasks.join_next().await.is_some() {}
    }

    fn pick_node(&self, seq: u64) -> Option<(usize, String)> {
        let nodes = self.nodes.read().ok()?;
        let up: Vec<(usize, &String)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|u| (i, u)))
            .collect();
        if up.is_empty() {
            return None;
        }
        let (i, url) = up[(seq % up.len() as u64) as usize];
        Some((i, url.clone()))
    }

    async fn one(&self, seq: u64) {
        let Some((node, base)) = self.pick_node(seq) else {
            return;
        };
        let (model, stream) = pick(seq);
        let start = self.started.elapsed();
        let mut body = json!({
            "model": model,
            "messages": [{"role": "user", "content": format!("chaos request {seq}")}],
            "max_tokens": 64,
        });
        if stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let send = self
            .http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(CLIENT_KEY)
            .json(&body)
            .send();
        let result = tokio::time::timeout(self.deadline, async {
            let resp = send.await.map_err(|e| transport(&e))?;
            let status = resp.status().as_u16();
            let connection = resp
                .headers()
                .get("x-switchyard-connection")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let bytes = resp.bytes().await.map_err(|e| transport(&e))?;
            Ok::<_, String>((status, connection, bytes))
        })
        .await;
        let (outcome, connection, tokens) = match result {
            Err(_) => (Outcome::Timeout, None, 0),
            Ok(Err(e)) => (Outcome::Transport(e), None, 0),
            Ok(Ok((status, connection, bytes))) => {
                let outcome = if stream {
                    classify_stream(status, &bytes)
                } else {
                    classify_json(status, &bytes)
                };
                let tokens = if matches!(outcome, Outcome::Success | Outcome::ReasoningOnly) {
                    usage_tokens(&bytes)
                } else {
                    0
                };
                (outcome, connection, tokens)
            }
        };
        let record = Record {
            seq,
            node,
            model,
            stream,
            start,
            end: self.started.elapsed(),
            outcome,
            connection,
            tokens,
        };
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
    }
}

fn transport(e: &reqwest::Error) -> String {
    // The source chain says what happened (refused, reset, incomplete message).
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers_are_told_apart() {
        let ok = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#;
        assert_eq!(classify_json(200, ok), Outcome::Success);
        assert_eq!(usage_tokens(ok), 7);
        assert_eq!(classify_json(200, b""), Outcome::EmptyOk);
        assert!(matches!(
            classify_json(200, br#"{"error":{"type":"x","code":"y"}}"#),
            Outcome::MalformedOk(_)
        ));
        assert!(matches!(
            classify_json(200, br#"{"choices":[{"message":{"content":""}}]}"#),
            Outcome::MalformedOk(_)
        ));
        assert_eq!(
            classify_json(
                503,
                br#"{"error":{"type":"server_error","code":"all_cooling","message":"m"}}"#
            ),
            Outcome::Error {
                status: 503,
                code: "all_cooling".to_owned()
            }
        );
        assert_eq!(
            classify_json(502, b"bad gateway"),
            Outcome::MalformedError { status: 502 }
        );
    }

    #[test]
    fn streams_need_content_and_a_terminator() {
        let ok = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        assert_eq!(classify_stream(200, ok), Outcome::Success);
        assert_eq!(usage_tokens(ok), 3);
        let cut = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        assert_eq!(classify_stream(200, cut), Outcome::TruncatedStream);
        let err = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\nevent: error\ndata: {\"error\":{\"type\":\"server_error\",\"code\":\"stream_stalled\",\"message\":\"m\"}}\n\n";
        assert_eq!(
            classify_stream(200, err),
            Outcome::StreamError {
                code: "stream_stalled".to_owned()
            }
        );
        let thinking =
            b"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(classify_stream(200, thinking), Outcome::ReasoningOnly);
        assert_eq!(
            classify_json(
                200,
                br#"{"choices":[{"message":{"content":"","reasoning_content":"hm"}}]}"#
            ),
            Outcome::ReasoningOnly
        );
        let bare = b"data: {\"error\":{\"message\":\"m\"}}\n\n";
        assert!(matches!(
            classify_stream(200, bare),
            Outcome::MalformedOk(_)
        ));
        assert_eq!(classify_stream(200, b""), Outcome::EmptyOk);
        assert!(Outcome::Success.is_definite());
        assert!(!Outcome::TruncatedStream.is_definite());
    }
}
