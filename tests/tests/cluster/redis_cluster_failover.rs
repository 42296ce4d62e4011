//! Three nodes on a Redis Cluster with replicas (3 masters + 3 replicas) while the cluster
//! moves the install's slot under load, the two ways a managed cluster does besides a crash:
//!
//! - a manual failover (`CLUSTER FAILOVER` on the replica of the slot's master), then a crash
//!   failover (SIGKILL of the new master): every request completes or gets a definite error
//!   within its deadline, and a cooldown given on one node after each switch reaches the
//!   others;
//! - a live slot migration to another master (`SETSLOT … MIGRATING/IMPORTING`, `MIGRATE` key
//!   by key, `SETSLOT … NODE`): the nodes follow `ASK`/`MOVED`, a cooldown and an operator
//!   clear given while the slot is half moved land in Redis and on every node, and afterwards
//!   Redis and the nodes agree.
//!
//! Every key of an install carries its prefix as a hash tag, so one slot holds them all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env, store};
use serde_json::{Value, json};
use switchyard_tests::cluster::{MGMT_KEY, cluster_degraded_async, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::load_tally::Tally as Seen;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_cluster_replicas::{
    keys_in_slot, manual_failover, migrate_slot, other_master,
};
use switchyard_tests::redis_topology::RedisCluster;

/// The install's hash tag on Redis Cluster (the test nodes' prefix is `sy-test:`).
const TAGGED: &str = "{sy-test}:";

/// A client request's deadline.
const DEADLINE: Duration = Duration::from_secs(15);

async fn counted(node: &NodeProcess, field: &str) -> u64 {
    health(node).await["connections"]["byProvider"]["p"][field]
        .as_u64()
        .unwrap_or(0)
}

/// A Redis Cluster with replicas and three nodes on it, all subscribed. Returns the slot that
/// holds the install.
async fn start(mock: &MockHandle, conns: usize) -> (RedisCluster, Vec<NodeProcess>, u16) {
    let body = body(mock, conns);
    let env = key_env(conns);
    let (topo, nodes, slot) = tokio::task::spawn_blocking(move || {
        let topo = RedisCluster::start_with_replicas().expect("redis cluster with replicas");
        let slot = topo.slot_of(&format!("{TAGGED}settings")).unwrap();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let url = topo.url();
        let nodes: Vec<NodeProcess> = (0..3)
            .map(|i| start_node(&format!("node-{i}"), &url, &body, &env).unwrap())
            .collect();
        (topo, nodes, slot)
    })
    .await
    .unwrap();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(20), || async {
                !cluster_degraded_async(n.admin).await
            })
            .await,
            "not subscribed on the Redis Cluster; log:\n{}",
            n.log()
        );
    }
    (topo, nodes, slot)
}

/// Chats to `nodes` in turn until `stop`, each with [`DEADLINE`].
async fn load(nodes: Vec<String>, stop: Arc<AtomicBool>) -> Seen {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()
        .unwrap();
    let mut seen = Seen::default();
    // Bounded: at most 20 000 requests (about 7 minutes at this pace).
    for i in 0..20_000usize {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        seen.chat_once(&http, &nodes[i % nodes.len()]).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    seen
}

fn assert_no_request_lost(seen: &Seen, what: &str) {
    seen.assert_none_lost(what, 20);
}

/// A 429 (Retry-After 120 s) on `key` met through `from`; returns how long until every node
/// in `all` counts `cooling` cooling connections.
async fn cooldown_spreads(
    mock: &MockHandle,
    key: &str,
    from: &NodeProcess,
    all: &[NodeProcess],
    cooling: u64,
) -> Duration {
    mock.script(
        FaultSpec::status(429)
            .for_key(key)
            .header("Retry-After", "120")
            .times(1),
    )
    .unwrap();
    let given = Instant::now();
    let (status, reply) = chat(&client(), from).await;
    assert_eq!(status, 200, "the next connection serves: {reply}");
    for n in all {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(n, "cooldown").await == cooling
            })
            .await,
            "the cooldown of {key} given on {} did not reach {}; its log:\n{}\nthe sender's log:\n{}",
            from.client_url(),
            n.client_url(),
            not_access(&n.log()),
            not_access(&from.log())
        );
    }
    given.elapsed()
}

