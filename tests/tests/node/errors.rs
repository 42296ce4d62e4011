//! Bad input, upstream oddities and supervision against the real node binary.
//!
//! Every case checks the status, the error `type` and `code`, the envelope of the route
//! (OpenAI, or Anthropic's on `/v1/messages`), and that the node still answers `/healthz`
//! afterwards. Secrets (client keys and upstream keys) must never appear in any response
//! header or body, nor in the node's log. The supervision test panics a connection actor
//! through the test hooks and checks that it is restarted with its cooldown intact.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle};

use crate::support::http::*;
use crate::support::{STATE_DEADLINE, eventually};

const CLIENT_KEY: &str = "sy-client-team-7f3a9c2e5b1d4806";
const NARROW_KEY: &str = "sy-client-narrow-2b8e4d6f0a1c3957";
const UPSTREAM_P: &str = "sk-upstream-p-4c1e8a7b3d9f2065";
const UPSTREAM_A: &str = "sk-ant-upstream-a-9e2d7c4b1a8f3650";
/// A credential in no well-known key format (like a GLM `id.secret` key), echoed by the
/// upstream in its error text.
const UPSTREAM_ECHO: &str = "4f7c2e9a1b3d5f60.Q8rT2vX9zY4wK1mN";
const UPSTREAM_ECHO2: &str = "9d3b6a0e2c4f8a17.Hn5Jp7Lq2Ws4Xe6R";
const UPSTREAM_ECHO3: &str = "2c8e4a6f0b1d3957.Mk3Vb8Nz1Qa5Ws7E";
/// Malformed `Retry-After` values an upstream might send.
const BAD_RETRY_AFTER: [&str; 3] = ["soon", "99999999999999999999", "-5"];

struct Setup {
    mock: MockHandle,
    node: NodeProcess,
    http: reqwest::Client,
    base: String,
    /// Every response a client saw, for the secret scan.
    seen: Vec<String>,
}

fn upstream_key(i: usize, k: usize) -> String {
    format!("sk-upstream-r{i}-k{k}-5d2a7f9c")
}

async fn setup() -> Setup {
    let mock = mock(3).await;
    let url = mock.base_url();
    let mut config = String::from(
        "[server]\nmax_body_bytes = 1024\n\n[auth]\nrequire_api_key = true\n\
         management_key_env = \"SWITCHYARD_MANAGEMENT_KEY\"\n\n\
         [[api_keys]]\nid = \"team\"\nkey_env = \"CLIENT_KEY_TEAM\"\nallowed_models = [\"*\"]\n\n\
         [[api_keys]]\nid = \"narrow\"\nkey_env = \"CLIENT_KEY_NARROW\"\n\
         allowed_models = [\"p/gpt-4o-mini\"]\n",
    );
    config.push_str(&queue_off());
    config.push_str("\n[resilience.wait_for_cooldown]\nenabled = false\n");
    config.push_str(&provider("p", "openai", &url, &["gpt-4o-mini"], "", ""));
    config.push_str(&provider(
        "a",
        "anthropic",
        &url,
        &["claude-sonnet-4-5"],
        "",
        "",
    ));
    config.push_str(&provider("echo", "openai", &url, &["gpt-4o-mini"], "", ""));
    config.push_str(&connection("p-k1", "p", "UP_P", ""));
    config.push_str(&connection("a-k1", "a", "UP_A", ""));
    config.push_str(&provider("echo2", "openai", &url, &["gpt-4o-mini"], "", ""));
    config.push_str(&connection("echo-k1", "echo", "UP_ECHO", ""));
    config.push_str(&connection("echo2-k1", "echo2", "UP_ECHO2", ""));
    config.push_str(&provider("echo3", "openai", &url, &["gpt-4o-mini"], "", ""));
    config.push_str(&connection("echo3-k1", "echo3", "UP_ECHO3", ""));
    let mut env_pairs: Vec<(String, String)> = env(&[
        ("CLIENT_KEY_TEAM", CLIENT_KEY),
        ("CLIENT_KEY_NARROW", NARROW_KEY),
        ("UP_P", UPSTREAM_P),
        ("UP_A", UPSTREAM_A),
        ("UP_ECHO", UPSTREAM_ECHO),
        ("UP_ECHO2", UPSTREAM_ECHO2),
        ("UP_ECHO3", UPSTREAM_ECHO3),
    ]);
    // r0..r2: two connections each, for failover on a malformed Retry-After.
    // s0..s2: one connection each, to see what the client is told.
    for i in 0..BAD_RETRY_AFTER.len() {
        let r = format!("r{i}");
        config.push_str(&provider(&r, "openai", &url, &["gpt-4o-mini"], "", ""));
        for k in 1..=2 {
            let env_name = format!("UP_R{i}_K{k}");
            config.push_str(&connection(
                &format!("{r}-k{k}"),
                &r,
                &env_name,
                &format!("priority = {k}"),
            ));
            env_pairs.push((env_name, upstream_key(i, k)));
        }
        let s = format!("s{i}");
        config.push_str(&provider(&s, "openai", &url, &["gpt-4o-mini"], "", ""));
        let env_name = format!("UP_S{i}");
        config.push_str(&connection(&format!("{s}-k1"), &s, &env_name, ""));
        env_pairs.push((env_name, upstream_key(i + 10, 1)));
    }
    let node = start_node(config, env_pairs).await;
    let base = node.client_url();
    Setup {
        mock,
        node,
        http: http(),
        base,
        seen: Vec::new(),
    }
}

