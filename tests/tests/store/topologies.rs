//! The state store on the Redis topologies production runs, with failover as a tested fault:
//! - Sentinel (one master, one replica, one sentinel): a store on a `redis+sentinel://` URL
//!   keeps serving after the master is killed, on the promoted replica, with the cooldowns and
//!   terminal states it wrote before (each written with `WAIT 1`).
//! - Redis Cluster (3 masters): the test infrastructure forms the cluster and sees a killed
//!   master. The store on Redis Cluster, with a failover, is tested with real nodes in
//!   `tests/tests/cluster/redis_cluster.rs`.
//!
//! Each test starts its own `redis-server` processes on free ports and kills them by PID.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::{CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::redis_topology::{RedisCluster, RedisSentinel, cli};

fn cooldown(conn: &str) -> CooldownWrite<'_> {
    CooldownWrite {
        conn,
        duration_ms: 120_000,
        backoff_level: 1,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_store_survives_a_master_kill_with_its_cooldowns() {
    let mut topo = RedisSentinel::start().unwrap();
    let config = RedisStoreConfig {
        url: topo.url(),
        key_prefix: "s:".to_owned(),
        timeout_ms: 1_000,
        health: HealthPolicy {
            down_after_failures: 3,
            retry_interval_ms: 100,
        },
    };
    let store = Arc::new(RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap());
    assert!(store.is_sentinel());
    assert!(
        store
            .cooldown_extend(&cooldown("c1"))
            .await
            .unwrap()
            .applied
    );
    assert!(
        store
            .terminal_set("c2", TerminalStatus::Banned)
            .await
            .unwrap()
    );
    let before = topo.master.port;

    topo.fail_over().unwrap();
    assert_ne!(topo.master_port(), Some(before));

    // The store finds the new master through the sentinel and still knows the state.
    let deadline = Instant::now() + Duration::from_secs(30);
    let records = loop {
        match store.read_connections(&["c1", "c2"]).await {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no read after the failover: {e}"),
        }
    };
    assert!(records[0].remaining_ms > 60_000, "{records:?}");
    assert_eq!(records[1].terminal, Some(TerminalStatus::Banned));
    // And it writes to the promoted master (a demoted or stale one would refuse).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match store.cooldown_extend(&cooldown("c3")).await {
            Ok(w) => {
                assert!(w.applied);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no write after the failover: {e}"),
        }
    }
    let replica = topo.replica.port;
    assert!(
        cli(replica, &["EXISTS", "s:conn:{c3}"])
            .unwrap()
            .trim()
            .ends_with('1'),
        "the write reached the promoted replica"
    );
}

#[test]
fn a_local_redis_cluster_forms_and_notices_a_dead_master() {
    let mut cluster = RedisCluster::start(3).unwrap();
    let port = cluster.ports[0];
    let info = cli(port, &["CLUSTER", "INFO"]).unwrap();
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    assert!(info.contains("cluster_known_nodes:3"), "{info}");
    assert_eq!(cluster.urls().len(), 3);
    cluster.kill(2);
    // With a master (and its slots) gone and no replica to promote, the cluster fails.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if cli(port, &["CLUSTER", "INFO"]).is_ok_and(|s| s.contains("cluster_state:fail")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the cluster never noticed the dead master");
}
