//! `GET /api/resilience/queue-pauses`: the connections whose request queue is paused because
//! an upstream stated a short wait in a 429 body (a typed Google `RetryInfo` within the
//! queue's `max_wait_ms`). Queued requests go out when the pause ends.

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::auth::ManagementKey;
use super::common::{ApiResult, Now};
use crate::reload::Rt;

/// `GET /api/resilience/queue-pauses`.
pub async fn list(rt: Rt, _key: ManagementKey) -> ApiResult {
    let now = Now::read(&rt);
    let items: Vec<Value> = rt
        .table
        .connections
        .iter()
        .filter_map(|conn| {
            let until = conn.queue.paused_until(now.mono)?;
            let provider = rt.table.providers.get(conn.provider_idx)?;
            Some(json!({
                "connectionId": &*conn.id,
                "provider": &*provider.id,
                "pausedUntil": now.epoch_of(until),
                "remainingMs": until - now.mono,
            }))
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items, "generatedAt": now.epoch })))
}