impl Setup {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Reply {
        let r = send(req).await;
        self.seen.push(r.everything());
        r
    }

    /// POST `body` (JSON) to `path` with the team key.
    async fn post(&mut self, path: &str, body: &Value) -> Reply {
        let req = self
            .http
            .post(self.url(path))
            .bearer_auth(CLIENT_KEY)
            .json(body);
        self.send(req).await
    }

    async fn healthy(&self, after: &str) {
        assert_healthy(&self.node, after).await;
    }

    fn secrets() -> Vec<String> {
        let mut s = vec![
            CLIENT_KEY.to_owned(),
            NARROW_KEY.to_owned(),
            UPSTREAM_P.to_owned(),
            UPSTREAM_A.to_owned(),
            UPSTREAM_ECHO.to_owned(),
            UPSTREAM_ECHO2.to_owned(),
            UPSTREAM_ECHO3.to_owned(),
        ];
        for i in 0..BAD_RETRY_AFTER.len() {
            s.push(upstream_key(i, 1));
            s.push(upstream_key(i, 2));
            s.push(upstream_key(i + 10, 1));
        }
        s
    }

    fn assert_no_secrets(&self) {
        for secret in Self::secrets() {
            for r in &self.seen {
                assert!(!r.contains(&secret), "secret {secret} in a response:\n{r}");
            }
            // The secret part of an echoed credential must not survive either.
            for r in &self.seen {
                for part in ["Q8rT2vX9zY4wK1mN", "Hn5Jp7Lq2Ws4Xe6R", "Mk3Vb8Nz1Qa5Ws7E"] {
                    assert!(!r.contains(part), "echoed credential:\n{r}");
                }
            }
            // Log lines are written by a background thread: give the last ones time to land.
            let log = self
                .node
                .wait_for_log(std::time::Duration::from_millis(300), |_| false);
            assert!(!log.contains(&secret), "secret {secret} in the node log");
        }
    }
}

