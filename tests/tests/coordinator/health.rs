//! Black-box tests of `/api/cluster/health` and the read endpoints: a real
//! `switchyard-coordinator` against a real Redis seeded with synthetic cluster state (node
//! heartbeats, breakers, cooldowns, terminal states, lockouts, leases written with the store's
//! own operations), including the latency budget for 50 nodes and 10,000 connections, the
//! management bearer rules, and the `status` command's table.
//!
//! Build the binary first (`cargo build -p switchyard-coordinator`; `cargo nextest run
//! --workspace` does).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use crate::support::coordinator::{CLIENT_KEY, Coordinator, config, heartbeat, store};
use serde_json::Value;
use switchyard_shared::outcome::{FailureReason, TerminalStatus};
use switchyard_store::{BreakerParams, CooldownWrite};
use switchyard_tests::harness::workspace_bin;
use switchyard_tests::redis_server::RedisServer;

const PARAMS: BreakerParams = BreakerParams {
    failure_threshold: 3,
    degradation_at: 1,
    reset_timeout_ms: 30_000,
    max_reset_timeout_ms: 120_000,
    backoff_escalation_count: 0,
};

fn cooldown(conn: &str, ms: u64, terminal: Option<TerminalStatus>) -> CooldownWrite<'_> {
    CooldownWrite {
        conn,
        duration_ms: ms,
        backoff_level: 2,
        reason: FailureReason::RateLimitExceeded,
        terminal,
        last_error: "429",
    }
}

