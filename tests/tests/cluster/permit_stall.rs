//! A cluster-wide `max_concurrent` holds while Redis stalls. Redis is frozen (SIGSTOP) for a
//! second at a time under steady load through three nodes, with cap 1: a node keeps the block
//! it holds while that block is valid on its own clock, and takes no share of the cap because
//! a permit call timed out. The upstream's own count of concurrent requests for the
//! connection's key is the judge.
//!
//! It used to fail: every node resized its gate to `ceil(1 / 3) = 1` on the first timeout,
//! so the three of them ran a request each at once. And a node started while Redis was down
//! took itself for alone and the whole cap with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use switchyard_tests::cluster::{metric, metrics_text};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultMatch, FaultSpec, MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

const CLIENT_KEY: &str = "sy-permit-stall-client-1c9a";
const UP_KEY: &str = "sk-up-permit-stall-77777777";
const NODES: usize = 3;
const CAP: u64 = 1;
/// Redis is frozen this long each time: a third of the 3 s permit TTL.
const STALL: Duration = Duration::from_secs(1);
const STALLS: usize = 4;

fn config(base: &str, redis_url: &str, node: usize) -> String {
    format!(
        r#"
[server]
workers = 1
node_id = "permit-stall-{node}"

[auth]
require_api_key = true
management_key_env = ""

[[api_keys]]
id = "client"
key_env = "CLIENT_KEY"

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
max_concurrent = {CAP}

[cluster]
mode = "redis"
redis_url = "{redis_url}"
redis_timeout_ms = 250

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.concurrency]
semaphore_max_queue = 100
semaphore_queue_timeout_ms = 60000
"#
    )
}

async fn chat(http: &reqwest::Client, url: &str) -> u16 {
    http.post(format!("{url}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body(
            json!({"model": "p/work", "messages": [{"role": "user", "content": "hi"}]}).to_string(),
        )
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cap_holds_while_redis_stalls_under_load() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(FaultSpec {
        matcher: FaultMatch {
            model: Some("work".to_owned()),
            ..FaultMatch::default()
        },
        latency_before_headers_ms: Some(150),
        ..FaultSpec::default()
    })
    .unwrap();
    let mut starts = Vec::new();
    for i in 0..NODES {
        let body = config(&mock.base_url(), &redis.url(), i);
        starts.push(tokio::task::spawn_blocking(move || {
            NodeProcess::start(&body, &[("CLIENT_KEY", CLIENT_KEY), ("UP_KEY", UP_KEY)])
        }));
    }
    let mut nodes = Vec::new();
    for s in starts {
        nodes.push(s.await.unwrap().unwrap());
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();

    // Steady load: three clients per node, each sending one request after the other.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for i in 0..NODES * 3 {
        let (http, url) = (http.clone(), nodes[i % NODES].client_url());
        let (stop, answered) = (stop.clone(), answered.clone());
        clients.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            // Bounded: at most 1,000 requests per client.
            for _ in 0..1_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let status = chat(&http, &url).await;
                answered.fetch_add(1, Ordering::Relaxed);
                statuses.push(status);
            }
            statuses
        }));
    }
    let flowing = crate::support::eventually(Duration::from_secs(10), || async {
        mock.stats().requests_total > 0
    })
    .await;
    assert!(flowing, "no request reached the upstream before the stalls");
    let before = mock.stats().requests_total;
    for _ in 0..STALLS {
        redis.pause();
        tokio::time::sleep(STALL).await;
        redis.resume();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut statuses = Vec::new();
    for c in clients {
        statuses.extend(c.await.unwrap());
    }

    let stats = mock.stats();
    let peak = stats.max_in_flight_for_key(UP_KEY);
    assert!(
        peak <= CAP,
        "the cluster cap of {CAP} was exceeded while Redis stalled: {peak} requests in flight \
         upstream at once ({} requests answered)",
        answered.load(Ordering::Relaxed)
    );
    assert!(
        stats.requests_total > before,
        "nothing was served across the stalls"
    );
    let failed: Vec<_> = statuses.iter().filter(|s| **s != 200).collect();
    assert!(
        failed.is_empty(),
        "every request is answered: {} of {} were not 200: {failed:?}",
        failed.len(),
        statuses.len()
    );
    drop(nodes);
}

