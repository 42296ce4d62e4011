//! `GET /api/resilience/tool-limits`: the tool limits this node learned from "too many
//! tools" answers, per provider and model. A request declaring more tools than a listed limit
//! skips that target (`tool_limit`). A limit lapses after its provider's `tool_limit_ttl_ms`
//! (`expires_in_ms`), or sooner when a request above it succeeds; it lives in memory (shared
//! through Redis in redis mode) and a config reload forgets it.

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::auth::ManagementKey;
use super::common::ApiResult;
use crate::reload::Rt;

/// `GET /api/resilience/tool-limits`.
pub async fn list(rt: Rt, _key: ManagementKey) -> ApiResult {
    let now = rt.table.clock.now();
    let items: Vec<Value> = rt
        .table
        .providers
        .iter()
        .flat_map(|p| {
            p.tool_limits(now).into_iter().map(|(model, l)| {
                let expires_in_ms = l.expires_at.saturating_sub(now);
                json!({
                    "provider": &*p.id,
                    "model": model,
                    "limit": l.limit,
                    "expires_in_ms": expires_in_ms,
                    "expires_at_unix_ms": rt.table.clock.epoch_ms().saturating_add(expires_in_ms),
                })
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}
