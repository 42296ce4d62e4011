//! The chaos runner: real processes (3 router nodes in redis mode, Redis, the coordinator,
//! one mock upstream per node, a TCP fault proxy in front of Redis for one node), sustained
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

pub mod faults;
pub mod invariants;
pub mod leases;
pub mod load;
pub mod observe;
pub mod report;
pub mod scenario;
pub mod topology;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faults::{Fault, Phase};
use invariants::{FaultWindows, Span, Violation};
use load::{Load, Outcome, Record};
use observe::{EventLog, NodeEnd, Sample, epoch_ms};
use report::{Check, PhaseRow, Trend};
use topology::{NODES, PARTITIONED_NODE, Topology};

use crate::cluster::{MGMT_KEY, cluster_degraded};
use crate::harness::http_get_status;
use crate::mock_upstream::{Arrival, FaultSpec};

/// How long after Redis returns (or a partition heals) a node may still act on stale state:
/// its subscriber reconnects within a second and it resyncs from the keys every 5 s.
const RESYNC_MS: u64 = 6_000;
/// The node killed by [`Fault::KillNode`].
const KILLED_NODE: usize = 1;

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
    /// The CI form: each of the 13 faults for 7 s, then 10 s of recovery (about 100 s).
    pub fn short() -> Self {
        Self {
            duration: Duration::from_secs(101),
            phase: Duration::from_secs(7),
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
    let events = EventLog::start(&topo.redis.url()).map_err(io::Error::other)?;
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

    let schedule = faults::schedule(opts.duration, opts.phase, opts.recovery);
    let mut windows = FaultWindows::default();
    let mut extra_checks = Vec::new();
    for phase in &schedule {
        sleep_until(started + phase.start).await;
        let specs = upstream_faults(phase.fault);
        for mock in &topo.mocks {
            mock.script_all(specs.clone()).map_err(io::Error::other)?;
        }
        act(
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
        sleep_until(started + phase.end).await;
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
    let mut checks = vec![
        check_list(
            "every request ended with an answer or a definite error",
            &bad_outcomes,
        ),
        banned_check(&bad_arrivals, &seen, &arrivals),
        check_list(
            "cooldowns never got shorter",
            &invariants::cooldowns_never_shorter(&seen),
        ),
        drained(&ends, mock_in_flight),
        usage_once(&ends, &records, &lease_ops, &windows, &arrivals),
    ];
    checks.extend(breaker_checks(&seen, &ends, &windows));
    checks.extend(terminal_checks(&seen, &ends, &windows));
    checks.push(lease_check(&lease_ops, &windows, &epoch_of));
    checks.extend(extra_checks);
    checks.push(secrets_check(&topo, &ends));
    let undecodable = events.undecodable.lock().map(|n| *n).unwrap_or(0);
    checks.push(Check {
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
    let markdown = report::markdown(&title, &rows, &checks, &trends);
    Ok(Report {
        rows,
        checks,
        trends,
        markdown,
        requests: records.len(),
    })
}

/// The upstream faults of a phase. Killing a node "mid-stream" needs streams in flight, so
/// that phase slows every stream down (20 chunks 150 ms apart).
fn upstream_faults(fault: Fault) -> Vec<FaultSpec> {
    if fault == Fault::KillNode {
        return vec![FaultSpec {
            chunk_delay_ms: Some(150),
            ..FaultSpec::default()
        }];
    }
    fault.upstream_faults()
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

async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
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

/// The process and network side of a fault.
async fn act(
    topo: &mut Topology,
    load: &Load,
    phase: &Phase,
    started: Instant,
    epoch_of: &impl Fn(Duration) -> u64,
    windows: &mut FaultWindows,
    checks: &mut Vec<Check>,
) -> io::Result<()> {
    let length = phase.end - phase.start;
    let at = |fraction: f64| started + phase.start + length.mul_f64(fraction);
    match phase.fault {
        Fault::Burst503 => {
            windows.burst = Some(Span {
                from: epoch_of(phase.start),
                to: epoch_of(phase.end),
            });
        }
        Fault::Terminal402 => windows.terminal_from = Some(epoch_of(phase.start)),
        Fault::ReasoningOnly => windows.reasoning.push(Span {
            from: epoch_of(phase.start),
            to: epoch_of(phase.end),
        }),
        Fault::KillNode => {
            // Let slow streams get going first, so the kill lands mid-stream.
            sleep_until(at(0.3)).await;
            set_node(load, KILLED_NODE, None);
            let kill_at = epoch_ms();
            topo.kill_node(KILLED_NODE);
            windows.kills.push((KILLED_NODE, kill_at));
            sleep_until(at(0.6)).await;
            topo.restart_node(KILLED_NODE).await?;
            let back = epoch_ms();
            windows.blind.push((
                KILLED_NODE,
                Span {
                    from: kill_at,
                    to: back + 1_000,
                },
            ));
            let url = topo.nodes[KILLED_NODE].as_ref().map(|n| n.client_url());
            set_node(load, KILLED_NODE, url);
        }
        Fault::RedisRestart => {
            let from = epoch_ms();
            topo.kill_redis();
            sleep_until(at(0.5)).await;
            topo.restart_redis().await?;
            let back = epoch_ms();
            for n in 0..NODES {
                windows.blind.push((
                    n,
                    Span {
                        from,
                        to: back + RESYNC_MS,
                    },
                ));
            }
        }
        Fault::Partition => {
            let from = epoch_ms();
            topo.partition(true);
            sleep_until(at(0.6)).await;
            topo.partition(false);
            let back = epoch_ms();
            windows.blind.push((
                PARTITIONED_NODE,
                Span {
                    from,
                    to: back + RESYNC_MS,
                },
            ));
        }
        Fault::CoordinatorKill => {
            topo.kill_coordinator();
            sleep_until(at(0.4)).await;
            topo.restart_coordinator().await?;
            checks.push(coordinator_check(topo).await);
        }
        _ => {}
    }
    Ok(())
}

fn set_node(load: &Load, i: usize, url: Option<String>) {
    if let Ok(mut nodes) = load.nodes.write()
        && let Some(slot) = nodes.get_mut(i)
    {
        *slot = url;
    }
}

/// After its restart, the coordinator answers and sees every node.
async fn coordinator_check(topo: &Topology) -> Check {
    let Some(addr) = topo.coordinator.as_ref().map(|c| c.addr) else {
        return Check {
            name: "the coordinator came back after kill -9".to_owned(),
            passed: false,
            detail: "not running".to_owned(),
        };
    };
    let result = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = String::new();
        while Instant::now() < deadline {
            if http_get_status(addr, "/readyz") == Some(200)
                && let Some((200, body)) = crate::cluster::http_get(addr, "/api/cluster/nodes")
            {
                let live = body.matches("\"node-").count();
                if live >= NODES {
                    return (
                        true,
                        format!("/readyz 200, {live} node mentions in /api/cluster/nodes"),
                    );
                }
                last = body.chars().take(200).collect();
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        (
            false,
            format!("not ready with every node within 10 s: {last}"),
        )
    })
    .await
    .unwrap_or((false, "check task failed".to_owned()));
    Check {
        name: "the coordinator came back after kill -9".to_owned(),
        passed: result.0,
        detail: result.1,
    }
}

fn check_list(name: &str, violations: &[Violation]) -> Check {
    let detail = if violations.is_empty() {
        "none".to_owned()
    } else {
        let first: Vec<&str> = violations
            .iter()
            .take(3)
            .map(|v| v.detail.as_str())
            .collect();
        format!(
            "{} violations, first: {}",
            violations.len(),
            first.join("; ")
        )
    };
    Check {
        name: name.to_owned(),
        passed: violations.is_empty(),
        detail,
    }
}

fn lease_check(
    ops: &[leases::LeaseOp],
    windows: &FaultWindows,
    epoch_of: &impl Fn(Duration) -> u64,
) -> Check {
    let killed = |node: usize, start: Duration, end: Duration| {
        let (s, e) = (epoch_of(start), epoch_of(end));
        windows
            .kills
            .iter()
            .any(|(n, t)| *n == node && s <= t + 500 && *t <= e + 500)
    };
    let (violations, compared) = leases::check(ops, killed);
    let count = |kind: &str, status: u16| {
        ops.iter()
            .filter(|o| o.kind == kind && o.status == status)
            .count()
    };
    let stale = ops.iter().filter(|o| o.code == "LEASE_FENCE_STALE").count();
    let unavailable = ops
        .iter()
        .filter(|o| o.code == "LEASE_SERVICE_UNAVAILABLE")
        .count();
    let served = count("chat", 200);
    let mut detail = format!(
        "{} operations: {} grants, {served} leased requests served, {stale} refused as stale, {unavailable} refused while Redis was unreachable, {compared} ordering checks",
        ops.len(),
        count("acquire", 200),
    );
    if !violations.is_empty() {
        detail = format!(
            "{} violations, first: {}; {detail}",
            violations.len(),
            violations
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Check {
        name: "leases: one owner per generation, nothing served under a superseded generation"
            .to_owned(),
        passed: violations.is_empty() && served > 0 && compared > 0,
        detail,
    }
}

fn drained(ends: &[NodeEnd], mock_in_flight: u64) -> Check {
    let busy: Vec<String> = ends
        .iter()
        .filter(|e| e.in_flight != 0.0 || e.semaphore_in_flight != 0.0 || e.permits_held != 0.0)
        .map(|e| {
            format!(
                "node-{}: in flight {}, semaphore {}, cluster permits {}",
                e.node, e.in_flight, e.semaphore_in_flight, e.permits_held
            )
        })
        .collect();
    Check {
        name: "in-flight gauges, semaphore permits and cluster permits returned to zero".to_owned(),
        passed: busy.is_empty() && mock_in_flight == 0 && ends.len() == NODES,
        detail: if busy.is_empty() {
            format!(
                "{} nodes read, upstream in flight {mock_in_flight}",
                ends.len()
            )
        } else {
            busy.join("; ")
        },
    }
}

fn banned_check(
    violations: &[Violation],
    seen: &[observe::Seen],
    arrivals: &[Vec<Arrival>],
) -> Check {
    let mut c = check_list(
        "no request reached a cooling, terminal, locked or breaker-open connection",
        violations,
    );
    let bans = invariants::ban_counts(seen);
    let checked: usize = arrivals.iter().map(Vec::len).sum();
    c.detail = format!(
        "{}; {checked} upstream requests checked against {bans:?}",
        c.detail
    );
    c
}

/// Usage is counted once per request: on every node that ran the whole time, the request
/// counter equals the responses its clients got, and the token counter is at least the tokens
/// in the answers they got. Tokens are counted per upstream usage object, and in this
/// scenario only a reasoning-only answer that the node then failed over (a combo moving on)
/// is billed by the upstream without reaching the client, so the excess may not pass that
/// many answers of the largest size seen. Every other failed attempt ends before its usage
/// frame.
fn usage_once(
    ends: &[NodeEnd],
    records: &[Record],
    lease_ops: &[leases::LeaseOp],
    windows: &FaultWindows,
    arrivals: &[Vec<Arrival>],
) -> Check {
    let largest = records.iter().map(|r| r.tokens).max().unwrap_or(0);
    let reasoning_key = scenario::key_of("b2").unwrap_or_default();
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    for e in ends
        .iter()
        .filter(|e| !windows.kills.iter().any(|(n, _)| *n == e.node))
    {
        let mine = records.iter().filter(|r| r.node == e.node);
        let responses = mine
            .clone()
            .filter(|r| !matches!(r.outcome, Outcome::Transport(_) | Outcome::Timeout))
            .count() as f64;
        let tokens: u64 = mine.map(|r| r.tokens).sum();
        // Leased requests are client requests too (lease operations are not counted).
        let leased = lease_ops
            .iter()
            .filter(|o| o.node == e.node && o.kind == "chat" && o.status != 0);
        let responses = responses + leased.clone().count() as f64;
        let tokens = tokens + leased.map(|o| o.tokens).sum::<u64>();
        let reasoning_answers: u64 = windows
            .reasoning
            .iter()
            .map(|span| {
                arrivals.get(e.node).map_or(0, |list| {
                    list.iter()
                        .filter(|a| a.api_key == reasoning_key && span.contains(a.epoch_ms))
                        .count() as u64
                })
            })
            .sum();
        let excess = e.tokens_total - tokens as f64;
        compared.push(format!(
            "node-{}: {} requests counted / {} responses; {} tokens counted / {} seen by clients (excess {excess}, bound {reasoning_answers} reasoning-only answers × {largest})",
            e.node, e.requests_total, responses, e.tokens_total, tokens
        ));
        if e.requests_total != responses
            || excess < 0.0
            || excess > (reasoning_answers * largest) as f64
        {
            problems.push(compared.last().cloned().unwrap_or_default());
        }
    }
    Check {
        name: "usage counted once per request".to_owned(),
        passed: problems.is_empty() && !compared.is_empty(),
        detail: if problems.is_empty() {
            compared.join("; ")
        } else {
            problems.join("; ")
        },
    }
}

fn breaker_checks(seen: &[observe::Seen], ends: &[NodeEnd], windows: &FaultWindows) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(burst) = windows.burst {
        out.push(Check {
            name: "the pb breaker opened during the 503 burst".to_owned(),
            passed: invariants::breaker_opened(seen, "pb", burst),
            detail: format!(
                "{} breaker transitions seen",
                seen.iter()
                    .filter(|s| s.envelope.event.kind() == "breaker_transition")
                    .count()
            ),
        });
    }
    let open: Vec<String> = ends
        .iter()
        .flat_map(|e| {
            e.breakers
                .iter()
                .filter(|(_, v)| *v != 0.0)
                .map(move |(p, v)| format!("node-{} {p}={v}", e.node))
        })
        .collect();
    out.push(Check {
        name: "every breaker closed again after the faults stopped".to_owned(),
        passed: open.is_empty(),
        detail: if open.is_empty() {
            "all closed on every node".to_owned()
        } else {
            open.join(", ")
        },
    });
    out
}

fn terminal_checks(seen: &[observe::Seen], ends: &[NodeEnd], windows: &FaultWindows) -> Vec<Check> {
    let mut out = Vec::new();
    let reinstated = invariants::reinstated(seen);
    out.push(Check {
        name: "no terminal state was lifted".to_owned(),
        passed: reinstated.is_empty(),
        detail: if reinstated.is_empty() {
            "none".to_owned()
        } else {
            reinstated.join(", ")
        },
    });
    if windows.terminal_from.is_some() {
        let everywhere = ends.iter().all(|e| e.terminal.iter().any(|c| c == "c1"));
        out.push(Check {
            name: "c1 became terminal (402) and stayed terminal on every node".to_owned(),
            passed: invariants::made_terminal(seen, "c1") && everywhere,
            detail: ends
                .iter()
                .map(|e| format!("node-{}: {:?}", e.node, e.terminal))
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    out
}

/// No configured secret appears in any log, metrics page or health body.
fn secrets_check(topo: &Topology, ends: &[NodeEnd]) -> Check {
    let mut outputs: Vec<(String, String)> = topo
        .all_logs()
        .into_iter()
        .enumerate()
        .map(|(i, l)| (format!("log {i}"), l))
        .collect();
    for e in ends {
        outputs.push((format!("node-{} metrics", e.node), e.metrics.clone()));
        outputs.push((format!("node-{} health", e.node), e.health.clone()));
    }
    let mut secrets: Vec<(&str, &str)> = scenario::CONNECTIONS
        .iter()
        .map(|(c, _, k)| (*c, *k))
        .collect();
    secrets.push(("client key", scenario::CLIENT_KEY));
    secrets.push(("management key", MGMT_KEY));
    let leaks = invariants::leaked_secrets(&secrets, &outputs);
    Check {
        name: "no secret in logs, metrics or health bodies".to_owned(),
        passed: leaks.is_empty(),
        detail: if leaks.is_empty() {
            format!(
                "{} outputs scanned for {} secrets",
                outputs.len(),
                secrets.len()
            )
        } else {
            format!("{leaks:?}")
        },
    }
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
