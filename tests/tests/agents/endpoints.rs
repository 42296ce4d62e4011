//! The endpoints the agents call besides their conversations (`count_tokens`), the Responses
//! API of the official OpenAI SDK on a chat-only provider, and the translation policy on the
//! fields the agents send (dropped, emulated and refused parameters; `context_management`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockHandle, MockUpstream};
use switchyard_tests::python::run;

use crate::support::http::*;
use crate::{CLAUDE_MODEL, access_lines, agent_mock, node_for};

async fn count_tokens_via(format: &str) -> (MockHandle, NodeProcess, reqwest::Response) {
    let mock = agent_mock("Bash", json!({}), true).await;
    let node = node_for(&mock, format, CLAUDE_MODEL).await;
    let resp = http()
        .post(format!("{}/v1/messages/count_tokens?beta=true", node.client_url()))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({
            "model": CLAUDE_MODEL,
            "system": "You are a careful assistant.",
            "messages": [{"role": "user", "content": "Count the tokens of this sentence, please."}],
            "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}]
        }))
        .send()
        .await
        .unwrap();
    (mock, node, resp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_is_forwarded_to_an_anthropic_provider() {
    let (mock, node, resp) = count_tokens_via("anthropic").await;
    assert_eq!(resp.status(), 200, "{}", node.log());
    assert!(resp.headers().get("x-switchyard-token-estimate").is_none());
    let body: Value = resp.json().await.unwrap();
    assert!(body["input_tokens"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(mock.count_tokens_requests(), 1, "the provider counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_is_estimated_for_an_openai_provider() {
    let (mock, node, resp) = count_tokens_via("openai").await;
    assert_eq!(resp.status(), 200, "{}", node.log());
    assert_eq!(
        resp.headers()
            .get("x-switchyard-token-estimate")
            .and_then(|v| v.to_str().ok()),
        Some("tiktoken-o200k_base")
    );
    let body: Value = resp.json().await.unwrap();
    let tokens = body["input_tokens"].as_u64().unwrap();
    // System, message and tool definition: a few dozen o200k tokens, not bytes / 4 of JSON.
    assert!((15..200).contains(&tokens), "{body}");
    assert_eq!(mock.count_tokens_requests(), 0, "nothing went upstream");
}

/// The official OpenAI Python SDK's `responses.create`, JSON and stream, against an
/// OpenAI-format provider that does not serve `/v1/responses` (the mock answers it with
/// vLLM's 404), with the default `responses_api = "auto"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_responses_work_against_a_chat_only_provider() {
    let python = tokio::task::spawn_blocking(|| {
        switchyard_tests::python::ensure_venv(
            "sdk-venv",
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk/requirements.txt"),
        )
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("SDK virtualenv: {e}"));
    let mock = MockUpstream::start(MockConfig {
        serve_responses: false,
        chunks: 4,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let node = node_for(&mock, "openai", "qwen3-coder").await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("responses_check.py");
    std::fs::write(
        &script,
        r#"import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="sy-not-checked", max_retries=0)
r = client.responses.create(model="qwen3-coder", input="Say hello")
assert r.status == "completed", r
text = r.output_text
assert text, r
chunks = []
with client.responses.stream(model="qwen3-coder", input="Say hello") as stream:
    for event in stream:
        if event.type == "response.output_text.delta":
            chunks.append(event.delta)
    final = stream.get_final_response()
assert "".join(chunks) == text == final.output_text, (chunks, text, final)
print("responses ok:", text)
"#,
    )
    .unwrap();
    let base = node.client_url();
    let (ok, output) = tokio::task::spawn_blocking(move || {
        run(
            Command::new(&python)
                .arg(&script)
                .arg(&base)
                .env("NO_PROXY", "127.0.0.1,localhost")
                .env_remove("HTTP_PROXY")
                .env_remove("HTTPS_PROXY")
                .env_remove("OPENAI_BASE_URL"),
            Duration::from_secs(120),
            "responses_check.py",
        )
    })
    .await
    .unwrap();
    assert!(
        ok && output.contains("responses ok: Hello"),
        "{output}\n--- node log ---\n{}",
        node.log()
    );
    let stats = mock.stats();
    assert!(
        stats.recent_bodies.len() >= 2
            && stats
                .recent_bodies
                .iter()
                .all(|b| b.route == "chat_completions"),
        "{:?}",
        stats
            .recent_bodies
            .iter()
            .map(|b| &b.route)
            .collect::<Vec<_>>()
    );
}

/// The policy through the node: a dropped field is named in `x-switchyard-dropped-params`, an
/// emulated one in `x-switchyard-emulated-params`;
/// `[translation] unknown_params = "refuse"` refuses an unknown hint field with a 400 naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_params_are_named_and_strict_mode_refuses_unknown_fields() {
    let mock = MockUpstream::start(MockConfig {
        chunks: 2,
        ..MockConfig::default()
    })
    .await
    .unwrap();
    let body = json!({
        "model": "m1",
        "max_tokens": 16,
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "x_trace_context": {"id": "abc"},
        "messages": [{"role": "user", "content": "hi"}]
    });
    for strict in [false, true] {
        let mut config = format!(
            "{}{}{}",
            open_auth_no_queue(),
            provider("p", "openai", &mock.base_url(), &["m1"], "", ""),
            connection("p-k1", "p", "AGENT_UPSTREAM_KEY", ""),
        );
        if strict {
            config.push_str("\n[translation]\nunknown_params = \"refuse\"\n");
        }
        let node = start_node(
            config,
            env(&[("AGENT_UPSTREAM_KEY", "sk-agent-upstream-0000000001")]),
        )
        .await;
        for stream in [false, true] {
            let mut body = body.clone();
            body["stream"] = json!(stream);
            let resp = http()
                .post(format!("{}/v1/messages", node.client_url()))
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let header = |name: &str| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            let (header, emulated_header) = (
                header("x-switchyard-dropped-params"),
                header("x-switchyard-emulated-params"),
            );
            let text = resp.text().await.unwrap();
            if strict {
                assert_eq!(status, 400, "{text}");
                let err: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(err["error"]["param"], "x_trace_context", "{text}");
            } else {
                assert_eq!(status, 200, "{text}\n{}", node.log());
                assert_eq!(
                    header.as_deref(),
                    Some("x_trace_context"),
                    "stream={stream}"
                );
                assert_eq!(
                    emulated_header.as_deref(),
                    Some("context_management"),
                    "stream={stream}"
                );
            }
        }
        let log = node.wait_for_log(Duration::from_secs(5), |log| access_lines(log).len() >= 2);
        let lines = access_lines(&log);
        if !strict {
            assert!(
                lines
                    .iter()
                    .all(|l| l["dropped_params"] == "x_trace_context"
                        && l["emulated_params"] == "context_management"),
                "{lines:?}"
            );
        }
    }
}

/// `context_management`'s `clear_tool_uses_20250919` on a chat provider: Switchyard clears the
/// old tool results itself, so the upstream gets the short conversation; without the edit it
/// gets the whole one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_management_clears_old_tool_results_before_a_chat_provider() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let config = format!(
        "{}{}{}",
        open_auth_no_queue(),
        provider("p", "openai", &mock.base_url(), &["m1"], "", ""),
        connection("p-k1", "p", "AGENT_UPSTREAM_KEY", ""),
    );
    let node = start_node(
        config,
        env(&[("AGENT_UPSTREAM_KEY", "sk-agent-upstream-0000000002")]),
    )
    .await;
    // Six tool round trips, each result 4,000 characters (about 6,000 tokens in all).
    let mut messages = vec![json!({"role": "user", "content": "fix the bug"})];
    for i in 0..6 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Read",
             "input": {"file_path": format!("src/file{i}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
             "content": "x".repeat(4000)}]}));
    }
    let edit = json!({"edits": [{"type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 2000},
        "keep": {"type": "tool_uses", "value": 1}}]});
    let mut sizes = Vec::new();
    for with_edit in [false, true] {
        let mut body = json!({"model": "m1", "max_tokens": 16, "messages": messages});
        if with_edit {
            body["context_management"] = edit.clone();
        }
        let resp = http()
            .post(format!("{}/v1/messages", node.client_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let emulated = resp
            .headers()
            .get("x-switchyard-emulated-params")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(emulated.is_some(), with_edit, "{emulated:?}");
        let stats = mock.stats();
        let last = stats
            .recent_bodies
            .last()
            .expect("the mock saw the request");
        assert_eq!(last.route, "chat_completions");
        sizes.push(last.len);
    }
    assert!(
        sizes[0] > 24_000,
        "the whole conversation goes up: {sizes:?}"
    );
    assert!(
        sizes[1] < 8_000,
        "five old results are cleared, one kept: {sizes:?}"
    );
}
