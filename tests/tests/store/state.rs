//! The Redis state store (cooldowns, terminal states, lockouts, provider breaker, settings,
//! heartbeats, health gate) against a real `redis-server`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_shared::outcome::{FailureReason, TerminalStatus};

use crate::support::{STATE_DEADLINE, eventually};
use switchyard_shared::wire::BreakerPhase;
use switchyard_store::{
    BreakerParams, ConnRecord, CooldownWrite, HealthPolicy, NoopObserver, ProbeGrant, RedisState,
    RedisStore, RedisStoreConfig, StoreError,
};
use switchyard_tests::redis_server::RedisServer;

fn store_at(url: &str, timeout_ms: u64) -> RedisStore {
    let config = RedisStoreConfig {
        url: url.to_owned(),
        key_prefix: "t:".to_owned(),
        timeout_ms,
        health: HealthPolicy::default(),
    };
    match RedisStore::connect(&config, Arc::new(NoopObserver)) {
        Ok(store) => store,
        Err(e) => panic!("store: {e}"),
    }
}

fn store(server: &RedisServer) -> RedisStore {
    // Generous: the machine is shared and noisy.
    store_at(&server.url(), 2_000)
}

fn redis() -> RedisServer {
    RedisServer::start().unwrap_or_else(|e| panic!("redis-server: {e}"))
}

