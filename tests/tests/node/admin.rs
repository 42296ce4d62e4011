//! Black-box tests of the management API: the real `switchyard-node` binary, started with a
//! management key in its environment, in front of in-process mock upstreams.
//!
//! They cover the bearer rules (401 / 403 / API off), the health body and that no credential
//! ever appears in an admin response, breaker reset after real upstream 503s, the cooldown
//! manager (clear, `skippedTerminal`, reinstate), model-cooldown deletes, settings patches
//! (validation, live effect, persistence across a restart), the rate-limit toggle, and that the
//! served OpenAPI document is the repository's and passes `openapi-spec-validator`.
//!
//! The validator runs in a virtualenv under the target directory (`target/openapi-venv`, see
//! `switchyard_tests::python`). Build the node first (`cargo build -p switchyard-node`;
//! `cargo nextest run --workspace` does).

// clippy's allow-*-in-tests settings cover `#[test]` functions only, not the helpers below;
// failing loudly is what a test helper should do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream, Route};

// Secrets that must never come back from the admin API.
const MGMT_KEY: &str = "mgmt-secret-5c1f0e9a7d3b";
const CLIENT_KEY: &str = "sk-client-secret-8e2d4a6c";
const UP_KEY_A: &str = "sk-up-a-secret-91c3e7f2";
const UP_KEY_B: &str = "sk-up-b-secret-4d7a0b88";
const UP_KEY_C: &str = "sk-up-c-secret-2f6e9d13";
const SECRETS: &[&str] = &[MGMT_KEY, CLIENT_KEY, UP_KEY_A, UP_KEY_B, UP_KEY_C];

/// Auth with a management key and one client key, one worker, no request queue and no
/// waiting for cooldowns (so every decision is visible at once).
fn prelude(management_key_env: &str) -> String {
    format!(
        r#"
[server]
workers = 1
node_id = "admin-test-node"

[auth]
require_api_key = true
management_key_env = "{management_key_env}"

[[api_keys]]
id = "client-1"
key_env = "CLIENT_KEY"

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false
"#
    )
}

fn provider(id: &str, mock: &MockHandle) -> String {
    format!(
        r#"
[[providers]]
id = "{id}"
category = "apikey"
format = "openai"
base_url = "{base}/v1"
models = []
[providers.timeouts]
connect_ms = 1000
headers_ms = 8000
first_content_ms = 8000
idle_ms = 8000
"#,
        base = mock.base_url()
    )
}

fn connection(id: &str, provider: &str, key_env: &str, extra: &str) -> String {
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

const ENV: &[(&str, &str)] = &[
    ("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY),
    ("CLIENT_KEY", CLIENT_KEY),
    ("KEY_A", UP_KEY_A),
    ("KEY_B", UP_KEY_B),
    ("KEY_C", UP_KEY_C),
];

async fn mock() -> MockHandle {
    MockUpstream::start(MockConfig::default())
        .await
        .expect("start mock upstream")
}

/// A reply read whole.
#[derive(Debug)]
struct Reply {
    status: u16,
    text: String,
    json: Value,
}

impl Reply {
    fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    #[track_caller]
    fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "{self:?}");
        &self.json
    }

    /// Asserts an error with this status and code, in the envelope with a non-empty message
    /// and type.
    #[track_caller]
    fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.code(), code, "{self:?}");
        for field in ["message", "type"] {
            assert!(
                self.json["error"][field]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "error.{field} missing: {self:?}"
            );
        }
    }

    /// The `field` of the first `details` entry.
    fn detail_field(&self) -> &str {
        self.json["error"]["details"][0]["field"]
            .as_str()
            .unwrap_or("")
    }
}

/// Which bearer a request carries.
#[derive(Clone, Copy)]
enum Auth<'a> {
    None,
    Bearer(&'a str),
}

struct Node {
    proc: NodeProcess,
    http: reqwest::Client,
    /// Every admin response body seen, to check for leaked secrets at the end.
    seen: std::sync::Mutex<Vec<String>>,
}

