//! Redis failover under load, on Sentinel: the master is killed (SIGKILL) while requests run
//! through two nodes, the sentinel promotes the replica, and the nodes follow it.
//!
//! Afterwards: every request got a definite answer (a 200, or an error with a type and a
//! code), the cluster-wide cap held at the upstream throughout, a terminal state set before
//! the failover is still known on both nodes, and a cooldown set after it reaches the other
//! node. This is the failover fault of the chaos scenario, run on its own topology: the
//! chaos cluster runs on one Redis with a fault proxy for its partition fault.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{cluster_provider, connection, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};
use crate::sync::health;
use switchyard_tests::cluster::{cluster_degraded_async, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_topology::RedisSentinel;

const CAP: u64 = 2;
const NODES: usize = 2;

/// k1 (priority 1, uncapped) goes terminal before the failover; k0 (capped) takes the load.
fn body(base: &str) -> String {
    let mut out = cluster_provider(base, &["m"], "");
    out.push_str(&connection("k1", "p", "KEY_1", "priority = 1"));
    out.push_str(&connection(
        "k0",
        "p",
        "KEY_0",
        &format!("priority = 2\nmax_concurrent = {CAP}"),
    ));
    out.push_str(&queue_and_wait_off());
    out.push_str(
        "\n[resilience.concurrency]\nsemaphore_max_queue = 100\nsemaphore_queue_timeout_ms = 60000\n",
    );
    out
}

/// Connections of provider `p` that `node` counts in health's `field`.
async fn counted(node: &NodeProcess, field: &str) -> u64 {
    health(node).await["connections"]["byProvider"]["p"][field]
        .as_u64()
        .unwrap_or(0)
}

async fn degraded(node: &NodeProcess) -> bool {
    cluster_degraded_async(node.admin).await
}

/// A request's status and JSON body (status 0: no answer at all).
async fn chat(http: &reqwest::Client, url: &str) -> (u16, Value) {
    match http
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
    {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (status, resp.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

/// A 200, or an error whose JSON says its type and code.
fn definite(status: u16, body: &Value) -> bool {
    status == 200
        || (status >= 400 && body["error"]["type"].is_string() && body["error"]["code"].is_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_under_load_keeps_answers_the_cap_and_the_state() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock.base_url());
    let (topo, nodes) = tokio::task::spawn_blocking(move || {
        let topo = RedisSentinel::start().expect("sentinel topology");
        let env = [("KEY_0", "sk-0"), ("KEY_1", "sk-1")];
        let nodes: Vec<NodeProcess> = (0..NODES)
            .map(|i| start_node(&format!("node-{i}"), &topo.url(), &body, &env).unwrap())
            .collect();
        (topo, nodes)
    })
    .await
    .unwrap();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(15), || async { !degraded(n).await }).await,
            "not subscribed through the sentinel; log:\n{}",
            n.log()
        );
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    // k1 runs out of credits (terminal on both nodes); the load then runs on k0.
    mock.script(FaultSpec::status(402).for_key("sk-1").times(1))
        .unwrap();
    let (status, _) = chat(&http, &nodes[0].client_url()).await;
    assert_eq!(status, 200, "the 402 fails over to k0");
    for n in &nodes {
        assert!(
            eventually(STATE_DEADLINE, || async {
                counted(n, "terminal").await == 1
            })
            .await,
            "k1 is not terminal on every node before the failover"
        );
    }
    mock.script(
        FaultSpec {
            latency_before_headers_ms: Some(150),
            ..FaultSpec::default()
        }
        .for_key("sk-0"),
    )
    .unwrap();

    // Steady load: three clients per node, one request after the other.
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for i in 0..NODES * 3 {
        let (http, url, stop) = (http.clone(), nodes[i % NODES].client_url(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            // Bounded: at most 2,000 requests per client.
            for _ in 0..2_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                outcomes.push(chat(&http, &url).await);
            }
            outcomes
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut topo = topo;
    let killed_at = Instant::now();
    let topo = tokio::task::spawn_blocking(move || {
        topo.fail_over().expect("failover");
        topo
    })
    .await
    .unwrap();
    let promoted_after = killed_at.elapsed();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(30), || async { !degraded(n).await }).await,
            "still degraded after the failover; log:\n{}",
            n.log()
        );
    }
    let followed_after = killed_at.elapsed();
    // Load on the new master for a while, then stop.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let mut outcomes = Vec::new();
    for c in clients {
        outcomes.extend(c.await.unwrap());
    }
    println!(
        "failover: replica promoted {promoted_after:?} after the kill, nodes subscribed again \
         after {followed_after:?}; {} requests",
        outcomes.len()
    );

    let vague: Vec<_> = outcomes
        .iter()
        .filter(|(s, b)| !definite(*s, b))
        .take(5)
        .collect();
    assert!(
        vague.is_empty(),
        "requests without a definite answer: {vague:?}"
    );
    let served = outcomes.iter().filter(|(s, _)| *s == 200).count();
    assert!(served > 20, "only {served} of {} served", outcomes.len());
    let peak = mock.stats().max_in_flight_for_key("sk-0");
    assert!(
        peak <= CAP,
        "the cluster cap of {CAP} was exceeded during the failover: {peak} in flight at once"
    );
    // The terminal state survived (replicated, or re-learned by the nodes' resync).
    for n in &nodes {
        assert_eq!(
            counted(n, "terminal").await,
            1,
            "k1 is no longer terminal after the failover"
        );
    }
    // And state is shared through the new master: a 429 on node 0 reaches node 1.
    mock.clear_faults();
    mock.script(
        FaultSpec::status(429)
            .for_key("sk-0")
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    let _ = chat(&http, &nodes[0].client_url()).await;
    assert!(
        eventually(STATE_DEADLINE, || async {
            counted(&nodes[1], "cooldown").await == 1
        })
        .await,
        "the cooldown did not reach node 1 after the failover; log of node 0:\n{}",
        nodes[0].log()
    );
    drop(nodes);
    drop(topo);
}