/// A node that starts while Redis is down cannot tell whether it is alone or one of many: it
/// takes no share of the cap (its capped connection refuses after the queue wait instead of
/// sending), and serves once Redis answers. It used to take the whole cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_started_without_redis_takes_no_share_until_redis_answers() {
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    redis.kill();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    // A short queue wait, so a request that finds no permit is answered soon.
    let body = config(&mock.base_url(), &url, 0).replace(
        "semaphore_queue_timeout_ms = 60000",
        "semaphore_queue_timeout_ms = 1000",
    );
    let node = tokio::task::spawn_blocking(move || {
        NodeProcess::start(&body, &[("CLIENT_KEY", CLIENT_KEY), ("UP_KEY", UP_KEY)])
    })
    .await
    .unwrap()
    .unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // Past the permit TTL after the first failed call: a node that knew a count would fall
    // back to its share by now. The wait is the condition under test (a duration on the
    // node's clock that no event marks), not a guess at a delay.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let status = chat(&http, &node.client_url()).await;
    assert_ne!(
        status, 200,
        "served without Redis by a node that knew no peers"
    );
    assert_eq!(
        mock.stats().requests_for_key(UP_KEY),
        0,
        "the upstream was reached without a permit"
    );

    redis.restart().unwrap();
    let served = crate::support::eventually(Duration::from_secs(20), || async {
        chat(&http, &node.client_url()).await == 200
    })
    .await;
    assert!(
        served,
        "not served after Redis came back; log:\n{}",
        node.log()
    );
}

/// The node's `switchyard_permits_over_cap` for the capped connection.
async fn over_cap(node: &NodeProcess) -> Option<f64> {
    let admin = node.admin;
    tokio::task::spawn_blocking(move || {
        metric(
            &metrics_text(admin),
            "switchyard_permits_over_cap{connection=\"capped\"}",
        )
    })
    .await
    .unwrap()
}

/// A request that outlives its permit's validity (Redis frozen longer than the grant lasts)
/// is counted over the cap: Redis may have handed its permit to another node. Renewed once
/// Redis answers again, it no longer is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_held_past_its_validity_is_counted_over_the_cap() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    mock.script(FaultSpec {
        matcher: FaultMatch {
            model: Some("work".to_owned()),
            ..FaultMatch::default()
        },
        latency_before_headers_ms: Some(8_000),
        ..FaultSpec::default()
    })
    .unwrap();
    let body = config(&mock.base_url(), &redis.url(), 0);
    let node = tokio::task::spawn_blocking(move || {
        NodeProcess::start(&body, &[("CLIENT_KEY", CLIENT_KEY), ("UP_KEY", UP_KEY)])
    })
    .await
    .unwrap()
    .unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let url = node.client_url();
    let slow = tokio::spawn(async move { chat(&http, &url).await });
    let running = crate::support::eventually(Duration::from_secs(10), || async {
        mock.stats().in_flight >= 1
    })
    .await;
    assert!(running, "the slow request never reached the upstream");
    assert_eq!(over_cap(&node).await, Some(0.0), "covered by a valid grant");

    redis.pause();
    // The grant lasts 2.5 s from its renewal's send time.
    let counted = crate::support::eventually(Duration::from_secs(4), || async {
        over_cap(&node).await == Some(1.0)
    })
    .await;
    redis.resume();
    assert!(
        counted,
        "a permit past its validity was not counted over the cap"
    );
    let renewed = crate::support::eventually(Duration::from_secs(5), || async {
        over_cap(&node).await == Some(0.0)
    })
    .await;
    assert!(renewed, "still over the cap after Redis renewed the grant");
    assert_eq!(slow.await.unwrap(), 200);
}
