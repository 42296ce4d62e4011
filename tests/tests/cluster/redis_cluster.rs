//! Nodes on a Redis Cluster (`redis+cluster://`): a local cluster of 3 masters with one
//! replica each (real `redis-server` processes, formed with `redis-cli --cluster create`).
//!
//! - Two nodes share a 429 cooldown (as an event, not only a resync) and a terminal state.
//! - Failover under load: the master owning the install's slot (every key carries the prefix as
//!   its hash tag, so one slot holds the whole install) is killed with SIGKILL while both nodes
//!   serve traffic. The replica is promoted; afterwards the cooldown and the terminal state are
//!   still in Redis and on both nodes, every request got an answer (200, or an error with a
//!   status, `type` and `code`), and a new 429 reaches the peer as an event again.
//! - The store (and the coordinator's keyless scan script) runs as the ACL user
//!   `docs/kubernetes.md` documents for Redis Cluster (read from the document), and that user
//!   cannot leave its hash-tagged prefix.
//!
//! Every wait is bounded; each test kills only the processes it started.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::{body, chat, client, health, key_env};
use serde_json::Value;
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::{CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::cluster::{cluster_degraded_async, metric, metrics_text, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_topology::{RedisCluster, cli};

/// The key prefix the test nodes run with (`tests/src/cluster.rs`), and the hash tag it
/// becomes on Redis Cluster.
const PREFIX: &str = "sy-test:";
const TAGGED: &str = "{sy-test}:";

/// Peers' cooldown events `node` received over pub/sub (a resync does not count).
async fn cooldown_events(node: &NodeProcess) -> f64 {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || {
        metric(
            &metrics_text(admin),
            "switchyard_cluster_events_total{kind=\"cooldown_set\",result=\"received\"}",
        )
        .unwrap_or(0.0)
    })
    .await
    .unwrap()
}

async fn degraded(node: &NodeProcess) -> bool {
    cluster_degraded_async(node.admin).await
}

/// Provider `p`'s connections in `field` (`cooldown`, `terminal`) on `node`.
async fn counted(node: &NodeProcess, field: &str) -> u64 {
    health(node).await["connections"]["byProvider"]["p"][field]
        .as_u64()
        .unwrap_or(0)
}

fn store_on(url: &str) -> RedisStore {
    RedisStore::connect(
        &RedisStoreConfig {
            url: url.to_owned(),
            key_prefix: PREFIX.to_owned(),
            timeout_ms: 1000,
            health: HealthPolicy {
                down_after_failures: 3,
                retry_interval_ms: 100,
            },
        },
        Arc::new(NoopObserver),
    )
    .unwrap()
}

/// A Redis Cluster with replicas and two nodes on it, both subscribed. The first seed of the
/// nodes' URL is the master owning the install's slot, so their subscribers start on it.
async fn start(mock: &MockHandle, conns: usize) -> (RedisCluster, Vec<NodeProcess>) {
    let body = body(mock, conns);
    let env = key_env(conns);
    let (topo, nodes) = tokio::task::spawn_blocking(move || {
        let topo = RedisCluster::start_with_replicas().expect("redis cluster");
        let slot = topo.slot_of(&format!("{TAGGED}settings")).unwrap();
        let url = topo.url_from(topo.master_of(slot).unwrap());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let nodes: Vec<NodeProcess> = (0..2)
            .map(|i| start_node(&format!("node-{i}"), &url, &body, &env).unwrap())
            .collect();
        (topo, nodes)
    })
    .await
    .unwrap();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(20), || async { !degraded(n).await }).await,
            "not subscribed on the Redis Cluster; log:\n{}",
            n.log()
        );
    }
    (topo, nodes)
}

/// Sends a 429 (Retry-After 120 s) for `key` through `from` and waits until `to` counts
/// `cooling` cooling connections and has received more cooldown events than before.
async fn a_429_reaches(
    mock: &MockHandle,
    key: &str,
    from: &NodeProcess,
    to: &NodeProcess,
    cooling: u64,
) {
    let events_before = cooldown_events(to).await;
    mock.script(
        FaultSpec::status(429)
            .for_key(key)
            .header("Retry-After", "120")
            .times(1),
    )
    .unwrap();
    let (status, reply) = chat(&client(), from).await;
    assert_eq!(status, 200, "the next connection serves: {reply}");
    assert!(
        eventually(STATE_DEADLINE, || async {
            counted(to, "cooldown").await == cooling
        })
        .await,
        "the cooldown of {key} did not reach the peer; log of the sender:\n{}",
        from.log()
    );
    assert!(
        eventually(STATE_DEADLINE, || async {
            cooldown_events(to).await > events_before
        })
        .await,
        "the peer received no cooldown event for {key}; log of the peer:\n{}",
        to.log()
    );
}

