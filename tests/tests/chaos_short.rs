//! The short form of the chaos scenario (issue: reliability): 3 nodes, Redis, the coordinator
//! and one mock upstream per node under mixed load while 16 faults follow one another. The
//! test fails when any invariant of the checker breaks; the report is printed either way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use switchyard_tests::chaos::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_faults_under_load_break_no_invariant() {
    let report = chaos::run(&Options::short()).await.expect("chaos setup");
    println!("{}", report.markdown);
    if let Ok(dir) = std::env::var("SWITCHYARD_CHAOS_REPORT_DIR") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join("chaos-short.md"),
            &report.markdown,
        );
    }
    assert!(
        report.requests > 5_000,
        "too little load: {}",
        report.requests
    );
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.passed).collect();
    assert!(
        failed.is_empty(),
        "broken invariants: {failed:#?}\n{}",
        report.markdown
    );
}
