//! "Who used what": `GET /api/usage` on real nodes and `GET /api/cluster/usage` on the real
//! coordinator, which sums every live node's answer. Two nodes in redis mode serve two client
//! keys through the mock upstream; the sums must equal the usage the clients were sent, by key,
//! on one node and across the cluster, and both answers validate against their OpenAPI
//! documents. A node that stops answering is named, and the sum says it is partial.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

use super::openapi::{sample, validate_against};
use crate::support::coordinator::{Coordinator, MGMT_KEY, PREFIX};
use crate::support::eventually;

const ALICE: &str = "sk-usage-alice-3f9a";
const BOB: &str = "sk-usage-bob-77c1";

fn config(node_id: &str, redis_url: &str, mock_base: &str) -> String {
    format!(
        r#"
[server]
node_id = "{node_id}"

[auth]
require_api_key = true
management_key_env = "SWITCHYARD_MANAGEMENT_KEY"

[[api_keys]]
id = "alice"
key_env = "ALICE_KEY"

[[api_keys]]
id = "bob"
key_env = "BOB_KEY"

[cluster]
mode = "redis"
redis_url = "{redis_url}"
key_prefix = "{PREFIX}"
heartbeat_interval_ms = 300
node_ttl_ms = 3000
redis_timeout_ms = 500

[[providers]]
id = "p0"
category = "apikey"
format = "openai"
base_url = "{mock_base}/v1"

[[connections]]
id = "p0-c0"
provider = "p0"
api_key_env = "UP_KEY"
"#
    )
}

const ENV: &[(&str, &str)] = &[
    ("SWITCHYARD_MANAGEMENT_KEY", MGMT_KEY),
    ("ALICE_KEY", ALICE),
    ("BOB_KEY", BOB),
    ("CLIENT_KEY", ALICE),
    ("UP_KEY", "sk-up-usage-0d1e"),
];

/// What one key was billed, as the clients saw it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Billed {
    requests: u64,
    input: u64,
    output: u64,
}

