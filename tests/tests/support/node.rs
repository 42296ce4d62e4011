//! Shared helpers of the node scenario tests: start a mock upstream and a real
//! `switchyard-node` on loopback, send client requests, and read replies.

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not these helpers;
// failing loudly is what a test helper should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::time::Duration;

use super::{STATE_DEADLINE, eventually};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream, Route};

/// The part of every config that is not about resilience: anonymous clients, the management
/// API on (the tests read the node's state through it), two workers (the tests share a small
/// machine).
pub const PRELUDE: &str = r#"
[server]
workers = 2

[auth]
require_api_key = false
management_key_env = "SWITCHYARD_MANAGEMENT_KEY"
"#;

/// The management key [`Node::start`] gives every node (read by [`PRELUDE`]'s `[auth]`).
pub const MGMT_KEY: &str = "mgmt-node-scenarios-5d0e";

/// Turns off the request queue's auto-enable for apikey connections (60 rpm, 350 ms spacing)
/// and the direct wait for cooldowns, so a test sees every decision at once.
pub const NO_QUEUE_NO_WAIT: &str = r#"
[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false
"#;

/// A mock upstream on an ephemeral loopback port.
pub async fn mock() -> MockHandle {
    MockUpstream::start(MockConfig::default())
        .await
        .expect("start mock upstream")
}

/// `[[providers]]` of category `category` talking OpenAI to `mock`, serving any model, with
/// short timeouts; `extra` is appended (more keys, then sub-tables).
pub fn provider(id: &str, category: &str, mock: &MockHandle, extra: &str) -> String {
    format!(
        r#"
[[providers]]
id = "{id}"
category = "{category}"
format = "openai"
base_url = "{base}/v1"
models = []
{extra}
[providers.timeouts]
connect_ms = 1000
headers_ms = 8000
first_content_ms = 8000
idle_ms = 8000
"#,
        base = mock.base_url()
    )
}

/// `[[connections]]` reading its key from `key_env`; `extra` is appended.
pub fn connection(id: &str, provider: &str, key_env: &str, extra: &str) -> String {
    format!(
        r#"
[[connections]]
id = "{id}"
provider = "{provider}"
api_key_env = "{key_env}"
{extra}
"#
    )
}

/// A running node plus an HTTP client for it. Dropping it kills the process.
pub struct Node {
    pub proc: NodeProcess,
    pub http: reqwest::Client,
}

/// A client reply, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `error.code` (empty when absent).
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    /// `error.type` (empty when absent).
    pub fn error_type(&self) -> &str {
        self.json["error"]["type"].as_str().unwrap_or("")
    }

    /// The connection that answered (`x-switchyard-connection`).
    pub fn connection(&self) -> &str {
        self.header("x-switchyard-connection").unwrap_or("")
    }

    /// `x-switchyard-attempts` as a number (0 when absent).
    pub fn attempts(&self) -> u32 {
        self.header("x-switchyard-attempts")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// `Retry-After` in seconds, when present and numeric.
    pub fn retry_after(&self) -> Option<u64> {
        self.header("retry-after").and_then(|v| v.parse().ok())
    }

    /// Asserts a successful routed reply: 200 plus the routing headers.
    #[track_caller]
    pub fn assert_ok(&self, connection: &str, attempts: u32) {
        assert_eq!(self.status, 200, "expected 200: {self:?}");
        assert_eq!(self.connection(), connection, "{self:?}");
        assert_eq!(self.attempts(), attempts, "{self:?}");
        assert!(
            self.json["choices"].is_array(),
            "not a chat completion: {self:?}"
        );
    }

    /// Asserts an error reply with this status and code in the OpenAI envelope, whose
    /// `message`, `type` and `code` are all non-empty strings.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert_envelope(&self.json["error"], &self.text);
        assert_eq!(self.code(), code, "{self:?}");
    }
}

/// `{"message","type","code"}` are non-empty strings.
#[track_caller]
pub fn assert_envelope(error: &Value, text: &str) {
    for field in ["message", "type", "code"] {
        assert!(
            error[field].as_str().is_some_and(|s| !s.is_empty()),
            "error.{field} missing or empty in {text}"
        );
    }
}

impl Node {
    /// Starts the node with `config` (the harness adds the listen addresses) and `env`.
    pub async fn start(config: String, env: &[(&str, &str)]) -> Node {
        let env: Vec<(String, String)> = env
            .iter()
            .chain(&[("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY)])
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let proc = tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            NodeProcess::start(&config, &env)
        })
        .await
        .expect("join node start")
        .unwrap_or_else(|e| panic!("node did not start: {e}"));
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(15))
            .build()
            .expect("client");
        Node { proc, http }
    }

