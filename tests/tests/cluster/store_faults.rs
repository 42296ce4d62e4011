//! Redis answers, but refuses: writes with `OOM` at `maxmemory` with `noeviction`, `MISCONF`
//! after a failed background save (which refuses `PING` too) and `READONLY` from a master
//! demoted to a replica, while reads still work, so a node cannot tell from a ping; or every
//! command with `BUSY` (a script past its limit) and `LOADING` (a restart reading its
//! dataset). Requests keep being served, an operator action is never reported done unless
//! Redis has it (503 `cluster_store_unavailable` naming Redis's reply otherwise, with nothing
//! changed here and nothing queued), and once Redis heals the nodes and Redis agree again
//! within a second.
//!
//! It used to answer 200 `{"cleared":1}` after a passing `PING` while the clear never reached
//! Redis (dropped by the writer behind writes that kept failing, or refused outright), and the
//! node adopted the cooldown again on its next resync.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::{STATE_DEADLINE, eventually, wait_synced};
use crate::sync::{body, chat, client, key_env, store};
use serde_json::{Value, json};
use switchyard_store::RedisStore;
use switchyard_tests::cluster::{MGMT_KEY, metric, metrics_text, start_node};
use switchyard_tests::harness::NodeProcess;
use switchyard_tests::mock_upstream::{FaultSpec, MockConfig, MockHandle, MockUpstream};
use switchyard_tests::redis_server::RedisServer;
use switchyard_tests::redis_topology::cli;

/// How soon after a heal the nodes and Redis must agree again.
const HEALED_WITHIN: Duration = Duration::from_secs(1);
const CONNS: [&str; 3] = ["k0", "k1", "k2"];

/// `(status, body)` of an admin call with the management key.
async fn admin(
    http: &reqwest::Client,
    method: reqwest::Method,
    node: &NodeProcess,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let resp = http
        .request(method, format!("{}{path}", node.admin_url()))
        .header("authorization", format!("Bearer {MGMT_KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn clear(http: &reqwest::Client, node: &NodeProcess, conn: &str) -> (u16, Value) {
    admin(
        http,
        reqwest::Method::POST,
        node,
        "/api/resilience/cooldowns",
        json!({"connectionIds": [conn]}),
    )
    .await
}

/// The connections cooling on `node`, by id.
async fn cooling_on(http: &reqwest::Client, node: &NodeProcess) -> Vec<String> {
    let (status, reply) = admin(
        http,
        reqwest::Method::GET,
        node,
        "/api/resilience/cooldowns",
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let mut ids: Vec<String> = reply["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["cooldownRemainingMs"].as_u64().unwrap_or(0) > 0)
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// The connections cooling in Redis, by id.
async fn cooling_in(shared: &RedisStore) -> Vec<String> {
    shared
        .read_connections(&CONNS)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.remaining_ms > 0)
        .map(|r| r.conn)
        .collect()
}

/// Whether every node's cooling set is Redis's.
async fn agree(http: &reqwest::Client, shared: &RedisStore, nodes: &[&NodeProcess]) -> bool {
    let want = cooling_in(shared).await;
    for node in nodes {
        if cooling_on(http, node).await != want {
            return false;
        }
    }
    true
}

async fn replay_depth(admin: SocketAddr) -> f64 {
    tokio::task::spawn_blocking(move || {
        metric(
            &metrics_text(admin),
            "switchyard_cluster_replay_queue_depth",
        )
        .unwrap_or(-1.0)
    })
    .await
    .unwrap()
}

/// A 429 with `Retry-After: 30` for `key`, once, seen through `node`; the request itself is
/// still served (another connection answers).
async fn rate_limit(http: &reqwest::Client, mock: &MockHandle, node: &NodeProcess, key: &str) {
    mock.script(
        FaultSpec::status(429)
            .for_key(key)
            .header("Retry-After", "30")
            .times(1),
    )
    .unwrap();
    let (status, reply) = chat(http, node).await;
    assert_eq!(status, 200, "a request was not served: {reply}");
}

/// k0 meets a 429 on `a` and cools everywhere: in Redis and on both nodes.
async fn k0_cools_everywhere(
    http: &reqwest::Client,
    mock: &MockHandle,
    shared: &RedisStore,
    [a, b]: [&NodeProcess; 2],
) {
    rate_limit(http, mock, a, "sk-0").await;
    assert!(
        eventually(STATE_DEADLINE, || async {
            cooling_in(shared).await == ["k0"] && agree(http, shared, &[a, b]).await
        })
        .await,
        "the 429 did not reach Redis and b"
    );
}

async fn start(mock: &MockHandle, redis_url: String) -> Vec<NodeProcess> {
    let body = body(mock, CONNS.len());
    let env = key_env(CONNS.len());
    let nodes = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        vec![
            start_node("node-0", &redis_url, &body, &env).unwrap(),
            start_node("node-1", &redis_url, &body, &env).unwrap(),
        ]
    })
    .await
    .unwrap();
    wait_synced(&[&nodes[0], &nodes[1]]).await;
    nodes
}

/// Runs `redis-cli` against `port` off the async runtime.
async fn redis_cli(port: u16, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(port, &args).unwrap()
    })
    .await
    .unwrap()
}

