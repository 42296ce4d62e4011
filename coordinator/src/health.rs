//! The cluster health document (`GET /api/cluster/health`), built from a [`Snapshot`].
//!
//! Pure: the snapshot, the reader's clock and the event memory go in, JSON comes out, so the
//! status rules are tested without Redis. The document lists every node and provider but only
//! the connections worth an operator's look (cooling, terminal, backed off, locked or leased),
//! capped at [`MAX_ROWS`]; counts cover all of them. No token or owner hash ever appears, only
//! the 12-digit owner hash prefix the store hands out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};
use switchyard_shared::Millis;
use switchyard_shared::store::{ConnRecord, LockoutRecord};
use switchyard_shared::wire::BreakerPhase;

use crate::feed::Feed;
use crate::read::{Catalogue, NodeEntry, Snapshot};

/// Most connection rows (and lease rows) one document carries.
pub const MAX_ROWS: usize = 1000;
/// Redis round trips slower than this fraction of the command timeout degrade the cluster.
const SLOW_REDIS_FRACTION: u64 = 2;

/// The numbers the rules need, from `[cluster]`.
#[derive(Debug, Clone)]
pub struct Params {
    pub heartbeat_interval_ms: Millis,
    pub node_ttl_ms: Millis,
    pub redis_timeout_ms: Millis,
    /// Redacted.
    pub redis_url: String,
}

/// What this replica knows about coordinator leadership.
#[derive(Debug, Clone, Default)]
pub struct CoordinatorView {
    pub id: String,
    pub leader: bool,
    pub generation: Option<u64>,
    pub started_at_ms: u64,
}

/// A node's state by heartbeat age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Heartbeat within two intervals.
    Up,
    /// Missed beats, but younger than `node_ttl_ms`.
    Stale,
    /// Older than `node_ttl_ms`, or its key is gone.
    Down,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Stale => "stale",
            Self::Down => "down",
        }
    }

    /// Pure: the state of a heartbeat `age_ms` old (`None`: no heartbeat at all).
    pub fn of(age_ms: Option<Millis>, p: &Params) -> Self {
        match age_ms {
            None => Self::Down,
            Some(age) if age >= p.node_ttl_ms => Self::Down,
            Some(age) if age > p.heartbeat_interval_ms.saturating_mul(2) => Self::Stale,
            Some(_) => Self::Up,
        }
    }
}

fn phase_str(p: BreakerPhase) -> &'static str {
    match p {
        BreakerPhase::Closed => "closed",
        BreakerPhase::Degraded => "degraded",
        BreakerPhase::Open => "open",
        BreakerPhase::HalfOpen => "half_open",
    }
}

fn reason(code: &str, message: String) -> Value {
    json!({"code": code, "message": message})
}

/// The document when Redis could not be read.
pub fn unreachable(error: &str, p: &Params, co: &CoordinatorView, now_ms: u64) -> Value {
    json!({
        "status": "down",
        "reasons": [reason("redis_unreachable", format!("Redis did not answer: {error}"))],
        "generatedAt": now_ms,
        "redis": {"state": "down", "url": p.redis_url, "latencyMs": null, "error": error},
        "coordinator": coordinator(co, None),
        "nodes": [],
        "providers": [],
        "connections": [],
        "leases": [],
        "versions": {"skew": false, "byVersion": {}},
        "summary": {},
    })
}

fn coordinator(co: &CoordinatorView, snap: Option<&Snapshot>) -> Value {
    let leader = snap.and_then(|s| s.leader.as_ref());
    json!({
        "id": co.id,
        "leader": co.leader,
        "generation": co.generation,
        "leaderId": leader.map(|l| l.api_key_id.clone()),
        "leaderGeneration": leader.map(|l| l.generation),
        "leaseRemainingMs": leader.map(|l| l.remaining_ms),
        "startedAt": co.started_at_ms,
    })
}

