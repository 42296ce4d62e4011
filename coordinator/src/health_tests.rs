//! Unit tests of the health status rules.

use super::*;
use crate::read::NodeEntry;
use switchyard_shared::outcome::TerminalStatus;
use switchyard_store::{ConnRecord, NodeHeartbeat, SharedBreaker};

fn params() -> Params {
    Params {
        heartbeat_interval_ms: 1000,
        node_ttl_ms: 5000,
        redis_timeout_ms: 250,
        redis_url: "redis://x".into(),
    }
}

fn node(id: &str, version: &str, sent: u64) -> NodeEntry {
    NodeEntry {
        id: id.into(),
        heartbeat: Some(NodeHeartbeat {
            node_id: id.into(),
            version: version.into(),
            sent_at_ms: sent,
            ..NodeHeartbeat::default()
        }),
    }
}

fn catalogue() -> Catalogue {
    Catalogue {
        providers: vec!["p".into()],
        connections: vec![("c1".into(), "p".into()), ("c2".into(), "p".into())],
    }
}

#[test]
fn node_states_follow_heartbeat_age() {
    let p = params();
    assert_eq!(NodeState::of(Some(100), &p), NodeState::Up);
    assert_eq!(NodeState::of(Some(2500), &p), NodeState::Stale);
    assert_eq!(NodeState::of(Some(5000), &p), NodeState::Down);
    assert_eq!(NodeState::of(None, &p), NodeState::Down);
}

#[test]
fn healthy_cluster_is_ok_and_problems_degrade_it() {
    let now = 100_000;
    let mut snap = Snapshot {
        read_at_ms: now,
        redis_latency_ms: 1,
        nodes: vec![node("a", "1", now - 100), node("b", "1", now - 200)],
        connections: vec![ConnRecord::clean("c1"), ConnRecord::clean("c2")],
        ..Snapshot::default()
    };
    let co = CoordinatorView::default();
    let feed = Feed::default();
    let doc = document(&snap, &catalogue(), &params(), &co, &feed);
    assert_eq!(doc["status"], "ok", "{doc}");
    assert_eq!(doc["connections"].as_array().unwrap().len(), 0);

    snap.nodes.push(node("c", "2", now - 3000));
    snap.connections[0].terminal = Some(TerminalStatus::Banned);
    snap.breakers.push(SharedBreaker {
        provider: "p".into(),
        phase: BreakerPhase::Open,
        generation: 3,
        failure_count: 0,
        retry_after_ms: 900,
        open_cycles: 1,
        open_until_ms: 1_900,
        at_ms: 1_000,
    });
    let doc = document(&snap, &catalogue(), &params(), &co, &feed);
    assert_eq!(doc["status"], "degraded");
    let codes: Vec<&str> = doc["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    for code in [
        "nodes_stale",
        "version_skew",
        "connections_terminal",
        "breakers_open",
    ] {
        assert!(codes.contains(&code), "{code} in {codes:?}");
    }
    assert_eq!(doc["providers"][0]["breaker"]["state"], "open");
    assert_eq!(doc["providers"][0]["breaker"]["retryAfterMs"], 900);
    assert_eq!(doc["connections"][0]["status"], "terminal");
    assert_eq!(doc["versions"]["skew"], true);
}

#[test]
fn no_fresh_node_means_down() {
    let snap = Snapshot {
        read_at_ms: 50_000,
        nodes: vec![NodeEntry {
            id: "gone".into(),
            heartbeat: None,
        }],
        ..Snapshot::default()
    };
    let doc = document(
        &snap,
        &catalogue(),
        &params(),
        &CoordinatorView::default(),
        &Feed::default(),
    );
    assert_eq!(doc["status"], "down");
    assert_eq!(doc["nodes"][0]["state"], "down");
}