async fn used_memory(port: u16) -> u64 {
    redis_cli(port, &["INFO", "memory"])
        .await
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// Fills Redis under a small `maxmemory` with `noeviction` until a write answers `OOM`, then
/// holds it there: the limit goes a little under what the data uses, so a client's buffers
/// freed later cannot bring it back under.
async fn fill_until_oom(port: u16) {
    let limit = (used_memory(port).await + 2 * 1024 * 1024).to_string();
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "maxmemory-policy", "noeviction"])
            .await
            .trim(),
        "OK"
    );
    assert_eq!(
        redis_cli(port, &["CONFIG", "SET", "maxmemory", &limit])
            .await
            .trim(),
        "OK"
    );
    let value = "x".repeat(64 * 1024);
    for i in 0..200 {
        let out = redis_cli(port, &["SET", &format!("fill:{i}"), &value]).await;
        if out.starts_with("OOM") {
            let hold = (used_memory(port).await - 512 * 1024).to_string();
            let set = redis_cli(port, &["CONFIG", "SET", "maxmemory", &hold]).await;
            assert_eq!(set.trim(), "OK");
            let small = redis_cli(port, &["SET", "probe", "x"]).await;
            assert!(small.starts_with("OOM"), "{small}");
            return;
        }
    }
    panic!("redis never answered OOM");
}

/// A way Redis refuses writes while `PING` and reads still pass.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// `maxmemory` reached with `noeviction`.
    Oom,
    /// A background save failed with `stop-writes-on-bgsave-error yes` (the default).
    Misconf,
}

impl Refusal {
    /// The reply's first word, as the 503 names it.
    fn code(self) -> &'static str {
        match self {
            Self::Oom => "OOM",
            Self::Misconf => "MISCONF",
        }
    }

    fn redis(self) -> RedisServer {
        match self {
            Self::Oom => RedisServer::start().unwrap(),
            // Redis 7 refuses `CONFIG SET dir` unless protected configs may be changed.
            Self::Misconf => {
                RedisServer::start_with(&["--enable-protected-configs", "yes"]).unwrap()
            }
        }
    }

    async fn refuse(self, port: u16) {
        match self {
            Self::Oom => fill_until_oom(port).await,
            Self::Misconf => fail_a_save(port).await,
        }
    }

    async fn heal(self, port: u16) {
        let (name, value) = match self {
            Self::Oom => ("maxmemory", "0"),
            Self::Misconf => ("stop-writes-on-bgsave-error", "no"),
        };
        let heal = redis_cli(port, &["CONFIG", "SET", name, value]).await;
        assert_eq!(heal.trim(), "OK");
    }
}

