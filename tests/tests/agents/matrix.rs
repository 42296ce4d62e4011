//! The agent version matrix (docs/clients.md): every agent version we support, on a provider
//! of each wire format, asked for a model by the names the README tells users to pass: the
//! combo name `coding`, and for Claude Code also a `provider/model` name. Neither is a model
//! Claude Code knows, which is what makes it send its newer request shape (a `system` message
//! inside `messages`, adaptive thinking, `output_config`, `context_management`).
//!
//! Every cell is its own test so that a failure names the agent, the version and the format.
//! Each run is the same round trip as the pinned agents' tests in `main.rs`: the scripted
//! model asks for one tool call, the agent runs it and sends its output back, and the agent
//! prints the final text; every access-log line is a 200.
//!
//! The versions: Claude Code 2.1.328 (the one a user reported), 2.1.332 (pinned) and 2.1.337
//! (the newest in the registry on 2026-12-07); Codex 0.169.0 (reported) and 0.171.0 (pinned,
//! the newest); Qwen Code 0.24.4 and the Continue CLI 1.5.47, two more widely used agents that
//! speak OpenAI Chat Completions to a configurable base URL. Older versions are installed under
//! npm aliases (`tests/agents/package.json`), so each is run from its own package folder.

use std::path::PathBuf;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::MockHandle;

use crate::{
    AgentDirs, CLAUDE_MODEL, agent_mock, agents_dir, assert_every_upstream_route,
    assert_round_trip, codex_config, node_with, offline_command, run_agent, skip,
};

/// The combo name the README's examples use.
const COMBO: &str = "coding";
/// The model the OpenAI-format provider serves.
const OPENAI_MODEL: &str = "gpt-5.1";

/// One installed agent: its npm package folder under `tests/agents/node_modules` and the
/// executable inside it.
#[derive(Clone, Copy)]
struct Agent {
    label: &'static str,
    package: &'static str,
    bin: &'static str,
}

const CLAUDE_2_1_328: Agent = Agent {
    label: "Claude Code 2.1.328",
    package: "claude-code-2.1.328",
    bin: "bin/claude.exe",
};
const CLAUDE_2_1_332: Agent = Agent {
    label: "Claude Code 2.1.332",
    package: "@anthropic-ai/claude-code",
    bin: "bin/claude.exe",
};
const CLAUDE_2_1_337: Agent = Agent {
    label: "Claude Code 2.1.337",
    package: "claude-code-2.1.337",
    bin: "bin/claude.exe",
};
const CODEX_0_169_0: Agent = Agent {
    label: "Codex 0.169.0",
    package: "codex-0.169.0",
    bin: "bin/codex.js",
};
const CODEX_0_171_0: Agent = Agent {
    label: "Codex 0.171.0",
    package: "@openai/codex",
    bin: "bin/codex.js",
};
const QWEN_CODE: Agent = Agent {
    label: "Qwen Code 0.24.4",
    package: "@qwen-code/qwen-code",
    bin: "cli-entry.js",
};
const CONTINUE_CLI: Agent = Agent {
    label: "Continue CLI 1.5.47",
    package: "@continuedev/cli",
    bin: "dist/cn.js",
};

impl Agent {
    fn path(self) -> PathBuf {
        agents_dir()
            .join("node_modules")
            .join(self.package)
            .join(self.bin)
    }

    /// The version its package.json declares, so a cell cannot silently run another one.
    fn installed_version(self) -> String {
        let manifest = agents_dir()
            .join("node_modules")
            .join(self.package)
            .join("package.json");
        let text = std::fs::read_to_string(&manifest)
            .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
        let v: Value = serde_json::from_str(&text).unwrap();
        v["version"].as_str().unwrap_or_default().to_owned()
    }
}

/// The model the provider of `format` serves.
fn upstream_model(format: &str) -> &'static str {
    if format == "anthropic" {
        CLAUDE_MODEL
    } else {
        OPENAI_MODEL
    }
}

/// A node with one provider `p` of `format` serving its model at the mock, and the combo
/// `coding` whose one target is that model.
async fn matrix_node(mock: &MockHandle, format: &str) -> NodeProcess {
    let model = upstream_model(format);
    let combo =
        format!("\n[[combos]]\nname = \"{COMBO}\"\ntargets = [{{ target = \"p/{model}\" }}]\n");
    node_with(mock, format, model, &combo).await
}

/// Runs one cell: `agent` asks the node for `model` (a name the README documents) on a
/// provider of `format`, and the round trip is checked.
async fn cell(agent: Agent, format: &str, model: &str) {
    let what = format!("{} on an {format} provider, model `{model}`", agent.label);
    if skip(&what) {
        return;
    }
    assert!(
        agent.path().exists(),
        "{what}: {} is missing; run tests/run.sh (it installs tests/agents from its lock)",
        agent.path().display()
    );
    let want = agent.label.rsplit(' ').next().unwrap_or_default();
    assert_eq!(
        agent.installed_version(),
        want,
        "{what}: another version is installed; run tests/run.sh (it installs tests/agents from its lock)"
    );
    let (tool, args, serve_responses) = match agent.package {
        p if p.contains("claude-code") => (
            "Bash",
            json!({"command": "echo hi", "description": "Print hi"}),
            true,
        ),
        p if p.contains("codex") => ("exec_command", json!({"cmd": "echo hi"}), false),
        p if p.contains("qwen") => ("run_shell_command", json!({"command": "echo hi"}), true),
        _ => ("Bash", json!({"command": "echo hi"}), true),
    };
    let mock = agent_mock(tool, args, serve_responses).await;
    let node = matrix_node(&mock, format).await;
    let dirs = AgentDirs::new();
    let cmd = command_for(agent, &node, model, &dirs);
    let result = run_agent(cmd, "agent").await;
    let lines = assert_round_trip(&what, result, &mock, &node);
    // Every upstream request went out in the provider's own format.
    let route = if format == "anthropic" {
        "messages"
    } else {
        "chat_completions"
    };
    assert_every_upstream_route(&mock, route);
    // The access log names the route the README's name resolved to.
    for line in &lines {
        assert_eq!(line["connection"], "p-k1", "{what}: {line}");
    }
}

