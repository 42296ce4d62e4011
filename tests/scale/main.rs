//! `switchyard-sim`: N simulated router nodes × M connections against one real Redis.
//!
//! Why: the cluster's background load grows with nodes × connections, and what matters —
//! commands per second and CPU on the one shared Redis, how fast events reach peers, how long
//! a full resync takes and how much it delays the request path's own Redis calls — can only be
//! measured on a real server. Each simulated node uses the node's own store code
//! (`switchyard_store`) with its own store connection and subscriber, and does the
//! background work a node does (see `node.rs`). The run has three phases:
//!
//! 1. **idle**: no traffic; Redis commands/s and CPU are the background load;
//! 2. **load**: failures at `--failure-rate` per second across the cluster (cooldowns,
//!    lockouts, successes through the store's scripts, each change published as the node
//!    does); event propagation is measured on every receiving node;
//! 3. **resync**: node 0 runs full resyncs back to back on its store while a probe makes
//!    request-path calls through the same store (an RPM bucket take and a lease fence, as a
//!    leased request does) and records their latency.
//!
//! In every phase the nodes resync every `--resync-interval` as the node does: through the
//! change log, with a full scan only when the log does not cover their offset and as the
//! rare safety net (`--safety-scan-interval`, spread over the nodes).
//!
//! ```text
//! switchyard-sim --nodes 50 --connections 10000 --duration 20s [--failure-rate 20] [--json]
//! ```
//!
//! Redis is started by the simulator on a free loopback port (`REDIS_SERVER` names the
//! binary) and killed at the end. Exits 0 after a run (targets met or not: the report says),
//! 2 when the run could not be set up.

mod info;
mod node;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::fmt::Write as _;
use std::io::Write as _;