impl Node {
    async fn start(config: String, env: Vec<(String, String)>) -> Node {
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
        Node {
            proc,
            http,
            seen: std::sync::Mutex::new(Vec::new()),
        }
    }

    async fn with_env(config: String) -> Node {
        Node::start(config, owned(ENV)).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        auth: Auth<'_>,
        body: Option<(&str, String)>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.proc.admin_url()));
        if let Auth::Bearer(key) = auth {
            req = req.bearer_auth(key);
        }
        if let Some((content_type, body)) = body {
            req = req.header("content-type", content_type).body(body);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("request failed: {e}\nnode log:\n{}", self.proc.log()));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        self.seen.lock().unwrap().push(text.clone());
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, text, json }
    }

    async fn get(&self, path: &str) -> Reply {
        self.send(reqwest::Method::GET, path, Auth::Bearer(MGMT_KEY), None)
            .await
    }

    async fn json(&self, method: reqwest::Method, path: &str, body: Value) -> Reply {
        self.send(
            method,
            path,
            Auth::Bearer(MGMT_KEY),
            Some(("application/json", body.to_string())),
        )
        .await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.json(reqwest::Method::POST, path, body).await
    }

    async fn patch(&self, body: Value) -> Reply {
        self.json(reqwest::Method::PATCH, "/api/resilience", body)
            .await
    }

    async fn patch_raw(&self, content_type: &str, body: String) -> Reply {
        self.send(
            reqwest::Method::PATCH,
            "/api/resilience",
            Auth::Bearer(MGMT_KEY),
            Some((content_type, body)),
        )
        .await
    }

    /// A non-streaming chat completion on the client listener (status only).
    async fn chat(&self, model: &str) -> Reply {
        let resp = self
            .http
            .post(format!("{}/v1/chat/completions", self.proc.client_url()))
            .bearer_auth(CLIENT_KEY)
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap_or_else(|e| panic!("chat failed: {e}\nnode log:\n{}", self.proc.log()));
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, text, json }
    }

    /// The breaker of `provider` in the health body.
    async fn breaker(&self, provider: &str) -> Value {
        let health = self.get("/api/monitoring/health").await;
        health.ok()["providerBreakers"]
            .as_array()
            .expect("providerBreakers")
            .iter()
            .find(|b| b["provider"] == provider)
            .cloned()
            .unwrap_or_else(|| panic!("no breaker for {provider}: {health:?}"))
    }

    /// The cooldown-manager row of a connection.
    async fn cooldown_row(&self, id: &str) -> Value {
        let list = self.get("/api/resilience/cooldowns").await;
        list.ok()["connections"]
            .as_array()
            .expect("connections")
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no row for {id}: {list:?}"))
    }

    /// Asserts that no secret appears in any admin response seen so far.
    #[track_caller]
    fn assert_no_secrets(&self) {
        let seen = self.seen.lock().unwrap();
        assert!(!seen.is_empty());
        for text in seen.iter() {
            for secret in SECRETS {
                assert!(
                    !text.contains(secret),
                    "a credential leaked into an admin response: {text}"
                );
            }
        }
    }
}

fn owned(env: &[(&str, &str)]) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Waits until the connection's cooldown row satisfies `holds`; panics with the last row.
async fn wait_row(node: &Node, id: &str, what: &str, holds: impl Fn(&Value) -> bool) {
    let held = eventually(STATE_DEADLINE, || async {
        holds(&node.cooldown_row(id).await)
    })
    .await;
    assert!(
        held,
        "connection {id}: timed out waiting for {what}; last row: {}",
        node.cooldown_row(id).await
    );
}

/// Waits until the provider's breaker (as its actor reports it) has counted `n` failures.
async fn wait_failures(node: &Node, provider: &str, n: u64) {
    let held = eventually(STATE_DEADLINE, || async {
        let b = node.breaker(provider).await;
        b["stale"] == false && b["failureCount"].as_u64().unwrap_or(0) >= n
    })
    .await;
    assert!(
        held,
        "breaker {provider}: timed out waiting for {n} failures; last: {}",
        node.breaker(provider).await
    );
}

