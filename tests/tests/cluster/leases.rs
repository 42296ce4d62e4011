//! Exclusive session leases across three real nodes sharing one real Redis: an invariant
//! checker over concurrent acquire/renew/release/inference with pauses longer than the TTL,
//! and fail-closed behaviour (503) while Redis is down.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::eventually;
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_server::RedisServer;

const AGENT_KEY: &str = "sy-cluster-lease-agent-9f3e";
const UP_KEY: &str = "sk-up-cluster-lease-44444444";
const TTL_MS: u64 = 1_000;
const TOTAL_OPS: usize = 200;
const OWNERS: usize = 6;

fn config(mock: &MockHandle, redis_url: &str) -> String {
    format!(
        r#"
[server]
workers = 1

[auth]
require_api_key = true
management_key_env = ""

[[api_keys]]
id = "agents"
key_env = "AGENT_KEY"
scopes = ["lease:exclusive"]
allowed_connections = ["c1", "c2", "c3"]

[[providers]]
id = "p"
format = "openai"
base_url = "{base}/v1"
models = ["m"]

[[connections]]
id = "c1"
provider = "p"
api_key_env = "UP_KEY"
priority = 1

[[connections]]
id = "c2"
provider = "p"
api_key_env = "UP_KEY"
priority = 2

[[connections]]
id = "c3"
provider = "p"
api_key_env = "UP_KEY"
priority = 3

[cluster]
mode = "redis"
redis_url = "{redis_url}"
redis_timeout_ms = 300

[resilience.request_queue]
auto_enable_apikey_providers = false

[resilience.wait_for_cooldown]
enabled = false

[resilience.session_leases]
ttl_ms = {TTL_MS}
"#,
        base = mock.base_url()
    )
}

async fn start_nodes(config: &str, n: usize) -> Vec<NodeProcess> {
    let mut handles = Vec::new();
    for _ in 0..n {
        let config = config.to_owned();
        handles.push(tokio::task::spawn_blocking(move || {
            NodeProcess::start(&config, &[("AGENT_KEY", AGENT_KEY), ("UP_KEY", UP_KEY)])
        }));
    }
    let mut nodes = Vec::new();
    for h in handles {
        nodes.push(h.await.unwrap().unwrap());
    }
    nodes
}

fn owner(i: usize) -> String {
    let body: String = format!("{i:02}").repeat(22);
    format!("vlo_{}", &body[..43])
}

/// A small deterministic PRNG (xorshift), so each task's pauses are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

#[derive(Debug, Clone)]
struct Op {
    owner: usize,
    /// One acquire and what the owner did under it (generations repeat across connections,
    /// so a lease is told apart by its episode, not by owner and generation).
    episode: usize,
    kind: &'static str,
    generation: u64,
    /// The connection that served a successful inference.
    connection: Option<String>,
    status: u16,
    code: String,
    start: Instant,
    end: Instant,
}

struct Env {
    http: reqwest::Client,
    urls: Vec<String>,
    ops: Mutex<Vec<Op>>,
    count: AtomicUsize,
    episodes: AtomicUsize,
}

impl Env {
    async fn call(
        &self,
        node: usize,
        path: &str,
        owner_i: usize,
        generation: Option<u64>,
        body: Value,
    ) -> (u16, Value, Option<String>, Instant, Instant) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.urls[node]))
            .bearer_auth(AGENT_KEY)
            .header("content-type", "application/json")
            .header("x-switchyard-lease-owner", owner(owner_i))
            .body(body.to_string());
        if let Some(g) = generation {
            req = req.header("x-switchyard-lease-generation", g.to_string());
        }
        let start = Instant::now();
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let conn = resp
            .headers()
            .get("x-switchyard-connection")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let json = resp.json::<Value>().await.unwrap_or(Value::Null);
        (status, json, conn, start, Instant::now())
    }

    fn record(&self, op: Op) {
        self.ops.lock().unwrap().push(op);
    }
}

