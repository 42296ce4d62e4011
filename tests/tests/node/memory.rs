//! Memory growth under streaming: 50 warm-up streams, then 5,000 SSE streams at a concurrency
//! of 50 through the real node binary. The node's resident set (VmRSS from
//! `/proc/<pid>/status`) after the warm-up and at the end must differ by less than 20 MiB: a
//! per-stream leak of even 4 KiB would show as about 20 MiB here.
//!
//! The warm-up lets the allocator, the connection pools and the worker threads reach their
//! steady size first, so what is measured is growth, not start-up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use switchyard_tests::harness::NodeProcess;

use crate::support::http::*;

const WARM_UP: usize = 50;
const STREAMS: usize = 5_000;
const CONCURRENCY: usize = 50;
const MAX_GROWTH_KIB: u64 = 20 * 1024;

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// Runs `n` streams, `CONCURRENCY` at a time; returns how many ended properly.
async fn streams(c: &reqwest::Client, url: &str, n: usize) -> usize {
    let body = chat("p/m", true).to_string();
    futures_util::stream::iter(0..n)
        .map(|_| {
            let req = c
                .post(url)
                .header("content-type", "application/json")
                .body(body.clone());
            async move {
                let Ok(resp) = req.send().await else {
                    return false;
                };
                if resp.status() != 200 {
                    return false;
                }
                resp.bytes()
                    .await
                    .is_ok_and(|b| b.windows(12).any(|w| w == b"data: [DONE]"))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .filter(|ok| std::future::ready(*ok))
        .count()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_does_not_grow_memory() {
    let mock = mock(2).await;
    let mut config = String::from("[server]\nworkers = 2\n");
    config.push_str(&open_auth_no_queue());
    config.push_str(&provider("p", "openai", &mock.base_url(), &["m"], "", ""));
    config.push_str(&connection("p-k1", "p", "UP_KEY", ""));
    let node: NodeProcess = start_node(config, env(&[("UP_KEY", "sk-memory-test")])).await;
    let pid = node.pid();
    // Keep-alive connections, as a real client would: the test measures the node's
    // per-stream state, not TCP connection churn.
    let c = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(CONCURRENCY)
        .build()
        .unwrap();
    let url = format!("{}/v1/chat/completions", node.client_url());

    let started = Instant::now();
    assert_eq!(streams(&c, &url, WARM_UP).await, WARM_UP, "warm-up streams");
    wait_idle(&node).await;
    let before = rss_kib(pid);

    let ok = streams(&c, &url, STREAMS).await;
    wait_idle(&node).await;
    let after = rss_kib(pid);
    let elapsed = started.elapsed();

    let growth = after.saturating_sub(before);
    eprintln!(
        "node RSS after {WARM_UP} warm-up streams: {before} KiB; after {STREAMS} more: \
         {after} KiB; growth {growth} KiB ({:.1} MiB, limit 20 MiB); {ok}/{STREAMS} streams \
         completed in {:.1} s",
        growth as f64 / 1024.0,
        elapsed.as_secs_f64()
    );
    assert_eq!(ok, STREAMS, "every stream completes");
    assert!(
        growth < MAX_GROWTH_KIB,
        "RSS grew {growth} KiB over {STREAMS} streams ({before} → {after} KiB)"
    );
    assert_healthy(&node, "5,000 streams").await;
}
