//! The rows of the health document: one node, one connection, one lockout. Shared by the
//! health document and the detail endpoints, so a row looks the same everywhere.

use serde_json::{Value, json};
use switchyard_store::{ConnRecord, LockoutRecord};

use crate::node_state::{NodeState, Params};
use crate::read::NodeEntry;

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