async fn owner_task(env: Arc<Env>, i: usize) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.count.fetch_add(1, Ordering::AcqRel) < TOTAL_OPS && Instant::now() < deadline {
        let node = rng.next(3) as usize;
        let (status, json, _, start, end) = env
            .call(
                node,
                "/api/v1/session-leases",
                i,
                None,
                json!({"action": "acquire", "model": "p/m"}),
            )
            .await;
        let generation = json["generation"].as_u64().unwrap_or(0);
        let episode = env.episodes.fetch_add(1, Ordering::AcqRel);
        env.record(Op {
            owner: i,
            episode,
            kind: "acquire",
            generation,
            connection: None,
            status,
            code: json["error"]["code"].as_str().unwrap_or("").to_owned(),
            start,
            end,
        });
        if status != 200 {
            assert!(status == 429, "acquire: {status} {json}");
            // A random back-off before the next try: part of the scenario's traffic.
            tokio::time::sleep(Duration::from_millis(100 + rng.next(400))).await;
            continue;
        }
        // Several uses of the lease, with pauses of which some outlive the TTL.
        for _ in 0..(1 + rng.next(3)) {
            tokio::time::sleep(Duration::from_millis(rng.next(1_600))).await;
            env.count.fetch_add(1, Ordering::AcqRel);
            let node = rng.next(3) as usize;
            let body = json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]});
            let (status, json, conn, start, end) = env
                .call(node, "/v1/chat/completions", i, Some(generation), body)
                .await;
            env.record(Op {
                owner: i,
                episode,
                kind: "chat",
                generation,
                connection: conn,
                status,
                code: json["error"]["code"].as_str().unwrap_or("").to_owned(),
                start,
                end,
            });
            assert!(status == 200 || status == 409, "chat: {status} {json}");
            if status == 409 {
                break;
            }
            env.count.fetch_add(1, Ordering::AcqRel);
            let node = rng.next(3) as usize;
            let (status, json, _, start, end) = env
                .call(
                    node,
                    "/api/v1/session-leases",
                    i,
                    None,
                    json!({"action": "renew", "generation": generation}),
                )
                .await;
            env.record(Op {
                owner: i,
                episode,
                kind: "renew",
                generation,
                connection: None,
                status,
                code: json["error"]["code"].as_str().unwrap_or("").to_owned(),
                start,
                end,
            });
            assert!(status == 200 || status == 409, "renew: {status} {json}");
        }
        env.count.fetch_add(1, Ordering::AcqRel);
        let node = rng.next(3) as usize;
        let (status, json, _, _, _) = env
            .call(
                node,
                "/api/v1/session-leases",
                i,
                None,
                json!({"action": "release", "generation": generation}),
            )
            .await;
        assert!(status == 200 || status == 409, "release: {status} {json}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_never_let_two_owners_hold_one_connection() {
    let mut redis = RedisServer::start().unwrap();
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let nodes = start_nodes(&config(&mock, &redis.url()), 3).await;
    let env = Arc::new(Env {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(15))
            .build()
            .unwrap(),
        urls: nodes.iter().map(NodeProcess::client_url).collect(),
        ops: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        episodes: AtomicUsize::new(0),
    });
    let tasks: Vec<_> = (0..OWNERS)
        .map(|i| tokio::spawn(owner_task(env.clone(), i)))
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let ops = env.ops.lock().unwrap().clone();
    let chats_ok: Vec<&Op> = ops
        .iter()
        .filter(|o| o.kind == "chat" && o.status == 200)
        .collect();
    let stale = ops
        .iter()
        .filter(|o| o.status == 409 && o.code == "LEASE_FENCE_STALE")
        .count();
    assert!(
        chats_ok.len() >= 5,
        "too few leased requests went through: {}",
        chats_ok.len()
    );
    assert!(
        stale >= 1,
        "the pauses past the TTL never produced a stale holder"
    );

    // Every upstream request was a leased request the node answered 200: nothing refused by
    // the fence reached the mock.
    assert_eq!(mock.stats().requests_total, chats_ok.len() as u64);

    // Which connection each lease (episode) was on, from its served requests; one generation
    // of one connection belongs to one owner.
    let mut lease_conn: HashMap<usize, String> = HashMap::new();
    let mut holder: HashMap<(String, u64), usize> = HashMap::new();
    for o in &chats_ok {
        let conn = o
            .connection
            .clone()
            .expect("served requests name their connection");
        if let Some(prev) = lease_conn.insert(o.episode, conn.clone()) {
            assert_eq!(prev, conn, "one lease moved between connections");
        }
        let h = holder
            .entry((conn.clone(), o.generation))
            .or_insert(o.owner);
        assert_eq!(
            *h, o.owner,
            "two owners held generation {} of {conn}",
            o.generation
        );
    }
    // Fencing in time: everything a lease did successfully began before any newer generation
    // of its connection was granted (a newer grant means the older lease had ended).
    let acquired: Vec<(&Op, &String)> = ops
        .iter()
        .filter(|o| o.kind == "acquire" && o.status == 200)
        .filter_map(|o| lease_conn.get(&o.episode).map(|c| (o, c)))
        .collect();
    let successes = ops
        .iter()
        .filter(|o| (o.kind == "chat" || o.kind == "renew") && o.status == 200);
    let mut checked = 0;
    for s in successes {
        let Some(conn) = lease_conn.get(&s.episode) else {
            continue;
        };
        for (a, a_conn) in &acquired {
            if *a_conn == conn && a.generation > s.generation {
                checked += 1;
                assert!(
                    s.start < a.end,
                    "owner {} used generation {} of {conn} after generation {} was granted",
                    s.owner,
                    s.generation,
                    a.generation
                );
            }
        }
    }
    assert!(checked > 0, "the checker compared nothing");
    // Per connection, generations rise in grant order.
    for (a, ca) in &acquired {
        for (b, cb) in &acquired {
            if ca == cb && a.end < b.start && a.generation != b.generation {
                assert!(a.generation < b.generation, "generation went back on {ca}");
            }
        }
    }
    eprintln!(
        "{} operations: {} leased requests served, {} refused as stale, {} ordering checks",
        ops.len(),
        chats_ok.len(),
        stale,
        checked
    );

    // Redis goes away: leased requests and lease operations fail closed with 503.
    let (status, json, _, _, _) = env
        .call(
            0,
            "/api/v1/session-leases",
            0,
            None,
            json!({"action": "acquire", "model": "p/m"}),
        )
        .await;
    assert_eq!(status, 200, "{json}");
    let generation = json["generation"].as_u64().unwrap();
    redis.kill();
    let before = mock.stats().requests_total;
    for node in 0..3 {
        let body = json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]});
        let (status, json, _, _, _) = env
            .call(node, "/v1/chat/completions", 0, Some(generation), body)
            .await;
        assert_eq!(status, 503, "{json}");
        assert_eq!(json["error"]["code"], "LEASE_SERVICE_UNAVAILABLE");
        let (status, json, _, _, _) = env
            .call(
                node,
                "/api/v1/session-leases",
                1,
                None,
                json!({"action": "acquire", "model": "p/m"}),
            )
            .await;
        assert_eq!(status, 503, "{json}");
        assert_eq!(json["error"]["code"], "LEASE_SERVICE_UNAVAILABLE");
    }
    assert_eq!(
        mock.stats().requests_total,
        before,
        "a leased request passed without Redis"
    );
    // Back again: leases work again (the data is gone, so a fresh acquire).
    redis.restart().unwrap();
    let back = eventually(Duration::from_secs(20), || async {
        let (status, _, _, _, _) = env
            .call(
                1,
                "/api/v1/session-leases",
                2,
                None,
                json!({"action": "acquire", "model": "p/m"}),
            )
            .await;
        status == 200
    })
    .await;
    assert!(back, "leases did not come back after Redis did");
    drop(nodes);
}