/// An Anthropic envelope: `{"type":"error","error":{"type","message","code"}}`.
fn assert_anthropic_error(r: &Reply, status: u16, error_type: &str, code: &str) {
    assert_eq!(r.status, status, "{r:#?}");
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], error_type, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_matrix() {
    let mut s = setup().await;
    let ok_body = chat("p/gpt-4o-mini", false);

    // A control request proves the setup works, so the failures below are the inputs' fault.
    let r = s.post("/v1/chat/completions", &ok_body).await;
    assert_eq!(r.status, 200, "{r:#?}");

    // 413: more than max_body_bytes (1024), with a Content-Length ...
    let mut big = ok_body.clone();
    big["messages"][0]["content"] = Value::from("x".repeat(2000));
    let r = s.post("/v1/chat/completions", &big).await;
    r.assert_error(413, "invalid_request_error", "payload_too_large");
    s.healthy("413 with content-length").await;
    // ... and chunked, without one.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = (0..4)
        .map(|_| Ok(vec![b' '; 600]))
        .chain(std::iter::once(Ok(serde_json::to_vec(&ok_body).unwrap())))
        .collect();
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )));
    let r = s.send(req).await;
    r.assert_error(413, "invalid_request_error", "payload_too_large");
    s.healthy("413 chunked").await;

    // 415: not JSON.
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "text/plain")
        .body(ok_body.to_string());
    let r = s.send(req).await;
    r.assert_error(415, "invalid_request_error", "unsupported_media_type");
    s.healthy("415").await;

    // 400: invalid JSON, missing model, model of the wrong type.
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body("{\"model\": \"p/gpt-4o-mini\", \"messages\": [");
    let r = s.send(req).await;
    r.assert_error(400, "invalid_request_error", "invalid_json");
    s.healthy("invalid JSON").await;
    let r = s
        .post(
            "/v1/chat/completions",
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    r.assert_error(400, "invalid_request_error", "missing_model");
    let r = s
        .post(
            "/v1/chat/completions",
            &json!({"model": 42, "messages": []}),
        )
        .await;
    assert_eq!(r.status, 400, "{r:#?}");
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    s.healthy("missing model").await;

    // 401: missing key, wrong key (Bearer and x-api-key).
    let req = s.http.post(s.url("/v1/chat/completions")).json(&ok_body);
    let r = s.send(req).await;
    r.assert_error(401, "authentication_error", "invalid_api_key");
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth("sy-client-wrong-0000000000000000")
        .json(&ok_body);
    let r = s.send(req).await;
    r.assert_error(401, "authentication_error", "invalid_api_key");
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .header("x-api-key", "sy-client-wrong-0000000000000000")
        .json(&ok_body);
    let r = s.send(req).await;
    r.assert_error(401, "authentication_error", "invalid_api_key");
    s.healthy("401").await;

    // 403: a key that may only use p/gpt-4o-mini.
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(NARROW_KEY)
        .json(&chat("echo/gpt-4o-mini", false));
    let r = s.send(req).await;
    r.assert_error(403, "permission_error", "model_not_allowed");
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(NARROW_KEY)
        .json(&ok_body);
    let r = s.send(req).await;
    assert_eq!(r.status, 200, "the narrow key may use its model: {r:#?}");
    s.healthy("403").await;

    // 404: unknown model, unknown model of a known provider, unknown path.
    let r = s
        .post("/v1/chat/completions", &chat("no-such-model", false))
        .await;
    r.assert_error(404, "invalid_request_error", "model_not_found");
    let r = s
        .post("/v1/chat/completions", &chat("p/no-such-model", false))
        .await;
    r.assert_error(404, "invalid_request_error", "model_not_found");
    let req = s.http.get(s.url("/v1/nope")).bearer_auth(CLIENT_KEY);
    let r = s.send(req).await;
    r.assert_error(404, "invalid_request_error", "not_found");
    let req = s.http.post(s.url("/nope")).json(&ok_body);
    let r = s.send(req).await;
    r.assert_error(404, "invalid_request_error", "not_found");
    s.healthy("404").await;

    // Nothing above reached an upstream except the two successful calls.
    assert_eq!(s.mock.stats().requests_total, 2);
    s.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_errors_use_the_anthropic_envelope() {
    let mut s = setup().await;
    let body = messages("a/claude-sonnet-4-5", false);
    let r = s.post("/v1/messages", &body).await;
    assert_eq!(r.status, 200, "control request: {r:#?}");
    assert_eq!(r.json()["type"], "message");

    let req = s
        .http
        .post(s.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("content-type", "application/json")
        .body("{not json");
    let r = s.send(req).await;
    assert_anthropic_error(&r, 400, "invalid_request_error", "invalid_json");

    let req = s.http.post(s.url("/v1/messages")).json(&body);
    let r = s.send(req).await;
    assert_anthropic_error(&r, 401, "authentication_error", "invalid_api_key");

    let r = s
        .post("/v1/messages", &messages("claude-nonexistent", false))
        .await;
    assert_anthropic_error(&r, 404, "not_found_error", "model_not_found");

    let mut big = body.clone();
    big["messages"][0]["content"] = Value::from("y".repeat(2000));
    let r = s.post("/v1/messages", &big).await;
    assert_anthropic_error(&r, 413, "request_too_large", "payload_too_large");

    let req = s
        .http
        .post(s.url("/v1/messages"))
        .header("x-api-key", CLIENT_KEY)
        .header("content-type", "text/plain")
        .body(body.to_string());
    let r = s.send(req).await;
    assert_eq!(r.status, 415);
    assert_eq!(r.json()["type"], "error", "{r:#?}");

    // An upstream failure re-wrapped for an Anthropic client.
    s.mock
        .script(FaultSpec::status(400).for_key(UPSTREAM_A).times(1))
        .unwrap();
    let r = s.post("/v1/messages", &body).await;
    assert_eq!(r.status, 400, "{r:#?}");
    let v = r.json();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(v["error"]["code"].is_string(), "{v}");
    s.healthy("anthropic errors").await;
    s.assert_no_secrets();
}

fn retry_after_secs(r: &Reply) -> u64 {
    let raw = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {r:#?}"));
    raw.parse()
        .unwrap_or_else(|_| panic!("Retry-After is not whole seconds: {raw:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_retry_after_is_handled() {
    let mut s = setup().await;
    for (i, value) in BAD_RETRY_AFTER.iter().enumerate() {
        // With a second connection, the request simply fails over.
        s.mock
            .script(
                FaultSpec::status(429)
                    .for_key(upstream_key(i, 1))
                    .header("Retry-After", *value)
                    .times(1),
            )
            .unwrap();
        let r = s
            .post(
                "/v1/chat/completions",
                &chat(&format!("r{i}/gpt-4o-mini"), false),
            )
            .await;
        assert_eq!(r.status, 200, "Retry-After {value:?}: {r:#?}");
        assert_eq!(r.connection(), format!("r{i}-k2"));
        assert_eq!(r.attempts(), 2);

        // With one connection, the client gets a 429 and a sane Retry-After.
        s.mock
            .script(
                FaultSpec::status(429)
                    .for_key(upstream_key(i + 10, 1))
                    .header("Retry-After", *value)
                    .times(1),
            )
            .unwrap();
        let model = format!("s{i}/gpt-4o-mini");
        let r = s.post("/v1/chat/completions", &chat(&model, false)).await;
        // The 429 cooled the only connection: the spec's answer for a cooling connection.
        r.assert_error(429, "rate_limit_error", "connection_cooldown");
        // An unusable hint may be dropped (as the reference does), but never passed on raw.
        if r.header("retry-after").is_some() {
            let secs = retry_after_secs(&r);
            assert!(
                (1..=30 * 24 * 3600).contains(&secs),
                "Retry-After {value:?} became {secs}"
            );
        }
        // The next request meets the cooldown: still a typed 429, without an upstream call.
        wait_cooling(&s.node, &format!("s{i}-k1")).await;
        let before = s.mock.stats().requests_for_key(&upstream_key(i + 10, 1));
        let r = s.post("/v1/chat/completions", &chat(&model, false)).await;
        assert_eq!(r.status, 429, "{r:#?}");
        assert_eq!(r.json()["error"]["type"], "rate_limit_error");
        let secs = retry_after_secs(&r);
        assert!((1..=30 * 24 * 3600).contains(&secs), "{value:?}: {secs}");
        assert_eq!(
            s.mock.stats().requests_for_key(&upstream_key(i + 10, 1)),
            before,
            "a cooling connection is not called"
        );
        s.healthy(&format!("Retry-After {value:?}")).await;
    }
    s.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echoed_credentials_never_reach_the_client() {
    let mut s = setup().await;
    // The upstream rejects the key and echoes it back, as some providers do.
    s.mock
        .script(FaultSpec {
            error_message: Some(format!(
                "Incorrect API key provided: {UPSTREAM_ECHO}. You can find your API key in the console."
            )),
            ..FaultSpec::status(401).for_key(UPSTREAM_ECHO).times(1)
        })
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("echo/gpt-4o-mini", false))
        .await;
    assert!(r.status >= 400, "{r:#?}");
    let v = r.json();
    assert!(
        v["error"]["type"].is_string() && v["error"]["code"].is_string(),
        "{v}"
    );
    // Same for a key in a known format, in a streamed request.
    s.mock
        .script(FaultSpec {
            error_message: Some(format!("invalid x-api-key {UPSTREAM_P}")),
            ..FaultSpec::status(401).for_key(UPSTREAM_P).times(1)
        })
        .unwrap();
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&chat("p/gpt-4o-mini", true));
    let r = send_stream(req, Duration::from_secs(10)).await;
    assert!(r.status >= 400, "{r:#?}");
    s.seen.push(r.everything());
    // An in-band error event before any content, echoing the credential.
    s.mock
        .script(FaultSpec {
            midstream_error_after: Some(0),
            error_message: Some(format!("Incorrect API key provided: {UPSTREAM_ECHO2}")),
            ..FaultSpec::new().for_key(UPSTREAM_ECHO2).times(1)
        })
        .unwrap();
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&chat("echo2/gpt-4o-mini", true));
    let r = send_stream(req, Duration::from_secs(10)).await;
    assert!(r.status >= 400, "{r:#?}");
    s.seen.push(r.everything());
    // The same after commit: the client gets the chunks and an in-band error event.
    s.mock
        .script(FaultSpec {
            midstream_error_after: Some(2),
            error_message: Some(format!("Incorrect API key provided: {UPSTREAM_ECHO3}")),
            ..FaultSpec::new().for_key(UPSTREAM_ECHO3).times(1)
        })
        .unwrap();
    let req = s
        .http
        .post(s.url("/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .json(&chat("echo3/gpt-4o-mini", true));
    let r = send_stream(req, Duration::from_secs(10)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    assert_eq!(
        r.events().iter().filter(|e| e.is_error()).count(),
        1,
        "{}",
        r.raw
    );
    s.seen.push(r.everything());
    s.healthy("echoed credentials").await;
    s.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicked_connection_actor_restarts_with_its_state() {
    let mock = mock(3).await;
    let url = mock.base_url();
    let config = format!(
        "{}{}{}{}",
        open_auth_no_queue(),
        provider("p", "openai", &url, &["gpt-4o-mini"], "", ""),
        connection("p-k1", "p", "SUP_K1", "priority = 1"),
        connection("p-k2", "p", "SUP_K2", "priority = 2"),
    );
    let (k1, k2) = ("sk-supervise-k1-00000001", "sk-supervise-k2-00000002");
    let node = start_node(
        config,
        env(&[
            ("SUP_K1", k1),
            ("SUP_K2", k2),
            ("SWITCHYARD_TEST_HOOKS", "1"),
        ]),
    )
    .await;
    let c = http();
    let base = node.client_url();
    let admin = node.admin_url();

    // p-k1 cools for 30 s.
    mock.script(
        FaultSpec::status(429)
            .for_key(k1)
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    let r = post(
        &c,
        &base,
        "/v1/chat/completions",
        &chat("p/gpt-4o-mini", false),
    )
    .await;
    assert_eq!((r.status, r.connection().as_str()), (200, "p-k2"), "{r:#?}");
    wait_cooling(&node, "p-k1").await;

    let restarts = |c: reqwest::Client, admin: String| async move {
        let r = send(c.get(format!("{admin}/test-hooks/actor-restarts"))).await;
        assert_eq!(r.status, 200, "{r:#?}");
        r.json()["restarts"].as_u64().expect("restarts")
    };
    assert_eq!(restarts(c.clone(), admin.clone()).await, 0);
    let r = send(c.post(format!("{admin}/test-hooks/connections/p-k1/panic"))).await;
    assert!(r.status == 200 || r.status == 202, "{r:#?}");
    let restarted = eventually(STATE_DEADLINE, || {
        let done = restarts(c.clone(), admin.clone());
        async move { done.await >= 1 }
    })
    .await;
    assert!(
        restarted,
        "the actor was not restarted; log:\n{}",
        node.log()
    );
    let r = send(c.post(format!("{admin}/test-hooks/connections/nope/panic"))).await;
    assert_eq!(r.status, 404);

    // Traffic continues, and the restarted actor still has p-k1 cooling.
    for _ in 0..5 {
        let r = post(
            &c,
            &base,
            "/v1/chat/completions",
            &chat("p/gpt-4o-mini", false),
        )
        .await;
        assert_eq!((r.status, r.connection().as_str()), (200, "p-k2"), "{r:#?}");
    }
    assert_eq!(
        mock.stats().requests_for_key(k1),
        1,
        "p-k1 is still skipped"
    );
    assert_healthy(&node, "actor panic").await;
}