fn codes(doc: &Value) -> Vec<String> {
    doc["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_covers_50_nodes_and_10000_connections_in_bounded_time() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    // 20 providers x 500 connections = 10,000 connections.
    // Long heartbeat intervals: seeding takes a while on a busy machine, and the synthetic
    // heartbeats must not turn stale before the first read.
    let cfg = config(&redis.url(), 20, 500, "")
        .replace(
            "heartbeat_interval_ms = 500",
            "heartbeat_interval_ms = 5000",
        )
        .replace("node_ttl_ms = 3000", "node_ttl_ms = 60000");
    let co = Coordinator::start(&cfg, &[]);

    for i in 0..48 {
        heartbeat(&s, &format!("node-{i:02}"), "0.1.0", 100, 60_000).await;
    }
    heartbeat(&s, "node-48", "0.2.0", 100, 60_000).await; // version skew
    heartbeat(&s, "node-49", "0.1.0", 30_000, 60_000).await; // stale: missed beats
    for _ in 0..3 {
        s.breaker_failure("p3", &PARAMS).await.unwrap();
    }
    for i in 0..300 {
        let conn = format!("p{}-c{}", i % 20, i);
        s.cooldown_extend(&cooldown(&conn, 60_000, None))
            .await
            .unwrap();
    }
    for i in 0..20 {
        let conn = format!("p{i}-c499");
        s.terminal_set(&conn, TerminalStatus::Banned).await.unwrap();
    }
    for i in 0..50 {
        let conn = format!("p5-c{}", 400 + i);
        s.lockout_extend(
            "p5",
            &conn,
            "gpt-x",
            45_000,
            2,
            FailureReason::QuotaExhausted,
        )
        .await
        .unwrap();
    }
    for i in 0..10 {
        let conn = format!("p7-c{i}");
        let keys = s.connection_lease_keys(&conn);
        s.lease_acquire(&keys, &format!("secret-owner-token-{i}"), "client", 60_000)
            .await
            .unwrap();
    }

    let doc = co.health().await;
    assert_eq!(doc["status"], "degraded", "{doc:#}");
    let reasons = codes(&doc);
    for code in [
        "version_skew",
        "nodes_stale",
        "breakers_open",
        "connections_terminal",
    ] {
        assert!(
            reasons.contains(&code.to_owned()),
            "{code} missing from {reasons:?}"
        );
    }
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 50);
    assert_eq!(doc["summary"]["nodes"]["up"], 49);
    assert_eq!(doc["summary"]["nodes"]["stale"], 1);
    assert_eq!(doc["summary"]["connections"]["total"], 10_000);
    assert_eq!(doc["summary"]["connections"]["cooling"], 300);
    assert_eq!(doc["summary"]["connections"]["terminal"], 20);
    assert_eq!(doc["summary"]["connections"]["withLockouts"], 50);
    assert_eq!(doc["versions"]["skew"], true);
    let p3 = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "p3")
        .unwrap();
    assert_eq!(p3["breaker"]["state"], "open");
    assert!(p3["breaker"]["retryAfterMs"].as_u64().unwrap() > 20_000);
    let conns = doc["connections"].as_array().unwrap();
    assert_eq!(
        conns[0]["status"], "terminal",
        "terminal connections are listed first"
    );
    let locked = conns.iter().find(|c| c["id"] == "p5-c400").unwrap();
    assert_eq!(locked["lockouts"][0]["model"], "gpt-x");
    assert_eq!(doc["leases"].as_array().unwrap().len(), 10);
    let lease = &doc["leases"][0];
    assert_eq!(lease["ownerHashPrefix"].as_str().unwrap().len(), 12);
    let text = doc.to_string();
    assert!(!text.contains("secret-owner-token"), "a lease token leaked");
    let node = &doc["nodes"][0];
    for field in [
        "id",
        "version",
        "address",
        "lastHeartbeatAgeMs",
        "inflight",
        "state",
    ] {
        assert!(!node[field].is_null(), "node field {field}: {node}");
    }

    // docs/coordinator.md states a 100 ms budget, measured on a quiet machine. On a shared
    // 2-core machine the answer is real CPU work that slows with the load, so the test holds
    // only generous bounds (5x and 4x the documented figures) and prints what it measured.
    let mut times = Vec::new();
    for _ in 0..10 {
        // Spaced samples (pacing of the measurement, not a wait for state).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let t = Instant::now();
        let (status, _) = co.call("GET", "/api/cluster/health", None).await;
        assert_eq!(status, 200);
        times.push(t.elapsed());
    }
    times.sort();
    eprintln!("health latencies: {times:?}");
    // The snapshot behind the answers: a full read of 10,000 connections, bounded generously.
    let doc = co.health().await;
    eprintln!("snapshot: {}", doc["snapshot"]);
    assert!(
        doc["snapshot"]["readMs"].as_u64().unwrap() < 2000,
        "{}",
        doc["snapshot"]
    );
    assert!(
        doc["snapshot"]["ageMs"].as_u64().unwrap() < 3000,
        "{}",
        doc["snapshot"]
    );
    assert!(times[0] < Duration::from_millis(500), "best {:?}", times[0]);
    assert!(
        times[times.len() / 2] < Duration::from_millis(1000),
        "median {:?}",
        times[times.len() / 2]
    );
    assert!(times.iter().all(|t| *t < Duration::from_secs(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_rules_match_the_node() {
    let redis = RedisServer::start().unwrap();
    let co = Coordinator::start(&config(&redis.url(), 1, 1, ""), &[]);
    let (status, body) = co.call_as(None, "GET", "/api/cluster/health", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("missing_management_key"))
    );
    let (status, body) = co
        .call_as(Some("wrong"), "GET", "/api/cluster/nodes", None)
        .await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (401, Some("authentication_error"))
    );
    let (status, body) = co
        .call_as(Some(CLIENT_KEY), "GET", "/api/cluster/health", None)
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("client_key_not_allowed"))
    );
    let (status, _) = co.call_as(None, "GET", "/healthz", None).await;
    assert_eq!(status, 200);
    let (status, body) = co.call("GET", "/api/cluster/providers/nope", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("provider_not_found"))
    );
    let (status, body) = co.call("PUT", "/api/cluster/health", None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );
    let (status, text) = co.call_as(None, "GET", "/metrics", None).await;
    assert_eq!(status, 200);
    assert!(
        text.as_str()
            .unwrap()
            .contains("switchyard_coordinator_leader")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_reads_as_cluster_down() {
    let mut redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(&config(&redis.url(), 1, 2, ""), &[]);
    heartbeat(&s, "n1", "0.1.0", 0, 60_000).await;
    let doc = co.health().await;
    assert_eq!(doc["status"], "ok", "{doc:#}");
    assert_eq!(doc["redis"]["state"], "up");
    redis.kill();
    // Answers come from a snapshot at most a few seconds old; the next read sees Redis gone.
    let doc = crate::support::eventually(Duration::from_secs(8), || async {
        let doc = co.health().await;
        (doc["status"] == "down").then_some(doc)
    })
    .await
    .expect("status turns down once Redis is gone");
    assert_eq!(codes(&doc), ["redis_unreachable"]);
    let (status, _) = co.call_as(None, "GET", "/readyz", None).await;
    assert_eq!(status, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detail_endpoints_and_the_status_command() {
    let redis = RedisServer::start().unwrap();
    let s = store(&redis.url());
    let co = Coordinator::start(&config(&redis.url(), 2, 2, ""), &[]);
    heartbeat(&s, "n1", "0.1.0", 0, 60_000).await;
    s.cooldown_extend(&cooldown("p1-c0", 30_000, None))
        .await
        .unwrap();
    s.lockout_extend("p1", "p1-c0", "m1", 20_000, 1, FailureReason::ModelCapacity)
        .await
        .unwrap();
    s.permits_acquire("p1-c0", "n1", 2, 4, 30_000)
        .await
        .unwrap();

    let (status, conn) = co.call("GET", "/api/cluster/connections/p1-c0", None).await;
    assert_eq!(status, 200, "{conn}");
    assert_eq!(conn["status"], "cooling");
    assert_eq!(conn["backoffLevel"], 2);
    assert_eq!(conn["lockouts"][0]["model"], "m1");
    assert_eq!(conn["permits"][0]["node"], "n1");
    let (status, p) = co.call("GET", "/api/cluster/providers/p1", None).await;
    assert_eq!(status, 200);
    assert_eq!(p["breaker"]["state"], "closed");
    assert_eq!(p["nodeViews"].as_object().unwrap().len(), 0);
    assert_eq!(p["connections"].as_array().unwrap().len(), 2);
    let (status, nodes) = co.call("GET", "/api/cluster/nodes", None).await;
    assert_eq!(status, 200);
    assert_eq!(nodes["nodes"][0]["id"], "n1");

    // `status` prints the table and exits 0 for ok... here 1: a connection is cooling but the
    // cluster is ok unless something degrades it, so check the document's own status.
    let doc = co.health().await;
    let expected = match doc["status"].as_str().unwrap() {
        "ok" => 0,
        "degraded" => 1,
        _ => 2,
    };
    let out = std::process::Command::new(workspace_bin("switchyard-coordinator"))
        .args(["status", "--url", &co.url("")])
        .env(
            "SWITCHYARD_MANAGEMENT_KEY",
            crate::support::coordinator::MGMT_KEY,
        )
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(expected),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.starts_with("CLUSTER "), "{table}");
    assert!(table.contains("p1-c0") && table.contains("m1"), "{table}");
    let out = std::process::Command::new(workspace_bin("switchyard-coordinator"))
        .args(["status", "--json", "--url", &co.url("")])
        .env(
            "SWITCHYARD_MANAGEMENT_KEY",
            crate::support::coordinator::MGMT_KEY,
        )
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["nodes"][0]["id"], "n1");
    let out = std::process::Command::new(workspace_bin("switchyard-coordinator"))
        .args(["status", "--url", &co.url("")])
        .env("SWITCHYARD_MANAGEMENT_KEY", "wrong")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}