/// The fence at dispatch time, black-box in redis mode: a leased request queues for c1's only
/// permit behind a slow one; meanwhile its lease is revoked in Redis (the lease key deleted,
/// as an operator revoke does). When the permit comes, the request is refused (409
/// `LEASE_FENCE_STALE`) and the provider never sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_revoked_in_redis_while_its_request_queues_is_not_dispatched() {
    let redis = RedisServer::start().expect("redis");
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let config = config(&mock, &redis.url())
        .replace("priority = 1\n", "priority = 1\nmax_concurrent = 1\n")
        .replace(&format!("ttl_ms = {TTL_MS}"), "ttl_ms = 60000");
    let nodes = start_nodes(&config, 1).await;
    let env = Arc::new(Env {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
        urls: nodes.iter().map(|n| n.client_url()).collect(),
        ops: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        episodes: AtomicUsize::new(0),
    });
    let acquire = json!({"action": "acquire", "model": "p/m"});
    let (status, json, _, _, _) = env
        .call(0, "/api/v1/session-leases", 0, None, acquire)
        .await;
    assert_eq!(status, 200, "{json}");
    let generation = json["generation"].as_u64().unwrap();
    let slow: switchyard_tests::mock_upstream::FaultSpec = serde_json::from_value(json!({
        "match": {"api_key": UP_KEY},
        "latency_before_headers_ms": 2_000,
        "times": 1
    }))
    .unwrap();
    mock.script(slow).unwrap();
    let chat = |env: Arc<Env>| async move {
        let body = json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]});
        env.call(0, "/v1/chat/completions", 0, Some(generation), body)
            .await
    };
    let first = tokio::spawn(chat(env.clone()));
    assert!(
        eventually(Duration::from_secs(10), || async {
            mock.stats().requests_total == 1
        })
        .await,
        "the first request never reached c1"
    );
    // The second request passes the fence before permits, then queues for c1's permit.
    let admin = nodes[0].admin;
    let fenced = move || {
        switchyard_tests::cluster::metric(
            &switchyard_tests::cluster::metrics_text(admin),
            "switchyard_lease_operations_total{op=\"fence\",result=\"ok\"}",
        )
        .unwrap_or(0.0)
    };
    let before = tokio::task::spawn_blocking(fenced).await.unwrap();
    let second = tokio::spawn(chat(env.clone()));
    assert!(
        eventually(Duration::from_secs(10), || async move {
            tokio::task::spawn_blocking(fenced).await.unwrap() > before
        })
        .await,
        "the second request was never fenced"
    );
    // Revoked in Redis while it waits.
    let out = switchyard_tests::redis_topology::cli(redis.port, &["DEL", "switchyard:lease:{c1}"])
        .unwrap();
    assert_eq!(
        out.trim(),
        "1",
        "the lease key was not where the store keeps it"
    );

    let (status, json, conn, _, _) = first.await.unwrap();
    assert_eq!((status, conn.as_deref()), (200, Some("c1")), "{json}");
    let (status, json, _, _, _) = second.await.unwrap();
    assert_eq!(
        (status, json["error"]["code"].as_str()),
        (409, Some("LEASE_FENCE_STALE")),
        "{json}\n{}",
        nodes[0].log()
    );
    assert_eq!(
        mock.stats().requests_total,
        1,
        "the revoked lease's request reached the provider"
    );
    drop(nodes);
}

