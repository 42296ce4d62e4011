//! `GET` / `POST /api/rate-limits`: the request queues and the explicit rate-limit-protection
//! flag of each connection.
//!
//! `enabled` is the connection's explicit opt-in (the runtime toggle when one was set, else
//! `rate_limit_protection` from the config); `active` is whether its requests actually go
//! through the queue, which is also true for every apikey connection while
//! `request_queue.auto_enable_apikey_providers` is on. As specified, `enabled: false` does not
//! opt an auto-enabled connection out. The toggle lives in the connection's actor and lasts
//! until the node restarts; the config file is the durable place for it.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::ManagementKey;
use super::common::{ApiError, ApiResult, connection_idx, require_json};
use super::cooldowns::ask;
use super::views;
use crate::actors::SetRateLimitProtection;
use crate::reload::Rt;

/// `GET /api/rate-limits`.
pub async fn list(rt: Rt, _key: ManagementKey) -> ApiResult {
    let settings = rt.table.settings.load();
    let (mut queued, mut executing) = (0u64, 0u64);
    let rows: Vec<Value> = rt
        .table
        .connections
        .iter()
        .filter_map(|conn| {
            let provider = rt.table.providers.get(conn.provider_idx)?;
            let snapshot = conn.load();
            let q = conn.queue.settings();
            queued += u64::from(conn.queue.waiting());
            executing += u64::from(conn.queue.executing());
            Some(json!({
                "connectionId": &*conn.id,
                "provider": &*provider.id,
                "rateLimitProtection": snapshot
                    .rate_limit_protection
                    .unwrap_or(conn.config.rate_limit_protection),
                "enabled": snapshot
                    .rate_limit_protection
                    .unwrap_or(conn.config.rate_limit_protection),
                "configured": conn.config.rate_limit_protection,
                "runtimeOverride": snapshot.rate_limit_protection,
                "active": views::queue_active(provider, conn, &snapshot, &settings),
                "queued": conn.queue.waiting(),
                "executing": conn.queue.executing(),
                "limits": {
                    "requestsPerMinute": q.requests_per_minute,
                    "minTimeBetweenRequestsMs": q.min_time_between_requests_ms,
                    "concurrentRequests": q.concurrent_requests,
                    "maxWaitMs": q.max_wait_ms,
                    "executionMaxWaitMs": q.execution_max_wait_ms,
                    "maxQueueDepth": q.max_queue_depth,
                },
            }))
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({
        "connections": rows,
        "overview": {
            "queued": queued,
            "executing": executing,
            "autoEnableApikeyProviders": settings.request_queue.auto_enable_apikey_providers,
        },
    })))
}

/// Body of `POST /api/rate-limits`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Toggle {
    connection_id: String,
    enabled: bool,
}

/// `POST /api/rate-limits {connectionId, enabled}`.
pub async fn toggle(
    rt: Rt,
    key: ManagementKey,
    req: HttpRequest,
    payload: web::Payload,
) -> ApiResult {
    let body: Toggle = require_json(&req, payload).await?;
    let conn = rt
        .table
        .connections
        .get(connection_idx(&rt, &body.connection_id)?)
        .ok_or_else(|| ApiError::not_found("connection_not_found", "No such connection"))?;
    if ask(conn, SetRateLimitProtection(Some(body.enabled)))
        .await
        .is_none()
    {
        return Err(ApiError::actor_unavailable("the connection"));
    }
    tracing::warn!(
        connection = &*conn.id,
        key_id = %key.id,
        enabled = body.enabled,
        "rate-limit protection toggled by operator"
    );
    let settings = rt.table.settings.load();
    let active = rt
        .table
        .providers
        .get(conn.provider_idx)
        .is_some_and(|p| views::queue_active(p, conn, &conn.load(), &settings));
    Ok(HttpResponse::Ok().json(json!({
        "success": true,
        "connectionId": &*conn.id,
        "enabled": body.enabled,
        "active": active,
    })))
}
