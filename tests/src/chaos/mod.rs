//! The chaos runner: real processes (3 router nodes in redis mode, Redis with a replica behind
//! a TCP fault proxy that a failover retargets, the coordinator, one mock upstream per node, a
//! second fault proxy in front of Redis for one node), sustained
//! mixed JSON/SSE load, faults injected on a schedule, and an invariant checker that reads
//! the clients' results, the upstreams' arrival logs, the cluster's event channel and the
//! nodes' metrics afterwards.
//!
//! Why: a gateway is trusted when its behaviour under faults is proven. Each invariant is a
//! pure function in [`invariants`], tested on its own, so a report that says "pass" means the
//! checked property held, and a broken property shows up as a named violation with the
//! request or event that broke it.
//!
//! The short form (about two minutes of load) runs as a test (`tests/tests/chaos_short.rs`);
//! the long form is `switchyard-chaos --duration 10m`, a soak with a fault every 30 s that
//! also reports each node's RSS and descriptor slope.

pub mod caps;
mod checks;
pub mod faults;
mod inject;
pub mod invariants;
pub mod leases;
pub mod load;
pub mod observe;
pub mod operator;
pub mod report;
pub mod scenario;
pub mod topology;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faults::Phase;
use invariants::{FaultWindows, Violation};
use load::{Load, Record};
use observe::{EventLog, NodeEnd, Sample, epoch_ms};
use report::{Check, PhaseRow, Trend};
use topology::Topology;

use crate::cluster::cluster_degraded;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Length of the load, recovery tail included.
    pub duration: Duration,
    /// How long each fault lasts.
    pub phase: Duration,
    /// Quiet time at the end before the final checks.
    pub recovery: Duration,
    /// Client requests per second.
    pub rate: u32,
    /// A client request's deadline.
    pub deadline: Duration,
    /// Resource sampling period.
    pub sample_every: Duration,
}

impl Options {
    /// The CI form: each of the 17 faults for 6.5 s, then 10.5 s of recovery (121 s).
    pub fn short() -> Self {
        Self {
            duration: Duration::from_secs(121),
            phase: Duration::from_millis(6_500),
            recovery: Duration::from_secs(10),
            rate: 150,
            deadline: Duration::from_secs(20),
            sample_every: Duration::from_secs(2),
        }
    }