use clap::Parser;
use serde::Serialize;
use switchyard_shared::outcome::FailureReason;
use switchyard_shared::wire::{self, Envelope, WireEvent};
use switchyard_store::{CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::redis_server::RedisServer;
use tokio_util::sync::CancellationToken;

use node::{SimNode, World};
use stats::{Recorder, Summary};

const MAX_NODES: usize = 500;
const MAX_CONNECTIONS: usize = 100_000;
const MAX_DURATION: Duration = Duration::from_secs(600);
/// How long every node may take for its first resync before the measured phases start.
const WARMUP_LIMIT: Duration = Duration::from_secs(120);
/// The node's defaults (`[cluster] redis_timeout_ms`, `heartbeat_interval_ms`, `node_ttl_ms`).
const REDIS_TIMEOUT_MS: u64 = 250;
const HEARTBEAT_MS: u64 = 2_000;
const NODE_TTL_MS: u64 = 6_000;
/// Providers per simulated deployment (the resync reads each one's breaker).
const PROVIDERS: usize = 20;
/// Share of connections that start with a record (a cooldown) in Redis.
const SEEDED_PER_MILLE: usize = 50;
/// Pause between two request-path probes.
const PROBE_EVERY: Duration = Duration::from_millis(2);

#[derive(Parser, Debug, Clone)]
#[command(about = "Simulates N router nodes × M connections against one real Redis")]
struct Cli {
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    #[arg(long, default_value_t = 1_000)]
    connections: usize,
    /// Measured run length (idle 35 %, load 35 %, resync 30 %), e.g. `20s`.
    #[arg(long, default_value = "20s", value_parser = parse_secs)]
    duration: Duration,
    /// Failures per second across the cluster during the load and resync phases.
    #[arg(long, default_value_t = 20.0)]
    failure_rate: f64,
    /// The nodes' periodic resync (the node's `RECONCILE_INTERVAL`).
    #[arg(long, default_value = "5s", value_parser = parse_secs)]
    resync_interval: Duration,
    /// The nodes' safety-net full scan (the node's `SAFETY_SCAN_INTERVAL_MS` plus its mean
    /// jitter).
    #[arg(long, default_value = "330s", value_parser = parse_secs)]
    safety_scan_interval: Duration,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_secs(text: &str) -> Result<Duration, String> {
    let n = text.trim().trim_end_matches('s');
    n.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("not a duration in seconds: {text:?}"))
}

/// Redis load over one phase.
#[derive(Debug, Clone, Default, Serialize)]
struct Load {
    commands_per_sec: f64,
    cpu_percent: f64,
    /// The five commands executed most in the phase, per second, most first.
    top: Vec<(String, u64)>,
}

#[derive(Debug, Clone, Serialize)]
struct Report {
    nodes: usize,
    connections: usize,
    duration_secs: f64,
    failure_rate: f64,
    idle: Load,
    load: Load,
    events_published: u64,
    propagation: Summary,
    /// Node 0's first full resync, adopting every record (a freshly started node).
    resync_cold_ms: f64,
    /// Node 0's later full resyncs (nothing new to adopt but the traffic's changes).
    resync_warm: Summary,
    resync_failures: u64,
    /// The nodes' periodic resyncs over the measured phases: through the change log, and full
    /// scans (first resyncs excluded).
    resyncs_incremental: u64,
    resyncs_full: u64,
    /// What the safety-net scans add to the idle load on average (nodes × connections / its
    /// interval, one `HMGET` each), whether or not one fell into the idle phase.
    safety_scan_cmds_per_sec: f64,
    /// Request-path calls on node 0's store connection while its full resync ran.
    request_during_resync: Summary,
    request_errors_during_resync: u64,
    /// The same calls with no forced resync running (baseline, measured in the load phase).
    request_baseline: Summary,
}

fn main() {
    let cli = Cli::parse();
    if cli.nodes == 0
        || cli.nodes > MAX_NODES
        || cli.connections == 0
        || cli.connections > MAX_CONNECTIONS
        || cli.duration > MAX_DURATION
        || !(0.0..=10_000.0).contains(&cli.failure_rate)
    {
        eprintln!(
            "switchyard-sim: nodes 1..={MAX_NODES}, connections 1..={MAX_CONNECTIONS}, \
             duration ≤ {}s, failure rate 0..=10000",
            MAX_DURATION.as_secs()
        );
        std::process::exit(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("switchyard-sim: no runtime: {e}");
            std::process::exit(2);
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(report) => print(&cli, &report),
        Err(e) => {
            eprintln!("switchyard-sim: {e}");
            std::process::exit(2);
        }
    }
}

async fn run(cli: &Cli) -> Result<Report, String> {
    let redis = RedisServer::start().map_err(|e| format!("redis-server: {e}"))?;
    let client = redis::Client::open(redis.url()).map_err(|e| e.to_string())?;
    let mut info_con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("redis: {e}"))?;
    let store = |_: usize| -> Result<Arc<RedisStore>, String> {
        let config = RedisStoreConfig {
            url: redis.url(),
            key_prefix: "sim:".into(),
            timeout_ms: REDIS_TIMEOUT_MS,
            health: HealthPolicy::default(),
        };
        RedisStore::connect(&config, Arc::new(NoopObserver))
            .map(Arc::new)
            .map_err(|e| e.to_string())
    };
    let conns: Vec<String> = (0..cli.connections)
        .map(|i| format!("conn-{i:06}"))
        .collect();
    let world = Arc::new(World {
        conn_index: conns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), i))
            .collect(),
        conns,
        providers: (0..PROVIDERS).map(|i| format!("provider-{i:03}")).collect(),
        published: std::sync::Mutex::new(HashMap::new()),
        propagation: Recorder::default(),
        resyncs: AtomicU64::new(0),
        full_resyncs: AtomicU64::new(0),
        resync_failures: AtomicU64::new(0),
        safety_scan: cli.safety_scan_interval,
        heartbeat_interval: Duration::from_millis(HEARTBEAT_MS),
        node_ttl_ms: NODE_TTL_MS,
    });
    seed(&*store(0)?, &world).await?;

    let stop = CancellationToken::new();
    let mut nodes = Vec::with_capacity(cli.nodes);
    let mut tasks = Vec::with_capacity(cli.nodes);
    for i in 0..cli.nodes {
        let n = Arc::new(SimNode {
            id: format!("node-{i:03}"),
            store: store(i)?,
        });
        // Nodes start at different times: spread their resync ticks over one interval.
        let offset = cli.resync_interval.mul_f64(i as f64 / cli.nodes as f64);
        // Safety-net scans spread over one interval, as in a cluster that has run a while
        // (the golden ratio spreads any number of nodes evenly without a generator).
        let phase = ((i + 1) as f64 * 0.618_033_988_75).fract();
        let first_safety = cli
            .safety_scan_interval
            .mul_f64(phase)
            .max(cli.resync_interval);
        tasks.push(tokio::spawn(n.clone().run(
            world.clone(),
            cli.resync_interval,
            offset,
            first_safety,
            stop.clone(),
        )));
        nodes.push(n);
    }
    let warmup = Instant::now();
    // Attempts, not successes: an overloaded run still starts (and reports its failures).
    let attempts =
        || world.resyncs.load(Ordering::Relaxed) + world.resync_failures.load(Ordering::Relaxed);
    while attempts() < cli.nodes as u64 {
        if warmup.elapsed() > WARMUP_LIMIT {
            stop.cancel();
            return Err("the nodes' first resyncs did not finish within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let resyncs_at_start = world.resyncs.load(Ordering::Relaxed);
    let full_at_start = world.full_resyncs.load(Ordering::Relaxed);

    // Phase 1: idle.
    let idle = measure(&mut info_con, cli.duration.mul_f64(0.35)).await?;

    // Phase 2: load.
    let traffic_stop = CancellationToken::new();
    let published = Arc::new(AtomicU64::new(0));
    let traffic = tokio::spawn(traffic(
        nodes.clone(),
        world.clone(),
        cli.failure_rate,
        published.clone(),
        traffic_stop.clone(),
    ));
    let baseline = Arc::new(Recorder::default());
    let probe_stop = CancellationToken::new();
    let probe_errors = Arc::new(AtomicU64::new(0));
    let baseline_probe = tokio::spawn(probe(
        nodes[0].store.clone(),
        baseline.clone(),
        Arc::new(AtomicU64::new(0)),
        probe_stop.clone(),
    ));
    let load = measure(&mut info_con, cli.duration.mul_f64(0.35)).await?;
    probe_stop.cancel();
    let _ = baseline_probe.await;

    // Phase 3: full resyncs on node 0's connection with the probe running beside them.
    let during = Arc::new(Recorder::default());
    let probe_stop = CancellationToken::new();
    let prober = tokio::spawn(probe(
        nodes[0].store.clone(),
        during.clone(),
        probe_errors.clone(),
        probe_stop.clone(),
    ));
    let warm = Recorder::default();
    let mut cold_ms = 0.0;
    let mut versions = HashMap::new();
    let phase_end = Instant::now() + cli.duration.mul_f64(0.30);
    let mut first = true;
    while Instant::now() < phase_end || first {
        let started = Instant::now();
        let result = node::resync(&nodes[0].store, &world, &mut versions, &mut || {}).await;
        if result.is_err() {
            world.resync_failures.fetch_add(1, Ordering::Relaxed);
        }
        if first {
            cold_ms = started.elapsed().as_secs_f64() * 1000.0;
            first = false;
        } else {
            warm.record(started.elapsed());
        }
    }
    probe_stop.cancel();
    let _ = prober.await;
    traffic_stop.cancel();
    let _ = traffic.await;
    stop.cancel();
    for t in tasks {
        let _ = t.await;
    }
    drop(redis);
    let resyncs_full = world.full_resyncs.load(Ordering::Relaxed) - full_at_start;
    let resyncs_all = world.resyncs.load(Ordering::Relaxed) - resyncs_at_start;
    Ok(Report {
        nodes: cli.nodes,
        connections: cli.connections,
        duration_secs: cli.duration.as_secs_f64(),
        failure_rate: cli.failure_rate,
        idle,
        load,
        events_published: published.load(Ordering::Relaxed),
        propagation: world.propagation.summary(),
        resync_cold_ms: cold_ms,
        resync_warm: warm.summary(),
        resync_failures: world.resync_failures.load(Ordering::Relaxed),
        resyncs_incremental: resyncs_all.saturating_sub(resyncs_full),
        resyncs_full,
        safety_scan_cmds_per_sec: (cli.nodes * cli.connections) as f64
            / cli.safety_scan_interval.as_secs_f64(),
        request_during_resync: during.summary(),
        request_errors_during_resync: probe_errors.load(Ordering::Relaxed),
        request_baseline: baseline.summary(),
    })
}

/// Gives a share of the connections a record (a cooldown, and every tenth a lockout), so the
/// resync reads real hashes and some lockouts.
async fn seed(store: &RedisStore, world: &World) -> Result<(), String> {
    for (i, conn) in world.conns.iter().enumerate() {
        if i % 1000 >= SEEDED_PER_MILLE {
            continue;
        }
        store
            .cooldown_extend(&CooldownWrite {
                conn,
                duration_ms: 600_000,
                backoff_level: 1,
                reason: FailureReason::RateLimitExceeded,
                terminal: None,
                last_error: "seeded",
            })
            .await
            .map_err(|e| format!("seeding: {e}"))?;
        if i % 10 == 0 {
            store
                .lockout_extend(
                    &world.providers[0],
                    conn,
                    "model-a",
                    600_000,
                    1,
                    FailureReason::QuotaExhausted,
                )
                .await
                .map_err(|e| format!("seeding: {e}"))?;
        }
    }
    Ok(())
}

/// Samples Redis's counters around `length`.
async fn measure(
    con: &mut redis::aio::MultiplexedConnection,
    length: Duration,
) -> Result<Load, String> {
    let before = info::sample(con).await.map_err(|e| format!("INFO: {e}"))?;
    let started = Instant::now();
    tokio::time::sleep(length).await;
    let after = info::sample(con).await.map_err(|e| format!("INFO: {e}"))?;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let (total, per) = after.calls_since(&before);
    let mut ranked: Vec<(String, u64)> = per.into_iter().collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    Ok(Load {
        commands_per_sec: total as f64 / secs,
        cpu_percent: (after.cpu_secs - before.cpu_secs).max(0.0) / secs * 100.0,
        top: ranked
            .into_iter()
            .take(5)
            .map(|(name, n)| (name, (n as f64 / secs).round() as u64))
            .collect(),
    })
}

/// A small deterministic generator (xorshift): the traffic needs spread, not quality.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Failures (and some successes) at `rate` per second, each on a random node and connection,
/// written through the store's scripts and published when something changed, as a node does.
async fn traffic(
    nodes: Vec<Arc<SimNode>>,
    world: Arc<World>,
    rate: f64,
    published: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    if rate <= 0.0 {
        stop.cancelled().await;
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let seq = Arc::new(AtomicU64::new(0));
    let mut inflight = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        let node = nodes[rng.below(nodes.len())].clone();
        let conn = world.conns[rng.below(world.conns.len())].clone();
        let provider = world.providers[rng.below(world.providers.len())].clone();
        let kind = rng.below(10);
        let (world, seq, published) = (world.clone(), seq.clone(), published.clone());
        // Bounded: a stalled Redis must not pile up tasks.
        if inflight.len() >= 1_000 {
            let _ = inflight.join_next().await;
        }
        inflight.spawn(async move {
            let event = match kind {
                0..=6 => node
                    .store
                    .cooldown_extend(&CooldownWrite {
                        conn: &conn,
                        duration_ms: 5_000,
                        backoff_level: 1,
                        reason: FailureReason::RateLimitExceeded,
                        terminal: None,
                        last_error: "429",
                    })
                    .await
                    .ok()
                    .filter(|a| a.applied)
                    .map(|a| WireEvent::CooldownSet {
                        connection: conn.clone(),
                        until_remaining_ms: a.remaining_ms,
                        backoff_level: a.backoff_level,
                        reason: FailureReason::RateLimitExceeded,
                        terminal: None,
                    }),
                7 | 8 => node
                    .store
                    .lockout_extend_applied(
                        &provider,
                        &conn,
                        "model-b",
                        5_000,
                        1,
                        FailureReason::QuotaExhausted,
                    )
                    .await
                    .ok()
                    .filter(|a| a.applied)
                    .map(|a| WireEvent::LockoutSet {
                        provider: provider.clone(),
                        connection: conn.clone(),
                        model: "model-b".into(),
                        remaining_ms: a.record.remaining_ms,
                        failure_count: a.record.failure_count,
                        reason: FailureReason::QuotaExhausted,
                    }),
                _ => node
                    .store
                    .cooldown_success_versioned(&conn, Some(0))
                    .await
                    .ok()
                    .filter(|s| s.eased)
                    .map(|s| WireEvent::CooldownEased {
                        connection: conn.clone(),
                        backoff_level: s.record.backoff_level,
                        started_epoch_ms: 0,
                    }),
            };
            let Some(event) = event else { return };
            let n = seq.fetch_add(1, Ordering::Relaxed);
            let envelope = Envelope {
                origin_node: node.id.clone(),
                origin_ts_ms: 0,
                seq: n,
                event,
            };
            let Ok(bytes) = wire::encode(&envelope) else {
                return;
            };
            if let Ok(mut p) = world.published.lock() {
                p.insert(n, Instant::now());
            }
            if node.store.publish(&bytes).await.is_ok() {
                published.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    inflight.shutdown().await;
}

/// Request-path calls on one node's store connection until `stop`: a cluster RPM bucket take
/// and a lease fence check, each timed.
async fn probe(
    store: Arc<RedisStore>,
    latency: Arc<Recorder>,
    errors: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    let keys = store.connection_lease_keys("conn-000000");
    while !stop.is_cancelled() {
        let started = Instant::now();
        let bucket = store.bucket_take("key", "sim-probe", 1_000_000).await;
        latency.record(started.elapsed());
        let started = Instant::now();
        let fence = store.lease_fence(&keys, "sim-token", 1, "sim-key").await;
        latency.record(started.elapsed());
        if bucket.is_err() || fence.is_err() {
            errors.fetch_add(1, Ordering::Relaxed);
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}

fn print(cli: &Cli, r: &Report) {
    let mut out = String::new();
    if cli.json {
        match serde_json::to_string_pretty(r) {
            Ok(text) => out.push_str(&text),
            Err(e) => out.push_str(&format!("{{\"error\": \"{e}\"}}")),
        }
        emit(&out);
        return;
    }
    let _ = writeln!(
        out,
        "switchyard-sim: {} nodes × {} connections, {:.0} s, {} failures/s",
        r.nodes, r.connections, r.duration_secs, r.failure_rate
    );
    let _ = writeln!(
        out,
        "idle:  {:>9.0} Redis commands/s, Redis CPU {:>5.1} %  top {:?}",
        r.idle.commands_per_sec, r.idle.cpu_percent, r.idle.top
    );
    let _ = writeln!(
        out,
        "load:  {:>9.0} Redis commands/s, Redis CPU {:>5.1} %  top {:?}",
        r.load.commands_per_sec, r.load.cpu_percent, r.load.top
    );
    let _ = writeln!(
        out,
        "events: {} published, {} deliveries, propagation p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r.events_published,
        r.propagation.count,
        r.propagation.p50_ms,
        r.propagation.p99_ms,
        r.propagation.max_ms
    );
    let _ = writeln!(
        out,
        "resyncs: {} incremental, {} full, failures {}; safety-net scans add {:.0} cmd/s on average",
        r.resyncs_incremental, r.resyncs_full, r.resync_failures, r.safety_scan_cmds_per_sec
    );
    let _ = writeln!(
        out,
        "full resync: cold {:.0} ms, warm p50 {:.0} ms (n={})",
        r.resync_cold_ms, r.resync_warm.p50_ms, r.resync_warm.count
    );
    let _ = writeln!(
        out,
        "request path: during resync p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({} errors); \
         baseline p50 {:.2} ms p99 {:.2} ms",
        r.request_during_resync.p50_ms,
        r.request_during_resync.p99_ms,
        r.request_during_resync.max_ms,
        r.request_errors_during_resync,
        r.request_baseline.p50_ms,
        r.request_baseline.p99_ms
    );
    let _ = writeln!(
        out,
        "| {} × {} | {:.0} | {:.0} % | {:.0} | {:.1} / {:.1} | {:.0} / {:.0} | {:.2} / {:.2} |",
        r.nodes,
        r.connections,
        r.idle.commands_per_sec,
        r.idle.cpu_percent,
        r.load.commands_per_sec,
        r.propagation.p50_ms,
        r.propagation.p99_ms,
        r.resync_cold_ms,
        r.resync_warm.p50_ms,
        r.request_during_resync.p50_ms,
        r.request_during_resync.p99_ms
    );
    emit(&out);
}

/// The report goes to stdout: that is this program's output.
fn emit(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.write_all(b"\n");
}