fn write<'a>(conn: &'a str, duration_ms: u64, level: u32) -> CooldownWrite<'a> {
    CooldownWrite {
        conn,
        duration_ms,
        backoff_level: level,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429 too many requests",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_is_extend_only() {
    let server = redis();
    let s = store(&server);
    let first = s.cooldown_extend(&write("c1", 60_000, 1)).await.unwrap();
    assert!(first.applied);
    assert!(first.remaining_ms > 50_000 && first.remaining_ms <= 60_000);
    assert_eq!(first.backoff_level, 1);

    let shorter = s.cooldown_extend(&write("c1", 5_000, 1)).await.unwrap();
    assert!(!shorter.applied, "a shorter cooldown changes nothing");
    assert!(shorter.remaining_ms > 50_000, "{shorter:?}");

    let longer = s.cooldown_extend(&write("c1", 120_000, 1)).await.unwrap();
    assert!(longer.applied);
    assert!(longer.remaining_ms > 110_000, "{longer:?}");

    let rec = s.read_connections(&["c1"]).await.unwrap();
    assert!(rec[0].remaining_ms > 110_000);
    assert_eq!(rec[0].reason, Some(FailureReason::RateLimitExceeded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn herd_guard_raises_the_level_once_per_window() {
    let server = redis();
    let stores: Vec<Arc<RedisStore>> = (0..3).map(|_| Arc::new(store(&server))).collect();
    let mut tasks = Vec::new();
    for s in &stores {
        let s = Arc::clone(s);
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let cur = s.read_connections(&["herd"]).await.unwrap()[0].backoff_level;
                s.cooldown_extend(&write("herd", 60_000, cur + 1))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rec = stores[0].read_connections(&["herd"]).await.unwrap();
    assert_eq!(
        rec[0].backoff_level, 1,
        "60 concurrent writes in one window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_is_sticky_until_reinstated() {
    let server = redis();
    let s = store(&server);
    s.cooldown_extend(&write("c", 10_000, 2)).await.unwrap();
    assert!(s.terminal_set("c", TerminalStatus::Banned).await.unwrap());
    assert!(!s.terminal_set("c", TerminalStatus::Banned).await.unwrap());

    let denied = s.cooldown_extend(&write("c", 90_000, 5)).await.unwrap();
    assert!(!denied.applied);
    assert_eq!(denied.terminal, Some(TerminalStatus::Banned));
    assert_eq!(denied.backoff_level, 2);

    assert!(
        !s.cooldown_clear("c").await.unwrap(),
        "clear never lifts a terminal"
    );
    let (after_success, eased) = s.cooldown_success("c", None).await.unwrap();
    assert!(
        !eased,
        "a terminal connection's cooldown is not ended by a success"
    );
    assert_eq!(after_success.terminal, Some(TerminalStatus::Banned));
    assert_eq!(
        after_success.backoff_level, 2,
        "success is a no-op on terminal"
    );

    // A write carrying a terminal status sets it too.
    let mut w = write("d", 1_000, 1);
    w.terminal = Some(TerminalStatus::CreditsExhausted);
    assert!(s.cooldown_extend(&w).await.unwrap().applied);

    let recs = s.read_connections(&["c", "d"]).await.unwrap();
    assert_eq!(recs[0].terminal, Some(TerminalStatus::Banned));
    assert_eq!(recs[1].terminal, Some(TerminalStatus::CreditsExhausted));

    assert!(s.terminal_clear("c").await.unwrap());
    assert!(!s.terminal_clear("c").await.unwrap());
    let rec = &s.read_connections(&["c"]).await.unwrap()[0];
    assert_eq!(rec.terminal, None);
    assert_eq!(rec.backoff_level, 0);
    assert_eq!(rec.remaining_ms, 0);
}

/// Waits until the connection's cooldown window in Redis has run out (the tests' windows are
/// a few milliseconds; their end is the scenario).
async fn wait_cooldown_over(s: &RedisStore, connection: &str) {
    let over = eventually(STATE_DEADLINE, || async {
        s.read_connections(&[connection]).await.unwrap()[0].remaining_ms == 0
    })
    .await;
    assert!(over, "{connection}'s cooldown window does not end");
}

/// Waits until the provider's `retry_after_ms` in Redis has run out: when OPEN, the open
/// period (a probe may be granted now); when HALF_OPEN, the probe's lease.
async fn wait_retry_after_over(s: &RedisStore, provider: &str) {
    let over = eventually(STATE_DEADLINE, || async {
        s.read_breakers(&[provider]).await.unwrap()[0].retry_after_ms == 0
    })
    .await;
    assert!(over, "{provider}'s retry-after does not run out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_ends_the_cooldown_and_lowers_the_level() {
    let server = redis();
    let s = store(&server);
    // Raise the level to 2 over two windows.
    s.cooldown_extend(&write("c", 1, 1)).await.unwrap();
    wait_cooldown_over(&s, "c").await;
    let second = s.cooldown_extend(&write("c", 60_000, 2)).await.unwrap();
    assert_eq!(second.backoff_level, 2);

    // A success of an attempt dispatched before that failure (an hour ago) is stale.
    let (stale, eased) = s.cooldown_success("c", Some(3_600_000)).await.unwrap();
    assert!(!eased, "a stale success is not announced");
    assert_eq!(stale.backoff_level, 2, "a stale success changes nothing");
    assert!(stale.remaining_ms > 50_000);
    let rec = &s.read_connections(&["c"]).await.unwrap()[0];
    assert!(rec.remaining_ms > 50_000, "the cooldown still runs");

    let (rec, eased) = s.cooldown_success("c", None).await.unwrap();
    assert!(
        eased,
        "this success ended a running cooldown: the caller announces it"
    );
    assert_eq!(rec.backoff_level, 1);
    assert_eq!(rec.remaining_ms, 0);
    let rec = &s.read_connections(&["c"]).await.unwrap()[0];
    assert_eq!((rec.backoff_level, rec.remaining_ms), (1, 0));

    // Only the level is left: decaying it ends no cooldown, so there is nothing to announce.
    assert_eq!(
        s.cooldown_success("c", None).await.unwrap(),
        (ConnRecord::clean("c"), false)
    );
    assert_eq!(
        s.cooldown_success("c", None).await.unwrap(),
        (ConnRecord::clean("c"), false)
    );

    s.cooldown_extend(&write("e", 60_000, 3)).await.unwrap();
    assert!(s.cooldown_clear("e").await.unwrap());
    let rec = &s.read_connections(&["e"]).await.unwrap()[0];
    assert_eq!((rec.backoff_level, rec.remaining_ms), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_connections_resyncs_in_order() {
    let server = redis();
    let a = store(&server);
    let b = store(&server);
    a.cooldown_extend(&write("x", 30_000, 1)).await.unwrap();
    a.terminal_set("z", TerminalStatus::Expired).await.unwrap();
    let recs = b.read_connections(&["x", "y", "z"]).await.unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].conn, "x");
    assert!(recs[0].remaining_ms > 20_000);
    assert_eq!(recs[1].conn, "y");
    assert_eq!(recs[1].remaining_ms, 0);
    assert_eq!(recs[1].terminal, None);
    assert_eq!(recs[2].terminal, Some(TerminalStatus::Expired));
    assert!(b.read_connections(&[]).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockouts_extend_decay_clear_and_prune() {
    let server = redis();
    let s = store(&server);
    let r = FailureReason::QuotaExhausted;
    let l = s
        .lockout_extend("p", "c", "m1", 60_000, 2, r)
        .await
        .unwrap();
    assert!(l.remaining_ms > 50_000);
    assert_eq!(l.failure_count, 2);
    let l = s.lockout_extend("p", "c", "m1", 1_000, 1, r).await.unwrap();
    assert!(l.remaining_ms > 50_000, "extend-only");
    assert_eq!(l.failure_count, 2, "count is the max");
    let l = s
        .lockout_extend("p", "c", "m1", 60_000, 4, r)
        .await
        .unwrap();
    assert_eq!(l.failure_count, 4);

    s.lockout_decay("p", "c", "m1").await.unwrap();
    let recs = s.read_lockouts("c").await.unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        (recs[0].provider.as_str(), recs[0].model.as_str()),
        ("p", "m1")
    );
    assert_eq!(recs[0].failure_count, 2);
    assert_eq!(recs[0].reason, Some(r));
    s.lockout_decay("p", "c", "m1").await.unwrap();
    s.lockout_decay("p", "c", "m1").await.unwrap();
    assert!(
        s.read_lockouts("c").await.unwrap().is_empty(),
        "decayed to 0 = removed"
    );
    s.lockout_decay("p", "c", "absent").await.unwrap();

    // Short lockouts expire; their index members are pruned on read.
    s.lockout_extend("p", "c", "short", 50, 1, r).await.unwrap();
    s.lockout_extend("p", "c", "long", 60_000, 1, r)
        .await
        .unwrap();
    let expired = eventually(STATE_DEADLINE, || async {
        s.read_lockouts("c").await.unwrap().len() == 1
    })
    .await;
    assert!(expired, "the short lockout expires");
    let recs = s.read_lockouts("c").await.unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].model, "long");
    let members: Vec<String> = index_members(&server, "t:lockouts:{c}").await;
    assert_eq!(members, vec!["p\u{1f}long".to_owned()]);

    assert!(s.lockout_clear("p", "c", "long").await.unwrap());
    assert!(!s.lockout_clear("p", "c", "long").await.unwrap());

    for m in ["a", "b", "c"] {
        s.lockout_extend("q", "c", m, 60_000, 1, r).await.unwrap();
    }
    assert_eq!(s.lockout_clear_connection("c").await.unwrap(), 3);
    assert!(s.read_lockouts("c").await.unwrap().is_empty());
    assert_eq!(s.lockout_clear_connection("c").await.unwrap(), 0);
}

async fn index_members(server: &RedisServer, key: &str) -> Vec<String> {
    let s = store(server);
    let key = key.to_owned();
    let mut members: Vec<String> = s
        .run("smembers", |mut con| async move {
            redis::cmd("SMEMBERS").arg(key).query_async(&mut con).await
        })
        .await
        .unwrap();
    members.sort();
    members
}

/// DEGRADED one failure before OPEN; the open period doubles from the first failed probe.
fn params(threshold: u32, reset_ms: u64) -> BreakerParams {
    BreakerParams {
        failure_threshold: threshold,
        degradation_at: threshold.saturating_sub(1),
        reset_timeout_ms: reset_ms,
        max_reset_timeout_ms: 600_000,
        backoff_escalation_count: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_once_across_nodes() {
    let server = redis();
    let stores: Vec<Arc<RedisStore>> = (0..3).map(|_| Arc::new(store(&server))).collect();
    let p = params(5, 30_000);
    let mut tasks = Vec::new();
    for s in &stores {
        let s = Arc::clone(s);
        tasks.push(tokio::spawn(async move {
            let mut opened = Vec::new();
            for _ in 0..4 {
                let change = s.breaker_failure("prov", &p).await.unwrap();
                if change.changed() && change.after.phase == BreakerPhase::Open {
                    opened.push(change);
                }
            }
            opened
        }));
    }
    let mut transitions = Vec::new();
    for t in tasks {
        transitions.extend(t.await.unwrap());
    }
    assert_eq!(transitions.len(), 1, "{transitions:?}");
    let t = &transitions[0];
    // The fourth failure entered DEGRADED (generation 1), the fifth opened (generation 2).
    assert_eq!(
        (t.before, t.after.phase),
        (BreakerPhase::Degraded, BreakerPhase::Open)
    );
    assert_eq!(t.after.generation, 2);
    // As the local breaker: only failed probes count as open cycles.
    assert_eq!(t.after.open_cycles, 0);
    assert!(t.after.retry_after_ms > 20_000 && t.after.retry_after_ms <= 30_000);

    let read = stores[1].read_breakers(&["prov", "other"]).await.unwrap();
    assert_eq!(read[0].phase, BreakerPhase::Open);
    assert_eq!(read[0].generation, 2);
    assert_eq!(read[1].phase, BreakerPhase::Closed);
    assert_eq!(read[1].generation, 0);

    // While open, the probe is denied until the open period has passed.
    match stores[2]
        .breaker_probe_acquire("prov", "n2", 5_000)
        .await
        .unwrap()
    {
        ProbeGrant::Denied { retry_after_ms } => assert!(retry_after_ms > 20_000),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_success_takes_one_failure_off_and_recovers_from_degraded() {
    let server = redis();
    let s = store(&server);
    let p = params(3, 30_000);
    s.breaker_failure("b", &p).await.unwrap();
    let c = s.breaker_failure("b", &p).await.unwrap();
    assert_eq!(c.after.failure_count, 2);
    assert_eq!(
        (c.before, c.after.phase),
        (BreakerPhase::Closed, BreakerPhase::Degraded)
    );
    assert_eq!(s.read_breakers(&["b"]).await.unwrap()[0].failure_count, 2);
    let c = s.breaker_success("b").await.unwrap();
    assert_eq!(
        (c.before, c.after.phase),
        (BreakerPhase::Degraded, BreakerPhase::Closed),
        "back within the band"
    );
    assert_eq!(c.after.failure_count, 1, "one success forgets one failure");
    s.breaker_failure("b", &p).await.unwrap();
    let c = s.breaker_failure("b", &p).await.unwrap();
    assert_eq!(c.after.phase, BreakerPhase::Open, "1 + 2 failures reach 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_probe_is_granted_cluster_wide() {
    let server = redis();
    let stores: Vec<Arc<RedisStore>> = (0..3).map(|_| Arc::new(store(&server))).collect();
    let p = params(1, 1);
    for trial in 0..50 {
        let provider = format!("p{trial}");
        let c = stores[0].breaker_failure(&provider, &p).await.unwrap();
        assert_eq!(c.after.phase, BreakerPhase::Open);
        wait_retry_after_over(&stores[0], &provider).await;
        let mut tasks = Vec::new();
        for i in 0..6 {
            let s = Arc::clone(&stores[i % 3]);
            let provider = provider.clone();
            tasks.push(tokio::spawn(async move {
                s.breaker_probe_acquire(&provider, &format!("n{i}"), 10_000)
                    .await
                    .unwrap()
            }));
        }
        let mut granted = 0;
        for t in tasks {
            if let ProbeGrant::Granted { generation, ttl_ms } = t.await.unwrap() {
                granted += 1;
                assert_eq!(generation, 1);
                assert_eq!(ttl_ms, 10_000);
            }
        }
        assert_eq!(granted, 1, "trial {trial}");
        let b = &stores[1].read_breakers(&[provider.as_str()]).await.unwrap()[0];
        assert_eq!(b.phase, BreakerPhase::HalfOpen);
        assert!(b.retry_after_ms > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_probe_results_are_ignored() {
    let server = redis();
    let s = store(&server);
    let p = params(1, 1);
    s.breaker_failure("b", &p).await.unwrap();
    wait_retry_after_over(&s, "b").await;
    let ProbeGrant::Granted { generation: g1, .. } =
        s.breaker_probe_acquire("b", "a", 50).await.unwrap()
    else {
        panic!("first probe denied")
    };
    // The probe's lease is 50 ms.
    wait_retry_after_over(&s, "b").await;
    assert_eq!(
        s.breaker_probe_result("b", g1, true, &p).await.unwrap(),
        None,
        "the probe lease expired"
    );
    let ProbeGrant::Granted { generation: g2, .. } =
        s.breaker_probe_acquire("b", "b", 10_000).await.unwrap()
    else {
        panic!("half-open with no live probe must grant")
    };
    assert!(g2 > g1);
    assert_eq!(
        s.breaker_probe_result("b", g1, true, &p).await.unwrap(),
        None
    );
    let c = s
        .breaker_probe_result("b", g2, true, &p)
        .await
        .unwrap()
        .unwrap();
    assert!(c.changed());
    assert_eq!(c.after.phase, BreakerPhase::Closed);
    assert_eq!(
        s.breaker_probe_result("b", g2, true, &p).await.unwrap(),
        None,
        "used once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_failure_reopens_longer_and_success_closes() {
    let server = redis();
    let s = store(&server);
    let p = params(1, 100);
    let opened = s.breaker_failure("b", &p).await.unwrap();
    assert!(opened.after.retry_after_ms <= 100);
    let gen_open = opened.after.generation;
    wait_retry_after_over(&s, "b").await;
    let ProbeGrant::Granted { generation, .. } =
        s.breaker_probe_acquire("b", "a", 10_000).await.unwrap()
    else {
        panic!("probe denied after the open period")
    };
    let c = s
        .breaker_probe_result("b", generation, false, &p)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (c.before, c.after.phase),
        (BreakerPhase::HalfOpen, BreakerPhase::Open)
    );
    assert!(
        c.after.retry_after_ms > 100 && c.after.retry_after_ms <= 200,
        "{c:?}"
    );
    assert_eq!(c.after.open_cycles, 1);
    assert!(c.after.generation > gen_open);

    wait_retry_after_over(&s, "b").await;
    let ProbeGrant::Granted { generation, .. } =
        s.breaker_probe_acquire("b", "a", 10_000).await.unwrap()
    else {
        panic!("probe denied after the second open period")
    };
    let c = s
        .breaker_probe_result("b", generation, true, &p)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.after.phase, BreakerPhase::Closed);
    assert_eq!(c.after.open_cycles, 0);
    assert_eq!(c.after.failure_count, 0);

    // Operator reset from OPEN.
    s.breaker_failure("b", &p).await.unwrap();
    let r = s.breaker_reset("b").await.unwrap();
    assert_eq!(
        (r.before, r.after.phase),
        (BreakerPhase::Open, BreakerPhase::Closed)
    );
    match s.breaker_probe_acquire("b", "a", 10_000).await.unwrap() {
        ProbeGrant::Denied { retry_after_ms } => assert_eq!(retry_after_ms, 0),
        other => panic!("closed breaker granted a probe: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_versions_bump() {
    let server = redis();
    let s = store(&server);
    assert_eq!(s.settings_read().await.unwrap(), None);
    assert_eq!(s.settings_write(r#"{"a":1}"#).await.unwrap(), 1);
    assert_eq!(s.settings_write(r#"{"a":2}"#).await.unwrap(), 2);
    assert_eq!(
        store(&server).settings_read().await.unwrap(),
        Some((2, r#"{"a":2}"#.to_owned()))
    );
}

/// A settings write based on a version that is no longer the stored one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_writes_compare_and_set_on_the_version() {
    use switchyard_store::SettingsWrite;
    let server = redis();
    let a = store(&server);
    let b = store(&server);
    assert_eq!(
        a.settings_write_if(0, r#"{"a":1}"#).await.unwrap(),
        SettingsWrite::Written(1)
    );
    // b computed its change from "nothing stored": refused, nothing written.
    assert_eq!(
        b.settings_write_if(0, r#"{"b":1}"#).await.unwrap(),
        SettingsWrite::Conflict(1)
    );
    assert_eq!(
        b.settings_read().await.unwrap(),
        Some((1, r#"{"a":1}"#.to_owned()))
    );
    assert_eq!(
        b.settings_write_if(1, r#"{"a":1,"b":1}"#).await.unwrap(),
        SettingsWrite::Written(2)
    );
    assert_eq!(
        a.settings_write_if(1, r#"{"a":2}"#).await.unwrap(),
        SettingsWrite::Conflict(2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_expire_and_dead_ids_stay_until_pruned() {
    let server = redis();
    let s = store(&server);
    s.heartbeat("n1", r#"{"v":1}"#, 150).await.unwrap();
    s.heartbeat("n2", r#"{"v":2}"#, 60_000).await.unwrap();
    s.heartbeat("n3", r#"{"v":3}"#, 60_000).await.unwrap();
    assert_eq!(s.read_nodes().await.unwrap().len(), 3);
    s.remove_node("n3").await.unwrap();
    let expired = eventually(STATE_DEADLINE, || async {
        s.read_nodes().await.unwrap().len() == 1
    })
    .await;
    assert!(expired, "n1's heartbeat expires");
    let (live, dead) = s.read_membership().await.unwrap();
    assert_eq!(live, vec![("n2".to_owned(), r#"{"v":2}"#.to_owned())]);
    // Reading prunes nothing: the dead id stays for the coordinator to see (and clean).
    assert_eq!(dead, vec!["n1".to_owned()]);
    assert_eq!(
        index_members(&server, "t:nodes").await,
        vec!["n1".to_owned(), "n2".to_owned()]
    );
    s.prune_nodes(&dead).await.unwrap();
    assert_eq!(
        index_members(&server, "t:nodes").await,
        vec!["n2".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_redis_is_skipped_then_recovered() {
    let server = redis();
    let s = store_at(&server.url(), 200);
    s.ping().await.unwrap();
    assert_eq!(s.state(), RedisState::Up);
    server.pause();

    let started = Instant::now();
    let first = s.cooldown_extend(&write("c", 1_000, 1)).await;
    assert!(
        matches!(
            first,
            Err(StoreError::Timeout { .. }) | Err(StoreError::Redis { .. })
        ),
        "{first:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded by the timeout"
    );
    assert_eq!(s.state(), RedisState::Degraded);
    for _ in 0..2 {
        assert!(s.ping().await.is_err());
    }
    assert_eq!(s.state(), RedisState::Down);

    let started = Instant::now();
    assert_eq!(
        s.read_connections(&["c"]).await,
        Err(StoreError::Unavailable)
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a skipped call returns at once (generous bound)"
    );

    server.resume();
    eventually(Duration::from_secs(15), || async {
        let _ = s.ping().await;
        s.state() == RedisState::Up
    })
    .await;
    assert_eq!(s.state(), RedisState::Up);
    s.cooldown_extend(&write("c", 1_000, 1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_with_password_works_and_without_fails_clearly() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"])
        .unwrap_or_else(|e| panic!("redis-server: {e}"));
    let url = format!("redis://:s3cret@127.0.0.1:{}/0", server.port);
    let s = store_at(&url, 2_000);
    assert_eq!(s.settings_write("{}").await.unwrap(), 1);

    let anon = store_at(&server.url(), 2_000);
    let err = anon.settings_read().await.unwrap_err();
    let text = err.to_string().to_lowercase();
    assert!(text.contains("auth"), "{err}");
}

/// A probe lease handed back early frees the probe for another node at once; only its holder
/// (owner and generation) can hand it back, and the dispatch fence says whether it is live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_lease_is_handed_back_by_its_holder_only_and_fenced_at_dispatch() {
    let server = redis();
    let a = store(&server);
    let b = store(&server);
    let p = params(1, 1);
    a.breaker_failure("pr", &p).await.unwrap();
    wait_retry_after_over(&a, "pr").await;
    let ProbeGrant::Granted { generation, .. } =
        a.breaker_probe_acquire("pr", "a", 60_000).await.unwrap()
    else {
        panic!("a wins the probe");
    };
    assert!(a.breaker_probe_holds("pr", generation).await.unwrap());
    assert!(
        matches!(
            b.breaker_probe_acquire("pr", "b", 60_000).await.unwrap(),
            ProbeGrant::Denied { retry_after_ms } if retry_after_ms > 50_000
        ),
        "one live lease at a time"
    );
    // Not the holder: nothing happens.
    assert!(
        !b.breaker_probe_release("pr", generation, "b")
            .await
            .unwrap()
    );
    assert!(
        !a.breaker_probe_release("pr", generation + 1, "a")
            .await
            .unwrap()
    );
    assert!(a.breaker_probe_holds("pr", generation).await.unwrap());
    // The holder hands it back: b probes now, not in a minute.
    assert!(
        a.breaker_probe_release("pr", generation, "a")
            .await
            .unwrap()
    );
    assert!(!a.breaker_probe_holds("pr", generation).await.unwrap());
    let ProbeGrant::Granted {
        generation: next, ..
    } = b.breaker_probe_acquire("pr", "b", 60_000).await.unwrap()
    else {
        panic!("the released probe is b's to take");
    };
    assert!(next > generation);
    // a's old lease is fenced off at dispatch, and cannot release b's.
    assert!(!a.breaker_probe_holds("pr", generation).await.unwrap());
    assert!(
        !a.breaker_probe_release("pr", generation, "a")
            .await
            .unwrap()
    );
    assert!(b.breaker_probe_holds("pr", next).await.unwrap());
}
