//! An error changes only the state it is about (RESILIENCE.md, clarifications, second round),
//! end to end against the real node binary and the mock upstream.
//!
//! Each test scripts real provider error bodies into the mock, sends requests through the
//! node, and reads the resulting state back through the admin API (`/api/resilience/cooldowns`
//! for connection cooldowns and model lockouts, `/api/monitoring/health` for breakers) and
//! through what the next request does. The bodies are the providers' documented ones:
//! - OpenAI context overflow: <https://platform.openai.com/docs/guides/error-codes>;
//! - Anthropic errors and in-band stream errors: <https://docs.anthropic.com/en/api/errors>,
//!   <https://docs.anthropic.com/en/api/messages-streaming#error-events>;
//! - unknown routes: Ollama's `404 page not found` (Go's default handler), vLLM's FastAPI
//!   `{"detail":"Not Found"}`, OpenAI's "Invalid URL (POST /v1/responses)";
//! - MiniMax's `x-model-quota-remaining`: the reference's provider rule.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockHandle, Route};
use switchyard_tests::python::{self, run};

use crate::support::eventually;
use crate::support::http::*;

pub(crate) const MGMT_KEY: &str = "mgmt-errsem-7a1c9e3f5b2d";

/// A node next to one mock, with the management API on.
pub(crate) struct Setup {
    pub(crate) mock: MockHandle,
    pub(crate) node: NodeProcess,
    pub(crate) http: reqwest::Client,
}

/// `[auth]` open for clients, the management API on, the queue and direct waits off.
pub(crate) fn prelude() -> String {
    "\n[auth]\nrequire_api_key = false\nmanagement_key_env = \"SY_MGMT\"\n".to_owned()
        + &queue_off()
        + "\n[resilience.wait_for_cooldown]\nenabled = false\n"
}

/// A provider of `category` (the shared helper writes API-key providers only).
pub(crate) fn provider_of(
    category: &str,
    id: &str,
    format: &str,
    url: &str,
    models: &[&str],
) -> String {
    provider(id, format, url, models, "", "").replacen(
        "category = \"apikey\"",
        &format!("category = \"{category}\""),
        1,
    )
}

pub(crate) async fn setup(config: String, keys: &[(&str, &str)]) -> Setup {
    let mock = mock(3).await;
    let mut env_pairs = env(keys);
    env_pairs.push(("SY_MGMT".to_owned(), MGMT_KEY.to_owned()));
    let node = start_node(config.replace("{URL}", &mock.base_url()), env_pairs).await;
    Setup {
        mock,
        node,
        http: http(),
    }
}

impl Setup {
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Reply {
        post(&self.http, &self.node.client_url(), path, body).await
    }

