//! One node scenario: a mock upstream, a `switchyard-node` configured against it, and a client
//! for it. The combo and stream scenarios all start this way; what differs is the providers,
//! connections, combos and resilience tables, which a [`ScenarioBuilder`] collects from the
//! config snippets of [`super::http`] before the node starts.
//!
//! Connection keys travel the way a deployment passes them: the builder puts each key in an
//! environment variable named after its connection, and the config names that variable.

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not these helpers;
// failing loudly is what a test helper should do. Each binary uses a different subset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use super::http::{
    MGMT_KEY, Reply, StreamReply, chat, connection, http, mock, open_auth_no_queue, post,
    post_stream, provider, send, start_node, wait_idle,
};

/// A running scenario. Dropping it stops the node and the mock.
pub struct Scenario {
    pub mock: MockHandle,
    pub node: NodeProcess,
    pub http: reqwest::Client,
    /// The node's client listener, `http://host:port`.
    pub base: String,
}

/// The config and environment of a scenario whose mock is already up (its URL goes into the
/// providers). Each call appends to the config in call order.
pub struct ScenarioBuilder {
    mock: MockHandle,
    config: String,
    env: Vec<(String, String)>,
}

impl Scenario {
    /// Starts a mock that streams `chunks` content frames, and begins a config with anonymous
    /// clients, the management API on and the request queue off ([`open_auth_no_queue`]).
    pub async fn with_mock(chunks: u32) -> ScenarioBuilder {
        ScenarioBuilder {
            mock: mock(chunks).await,
            config: open_auth_no_queue(),
            env: Vec::new(),
        }
    }

    /// POSTs JSON to `path` on the client listener.
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        post(&self.http, &self.base, path, body).await
    }

    /// A non-streamed Chat Completions request for `model`.
    pub async fn call(&self, model: &str) -> Reply {
        self.post("/v1/chat/completions", &chat(model, false)).await
    }

    /// POSTs a streaming request to `path` and reads it until it ends or `limit` passes.
    pub async fn stream_to(&self, path: &str, body: &Value, limit: Duration) -> StreamReply {
        post_stream(&self.http, &self.base, path, body, limit).await
    }

    /// A streamed Chat Completions request for `model`.
    pub async fn call_stream(&self, model: &str, limit: Duration) -> StreamReply {
        self.stream_to("/v1/chat/completions", &chat(model, true), limit)
            .await
    }

    /// `GET path` on the admin listener with the management key.
    pub async fn admin(&self, path: &str) -> Reply {
        send(
            self.http
                .get(format!("{}{path}", self.node.admin_url()))
                .bearer_auth(MGMT_KEY),
        )
        .await
    }

    /// The node's Prometheus text.
    pub async fn metrics(&self) -> String {
        let r = send(self.http.get(format!("{}/metrics", self.node.admin_url()))).await;
        assert_eq!(r.status, 200, "GET /metrics: {r:#?}");
        r.body
    }

    /// The requests the mock received on `key`.
    pub fn hits(&self, key: &str) -> u64 {
        self.mock.stats().requests_for_key(key)
    }

    /// The request bodies the mock received on `key`, oldest first.
    pub fn bodies(&self, key: &str) -> Vec<String> {
        self.mock
            .stats()
            .recent_bodies
            .into_iter()
            .filter(|b| b.api_key == key)
            .map(|b| b.body)
            .collect()
    }

    /// [`Scenario::bodies`] parsed as JSON (`null` for a body that is not).
    pub fn json_bodies(&self, key: &str) -> Vec<Value> {
        self.bodies(key)
            .iter()
            .map(|b| serde_json::from_str(b).unwrap_or(Value::Null))
            .collect()
    }

    /// The last access line, once no request is in flight any more.
    pub async fn access_line(&self) -> Value {
        wait_idle(&self.node).await;
        let log = self.node.wait_for_log(Duration::from_secs(3), |log| {
            log.lines().any(|l| l.contains("\"message\":\"request\""))
        });
        log.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|v| v["message"] == "request")
            .unwrap_or_else(|| panic!("no access line:\n{log}"))
    }
}

impl ScenarioBuilder {
    /// The mock's base URL.
    pub fn url(&self) -> String {
        self.mock.base_url()
    }

    /// Appends raw config text (resilience tables, sub-tables of the last provider, ...).
    pub fn config(mut self, text: &str) -> Self {
        self.config.push_str(text);
        self
    }

    /// Turns off the wait for cooldowns: a request that finds no usable connection fails at
    /// once.
    pub fn no_cooldown_wait(self) -> Self {
        self.config("\n[resilience.wait_for_cooldown]\nenabled = false\n")
    }

    /// A provider on the mock (see [`provider`] for `extra` and `timeouts`).
    pub fn provider(
        self,
        id: &str,
        format: &str,
        models: &[&str],
        extra: &str,
        timeouts: &str,
    ) -> Self {
        let text = provider(id, format, &self.url(), models, extra, timeouts);
        self.config(&text)
    }

    /// A connection of `provider` whose upstream key is `key`; `extra` goes into its table.
    pub fn connection(self, id: &str, provider: &str, key: &str, extra: &str) -> Self {
        let key_env = format!("SCENARIO_KEY_{}", id.to_ascii_uppercase().replace('-', "_"));
        let text = connection(id, provider, &key_env, extra);
        self.config(&text).env(&key_env, key)
    }

    /// A `[[combos]]` entry: `targets` are the bodies of its inline target tables
    /// (`target = "p/m", weight = 2`); an empty `strategy` leaves the default; `tables`
    /// follows (`[combos.config]` and the strategy's own table).
    pub fn combo(self, name: &str, strategy: &str, targets: &[String], tables: &str) -> Self {
        let strategy = if strategy.is_empty() {
            String::new()
        } else {
            format!("strategy = \"{strategy}\"\n")
        };
        let targets: Vec<String> = targets.iter().map(|t| format!("{{ {t} }}")).collect();
        let text = format!(
            "\n[[combos]]\nname = \"{name}\"\n{strategy}targets = [{}]\n{tables}\n",
            targets.join(", ")
        );
        self.config(&text)
    }

    /// An environment variable of the node.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Starts the node.
    pub async fn start(self) -> Scenario {
        let node = start_node(self.config, self.env).await;
        let base = node.client_url();
        Scenario {
            mock: self.mock,
            node,
            http: http(),
            base,
        }
    }
}

/// A non-streamed Chat Completions answer from `model` with `text`, in the shape of OpenAI's
/// chat completion object (https://platform.openai.com/docs/api-reference/chat/object), with
/// usage 10 in, 5 out.
pub fn chat_answer(model: &str, text: &str) -> Vec<u8> {
    json!({
        "id": "chatcmpl-scenario-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
    .to_string()
    .into_bytes()
}

/// Every request on `key` is answered with [`chat_answer`].
pub fn answers_on(key: &str, model: &str, text: &str) -> FaultSpec {
    FaultSpec::raw(200, "application/json", chat_answer(model, text)).for_key(key)
}
