//! Real coding agents end to end through the node: Claude Code (`claude -p`) and Codex
//! (`codex exec`), pinned in `tests/agents/package.json` and installed with `npm ci` into
//! `tests/agents/node_modules`.
//!
//! Each test starts a mock upstream that plays a model asking for one tool call and then
//! answering ([`AgentScript`]), a node with one provider in the format under test, and the
//! agent against the node, fully offline (telemetry, update checks and other nonessential
//! traffic off; a temporary `HOME` / `CODEX_HOME`). A run passes when the agent exits 0 with
//! the scripted final text, the mock saw the tool's output come back (the agent really ran
//! the tool between the two requests), and every access-log line of the node is a 200.
//!
//! The agents need Node.js; when `node`/`npm` or the installed agents are missing the tests
//! say so and pass without running (`tests/run.sh` installs them).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{
    AgentScript, MockConfig, MockHandle, MockUpstream, ToolCallSpec,
};
use switchyard_tests::python::run;

use support::http::*;

/// What the scripted model answers once the tool's result is back.
const FINAL_TEXT: &str = "SWITCHYARD-AGENT-ROUND-TRIP-OK";
/// How long one agent run may take.
const AGENT_LIMIT: Duration = Duration::from_secs(180);
const CLAUDE_MODEL: &str = "claude-sonnet-4-5";
const CODEX_MODEL: &str = "gpt-5.1-codex";

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("agents")
}

fn agent_bin(name: &str) -> PathBuf {
    agents_dir().join("node_modules").join(".bin").join(name)
}

/// Why the agents cannot run here, if they cannot.
fn missing_agents() -> Option<String> {
    for tool in ["node", "npm"] {
        let (ok, out) = run(
            Command::new(tool).arg("--version"),
            Duration::from_secs(30),
            tool,
        );
        if !ok {
            return Some(format!("`{tool}` is not available ({})", out.trim()));
        }
    }
    for bin in ["claude", "codex"] {
        if !agent_bin(bin).exists() {
            return Some(format!(
                "{} is not installed: run `npm ci` in tests/agents",
                agent_bin(bin).display()
            ));
        }
    }
    None
}

fn skip(test: &str) -> bool {
    match missing_agents() {
        Some(why) => {
            println!("SKIPPED {test}: {why}");
            true
        }
        None => false,
    }
}

async fn agent_mock(tool: &str, arguments: Value, serve_responses: bool) -> MockHandle {
    MockUpstream::start(MockConfig {
        agent: Some(AgentScript {
            tool: ToolCallSpec {
                name: tool.to_owned(),
                arguments,
            },
            final_text: FINAL_TEXT.to_owned(),
        }),
        serve_responses,
        body_history: 4,
        ..MockConfig::default()
    })
    .await
    .expect("mock upstream starts")
}

/// A node with one provider `p` of `format` serving `model` at the mock.
async fn node_for(mock: &MockHandle, format: &str, model: &str) -> NodeProcess {
    let config = format!(
        "{}{}{}",
        open_auth_no_queue(),
        provider("p", format, &mock.base_url(), &[model], "", ""),
        connection("p-k1", "p", "AGENT_UPSTREAM_KEY", ""),
    );
    start_node(
        config,
        env(&[("AGENT_UPSTREAM_KEY", "sk-agent-upstream-0000000001")]),
    )
    .await
}

/// A command with only the environment an offline agent run needs.
fn offline_command(bin: &Path, home: &Path, work: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .current_dir(work)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("TERM", "dumb");
    cmd
}

/// Runs the agent off the async threads; returns (exit 0, combined output).
async fn run_agent(mut cmd: Command, what: &'static str) -> (bool, String) {
    tokio::task::spawn_blocking(move || run(&mut cmd, AGENT_LIMIT, what))
        .await
        .expect("agent task")
}

/// The node's access-log lines.
fn access_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "request")
        .collect()
}

/// The checks every run shares; returns the access-log lines.
fn assert_round_trip(
    what: &str,
    (ok, output): (bool, String),
    mock: &MockHandle,
    node: &NodeProcess,
) -> Vec<Value> {
    let log = node.wait_for_log(Duration::from_secs(5), |log| access_lines(log).len() >= 2);
    let context = format!("--- {what} output ---\n{output}\n--- node log ---\n{log}");
    assert!(ok, "{what} did not exit 0\n{context}");
    assert!(
        output.contains(FINAL_TEXT),
        "{what} did not print the final text\n{context}"
    );
    let seen = mock.agent_seen();
    assert!(
        seen.tool_calls_sent >= 1,
        "no tool call was sent: {seen:?}\n{context}"
    );
    assert!(
        seen.tool_results_seen >= 1
            && seen
                .last_tool_result
                .as_deref()
                .is_some_and(|r| r.contains("hi")),
        "the tool's output did not come back: {seen:?}\n{context}"
    );
    let lines = access_lines(&log);
    assert!(
        lines.len() >= 2,
        "expected both turns in the access log\n{context}"
    );
    for line in &lines {
        assert_eq!(
            line["status"], 200,
            "an access-log line is not a 200: {line}\n{context}"
        );
        assert!(
            line.get("code").is_none(),
            "an error in the access log: {line}\n{context}"
        );
    }
    lines
}