/// Runs `402` on `key` through `from` and waits until `to` counts one terminal connection.
async fn a_terminal_state_reaches(
    mock: &MockHandle,
    key: &str,
    from: &NodeProcess,
    to: &NodeProcess,
) {
    mock.script(FaultSpec::status(402).for_key(key).times(1))
        .unwrap();
    let (status, reply) = chat(&client(), from).await;
    assert_eq!(status, 200, "the next connection serves: {reply}");
    assert!(
        eventually(STATE_DEADLINE, || async {
            counted(to, "terminal").await == 1
        })
        .await,
        "the terminal state of {key} did not reach the peer; log of the sender:\n{}",
        from.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_on_a_redis_cluster_share_cooldowns_and_terminal_states() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let (topo, nodes) = start(&mock, 3).await;
    let [a, b] = [&nodes[0], &nodes[1]];

    a_429_reaches(&mock, "sk-0", a, b, 1).await;
    a_terminal_state_reaches(&mock, "sk-1", b, a).await;

    // The state is in the cluster under the install's hash tag, all on one slot.
    let store = store_on(&topo.url());
    let records = store.read_connections(&["k0", "k1"]).await.unwrap();
    assert!(records[0].remaining_ms > 60_000, "{records:?}");
    assert!(records[1].terminal.is_some(), "{records:?}");
    let slot = topo.slot_of(&format!("{TAGGED}conn:{{k0}}")).unwrap();
    assert_eq!(topo.slot_of(&format!("{TAGGED}conn:{{k1}}")), Some(slot));
    let owner = topo.master_of(slot).unwrap();
    let exists = cli(owner, &["EXISTS", &format!("{TAGGED}conn:{{k0}}")]).unwrap();
    assert_eq!(exists.trim(), "1", "the record lives on the slot owner");
    drop(topo);
}

/// Clients of the node on `port` subscribed to a channel (the nodes' event subscribers).
fn subscribers(port: u16) -> usize {
    cli(port, &["CLIENT", "LIST"])
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" sub=1 "))
        .count()
}

/// What the load generator saw: answers by status, and requests without an answer.
#[derive(Debug, Default)]
struct Load {
    ok: u64,
    errors: Vec<(u16, Value)>,
    unanswered: Vec<String>,
}

