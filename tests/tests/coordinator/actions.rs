//! Black-box tests of the cluster-wide actions: a real `switchyard-coordinator` changes the
//! shared state in a real Redis and announces each change on the events channel. Both are
//! checked directly (the store's reads and a subscriber decoding the envelopes), so the tests
//! do not depend on node behaviour; every action is repeated to show it is idempotent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::coordinator::{Coordinator, config, store};
use serde_json::json;
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_shared::wire::{self, BreakerPhase, LeaseEventKind, WireEvent};
use switchyard_store::{BreakerParams, CooldownWrite, LeaseAcquire, Subscriber, SubscriberEvent};
use switchyard_tests::redis_server::RedisServer;
use tokio::sync::mpsc::Receiver;

const PARAMS: BreakerParams = BreakerParams {
    failure_threshold: 2,
    degradation_at: 1,
    reset_timeout_ms: 30_000,
    max_reset_timeout_ms: 120_000,
    backoff_escalation_count: 0,
};

/// The next decoded event, skipping connection notices; `None` after `timeout`.
async fn next_event(
    rx: &mut Receiver<SubscriberEvent>,
    timeout: Duration,
) -> Option<(String, WireEvent)> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ev = tokio::time::timeout_at(deadline, rx.recv()).await.ok()??;
        if let SubscriberEvent::Message(bytes) = ev {
            let env = wire::decode(&bytes).unwrap();
            return Some((env.origin_node, env.event));
        }
    }
}

/// Subscribes and waits until the subscription is live.
async fn subscribe(
    redis_url: &str,
) -> (
    Receiver<SubscriberEvent>,
    switchyard_store::SubscriberHandle,
) {
    let s = store(redis_url);
    let (mut rx, handle) = Subscriber::spawn(s.client().clone(), s.keys().events_channel(), 256);
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(SubscriberEvent::Connected));
    (rx, handle)
}

