//! What a node learns from upstream answers, shared in redis mode: the Claude OAuth usage
//! wall's low-priority lane and the tool limits learned from "too many tools" answers. Two
//! real nodes, one real `redis-server`, one mock upstream.
//!
//! The mock plays Anthropic's usage wall from the wire contract of Claude Code 2.1.263, as the
//! OmniRoute resilience guide records it under "Claude OAuth usage wall" (see
//! `tests/mock/src/usage_wall.rs`): a wall 429 offering the lane to requests without
//! `anthropic-usage-limit: slow`, the lane's `active` answers to requests with it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use switchyard_tests::cluster::{MGMT_KEY, TestCluster};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{
    FaultSpec, MockConfig, MockHandle, MockUpstream, WallScript,
};

use crate::support::http::{connection, messages, open_auth, provider, queue_and_wait_off};
use crate::support::{STATE_DEADLINE, eventually};

pub(crate) const KEY_A: &str = "sk-ant-oat01-shared-wall-a";
pub(crate) const KEY_B: &str = "sk-ant-oat01-shared-wall-b";
pub(crate) const MODEL: &str = "claude/claude-x";

pub(crate) fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One Claude OAuth provider (tool limits live `ttl_ms`): `ca` with the low-priority lane,
/// `cb` plain behind it.
fn body(mock: &MockHandle, ttl_ms: u64) -> String {
    let provider = provider(
        "claude",
        "anthropic",
        &mock.base_url(),
        &["claude-x"],
        &format!("tool_limit_ttl_ms = {ttl_ms}"),
        "connect_ms = 1000\nheaders_ms = 5000\nfirst_content_ms = 5000\nidle_ms = 5000",
    )
    .replacen("category = \"apikey\"", "category = \"oauth\"", 1);
    format!(
        "\n[server]\nworkers = 2\n{}{provider}{}{}{}",
        open_auth(),
        connection("ca", "claude", "KEY_A", "low_priority_mode = true"),
        connection("cb", "claude", "KEY_B", "priority = 5"),
        queue_and_wait_off(),
    )
}

pub(crate) async fn start(mock: &MockHandle, ttl_ms: u64) -> TestCluster {
    let body = body(mock, ttl_ms);
    tokio::task::spawn_blocking(move || {
        let env = [("KEY_A", KEY_A), ("KEY_B", KEY_B)];
        let cluster = TestCluster::start(2, &body, &env).expect("start the cluster");
        assert!(
            cluster.wait_synced(Duration::from_secs(15)),
            "nodes did not subscribe; log of node-0:\n{}",
            cluster.nodes[0].log()
        );
        cluster
    })
    .await
    .unwrap()
}

pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