/// The agent's command line and environment, offline, pointed at the node.
fn command_for(
    agent: Agent,
    node: &NodeProcess,
    model: &str,
    dirs: &AgentDirs,
) -> std::process::Command {
    let path = agent.path();
    let prompt = "Run `echo hi` in the shell, then reply.";
    match agent.package {
        p if p.contains("claude-code") => {
            let mut cmd = offline_command(&path, &dirs.home, &dirs.work);
            cmd.env("ANTHROPIC_BASE_URL", node.client_url())
                .env("ANTHROPIC_API_KEY", "sk-ant-client-key-not-checked")
                .env("ANTHROPIC_SMALL_FAST_MODEL", model)
                .env("ANTHROPIC_DEFAULT_HAIKU_MODEL", model)
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_ERROR_REPORTING", "1")
                .args(["-p", "Run `echo hi` with the Bash tool, then reply."])
                .args(["--model", model, "--allowedTools", "Bash"])
                .args(["--output-format", "text"]);
            cmd
        }
        p if p.contains("codex") => {
            std::fs::write(
                dirs.codex_home.join("config.toml"),
                codex_config(node, model),
            )
            .unwrap();
            let mut cmd = offline_command(&node_js(), &dirs.home, &dirs.work);
            cmd.arg(&path)
                .env("CODEX_HOME", &dirs.codex_home)
                .env("SWITCHYARD_API_KEY", "sy-client-key-not-checked")
                .args(["exec", "--skip-git-repo-check"])
                .arg("--dangerously-bypass-approvals-and-sandbox")
                .arg(prompt);
            cmd
        }
        p if p.contains("qwen") => {
            let mut cmd = offline_command(&node_js(), &dirs.home, &dirs.work);
            cmd.arg(&path)
                .env("OPENAI_API_KEY", "sy-client-key-not-checked")
                .env("OPENAI_BASE_URL", format!("{}/v1", node.client_url()))
                .env("OPENAI_MODEL", model)
                .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
                .args(["-p", prompt, "--yolo", "--auth-type", "openai"]);
            cmd
        }
        _ => {
            // Continue reads its models from a config file (docs/clients.md shows it).
            let config = dirs.work.join("switchyard.yaml");
            std::fs::write(
                &config,
                format!(
                    "name: switchyard\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: {model}\n    \
                     provider: openai\n    model: {model}\n    apiBase: {}/v1\n    \
                     apiKey: sy-client-key-not-checked\n    roles: [chat, edit, apply]\n",
                    node.client_url()
                ),
            )
            .unwrap();
            let mut cmd = offline_command(&node_js(), &dirs.home, &dirs.work);
            cmd.arg(&path)
                .env("CONTINUE_GLOBAL_DIR", dirs.home.join(".continue"))
                .args(["-p", prompt, "--auto", "--config"])
                .arg(&config);
            cmd
        }
    }
}

/// `node` from `PATH`: the JavaScript agents run under it directly, so that the npm alias
/// folders need no `.bin` links of their own.
fn node_js() -> PathBuf {
    PathBuf::from("node")
}

macro_rules! cells {
    ($($name:ident: $agent:expr, $format:literal, $model:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                cell($agent, $format, $model).await;
            }
        )*
    };
}

cells! {
    claude_code_2_1_328_combo_on_openai: CLAUDE_2_1_328, "openai", COMBO;
    claude_code_2_1_328_provider_model_on_openai: CLAUDE_2_1_328, "openai", "p/gpt-5.1";
    claude_code_2_1_328_combo_on_anthropic: CLAUDE_2_1_328, "anthropic", COMBO;
    claude_code_2_1_332_combo_on_openai: CLAUDE_2_1_332, "openai", COMBO;
    claude_code_2_1_332_provider_model_on_openai: CLAUDE_2_1_332, "openai", "p/gpt-5.1";
    claude_code_2_1_332_combo_on_anthropic: CLAUDE_2_1_332, "anthropic", COMBO;
    claude_code_2_1_337_combo_on_openai: CLAUDE_2_1_337, "openai", COMBO;
    claude_code_2_1_337_provider_model_on_openai: CLAUDE_2_1_337, "openai", "p/gpt-5.1";
    claude_code_2_1_337_combo_on_anthropic: CLAUDE_2_1_337, "anthropic", COMBO;
    codex_0_169_0_combo_on_openai: CODEX_0_169_0, "openai", COMBO;
    codex_0_169_0_combo_on_anthropic: CODEX_0_169_0, "anthropic", COMBO;
    codex_0_171_0_combo_on_openai: CODEX_0_171_0, "openai", COMBO;
    codex_0_171_0_combo_on_anthropic: CODEX_0_171_0, "anthropic", COMBO;
    qwen_code_combo_on_openai: QWEN_CODE, "openai", COMBO;
    qwen_code_combo_on_anthropic: QWEN_CODE, "anthropic", COMBO;
    continue_cli_combo_on_openai: CONTINUE_CLI, "openai", COMBO;
    continue_cli_combo_on_anthropic: CONTINUE_CLI, "anthropic", COMBO;
}
