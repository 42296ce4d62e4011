//! `GET /api/resilience/usage-wall`: the Claude OAuth usage wall of every connection that
//! opted in (`low_priority_mode`, `auto_limit_reset`): its low-priority lane, the blocks on
//! accepting it again, and what its session-limit reset remembers. In embedded mode the state
//! is this node's own (`scope: "node"`); in redis mode its deadlines are shared with every
//! node (`scope: "cluster"`).

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::auth::ManagementKey;
use super::common::ApiResult;
use crate::reload::Rt;
use crate::usage_wall::WallState;
use crate::usage_wall::reset::Held;

/// `GET /api/resilience/usage-wall`.
pub async fn list(rt: Rt, _key: ManagementKey) -> ApiResult {
    let now = rt.table.clock.epoch_ms();
    let scope = if rt.table.cluster.is_some() {
        "cluster"
    } else {
        "node"
    };
    let items: Vec<Value> = rt
        .table
        .connections
        .iter()
        .filter(|c| c.config.low_priority_mode || c.config.auto_limit_reset)
        .filter_map(|conn| {
            let provider = rt.table.providers.get(conn.provider_idx)?;
            let state = rt.table.usage_wall.snapshot(conn.idx)?;
            Some(item(&conn.id, &provider.id, conn, &state, now, scope))
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items, "generatedAt": now })))
}

fn item(
    id: &str,
    provider: &str,
    conn: &crate::actors::ConnHandle,
    s: &WallState,
    now: u64,
    scope: &str,
) -> Value {
    let active = |until: Option<u64>| until.filter(|&t| t > now);
    let lane = s.lane.filter(|l| l.until > now).map(|l| {
        json!({
            "acceptedAt": l.accepted_at,
            "resetAt": l.reset_at,
            "until": l.until,
            "remainingMs": l.until - now,
        })
    });
    let reset = &s.reset;
    json!({
        "connectionId": id,
        "provider": provider,
        "lowPriorityMode": conn.config.low_priority_mode,
        "autoLimitReset": conn.config.auto_limit_reset,
        "scope": scope,
        "lane": lane,
        "reacceptBlockedUntil": active(s.reaccept_blocked_until),
        "budgetExhaustedUntil": active(s.budget_exhausted_until),
        "lastEnd": s.last_end.map(|(reason, at)| json!({"reason": reason.label(), "at": at})),
        "reset": {
            "notBefore": active(reset.not_before),
            "held": reset.not_before.filter(|&t| t > now).and(reset.held).map(|h| match h {
                Held::NextAvailable => "next_available",
                Held::Backoff => "backoff",
            }),
            "pending": reset.pending,
            "last": reset.last.map(|(o, at)| json!({"outcome": o.label(), "at": at})),
        },
    })
}