    /// The soak: `duration` of load with a fault every 30 s.
    pub fn soak(duration: Duration) -> Self {
        Self {
            duration,
            phase: Duration::from_secs(30),
            recovery: Duration::from_secs(30),
            rate: 200,
            deadline: Duration::from_secs(20),
            sample_every: Duration::from_secs(5),
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Report {
    pub rows: Vec<PhaseRow>,
    pub checks: Vec<Check>,
    pub trends: Vec<Trend>,
    pub markdown: String,
    pub requests: usize,
    /// Every process's log (live nodes, the coordinator, killed processes), to explain a
    /// broken invariant.
    pub logs: Vec<String>,
}

impl Report {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// Runs the scenario and checks it. Errors are setup failures (a process that did not start);
/// broken invariants are in the report.
pub async fn run(opts: &Options) -> io::Result<Report> {
    let mut topo = Topology::start().await?;
    let events = EventLog::start(&topo.redis_url()).map_err(io::Error::other)?;
    wait_synced(&topo).await?;

    let started = Instant::now();
    let start_epoch = epoch_ms();
    let epoch_of = move |d: Duration| start_epoch + u64::try_from(d.as_millis()).unwrap_or(0);
    let load =
        Arc::new(Load::new(topo.client_urls(), started, opts.deadline).map_err(io::Error::other)?);
    let load_task = tokio::spawn(Arc::clone(&load).run(opts.rate, opts.duration, 1_024));
    let lease_until = opts.duration.saturating_sub(opts.recovery / 2);
    let owners: Vec<_> = (0..leases::OWNERS)
        .map(|i| {
            tokio::spawn(leases::owner_loop(
                Arc::clone(&load),
                i,
                lease_until,
                100_000,
            ))
        })
        .collect();

    let pids = Arc::new(Mutex::new(topo.node_pids()));
    let samples: Arc<Mutex<Vec<(Sample, u32)>>> = Arc::new(Mutex::new(Vec::new()));
    let sampler = spawn_sampler(Arc::clone(&pids), Arc::clone(&samples), started, opts);
    let cap_samples = Arc::new(Mutex::new(Vec::new()));
    let cap_sampler =
        caps::spawn_sampler(topo.mocks.clone(), Arc::clone(&cap_samples), opts.duration);

    let schedule = faults::schedule(opts.duration, opts.phase, opts.recovery);
    let mut windows = FaultWindows::default();
    let mut extra_checks = Vec::new();
    for phase in &schedule {
        inject::sleep_until(started + phase.start).await;
        let specs = phase.fault.upstream_faults();
        for mock in &topo.mocks {
            mock.script_all(specs.clone()).map_err(io::Error::other)?;
        }
        inject::act(
            &mut topo,
            &load,
            phase,
            started,
            &epoch_of,
            &mut windows,
            &mut extra_checks,
        )
        .await?;
        if let Ok(mut p) = pids.lock() {
            *p = topo.node_pids();
        }
        inject::sleep_until(started + phase.end).await;
        for mock in &topo.mocks {
            mock.clear_faults();
        }
    }
    let _ = load_task.await;
    let mut lease_ops = Vec::new();
    for o in owners {
        lease_ops.extend(o.await.unwrap_or_default());
    }
    sampler.abort();
    cap_sampler.abort();

    // Final state: every live node drains, then everything is read.
    let admins = topo.admins();
    let providers: Vec<&str> = scenario::PROVIDERS.iter().map(|(p, _)| *p).collect();
    let ends: Vec<NodeEnd> = tokio::task::spawn_blocking(move || {
        admins
            .into_iter()
            .map(|(i, a)| observe::node_end(i, a, &providers, Duration::from_secs(10)))
            .collect()
    })
    .await
    .map_err(io::Error::other)?;
    let records = load.records.lock().map(|r| r.clone()).unwrap_or_default();
    let arrivals: Vec<_> = topo.mocks.iter().map(|m| m.arrivals()).collect();
    let mock_in_flight: u64 = topo.mocks.iter().map(|m| m.stats().in_flight).sum();
    let seen = events.snapshot();
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();

    let bad_outcomes = invariants::definite_outcomes(&records, &windows, epoch_of);
    let bad_arrivals = invariants::no_banned_arrivals(&arrivals, &seen, &windows);
    let mut results = vec![
        checks::check_list(
            "every request ended with an answer or a definite error",
            &bad_outcomes,
        ),
        checks::banned_check(&bad_arrivals, &seen, &arrivals),
        checks::check_list(
            "cooldowns never got shorter",
            &invariants::cooldowns_never_shorter(&seen),
        ),
        checks::drained(&ends, mock_in_flight),
        checks::usage_once(&ends, &records, &lease_ops, &windows, &arrivals),
    ];
    results.extend(checks::breaker_checks(&seen, &ends, &windows));
    results.extend(checks::terminal_checks(&seen, &ends, &windows));
    results.push(checks::lease_check(&lease_ops, &windows, &epoch_of));
    let cap_samples = cap_samples.lock().map(|s| s.clone()).unwrap_or_default();
    results.push(checks::caps_check(&cap_samples));
    results.extend(extra_checks);
    results.push(checks::secrets_check(&topo, &ends));
    results.push(checks::upstream_secrets_check(&topo));
    let undecodable = events.undecodable.lock().map(|n| *n).unwrap_or(0);
    results.push(Check {
        name: "every cluster event decoded".to_owned(),
        passed: undecodable == 0,
        detail: format!("{} events seen, {undecodable} undecodable", seen.len()),
    });

    let rows = rows(
        &schedule,
        opts,
        &records,
        &bad_outcomes,
        &bad_arrivals,
        &epoch_of,
    );
    let trends = report::trends(&samples, 30.0_f64.min(opts.duration.as_secs_f64() / 4.0));
    let title = format!(
        "Chaos run: {} s of load at {} req/s, {} faults of {} s, 3 nodes",
        opts.duration.as_secs(),
        opts.rate,
        schedule.len(),
        opts.phase.as_secs()
    );
    let markdown = report::markdown(&title, &rows, &results, &trends);
    Ok(Report {
        rows,
        checks: results,
        trends,
        markdown,
        requests: records.len(),
        logs: topo.all_logs(),
    })
}

async fn wait_synced(topo: &Topology) -> io::Result<()> {
    let admins: Vec<_> = topo.admins().into_iter().map(|(_, a)| a).collect();
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if admins.iter().all(|a| !cluster_degraded(*a)) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(io::Error::other(
            "nodes did not join the cluster within 20 s",
        ))
    })
    .await
    .map_err(io::Error::other)?
}

fn spawn_sampler(
    pids: Arc<Mutex<Vec<(usize, u32)>>>,
    samples: Arc<Mutex<Vec<(Sample, u32)>>>,
    started: Instant,
    opts: &Options,
) -> tokio::task::JoinHandle<()> {
    let every = opts.sample_every.max(Duration::from_millis(500));
    let count = (opts.duration.as_millis() / every.as_millis()).saturating_add(2);
    tokio::spawn(async move {
        for _ in 0..count {
            let list = pids.lock().map(|p| p.clone()).unwrap_or_default();
            for (node, pid) in list {
                if let Some((rss_kib, fds)) = observe::sample_process(pid)
                    && let Ok(mut s) = samples.lock()
                {
                    s.push((
                        Sample {
                            node,
                            at: started.elapsed(),
                            rss_kib,
                            fds,
                        },
                        pid,
                    ));
                }
            }
            tokio::time::sleep(every).await;
        }
    })
}

fn rows(
    schedule: &[Phase],
    opts: &Options,
    records: &[Record],
    bad_outcomes: &[Violation],
    bad_arrivals: &[Violation],
    epoch_of: &impl Fn(Duration) -> u64,
) -> Vec<PhaseRow> {
    let mut spans: Vec<(String, Duration, Duration)> = schedule
        .iter()
        .map(|p| (p.fault.label().to_owned(), p.start, p.end))
        .collect();
    let tail = schedule.last().map_or(Duration::ZERO, |p| p.end);
    spans.push((
        "recovery (no fault)".to_owned(),
        tail,
        opts.duration + opts.deadline,
    ));
    spans
        .iter()
        .map(|(label, from, to)| {
            let in_span = |d: Duration| *from <= d && d < *to;
            let recs: Vec<&Record> = records.iter().filter(|r| in_span(r.start)).collect();
            let (ef, et) = (epoch_of(*from), epoch_of(*to));
            let at = |v: &&Violation| ef <= v.at && v.at < et;
            let o: Vec<&Violation> = bad_outcomes.iter().filter(at).collect();
            let a: Vec<&Violation> = bad_arrivals.iter().filter(at).collect();
            report::phase_row(label, &recs, &o, &a)
        })
        .collect()
}
