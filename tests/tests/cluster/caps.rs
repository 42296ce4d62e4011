//! Cluster-wide caps on three real redis-mode nodes: `max_concurrent` holds across nodes and a
//! killed node's permits come back within the permit TTL; a key's and a connection's requests
//! per minute hold for the sum of the nodes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::eventually;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{
    FaultMatch, FaultSpec, MockConfig, MockHandle, MockUpstream,
};
use switchyard_tests::redis_server::RedisServer;

const CLIENT_KEY: &str = "sy-cluster-caps-client-2b7f";
const RPM_KEY: &str = "sy-cluster-caps-rpm-6c1a";
const UP_KEY: &str = "sk-up-cluster-caps-55555555";
/// The node's permit lease TTL (`caps::permits::PERMIT_TTL_MS`).
const PERMIT_TTL: Duration = Duration::from_secs(3);

fn config(mock: &MockHandle, redis_url: &str) -> String {
    format!(
        r#"
[server]
workers = 1

[auth]
require_api_key = true
management_key_env = ""

[[api_keys]]
id = "client"
key_env = "CLIENT_KEY"

[[api_keys]]
id = "limited"
key_env = "RPM_KEY"
requests_per_minute = 3

[[providers]]
id = "p"
format = "openai"
base_url = "{base}/v1"
models = []

[providers.timeouts]
connect_ms = 1000
headers_ms = 30000
first_content_ms = 30000
idle_ms = 30000

[[connections]]
id = "capped"
provider = "p"
api_key_env = "UP_KEY"
max_concurrent = 2

[[providers]]
id = "q"
format = "openai"
base_url = "{base}/v1"
models = []

[[connections]]
id = "paced"
provider = "q"
api_key_env = "UP_KEY"
rate_limit_protection = true
[connections.rate_limit]
requests_per_minute = 3
max_wait_ms = 1000

[cluster]
mode = "redis"
redis_url = "{redis_url}"
redis_timeout_ms = 300

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.concurrency]
semaphore_max_queue = 100
semaphore_queue_timeout_ms = 60000
"#,
        base = mock.base_url()
    )
}

async fn start_nodes(config: &str, n: usize) -> Vec<NodeProcess> {
    let mut handles = Vec::new();
    for i in 0..n {
        // Distinct node ids: permits are leased per node id.
        let config = config.replace(
            "workers = 1",
            &format!("workers = 1\nnode_id = \"caps-node-{i}\""),
        );
        handles.push(tokio::task::spawn_blocking(move || {
            NodeProcess::start(
                &config,
                &[
                    ("CLIENT_KEY", CLIENT_KEY),
                    ("RPM_KEY", RPM_KEY),
                    ("UP_KEY", UP_KEY),
                ],
            )
        }));
    }
    let mut nodes = Vec::new();
    for h in handles {
        nodes.push(h.await.unwrap().unwrap());
    }
    nodes
}

async fn chat(http: &reqwest::Client, url: &str, key: &str, model: &str) -> u16 {
    http.post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string())
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

fn latency(model: &str, ms: u64) -> FaultSpec {
    FaultSpec {
        matcher: FaultMatch {
            model: Some(model.to_owned()),
            ..FaultMatch::default()
        },
        latency_before_headers_ms: Some(ms),
        ..FaultSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_concurrent_holds_across_nodes_and_returns_from_a_killed_node() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let mut nodes = start_nodes(&config(&mock, &redis.url()), 3).await;
    let urls: Vec<String> = nodes.iter().map(NodeProcess::client_url).collect();
    let http = Arc::new(
        reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap(),
    );

    // 60 concurrent requests spread over the three nodes; each takes 150 ms upstream.
    mock.script(latency("work", 150)).unwrap();
    let tasks: Vec<_> = (0..60)
        .map(|i| {
            let http = http.clone();
            let url = urls[i % 3].clone();
            tokio::spawn(async move { chat(&http, &url, CLIENT_KEY, "p/work").await })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        if t.await.unwrap() == 200 {
            ok += 1;
        }
    }
    let stats = mock.stats();
    assert!(
        stats.max_in_flight <= 2,
        "the cluster cap of 2 was exceeded: {} in flight at once",
        stats.max_in_flight
    );
    assert!(ok >= 30, "only {ok} of 60 requests were served");

    // Node 0 takes both permits with two slow requests, then dies with them (SIGKILL).
    mock.clear_faults();
    mock.script(latency("slow", 30_000)).unwrap();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let http = http.clone();
            let url = urls[0].clone();
            tokio::spawn(async move { chat(&http, &url, CLIENT_KEY, "p/slow").await })
        })
        .collect();
    let held = eventually(Duration::from_secs(20), || {
        std::future::ready(mock.stats().in_flight >= 2)
    })
    .await;
    assert!(held, "node 0 never held both permits");
    let killed_at = Instant::now();
    drop(nodes.remove(0)); // SIGKILL: its permits are never returned, only expire
    let status = chat(&http, &urls[1], CLIENT_KEY, "p/fast").await;
    let waited = killed_at.elapsed();
    assert_eq!(status, 200);
    assert!(
        waited < PERMIT_TTL + Duration::from_secs(10),
        "capacity came back only after {waited:?}"
    );
    for t in slow {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_requests_per_minute_hold_across_nodes() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let nodes = start_nodes(&config(&mock, &redis.url()), 3).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut statuses = Vec::new();
    // Two requests per node: each node alone would allow all of them (3 per minute each).
    for _ in 0..2 {
        for node in &nodes {
            statuses.push(chat(&http, &node.client_url(), RPM_KEY, "p/m").await);
        }
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((ok, limited), (3, 3), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_requests_per_minute_hold_across_nodes() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let nodes = start_nodes(&config(&mock, &redis.url()), 3).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut statuses = Vec::new();
    // Two requests per node: each node's own queue would pace them through (3 per minute
    // each); the connection's cluster bucket lets 3 through in all, and the others cannot get
    // a token within the 1 s wait budget (the next one is 20 s away).
    for _ in 0..2 {
        for node in &nodes {
            statuses.push(chat(&http, &node.client_url(), CLIENT_KEY, "q/m").await);
        }
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(ok, 3, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "the refused ones are rate limited: {statuses:?}"
    );
}
