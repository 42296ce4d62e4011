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

mod support2;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use switchyard_tests::harness::workspace_bin;

use support2::*;

const CLIENT_KEY: &str = "sy-sdk-client-key-3e9f1a7c5b2d";
const CHUNKS: u32 = 5;
/// How long `pip install` may take on a cold cache.
const PIP_LIMIT: Duration = Duration::from_secs(300);
/// How long the SDK script may run.
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk")
}

/// `target/sdk-venv` (next to `target/debug`).
fn venv_dir() -> PathBuf {
    let profile_dir = workspace_bin("switchyard-node")
        .parent()
        .map(Path::to_path_buf)
        .expect("target profile dir");
    profile_dir
        .parent()
        .unwrap_or(&profile_dir)
        .join("sdk-venv")
}

/// Runs a command to completion within `limit`, returning (success, combined output).
fn run(cmd: &mut Command, limit: Duration, what: &str) -> (bool, String) {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let log_path = out_dir.path().join("out.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = match cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("{what}: cannot start {cmd:?}: {e}"),
    };
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status {
        Some(s) => (s.success(), output),
        None => (false, format!("{what} timed out after {limit:?}\n{output}")),
    }
}

/// The virtualenv's python, creating the env and installing the SDKs when needed.
fn ensure_venv() -> PathBuf {
    let (ok, out) = run(
        Command::new("python3").arg("--version"),
        Duration::from_secs(30),
        "python3",
    );
    assert!(
        ok,
        "python3 is required for the SDK compatibility test (install python3 and python3-venv): {out}"
    );
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    let requirements = sdk_dir().join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).expect("tests/sdk/requirements.txt");
    let marker = venv.join(".switchyard-requirements");
    if python.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&wanted) {
        return python;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let (ok, out) = run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        Duration::from_secs(120),
        "python3 -m venv",
    );
    assert!(
        ok,
        "`python3 -m venv {}` failed; install python3-venv (CI does): {out}",
        venv.display()
    );
    let (ok, out) = run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                "-r",
            ])
            .arg(&requirements),
        PIP_LIMIT,
        "pip install",
    );
    assert!(
        ok,
        "pip install -r {} failed: {out}",
        requirements.display()
    );
    std::fs::write(&marker, &wanted).expect("venv marker");
    python
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
    );
    let node = start_node(
        config,
        env(&[
            ("SDK_CLIENT_KEY", CLIENT_KEY),
            ("SDK_UP_OAI", "sk-sdk-upstream-openai-00000001"),
            ("SDK_UP_ANT", "sk-ant-sdk-upstream-000000002"),
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
    // Every check reached the upstream through the node (errors excepted).
    assert!(mock.stats().requests_total >= 8, "{:?}", mock.stats());
    assert_healthy(&node, "SDK checks").await;
}
