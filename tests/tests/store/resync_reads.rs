//! The resync's bulk reads against a real `redis-server`: connection records and lockouts of
//! many connections, pipelined in chunks, read exactly what the one-connection reads return,
//! in the order asked, across chunk borders and on a server that lost its script cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use switchyard_shared::outcome::FailureReason;
use switchyard_store::connections::RESYNC_CHUNK;
use switchyard_store::{CooldownWrite, HealthPolicy, NoopObserver, RedisStore, RedisStoreConfig};
use switchyard_tests::redis_server::RedisServer;

fn store(server: &RedisServer) -> RedisStore {
    let config = RedisStoreConfig {
        url: server.url(),
        key_prefix: "rr:".to_owned(),
        timeout_ms: 2_000,
        health: HealthPolicy::default(),
    };
    RedisStore::connect(&config, Arc::new(NoopObserver)).unwrap()
}

#[tokio::test]
async fn bulk_reads_match_the_single_reads_across_chunks() {
    let server = RedisServer::start().unwrap();
    let s = store(&server);
    // More than two chunks; every 7th connection cooled, every 11th locked on one or two models.
    let ids: Vec<String> = (0..RESYNC_CHUNK * 2 + 37)
        .map(|i| format!("c{i}"))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        if i % 7 == 0 {
            s.cooldown_extend(&CooldownWrite {
                conn: id,
                duration_ms: 60_000,
                backoff_level: 1,
                reason: FailureReason::RateLimitExceeded,
                terminal: None,
                last_error: "429",
            })
            .await
            .unwrap();
        }
        if i % 11 == 0 {
            s.lockout_extend("p", id, "m1", 60_000, 2, FailureReason::QuotaExhausted)
                .await
                .unwrap();
            if i % 2 == 0 {
                s.lockout_extend("q", id, "m2", 60_000, 1, FailureReason::ModelCapacity)
                    .await
                    .unwrap();
            }
        }
    }
    let conns: Vec<&str> = ids.iter().map(String::as_str).collect();

    let states = s.read_connection_states(&conns).await.unwrap();
    assert_eq!(states.len(), conns.len());
    for (i, (conn, state)) in conns.iter().zip(&states).enumerate() {
        assert_eq!(state.record.conn, *conn);
        assert_eq!(
            state.version > 0,
            i % 7 == 0 || i % 11 == 0,
            "{conn}: {state:?}"
        );
        assert_eq!(
            state.record.remaining_ms > 0,
            i % 7 == 0,
            "{conn}: {state:?}"
        );
    }

    // A server that lost its scripts (restart, failover, SCRIPT FLUSH) still answers.
    let mut con = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut con)
        .await
        .unwrap();
    let many = s.read_lockouts_many(&conns).await.unwrap();
    assert_eq!(many.len(), conns.len());
    let mut locked = 0;
    for (conn, bulk) in conns.iter().zip(&many) {
        let mut single = s.read_lockouts(conn).await.unwrap();
        let mut bulk = bulk.clone();
        for v in [&mut single, &mut bulk] {
            v.sort_by(|a, b| a.model.cmp(&b.model));
            // Remaining times differ by the time between the two reads.
            for r in v.iter_mut() {
                r.remaining_ms /= 10_000;
            }
        }
        assert_eq!(bulk, single, "{conn}");
        locked += usize::from(!bulk.is_empty());
    }
    assert_eq!(locked, conns.len().div_ceil(11));
    assert!(s.read_lockouts_many(&[]).await.unwrap().is_empty());
}
