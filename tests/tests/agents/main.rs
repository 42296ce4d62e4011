//! Real coding agents end to end through the node: Claude Code (`claude -p`) and Codex
//! (`codex exec`), pinned in `tests/agents/package.json` and installed from the lock file into
//! `tests/agents/node_modules`.
//!
//! Each test starts a mock upstream that plays a model asking for one tool call and then
//! answering ([`AgentScript`]), a node with one provider in the format under test, and the
//! agent against the node, fully offline (telemetry, update checks and other nonessential
//! traffic off; a temporary `HOME` / `CODEX_HOME`). A run passes when the agent exits 0 with
//! the scripted final text, the mock saw the tool's output come back (the agent really ran
//! the tool between the two requests), and every access-log line of the node is a 200.
//!
//! `resilience.rs` runs the agents through the newer resilience features (a stream cut inside
//! the stream-recovery hold, a `context-relay` session moving with a summary, a `quota-share`
//! pool); `endpoints.rs` checks the other endpoints and the translation policy on the fields
//! the agents send.
//!
//! The agents need Node.js and an install of `tests/agents` from its lock (`tests/run.sh` installs both). When
//! they are missing a test fails under CI and naming the install command, and elsewhere skips
//! with a loud banner (`switchyard_tests::prerequisite`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

#[path = "../support/mod.rs"]
mod support;

mod endpoints;
mod matrix;
mod resilience;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{
    AgentScript, MockConfig, MockHandle, MockUpstream, ToolCallSpec,
};
use switchyard_tests::prerequisite;
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

/// Why the agents cannot run here, if they cannot, and the command that fixes it.
fn missing_agents() -> Option<(String, &'static str)> {
    for tool in ["node", "npm"] {
        let (ok, out) = run(
            Command::new(tool).arg("--version"),
            Duration::from_secs(30),
            tool,
        );
        if !ok {
            return Some((
                format!("`{tool}` is not available ({})", out.trim()),
                "apt-get install nodejs npm, then tests/run.sh (it installs tests/agents from its lock)",
            ));
        }
    }
    for bin in ["claude", "codex"] {
        if !agent_bin(bin).exists() {
            return Some((
                format!("{} is not installed", agent_bin(bin).display()),
                "the install of tests/agents from its lock (tests/run.sh runs it)",
            ));
        }
    }
    None
}

/// `true` when `test` cannot run here: it then skips loudly, or fails under CI.
fn skip(test: &str) -> bool {
    let missing = missing_agents();
    let (why, install) = match &missing {
        Some((why, install)) => (Some(why.as_str()), *install),
        None => (None, ""),
    };
    !prerequisite::require(test, why, install)
}

async fn agent_mock(tool: &str, arguments: Value, serve_responses: bool) -> MockHandle {
    let base = MockConfig {
        body_history: 4,
        ..MockConfig::default()
    };
    scripted_mock(tool, arguments, serve_responses, base).await
}

/// The mock scripted as the agent's model (one tool call, then `FINAL_TEXT`), with `base`'s
/// other settings.
async fn scripted_mock(
    tool: &str,
    arguments: Value,
    serve_responses: bool,
    base: MockConfig,
) -> MockHandle {
    MockUpstream::start(MockConfig {
        agent: Some(AgentScript {
            tool: ToolCallSpec {
                name: tool.to_owned(),
                arguments,
            },
            final_text: FINAL_TEXT.to_owned(),
        }),
        serve_responses,
        ..base
    })
    .await
    .expect("mock upstream starts")
}

/// A node with one provider `p` of `format` serving `model` at the mock.
async fn node_for(mock: &MockHandle, format: &str, model: &str) -> NodeProcess {
    node_with(mock, format, model, "").await
}

/// [`node_for`] with more config (`extra`: whole tables, such as a combo) after it.
async fn node_with(mock: &MockHandle, format: &str, model: &str, extra: &str) -> NodeProcess {
    let config = format!(
        "{}{}{}{extra}",
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
async fn run_agent(cmd: Command, what: &'static str) -> (bool, String) {
    run_agent_within(cmd, what, AGENT_LIMIT).await
}

/// [`run_agent`] killed after `limit`.
async fn run_agent_within(mut cmd: Command, what: &'static str, limit: Duration) -> (bool, String) {
    tokio::task::spawn_blocking(move || run(&mut cmd, limit, what))
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

/// Every request the mock recorded went to `route` (the provider's wire format after any
/// translation).
fn assert_every_upstream_route(mock: &MockHandle, route: &str) {
    let routes: Vec<String> = mock
        .stats()
        .recent_bodies
        .iter()
        .map(|b| b.route.to_string())
        .collect();
    assert!(routes.iter().all(|r| r == route), "{routes:?}");
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
    let dirs = AgentDirs::new();
    let cmd = claude_command(&node, CLAUDE_MODEL, &dirs, CLAUDE_PROMPT);
    let result = run_agent(cmd, "claude -p").await;
    (mock, node, result)
}

const CLAUDE_PROMPT: &str = "Run `echo hi` with the Bash tool, then reply.";

/// A temporary `HOME`, `CODEX_HOME` and working directory, removed when dropped.
struct AgentDirs {
    _dir: tempfile::TempDir,
    home: PathBuf,
    codex_home: PathBuf,
    work: PathBuf,
}

impl AgentDirs {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (home, codex_home, work) = (
            dir.path().join("home"),
            dir.path().join("codex-home"),
            dir.path().join("work"),
        );
        for d in [&home, &codex_home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            _dir: dir,
            home,
            codex_home,
            work,
        }
    }
}

/// `claude -p prompt` on `model` through the node, offline; add arguments or environment.
fn claude_command(node: &NodeProcess, model: &str, dirs: &AgentDirs, prompt: &str) -> Command {
    let mut cmd = offline_command(&agent_bin("claude"), &dirs.home, &dirs.work);
    cmd.env("ANTHROPIC_BASE_URL", node.client_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-client-key-not-checked")
        // Background calls (titles, summaries) go to the same model.
        .env("ANTHROPIC_SMALL_FAST_MODEL", model)
        .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", model)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .args(["-p", prompt])
        .args(["--model", model, "--allowedTools", "Bash"])
        .args(["--output-format", "text"]);
    cmd
}

async fn codex(
    format: &str,
    model: &str,
    serve_responses: bool,
) -> (MockHandle, NodeProcess, (bool, String)) {
    let mock = agent_mock("exec_command", json!({"cmd": "echo hi"}), serve_responses).await;
    let node = node_for(&mock, format, model).await;
    let dirs = AgentDirs::new();
    let cmd = codex_command(&node, model, &dirs);
    let result = run_agent(cmd, "codex exec").await;
    (mock, node, result)
}

/// `codex exec` on `model` through the node, offline, asked to run `echo hi`.
fn codex_command(node: &NodeProcess, model: &str, dirs: &AgentDirs) -> Command {
    std::fs::write(
        dirs.codex_home.join("config.toml"),
        codex_config(node, model),
    )
    .unwrap();
    let mut cmd = offline_command(&agent_bin("codex"), &dirs.home, &dirs.work);
    cmd.env("CODEX_HOME", &dirs.codex_home)
        .env("SWITCHYARD_API_KEY", "sy-client-key-not-checked")
        .args(["exec", "--skip-git-repo-check"])
        // The container running the tests is the sandbox; Codex's own needs privileges.
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .arg("Run `echo hi` in the shell, then reply.");
    cmd
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
    assert_every_upstream_route(&mock, "chat_completions");
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
    assert_every_upstream_route(&mock, "chat_completions");
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
    assert_every_upstream_route(&mock, "messages");
}
