//! Leader lease and janitor: two real coordinators against one Redis.
//!
//! - One of them leads; killed, the other takes over within two lease TTLs.
//! - Fencing: the leader frozen with SIGSTOP past its TTL loses the lease to the other; resumed,
//!   it writes nothing (the janitor log in Redis records every janitor write with its
//!   generation and writer), and a janitor pass run with a stale generation is refused by the
//!   script itself.
//! - The janitor prunes a dead node's record and frees its cluster permits.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::coordinator::{Coordinator, MGMT_KEY, config, store};
use crate::support::{STATE_DEADLINE, eventually};
use switchyard_coordinator::config::Settings;
use switchyard_coordinator::janitor::{Janitor, log_key};
use switchyard_coordinator::leader::janitor_scope;
use switchyard_shared::config::Config;
use switchyard_store::RedisStore;
use switchyard_tests::redis_server::RedisServer;

const TTL_MS: u64 = 1500;

fn env(id: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("SWITCHYARD_COORDINATOR_ID", id),
        ("SWITCHYARD_COORDINATOR_LEASE_TTL_MS", "1500"),
        ("SWITCHYARD_COORDINATOR_JANITOR_INTERVAL_MS", "200"),
    ]
}

async fn is_leader(co: &Coordinator) -> bool {
    let (status, body) = co.call("GET", "/api/cluster/health", None).await;
    status == 200 && body["coordinator"]["leader"] == true
}

async fn leader_generation(co: &Coordinator) -> Option<u64> {
    let (_, body) = co.call("GET", "/api/cluster/health", None).await;
    body["coordinator"]["generation"].as_u64()
}

async fn janitor_log(s: &RedisStore) -> Vec<String> {
    let key = log_key(s);
    s.run("test_log", |mut con| async move {
        redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut con)
            .await
    })
    .await
    .unwrap()
}

/// The `at=` second of a janitor log line.
fn pass_second(line: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("at="))
        .and_then(|v| v.parse().ok())
}

