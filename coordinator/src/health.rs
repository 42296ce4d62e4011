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
use switchyard_shared::wire::BreakerPhase;
use switchyard_store::LockoutRecord;

use crate::feed::Feed;
use crate::node_state::{NodeState, Params};
use crate::read::{Catalogue, Snapshot};
pub use crate::rows::{conn_status, connection_row, lockout_row, node_row};

/// Most connection rows (and lease rows) one document carries.
pub const MAX_ROWS: usize = 1000;
/// Redis round trips slower than this fraction of the command timeout degrade the cluster.
const SLOW_REDIS_FRACTION: u64 = 2;

/// What this replica knows about coordinator leadership.
#[derive(Debug, Clone, Default)]
pub struct CoordinatorView {
    pub id: String,
    pub leader: bool,
    pub generation: Option<u64>,
    pub started_at_ms: u64,
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
#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