/// Sends chats to `nodes` in turn until `stop` (at most `limit`), recording every outcome.
async fn load(nodes: Vec<String>, stop: Arc<AtomicBool>, limit: Duration) -> Load {
    let http = client();
    let mut seen = Load::default();
    let until = Instant::now() + limit;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        let url = &nodes[i % nodes.len()];
        i += 1;
        let sent = http
            .post(format!("{url}/v1/chat/completions"))
            .json(&serde_json::json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                if status == 200 {
                    seen.ok += 1;
                } else {
                    seen.errors.push((status, body));
                }
            }
            Err(e) => seen.unanswered.push(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_failover_under_load_keeps_state_and_nodes_answering() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let (topo, nodes) = start(&mock, 4).await;
    let [a, b] = [&nodes[0], &nodes[1]];

    // k0 cools for two minutes, k1 is out of credits: both learnt by both nodes.
    a_429_reaches(&mock, "sk-0", a, b, 1).await;
    a_terminal_state_reaches(&mock, "sk-1", a, b).await;

    // Load on both nodes while the master owning the install's slot, which also holds both
    // nodes' subscribers, is killed.
    let slot = topo.slot_of(&format!("{TAGGED}settings")).unwrap();
    let owner = topo.master_of(slot).unwrap();
    assert_eq!(
        subscribers(owner),
        2,
        "the subscribers start on the first seed"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let targets: Vec<String> = nodes.iter().map(NodeProcess::client_url).collect();
    let loader = tokio::spawn(load(targets, Arc::clone(&stop), Duration::from_secs(90)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut topo = topo;
    let killed_at = Instant::now();
    let (topo, (killed, promoted)) = tokio::task::spawn_blocking(move || {
        let moved = topo.fail_over_slot(slot).expect("failover");
        (topo, moved)
    })
    .await
    .unwrap();
    assert_ne!(killed, promoted);
    let promoted_after = killed_at.elapsed();

    // Both nodes lost their subscriber with the master it was on; both subscribe again on
    // another node and are back on the promoted master (not degraded).
    for n in [a, b] {
        assert!(
            eventually(Duration::from_secs(30), || async { !degraded(n).await }).await,
            "still degraded after the failover; log:\n{}",
            n.log()
        );
    }
    let healed_after = killed_at.elapsed();
    // The subscribers moved to other nodes of the list.
    let moved: usize = topo.live_ports().into_iter().map(subscribers).sum();
    assert_eq!(moved, 2, "subscribers on the live nodes after the failover");
    // Keep the load a little longer on the healed cluster, then look at what it saw.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = loader.await.unwrap();
    eprintln!(
        "failover: replica promoted after {promoted_after:?}, both nodes subscribed again after \
         {healed_after:?}; load: {} ok, {} errors, {} unanswered",
        seen.ok,
        seen.errors.len(),
        seen.unanswered.len()
    );
    assert!(
        seen.ok > 10,
        "too few requests served during the failover: {seen:?}"
    );
    assert!(
        seen.unanswered.is_empty(),
        "requests without an answer: {:?}",
        seen.unanswered
    );
    for (status, body) in &seen.errors {
        let error = &body["error"];
        assert!(
            error["type"].is_string() && error["code"].is_string(),
            "an error without a type and code ({status}): {body}"
        );
    }

    // The cooldown and the terminal state survived in Redis (written with WAIT 1) ...
    let store = store_on(&topo.url());
    let deadline = Instant::now() + Duration::from_secs(30);
    let records = loop {
        match store.read_connections(&["k0", "k1"]).await {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no read after the failover: {e}"),
        }
    };
    assert!(records[0].remaining_ms > 30_000, "{records:?}");
    assert!(records[1].terminal.is_some(), "{records:?}");
    let exists = cli(promoted, &["EXISTS", &format!("{TAGGED}conn:{{k0}}")]).unwrap();
    assert_eq!(exists.trim(), "1", "the promoted replica holds the record");
    // ... and on both nodes, after their resyncs.
    for n in [a, b] {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(n, "cooldown").await == 1 && counted(n, "terminal").await == 1
            })
            .await,
            "state lost on a node after the failover: {}; log:\n{}",
            health(n).await["connections"],
            n.log()
        );
    }

    // A new 429 propagates again, as an event through the promoted master.
    a_429_reaches(&mock, "sk-2", b, a, 2).await;
    drop(topo);
}

/// The `ACL SETUSER` arguments `docs/kubernetes.md` documents for Redis Cluster.
fn documented_cluster_acl(prefix_name: &str, password: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/kubernetes.md"),
    )
    .unwrap();
    let line = doc
        .lines()
        .find(|l| l.trim_start().starts_with("ACL SETUSER switchyard ") && l.contains("cluster|"))
        .expect("docs/kubernetes.md documents the Redis Cluster ACL user");
    line.split_whitespace()
        .skip(2)
        .map(|w| {
            w.replace("<name>", prefix_name)
                .replace("<password>", password)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_runs_on_a_redis_cluster_as_the_documented_acl_user() {
    let topo = tokio::task::spawn_blocking(|| RedisCluster::start(3).expect("redis cluster"))
        .await
        .unwrap();
    // ACL users are per node: the rule goes to every node.
    let rule = documented_cluster_acl("sy-test", "s3cret");
    for &port in &topo.ports {
        let mut args = vec!["ACL", "SETUSER"];
        args.extend(rule.iter().map(String::as_str));
        assert_eq!(cli(port, &args).unwrap().trim(), "OK", "ACL on {port}");
    }
    let url = topo
        .url()
        .replace("redis+cluster://", "redis+cluster://switchyard:s3cret@");
    let store = store_on(&url);
    let write = CooldownWrite {
        conn: "c1",
        duration_ms: 60_000,
        backoff_level: 1,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    };
    assert!(store.cooldown_extend(&write).await.unwrap().applied);
    assert!(
        store
            .terminal_set("c2", TerminalStatus::Banned)
            .await
            .unwrap()
    );
    let records = store.read_connections(&["c1", "c2"]).await.unwrap();
    assert!(records[0].remaining_ms > 30_000, "{records:?}");
    assert_eq!(records[1].terminal, Some(TerminalStatus::Banned));
    store.heartbeat("n1", "{}", 5_000).await.unwrap();
    assert_eq!(store.read_nodes().await.unwrap().len(), 1);
    assert!(store.publish(b"x").await.is_ok());
    // The coordinator's scan declares no keys and builds their names from the prefix: it runs
    // because the store sends it to the master of the install's slot, which holds them all.
    let scan = switchyard_coordinator::scan::scan_connections(&store, &["c1", "c2", "c3"])
        .await
        .unwrap();
    assert!(scan.records[0].remaining_ms > 30_000, "{:?}", scan.records);
    assert!(scan.records[1].terminal.is_some(), "{:?}", scan.records);
    assert!(scan.records[2].terminal.is_none() && scan.records[2].remaining_ms == 0);

    // The same user cannot leave the prefix: another key, another channel, a dangerous command.
    let outside: Result<String, _> = store
        .run("outside", |mut con| async move {
            redis::cmd("SET")
                .arg(format!("{TAGGED}x"))
                .arg("1")
                .query_async::<String>(&mut con)
                .await?;
            redis::cmd("SET")
                .arg("{other}:x")
                .arg("1")
                .query_async(&mut con)
                .await
        })
        .await;
    assert!(outside.is_err(), "wrote outside the prefix");
    let publish: Result<i64, _> = store
        .run("outside", |mut con| async move {
            redis::cmd("PUBLISH")
                .arg("other")
                .arg("x")
                .query_async(&mut con)
                .await
        })
        .await;
    assert!(publish.is_err(), "published outside the prefix");
    let flush: Result<String, _> = store
        .run("outside", |mut con| async move {
            redis::cmd("FLUSHALL").query_async(&mut con).await
        })
        .await;
    assert!(flush.is_err(), "FLUSHALL allowed");

    // A wrong password is refused (within the timeout).
    let wrong = topo
        .url()
        .replace("redis+cluster://", "redis+cluster://switchyard:nope@");
    assert!(store_on(&wrong).ping().await.is_err());
}