// === authentication ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_rules_and_an_open_document() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::with_env(config).await;
    let path = "/api/monitoring/health";
    let get = reqwest::Method::GET;

    node.send(get.clone(), path, Auth::None, None)
        .await
        .assert_error(401, "missing_management_key");
    node.send(get.clone(), path, Auth::Bearer("not-the-key"), None)
        .await
        .assert_error(401, "invalid_management_key");
    let r = node
        .send(get.clone(), path, Auth::Bearer(CLIENT_KEY), None)
        .await;
    r.assert_error(403, "client_key_not_allowed");
    assert_eq!(r.json["error"]["type"], "permission_error");
    node.get(path).await.ok();

    // Every management route wants the bearer, whatever the method.
    for (method, path) in [
        (reqwest::Method::GET, "/api/resilience"),
        (reqwest::Method::PATCH, "/api/resilience"),
        (reqwest::Method::POST, "/api/resilience/reset"),
        (reqwest::Method::DELETE, "/api/resilience/model-cooldowns"),
        (reqwest::Method::POST, "/api/resilience/cooldowns"),
        (reqwest::Method::GET, "/api/resilience/connections"),
        (
            reqwest::Method::POST,
            "/api/resilience/connections/a/reinstate",
        ),
        (reqwest::Method::POST, "/api/rate-limits"),
    ] {
        let r = node.send(method.clone(), path, Auth::None, None).await;
        assert_eq!(r.status, 401, "{method} {path}: {r:?}");
    }

    // The document needs no bearer; unknown paths and methods get the envelope.
    let doc = node
        .send(get.clone(), "/api/openapi.json", Auth::None, None)
        .await;
    assert!(doc.ok()["openapi"].as_str().unwrap().starts_with("3."));
    node.get("/api/nope").await.assert_error(404, "not_found");
    node.send(
        reqwest::Method::PUT,
        "/api/resilience",
        Auth::Bearer(MGMT_KEY),
        None,
    )
    .await
    .assert_error(405, "method_not_allowed");
    node.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_management_key_env_turns_the_api_off() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude(""),
        provider("p", &mock),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::with_env(config).await;
    node.get("/api/monitoring/health")
        .await
        .assert_error(403, "management_api_disabled");
    node.send(reqwest::Method::GET, "/api/resilience", Auth::None, None)
        .await
        .assert_error(403, "management_api_disabled");
    // Probes stay up.
    let r = node
        .send(reqwest::Method::GET, "/readyz", Auth::None, None)
        .await;
    assert_eq!(r.status, 200);
}

