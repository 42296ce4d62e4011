//! The scale simulator (`switchyard-sim`) on a tiny cluster, so it keeps building and
//! measuring: every figure the docs' table quotes must come out non-empty.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_simulator_measures_load_propagation_resync_and_the_request_path() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard-sim"))
        .args(["--nodes", "3", "--connections", "200", "--duration", "3s"])
        .args(["--failure-rate", "40", "--resync-interval", "1s", "--json"])
        .output()
        .expect("switchyard-sim runs");
    assert!(
        out.status.success(),
        "switchyard-sim failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the run is bounded"
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let num = |path: &str| -> f64 {
        r.pointer(path)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("{path} missing in {r}"))
    };
    // Three nodes resync every second, through the change log once they have an offset.
    assert!(num("/idle/commands_per_sec") > 0.0, "{r}");
    assert!(num("/resyncs_incremental") > 0.0, "{r}");
    assert!(num("/safety_scan_cmds_per_sec") > 0.0, "{r}");
    assert!(
        num("/load/commands_per_sec") > num("/idle/commands_per_sec"),
        "{r}"
    );
    assert!(num("/events_published") > 0.0, "{r}");
    // Every published event reaches the two other nodes (a few may still be in flight).
    assert!(num("/propagation/count") > 0.0, "{r}");
    assert!(num("/propagation/p99_ms") > 0.0, "{r}");
    assert!(num("/resync_cold_ms") > 0.0, "{r}");
    assert!(num("/resync_warm/count") > 0.0, "{r}");
    assert!(num("/request_during_resync/count") > 0.0, "{r}");
    assert!(num("/request_baseline/count") > 0.0, "{r}");
    assert_eq!(num("/resync_failures"), 0.0, "{r}");
}
