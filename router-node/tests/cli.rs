//! The binary's command line. (Also: integration tests make cargo build the `switchyard-node`
//! binary, which the black-box scenario tests in `switchyard-tests` start as a process.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard-node");

#[test]
fn version_is_printed() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

#[test]
fn a_missing_config_is_a_usage_error() {
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("--config"), "{text}");
}

#[test]
fn an_unreadable_config_fails_the_check() {
    let out = Command::new(BIN)
        .args(["--config", "/nonexistent/switchyard.toml", "--check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}