fn dropped(lines: &[Value]) -> String {
    joined(lines, "dropped_params")
}

fn emulated(lines: &[Value]) -> String {
    joined(lines, "emulated_params")
}

fn joined(lines: &[Value], field: &str) -> String {
    lines
        .iter()
        .filter_map(|l| l[field].as_str())
        .collect::<Vec<_>>()
        .join(",")
}

async fn claude_code(format: &str) -> (MockHandle, NodeProcess, (bool, String)) {
    let mock = agent_mock(
        "Bash",
        json!({"command": "echo hi", "description": "Print hi"}),
        true,
    )
    .await;
    let node = node_for(&mock, format, CLAUDE_MODEL).await;
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut cmd = offline_command(&agent_bin("claude"), &home, &work);
    cmd.env("ANTHROPIC_BASE_URL", node.client_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-client-key-not-checked")
        // Background calls (titles, summaries) go to the same model.
        .env("ANTHROPIC_SMALL_FAST_MODEL", CLAUDE_MODEL)
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", CLAUDE_MODEL)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .args(["-p", "Run `echo hi` with the Bash tool, then reply."])
        .args(["--model", CLAUDE_MODEL, "--allowedTools", "Bash"])
        .args(["--output-format", "text"]);
    let result = run_agent(cmd, "claude -p").await;
    drop(dir);
    (mock, node, result)
}

async fn codex(
    format: &str,
    model: &str,
    serve_responses: bool,
) -> (MockHandle, NodeProcess, (bool, String)) {
    let mock = agent_mock("exec_command", json!({"cmd": "echo hi"}), serve_responses).await;
    let node = node_for(&mock, format, model).await;
    let dir = tempfile::tempdir().unwrap();
    let (home, codex_home, work) = (
        dir.path().join("home"),
        dir.path().join("codex-home"),
        dir.path().join("work"),
    );
    for d in [&home, &codex_home, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), codex_config(&node, model)).unwrap();
    let mut cmd = offline_command(&agent_bin("codex"), &home, &work);
    cmd.env("CODEX_HOME", &codex_home)
        .env("SWITCHYARD_API_KEY", "sy-client-key-not-checked")
        .args(["exec", "--skip-git-repo-check"])
        // The container running the tests is the sandbox; Codex's own needs privileges.
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .arg("Run `echo hi` in the shell, then reply.");
    let result = run_agent(cmd, "codex exec").await;
    drop(dir);
    (mock, node, result)
}

/// Codex's config for Switchyard as a custom model provider (documented in docs/clients.md).
fn codex_config(node: &NodeProcess, model: &str) -> String {
    format!(
        "model = \"{model}\"\nmodel_provider = \"switchyard\"\ncheck_for_update_on_startup = false\n\n\
         [model_providers.switchyard]\nname = \"Switchyard\"\nbase_url = \"{}/v1\"\n\
         env_key = \"SWITCHYARD_API_KEY\"\nwire_api = \"responses\"\n\n\
         [analytics]\nenabled = false\n",
        node.client_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_on_an_anthropic_provider() {
    if skip("claude_code_on_an_anthropic_provider") {
        return;
    }
    let (mock, node, result) = claude_code("anthropic").await;
    let lines = assert_round_trip("claude -p (anthropic provider)", result, &mock, &node);
    // Same format: nothing is translated, so nothing is dropped.
    assert_eq!(dropped(&lines), "", "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_on_an_openai_provider() {
    if skip("claude_code_on_an_openai_provider") {
        return;
    }
    let (mock, node, result) = claude_code("openai").await;
    let lines = assert_round_trip("claude -p (openai provider)", result, &mock, &node);
    // Claude Code's context editing is done by Switchyard, not dropped.
    assert!(emulated(&lines).contains("context_management"), "{lines:?}");
    assert!(!dropped(&lines).contains("context_management"), "{lines:?}");
    // Every upstream request was translated to chat completions.
    let stats = mock.stats();
    assert!(
        stats
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_on_a_chat_only_openai_provider() {
    if skip("codex_on_a_chat_only_openai_provider") {
        return;
    }
    // The mock refuses /v1/responses like vLLM; the default `responses_api = "auto"`
    // translates for any host that is not OpenAI's.
    let (mock, node, result) = codex("openai", CODEX_MODEL, false).await;
    let lines = assert_round_trip("codex exec (chat-only provider)", result, &mock, &node);
    assert!(dropped(&lines).contains("client_metadata"), "{lines:?}");
    let stats = mock.stats();
    assert!(
        stats
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_on_an_anthropic_provider() {
    if skip("codex_on_an_anthropic_provider") {
        return;
    }
    let (mock, node, result) = codex("anthropic", CLAUDE_MODEL, true).await;
    let lines = assert_round_trip("codex exec (anthropic provider)", result, &mock, &node);
    let dropped = dropped(&lines);
    assert!(
        dropped.contains("client_metadata") && dropped.contains("tools[web_search]"),
        "{lines:?}"
    );
    let stats = mock.stats();
    assert!(
        stats.recent_bodies.iter().all(|b| b.route == "messages"),
        "{:?}",
        stats
            .recent_bodies
            .iter()
            .map(|b| &b.route)
            .collect::<Vec<_>>()
    );
}

// === endpoints the agents call, and the Responses API on chat-only providers ===

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
