//! Throughput of one node in redis mode against the same node in embedded mode, same load.
//!
//! The ordinary request path never calls Redis, so the two should be close. Ignored by
//! default (a timing measurement on a shared machine); run it with
//! `cargo nextest run -p switchyard-tests --test cluster --run-ignored all --no-capture throughput::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_tests::cluster::start_node;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

const CONCURRENCY: usize = 16;
const RUN: Duration = Duration::from_secs(8);

fn body(base: &str) -> String {
    format!(
        r#"
[server]
workers = 2

[auth]
require_api_key = false
management_key_env = ""

[[providers]]
id = "p"
category = "apikey"
format = "openai"
base_url = "{base}/v1"
models = ["m"]

[[connections]]
id = "k0"
provider = "p"
api_key_env = "KEY_0"

[resilience.request_queue]
auto_enable_apikey_providers = false
"#
    )
}

/// Requests per second over `RUN` at `CONCURRENCY`, and the number of non-200 answers.
async fn measure(node: &NodeProcess) -> (f64, u64) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("{}/v1/chat/completions", node.client_url());
    // Warm-up.
    for _ in 0..50 {
        let _ = http
            .post(&url)
            .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await;
    }
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + RUN;
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (http, url, done, failed) =
                (http.clone(), url.clone(), done.clone(), failed.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    let ok = http
                        .post(&url)
                        .json(&json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await
                        .is_ok_and(|r| r.status().as_u16() == 200);
                    done.fetch_add(1, Ordering::Relaxed);
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let rps = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    (rps, failed.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a timing measurement; run on demand"]
async fn one_node_in_redis_mode_serves_about_as_fast_as_embedded() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock.base_url());
    let b = body.clone();
    let embedded = tokio::task::spawn_blocking(move || {
        NodeProcess::start(&b, &[("KEY_0", "sk-0"), ("RUST_LOG", "warn")]).unwrap()
    })
    .await
    .unwrap();
    let (embedded_rps, embedded_failed) = measure(&embedded).await;
    drop(embedded);
    let (redis, node) = tokio::task::spawn_blocking(move || {
        let redis = RedisServer::start().unwrap();
        let node = start_node(
            "bench",
            &redis.url(),
            &body,
            &[("KEY_0", "sk-0"), ("RUST_LOG", "warn")],
        )
        .unwrap();
        (redis, node)
    })
    .await
    .unwrap();
    let (redis_rps, redis_failed) = measure(&node).await;
    println!(
        "one node, {CONCURRENCY} concurrent clients, {RUN:?}: embedded {embedded_rps:.0} req/s, \
         redis mode {redis_rps:.0} req/s ({:.1} %)",
        100.0 * redis_rps / embedded_rps
    );
    assert_eq!(embedded_failed + redis_failed, 0);
    assert!(redis_rps > 0.5 * embedded_rps);
    drop(node);
    drop(redis);
}
