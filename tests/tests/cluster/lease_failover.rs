//! Lease generations across a Sentinel failover that loses the last writes.
//!
//! Replication is asynchronous, so a failover can promote a replica that missed the last
//! grants, the generation counter's increment included. Before, the next grant there reused
//! the lost generation. Now a generation is raised to the server clock (microseconds), so the
//! promoted master issues past every generation the old one gave out, and the holder of the
//! lost lease is refused by the fence and never reaches the provider.
//!
//! The lost write is made deterministic: the replica is pointed at a port nobody listens on
//! (it keeps its data and its replica role), the grant is made on the master, and the master
//! is killed before the replica could have it; the sentinel then promotes the replica.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::eventually;
use switchyard_tests::cluster::{cluster_degraded_async, start_node};
use switchyard_tests::harness::{NodeProcess, free_port};
use switchyard_tests::mock_upstream::{MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_topology::{RedisSentinel, cli};

const AGENT_KEY: &str = "sy-failover-lease-agent-1c4e";
const UP_KEY: &str = "sk-up-failover-lease-5555555";
const OWNER_X: &str = "vlo_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX";
const OWNER_Y: &str = "vlo_YYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYYY";
const OWNER_Z: &str = "vlo_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ";

fn body(mock: &MockHandle) -> String {
    format!(
        r#"
[server]
workers = 1

[auth]
require_api_key = true

[[api_keys]]
id = "agents"
key_env = "AGENT_KEY"
scopes = ["lease:exclusive"]
allowed_connections = ["c1"]

[[providers]]
id = "p"
format = "openai"
base_url = "{base}/v1"
models = ["m"]

[[connections]]
id = "c1"
provider = "p"
api_key_env = "UP_KEY"

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.session_leases]
ttl_ms = 60000
"#,
        base = mock.base_url()
    )
}

async fn post(
    node: &NodeProcess,
    path: &str,
    owner: &str,
    generation: Option<u64>,
    body: Value,
) -> (u16, Value) {
    let mut req = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
        .post(format!("{}{path}", node.client_url()))
        .bearer_auth(AGENT_KEY)
        .header("x-switchyard-lease-owner", owner)
        .json(&body);
    if let Some(g) = generation {
        req = req.header("x-switchyard-lease-generation", g.to_string());
    }
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (status, resp.json().await.unwrap_or(Value::Null))
        }
        Err(e) => (0, json!({"error": {"code": format!("transport: {e}")}})),
    }
}

async fn acquire(node: &NodeProcess, owner: &str) -> u64 {
    let (status, json) = post(
        node,
        "/api/v1/session-leases",
        owner,
        None,
        json!({"action": "acquire", "model": "p/m"}),
    )
    .await;
    assert_eq!(status, 200, "{json}\n{}", node.log());
    json["generation"].as_u64().unwrap()
}

async fn chat(node: &NodeProcess, owner: &str, generation: u64) -> (u16, Value) {
    post(
        node,
        "/v1/chat/completions",
        owner,
        Some(generation),
        json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
}

fn replication_offset(port: u16, field: &str) -> Option<u64> {
    let info = cli(port, &["INFO", "replication"]).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_loses_a_grant_never_reissues_its_generation() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let body = body(&mock);
    let (topo, node) = tokio::task::spawn_blocking(move || {
        let topo = RedisSentinel::start().expect("sentinel topology");
        let env = [("AGENT_KEY", AGENT_KEY), ("UP_KEY", UP_KEY)];
        let node = start_node("node-0", &topo.url(), &body, &env).unwrap();
        (topo, node)
    })
    .await
    .unwrap();
    let admin = node.admin;
    let healthy = || async move { !cluster_degraded_async(admin).await };
    assert!(
        eventually(Duration::from_secs(15), healthy).await,
        "the node never reached Redis through the sentinel; log:\n{}",
        node.log()
    );

    // X's grant and release reach the replica.
    let gx = acquire(&node, OWNER_X).await;
    let (status, json) = post(
        &node,
        "/api/v1/session-leases",
        OWNER_X,
        None,
        json!({"action": "release", "generation": gx}),
    )
    .await;
    assert_eq!(status, 200, "{json}");
    let (master, replica) = (topo.master.port, topo.replica.port);
    assert!(
        eventually(Duration::from_secs(10), || async move {
            let m = replication_offset(master, "master_repl_offset:");
            m.is_some() && m == replication_offset(replica, "slave_repl_offset:")
        })
        .await,
        "the replica never caught up"
    );

    // The replica stops following (it keeps its role and data); Y's grant is made on the
    // master only and Y is served under it.
    let nowhere = free_port().unwrap().to_string();
    let out = cli(replica, &["REPLICAOF", "127.0.0.1", &nowhere]).unwrap();
    assert!(out.contains("OK"), "{out}");
    let gy = acquire(&node, OWNER_Y).await;
    assert!(gy > gx, "{gy} after {gx}");
    let (status, json) = chat(&node, OWNER_Y, gy).await;
    assert_eq!(status, 200, "{json}\n{}", node.log());
    let served = mock.stats().requests_total;

    // The master dies; the sentinel promotes the replica, which never saw Y's grant.
    let mut topo = topo;
    let topo = tokio::task::spawn_blocking(move || {
        topo.fail_over().expect("failover");
        topo
    })
    .await
    .unwrap();

    // Y's lease is gone with the lost write: Y is refused, wherever the node is connected.
    let stale = eventually(Duration::from_secs(30), || async {
        let (status, json) = chat(&node, OWNER_Y, gy).await;
        (status == 409).then_some(json)
    })
    .await;
    let stale = stale.unwrap_or_else(|| panic!("Y was never refused; log:\n{}", node.log()));
    assert_eq!(stale["error"]["code"], "LEASE_FENCE_STALE", "{stale}");

    // A new grant on the promoted master is above the lost one, never a reuse of it.
    let gz = acquire(&node, OWNER_Z).await;
    assert!(
        gz > gy,
        "generation went back across the failover: {gz} after the lost {gy}"
    );
    let (status, json) = chat(&node, OWNER_Z, gz).await;
    assert_eq!(status, 200, "{json}");
    // Y's generation is refused by the fence against the new lease, and never dispatched.
    let (status, json) = chat(&node, OWNER_Y, gy).await;
    assert_eq!(
        (status, json["error"]["code"].as_str()),
        (409, Some("LEASE_FENCE_STALE"))
    );
    assert_eq!(
        mock.stats().requests_total,
        served + 1,
        "only Z's request may have reached the provider"
    );
    drop(topo);
}
