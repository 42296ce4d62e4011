//! Redis trouble is a normal condition: with Redis killed, or one node cut off from it, nodes
//! keep serving on local state, say they are degraded, and converge once Redis is back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};
use serde_json::{Value, json};
use switchyard_tests::cluster::{TestCluster, cluster_degraded_async, http_get, start_node};
use switchyard_tests::fault_proxy::{FaultProxy, Mode};
use switchyard_tests::harness::{NodeProcess, http_get_status};
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

fn body(mock: &MockHandle) -> String {
    format!(
        "{}{}{}{}",
        cluster_provider(&mock.base_url(), &["m"], ""),
        connection("k0", "p", "KEY_0", "priority = 1"),
        connection("k1", "p", "KEY_1", "priority = 2"),
        queue_and_wait_off()
    )
}

const KEYS: &[(&str, &str)] = &[("KEY_0", "sk-0"), ("KEY_1", "sk-1")];

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

async fn chat(http: &reqwest::Client, node: &NodeProcess) -> u16 {
    http.post(format!("{}/v1/chat/completions", node.client_url()))
        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn cooling(admin: SocketAddr) -> u64 {
    tokio::task::spawn_blocking(move || {
        http_get(admin, "/api/monitoring/health")
            .and_then(|(_, b)| serde_json::from_str::<Value>(&b).ok())
            .and_then(|v| v["connections"]["byProvider"]["p"]["cooldown"].as_u64())
            .unwrap_or(0)
    })
    .await
    .unwrap()
}

/// Requests round-robin over the nodes until `stop`; returns every status.
fn load(
    http: reqwest::Client,
    nodes: Vec<String>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<u16>> {
    tokio::spawn(async move {
        let mut statuses = Vec::new();
        // Bounded: at most 10 000 requests even if `stop` never comes.
        for i in 0..10_000usize {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let url = format!("{}/v1/chat/completions", nodes[i % nodes.len()]);
            let status = http
                .post(url)
                .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            statuses.push(status);
            // Pacing of the load (part of the scenario): about 50 requests a second.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        statuses
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_for_ten_seconds_mid_load_then_state_converges() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let mut cluster = tokio::task::spawn_blocking(move || {
        let c = TestCluster::start(3, &body, KEYS).expect("cluster");
        assert!(c.wait_synced(Duration::from_secs(15)));
        c
    })
    .await
    .unwrap();
    let http = client();
    let stop = Arc::new(AtomicBool::new(false));
    let urls = cluster.nodes.iter().map(NodeProcess::client_url).collect();
    let running = load(http.clone(), urls, stop.clone());
    let loaded = eventually(STATE_DEADLINE, || {
        std::future::ready(mock.stats().requests_total >= 20)
    })
    .await;
    assert!(loaded, "the load reaches the upstream");

    cluster.redis.kill();
    let killed = Instant::now();
    for node in &cluster.nodes {
        assert!(
            eventually(Duration::from_secs(8), || cluster_degraded_async(
                node.admin
            ))
            .await,
            "a node did not notice that Redis is gone"
        );
        assert_eq!(http_get_status(node.admin, "/readyz"), Some(200));
    }
    // A 429 met by one node during the outage (the load decides which) cools k0 there only.
    let faults_before = mock.stats().faults;
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    for _ in 0..50 {
        if mock.stats().faults > faults_before {
            break;
        }
        assert_eq!(chat(&http, &cluster.nodes[0]).await, 200);
    }
    assert_eq!(mock.stats().faults, faults_before + 1, "nobody met the 429");
    let cooled = eventually(STATE_DEADLINE, || async {
        let mut total = 0;
        for node in &cluster.nodes {
            total += cooling(node.admin).await;
        }
        total >= 1
    })
    .await;
    assert!(cooled, "the node that met the 429 cools k0");
    let mut cooled_before_restart = Vec::new();
    for node in &cluster.nodes {
        cooled_before_restart.push(cooling(node.admin).await);
    }
    assert_eq!(
        cooled_before_restart.iter().sum::<u64>(),
        1,
        "without Redis exactly the node that met the 429 cools: {cooled_before_restart:?}"
    );
    // The ten seconds of outage under load are the scenario, not a wait for state.
    let outage = Duration::from_secs(10).saturating_sub(killed.elapsed());
    tokio::time::sleep(outage).await;
    cluster.redis.restart().unwrap();

    for node in &cluster.nodes {
        assert!(
            eventually(Duration::from_secs(15), || async {
                !cluster_degraded_async(node.admin).await && cooling(node.admin).await == 1
            })
            .await,
            "node {} did not converge after Redis came back; log:\n{}",
            node.client_url(),
            node.log()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let statuses = running.await.unwrap();
    let failures = statuses.iter().filter(|s| **s != 200).count();
    println!(
        "{} requests during the run, {failures} failed; cooling per node before the restart: {cooled_before_restart:?}",
        statuses.len()
    );
    assert!(statuses.len() > 50, "the load hardly ran");
    assert_eq!(
        failures, 0,
        "requests that needed no lease failed: {statuses:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_partitioned_from_redis_serves_degraded_and_resyncs_when_healed() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let (redis, proxy, nodes) = tokio::task::spawn_blocking(move || {
        let redis = RedisServer::start().unwrap();
        let target: SocketAddr = format!("127.0.0.1:{}", redis.port).parse().unwrap();
        let proxy = FaultProxy::start(target).unwrap();
        let via_proxy = format!("redis://{}/0", proxy.addr());
        let nodes = vec![
            start_node("node-0", &redis.url(), &body, KEYS).unwrap(),
            start_node("node-1", &redis.url(), &body, KEYS).unwrap(),
            start_node("node-2", &via_proxy, &body, KEYS).unwrap(),
        ];
        (redis, proxy, nodes)
    })
    .await
    .unwrap();
    for node in &nodes {
        assert!(
            eventually(Duration::from_secs(15), || async {
                !cluster_degraded_async(node.admin).await
            })
            .await
        );
    }
    let http = client();
    proxy.set_mode(Mode::Blackhole);
    let [a, b, c] = [&nodes[0], &nodes[1], &nodes[2]];
    assert!(
        eventually(Duration::from_secs(10), || cluster_degraded_async(c.admin)).await,
        "the partitioned node does not say it is degraded"
    );
    assert!(!cluster_degraded_async(a.admin).await && !cluster_degraded_async(b.admin).await);
    assert_eq!(http_get_status(c.admin, "/readyz"), Some(200));
    assert_eq!(
        chat(&http, c).await,
        200,
        "the partitioned node still serves"
    );

    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    assert_eq!(chat(&http, a).await, 200);
    assert!(
        eventually(STATE_DEADLINE, || async { cooling(b.admin).await == 1 }).await,
        "the connected peer did not learn the cooldown"
    );
    assert_eq!(
        cooling(c.admin).await,
        0,
        "the partitioned node cannot have learnt it"
    );

    proxy.set_mode(Mode::Pass);
    assert!(
        eventually(Duration::from_secs(15), || async {
            !cluster_degraded_async(c.admin).await && cooling(c.admin).await == 1
        })
        .await,
        "the healed node did not resync; log:\n{}",
        c.log()
    );
    drop(redis);
}