fn by(log: &[String], id: &str) -> usize {
    log.iter()
        .filter(|l| l.contains(&format!(" by={id} ")))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_replica_takes_over_within_two_ttls() {
    let redis = RedisServer::start().unwrap();
    let cfg = config(&redis.url(), 1, 2, "");
    let a = Coordinator::start(&cfg, &env("coord-a"));
    let b = Coordinator::start(&cfg, &env("coord-b"));
    let first = eventually(Duration::from_secs(10), || async {
        match (is_leader(&a).await, is_leader(&b).await) {
            (true, false) => Some('a'),
            (false, true) => Some('b'),
            _ => None,
        }
    })
    .await
    .expect("exactly one leader");
    let (mut leader, follower) = if first == 'a' { (a, b) } else { (b, a) };
    // The health document names the leader for every replica.
    let (_, doc) = follower.call("GET", "/api/cluster/health", None).await;
    assert!(
        doc["coordinator"]["leaderId"]
            .as_str()
            .unwrap()
            .starts_with("coord-")
    );

    leader.kill();
    let killed = Instant::now();
    let took = eventually(Duration::from_secs(10), || async {
        is_leader(&follower).await.then(|| killed.elapsed())
    })
    .await
    .expect("the follower takes over");
    assert!(
        took < Duration::from_millis(2 * TTL_MS),
        "takeover took {took:?}, over two lease TTLs"
    );
    assert!(is_leader(&follower).await, "and keeps leading");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_resumes_without_writing() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let cfg = config(&redis.url(), 1, 2, "");
    let a = Coordinator::start(&cfg, &env("coord-a"));
    eventually(Duration::from_secs(10), || async {
        is_leader(&a).await.then_some(())
    })
    .await
    .expect("a leads");
    let gen_a = leader_generation(&a).await.unwrap();
    let b = Coordinator::start(&cfg, &env("coord-b"));
    // a writes janitor passes under its generation.
    eventually(STATE_DEADLINE, || async {
        (by(&janitor_log(&s).await, "coord-a") > 0).then_some(())
    })
    .await
    .expect("the leader's janitor runs");
    assert!(!is_leader(&b).await);

    a.signal("-STOP");
    let gen_b = eventually(Duration::from_secs(10), || async {
        if is_leader(&b).await {
            leader_generation(&b).await
        } else {
            None
        }
    })
    .await
    .expect("b takes over while a is frozen");
    assert!(gen_b > gen_a);
    // a stays frozen well past its TTL, then resumes with its timers overdue. The frozen time
    // is the scenario, not a wait for state.
    tokio::time::sleep(Duration::from_millis(TTL_MS)).await;
    let before = by(&janitor_log(&s).await, "coord-a");
    let resumed_at = crate::support::coordinator::epoch_ms() / 1000;
    a.signal("-CONT");
    // Its overdue timers fire at once; wait until a has noticed the lost lease and b has run
    // a janitor pass in a later second (the log stamps passes with Redis's clock, in whole
    // seconds), so a write by a would be in the log by now.
    let noticed = eventually(STATE_DEADLINE, || async {
        a.log().contains("leadership lost")
            && janitor_log(&s).await.iter().any(|l| {
                l.contains(" by=coord-b ") && pass_second(l).is_some_and(|at| at > resumed_at)
            })
    })
    .await;
    assert!(
        noticed,
        "a noticed the lost lease and b ran its janitor:\n{}",
        a.log()
    );

    let log = janitor_log(&s).await;
    assert!(
        by(&log, "coord-a") <= before,
        "the resumed old leader wrote janitor passes: {log:#?}"
    );
    for line in log.iter().filter(|l| l.contains(&format!("gen={gen_b} "))) {
        assert!(line.contains(" by=coord-b "), "{line}");
    }
    assert!(
        by(&log, "coord-b") > 0,
        "the new leader's janitor runs: {log:#?}"
    );
    assert!(!is_leader(&a).await, "a must not believe it leads");
    assert!(is_leader(&b).await);
    let log_a = a.log();
    assert!(log_a.contains("leadership lost"), "{log_a}");

    // The script is the backstop: a pass under a's old generation is refused and writes nothing.
    let settings =
        Settings::from_config(Config::from_toml_str(&cfg).unwrap(), None, &|k| match k {
            "SWITCHYARD_MANAGEMENT_KEY" => Some(MGMT_KEY.to_owned()),
            "SWITCHYARD_COORDINATOR_ID" => Some("coord-stale".to_owned()),
            _ => None,
        })
        .unwrap();
    let stale = Arc::new(switchyard_coordinator::service::Coordinator::new(settings).unwrap());
    let report = Janitor::default()
        .pass(&janitor_scope(&stale), gen_a)
        .await
        .unwrap();
    assert!(report.fenced, "{report:?}");
    assert_eq!(by(&janitor_log(&s).await, "coord-stale"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_janitor_prunes_dead_nodes_and_frees_their_permits() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let cfg = config(&redis.url(), 1, 2, "");
    // A node that died: heartbeat gone (short TTL), permits held until much later.
    crate::support::coordinator::heartbeat(&s, "ghost", "0.1.0", 0, 300).await;
    assert_eq!(
        s.permits_acquire("p0-c0", "ghost", 2, 4, 120_000)
            .await
            .unwrap(),
        2
    );
    crate::support::coordinator::heartbeat(&s, "alive", "0.1.0", 0, 120_000).await;
    let co = Coordinator::start(&cfg, &env("coord-j"));
    let doc = eventually(STATE_DEADLINE, || async {
        let doc = co.health().await;
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["id"] == "ghost" && n["state"] == "down")
            .then_some(doc)
    })
    .await
    .expect("the dead node shows as down first");
    assert_eq!(doc["summary"]["nodes"]["down"], 1);
    // node_ttl_ms = 3000 in the test config: pruned some seconds later.
    let pruned = eventually(Duration::from_secs(12), || async {
        let holders = s.permits_read("p0-c0").await.unwrap();
        let log = janitor_log(&s).await;
        (holders.is_empty() && log.iter().any(|l| l.contains("pruned=1"))).then_some(log)
    })
    .await;
    assert!(
        pruned.is_some(),
        "ghost not pruned: {:?}",
        janitor_log(&s).await
    );
    let nodes = switchyard_coordinator::read::read_nodes(&s).await.unwrap();
    let ids: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["alive"]);
}
