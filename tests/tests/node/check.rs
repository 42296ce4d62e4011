//! `switchyard-node --check`: exit 0 for a good config, exit 1 listing every problem otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use switchyard_tests::harness::workspace_bin;

fn check(config: &str, env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(workspace_bin("switchyard-node"));
    cmd.arg("--config").arg(&path).arg("--check").env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

const GOOD: &str = r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "openai"
base_url = "https://api.openai.com/v1"

[[connections]]
id = "k1"
provider = "openai"
api_key_env = "OPENAI_API_KEY"
"#;

#[test]
fn a_valid_config_passes() {
    let (code, out) = check(GOOD, &[("OPENAI_API_KEY", "sk-test-value")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok"), "{out}");
    assert!(
        !out.contains("sk-test-value"),
        "the check must never print a secret: {out}"
    );
}

#[test]
fn every_problem_is_listed_and_the_exit_code_is_one() {
    let bad = r#"
[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "Bad Id"
base_url = "https://x/v1"

[[connections]]
id = "k1"
provider = "missing"
api_key_env = "K1"

[[combos]]
name = "c"
targets = [{ target = "nowhere/m" }]
"#;
    let (code, out) = check(bad, &[]);
    assert_eq!(code, 1, "{out}");
    let errors = out.lines().filter(|l| l.starts_with("error:")).count();
    assert!(
        errors >= 3,
        "expected several errors listed at once:\n{out}"
    );
    assert!(out.contains("providers[0].id"), "{out}");
    assert!(out.contains("connections[0].provider"), "{out}");
}

#[test]
fn unknown_keys_and_missing_secrets_are_errors() {
    let (code, out) = check(&GOOD.replace("[auth]", "[auth]\ntypo_key = 1"), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("typo_key"), "{out}");
    let (code, out) = check(GOOD, &[]);
    assert_eq!(
        code, 1,
        "a missing upstream key variable must fail the check: {out}"
    );
    assert!(out.contains("OPENAI_API_KEY"), "{out}");
}