    pub(crate) async fn admin(&self, path: &str) -> Value {
        let r = send(
            self.http
                .get(format!("{}{path}", self.node.admin_url()))
                .bearer_auth(MGMT_KEY),
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {r:#?}");
        r.json()
    }

    /// The cooldown-manager row of connection `id`.
    pub(crate) async fn row(&self, id: &str) -> Value {
        let list = self.admin("/api/resilience/cooldowns").await;
        list["connections"]
            .as_array()
            .expect("connections")
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no row for {id}: {list}"))
    }

    /// The breaker of `provider` in the health body.
    pub(crate) async fn breaker(&self, provider: &str) -> Value {
        let health = self.admin("/api/monitoring/health").await;
        health["providerBreakers"]
            .as_array()
            .expect("providerBreakers")
            .iter()
            .find(|b| b["provider"] == provider)
            .cloned()
            .unwrap_or_else(|| panic!("no breaker for {provider}: {health}"))
    }

    /// Asserts that connection `id` is neither cooling nor locked, and that its provider's
    /// breaker counted nothing; waits for the asynchronous observations to land first.
    pub(crate) async fn assert_untouched(&self, id: &str, provider: &str, what: &str) {
        // Observations are applied by actors after the answer; a request that changed state
        // has changed it by the time a later request of the same client returns, but give
        // the actors a bounded moment anyway.
        quiesce(&self.node, MGMT_KEY).await;
        let row = self.row(id).await;
        assert_eq!(row["cooldownRemainingMs"], 0, "{what}: cooled {row}");
        assert_eq!(row["lockouts"], json!([]), "{what}: locked {row}");
        assert_eq!(row["status"], "active", "{what}: {row}");
        let breaker = self.breaker(provider).await;
        assert_eq!(breaker["failureCount"], 0, "{what}: breaker {breaker}");
        assert_eq!(breaker["state"], "CLOSED", "{what}: breaker {breaker}");
    }
}

const OPENAI_CONTEXT: &str = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130475 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
const ANTHROPIC_CONTEXT: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210431 tokens > 200000 maximum"}}"#;

pub(crate) fn json_fault(status: u16, body: &str) -> FaultSpec {
    FaultSpec::raw(status, "application/json", body.as_bytes().to_vec())
}

/// Two OpenAI-format connections and one Anthropic-format connection, and a combo over both
/// providers.
fn two_providers() -> String {
    two_providers_with("")
}

/// [`two_providers`] with `extra` in the OpenAI-format provider's table.
fn two_providers_with(oai_extra: &str) -> String {
    prelude()
        + &provider("oai", "openai", "{URL}", &["gpt-4o-mini"], oai_extra, "")
        + &connection("oai-k1", "oai", "UP_OAI_1", "priority = 1")
        + &connection("oai-k2", "oai", "UP_OAI_2", "priority = 2")
        + &provider("ant", "anthropic", "{URL}", &["claude-sonnet-4-5"], "", "")
        + &connection("ant-k1", "ant", "UP_ANT_1", "")
        + "\n[[combos]]\nname = \"both\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"oai/gpt-4o-mini\" }, { target = \"ant/claude-sonnet-4-5\" }]\n"
}

const TWO_PROVIDER_KEYS: [(&str, &str); 3] = [
    ("UP_OAI_1", "sk-errsem-oai-1-0001"),
    ("UP_OAI_2", "sk-errsem-oai-2-0002"),
    ("UP_ANT_1", "sk-ant-errsem-ant-1-0003"),
];

/// One client's oversized prompt must not lock the model for everyone: no cooldown, no
/// lockout, no breaker count; the client sees the provider's own code, and the next request
/// of anyone is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_changes_no_shared_state_and_keeps_the_providers_code() {
    let s = setup(two_providers(), &TWO_PROVIDER_KEYS).await;

    // OpenAI-format provider, OpenAI client. Once: a request-scoped error is not retried on
    // the provider's other connection.
    s.mock
        .script(
            json_fault(400, OPENAI_CONTEXT)
                .on_route(Route::ChatCompletions)
                .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("oai/gpt-4o-mini", false))
        .await;
    r.assert_error(400, "invalid_request_error", "context_length_exceeded");
    for id in ["oai-k1", "oai-k2"] {
        s.assert_untouched(id, "oai", "openai context overflow")
            .await;
    }
    let next = s
        .post("/v1/chat/completions", &chat("oai/gpt-4o-mini", false))
        .await;
    assert_eq!(next.status, 200, "the model is not locked: {next:#?}");

    // Anthropic-format provider, OpenAI client: the code is translated.
    s.mock
        .script(
            json_fault(400, ANTHROPIC_CONTEXT)
                .on_route(Route::Messages)
                .times(1),
        )
        .unwrap();
    let r = s
        .post(
            "/v1/chat/completions",
            &chat("ant/claude-sonnet-4-5", false),
        )
        .await;
    r.assert_error(400, "invalid_request_error", "context_length_exceeded");
    s.assert_untouched("ant-k1", "ant", "anthropic prompt too long")
        .await;
    let next = s
        .post(
            "/v1/chat/completions",
            &chat("ant/claude-sonnet-4-5", false),
        )
        .await;
    assert_eq!(next.status, 200, "the model is not locked: {next:#?}");

    // Anthropic client: Anthropic's envelope, with the code alongside.
    s.mock
        .script(
            json_fault(400, ANTHROPIC_CONTEXT)
                .on_route(Route::Messages)
                .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/messages", &messages("ant/claude-sonnet-4-5", false))
        .await;
    assert_eq!(r.status, 400, "{r:#?}");
    let v = r.json();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert_eq!(v["error"]["code"], "context_length_exceeded", "{v}");

    // In a combo, a context overflow moves on (row 15) to the next target, without the
    // target's other connection, and still locks nothing.
    s.mock
        .script(
            json_fault(400, OPENAI_CONTEXT)
                .on_route(Route::ChatCompletions)
                .times(1),
        )
        .unwrap();
    let r = s.post("/v1/chat/completions", &chat("both", false)).await;
    assert_eq!(r.status, 200, "the combo moved on: {r:#?}");
    for id in ["oai-k1", "oai-k2"] {
        s.assert_untouched(id, "oai", "combo context overflow")
            .await;
    }
}

/// A 404 that names a route (a chat-only server asked for `/v1/responses`) is not a model
/// 404: the model stays usable for chat, for everyone. The provider passes Responses through
/// (`responses_api = "native"`): with the default (`auto`) a host that is not OpenAI's gets
/// Chat and never sees `/v1/responses`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_route_404_does_not_lock_the_model() {
    let s = setup(
        two_providers_with("responses_api = \"native\""),
        &TWO_PROVIDER_KEYS,
    )
    .await;
    let responses = json!({"model": "oai/gpt-4o-mini", "input": "Say hello"});
    for body in [
        "404 page not found",
        r#"{"detail":"Not Found"}"#,
        r#"{"error":{"message":"Invalid URL (POST /v1/responses)","type":"invalid_request_error","param":null,"code":null}}"#,
    ] {
        let ct = if body.starts_with('{') {
            "application/json"
        } else {
            "text/plain"
        };
        s.mock
            .script(
                FaultSpec::raw(404, ct, body.as_bytes().to_vec())
                    .on_route(Route::Responses)
                    .times(1),
            )
            .unwrap();
        let r = s.post("/v1/responses", &responses).await;
        assert_eq!(r.status, 404, "{body}: {r:#?}");
        assert_ne!(
            r.json()["error"]["code"],
            "model_not_found",
            "{body}: {r:#?}"
        );
        for id in ["oai-k1", "oai-k2"] {
            s.assert_untouched(id, "oai", body).await;
        }
        let chat_reply = s
            .post("/v1/chat/completions", &chat("oai/gpt-4o-mini", false))
            .await;
        assert_eq!(
            chat_reply.status, 200,
            "{body}: chat still served: {chat_reply:#?}"
        );
    }
}

/// One in-band Anthropic error event before any content.
pub(crate) fn anthropic_error_stream(error_type: &str, message: &str) -> Vec<u8> {
    let start = json!({"type": "message_start", "message": {"id": "msg_01", "type": "message",
        "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}});
    let error = json!({"type": "error", "error": {"type": error_type, "message": message}});
    format!("event: message_start\ndata: {start}\n\nevent: error\ndata: {error}\n\n").into_bytes()
}

/// Twelve in-band `rate_limit_error` streams (the apikey breaker's open threshold) are
/// rate limits, not bad gateways: the client sees 429 and the breaker counts nothing. The
/// connection has `disable_cooling` so every request reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_band_rate_limits_do_not_open_the_apikey_breaker() {
    let config = prelude()
        + &provider("ant", "anthropic", "{URL}", &["claude-sonnet-4-5"], "", "")
        + &connection("ant-k1", "ant", "UP_ANT_1", "disable_cooling = true");
    let s = setup(config, &[("UP_ANT_1", "sk-ant-errsem-ant-1-0003")]).await;
    s.mock
        .script(
            FaultSpec::raw(
                200,
                "text/event-stream",
                anthropic_error_stream(
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
            )
            .on_route(Route::Messages)
            .times(12),
        )
        .unwrap();
    for i in 0..12 {
        let r = s
            .post("/v1/messages", &messages("ant/claude-sonnet-4-5", true))
            .await;
        assert_eq!(r.status, 429, "request {i}: {r:#?}");
        assert_eq!(r.json()["error"]["type"], "rate_limit_error", "request {i}");
    }
    quiesce(&s.node, MGMT_KEY).await;
    let breaker = s.breaker("ant").await;
    assert_eq!(breaker["state"], "CLOSED", "{breaker}");
    assert_eq!(breaker["failureCount"], 0, "{breaker}");
    assert_eq!(
        s.mock.stats().requests_total,
        12,
        "every request reached the upstream"
    );

    // A 200 whose JSON body is an error object is classified the same way.
    s.mock
        .script(
            json_fault(
                200,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            )
            .on_route(Route::Messages)
            .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/messages", &messages("ant/claude-sonnet-4-5", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    let breaker = s.breaker("ant").await;
    assert_eq!(breaker["failureCount"], 0, "{breaker}");
}

/// "Weekly usage limit reached" on an OAuth connection (whose profile ignores upstream hints)
/// cools it for the weekly window, 24 h, not for the 5 s backoff step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weekly_limit_on_oauth_cools_for_a_day() {
    let config = prelude()
        + &provider_of("oauth", "chatgpt", "openai", "{URL}", &["gpt-5"])
        + &connection("chatgpt-k1", "chatgpt", "UP_CODEX", "");
    let s = setup(config, &[("UP_CODEX", "sk-errsem-codex-0004")]).await;
    s.mock
        .script(
            json_fault(
                429,
                r#"{"error":{"type":"usage_limit_reached","message":"You've hit your weekly usage limit. Upgrade to Pro or try again later."}}"#,
            )
            .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("chatgpt/gpt-5", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    let cooled = eventually(Duration::from_secs(3), || async {
        s.row("chatgpt-k1").await["cooldownRemainingMs"]
            .as_u64()
            .is_some_and(|ms| ms > 0)
    })
    .await;
    assert!(cooled, "no cooldown: {}", s.row("chatgpt-k1").await);
    let remaining = s.row("chatgpt-k1").await["cooldownRemainingMs"]
        .as_u64()
        .unwrap();
    assert!(
        remaining > 23 * 3_600_000,
        "weekly window is 24 h, got {remaining} ms"
    );
}

/// MiniMax names the exhausted model in `x-model-quota-remaining`; the header must reach
/// classification so that only that model is locked and the connection keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimax_model_quota_header_locks_only_the_model() {
    let config = prelude()
        + &provider(
            "minimax",
            "openai",
            "{URL}",
            &["MiniMax-M1", "MiniMax-Text-01"],
            "",
            "",
        )
        + &connection("minimax-k1", "minimax", "UP_MINIMAX", "");
    let s = setup(config, &[("UP_MINIMAX", "sk-errsem-minimax-0005")]).await;
    s.mock
        .script(
            json_fault(
                429,
                r#"{"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded(RPM)"}}"#,
            )
            .header("x-model-quota-remaining", "MiniMax-M1=0,MiniMax-Text-01=42")
            .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("minimax/MiniMax-M1", false))
        .await;
    assert_eq!(r.status, 429, "{r:#?}");
    let locked = eventually(Duration::from_secs(3), || async {
        s.row("minimax-k1").await["lockouts"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    })
    .await;
    let row = s.row("minimax-k1").await;
    assert!(locked, "no model lockout: {row}");
    assert_eq!(row["lockouts"][0]["reason"], "quota_exhausted", "{row}");
    assert_eq!(
        row["cooldownRemainingMs"], 0,
        "the connection is not cooled: {row}"
    );
    let other = s
        .post(
            "/v1/chat/completions",
            &chat("minimax/MiniMax-Text-01", false),
        )
        .await;
    assert_eq!(other.status, 200, "the other model is served: {other:#?}");
}

/// The real OpenAI Python SDK raises `BadRequestError` with `code == "context_length_exceeded"`
/// through Switchyard, from an OpenAI-format and from an Anthropic-format provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_sees_context_length_exceeded_from_both_formats() {
    let python = tokio::task::spawn_blocking(|| {
        let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/requirements.txt");
        python::ensure_venv("sdk-venv", &requirements)
            .unwrap_or_else(|e| panic!("SDK virtualenv: {e}"))
    })
    .await
    .expect("venv task");
    let s = setup(two_providers(), &TWO_PROVIDER_KEYS).await;
    s.mock
        .script(json_fault(400, OPENAI_CONTEXT).on_route(Route::ChatCompletions))
        .unwrap();
    s.mock
        .script(json_fault(400, ANTHROPIC_CONTEXT).on_route(Route::Messages))
        .unwrap();
    let script = r#"
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0, timeout=20)
failures = 0
for model in ["oai/gpt-4o-mini", "ant/claude-sonnet-4-5"]:
    for stream in [False, True]:
        try:
            r = client.chat.completions.create(model=model, stream=stream,
                messages=[{"role": "user", "content": "a very long prompt"}])
            if stream:
                for _ in r:
                    pass
            print(f"FAIL {model} stream={stream}: no error")
            failures += 1
        except openai.BadRequestError as e:
            if e.code == "context_length_exceeded":
                print(f"ok   {model} stream={stream}: {e.code}")
            else:
                print(f"FAIL {model} stream={stream}: code {e.code!r} body {e.body!r}")
                failures += 1
        except Exception as e:
            print(f"FAIL {model} stream={stream}: {type(e).__name__}: {e}")
            failures += 1
sys.exit(1 if failures else 0)
"#;
    let base = s.node.client_url();
    let (ok, out) = tokio::task::spawn_blocking(move || {
        run(
            Command::new(python).arg("-c").arg(script).arg(base),
            Duration::from_secs(120),
            "openai sdk",
        )
    })
    .await
    .expect("sdk task");
    assert!(
        ok,
        "OpenAI SDK checks failed:\n{out}\nnode log:\n{}",
        s.node.log()
    );
    assert_eq!(out.matches("ok   ").count(), 4, "{out}");
}

/// A 429 without `Retry-After` in a combo, with `model_lockout.enabled = false` (the default),
/// locks the model for the connection's backoff (3 s on an API key), as the same 429 costs on a
/// direct request, not for the lockout's 120 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn combo_429_without_retry_after_locks_for_the_backoff_not_120_s() {
    let s = setup(two_providers(), &TWO_PROVIDER_KEYS).await;
    s.mock
        .script(
            json_fault(
                429,
                r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
            )
            .on_route(Route::ChatCompletions)
            .for_key("sk-errsem-oai-1-0001")
            .times(1),
        )
        .unwrap();
    let r = s.post("/v1/chat/completions", &chat("both", false)).await;
    assert_eq!(r.status, 200, "{r:#?}");
    let locked = eventually(Duration::from_secs(3), || async {
        s.row("oai-k1").await["lockouts"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    })
    .await;
    let row = s.row("oai-k1").await;
    assert!(locked, "the combo's 429 locks the model: {row}");
    let remaining = row["lockouts"][0]["remainingMs"].as_u64().unwrap();
    assert!(
        remaining > 0 && remaining <= 3_000,
        "locked for the 3 s backoff, not 120 s: {row}"
    );
}

/// A direct request whose own failure cooled its only connection gets the spec's answer for a
/// connection found cooling: 429 `connection_cooldown` with `reset_seconds` and `Retry-After`,
/// not the raw upstream 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_cools_its_only_connection_gets_429_with_reset_seconds() {
    let config = prelude()
        + &provider("solo", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + &connection("solo-k1", "solo", "UP_SOLO", "");
    let s = setup(config, &[("UP_SOLO", "sk-errsem-solo-0006")]).await;
    s.mock
        .script(
            json_fault(
                500,
                r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#,
            )
            .times(1),
        )
        .unwrap();
    let r = s
        .post("/v1/chat/completions", &chat("solo/gpt-4o-mini", false))
        .await;
    let v = r.assert_error(429, "rate_limit_error", "connection_cooldown");
    assert!(
        v["error"]["reset_seconds"]
            .as_u64()
            .is_some_and(|s| (1..=3).contains(&s)),
        "{v}"
    );
    assert!(r.header("retry-after").is_some(), "{r:#?}");
}

/// Targets refused only by Switchyard's own gates exist: a combo whose every target is at
/// capacity answers the gate's error with a Retry-After, never 404 `no_executable_targets`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_combo_is_not_a_missing_model() {
    let config = prelude()
        + "\n[resilience.concurrency]\nsemaphore_queue_timeout_ms = 200\n"
        + &provider("slow", "openai", "{URL}", &["gpt-4o-mini"], "", "")
        + &connection("slow-k1", "slow", "UP_SLOW", "max_concurrent = 1")
        + "\n[[combos]]\nname = \"sat\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"slow/gpt-4o-mini\" }]\n";
    let s = setup(config, &[("UP_SLOW", "sk-errsem-slow-0007")]).await;
    let mut hold = FaultSpec::new().times(1);
    hold.latency_before_headers_ms = Some(4_000);
    s.mock.script(hold).unwrap();
    let http = s.http.clone();
    let base = s.node.client_url();
    let first = tokio::spawn(async move {
        post(&http, &base, "/v1/chat/completions", &chat("sat", false)).await
    });
    let arrived = eventually(Duration::from_secs(3), || async {
        s.mock.stats().requests_total >= 1
    })
    .await;
    assert!(arrived, "the first request holds the only permit");
    let r = s.post("/v1/chat/completions", &chat("sat", false)).await;
    assert_ne!(r.status, 404, "{r:#?}");
    let v = r.assert_error(429, "rate_limit_error", "SEMAPHORE_TIMEOUT");
    assert!(r.header("retry-after").is_some(), "{v}");
    assert_eq!(first.await.unwrap().status, 200);
}
