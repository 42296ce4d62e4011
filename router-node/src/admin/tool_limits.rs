//! `GET /api/resilience/tool-limits`: the tool limits this node learned from "too many
//! tools" answers, per provider and model. A request declaring more tools than a listed limit
//! skips that target (`tool_limit`). The limits live in memory until the node restarts or its
//! config is reloaded.

use actix_web::HttpResponse;
use serde_json::{Value, json};

use super::auth::ManagementKey;
use super::common::ApiResult;
use crate::reload::Rt;

/// `GET /api/resilience/tool-limits`.
pub async fn list(rt: Rt, _key: ManagementKey) -> ApiResult {
    let items: Vec<Value> = rt
        .providers
        .iter()
        .flat_map(|p| {
            p.tool_limits()
                .into_iter()
                .map(|(model, limit)| json!({"provider": &*p.id, "model": model, "limit": limit}))
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({ "items": items })))
}