// === health and secrets ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_shape_and_no_credential_in_any_admin_response() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2\nmax_concurrent = 4"),
        provider("q", &mock),
        connection("c", "q", "KEY_C", "rate_limit_protection = true"),
    );
    let node = Node::with_env(config).await;
    // An upstream error that echoes the key: `a` becomes terminal, `b` answers.
    mock.script(FaultSpec {
        error_message: Some(format!("key {UP_KEY_A} has no credits left")),
        ..FaultSpec::status(402)
            .on_route(Route::ChatCompletions)
            .for_key(UP_KEY_A)
    })
    .unwrap();
    assert_eq!(node.chat("p/mock-model").await.status, 200);
    assert_eq!(node.chat("q/mock-model").await.status, 200);
    wait_row(&node, "a", "the 402 to make it terminal", |row| {
        row["status"] == "terminal"
    })
    .await;

    let health = node.get("/api/monitoring/health").await;
    let h = health.ok();
    assert_eq!(h["status"], "healthy", "{h}");
    assert_eq!(h["node_id"], "admin-test-node");
    assert!(h["version"].as_str().is_some_and(|v| !v.is_empty()));
    assert!(h["uptime"].is_u64());
    assert_eq!(h["cluster"]["mode"], "embedded");
    assert_eq!(h["cluster"]["redis"]["state"], "not_configured");
    assert!(h["inFlight"].is_u64());
    assert_eq!(h["circuitBreakers"]["total"], 2);
    let breakers = h["providerBreakers"].as_array().unwrap();
    assert_eq!(breakers.len(), 2);
    for b in breakers {
        for field in [
            "state",
            "failureCount",
            "retryAfterMs",
            "lastFailureKind",
            "openCycleCount",
            "effectiveResetTimeout",
        ] {
            assert!(b.get(field).is_some(), "breaker lacks {field}: {b}");
        }
        assert!(b["transitionHistory"].is_array());
        assert_eq!(b["stale"], false);
    }
    assert_eq!(h["connections"]["total"], 3);
    assert_eq!(h["connections"]["terminal"], 1, "{h}");
    assert_eq!(h["connections"]["active"], 2, "{h}");
    assert_eq!(h["connections"]["cooldown"], 0);
    assert_eq!(h["connections"]["byProvider"]["p"]["terminal"], 1);
    let queues = h["queues"].as_array().unwrap();
    assert!(
        queues
            .iter()
            .any(|q| q["connectionId"] == "c" && q["enabled"] == true),
        "{queues:?}"
    );
    assert!(h["gates"][0]["maxConcurrent"] == 4, "{h}");
    assert!(h["lockouts"].is_array());

    // Every other read, and some error bodies, for the secret scan.
    node.get("/api/resilience").await.ok();
    let row = node.cooldown_row("a").await;
    assert_eq!(row["status"], "terminal");
    assert_eq!(row["terminal"], "credits_exhausted");
    node.get("/api/resilience/connections").await.ok();
    node.get("/api/resilience/model-cooldowns").await.ok();
    node.get("/api/rate-limits").await.ok();
    node.get("/api/resilience/cooldowns?provider=nope")
        .await
        .assert_error(404, "provider_not_found");
    node.send(
        reqwest::Method::GET,
        "/api/monitoring/health",
        Auth::Bearer(UP_KEY_B),
        None,
    )
    .await
    .assert_error(401, "invalid_management_key");
    node.assert_no_secrets();
}

