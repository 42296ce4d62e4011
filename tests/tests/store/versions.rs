//! Connection-record versions, Redis-clock staleness and change-only lockout announcements,
//! against a real `redis-server`:
//! - every write to a connection record, clears included, bumps its version, and the resync read
//!   returns it (a clear reads as a clean record with a newer version);
//! - a success's staleness is decided on the Redis clock from the attempt's age, so a node whose
//!   wall clock runs ahead cannot clear a peer's fresh cooldown;
//! - a lockout write that changes nothing reports `applied = false` (nothing to publish).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::{CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::redis_server::RedisServer;

fn store(server: &RedisServer) -> RedisStore {
    let config = RedisStoreConfig {
        url: server.url(),
        key_prefix: "v:".to_owned(),
        timeout_ms: 2_000,
        health: HealthPolicy::default(),
    };
    RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap()
}

fn write(conn: &str, duration_ms: u64, level: u32) -> CooldownWrite<'_> {
    CooldownWrite {
        conn,
        duration_ms,
        backoff_level: level,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    }
}

async fn version(s: &RedisStore, conn: &str) -> u64 {
    s.read_connection_states(&[conn]).await.unwrap()[0].version
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_bumps_the_version_and_clears_keep_it() {
    let server = RedisServer::start().unwrap();
    let a = store(&server);
    let b = store(&server);
    assert_eq!(version(&b, "c").await, 0, "unknown connection");

    let mut last = 0;
    let mut newer = |v: u64, what: &str| {
        assert!(v > last, "{what}: version {v} not above {last}");
        last = v;
    };

    let w = a.cooldown_extend(&write("c", 60_000, 1)).await.unwrap();
    assert!(w.applied);
    newer(w.version, "cooldown extend");
    assert_eq!(version(&b, "c").await, w.version, "the resync read sees it");

    // A write that changes nothing keeps the version.
    let same = a.cooldown_extend(&write("c", 1_000, 1)).await.unwrap();
    assert!(!same.applied);
    assert_eq!(same.version, w.version);

    let l = a
        .lockout_extend_applied("p", "c", "m", 60_000, 1, FailureReason::ModelCapacity)
        .await
        .unwrap();
    newer(l.version, "lockout extend");
    a.lockout_decay("p", "c", "m").await.unwrap();
    newer(version(&b, "c").await, "lockout decay");
    a.lockout_extend("p", "c", "m", 60_000, 2, FailureReason::ModelCapacity)
        .await
        .unwrap();
    newer(version(&b, "c").await, "lockout extend again");
    assert_eq!(a.lockout_clear_connection("c").await.unwrap(), 1);
    newer(version(&b, "c").await, "lockout clear");

    let cleared = a.cooldown_clear_versioned("c").await.unwrap();
    assert!(cleared.changed);
    newer(cleared.version, "cooldown clear");
    let state = &b.read_connection_states(&["c"]).await.unwrap()[0];
    assert_eq!(
        (state.record.remaining_ms, state.record.backoff_level),
        (0, 0),
        "a clear reads as clean"
    );
    assert_eq!(state.version, cleared.version, "and keeps its version");

    let set = a
        .terminal_set_versioned("c", TerminalStatus::Banned)
        .await
        .unwrap();
    assert!(set.changed);
    newer(set.version, "terminal set");
    let reinstated = a.terminal_clear_versioned("c").await.unwrap();
    assert!(reinstated.changed);
    newer(reinstated.version, "terminal clear");
    let state = &b.read_connection_states(&["c"]).await.unwrap()[0];
    assert_eq!(state.record.terminal, None);
    assert_eq!(state.version, reinstated.version);
    assert_eq!(
        state.reinstated, reinstated.version,
        "the reinstatement is on record"
    );

    a.cooldown_extend(&write("c", 60_000, 2)).await.unwrap();
    let later = &b.read_connection_states(&["c"]).await.unwrap()[0];
    assert!(later.version > reinstated.version);
    assert_eq!(later.reinstated, reinstated.version, "and stays there");
    let success = a.cooldown_success_versioned("c", None).await.unwrap();
    assert!(success.eased);
    newer(success.version, "success");
    // Nothing left to lower: no write, no bump.
    a.cooldown_success("c", None).await.unwrap();
    let idle = a.cooldown_success_versioned("c", None).await.unwrap();
    assert!(!idle.eased);
    assert_eq!(idle.version, version(&b, "c").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_clock_running_ahead_cannot_clear_a_fresh_cooldown() {
    let server = RedisServer::start().unwrap();
    let a = store(&server);
    let b = store(&server);
    // Node B dispatches an attempt. Its wall clock may run minutes ahead: the v1 script took
    // B's wall-clock dispatch instant and compared it with the failure's Redis time, so any
    // of B's successes looked newer than A's failure. Only B's own elapsed time crosses now.
    let dispatched = Instant::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Meanwhile node A sees a 429 and cools the connection.
    assert!(
        a.cooldown_extend(&write("c", 60_000, 1))
            .await
            .unwrap()
            .applied
    );
    // B's attempt succeeds and is reported with its age on B's own monotonic clock.
    let age = u64::try_from(dispatched.elapsed().as_millis()).unwrap();
    let (rec, eased) = b.cooldown_success("c", Some(age)).await.unwrap();
    assert!(!eased, "an attempt older than the failure is stale");
    assert!(rec.remaining_ms > 50_000, "{rec:?}");
    assert!(
        a.read_connections(&["c"]).await.unwrap()[0].remaining_ms > 50_000,
        "the peer's fresh cooldown stands"
    );
    // An attempt dispatched after the failure does end it.
    let dispatched = Instant::now();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let age = u64::try_from(dispatched.elapsed().as_millis()).unwrap();
    let (rec, eased) = b.cooldown_success("c", Some(age)).await.unwrap();
    assert!(eased);
    assert_eq!(rec.remaining_ms, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lockout_that_changes_nothing_is_not_applied() {
    let server = RedisServer::start().unwrap();
    let nodes: Vec<RedisStore> = (0..5).map(|_| store(&server)).collect();
    let first = nodes[0]
        .lockout_extend_applied("p", "c", "m", 120_000, 2, FailureReason::ModelCapacity)
        .await
        .unwrap();
    assert!(first.applied);
    // Every other node reports the same incident with a shorter lockout and a lower count:
    // the stored one covers it, so none of them has anything to announce.
    let mut applied = 0;
    for node in &nodes[1..] {
        let r = node
            .lockout_extend_applied("p", "c", "m", 30_000, 1, FailureReason::ModelCapacity)
            .await
            .unwrap();
        assert!(r.record.remaining_ms > 100_000, "{r:?}");
        assert_eq!(r.record.failure_count, 2);
        assert_eq!(r.version, first.version, "nothing written");
        applied += usize::from(r.applied);
    }
    assert_eq!(applied, 0);
    // A higher count is a change.
    let raised = nodes[1]
        .lockout_extend_applied("p", "c", "m", 30_000, 3, FailureReason::ModelCapacity)
        .await
        .unwrap();
    assert!(raised.applied);
    assert!(raised.version > first.version);
}
