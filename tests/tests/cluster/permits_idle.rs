//! An idle capped connection makes no Redis calls: its permit task goes quiet once Redis
//! knows the node holds none of its permits, and wakes on demand. Counted with Redis's own
//! `INFO commandstats`: only the permit-acquire script runs `ZRANGEBYSCORE`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::json;

use crate::support::eventually;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

const CLIENT_KEY: &str = "sy-permits-idle-client-7d3e";
const UP_KEY: &str = "sk-up-permits-idle-66666666";
/// Longer than the permit task's renewal period (a third of the 3 s permit TTL).
const WINDOW: Duration = Duration::from_millis(1_500);

fn config(base: &str, redis_url: &str) -> String {
    format!(
        r#"
[server]
workers = 1
node_id = "permits-idle-0"

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

[[connections]]
id = "capped"
provider = "p"
api_key_env = "UP_KEY"
max_concurrent = 2

[cluster]
mode = "redis"
redis_url = "{redis_url}"
redis_timeout_ms = 300

[resilience.request_queue]
auto_enable_apikey_providers = false
"#
    )
}

/// Permit-acquire script runs so far (`ZRANGEBYSCORE` calls).
async fn permit_calls(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("cmdstat_zrangebyscore:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn chat(http: &reqwest::Client, url: &str) -> u16 {
    http.post(format!("{url}/v1/chat/completions"))
        .bearer_auth(CLIENT_KEY)
        .header("content-type", "application/json")
        .body(json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}).to_string())
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_capped_connection_makes_no_redis_calls_until_demand() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cfg = config(&mock.base_url(), &redis.url());
    let node = tokio::task::spawn_blocking(move || {
        NodeProcess::start(&cfg, &[("CLIENT_KEY", CLIENT_KEY), ("UP_KEY", UP_KEY)])
    })
    .await
    .unwrap()
    .unwrap();
    let mut con = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(chat(&http, &node.client_url()).await, 200);

    // After the request the task hands its permits back; then a whole renewal period and
    // more passes without one permit call.
    let quiet = eventually(Duration::from_secs(20), || {
        let mut con = con.clone();
        async move {
            let before = permit_calls(&mut con).await;
            tokio::time::sleep(WINDOW).await;
            before > 0 && permit_calls(&mut con).await == before
        }
    })
    .await;
    assert!(quiet, "an idle capped connection kept calling Redis");

    // Demand wakes the task: the next request is served, through a fresh grant.
    let before = permit_calls(&mut con).await;
    assert_eq!(chat(&http, &node.client_url()).await, 200);
    let asked = eventually(Duration::from_secs(10), || {
        let mut con = con.clone();
        async move { permit_calls(&mut con).await > before }
    })
    .await;
    assert!(
        asked,
        "a request on the quiet connection took no permit from Redis"
    );
}