// === breaker reset and settings ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patched_threshold_opens_the_breaker_and_reset_closes_it() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", "disable_cooling = true"),
    );
    let node = Node::with_env(config).await;

    let before = node.get("/api/resilience").await;
    let threshold = &before.ok()["settings"]["provider_breaker"]["apikey"]["failure_threshold"];
    assert_eq!(threshold["value"], 12);
    assert_eq!(threshold["source"], "default");

    let r = node
        .patch(json!({"provider_breaker": {"apikey": {"failure_threshold": 2}}}))
        .await;
    let body = r.ok();
    assert_eq!(body["ok"], true);
    let threshold = &body["settings"]["provider_breaker"]["apikey"]["failure_threshold"];
    assert_eq!(threshold["value"], 2);
    assert_eq!(threshold["source"], "persisted");
    assert_eq!(body["persistence"]["durable"], false, "no state dir set");
    assert_eq!(body["applied"]["providers"], 1);
    assert_eq!(
        body["changed"],
        json!(["provider_breaker.apikey.failure_threshold"])
    );

    // Two upstream 503s now open the breaker (the default needs twelve).
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    for i in 1..=2 {
        assert_eq!(node.chat("p/mock-model").await.status, 503);
        wait_failures(&node, "p", i).await;
    }
    let r = node.chat("p/mock-model").await;
    r.assert_error(503, "provider_circuit_open");
    let breaker = node.breaker("p").await;
    assert_eq!(breaker["state"], "OPEN", "{breaker}");
    assert_eq!(breaker["failureCount"], 2);
    assert_eq!(breaker["lastFailureKind"], "transient");
    assert!(breaker["retryAfterMs"].as_u64().unwrap() > 0);
    assert!(
        breaker["transitionHistory"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["to"] == "OPEN"),
        "{breaker}"
    );
    assert_eq!(mock.stats().requests_for_key(UP_KEY_A), 2);

    // Reset: unknown provider, then the one breaker.
    node.post("/api/resilience/reset", json!({"provider": "nope"}))
        .await
        .assert_error(404, "provider_not_found");
    node.post("/api/resilience/reset", json!({"provider": "p", "x": 1}))
        .await
        .assert_error(400, "invalid_request");
    let r = node
        .post("/api/resilience/reset", json!({"provider": "p"}))
        .await;
    assert_eq!(r.ok()["resetCount"], 1);
    let breaker = node.breaker("p").await;
    assert_eq!(breaker["state"], "CLOSED", "{breaker}");
    assert_eq!(
        breaker["transitionHistory"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["reason"],
        "manual-reset"
    );
    assert_eq!(node.chat("p/mock-model").await.status, 200);
    // An empty body resets every breaker.
    let r = node
        .send(
            reqwest::Method::POST,
            "/api/resilience/reset",
            Auth::Bearer(MGMT_KEY),
            None,
        )
        .await;
    assert_eq!(r.ok()["resetCount"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_patches_are_rejected_naming_the_field() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::with_env(config).await;

    let r = node
        .patch(json!({"provider_breaker": {"apikey": {"failure_threshold": 0}}}))
        .await;
    r.assert_error(400, "invalid_settings");
    assert_eq!(r.json["error"]["type"], "invalid_request_error");
    assert_eq!(
        r.detail_field(),
        "provider_breaker.apikey.failure_threshold"
    );
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("provider_breaker.apikey.failure_threshold"),
        "{r:?}"
    );

    let r = node
        .patch(json!({"provider_breaker": {"apikey": {"failure_treshold": 2}}}))
        .await;
    r.assert_error(400, "invalid_settings");
    assert_eq!(r.detail_field(), "provider_breaker.apikey.failure_treshold");

    let r = node
        .patch(json!({"request_queue": {"max_wait_ms": "soon"}}))
        .await;
    r.assert_error(400, "invalid_settings");
    assert_eq!(r.detail_field(), "request_queue.max_wait_ms");

    node.patch(json!({}))
        .await
        .assert_error(400, "invalid_settings");
    node.patch_raw("application/json", "{not json".into())
        .await
        .assert_error(400, "invalid_settings");
    node.patch_raw("text/plain", "{}".into())
        .await
        .assert_error(415, "unsupported_media_type");
    let huge = format!("{{\"x\":\"{}\"}}", "a".repeat(100 * 1024));
    node.patch_raw("application/json", huge)
        .await
        .assert_error(413, "payload_too_large");

    // Nothing was applied.
    let s = node.get("/api/resilience").await;
    assert_eq!(s.ok()["persisted"], json!({}));
    assert_eq!(
        s.json["settings"]["provider_breaker"]["apikey"]["failure_threshold"]["value"],
        12
    );

    // The queue numbers apply live: no restart is asked for.
    let r = node
        .patch(json!({"request_queue": {"max_wait_ms": 5000}}))
        .await;
    assert_eq!(r.ok()["restartRequired"], json!([]));
    // A setting read per operation applies at once: nothing to report.
    let r = node
        .patch(json!({"session_leases": {"ttl_ms": 60000}}))
        .await;
    assert_eq!(r.ok()["notApplied"], json!([]));
    assert_eq!(r.json["restartRequired"], json!([]));
    // Runtime error rules apply to the next failure: nothing to report either.
    let r = node
        .patch(json!({"provider_error_rules": {"mock": [
            {"status": 429, "match": "limit", "scope": "connection"}
        ]}}))
        .await;
    assert_eq!(r.ok()["notApplied"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patched_settings_survive_a_restart_with_a_state_dir() {
    let mock = mock().await;
    let state = tempfile::tempdir().unwrap();
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", "disable_cooling = true"),
    );
    let mut env = owned(ENV);
    env.push((
        "SWITCHYARD_STATE_DIR".into(),
        state.path().to_string_lossy().into_owned(),
    ));

    let first = Node::start(config.clone(), env.clone()).await;
    let r = first
        .patch(json!({"provider_breaker": {"apikey": {"failure_threshold": 2}}}))
        .await;
    assert_eq!(r.ok()["persistence"]["durable"], true, "{r:?}");
    assert!(state.path().join("resilience-settings.json").is_file());
    drop(first);

    let second = Node::start(config, env).await;
    let s = second.get("/api/resilience").await;
    let threshold = &s.ok()["settings"]["provider_breaker"]["apikey"]["failure_threshold"];
    assert_eq!(threshold["value"], 2, "{s:?}");
    assert_eq!(threshold["source"], "persisted");
    assert_eq!(
        s.json["persisted"],
        json!({"provider_breaker": {"apikey": {"failure_threshold": 2}}})
    );
    // The restarted breaker runs with it: two 503s open it.
    mock.script(
        FaultSpec::status(503)
            .on_route(Route::ChatCompletions)
            .times(2),
    )
    .unwrap();
    for i in 1..=2 {
        assert_eq!(second.chat("p/mock-model").await.status, 503);
        wait_failures(&second, "p", i).await;
    }
    let open = eventually(STATE_DEADLINE, || async {
        second.breaker("p").await["state"] == "OPEN"
    })
    .await;
    assert!(open, "the breaker opens: {}", second.breaker("p").await);
}

// === cooldowns, lockouts, reinstate, rate limits ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_clear_skips_terminal_and_reinstate_brings_it_back() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", "priority = 1"),
        connection("b", "p", "KEY_B", "priority = 2"),
        provider("q", &mock),
        connection("c", "q", "KEY_C", ""),
    );
    let node = Node::with_env(config).await;
    // a: credits exhausted (terminal); b: rate limited for a minute; c: model-x not found.
    mock.script(
        FaultSpec::status(402)
            .on_route(Route::ChatCompletions)
            .for_key(UP_KEY_A),
    )
    .unwrap();
    mock.script(
        FaultSpec::status(429)
            .on_route(Route::ChatCompletions)
            .for_key(UP_KEY_B)
            .header("Retry-After", "60")
            .times(1),
    )
    .unwrap();
    mock.script(
        FaultSpec::status(404)
            .on_route(Route::ChatCompletions)
            .for_key(UP_KEY_C)
            .for_model("model-x")
            .times(1),
    )
    .unwrap();
    assert_ne!(node.chat("p/mock-model").await.status, 200);
    assert_eq!(node.chat("q/model-x").await.status, 404);
    wait_row(&node, "a", "the 402", |row| row["status"] == "terminal").await;
    wait_row(&node, "b", "the 429", |row| row["status"] == "cooling_down").await;
    wait_row(&node, "c", "the 404", |row| row["status"] == "model_locked").await;

    let a = node.cooldown_row("a").await;
    assert_eq!(a["status"], "terminal", "{a}");
    let b = node.cooldown_row("b").await;
    assert_eq!(b["status"], "cooling_down", "{b}");
    assert!(b["cooldownRemainingMs"].as_u64().unwrap() > 30_000, "{b}");
    let c = node.cooldown_row("c").await;
    assert_eq!(c["status"], "model_locked", "{c}");
    assert_eq!(c["lockouts"][0]["model"], "model-x");
    let only_q = node.get("/api/resilience/cooldowns?provider=q").await;
    assert_eq!(only_q.ok()["connections"].as_array().unwrap().len(), 1);

    // Bad requests first: nothing changes.
    node.post(
        "/api/resilience/cooldowns",
        json!({"connectionIds": ["nope"]}),
    )
    .await
    .assert_error(404, "connection_not_found");
    node.post("/api/resilience/cooldowns", json!({"connectionIds": []}))
        .await
        .assert_error(400, "invalid_request");
    node.post(
        "/api/resilience/cooldowns",
        json!({"all": true, "connectionIds": ["a"]}),
    )
    .await
    .assert_error(400, "invalid_request");
    node.post("/api/resilience/cooldowns", json!({"connectionIds": "a"}))
        .await
        .assert_error(400, "invalid_request");
    let too_many: Vec<String> = (0..1001).map(|i| format!("c{i}")).collect();
    node.post(
        "/api/resilience/cooldowns",
        json!({"connectionIds": too_many}),
    )
    .await
    .assert_error(400, "invalid_request");

    // Clear a and b: b is cleared, a is terminal and only listed.
    let r = node
        .post(
            "/api/resilience/cooldowns",
            json!({"connectionIds": ["a", "b"]}),
        )
        .await;
    let body = r.ok();
    assert_eq!(body["ok"], true);
    assert_eq!(body["cleared"], 1, "{body}");
    assert_eq!(body["skippedTerminal"], 1);
    assert_eq!(body["unchanged"], 0);
    assert_eq!(body["lockoutsCleared"], 0);
    assert_eq!(node.cooldown_row("b").await["status"], "active");
    assert_eq!(node.cooldown_row("a").await["status"], "terminal");
    // Again: nothing left to clear on b.
    let r = node
        .post("/api/resilience/cooldowns", json!({"connectionIds": ["b"]}))
        .await;
    assert_eq!(r.ok()["unchanged"], 1);

    // Model cooldowns: list, bad deletes, delete.
    let list = node.get("/api/resilience/model-cooldowns").await;
    let items = list.ok()["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["connectionId"], "c");
    let del = reqwest::Method::DELETE;
    let path = "/api/resilience/model-cooldowns";
    let r = node.json(del.clone(), path, json!({})).await;
    r.assert_error(400, "invalid_request");
    assert_eq!(r.detail_field(), "provider");
    node.json(del.clone(), path, json!({"provider": "zzz"}))
        .await
        .assert_error(404, "provider_not_found");
    node.json(
        del.clone(),
        path,
        json!({"provider": "q", "connection": "a"}),
    )
    .await
    .assert_error(404, "connection_not_found");
    node.json(del.clone(), path, json!({"all": true, "provider": "q"}))
        .await
        .assert_error(400, "invalid_request");
    let r = node
        .json(
            del.clone(),
            path,
            json!({"provider": "q", "model": "model-x"}),
        )
        .await;
    assert_eq!(r.ok()["removed"], 1, "{r:?}");
    assert_eq!(
        node.get(path).await.ok()["items"],
        json!([]),
        "the lockout is gone"
    );
    let r = node.json(del, path, json!({"all": true})).await;
    assert_eq!(r.ok()["clearedAll"], true);

    // Reinstate: bad ids, then the terminal connection (audited in the log).
    let reinstate = |id: &str| format!("/api/resilience/connections/{id}/reinstate");
    node.post(&reinstate("nope"), json!({}))
        .await
        .assert_error(404, "connection_not_found");
    node.post(&reinstate("a..b"), json!({}))
        .await
        .assert_error(400, "invalid_id");
    node.post(&reinstate("a%2Fb"), json!({}))
        .await
        .assert_error(400, "invalid_id");
    let r = node.post(&reinstate("a"), json!({})).await;
    let body = r.ok();
    assert_eq!(body["reinstated"], true);
    assert_eq!(body["previousStatus"], "credits_exhausted");
    assert_eq!(node.cooldown_row("a").await["status"], "active");
    let log = node.proc.wait_for_log(Duration::from_secs(3), |log| {
        log.contains("reinstated by operator")
    });
    assert!(
        log.lines().any(|l| l.contains("reinstated by operator")
            && l.contains("\"a\"")
            && l.contains("mgmt-")),
        "no audit line:\n{log}"
    );
    assert!(!log.contains(MGMT_KEY), "the management key was logged");

    // Per-connection status with a capped list.
    let r = node.get("/api/resilience/connections?limit=1").await;
    let body = r.ok();
    assert_eq!(body["meta"]["total"], 3);
    assert_eq!(body["meta"]["returned"], 1);
    assert_eq!(body["meta"]["capped"], true);
    let row = &body["connections"][0];
    for field in [
        "breaker",
        "lockouts",
        "rotation",
        "availability",
        "connectionStatus",
    ] {
        assert!(row.get(field).is_some(), "row lacks {field}: {row}");
    }
    node.get("/api/resilience/connections?limit=0")
        .await
        .assert_error(400, "invalid_query");
    node.get("/api/resilience/connections?bogus=1")
        .await
        .assert_error(400, "invalid_query");
    node.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_protection_toggle() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::with_env(config).await;
    let row = |v: &Value| v["connections"][0].clone();
    let before = node.get("/api/rate-limits").await;
    assert_eq!(row(before.ok())["enabled"], false);
    assert_eq!(row(&before.json)["active"], false);

    let r = node
        .post(
            "/api/rate-limits",
            json!({"connectionId": "a", "enabled": true}),
        )
        .await;
    let body = r.ok();
    assert_eq!(body["success"], true);
    assert_eq!(body["active"], true);
    let after = node.get("/api/rate-limits").await;
    assert_eq!(row(after.ok())["enabled"], true);
    assert_eq!(row(&after.json)["active"], true);
    // Requests still flow through the queue.
    assert_eq!(node.chat("p/mock-model").await.status, 200);

    node.post(
        "/api/rate-limits",
        json!({"connectionId": "zz", "enabled": true}),
    )
    .await
    .assert_error(404, "connection_not_found");
    node.post(
        "/api/rate-limits",
        json!({"connectionId": "a", "enabled": "yes"}),
    )
    .await
    .assert_error(400, "invalid_request");
    node.post("/api/rate-limits", json!({"connectionId": "a"}))
        .await
        .assert_error(400, "invalid_request");
    node.post(
        "/api/rate-limits",
        json!({"connectionId": "a", "enabled": false, "extra": 1}),
    )
    .await
    .assert_error(400, "invalid_request");
    let r = node
        .post(
            "/api/rate-limits",
            json!({"connectionId": "a", "enabled": false}),
        )
        .await;
    assert_eq!(r.ok()["active"], false);
}

// === OpenAPI ===

/// The repository's `docs/openapi.json`.
fn repo_document() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json")
}

/// The virtualenv's python (`target/openapi-venv`) with the pinned validator.
fn validator_python() -> PathBuf {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/requirements.txt");
    switchyard_tests::python::ensure_venv("openapi-venv", &requirements)
        .unwrap_or_else(|e| panic!("OpenAPI validator virtualenv: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_is_the_repositorys_and_valid() {
    let mock = mock().await;
    let config = format!(
        "{}{}{}",
        prelude("SWITCHYARD_MANAGEMENT_KEY"),
        provider("p", &mock),
        connection("a", "p", "KEY_A", ""),
    );
    let node = Node::with_env(config).await;
    let served = node
        .send(reqwest::Method::GET, "/api/openapi.json", Auth::None, None)
        .await;
    assert_eq!(served.status, 200);
    let file = std::fs::read_to_string(repo_document()).unwrap();
    assert_eq!(served.text, file, "the node serves a stale document");

    let python = tokio::task::spawn_blocking(validator_python).await.unwrap();
    let mut validate = std::process::Command::new(python);
    validate
        .args([
            "-c",
            "import sys\n\
             from openapi_spec_validator import validate\n\
             from openapi_spec_validator.readers import read_from_filename\n\
             spec, _ = read_from_filename(sys.argv[1])\n\
             validate(spec)\n\
             print('valid')",
        ])
        .arg(repo_document());
    let (ok, output) =
        switchyard_tests::python::run(&mut validate, Duration::from_secs(60), "validator");
    assert!(
        ok,
        "docs/openapi.json is not a valid OpenAPI document:\n{output}"
    );
}
