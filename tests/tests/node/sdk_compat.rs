//! The official OpenAI and Anthropic Python SDKs against the real node.
//!
//! The test builds a virtualenv under the target directory with the SDK versions pinned in
//! `tests/sdk/requirements.txt` (reused while the requirements are unchanged, so only the
//! first run pays for `pip install`), starts a mock upstream behind an OpenAI-format and an
//! Anthropic-format provider, and runs `tests/sdk/sdk_check.py` against the node: chat JSON
//! and streams, Responses JSON and streams, Messages JSON and streams, and the error
//! envelopes, each parsed by the SDKs themselves. A missing `python3` or `venv` module is a
//! failure, not a skip: CI installs them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use switchyard_tests::mock_upstream::FaultSpec;
use switchyard_tests::python::{self, run};

use crate::support::http::*;

const CLIENT_KEY: &str = "sy-sdk-client-key-3e9f1a7c5b2d";
const CHUNKS: u32 = 5;
/// How long the SDK script may run.
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk")
}

/// The virtualenv's python (`target/sdk-venv`), created with the pinned SDKs when needed.
fn ensure_venv() -> PathBuf {
    python::ensure_venv("sdk-venv", &sdk_dir().join("requirements.txt"))
        .unwrap_or_else(|e| panic!("SDK virtualenv: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_parse_everything_the_node_sends() {
    let python = tokio::task::spawn_blocking(ensure_venv)
        .await
        .expect("venv task");

    let mock = mock(CHUNKS).await;
    let url = mock.base_url();
    let config = format!(
        "\n[auth]\nrequire_api_key = true\nmanagement_key_env = \"\"\n\n\
         [[api_keys]]\nid = \"sdk\"\nkey_env = \"SDK_CLIENT_KEY\"\n{}{}{}{}{}",
        queue_off(),
        provider("oai", "openai", &url, &["gpt-4o-mini"], "", ""),
        provider("ant", "anthropic", &url, &["claude-sonnet-4-5"], "", ""),
        connection("oai-k1", "oai", "SDK_UP_OAI", ""),
        connection("ant-k1", "ant", "SDK_UP_ANT", ""),
    ) + &provider("oaibad", "openai", &url, &["gpt-4o-mini"], "", "")
        + &provider("antbad", "anthropic", &url, &["claude-sonnet-4-5"], "", "")
        + &connection("oaibad-k1", "oaibad", "SDK_UP_OAIBAD", "")
        + &connection("antbad-k1", "antbad", "SDK_UP_ANTBAD", "")
        + &provider("oaitool", "openai", &url, &["gpt-4o-mini"], "", "")
        + &provider("anttool", "anthropic", &url, &["claude-sonnet-4-5"], "", "")
        + &connection("oaitool-k1", "oaitool", "SDK_UP_OAITOOL", "")
        + &connection("anttool-k1", "anttool", "SDK_UP_ANTTOOL", "")
        + "\n[[combos]]\nname = \"x-anthropic\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"oaibad/gpt-4o-mini\" }, { target = \"ant/claude-sonnet-4-5\" }]\n\
           \n[[combos]]\nname = \"x-openai\"\nstrategy = \"priority\"\n\
           targets = [{ target = \"antbad/claude-sonnet-4-5\" }, { target = \"oai/gpt-4o-mini\" }]\n";
    // The tool providers always answer with a tool call, in their own wire format.
    for key in [
        "sk-sdk-upstream-oaitool-000005",
        "sk-ant-sdk-upstream-tool-00006",
    ] {
        let fault: FaultSpec = serde_json::from_value(serde_json::json!({
            "match": {"api_key": key},
            "tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}
        }))
        .unwrap();
        mock.script(fault).unwrap();
    }
    // The first target of each cross-format combo always fails.
    mock.script(FaultSpec::status(503).for_key("sk-sdk-upstream-oaibad-0000003"))
        .unwrap();
    mock.script(FaultSpec::status(503).for_key("sk-ant-sdk-upstream-bad-000004"))
        .unwrap();
    let node = start_node(
        config,
        env(&[
            ("SDK_CLIENT_KEY", CLIENT_KEY),
            ("SDK_UP_OAI", "sk-sdk-upstream-openai-00000001"),
            ("SDK_UP_ANT", "sk-ant-sdk-upstream-000000002"),
            ("SDK_UP_OAIBAD", "sk-sdk-upstream-oaibad-0000003"),
            ("SDK_UP_ANTBAD", "sk-ant-sdk-upstream-bad-000004"),
            ("SDK_UP_OAITOOL", "sk-sdk-upstream-oaitool-000005"),
            ("SDK_UP_ANTTOOL", "sk-ant-sdk-upstream-tool-00006"),
        ]),
    )
    .await;

    let script = sdk_dir().join("sdk_check.py");
    let base = node.client_url();
    let (ok, output) = tokio::task::spawn_blocking(move || {
        run(
            Command::new(&python)
                .arg(&script)
                .args(["--base-url", &base, "--api-key", CLIENT_KEY])
                .args(["--openai-model", "oai/gpt-4o-mini"])
                .args(["--anthropic-model", "ant/claude-sonnet-4-5"])
                .args(["--expect-text", &mock_text(CHUNKS as usize)])
                .args([
                    "--anthropic-combo",
                    "x-anthropic",
                    "--openai-combo",
                    "x-openai",
                ])
                .args(["--openai-tool-model", "oaitool/gpt-4o-mini"])
                .args(["--anthropic-tool-model", "anttool/claude-sonnet-4-5"])
                .env("NO_PROXY", "127.0.0.1,localhost")
                .env_remove("HTTP_PROXY")
                .env_remove("HTTPS_PROXY")
                .env_remove("OPENAI_BASE_URL")
                .env_remove("ANTHROPIC_BASE_URL"),
            SCRIPT_LIMIT,
            "sdk_check.py",
        )
    })
    .await
    .expect("script task");
    assert!(
        ok,
        "the SDK checks failed:\n{output}\n--- node log ---\n{}",
        node.log()
    );
    assert!(output.contains("all SDK checks passed"), "{output}");
    assert!(
        output.contains("ok   openai sdk combo: anthropic 503 -> openai")
            && output.contains("ok   openai sdk tool calls from an anthropic provider"),
        "the cross-format checks did not run:\n{output}"
    );
    // The cross-format combos really met a failing first target.
    assert!(
        mock.stats()
            .requests_for_key("sk-sdk-upstream-oaibad-0000003")
            >= 1
    );
    assert!(
        mock.stats()
            .requests_for_key("sk-ant-sdk-upstream-bad-000004")
            >= 1
    );
    // Every check reached the upstream through the node (errors excepted).
    assert!(mock.stats().requests_total >= 8, "{:?}", mock.stats());
    assert_healthy(&node, "SDK checks").await;
}