/// A node's log without its access lines (one per request).
fn not_access(log: &str) -> String {
    log.lines()
        .filter(|l| !l.contains(r#""message":"request""#))
        .collect::<Vec<_>>()
        .join("\n")
}

fn spawn_load(nodes: &[NodeProcess]) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Seen>) {
    let stop = Arc::new(AtomicBool::new(false));
    let targets: Vec<String> = nodes.iter().map(NodeProcess::client_url).collect();
    (Arc::clone(&stop), tokio::spawn(load(targets, stop)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_failing_over_under_load_loses_no_request_and_cooldowns_still_spread() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let (topo, nodes, slot) = start(&mock, 5).await;
    let took = cooldown_spreads(&mock, "sk-0", &nodes[0], &nodes, 1).await;
    eprintln!("before any failover: a cooldown reached every node in {took:?}");

    let (stop, loader) = spawn_load(&nodes);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 1. A manual failover: the replica takes over without losing a write.
    let switch = Instant::now();
    let (topo, (old, new)) = tokio::task::spawn_blocking(move || {
        let moved = manual_failover(&topo, slot).expect("CLUSTER FAILOVER");
        (topo, moved)
    })
    .await
    .unwrap();
    let promoted_in = switch.elapsed();
    assert_ne!(old, new);
    let took = cooldown_spreads(&mock, "sk-1", &nodes[1], &nodes, 2).await;
    eprintln!(
        "CLUSTER FAILOVER {old} -> {new}: every node agreed after {promoted_in:?}; a cooldown \
         given after the switch reached every node in {took:?}"
    );

    // 2. A crash: the new master is SIGKILLed and its replica (the old master) promoted.
    let mut topo = topo;
    let switch = Instant::now();
    let (topo, (killed, promoted)) = tokio::task::spawn_blocking(move || {
        let moved = topo.fail_over_slot(slot).expect("failover after SIGKILL");
        (topo, moved)
    })
    .await
    .unwrap();
    let promoted_in = switch.elapsed();
    assert_eq!(
        (killed, promoted),
        (new, old),
        "the old master serves again"
    );
    let took = cooldown_spreads(&mock, "sk-2", &nodes[2], &nodes, 3).await;
    eprintln!(
        "SIGKILL of {killed}: {promoted} promoted after {promoted_in:?}; a cooldown given \
         after the switch reached every node in {took:?}"
    );

    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = loader.await.unwrap();
    assert_no_request_lost(&seen, "two failovers");

    // Redis kept all three cooldowns through both switches.
    let shared = store(&topo.url());
    let records = shared.read_connections(&["k0", "k1", "k2"]).await.unwrap();
    for (i, r) in records.iter().enumerate() {
        assert!(r.remaining_ms > 60_000, "k{i} lost in Redis: {records:?}");
    }
    for n in &nodes {
        assert!(
            !cluster_degraded_async(n.admin).await,
            "{} degraded after the failovers; log:\n{}",
            n.client_url(),
            n.log()
        );
    }
    drop(topo);
}

/// `(status, body)` of `POST /api/resilience/cooldowns` clearing `conn` through `node`.
async fn operator_clear(node: &NodeProcess, conn: &str) -> (u16, Value) {
    let resp = client()
        .post(format!("{}/api/resilience/cooldowns", node.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&json!({"connectionIds": [conn]}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

// Finding, still open (run it with `--run-ignored only`): while the slot is half moved, the
// resync's pipelined reads failed with `Moved: <slot> <source>` on every attempt (a pipeline
// whose keys are split between the migrating and the importing node cannot be served by
// either, and the cluster client does not split it). Those reads now fall back to one command
// per key (`RedisStore::read_pipeline`), and the MOVED errors are gone, but a cooldown given
// during the migration still does not reach the other nodes within the deadline; the nodes'
// logs show the cluster client's slot refresh beginning again and again.
#[ignore = "finding: a cooldown given while a slot migrates does not spread (see the comment)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migrating_under_load_keeps_redis_and_every_node_on_one_state() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let (topo, nodes, slot) = start(&mock, 5).await;
    // Before: k0 and k1 cool for two minutes, known everywhere.
    cooldown_spreads(&mock, "sk-0", &nodes[0], &nodes, 1).await;
    cooldown_spreads(&mock, "sk-1", &nodes[1], &nodes, 2).await;

    let (stop, loader) = spawn_load(&nodes);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The slot moves one key every 150 ms; halfway the test acts on the nodes.
    let halfway = Arc::new(AtomicUsize::new(0));
    let resume = Arc::new(AtomicBool::new(false));
    let from = topo.master_of(slot).unwrap();
    let to = other_master(&topo, from).unwrap();
    let before = keys_in_slot(from, slot);
    assert!(before > 3, "the install has keys on {from}: {before}");
    let (h, r) = (Arc::clone(&halfway), Arc::clone(&resume));
    let migration = tokio::task::spawn_blocking(move || {
        let done = migrate_slot(&topo, slot, to, Duration::from_millis(150), |moved| {
            if moved == before / 2 {
                h.store(moved, Ordering::Relaxed);
                // Hold the slot half moved until the test has acted (bounded: 30 s).
                let until = Instant::now() + Duration::from_secs(30);
                while !r.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        (topo, done)
    });
    assert!(
        eventually(Duration::from_secs(60), || std::future::ready(
            halfway.load(Ordering::Relaxed) > 0
        ))
        .await,
        "the migration never got halfway"
    );
    // While the slot is split between two masters: a fresh 429 on k2, and an operator clear
    // of k0.
    let took = cooldown_spreads(&mock, "sk-2", &nodes[2], &nodes, 3).await;
    eprintln!("slot half moved: a cooldown reached every node in {took:?}");
    let (status, reply) = operator_clear(&nodes[1], "k0").await;
    resume.store(true, Ordering::Relaxed);
    let (topo, done) = migration.await.unwrap();
    let done = done.expect("slot migration");
    eprintln!("migration: {done:?}");
    assert_eq!((done.from, done.to), (from, to));
    assert!(done.keys_moved >= before / 2, "{done:?}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = loader.await.unwrap();
    assert_no_request_lost(&seen, "a slot migration");

    // The slot lives on the new master only.
    assert_eq!(keys_in_slot(from, slot), 0, "keys left behind on {from}");
    assert!(keys_in_slot(to, slot) > 3, "keys on {to}");
    // Redis holds k1 and k2 cooling, and k0 cleared exactly when the operator was told so.
    let shared = store(&topo.url());
    let records = shared.read_connections(&["k0", "k1", "k2"]).await.unwrap();
    assert!(records[1].remaining_ms > 60_000, "{records:?}");
    assert!(records[2].remaining_ms > 60_000, "{records:?}");
    let reported_done = status == 200 && reply["ok"] == true && reply["failed"] == 0;
    assert!(
        reported_done || status == 503,
        "an operator clear is done or refused, nothing else: {status} {reply}"
    );
    assert_eq!(
        records[0].remaining_ms == 0,
        reported_done,
        "the clear was reported as {status} {reply} but Redis says {:?}",
        records[0]
    );
    // Every node agrees with Redis.
    let cooling = if reported_done { 2 } else { 3 };
    for n in &nodes {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(n, "cooldown").await == cooling && !cluster_degraded_async(n.admin).await
            })
            .await,
            "{} disagrees with Redis after the migration ({} cooling, {cooling} in Redis); log:\n{}",
            n.client_url(),
            counted(n, "cooldown").await,
            not_access(&n.log())
        );
    }
    drop(topo);
}