/// One chat through `node` as `key`: JSON, or a stream that asks for its usage. Returns the
/// usage the client was sent.
async fn chat(http: &reqwest::Client, node: &NodeProcess, key: &str, stream: bool) -> (u64, u64) {
    let body = if stream {
        json!({"model": "p0/gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "count my tokens, streamed"}]})
    } else {
        json!({"model": "p0/gpt-4o-mini",
               "messages": [{"role": "user", "content": "count my tokens please"}]})
    };
    let resp = http
        .post(format!("{}/v1/chat/completions", node.client_url()))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.text().await.unwrap();
    let usage = if stream {
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find_map(|v| v.get("usage").filter(|u| u.is_object()).cloned())
            .unwrap_or_else(|| panic!("the stream carried no usage: {text}"))
    } else {
        serde_json::from_str::<Value>(&text).unwrap()["usage"].clone()
    };
    let n = |f: &str| {
        usage[f]
            .as_u64()
            .unwrap_or_else(|| panic!("{f} in {usage}"))
    };
    (n("prompt_tokens"), n("completion_tokens"))
}

async fn admin(http: &reqwest::Client, node: &NodeProcess, path: &str) -> (u16, Value) {
    let resp = http
        .get(format!("{}{path}", node.admin_url()))
        .bearer_auth(MGMT_KEY)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

fn row<'a>(answer: &'a Value, group: &str) -> Option<&'a Value> {
    answer["rows"]
        .as_array()?
        .iter()
        .find(|r| r["group"] == group)
}

fn billed_row(answer: &Value, group: &str) -> Billed {
    row(answer, group).map_or_else(Billed::default, |r| Billed {
        requests: r["requests"].as_u64().unwrap_or(0),
        input: r["inputTokens"].as_u64().unwrap_or(0),
        output: r["outputTokens"].as_u64().unwrap_or(0),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_summed_by_key_on_each_node_and_across_the_cluster() {
    let redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let config = |id: &str| config(id, &redis.url(), &mock.base_url());
    let node_a = NodeProcess::start(&config("usage-a"), ENV).unwrap();
    let node_b = NodeProcess::start(&config("usage-b"), ENV).unwrap();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    // alice: three JSON answers on a, one stream on b; bob: two JSON answers on b.
    let mut alice_a = Billed::default();
    let mut alice = Billed::default();
    let mut bob = Billed::default();
    for _ in 0..3 {
        let (i, o) = chat(&http, &node_a, ALICE, false).await;
        for b in [&mut alice_a, &mut alice] {
            b.requests += 1;
            b.input += i;
            b.output += o;
        }
    }
    let (i, o) = chat(&http, &node_b, ALICE, true).await;
    alice.requests += 1;
    alice.input += i;
    alice.output += o;
    for _ in 0..2 {
        let (i, o) = chat(&http, &node_b, BOB, false).await;
        bob.requests += 1;
        bob.input += i;
        bob.output += o;
    }
    assert!(alice.input > 0 && alice.output > 0, "{alice:?}");

    // One node: only what it served.
    let (status, on_a) = admin(&http, &node_a, "/api/usage?by=key&since=1h").await;
    assert_eq!(status, 200, "{on_a}");
    assert_eq!(billed_row(&on_a, "alice"), alice_a, "{on_a}");
    assert!(row(&on_a, "bob").is_none(), "{on_a}");
    assert_eq!(on_a["totals"]["requests"], 3, "{on_a}");
    // By connection and by model the same requests are counted once.
    let (_, by_model) = admin(&http, &node_a, "/api/usage?by=model").await;
    assert_eq!(by_model["totals"], on_a["totals"], "{by_model}");
    let (_, by_conn) = admin(&http, &node_a, "/api/usage?by=connection").await;
    assert_eq!(billed_row(&by_conn, "p0-c0"), alice_a, "{by_conn}");
    // The stream's usage reached node b's ledger.
    let (_, on_b) = admin(&http, &node_b, "/api/usage?by=key").await;
    assert_eq!(billed_row(&on_b, "alice").requests, 1, "{on_b}");
    assert_eq!(
        billed_row(&on_b, "alice").output,
        alice.output - alice_a.output
    );
    // The same tokens by key in Prometheus.
    let exposition = http
        .get(format!("{}/metrics", node_a.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = format!(
        "switchyard_client_key_token_usage_total{{api_key=\"alice\",token_type=\"input\"}} {}",
        alice_a.input
    );
    assert!(
        exposition.lines().any(|l| l == line),
        "no {line:?} in:\n{exposition}"
    );
    let bad = admin(&http, &node_a, "/api/usage?by=team").await;
    assert_eq!(bad.0, 400, "{}", bad.1);
    assert_eq!(bad.1["error"]["code"], "invalid_query");
    let bad_since = admin(&http, &node_a, "/api/usage?since=3d").await;
    assert_eq!(bad_since.0, 400, "{}", bad_since.1);

    let node_samples = json!([
        sample("get", "/api/usage", (200, on_a.clone())),
        sample("get", "/api/usage", (200, on_b.clone())),
        sample("get", "/api/usage", bad.clone()),
    ]);
    let (ok, output) = validate_against("../docs/openapi.json", &node_samples).await;
    assert!(
        ok,
        "node usage answers do not match docs/openapi.json:\n{output}"
    );

    // The cluster: both nodes' sums, once both heartbeats are in.
    let c = Coordinator::start(
        &config("usage-coordinator"),
        &[("ALICE_KEY", ALICE), ("BOB_KEY", BOB)],
    );
    let cluster = eventually(Duration::from_secs(15), || async {
        let (status, body) = c.call("GET", "/api/cluster/usage?by=key", None).await;
        let answered = body["nodes"]["answered"].as_array()?.len();
        (status == 200 && answered == 2).then_some(body)
    })
    .await;
    let Some(cluster) = cluster else {
        let last = c.call("GET", "/api/cluster/usage?by=key", None).await;
        panic!("the coordinator never summed both nodes: {last:?}");
    };
    assert_eq!(cluster["complete"], true, "{cluster}");
    assert_eq!(billed_row(&cluster, "alice"), alice, "{cluster}");
    assert_eq!(billed_row(&cluster, "bob"), bob, "{cluster}");
    assert_eq!(
        cluster["totals"]["requests"].as_u64(),
        Some(alice.requests + bob.requests)
    );
    let unauthorized = c.call_as(None, "GET", "/api/cluster/usage", None).await;
    assert_eq!(unauthorized.0, 401, "{}", unauthorized.1);
    let bad = c.call("GET", "/api/cluster/usage?by=team", None).await;
    assert_eq!(bad.0, 400, "{}", bad.1);

    // A node that stops answering is named, and the sum says it is partial (its heartbeat
    // is still fresh for a while, so the coordinator still asks it).
    let status = std::process::Command::new("kill")
        .args(["-STOP", &node_b.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let partial = eventually(Duration::from_secs(10), || async {
        let (status, body) = c.call("GET", "/api/cluster/usage?by=key", None).await;
        (status == 200 && body["complete"] == false).then_some(body)
    })
    .await;
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &node_b.pid().to_string()])
        .status();
    let partial = partial.expect("a stopped node was never reported");
    let failed = partial["nodes"]["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{partial}");
    assert_eq!(failed[0]["node"], "usage-b", "{partial}");
    assert_eq!(failed[0]["error"], "timed out", "{partial}");
    assert_eq!(billed_row(&partial, "alice"), alice_a, "{partial}");

    let samples = json!([
        sample("get", "/api/cluster/usage", (200, cluster)),
        sample("get", "/api/cluster/usage", (200, partial)),
        sample("get", "/api/cluster/usage", bad),
    ]);
    let (ok, output) = validate_against("../docs/coordinator-openapi.json", &samples).await;
    assert!(
        ok,
        "cluster usage answers do not match the document:\n{output}"
    );
}