fn cooling(conn: &str) -> CooldownWrite<'_> {
    CooldownWrite {
        conn,
        duration_ms: 60_000,
        backoff_level: 3,
        reason: FailureReason::RateLimitExceeded,
        terminal: None,
        last_error: "429",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_reset_closes_in_redis_and_is_announced() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(
        &config(&redis.url(), 2, 1, ""),
        &[("SWITCHYARD_COORDINATOR_ID", "coord-t")],
    );
    let (mut rx, _sub) = subscribe(&redis.url()).await;
    for _ in 0..2 {
        s.breaker_failure("p1", &PARAMS).await.unwrap();
    }
    let open = s.read_breakers(&["p1"]).await.unwrap();
    assert_eq!(open[0].phase, BreakerPhase::Open);

    let (status, body) = co
        .call("POST", "/api/cluster/providers/p1/reset", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["providers"], json!(["p1"]));
    assert_eq!(body["changed"], json!(["p1"]));
    let after = s.read_breakers(&["p1"]).await.unwrap();
    assert_eq!(after[0].phase, BreakerPhase::Closed);
    let (origin, event) = next_event(&mut rx, Duration::from_secs(5))
        .await
        .expect("event");
    assert_eq!(origin, "coordinator:coord-t");
    match event {
        WireEvent::BreakerTransition {
            provider,
            from,
            to,
            generation,
            ..
        } => {
            assert_eq!(
                (provider.as_str(), from, to),
                ("p1", BreakerPhase::Open, BreakerPhase::Closed)
            );
            assert_eq!(generation, after[0].generation);
        }
        other => panic!("unexpected {other:?}"),
    }
    // Idempotent: a second reset changes nothing.
    let (status, body) = co
        .call(
            "POST",
            "/api/cluster/reset",
            Some(json!({"provider": "p1"})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["changed"], json!([]));
    assert_eq!(
        s.read_breakers(&["p1"]).await.unwrap()[0].phase,
        BreakerPhase::Closed
    );
    // Reset all, and the health document shows every breaker closed.
    let (status, body) = co.call("POST", "/api/cluster/reset", None).await;
    assert_eq!((status, body["resetCount"].as_u64()), (200, Some(2)));
    let (status, body) = co
        .call("POST", "/api/cluster/reset", Some(json!({"provider": "x"})))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("provider_not_found"))
    );
    let (status, body) = co
        .call("POST", "/api/cluster/reset", Some(json!({"prov": "p1"})))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_clear_matches_the_node_result_shape_and_skips_terminal() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(&config(&redis.url(), 1, 4, ""), &[]);
    let (mut rx, _sub) = subscribe(&redis.url()).await;
    s.cooldown_extend(&cooling("p0-c0")).await.unwrap();
    s.lockout_extend("p0", "p0-c0", "m1", 60_000, 1, FailureReason::ModelCapacity)
        .await
        .unwrap();
    s.cooldown_extend(&cooling("p0-c1")).await.unwrap();
    s.terminal_set("p0-c1", TerminalStatus::CreditsExhausted)
        .await
        .unwrap();

    let (status, body) = co
        .call("POST", "/api/cluster/cooldowns", Some(json!({"all": true})))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cleared"], 1, "{body}");
    assert_eq!(body["unchanged"], 2);
    assert_eq!(body["skippedTerminal"], 1);
    assert_eq!(body["lockoutsCleared"], 1);
    assert_eq!(body["ok"], true);
    let recs = s.read_connections(&["p0-c0", "p0-c1"]).await.unwrap();
    assert_eq!((recs[0].remaining_ms, recs[0].backoff_level), (0, 0));
    assert_eq!(
        recs[1].terminal,
        Some(TerminalStatus::CreditsExhausted),
        "terminal is sticky"
    );
    assert!(s.read_lockouts("p0-c0").await.unwrap().is_empty());
    let mut kinds = Vec::new();
    while let Some((_, e)) = next_event(&mut rx, Duration::from_secs(2)).await {
        kinds.push(e.kind());
        if kinds.len() == 2 {
            break;
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["cooldown_cleared", "lockout_cleared"]);

    // Idempotent.
    let (_, body) = co
        .call(
            "POST",
            "/api/cluster/cooldowns",
            Some(json!({"connectionIds": ["p0-c0", "p0-c1"]})),
        )
        .await;
    assert_eq!(
        (body["cleared"].as_u64(), body["skippedTerminal"].as_u64()),
        (Some(0), Some(1))
    );
    let (status, body) = co
        .call(
            "POST",
            "/api/cluster/cooldowns",
            Some(json!({"connectionIds": ["nope"]})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("connection_not_found"))
    );
    let (status, _) = co
        .call("POST", "/api/cluster/cooldowns", Some(json!({})))
        .await;
    assert_eq!(status, 400);

    // Reinstate is the explicit way back.
    let (status, body) = co
        .call("POST", "/api/cluster/connections/p0-c1/reinstate", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["reinstated"].as_bool(),
            body["previousStatus"].as_str()
        ),
        (Some(true), Some("credits_exhausted"))
    );
    assert_eq!(
        s.read_connections(&["p0-c1"]).await.unwrap()[0].terminal,
        None
    );
    let found = loop {
        match next_event(&mut rx, Duration::from_secs(3)).await {
            Some((_, WireEvent::TerminalReinstated { connection })) => break connection,
            Some(_) => continue,
            None => panic!("no TerminalReinstated event"),
        }
    };
    assert_eq!(found, "p0-c1");
    let (_, body) = co
        .call("POST", "/api/cluster/connections/p0-c1/reinstate", None)
        .await;
    assert_eq!(body["reinstated"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockouts_leases_and_settings() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(&config(&redis.url(), 2, 2, ""), &[]);
    let (mut rx, _sub) = subscribe(&redis.url()).await;

    // Model lockouts: only the named model goes.
    for m in ["m1", "m2"] {
        s.lockout_extend("p0", "p0-c0", m, 60_000, 1, FailureReason::QuotaExhausted)
            .await
            .unwrap();
    }
    let (status, body) = co
        .call(
            "DELETE",
            "/api/cluster/model-cooldowns",
            Some(json!({"provider": "p0", "model": "m1"})),
        )
        .await;
    assert_eq!((status, body["removed"].as_u64()), (200, Some(1)), "{body}");
    let left: Vec<String> = s
        .read_lockouts("p0-c0")
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.model)
        .collect();
    assert_eq!(left, ["m2"]);
    let (_, body) = co
        .call(
            "DELETE",
            "/api/cluster/model-cooldowns",
            Some(json!({"all": true})),
        )
        .await;
    assert_eq!(
        (body["removed"].as_u64(), body["clearedAll"].as_bool()),
        (Some(1), Some(true))
    );
    let (status, _) = co
        .call(
            "DELETE",
            "/api/cluster/model-cooldowns",
            Some(json!({"model": "m"})),
        )
        .await;
    assert_eq!(status, 400);

    // Lease revoke: the holder's generation becomes stale for good.
    let keys = s.connection_lease_keys("p1-c1");
    let LeaseAcquire::Acquired(grant) = s
        .lease_acquire(&keys, "tok-123", "client", 60_000)
        .await
        .unwrap()
    else {
        panic!("lease not granted");
    };
    let (status, body) = co.call("DELETE", "/api/cluster/leases/p1-c1", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["revoked"].as_bool(), body["generation"].as_u64()),
        (Some(true), Some(grant.generation))
    );
    assert!(
        !s.lease_renew(&keys, "tok-123", grant.generation, 60_000)
            .await
            .unwrap()
    );
    let (_, body) = co.call("DELETE", "/api/cluster/leases/p1-c1", None).await;
    assert_eq!(body["revoked"], false);

    // Settings: validated as on a node, versioned, announced.
    let (status, body) = co
        .call(
            "PATCH",
            "/api/cluster/settings",
            Some(json!({"provider_breaker": {"apikey": {"failure_treshold": 2}}})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_settings")),
        "{body}"
    );
    assert_eq!(
        body["error"]["details"][0]["field"],
        "provider_breaker.apikey.failure_treshold"
    );
    assert!(
        s.settings_read().await.unwrap().is_none(),
        "a rejected patch writes nothing"
    );
    let (status, body) = co
        .call(
            "PATCH",
            "/api/cluster/settings",
            Some(json!({"provider_breaker": {"apikey": {"failure_threshold": 7}}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let version = body["version"].as_u64().unwrap();
    let (stored_version, doc) = s.settings_read().await.unwrap().unwrap();
    assert_eq!(stored_version, version);
    assert!(doc.contains("\"failure_threshold\":7"), "{doc}");
    let (_, got) = co.call("GET", "/api/cluster/settings", None).await;
    assert_eq!(
        got["persisted"]["provider_breaker"]["apikey"]["failure_threshold"],
        7
    );

    // Every change above was announced, ending with the settings version.
    let mut seen = Vec::new();
    while let Some((origin, e)) = next_event(&mut rx, Duration::from_secs(2)).await {
        assert!(origin.starts_with("coordinator:"));
        let done = matches!(e, WireEvent::SettingsVersion { version: v } if v == version);
        seen.push(e);
        if done {
            break;
        }
    }
    assert!(seen.iter().any(|e| matches!(e, WireEvent::LeaseEvent { kind: LeaseEventKind::Revoked, connection, .. } if connection == "p1-c1")), "{seen:?}");
    assert_eq!(
        seen.iter()
            .filter(|e| e.kind() == "lockout_cleared")
            .count(),
        2,
        "{seen:?}"
    );
    assert!(
        matches!(seen.last(), Some(WireEvent::SettingsVersion { .. })),
        "{seen:?}"
    );
}

/// Two settings patches of different fields sent to the coordinator at the same moment both
/// survive: each is a compare-and-set on the stored version, merged again on a conflict, not a
/// read-merge-write that overwrites whatever landed in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_settings_patches_through_the_coordinator_all_survive() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(&config(&redis.url(), 2, 2, ""), &[]);
    for round in 0..20u64 {
        let (apikey, oauth) = (10 + round, 40 + round);
        let (a, b) = tokio::join!(
            co.call(
                "PATCH",
                "/api/cluster/settings",
                Some(json!({"provider_breaker": {"apikey": {"failure_threshold": apikey}}})),
            ),
            co.call(
                "PATCH",
                "/api/cluster/settings",
                Some(json!({"provider_breaker": {"oauth": {"failure_threshold": oauth}}})),
            ),
        );
        assert_eq!((a.0, b.0), (200, 200), "round {round}: {} / {}", a.1, b.1);
        let (_, doc) = s.settings_read().await.unwrap().unwrap();
        let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let breaker = &doc["provider_breaker"];
        assert_eq!(
            (
                breaker["apikey"]["failure_threshold"].as_u64(),
                breaker["oauth"]["failure_threshold"].as_u64()
            ),
            (Some(apikey), Some(oauth)),
            "round {round}: a concurrent patch was lost: {doc}"
        );
    }
}