/// In redis mode the move is the `lease_move_v1` script: a leased request whose connection
/// answers 429 goes on on the next free connection, and Redis holds the lease there with the
/// same generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_lease_moves_in_redis_with_its_generation() {
    let redis = RedisServer::start().expect("redis");
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let config =
        config(&mock, &redis.url()).replace(&format!("ttl_ms = {TTL_MS}"), "ttl_ms = 60000");
    let nodes = start_nodes(&config, 1).await;
    let env = Env {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
        urls: nodes.iter().map(|n| n.client_url()).collect(),
        ops: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        episodes: AtomicUsize::new(0),
    };
    let acquire = json!({"action": "acquire", "model": "p/m"});
    let (status, json, _, _, _) = env
        .call(0, "/api/v1/session-leases", 0, None, acquire)
        .await;
    assert_eq!(status, 200, "{json}");
    let generation = json["generation"].as_u64().unwrap();
    let lease_gen = |conn: &str| {
        switchyard_tests::redis_topology::cli(
            redis.port,
            &["HGET", &format!("switchyard:lease:{{{conn}}}"), "gen"],
        )
        .unwrap()
        .trim()
        .to_owned()
    };
    assert_eq!(lease_gen("c1"), generation.to_string());

    let limited = switchyard_tests::mock_upstream::FaultSpec::status(429)
        .for_key(UP_KEY)
        .header("Retry-After", "30")
        .times(1);
    mock.script(limited).unwrap();
    let chat = json!({"model": "p/m", "messages": [{"role": "user", "content": "hi"}]});
    let (status, json, conn, _, _) = env
        .call(0, "/v1/chat/completions", 0, Some(generation), chat.clone())
        .await;
    assert_eq!(
        (status, conn.as_deref()),
        (200, Some("c2")),
        "{json}\n{}",
        nodes[0].log()
    );
    assert_eq!(
        lease_gen("c1"),
        "",
        "the old connection still holds the lease"
    );
    assert_eq!(lease_gen("c2"), generation.to_string());
    // The next request finds the lease on c2 under the same generation.
    let (status, json, conn, _, _) = env
        .call(0, "/v1/chat/completions", 0, Some(generation), chat)
        .await;
    assert_eq!((status, conn.as_deref()), (200, Some("c2")), "{json}");
    drop(nodes);
}