/// Makes a background save fail (its directory cannot take a file, even for root), so every
/// write answers `MISCONF` until the setting is lifted.
async fn fail_a_save(port: u16) {
    // Writes are refused only while snapshots are configured.
    let save = redis_cli(port, &["CONFIG", "SET", "save", "3600 1"]).await;
    assert_eq!(save.trim(), "OK", "{save}");
    let dir = redis_cli(port, &["CONFIG", "SET", "dir", "/proc"]).await;
    assert_eq!(dir.trim(), "OK", "{dir}");
    let started = redis_cli(port, &["BGSAVE"]).await;
    assert!(started.contains("saving started"), "{started}");
    assert!(
        eventually(STATE_DEADLINE, || async {
            redis_cli(port, &["SET", "probe", "x"])
                .await
                .starts_with("MISCONF")
        })
        .await,
        "writes never answered MISCONF"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_clear_under_oom_is_never_reported_done_unless_redis_has_it() {
    refused_writes_scenario(Refusal::Oom).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_clear_under_misconf_is_never_reported_done_unless_redis_has_it() {
    refused_writes_scenario(Refusal::Misconf).await;
}

/// Writes refused, reads served: the operator's answer is what Redis did, requests keep being
/// served, and the nodes and Redis agree within a second of the heal.
async fn refused_writes_scenario(refusal: Refusal) {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let redis = refusal.redis();
    let nodes = start(&mock, redis.url()).await;
    let [a, b] = [&nodes[0], &nodes[1]];
    let http = client();
    let shared = store(&redis.url());

    // k0 cools everywhere, in Redis too.
    k0_cools_everywhere(&http, &mock, &shared, [a, b]).await;

    // Writes answer OOM or MISCONF; reads still work (and `PING` too under OOM: a master
    // that cannot persist refuses `PING` as well, so that monitoring notices).
    refusal.refuse(redis.port).await;
    let read = redis_cli(redis.port, &["EXISTS", "probe"]).await;
    assert!(read.trim() == "0" || read.trim() == "1", "{read}");
    let ping = redis_cli(redis.port, &["PING"]).await;
    match refusal {
        Refusal::Oom => assert_eq!(ping.trim(), "PONG"),
        Refusal::Misconf => assert!(ping.starts_with("MISCONF"), "{ping}"),
    }
    // a meets a 429 on k1 that it cannot write: its writer holds it for replay.
    rate_limit(&http, &mock, a, "sk-1").await;
    assert!(
        eventually(STATE_DEADLINE, || async {
            replay_depth(a.admin).await > 0.0
        })
        .await,
        "the refused write was not held for replay; log:\n{}",
        a.log()
    );

    // The operator clears k0 on a. Whatever the answer, it is what Redis did.
    let (status, reply) = clear(&http, a, "k0").await;
    let in_redis = cooling_in(&shared).await;
    match status {
        200 => assert!(
            !in_redis.contains(&"k0".to_owned()),
            "answered {reply} but Redis keeps the cooldown of k0"
        ),
        503 => {
            assert_eq!(
                reply["error"]["code"], "cluster_store_unavailable",
                "{reply}"
            );
            assert_eq!(reply["error"]["storeError"], refusal.code(), "{reply}");
            assert!(in_redis.contains(&"k0".to_owned()), "{in_redis:?}");
            assert!(cooling_on(&http, a).await.contains(&"k0".to_owned()));
        }
        other => panic!("unexpected answer {other}: {reply}"),
    }
    // Requests keep being served on both nodes.
    for node in [a, b] {
        let (status, reply) = chat(&http, node).await;
        assert_eq!(status, 200, "{reply}");
    }

    // Heal: writes are taken again. Within a second the nodes and Redis agree again, k1's
    // cooldown included (replayed from a's queue), and what the operator was told still holds.
    refusal.heal(redis.port).await;
    assert!(
        eventually(HEALED_WITHIN, || async {
            cooling_in(&shared).await.contains(&"k1".to_owned())
                && agree(&http, &shared, &[a, b]).await
        })
        .await,
        "not in agreement {HEALED_WITHIN:?} after the heal: redis {:?}, a {:?}, b {:?}",
        cooling_in(&shared).await,
        cooling_on(&http, a).await,
        cooling_on(&http, b).await
    );
    assert_eq!(
        cooling_in(&shared).await.contains(&"k0".to_owned()),
        status == 503,
        "the operator was told {status} {reply}"
    );
    drop(redis);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_on_a_demoted_master_answer_503_readonly_and_change_nothing() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let mut master = RedisServer::start().unwrap();
    let mut replica = RedisServer::start_replica_of(master.port, &[]).unwrap();
    let nodes = start(&mock, master.url()).await;
    let [a, b] = [&nodes[0], &nodes[1]];
    let http = client();
    let shared = store(&master.url());

    k0_cools_everywhere(&http, &mock, &shared, [a, b]).await;

    // A failover the nodes were not told of: the replica takes over and the old master
    // follows it, so the nodes' server answers reads and `PING`, and `READONLY` to writes.
    let replica_port = replica.port.to_string();
    let on_replica = store(&replica.url());
    assert!(
        eventually(STATE_DEADLINE, || async {
            cooling_in(&on_replica).await == ["k0"]
        })
        .await,
        "the replica did not get the cooldown"
    );
    replica.promote().unwrap();
    let demote = redis_cli(master.port, &["REPLICAOF", "127.0.0.1", &replica_port]).await;
    assert_eq!(demote.trim(), "OK");
    assert!(
        eventually(STATE_DEADLINE, || async {
            redis_cli(master.port, &["INFO", "replication"])
                .await
                .contains("master_link_status:up")
                && redis_cli(master.port, &["SET", "probe", "x"])
                    .await
                    .starts_with("READONLY")
        })
        .await,
        "the old master did not become a read-only replica"
    );

    // Every operator action that must write cluster state is refused, naming READONLY. (One
    // with nothing to write, a reinstatement of a connection that is not terminal, is not.)
    let actions = [
        (
            reqwest::Method::POST,
            "/api/resilience/cooldowns",
            json!({"connectionIds": ["k0"]}),
        ),
        (
            reqwest::Method::POST,
            "/api/resilience/cooldowns",
            json!({"all": true}),
        ),
        (
            reqwest::Method::POST,
            "/api/resilience/reset",
            json!({"provider": "p"}),
        ),
    ];
    for (method, path, body) in actions {
        let (status, reply) = admin(&http, method.clone(), a, path, body).await;
        assert_eq!(status, 503, "{method} {path}: {reply}");
        assert_eq!(
            reply["error"]["code"], "cluster_store_unavailable",
            "{reply}"
        );
        assert_eq!(reply["error"]["type"], "server_error", "{reply}");
        assert_eq!(reply["error"]["storeError"], "READONLY", "{reply}");
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains("READONLY"),
            "{reply}"
        );
    }
    // Nothing changed here, and requests keep being served.
    assert_eq!(cooling_on(&http, a).await, ["k0"]);
    for node in [a, b] {
        let (status, reply) = chat(&http, node).await;
        assert_eq!(status, 200, "{reply}");
    }

    // Heal: the old master is the master again. Nothing refused above is replayed (the
    // cooldown is still there everywhere), and the nodes and Redis agree within a second.
    let heal = redis_cli(master.port, &["REPLICAOF", "NO", "ONE"]).await;
    assert_eq!(heal.trim(), "OK");
    assert!(
        eventually(HEALED_WITHIN, || async {
            redis_cli(master.port, &["SET", "probe", "x"]).await.trim() == "OK"
                && agree(&http, &shared, &[a, b]).await
        })
        .await,
        "not in agreement after the heal"
    );
    assert!(
        eventually(STATE_DEADLINE, || async {
            replay_depth(a.admin).await == 0.0
        })
        .await,
        "a still holds writes for replay"
    );
    assert_eq!(
        cooling_in(&shared).await,
        ["k0"],
        "a refused clear was replayed"
    );
    // Now the clear is taken, and every node follows within a second.
    let (status, reply) = clear(&http, a, "k0").await;
    assert_eq!(status, 200, "{reply}");
    assert!(cooling_in(&shared).await.is_empty());
    assert!(
        eventually(HEALED_WITHIN, || async {
            agree(&http, &shared, &[a, b]).await
        })
        .await,
        "b did not follow the clear"
    );
    replica.kill();
    master.kill();
}

/// A script past `busy-reply-threshold` (`lua-time-limit`): Redis answers `BUSY` to every
/// other command, reads and `PING` included, until the script ends or `SCRIPT KILL` stops
/// it. Requests keep being served on local state, an operator action is refused (503, with
/// `BUSY`, or `UNAVAILABLE` once the node holds Redis for down) and changes nothing, and once
/// the script is killed the nodes and Redis agree again within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_while_a_script_runs_past_its_limit_answer_503_busy_and_change_nothing() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    let redis = RedisServer::start().unwrap();
    let nodes = start(&mock, redis.url()).await;
    let [a, b] = [&nodes[0], &nodes[1]];
    let http = client();
    let shared = store(&redis.url());

    k0_cools_everywhere(&http, &mock, &shared, [a, b]).await;

    // A read-only script that spins for at most 20 s (bounded even if the kill below fails).
    let threshold = redis_cli(
        redis.port,
        &["CONFIG", "SET", "busy-reply-threshold", "100"],
    )
    .await;
    assert_eq!(threshold.trim(), "OK");
    let port = redis.port;
    let script = tokio::task::spawn_blocking(move || {
        cli(
            port,
            &[
                "EVAL",
                "local t = redis.call('TIME') local s = tonumber(t[1]) \
                 while tonumber(redis.call('TIME')[1]) < s + 20 do end return 1",
                "0",
            ],
        )
    });
    assert!(
        eventually(STATE_DEADLINE, || async {
            redis_cli(port, &["PING"]).await.starts_with("BUSY")
        })
        .await,
        "Redis never answered BUSY"
    );

    let (status, reply) = clear(&http, a, "k0").await;
    assert_eq!(status, 503, "{reply}");
    assert_eq!(
        reply["error"]["code"], "cluster_store_unavailable",
        "{reply}"
    );
    assert_eq!(reply["error"]["type"], "server_error", "{reply}");
    let named = reply["error"]["storeError"].as_str().unwrap_or_default();
    assert!(
        named == "BUSY" || named == "UNAVAILABLE",
        "the 503 names {named:?}: {reply}"
    );
    eprintln!("the clear under BUSY: {status} {reply}");
    assert_eq!(cooling_on(&http, a).await, ["k0"], "a cleared locally");
    for node in [a, b] {
        let (status, reply) = chat(&http, node).await;
        assert_eq!(status, 200, "{reply}");
    }

    // Heal: the script is killed (it wrote nothing, so it may be).
    let killed = redis_cli(port, &["SCRIPT", "KILL"]).await;
    assert_eq!(killed.trim(), "OK", "{killed}");
    let ended = script.await.unwrap().unwrap_or_default();
    assert!(
        !ended.trim().ends_with('1'),
        "the script was not killed: {ended}"
    );
    assert!(
        eventually(HEALED_WITHIN, || async {
            cooling_in(&shared).await == ["k0"] && agree(&http, &shared, &[a, b]).await
        })
        .await,
        "not in agreement {HEALED_WITHIN:?} after the heal: redis {:?}, a {:?}, b {:?}",
        cooling_in(&shared).await,
        cooling_on(&http, a).await,
        cooling_on(&http, b).await
    );
    // The refused clear was not replayed, and the next one is taken.
    assert_eq!(cooling_in(&shared).await, ["k0"]);
    assert!(
        eventually(STATE_DEADLINE, || async {
            clear(&http, a, "k0").await.0 == 200
        })
        .await,
        "the clear is refused after the heal"
    );
    assert!(cooling_in(&shared).await.is_empty());
    drop(redis);
}

/// Redis restarted and still loading its dataset: `LOADING` to every command until the last
/// key is read (`key-load-delay` stretches that to seconds). Requests keep being served on
/// local state, an operator action is refused and changes nothing, and once the data is loaded
/// the nodes and Redis agree again within a second, on the state Redis saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_while_redis_loads_its_dataset_answer_503_and_change_nothing() {
    let mock = MockUpstream::start(MockConfig::default()).await.unwrap();
    // 20,000 keys at 100 µs each: about two seconds of LOADING after a restart, with clients
    // answered (`LOADING`) every KiB read rather than every 2 MiB.
    let mut redis = RedisServer::start_with(&[
        "--key-load-delay",
        "100",
        "--loading-process-events-interval-bytes",
        "1024",
    ])
    .unwrap();
    let nodes = start(&mock, redis.url()).await;
    let [a, b] = [&nodes[0], &nodes[1]];
    let http = client();
    let shared = store(&redis.url());

    k0_cools_everywhere(&http, &mock, &shared, [a, b]).await;
    let port = redis.port;
    let filled = redis_cli(
        port,
        &[
            "EVAL",
            "for i = 1, 20000 do redis.call('SET', 'filler:' .. i, 'x') end return 1",
            "0",
        ],
    )
    .await;
    assert_eq!(filled.trim(), "1", "{filled}");
    assert_eq!(redis_cli(port, &["SAVE"]).await.trim(), "OK");
    redis = tokio::task::spawn_blocking(move || {
        redis.restart().unwrap();
        redis
    })
    .await
    .unwrap();
    let ping = redis_cli(port, &["PING"]).await;
    assert!(
        ping.starts_with("LOADING"),
        "not loading after the restart: {ping}"
    );

    let (status, reply) = clear(&http, a, "k0").await;
    assert_eq!(status, 503, "{reply}");
    assert_eq!(
        reply["error"]["code"], "cluster_store_unavailable",
        "{reply}"
    );
    let named = reply["error"]["storeError"].as_str().unwrap_or_default();
    assert!(
        ["LOADING", "UNAVAILABLE", "RESET"].contains(&named),
        "the 503 names {named:?}: {reply}"
    );
    assert_eq!(cooling_on(&http, a).await, ["k0"], "a cleared locally");
    for node in [a, b] {
        let (status, reply) = chat(&http, node).await;
        assert_eq!(status, 200, "{reply}");
    }
    assert!(
        redis_cli(port, &["PING"]).await.starts_with("LOADING"),
        "the dataset loaded before the checks ended: the fault was not exercised throughout"
    );

    assert!(
        eventually(Duration::from_secs(30), || async {
            redis_cli(port, &["PING"]).await.trim() == "PONG"
        })
        .await,
        "Redis never finished loading"
    );
    // The test's own connection broke with the restart: reconnected before it judges.
    assert!(
        eventually(STATE_DEADLINE, || async {
            shared.read_connections(&CONNS).await.is_ok()
        })
        .await,
        "the test cannot read Redis after the load"
    );
    assert!(
        eventually(HEALED_WITHIN, || async {
            cooling_in(&shared).await == ["k0"] && agree(&http, &shared, &[a, b]).await
        })
        .await,
        "not in agreement {HEALED_WITHIN:?} after the load: redis {:?}, a {:?}, b {:?}",
        cooling_in(&shared).await,
        cooling_on(&http, a).await,
        cooling_on(&http, b).await
    );
    assert!(
        eventually(STATE_DEADLINE, || async {
            clear(&http, a, "k0").await.0 == 200
        })
        .await,
        "the clear is refused after the load"
    );
    assert!(cooling_in(&shared).await.is_empty());
    drop(redis);
}
