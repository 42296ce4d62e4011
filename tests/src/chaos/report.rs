//! The run's report: one table row per scheduled fault (requests, successes, errors by code,
//! p99, invariant violations), the global checks, and the soak's resource slopes, as Markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::invariants::{Violation, p99};
use super::load::{Outcome, Record};
use super::observe::{Sample, slope};

/// One global check.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// One row of the per-fault table.
#[derive(Debug, Clone)]
pub struct PhaseRow {
    pub label: String,
    pub requests: usize,
    pub successes: usize,
    pub errors: BTreeMap<String, usize>,
    pub p99_ms: f64,
    /// Violations of invariant 1 (outcomes) and 2 (banned arrivals) in this phase.
    pub bad_outcomes: usize,
    pub bad_arrivals: usize,
}

/// Resource trend of one node process.
#[derive(Debug, Clone)]
pub struct Trend {
    pub node: usize,
    pub samples: usize,
    pub first_rss_mib: f64,
    pub last_rss_mib: f64,
    pub rss_mib_per_min: f64,
    pub first_fds: u64,
    pub last_fds: u64,
    pub fds_per_min: f64,
}

/// Builds a phase row from the records that started in it and the violations in it.
pub fn phase_row(
    label: &str,
    records: &[&Record],
    outcomes: &[&Violation],
    arrivals: &[&Violation],
) -> PhaseRow {
    let mut errors = BTreeMap::new();
    let mut latencies: Vec<f64> = Vec::with_capacity(records.len());
    let mut successes = 0;
    for r in records {
        latencies.push((r.end - r.start).as_secs_f64() * 1000.0);
        if r.outcome == Outcome::Success {
            successes += 1;
        } else {
            *errors.entry(r.outcome.label()).or_insert(0) += 1;
        }
    }
    PhaseRow {
        label: label.to_owned(),
        requests: records.len(),
        successes,
        errors,
        p99_ms: p99(&mut latencies),
        bad_outcomes: outcomes.len(),
        bad_arrivals: arrivals.len(),
    }
}

/// The trend of the longest run of samples of each node (a restarted node starts a new run;
/// the first `warmup_s` seconds are left out).
pub fn trends(samples: &[(Sample, u32)], warmup_s: f64) -> Vec<Trend> {
    let mut by_pid: BTreeMap<(usize, u32), Vec<Sample>> = BTreeMap::new();
    for (s, pid) in samples {
        if s.at.as_secs_f64() >= warmup_s {
            by_pid.entry((s.node, *pid)).or_default().push(*s);
        }
    }
    let mut best: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
    for ((node, _), list) in by_pid {
        let slot = best.entry(node).or_default();
        if list.len() > slot.len() {
            *slot = list;
        }
    }
    best.into_iter()
        .filter_map(|(node, list)| {
            let first = list.first()?;
            let last = list.last()?;
            let mins = |s: &Sample| s.at.as_secs_f64() / 60.0;
            let rss: Vec<(f64, f64)> = list
                .iter()
                .map(|s| (mins(s), s.rss_kib as f64 / 1024.0))
                .collect();
            let fds: Vec<(f64, f64)> = list.iter().map(|s| (mins(s), s.fds as f64)).collect();
            Some(Trend {
                node,
                samples: list.len(),
                first_rss_mib: first.rss_kib as f64 / 1024.0,
                last_rss_mib: last.rss_kib as f64 / 1024.0,
                rss_mib_per_min: slope(&rss),
                first_fds: first.fds,
                last_fds: last.fds,
                fds_per_min: slope(&fds),
            })
        })
        .collect()
}

/// The whole report as Markdown.
pub fn markdown(title: &str, rows: &[PhaseRow], checks: &[Check], trends: &[Trend]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## {title}\n");
    let _ = writeln!(
        out,
        "| fault | requests | successes | other outcomes (errors by code) | p99 ms | bad outcomes | requests to banned connections |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|");
    for r in rows {
        let errors = if r.errors.is_empty() {
            "—".to_owned()
        } else {
            r.errors
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {} | {} |",
            r.label, r.requests, r.successes, errors, r.p99_ms, r.bad_outcomes, r.bad_arrivals
        );
    }
    let _ = writeln!(out, "\n| invariant | result | detail |\n|---|---|---|");
    for c in checks {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            c.name,
            if c.passed { "pass" } else { "**FAIL**" },
            c.detail.replace('|', "\\|").replace('\n', " ")
        );
    }
    if !trends.is_empty() {
        let _ = writeln!(
            out,
            "\n| node | samples | RSS MiB first → last | RSS slope MiB/min | fds first → last | fd slope /min |\n|---|---:|---|---:|---|---:|"
        );
        for t in trends {
            let _ = writeln!(
                out,
                "| node-{} | {} | {:.1} → {:.1} | {:+.3} | {} → {} | {:+.2} |",
                t.node,
                t.samples,
                t.first_rss_mib,
                t.last_rss_mib,
                t.rss_mib_per_min,
                t.first_fds,
                t.last_fds,
                t.fds_per_min
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn rows_count_outcomes_and_the_table_marks_failures() {
        let rec = |outcome, ms| Record {
            seq: 0,
            node: 0,
            model: "pa/m",
            stream: false,
            start: Duration::ZERO,
            end: Duration::from_millis(ms),
            outcome,
            connection: None,
            tokens: 0,
        };
        let a = rec(Outcome::Success, 10);
        let b = rec(
            Outcome::Error {
                status: 503,
                code: "x".to_owned(),
            },
            20,
        );
        let row = phase_row("f", &[&a, &b], &[], &[]);
        assert_eq!((row.requests, row.successes), (2, 1));
        assert_eq!(row.errors["503 x"], 1);
        let checks = vec![Check {
            name: "c".to_owned(),
            passed: false,
            detail: "a|b".to_owned(),
        }];
        let md = markdown("t", &[row], &checks, &[]);
        assert!(md.contains("| f | 2 | 1 | 503 x: 1 | 20 | 0 | 0 |"), "{md}");
        assert!(md.contains("**FAIL**") && md.contains("a\\|b"));
    }

    #[test]
    fn trends_follow_the_longest_process_of_each_node() {
        let s = |node, secs, rss, fds| Sample {
            node,
            at: Duration::from_secs(secs),
            rss_kib: rss,
            fds,
        };
        let samples = vec![
            (s(0, 0, 1024, 10), 7),
            (s(0, 60, 2048, 10), 7),
            (s(0, 120, 3072, 12), 7),
            (s(1, 60, 1024, 5), 8),
            (s(1, 120, 1024, 5), 9),
        ];
        let t = trends(&samples, 30.0);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].samples, 2);
        assert!((t[0].rss_mib_per_min - 1.0).abs() < 1e-9);
        assert!((t[0].fds_per_min - 2.0).abs() < 1e-9);
        assert_eq!(t[1].samples, 1);
    }
}