/// Builds the health document.
pub fn document(
    snap: &Snapshot,
    catalogue: &Catalogue,
    p: &Params,
    co: &CoordinatorView,
    feed: &Feed,
) -> Value {
    let now = snap.read_at_ms;
    let mut reasons = Vec::new();
    let mut degraded = false;

    // Nodes.
    let nodes: Vec<(NodeState, Value)> = snap.nodes.iter().map(|n| node_row(n, p, now)).collect();
    let count = |s: NodeState| nodes.iter().filter(|(st, _)| *st == s).count();
    let (up, stale, down) = (
        count(NodeState::Up),
        count(NodeState::Stale),
        count(NodeState::Down),
    );
    let mut down_status = false;
    if up == 0 {
        down_status = true;
        reasons.push(reason(
            "no_live_nodes",
            "No node has sent a fresh heartbeat".to_owned(),
        ));
    }
    if stale > 0 {
        degraded = true;
        reasons.push(reason(
            "nodes_stale",
            format!("{stale} node(s) missed heartbeats"),
        ));
    }
    if down > 0 {
        degraded = true;
        reasons.push(reason("nodes_down", format!("{down} node(s) are down")));
    }

    // Version skew among nodes that are not down.
    let mut by_version: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in &snap.nodes {
        if let Some(hb) = &n.heartbeat
            && NodeState::of(Some(now.saturating_sub(hb.sent_at_ms)), p) != NodeState::Down
        {
            by_version
                .entry(hb.version.clone())
                .or_default()
                .push(n.id.clone());
        }
    }
    let skew = by_version.len() > 1;
    if skew {
        degraded = true;
        let list: Vec<&str> = by_version.keys().map(String::as_str).collect();
        reasons.push(reason(
            "version_skew",
            format!("Nodes run different versions: {}", list.join(", ")),
        ));
    }

    // Redis.
    let slow = snap.redis_latency_ms > p.redis_timeout_ms / SLOW_REDIS_FRACTION;
    if slow {
        degraded = true;
        reasons.push(reason(
            "redis_slow",
            format!("Redis answered in {} ms", snap.redis_latency_ms),
        ));
    }

    // Connections and lockouts.
    let mut lockouts_by_conn: HashMap<&str, Vec<&LockoutRecord>> = HashMap::new();
    for l in &snap.lockouts {
        lockouts_by_conn.entry(l.conn.as_str()).or_default().push(l);
    }
    let leased: BTreeSet<&str> = snap.leases.iter().map(|l| l.name.as_str()).collect();
    let provider_of: HashMap<&str, &str> = catalogue
        .connections
        .iter()
        .map(|(c, p)| (c.as_str(), p.as_str()))
        .collect();
    let mut per_provider: HashMap<&str, [usize; 3]> = HashMap::new(); // total, cooling, terminal
    let mut rows: Vec<(u8, Millis, Value)> = Vec::new();
    let (mut cooling, mut terminal, mut locked) = (0, 0, 0);
    for c in &snap.connections {
        let provider = provider_of.get(c.conn.as_str()).copied().unwrap_or("");
        let entry = per_provider.entry(provider).or_default();
        entry[0] += 1;
        let lockouts = lockouts_by_conn
            .get(c.conn.as_str())
            .map_or(&[][..], Vec::as_slice);
        let status = conn_status(c);
        match status {
            "terminal" => {
                terminal += 1;
                entry[2] += 1;
            }
            "cooling" => {
                cooling += 1;
                entry[1] += 1;
            }
            _ => {}
        }
        if !lockouts.is_empty() {
            locked += 1;
        }
        let interesting = status != "active"
            || c.backoff_level > 0
            || !lockouts.is_empty()
            || leased.contains(c.conn.as_str());
        if interesting {
            let rank = match status {
                "terminal" => 0,
                "cooling" => 1,
                _ => 2,
            };
            rows.push((
                rank,
                c.remaining_ms,
                connection_row(c, provider, lockouts, now),
            ));
        }
    }
    if terminal > 0 {
        degraded = true;
        reasons.push(reason(
            "connections_terminal",
            format!("{terminal} connection(s) need attention (banned, expired or out of credits)"),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let rows_total = rows.len();
    let conn_rows: Vec<Value> = rows.into_iter().take(MAX_ROWS).map(|r| r.2).collect();

    // Providers.
    let mut open = Vec::new();
    let providers: Vec<Value> = catalogue
        .providers
        .iter()
        .map(|id| {
            let b = snap.breakers.iter().find(|b| &b.provider == id);
            let phase = b.map_or(BreakerPhase::Closed, |b| b.phase);
            if phase != BreakerPhase::Closed {
                open.push(id.clone());
            }
            let [total, cool, term] = per_provider.get(id.as_str()).copied().unwrap_or_default();
            let unavailable = total > 0 && cool + term == total;
            if unavailable {
                degraded = true;
                reasons.push(reason(
                    "provider_unavailable",
                    format!("Every connection of {id} is cooling down or terminal"),
                ));
            }
            let views: BTreeMap<&str, &str> = snap
                .nodes
                .iter()
                .filter_map(|n| {
                    let hb = n.heartbeat.as_ref()?;
                    Some((n.id.as_str(), hb.breakers.get(id)?.as_str()))
                })
                .collect();
            json!({
                "id": id,
                "breaker": {
                    "state": phase_str(phase),
                    "generation": b.map_or(0, |b| b.generation),
                    "failureCount": b.map_or(0, |b| b.failure_count),
                    "retryAfterMs": b.map_or(0, |b| b.retry_after_ms),
                    "openCycles": b.map_or(0, |b| b.open_cycles),
                },
                "lastTransitions": feed.transitions(id),
                "nodeViews": views,
                "connections": {"total": total, "cooling": cool, "terminal": term},
                "unavailable": unavailable,
            })
        })
        .collect();
    if !open.is_empty() {
        degraded = true;
        reasons.push(reason(
            "breakers_open",
            format!("Breaker not closed for: {}", open.join(", ")),
        ));
    }

    let leases: Vec<Value> = snap
        .leases
        .iter()
        .take(MAX_ROWS)
        .map(|l| {
            json!({
                "connection": l.name,
                "ownerHashPrefix": l.owner_hash_prefix,
                "apiKeyId": l.api_key_id,
                "generation": l.generation,
                "remainingMs": l.remaining_ms,
                "expiresAt": now.saturating_add(l.remaining_ms),
            })
        })
        .collect();

    let status = if down_status {
        "down"
    } else if degraded {
        "degraded"
    } else {
        "ok"
    };
    json!({
        "status": status,
        "reasons": reasons,
        "generatedAt": now,
        "redis": {
            "state": if slow { "slow" } else { "up" },
            "url": p.redis_url,
            "latencyMs": snap.redis_latency_ms,
        },
        "coordinator": coordinator(co, Some(snap)),
        "settingsVersion": snap.settings_version,
        "nodes": nodes.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "providers": providers,
        "connections": conn_rows,
        "leases": leases,
        "versions": {"skew": skew, "byVersion": by_version},
        "summary": {
            "nodes": {"total": snap.nodes.len(), "up": up, "stale": stale, "down": down},
            "providers": {"total": catalogue.providers.len(), "breakersNotClosed": open.len()},
            "connections": {
                "total": snap.connections.len(),
                "cooling": cooling,
                "terminal": terminal,
                "withLockouts": locked,
                "listed": conn_rows_len(rows_total),
                "capped": rows_total > MAX_ROWS,
            },
            "leases": snap.leases.len(),
        },
        "recentEvents": feed.recent(20),
    })
}

fn conn_rows_len(total: usize) -> usize {
    total.min(MAX_ROWS)
}

/// `terminal`, `cooling` or `active`.
pub fn conn_status(c: &ConnRecord) -> &'static str {
    if c.terminal.is_some() {
        "terminal"
    } else if c.remaining_ms > 0 {
        "cooling"
    } else {
        "active"
    }
}

/// One node row with its state.
pub fn node_row(n: &NodeEntry, p: &Params, now: u64) -> (NodeState, Value) {
    let Some(hb) = &n.heartbeat else {
        let v = json!({"id": n.id, "state": "down", "heartbeat": false});
        return (NodeState::Down, v);
    };
    let age = now.saturating_sub(hb.sent_at_ms);
    let state = NodeState::of(Some(age), p);
    let v = json!({
        "id": n.id,
        "state": state.as_str(),
        "heartbeat": true,
        "version": hb.version,
        "address": hb.client_address,
        "adminAddress": hb.admin_address,
        "lastHeartbeatAgeMs": age,
        "inflight": hb.inflight,
        "draining": hb.draining,
        "redisState": hb.redis_state,
        "uptimeMs": hb.uptime_ms,
        "settingsVersion": hb.settings_version,
        "connections": hb.connections,
        "breakers": hb.breakers,
    });
    (state, v)
}

/// One connection row.
pub fn connection_row(
    c: &ConnRecord,
    provider: &str,
    lockouts: &[&LockoutRecord],
    now: u64,
) -> Value {
    json!({
        "id": c.conn,
        "provider": provider,
        "status": conn_status(c),
        "terminal": c.terminal.map(|t| t.as_str()),
        "remainingMs": c.remaining_ms,
        "cooldownUntil": (c.remaining_ms > 0).then(|| now.saturating_add(c.remaining_ms)),
        "backoffLevel": c.backoff_level,
        "reason": c.reason.map(|r| r.as_str()),
        "lockouts": lockouts.iter().map(|l| lockout_row(l)).collect::<Vec<_>>(),
    })
}

pub fn lockout_row(l: &LockoutRecord) -> Value {
    json!({
        "provider": l.provider,
        "connection": l.conn,
        "model": l.model,
        "remainingMs": l.remaining_ms,
        "failureCount": l.failure_count,
        "reason": l.reason.map(|r| r.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_shared::outcome::TerminalStatus;
    use switchyard_shared::store::{NodeHeartbeat, SharedBreaker};

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
}