pub(crate) async fn ask(http: &reqwest::Client, node: &NodeProcess, body: &Value) -> (u16, Value) {
    let resp = http
        .post(format!("{}/v1/messages", node.client_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

pub(crate) async fn admin(http: &reqwest::Client, node: &NodeProcess, path: &str) -> Value {
    let resp = http
        .get(format!("{}{path}", node.admin_url()))
        .bearer_auth(MGMT_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    resp.json().await.unwrap()
}

/// `ca`'s usage-wall row on `node`.
pub(crate) async fn wall_row(http: &reqwest::Client, node: &NodeProcess) -> Value {
    let v = admin(http, node, "/api/resilience/usage-wall").await;
    v["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["connectionId"] == "ca").cloned())
        .unwrap_or_else(|| panic!("no usage-wall row for ca: {v}"))
}

/// Waits until `node` holds a lane on `ca` (learned from a peer: no request of its own).
pub(crate) async fn lane_on(http: &reqwest::Client, node: &NodeProcess) -> Value {
    let row = eventually(STATE_DEADLINE, || async {
        let row = wall_row(http, node).await;
        (!row["lane"].is_null()).then_some(row)
    })
    .await;
    row.unwrap_or_else(|| panic!("no lane arrived; log:\n{}", node.log()))
}

pub(crate) async fn redis(cluster: &TestCluster) -> redis::aio::MultiplexedConnection {
    redis::Client::open(cluster.redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The remaining TTL (ms) of the usage-wall record of `ca` in Redis, -2 when it is gone.
async fn wall_pttl(con: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("PTTL")
        .arg("sy-test:usage_wall:{ca}")
        .query_async(con)
        .await
        .unwrap()
}

pub(crate) fn hits(mock: &MockHandle, key: &str) -> u64 {
    mock.stats().by_key.get(key).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_accepted_on_one_node_serves_the_other_without_its_own_wall() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    let reset_s = epoch_ms() / 1_000 + 7_200;
    let mut script = WallScript::new(reset_s);
    script.api_key = Some(KEY_A.to_owned());
    mock.usage_wall(script);

    // Node A meets the wall and takes the lane.
    let (status, v) = ask(&http, a, &messages(MODEL, false)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(mock.usage_wall_seen().requests, vec![false, true]);

    // Node B learns it without a request of its own.
    let row = lane_on(&http, b).await;
    assert_eq!(row["scope"], "cluster", "{row}");
    let until = row["lane"]["until"].as_u64().unwrap();
    let want = reset_s * 1_000 + 60_000;
    assert!(
        until.abs_diff(want) < 5_000,
        "until {until}, want ~{want}: {row}"
    );

    // Its next request goes straight to the lane: the slow header on its first try.
    let (status, v) = ask(&http, b, &messages(MODEL, false)).await;
    assert_eq!(status, 200, "{v}");
    let seen = mock.usage_wall_seen();
    assert_eq!(
        seen.requests,
        vec![false, true, true],
        "node B sent slow at once"
    );
    assert_eq!(seen.walled, 1, "one wall 429 for the whole cluster");
    assert_eq!(hits(&mock, KEY_B), 0, "nobody rotated away");

    // Redis holds the record until the lane's end, on its own clock.
    let mut con = redis(&cluster).await;
    let pttl = wall_pttl(&mut con).await;
    let left = want.saturating_sub(epoch_ms()) as i64;
    assert!(
        (pttl - left).abs() < 5_000,
        "PTTL {pttl}, lane left ~{left}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_lane_ends_on_every_node_after_its_reset() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 60_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    // The wall resets in 2 s: the lane holds until then + 60 s.
    let reset_s = epoch_ms() / 1_000 + 2;
    let mut script = WallScript::new(reset_s);
    script.api_key = Some(KEY_A.to_owned());
    mock.usage_wall(script);

    let (status, v) = ask(&http, a, &messages(MODEL, false)).await;
    assert_eq!(status, 200, "{v}");
    lane_on(&http, b).await;
    let mut con = redis(&cluster).await;
    assert!(wall_pttl(&mut con).await > 0);

    // The lane lasts until the reset plus 60 s on the wall clock: no event ends it sooner,
    // so this wait is the behaviour under test, not a guess at a delay.
    let end = reset_s * 1_000 + 60_000;
    tokio::time::sleep(Duration::from_millis(end.saturating_sub(epoch_ms()))).await;

    // Then gone from Redis (its TTL) and from node B's view.
    let expired = eventually(Duration::from_secs(5), || async {
        let mut con = redis(&cluster).await;
        wall_pttl(&mut con).await == -2
    })
    .await;
    assert!(expired, "the record outlived the lane");
    let row = eventually(Duration::from_secs(5), || async {
        let row = wall_row(&http, b).await;
        row["lane"].is_null().then_some(row)
    })
    .await;
    assert!(
        row.is_some(),
        "node B kept the lane: {}",
        wall_row(&http, b).await
    );
    // Node B's next request goes at full speed again and meets the wall itself.
    let (status, v) = ask(&http, b, &messages(MODEL, false)).await;
    assert_eq!(status, 200, "{v}");
    let seen = mock.usage_wall_seen();
    assert_eq!(seen.requests, vec![false, true, false, true], "{seen:?}");
    assert_eq!(seen.walled, 2);
}

pub(crate) fn with_tools(n: usize) -> Value {
    let mut body = messages(MODEL, false);
    body["tools"] = Value::Array(
        (0..n)
            .map(|i| json!({"name": format!("tool_{i}"), "input_schema": {"type": "object"}}))
            .collect(),
    );
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_limit_learned_on_one_node_holds_on_the_other_until_its_ttl() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let cluster = start(&mock, 3_000).await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    let http = http();
    // Error text: OpenAI's "too many tools" 400, shrunk to a limit of 2.
    mock.script(FaultSpec {
        error_message: Some(
            "Invalid 'tools': array too long. Expected an array with maximum length 2, \
             but got an array with length 3 instead."
                .into(),
        ),
        ..FaultSpec::status(400).for_key(KEY_A).times(1)
    })
    .unwrap();

    // Node A's 400 teaches the limit.
    let (status, v) = ask(&http, a, &with_tools(3)).await;
    assert_ne!(status, 200, "{v}");
    let before = hits(&mock, KEY_A) + hits(&mock, KEY_B);

    // Node B holds it too: above it, answered without the provider.
    let listed = eventually(STATE_DEADLINE, || async {
        let v = admin(&http, b, "/api/resilience/tool-limits").await;
        (v["items"][0]["limit"] == 2).then_some(v)
    })
    .await;
    let listed = listed.unwrap_or_else(|| panic!("node B never learned the limit:\n{}", b.log()));
    assert!(
        listed["items"][0]["expires_in_ms"].as_u64().unwrap() <= 3_000,
        "{listed}"
    );
    let (status, v) = ask(&http, b, &with_tools(3)).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "tool_limit_exceeded", "{v}");
    assert_eq!(hits(&mock, KEY_A) + hits(&mock, KEY_B), before);

    // Past the TTL it ages out everywhere: the same request reaches the provider.
    for node in [a, b] {
        let aged_out = eventually(Duration::from_secs(10), || async {
            admin(&http, node, "/api/resilience/tool-limits").await["items"] == json!([])
        })
        .await;
        assert!(
            aged_out,
            "the learned limit did not age out on {}",
            node.client_url()
        );
    }
    let (status, v) = ask(&http, b, &with_tools(3)).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(hits(&mock, KEY_A) + hits(&mock, KEY_B), before + 1);
    let mut con = redis(&cluster).await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg("sy-test:tool_limit:{claude}:claude-x")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the record outlived its TTL");
}