    /// POSTs `body` to `path` on the client listener.
    pub async fn post(&self, path: &str, content_type: &str, body: String) -> Reply {
        let resp = self
            .http
            .post(format!("{}{path}", self.proc.client_url()))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("request failed: {e}\nnode log:\n{}", self.proc.log()));
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            text,
            json,
        }
    }

    /// A non-streaming chat completion for `model`.
    pub async fn chat(&self, model: &str) -> Reply {
        let body = json!({
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
        });
        self.post("/v1/chat/completions", "application/json", body.to_string())
            .await
    }

    /// The node's log so far (for failure messages).
    pub fn log(&self) -> String {
        self.proc.log()
    }

    /// `GET path` on the admin listener with the management key: the JSON body of a 200.
    pub async fn admin(&self, path: &str) -> Value {
        let resp = self
            .http
            .get(format!("{}{path}", self.proc.admin_url()))
            .bearer_auth(MGMT_KEY)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path} failed: {e}\nnode log:\n{}", self.log()));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        assert_eq!(status, 200, "GET {path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

    /// The connection's row of `GET /api/resilience/cooldowns`: the snapshot its actor
    /// published, which is what requests read.
    pub async fn cooldown_row(&self, id: &str) -> Value {
        let list = self.admin("/api/resilience/cooldowns").await;
        list["connections"]
            .as_array()
            .and_then(|rows| rows.iter().find(|c| c["id"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("no cooldown row for {id}: {list}"))
    }

    /// The provider's breaker from `GET /api/monitoring/health`, as its actor reports it. The
    /// actor answers after the observations already in its mailbox, so a fresh (not `stale`)
    /// answer has applied every attempt that finished before the call.
    pub async fn breaker(&self, provider: &str) -> Value {
        let health = self.admin("/api/monitoring/health").await;
        health["providerBreakers"]
            .as_array()
            .and_then(|all| all.iter().find(|b| b["provider"] == provider))
            .cloned()
            .unwrap_or_else(|| panic!("no breaker for {provider}: {health}"))
    }

    /// Waits until the connection's cooldown row satisfies `holds`, and returns that row.
    pub async fn wait_connection(
        &self,
        id: &str,
        what: &str,
        holds: impl Fn(&Value) -> bool,
    ) -> Value {
        let found = eventually(STATE_DEADLINE, || async {
            let row = self.cooldown_row(id).await;
            holds(&row).then_some(row)
        })
        .await;
        match found {
            Some(row) => row,
            None => panic!(
                "connection {id}: timed out waiting for {what}; last row: {}\nnode log:\n{}",
                self.cooldown_row(id).await,
                self.log()
            ),
        }
    }

    /// Waits until a fresh report of the provider's breaker satisfies `holds`, and returns it.
    pub async fn wait_breaker(
        &self,
        provider: &str,
        what: &str,
        holds: impl Fn(&Value) -> bool,
    ) -> Value {
        let found = eventually(STATE_DEADLINE, || async {
            let b = self.breaker(provider).await;
            (b["stale"] == false && holds(&b)).then_some(b)
        })
        .await;
        match found {
            Some(b) => b,
            None => panic!(
                "breaker {provider}: timed out waiting for {what}; last report: {}\nnode log:\n{}",
                self.breaker(provider).await,
                self.log()
            ),
        }
    }
}

/// A breaker report's state, lower-cased (`closed`, `degraded`, `half_open`, `open`).
pub fn breaker_state(b: &Value) -> String {
    b["state"].as_str().unwrap_or("").to_ascii_lowercase()
}

/// A breaker report's failure count.
pub fn breaker_failures(b: &Value) -> u64 {
    b["failureCount"].as_u64().unwrap_or(0)
}

/// A cooldown row's remaining cooldown in milliseconds.
pub fn cooldown_ms(row: &Value) -> u64 {
    row["cooldownRemainingMs"].as_u64().unwrap_or(0)
}

/// Sends `n` identical chat requests at once and returns the replies in send order.
pub async fn concurrent_chats(node: &std::sync::Arc<Node>, model: &str, n: usize) -> Vec<Reply> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let node = node.clone();
            let model = model.to_owned();
            tokio::spawn(async move { node.chat(&model).await })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.expect("join request"));
    }
    out
}

/// A fault that delays the response headers of a normal chat answer.
pub fn slow(ms: u64) -> FaultSpec {
    FaultSpec {
        latency_before_headers_ms: Some(ms),
        ..FaultSpec::new()
    }
    .on_route(Route::ChatCompletions)
}

/// A chat error status with a chosen message.
pub fn status_with_message(status: u16, message: &str) -> FaultSpec {
    FaultSpec {
        error_message: Some(message.to_owned()),
        ..FaultSpec::status(status)
    }
    .on_route(Route::ChatCompletions)
}

/// The requests `mock` received on `key`.
pub fn hits(mock: &MockHandle, key: &str) -> u64 {
    mock.stats().requests_for_key(key)
}

/// Waits until the connection's actor has set a cooldown.
pub async fn wait_cooling(node: &Node, connection: &str) {
    node.wait_connection(connection, "a cooldown", |row| cooldown_ms(row) > 0)
        .await;
}

/// Waits until the connection's cooldown has run out (the scenario waits for it).
pub async fn wait_cooled_down(node: &Node, connection: &str) {
    node.wait_connection(connection, "the cooldown to run out", |row| {
        cooldown_ms(row) == 0
    })
    .await;
}

/// The upstream keys of the resilience scenarios' connections, by environment variable.
pub const KEYS: [(&str, &str); 3] = [("KEY_A", "sk-a"), ("KEY_B", "sk-b"), ("KEY_C", "sk-c")];

impl Node {
    /// A node with the queue and the cooldown wait off, and provider `p` (apikey) on `mock`
    /// with two keys, `a` (tried first) and `b`; `extra` is appended (a third connection reads
    /// `KEY_C`).
    pub async fn two_keys(mock: &MockHandle, extra: &str) -> Node {
        let config = format!(
            "{PRELUDE}{NO_QUEUE_NO_WAIT}{}{}{}{extra}",
            provider("p", "apikey", mock, ""),
            connection("a", "p", "KEY_A", "priority = 1"),
            connection("b", "p", "KEY_B", "priority = 2"),
        );
        Node::start(config, &KEYS).await
    }
}
