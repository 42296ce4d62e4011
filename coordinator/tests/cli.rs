//! The binary's command line. (Also: an integration test here makes cargo build the
//! `switchyard-coordinator` binary, which the black-box tests in `switchyard-tests` start as a
//! process; without it a clean `cargo nextest run --workspace` would not build it.)

#![allow(clippy::unwrap_used)]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard-coordinator");

#[test]
fn version_is_printed() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(env!("CARGO_PKG_VERSION")), "{text}");
}

#[test]
fn status_against_nothing_is_unreachable() {
    // Port 9 (discard) on loopback: nothing listens there in tests.
    let out = Command::new(BIN)
        .args(["status", "--url", "http://127.0.0.1:9"])
        .env_remove("SWITCHYARD_MANAGEMENT_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}
