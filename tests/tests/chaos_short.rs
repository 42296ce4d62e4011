//! The short form of the chaos scenario (issue: reliability): 3 nodes, Redis, the coordinator
//! and one mock upstream per node under mixed load while 17 faults follow one another (Redis
//! among them: kill, stall, partition, failover, out of memory). The test fails when any
//! invariant of the checker breaks; the report is printed either way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use switchyard_tests::chaos::{self, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_under_load_breaks_no_invariant() {
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
    if !failed.is_empty() {
        // The warnings of every process, to explain the broken invariant.
        for (i, log) in report.logs.iter().enumerate() {
            let warnings: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(r#""level":"WARN""#) || l.contains(r#""level":"ERROR""#))
                .collect();
            println!("== log {i}: {} warnings", warnings.len());
            for line in warnings.iter().take(80) {
                println!("{line}");
            }
        }
    }
    assert!(
        failed.is_empty(),
        "broken invariants: {failed:#?}\n{}",
        report.markdown
    );
}
